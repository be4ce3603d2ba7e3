/*
 * gemm_judge.h — how test_gemm_tc judges carve_gemm's output: against
 * cuBLAS everywhere, and against the exact product wherever cuBLAS and
 * carve disagree, so that a wrong reference is reported as such and never
 * taken for a wrong carve_gemm (nor the other way round).
 *
 * The one idea: the test's inputs are j/64 for integers j in [-64, 64], so
 * each product of two inputs is a multiple of 2^-12 of magnitude at most 1,
 * and a double sums any number of them a test can afford without rounding.
 * The exact value of one element, alpha * op(A) op(B) + beta * C0, costs k
 * multiply-adds on the host: too many for every element of the large
 * shapes (cuBLAS stays the yardstick there), few enough for the elements
 * where the two libraries disagree. cuBLAS was seen to be the wrong one
 * (an H100 with CUDA 12: cublasGemmEx over 64 x 1000 x 4097, both operands
 * MN-major, summed the first 4096 values of k and left out the last), which
 * the judge recognizes and counts as "the reference lacks the last k term".
 *
 * Plain C, no CUDA: test_gemm_tc.c (GPU) judges with it, test_gemm_judge.c
 * (suite unit) checks it on synthesized outputs.
 */
#ifndef CARVE_TEST_GEMM_JUDGE_H
#define CARVE_TEST_GEMM_JUDGE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- host conversions ----------------------------------------------------- */

static inline uint16_t f2bf(float f) { /* round to nearest even (exact for the inputs) */
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static inline float bf2f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint16_t f2h(float f) { /* exact for normal values with <= 11 significant bits, and 0 */
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    if ((u & 0x7FFFFFFFu) == 0)
        return sign;
    int e = (int)((u >> 23) & 0xFF) - 127 + 15;
    return (uint16_t)(sign | (uint16_t)(e << 10) | (uint16_t)((u >> 13) & 0x3FFu));
}
/* Round to nearest even binary16. */
static inline uint16_t f2h_rne(float f) {
    if (isnan(f))
        return 0x7FFF;
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    float a = fabsf(f);
    if (a < ldexpf(1.f, -14)) /* subnormal: multiples of 2^-24 */
        return (uint16_t)(sign | (uint16_t)nearbyintf(a * ldexpf(1.f, 24)));
    uint32_t au = u & 0x7FFFFFFFu;
    au += 0xFFFu + ((au >> 13) & 1u); /* round the 13 dropped bits to even */
    int e = (int)(au >> 23) - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7C00u);
    return (uint16_t)(sign | (uint16_t)(e << 10) | (uint16_t)((au >> 13) & 0x3FFu));
}
static inline float h2f(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 0x1F, mant = h & 0x3FF;
    float v;
    if (e == 0)
        v = ldexpf((float)mant, -24);
    else if (e == 31)
        v = mant ? NAN : INFINITY;
    else
        v = ldexpf((float)(mant | 0x400), e - 25);
    return s ? -v : v;
}

/* ---- one call, as the judge sees it ---------------------------------------- */

enum { GJ_F32 = 0, GJ_F16 = 1, GJ_BF16 = 2 }; /* output types */

/* Multiply-adds the exact checks of one call may spend by default (a second
 * or two on the host). */
#define GJ_EXACT_BUDGET ((int64_t)1 << 31)

/* A carve_gemm call with its host inputs as stored (the caller's layout). */
typedef struct {
    int row;        /* 1 row-major, 0 column-major */
    int ta, tb;     /* op(A), op(B) transposed */
    int m, n, k;
    int in_bf16;    /* inputs bf16, else fp16 */
    int c_type;     /* GJ_F32, GJ_F16, GJ_BF16 */
    float alpha, beta;
    const uint16_t *A, *B;
    int lda, ldb, ldc;
    const unsigned char *C0; /* C before the call, ldc layout (NaN when beta == 0: never read) */
    int64_t exact_budget;    /* multiply-adds the exact checks may spend; 0: GJ_EXACT_BUDGET */
} gj_call;

typedef struct {
    long bad;       /* elements out of tolerance of the value judged right, spot checks included */
    long unchecked; /* of those, disagreements past the exact-check budget (not resolved: counted bad) */
    long spot_bad;  /* of those, spot checks off the exact product */
    long bad_pad;   /* padding elements (past the box, up to ldc) whose bytes changed */
    long nan_out;   /* NaN in carve's box */
    long ref_off;   /* elements where cuBLAS is off the exact product and carve on it (not bad) */
    long ref_tail;  /* of those, cuBLAS equals the exact product without the last k term */
    double maxd;    /* max |carve - the value judged right| */
    double maxref;  /* max |cuBLAS| */
} gj_result;

static inline float gj_in(const gj_call *c, uint16_t h) { return c->in_bf16 ? bf2f(h) : h2f(h); }

