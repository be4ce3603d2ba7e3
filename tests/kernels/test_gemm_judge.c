/*
 * test_gemm_judge.c — the judge of carve_gemm's GPU test (gemm_judge.h)
 * on outputs made on the host, no device (suite unit).
 *
 *  - the exact product reads every layout right: op(A) and op(B) for both
 *    storage orders and all four transpose pairs, padded leading dimensions
 *    holding NaN (a read of padding poisons the sum), both input types;
 *  - the two cases an H100 failed (64 x 1000 x 4097, k one past 64 whole k
 *    tiles; column-major NT f16 -> f16 with alpha 1.5, row-major TN
 *    bf16 -> f32 with beta 0.5, leading dimensions 72, 1008, 72 and 72,
 *    1008, 1008): a reference without the last k term and carve exact is
 *    the reference's fault (every disagreement counted ref_off and
 *    ref_tail, none bad); carve without the last k term and the reference
 *    exact fails; both without it (a fault both libraries share) is caught
 *    by the spot checks; both exact passes with nothing to say;
 *  - changed padding, NaN in the box, and disagreements past the budget of
 *    exact multiply-adds count as failures.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_judge.h"
#include "test_util.h"

static test_rng rng;

static int rand_j(void) { return (int)test_rng_below(&rng, 129) - 64; }

static uint16_t in_bits(int bf16, float v) { return bf16 ? f2bf(v) : f2h(v); }

/* A call with random inputs j/64 in the caller's layout, padding NaN. */
typedef struct {
    gj_call c;
    uint16_t *A, *B;
    unsigned char *C0;
    size_t csz;
} made;

static made make_call(int row, int ta, int tb, int m, int n, int k, int bf16, int ctype, float alpha, float beta,
                      int lda, int ldb, int ldc) {
    made x;
    memset(&x, 0, sizeof x);
    const int a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
    /* stored: row-major rows x cols with ld per row; column-major cols x rows */
    const int a_lines = row ? a_rows : a_cols, a_len = row ? a_cols : a_rows;
    const int b_lines = row ? b_rows : b_cols, b_len = row ? b_cols : b_rows;
    const int c_lines = row ? m : n, c_len = row ? n : m;
    x.A = malloc(sizeof(uint16_t) * (size_t)a_lines * lda);
    x.B = malloc(sizeof(uint16_t) * (size_t)b_lines * ldb);
    x.csz = (size_t)c_lines * ldc;
    const size_t cel = ctype == GJ_F32 ? 4 : 2;
    x.C0 = malloc(x.csz * cel);
    if (!x.A || !x.B || !x.C0) {
        fprintf(stderr, "FAIL: host allocation\n");
        exit(1);
    }
    for (int l = 0; l < a_lines; l++)
        for (int e = 0; e < lda; e++)
            x.A[(size_t)l * lda + e] = e < a_len ? in_bits(bf16, (float)rand_j() / 64.f) : 0xFFFF;
    for (int l = 0; l < b_lines; l++)
        for (int e = 0; e < ldb; e++)
            x.B[(size_t)l * ldb + e] = e < b_len ? in_bits(bf16, (float)rand_j() / 64.f) : 0xFFFF;
    for (int l = 0; l < c_lines; l++)
        for (int e = 0; e < ldc; e++) {
            const size_t idx = (size_t)l * ldc + e;
            const float v = e < c_len && beta != 0.f ? (float)rand_j() / 64.f : NAN;
            if (cel == 4)
                memcpy(x.C0 + 4 * idx, &v, 4);
            else {
                const uint16_t h = e < c_len && beta != 0.f ? (ctype == GJ_BF16 ? f2bf(v) : f2h(v)) : 0xFFFF;
                memcpy(x.C0 + 2 * idx, &h, 2);
            }
        }
    gj_call c = {row, ta, tb, m, n, k, bf16, ctype, alpha, beta, x.A, x.B, lda, ldb, ldc, x.C0, 0};
    x.c = c;
    return x;
}

static void free_call(made *x) {
    free(x->A);
    free(x->B);
    free(x->C0);
}

/* Every layout and input type: gj_dot and gj_ops_dot against the product
 * of op(A) and op(B) read back element by element through the storage
 * rules written out again here. */