/* op(A)(i, kk) and op(B)(kk, j), as stored by the caller. */
static inline float gj_a(const gj_call *c, int i, int kk) {
    const int64_t at = c->row == c->ta ? (int64_t)kk * c->lda + i : (int64_t)i * c->lda + kk;
    return gj_in(c, c->A[at]);
}
static inline float gj_b(const gj_call *c, int kk, int j) {
    const int64_t at = c->row == c->tb ? (int64_t)j * c->ldb + kk : (int64_t)kk * c->ldb + j;
    return gj_in(c, c->B[at]);
}

/* sum over k of op(A)(i, kk) op(B)(kk, j), exact for the test's inputs. */
static inline double gj_dot(const gj_call *c, int i, int j) {
    double s = 0;
    for (int kk = 0; kk < c->k; kk++)
        s += (double)gj_a(c, i, kk) * (double)gj_b(c, kk, j);
    return s;
}

static inline size_t gj_cel(const gj_call *c) { return c->c_type == GJ_F32 ? 4 : 2; }

/* Element idx of a C-shaped buffer of the output type, as a float. */
static inline float gj_out(const gj_call *c, const unsigned char *buf, size_t idx) {
    if (c->c_type == GJ_F32) {
        float x;
        memcpy(&x, buf + 4 * idx, 4);
        return x;
    }
    uint16_t h;
    memcpy(&h, buf + 2 * idx, 2);
    return c->c_type == GJ_BF16 ? bf2f(h) : h2f(h);
}

/* An fp32 value as the output type stores it (rounded to nearest even). */
static inline float gj_round(const gj_call *c, float v) {
    return c->c_type == GJ_F32 ? v : c->c_type == GJ_BF16 ? bf2f(f2bf(v)) : h2f(f2h_rne(v));
}

/* alpha * dot + beta * C0 of element idx, rounded to the output type. */
static inline float gj_value(const gj_call *c, double dot, size_t idx) {
    double v = (double)c->alpha * dot;
    if (c->beta != 0.f)
        v += (double)c->beta * (double)gj_out(c, c->C0, idx);
    return gj_round(c, (float)v);
}

/* The tolerance (docs/kernels.md): u * |r| + 1e-5 * max|ref| + 1e-6. */
static inline double gj_tol(const gj_call *c, double r, double maxref) {
    const double u = c->c_type == GJ_F32 ? 0 : c->c_type == GJ_BF16 ? 1.0 / 128 : 1.0 / 1024;
    return u * fabs(r) + 1e-5 * maxref + 1e-6;
}


/* The rows of op(A) and columns of op(B) as contiguous floats, so that
 * many exact dot products run at memory speed; NULL where they would pass
 * 2^26 floats each (then gj_dot reads the operands where they lie). */
typedef struct {
    float *a, *b; /* m x k and n x k */
} gj_ops;

static inline gj_ops gj_ops_make(const gj_call *c) {
    gj_ops o = {NULL, NULL};
    if ((int64_t)c->m * c->k > ((int64_t)1 << 26) || (int64_t)c->n * c->k > ((int64_t)1 << 26))
        return o;
    o.a = malloc(sizeof(float) * (size_t)c->m * (size_t)c->k);
    o.b = malloc(sizeof(float) * (size_t)c->n * (size_t)c->k);
    if (!o.a || !o.b) {
        free(o.a), free(o.b);
        o.a = o.b = NULL;
        return o;
    }
    for (int i = 0; i < c->m; i++)
        for (int kk = 0; kk < c->k; kk++)
            o.a[(size_t)i * c->k + kk] = gj_a(c, i, kk);
    for (int j = 0; j < c->n; j++)
        for (int kk = 0; kk < c->k; kk++)
            o.b[(size_t)j * c->k + kk] = gj_b(c, kk, j);
    return o;
}

static inline double gj_ops_dot(const gj_call *c, const gj_ops *o, int i, int j) {
    if (!o->a)
        return gj_dot(c, i, j);
    const float *a = o->a + (size_t)i * c->k, *b = o->b + (size_t)j * c->k;
    double s = 0;
    for (int kk = 0; kk < c->k; kk++)
        s += (double)a[kk] * (double)b[kk];
    return s;
}

/* C(i, j) of the caller's m x n output at (outer o, inner in) of its
 * storage (row-major: row o; column-major: column o). */
static inline void gj_ij(const gj_call *c, int o, int in, int *i, int *j) {
    *i = c->row ? o : in;
    *j = c->row ? in : o;
}