static void check_layouts(void) {
    const int m = 5, n = 7, k = 67;
    for (int lay = 0; lay < 8; lay++)
        for (int bf16 = 0; bf16 < 2; bf16++) {
            const int row = !(lay & 4), ta = (lay >> 1) & 1, tb = lay & 1;
            const int a_len = row ? (ta ? m : k) : (ta ? k : m), b_len = row ? (tb ? k : n) : (tb ? n : k);
            made x = make_call(row, ta, tb, m, n, k, bf16, GJ_F32, 1.f, 0.f, a_len + 5, b_len + 3, (row ? n : m) + 1);
            gj_ops ops = gj_ops_make(&x.c);
            CHECK(ops.a != NULL && ops.b != NULL);
            long wrong = 0;
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) {
                    double s = 0;
                    for (int kk = 0; kk < k; kk++) {
                        /* A(i,kk): row-major N at i*lda+kk, T at kk*lda+i; column-major the other way round */
                        const size_t ai = (row != ta) ? (size_t)i * x.c.lda + kk : (size_t)kk * x.c.lda + i;
                        const size_t bi = (row != tb) ? (size_t)kk * x.c.ldb + j : (size_t)j * x.c.ldb + kk;
                        const float av = bf16 ? bf2f(x.A[ai]) : h2f(x.A[ai]), bv = bf16 ? bf2f(x.B[bi]) : h2f(x.B[bi]);
                        s += (double)av * (double)bv;
                    }
                    wrong += !(gj_dot(&x.c, i, j) == s) || !(gj_ops_dot(&x.c, &ops, i, j) == s) || isnan(s);
                }
            CHECK(wrong == 0);
            if (wrong)
                fprintf(stderr, "  layout %d, %s: %ld of %d dot products wrong\n", lay, bf16 ? "bf16" : "f16", wrong,
                        m * n);
            free(ops.a);
            free(ops.b);
            free_call(&x);
        }
}

/* Outputs for a call: every element exact, or without the last k term. */
typedef struct {
    float *ref_exact, *ref_lost;     /* fp32, as cuBLAS returns them */
    unsigned char *out_exact, *out_lost; /* the output type, padding = C0 */
} outputs;

static void store(const gj_call *c, unsigned char *buf, size_t idx, float v) {
    if (c->c_type == GJ_F32) {
        memcpy(buf + 4 * idx, &v, 4);
        return;
    }
    const uint16_t h = c->c_type == GJ_BF16 ? f2bf(v) : f2h_rne(v);
    memcpy(buf + 2 * idx, &h, 2);
}

static outputs make_outputs(const made *x) {
    const gj_call *c = &x->c;
    const size_t cel = gj_cel(c);
    outputs o;
    o.ref_exact = malloc(sizeof(float) * x->csz);
    o.ref_lost = malloc(sizeof(float) * x->csz);
    o.out_exact = malloc(x->csz * cel);
    o.out_lost = malloc(x->csz * cel);
    if (!o.ref_exact || !o.ref_lost || !o.out_exact || !o.out_lost) {
        fprintf(stderr, "FAIL: host allocation\n");
        exit(1);
    }
    memcpy(o.out_exact, x->C0, x->csz * cel);
    memcpy(o.out_lost, x->C0, x->csz * cel);
    for (size_t i = 0; i < x->csz; i++)
        o.ref_exact[i] = o.ref_lost[i] = NAN;
    gj_ops ops = gj_ops_make(c);
    const int outer = c->row ? c->m : c->n, inner = c->row ? c->n : c->m;
    for (int oo = 0; oo < outer; oo++)
        for (int in = 0; in < inner; in++) {
            int i, j;
            gj_ij(c, oo, in, &i, &j);
            const size_t idx = (size_t)oo * c->ldc + in;
            const double dot = gj_ops_dot(c, &ops, i, j);
            const double last = (double)gj_a(c, i, c->k - 1) * (double)gj_b(c, c->k - 1, j);
            const double c0 = c->beta != 0.f ? (double)c->beta * (double)gj_out(c, c->C0, idx) : 0.0;
            o.ref_exact[idx] = (float)((double)c->alpha * dot + c0);
            o.ref_lost[idx] = (float)((double)c->alpha * (dot - last) + c0);
            store(c, o.out_exact, idx, o.ref_exact[idx]);
            store(c, o.out_lost, idx, o.ref_lost[idx]);
        }
    free(ops.a);
    free(ops.b);
    return o;
}