/* Judges carve's C (out, ldc layout, the output type) against cuBLAS's
 * (ref: fp32, ldc layout, rounded here to the output type as carve's is):
 *  - padding (past the box, up to ldc) must keep C0's bytes, no NaN in the box;
 *  - an element within tolerance of cuBLAS passes; one that is not is
 *    settled by the exact product: carve within tolerance of it passes and
 *    counts as ref_off (cuBLAS wrong; ref_tail when cuBLAS equals the exact
 *    product without the last k term), else it is bad. Past the budget of
 *    exact multiply-adds a disagreement counts bad (unchecked);
 *  - 16 elements (the box's corners and 12 spread by a hash of the shape)
 *    are checked against the exact product whatever cuBLAS says, so that a
 *    fault shared by both libraries still shows.
 * The first 3 bad elements are described on log (when not NULL). */
static inline void gj_judge(const gj_call *c, const unsigned char *out, const float *ref, gj_result *res,
                            FILE *log) {
    memset(res, 0, sizeof *res);
    const int outer = c->row ? c->m : c->n, inner = c->row ? c->n : c->m;
    const size_t cel = gj_cel(c);
    for (int o = 0; o < outer; o++)
        for (int in = 0; in < c->ldc; in++) {
            const size_t idx = (size_t)o * c->ldc + in;
            if (in >= inner) {
                res->bad_pad += memcmp(out + idx * cel, c->C0 + idx * cel, cel) != 0;
                continue;
            }
            res->nan_out += isnan(gj_out(c, out, idx)) != 0;
            const double r = fabs((double)gj_round(c, ref[idx]));
            if (r > res->maxref)
                res->maxref = r;
        }
    gj_ops ops = {NULL, NULL};
    int have_ops = 0;
    int64_t budget = c->exact_budget > 0 ? c->exact_budget : GJ_EXACT_BUDGET;
    for (int o = 0; o < outer; o++)
        for (int in = 0; in < inner; in++) {
            const size_t idx = (size_t)o * c->ldc + in;
            const float x = gj_out(c, out, idx), r = gj_round(c, ref[idx]);
            double d = fabs((double)x - (double)r);
            if (d <= gj_tol(c, r, res->maxref)) {
                if (d > res->maxd)
                    res->maxd = d;
                continue;
            }
            if (budget < c->k) {
                if (res->bad < 3 && log)
                    fprintf(log, "  mismatch at (outer %d, inner %d): carve %.7g cublas %.7g (not checked "
                                 "against the exact product: budget spent)\n", o, in, x, r);
                res->bad++, res->unchecked++;
                continue;
            }
            if (!have_ops)
                ops = gj_ops_make(c), have_ops = 1;
            budget -= c->k;
            int i, j;
            gj_ij(c, o, in, &i, &j);
            const double dot = gj_ops_dot(c, &ops, i, j);
            const float e = gj_value(c, dot, idx);
            d = fabs((double)x - (double)e);
            if (d <= gj_tol(c, e, res->maxref)) {
                res->ref_off++;
                const double last = (double)gj_a(c, i, c->k - 1) * (double)gj_b(c, c->k - 1, j);
                const float without = gj_value(c, dot - last, idx);
                res->ref_tail += fabs((double)r - (double)without) <= gj_tol(c, without, res->maxref);
            } else {
                if (res->bad < 3 && log)
                    fprintf(log, "  mismatch at (outer %d, inner %d): carve %.7g cublas %.7g exact %.7g\n", o, in, x,
                            r, e);
                res->bad++;
            }
            if (d > res->maxd)
                res->maxd = d;
        }
    free(ops.a);
    free(ops.b);
    /* Spot checks: a local hash, so that the test's random stream (and so
     * every later case's data) stays what it was. */
    uint64_t h = 0x9E3779B97F4A7C15ull ^ ((uint64_t)c->m << 40) ^ ((uint64_t)c->n << 20) ^ (uint64_t)c->k ^
                 ((uint64_t)(c->row * 4 + c->ta * 2 + c->tb) << 60);
    for (int s = 0; s < 16; s++) {
        int o, in;
        if (s < 4) {
            o = (s & 1) ? outer - 1 : 0;
            in = (s & 2) ? inner - 1 : 0;
        } else {
            h ^= h >> 33, h *= 0xFF51AFD7ED558CCDull, h ^= h >> 29;
            o = (int)(h % (uint64_t)outer);
            in = (int)((h >> 32) % (uint64_t)inner);
        }
        int i, j;
        gj_ij(c, o, in, &i, &j);
        const size_t idx = (size_t)o * c->ldc + in;
        const float x = gj_out(c, out, idx), e = gj_value(c, gj_dot(c, i, j), idx);
        if (!(fabs((double)x - (double)e) <= gj_tol(c, e, res->maxref))) {
            if (res->bad < 3 && log)
                fprintf(log, "  spot check at (outer %d, inner %d): carve %.7g exact %.7g\n", o, in, x, e);
            res->bad++, res->spot_bad++;
        }
    }
}

#endif