static void free_outputs(outputs *o) {
    free(o->ref_exact);
    free(o->ref_lost);
    free(o->out_exact);
    free(o->out_lost);
}

static void report(const char *what, const gj_result *r) {
    printf("%-48s bad %6ld (spot %2ld, unchecked %6ld), ref_off %6ld, ref_tail %6ld, pad %ld, NaN %ld\n", what,
           r->bad, r->spot_bad, r->unchecked, r->ref_off, r->ref_tail, r->bad_pad, r->nan_out);
}

/* One of the H100's failing cases, judged four ways and with faults of
 * carve's own. */
static void check_failing_case(const char *name, made *x) {
    const gj_call *c = &x->c;
    const long elems = (long)c->m * c->n;
    outputs o = make_outputs(x);
    gj_result r;
    char what[128];

    /* cuBLAS without the last k term, carve exact: cuBLAS's fault. */
    gj_judge(c, o.out_exact, o.ref_lost, &r, NULL);
    snprintf(what, sizeof what, "%s, reference lacks the last k", name);
    report(what, &r);
    CHECK(r.bad == 0 && r.bad_pad == 0 && r.nan_out == 0);
    CHECK(r.ref_off > elems / 2); /* most elements: the last term is rarely below the tolerance */
    CHECK(r.ref_tail == r.ref_off);

    /* carve without it, cuBLAS exact: carve's fault, every disagreement. */
    gj_judge(c, o.out_lost, o.ref_exact, &r, NULL);
    snprintf(what, sizeof what, "%s, carve lacks the last k", name);
    report(what, &r);
    CHECK(r.bad > elems / 2 && r.ref_off == 0 && r.unchecked == 0);

    /* Both without it: only the spot checks can tell. */
    gj_judge(c, o.out_lost, o.ref_lost, &r, NULL);
    snprintf(what, sizeof what, "%s, both lack the last k", name);
    report(what, &r);
    CHECK(r.spot_bad > 0 && r.bad == r.spot_bad && r.ref_off == 0);

    /* Both exact. */
    gj_judge(c, o.out_exact, o.ref_exact, &r, NULL);
    snprintf(what, sizeof what, "%s, both exact", name);
    report(what, &r);
    CHECK(r.bad == 0 && r.ref_off == 0 && r.bad_pad == 0 && r.nan_out == 0 && r.maxd == 0);

    /* carve wrote a padding element, and a NaN into the box. */
    const size_t cel = gj_cel(c), pad = (size_t)c->ldc - 1, box = (size_t)c->ldc + 3;
    unsigned char keep[8];
    memcpy(keep, o.out_exact + pad * cel, cel);
    store(c, o.out_exact, pad, 0.f);
    store(c, o.out_exact, box, NAN);
    gj_judge(c, o.out_exact, o.ref_exact, &r, NULL);
    snprintf(what, sizeof what, "%s, padding written, NaN", name);
    report(what, &r);
    CHECK(r.bad_pad == 1 && r.nan_out == 1 && r.bad == 1);
    memcpy(o.out_exact + pad * cel, keep, cel);
    store(c, o.out_exact, box, o.ref_exact[box]);

    /* A budget of exact work for ten disagreements: the rest are failures. */
    x->c.exact_budget = 10 * (int64_t)c->k;
    gj_judge(c, o.out_exact, o.ref_lost, &r, NULL);
    x->c.exact_budget = 0;
    snprintf(what, sizeof what, "%s, budget of ten", name);
    report(what, &r);
    CHECK(r.ref_off == 10 && r.unchecked > 0 && r.bad == r.unchecked);
    free_outputs(&o);
}

int main(void) {
    test_rng_seed(&rng, test_seed(0x6a0d6eull));
    check_layouts();
    /* The two cases as test_gemm_tc runs them (split_k_cases, shape
     * 64 x 1000 x 4097, splits 1 and 6). */
    made a = make_call(0, 0, 1, 64, 1000, 4097, 0, GJ_F16, 1.5f, 0.f, 72, 1008, 72);
    check_failing_case("col NT f16->f16 64x1000x4097", &a);
    free_call(&a);
    made b = make_call(1, 1, 0, 64, 1000, 4097, 1, GJ_F32, 1.f, 0.5f, 72, 1008, 1008);
    check_failing_case("row TN bf16->f32 64x1000x4097", &b);
    free_call(&b);
    return test_finish();
}
