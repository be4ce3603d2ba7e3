/*
 * test_gemm.c — carve_matmul_f32 / carve_gemm_f32 and every internal SGEMM
 * variant on the GPU, against host references.
 *
 * Inputs are fresh seeded random values, never zero (magnitudes in
 * [1/64, 1], random signs). Two references per output: a float64 dot
 * product (the measure of accuracy: ||out - ref|| / ||ref|| must be far under
 * 1e-3) and a sequential fp32 FMA loop in k order. The fp32 variants are
 * built to perform exactly that FMA sequence, so they must match it bit for
 * bit, which catches any missing, doubled or misplaced term; the TF32
 * variant is held to the relative bound only. Before every run C is
 * poisoned with NaN (beta == 0: C must not be read) or set to random values
 * (beta != 0): afterwards every output must be written and the padding
 * columns n..ldc must keep their bits. Large shapes are checked on a random sample of whole
 * rows (plus the first and last), and all fp32 variants must agree on every
 * element. Bad arguments (misaligned pointers and grids past the limit
 * included) must return CARVE_ERR_INVALID and launch nothing; a C that
 * lives in A's padding columns is legal and must come out right.
 *
 * CARVE_TEST_QUICK=1 keeps to small shapes (for compute-sanitizer).
 */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "carve_kernels.h"
#include "kernels/gemm_variants.h"
#include "ktest.h"

static test_rng rng;

/* Magnitude in [1/64, 1], random sign: never zero. */
static float rand_val(void) {
    float mag = (float)((test_rng_next(&rng) >> 40) + 1) / (float)(1u << 24);
    if (mag < 1.f / 64)
        mag = 1.f / 64;
    return (test_rng_next(&rng) & 1) ? mag : -mag;
}

typedef struct {
    int m, n, k, lda, ldb, ldc, offset; /* offset: floats past the buffer start (misalignment) */
    float alpha, beta;
} gcase;

/* ---- host reference ------------------------------------------------------ */

typedef struct {
    const gcase *c;
    const float *A, *B, *C0;
    const int *rows;  /* rows to compute */
    int nrows;
    float *ref32;     /* [nrows][n] */
    double *ref64;    /* [nrows][n] */
    int first, step;  /* this worker's share of rows */
} ref_job;

/* Rows of the references: k outer, j inner, so each output's terms are
 * added in k order (the fp32 one with one fmaf each) and the j loop
 * vectorizes. Compiled for FMA hardware when the host has it (a software
 * fmaf gives the same bits, slowly). */
#define REF_BODY                                                                             \
    const gcase *c = job->c;                                                                 \
    for (int r = job->first; r < job->nrows; r += job->step) {                               \
        int i = job->rows[r];                                                                \
        float *o32 = job->ref32 + (size_t)r * c->n;                                          \
        double *o64 = job->ref64 + (size_t)r * c->n;                                         \
        for (int j = 0; j < c->n; j++) {                                                     \
            o32[j] = 0.f;                                                                    \
            o64[j] = 0.0;                                                                    \
        }                                                                                    \
        for (int kk = 0; kk < c->k; kk++) {                                                  \
            const float a = job->A[(size_t)i * c->lda + kk];                                 \
            const float *b = job->B + (size_t)kk * c->ldb;                                   \
            for (int j = 0; j < c->n; j++) {                                                 \
                o32[j] = fmaf(a, b[j], o32[j]);                                              \
                o64[j] += (double)a * (double)b[j];                                          \
            }                                                                                \
        }                                                                                    \
        for (int j = 0; j < c->n; j++) {                                                     \
            float c0 = job->C0 ? job->C0[(size_t)i * c->ldc + j] : 0.f;                      \
            o32[j] = c->beta == 0.f ? c->alpha * o32[j] : fmaf(c->alpha, o32[j], c->beta * c0); \
            o64[j] = (double)c->alpha * o64[j] + (c->beta == 0.f ? 0.0 : (double)c->beta * c0); \
        }                                                                                    \
    }

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("fma"))) static void ref_rows_fma(ref_job *job) { REF_BODY }
#endif
static void ref_rows_generic(ref_job *job) { REF_BODY }

static void *ref_worker(void *arg) {
    ref_job *job = arg;
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("fma")) {
        ref_rows_fma(job);
        return NULL;
    }
#endif
    ref_rows_generic(job);
    return NULL;
}

static void reference(const gcase *c, const float *A, const float *B, const float *C0, const int *rows, int nrows,
                      float *ref32, double *ref64) {
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = ncpu < 1 ? 1 : ncpu > 32 ? 32 : (int)ncpu;
    if (nt > nrows)
        nt = nrows;
    pthread_t th[32];
    ref_job jobs[32];
    for (int t = 0; t < nt; t++) {
        jobs[t] = (ref_job){c, A, B, C0, rows, nrows, ref32, ref64, t, nt};
        if (pthread_create(&th[t], NULL, ref_worker, &jobs[t]) != 0) {
            ref_worker(&jobs[t]);
            th[t] = 0;
        }
    }
    for (int t = 0; t < nt; t++)
        if (th[t])
            pthread_join(th[t], NULL);
}

/* ---- one shape ----------------------------------------------------------- */

static int nan_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u == 0xFFFFFFFFu;
}

/* Run variant v (CARVE__GEMM_AUTO: carve_gemm_f32; -2: carve_matmul_f32) on
 * case c and check it; out receives C as the device left it. */
static void run_variant(int v, const gcase *c, float *dA, float *dB, float *dC,
                        const float *C0, const int *rows, int nrows, const float *ref32, const double *ref64,
                        float *out, size_t csz, float *agree, int *have_agree) {
    /* Poison: NaN everywhere (padding included), then C0 where beta reads it. */
    CUDA_OK(cudaMemset(dC, 0xFF, csz * sizeof(float)));
    if (c->beta != 0.f)
        CUDA_OK(cudaMemcpy(dC, C0, csz * sizeof(float), cudaMemcpyHostToDevice));
    carve_status st;
    const char *name;
    if (v == -2) {
        st = carve_matmul_f32(NULL, c->m, c->n, c->k, dA, dB, dC);
        name = "carve_matmul_f32";
    } else if (v == CARVE__GEMM_AUTO) {
        st = carve_gemm_f32(NULL, c->m, c->n, c->k, c->alpha, dA, c->lda, dB, c->ldb, c->beta, dC, c->ldc);
        name = "carve_gemm_f32";
    } else {
        st = carve__gemm_f32_variant(v, NULL, c->m, c->n, c->k, c->alpha, dA, c->lda, dB, c->ldb, c->beta, dC,
                                     c->ldc);
        name = carve__gemm_f32_variant_name(v);
    }
    CHECK_OK(NULL, st);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(out, dC, csz * sizeof(float), cudaMemcpyDeviceToHost));

    int tf32 = v >= 0 && carve__gemm_f32_variant_is_tf32(v);
    size_t unwritten = 0, pad_touched = 0, mismatches = 0;
    long first_bad = -1;
    double err2 = 0, ref2 = 0;
    for (int r = 0; r < nrows; r++) {
        int i = rows[r];
        for (int j = 0; j < c->ldc; j++) {
            float o = out[(size_t)i * c->ldc + j];
            if (j >= c->n) {
                if (!(c->beta != 0.f ? memcmp(&o, &C0[(size_t)i * c->ldc + j], 4) == 0 : nan_bits(o)))
                    pad_touched++;
                continue;
            }
            float r32 = ref32[(size_t)r * c->n + j];
            double r64 = ref64[(size_t)r * c->n + j];
            if (isnan(o))
                unwritten++;
            if (!tf32 && !(o == r32)) {
                if (first_bad < 0)
                    first_bad = (long)i * c->ldc + j;
                mismatches++;
            }
            err2 += ((double)o - r64) * ((double)o - r64);
            ref2 += r64 * r64;
        }
    }
    /* Every output row, sampled or not, must be written (no NaN), and the
     * fp32 variants must agree with each other everywhere. */
    size_t unwritten_all = 0, disagree = 0;
    for (int i = 0; i < c->m; i++)
        for (int j = 0; j < c->n; j++) {
            float o = out[(size_t)i * c->ldc + j];
            if (isnan(o))
                unwritten_all++;
            if (!tf32 && *have_agree && !(o == agree[(size_t)i * c->ldc + j]))
                disagree++;
        }
    if (!tf32 && !*have_agree) {
        memcpy(agree, out, csz * sizeof(float));
        *have_agree = 1;
    }
    double rel = sqrt(err2 / (ref2 > 0 ? ref2 : 1));
    double bound = tf32 ? 5e-3 : 1e-5;
    int ok = unwritten == 0 && unwritten_all == 0 && pad_touched == 0 && mismatches == 0 && disagree == 0 &&
             rel < bound;
    test_checks++;
    if (!ok) {
        char d[600];
        snprintf(d, sizeof d,
                 "%s m=%d n=%d k=%d lda=%d ldb=%d ldc=%d off=%d alpha=%g beta=%g: rel err %.3g (bound %.0e), "
                 "%zu mismatches vs fp32 FMA (first at %ld), %zu unwritten (%zu in all rows), %zu padding "
                 "touched, %zu differ from the first fp32 variant",
                 name, c->m, c->n, c->k, c->lda, c->ldb, c->ldc, c->offset, (double)c->alpha, (double)c->beta,
                 rel, bound, mismatches, first_bad, unwritten, unwritten_all, pad_touched, disagree);
        test_fail(__FILE__, __LINE__, "gemm result", d);
    }
}

static void run_case(carve_arena *arena, const gcase *c) {
    const size_t asz = (size_t)(c->m - 1) * c->lda + c->k, bsz = (size_t)(c->k - 1) * c->ldb + c->n;
    const size_t csz = (size_t)c->m * c->ldc;
    float *A = malloc(asz * 4), *B = malloc(bsz * 4), *C0 = NULL, *out = malloc(csz * 4);
    float *agree = malloc(csz * 4);
    if (!A || !B || !out || !agree) {
        fprintf(stderr, "host out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < asz; i++)
        A[i] = rand_val();
    for (size_t i = 0; i < bsz; i++)
        B[i] = rand_val();
    if (c->beta != 0.f) {
        C0 = malloc(csz * 4);
        for (size_t i = 0; i < csz; i++)
            C0[i] = rand_val();
    }

    /* Rows to check: all of them for shapes the host multiplies quickly,
     * otherwise the first, the last and 62 random ones. */
    double flops = (double)c->m * c->n * c->k;
    int nrows = flops <= 3e9 ? c->m : 64;
    int *rows = malloc((size_t)nrows * sizeof(int));
    for (int r = 0; r < nrows; r++)
        rows[r] = nrows == c->m ? r : r == 0 ? 0 : r == 1 ? c->m - 1 : (int)test_rng_below(&rng, (uint64_t)c->m);
    float *ref32 = malloc((size_t)nrows * c->n * sizeof(float));
    double *ref64 = malloc((size_t)nrows * c->n * sizeof(double));
    if (!rows || !ref32 || !ref64) {
        fprintf(stderr, "host out of memory\n");
        exit(1);
    }
    reference(c, A, B, C0, rows, nrows, ref32, ref64);

    /* Device buffers from the arena, offset floats in (misaligned when
     * offset % 4 != 0). */
    void *pa, *pb, *pc;
    CHECK_OK(arena, carve_alloc(arena, (asz + c->offset) * 4, NULL, &pa));
    CHECK_OK(arena, carve_alloc(arena, (bsz + c->offset) * 4, NULL, &pb));
    CHECK_OK(arena, carve_alloc(arena, (csz + c->offset) * 4, NULL, &pc));
    float *dA = (float *)pa + c->offset, *dB = (float *)pb + c->offset, *dC = (float *)pc + c->offset;
    CUDA_OK(cudaMemcpy(dA, A, asz * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dB, B, bsz * 4, cudaMemcpyHostToDevice));

    int have_agree = 0;
    int nv = carve__gemm_f32_variant_count();
    for (int v = 0; v < nv; v++)
        run_variant(v, c, dA, dB, dC, C0, rows, nrows, ref32, ref64, out, csz, agree, &have_agree);
    run_variant(CARVE__GEMM_AUTO, c, dA, dB, dC, C0, rows, nrows, ref32, ref64, out, csz, agree,
                &have_agree);
    if (c->lda == c->k && c->ldb == c->n && c->ldc == c->n && c->alpha == 1.f && c->beta == 0.f)
        run_variant(-2, c, dA, dB, dC, C0, rows, nrows, ref32, ref64, out, csz, agree, &have_agree);

    CHECK_OK(arena, carve_free(arena, pa));
    CHECK_OK(arena, carve_free(arena, pb));
    CHECK_OK(arena, carve_free(arena, pc));
    free(A);
    free(B);
    free(C0);
    free(out);
    free(agree);
    free(rows);
    free(ref32);
    free(ref64);
}

/* ---- bad arguments ----------------------------------------------------------- */

static void bad_arguments(carve_arena *arena) {
    const int m = 64, n = 64, k = 64;
    void *pa, *pb, *pc;
    CHECK_OK(arena, carve_alloc(arena, (size_t)m * k * 4, NULL, &pa));
    CHECK_OK(arena, carve_alloc(arena, (size_t)k * n * 4, NULL, &pb));
    CHECK_OK(arena, carve_alloc(arena, (size_t)m * n * 4, NULL, &pc));
    float *A = pa, *B = pb, *C = pc;
    float *host = calloc((size_t)m * n, 4);
    CUDA_OK(cudaMemset(A, 0x3F, (size_t)m * k * 4));
    CUDA_OK(cudaMemset(B, 0x3F, (size_t)k * n * 4));
    CUDA_OK(cudaMemset(C, 0xFF, (size_t)m * n * 4));

    CHECK_ST(NULL, carve_matmul_f32(NULL, 0, n, k, A, B, C), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_matmul_f32(NULL, m, -1, k, A, B, C), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_matmul_f32(NULL, m, n, 0, A, B, C), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_matmul_f32(NULL, m, n, k, NULL, B, C), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_matmul_f32(NULL, m, n, k, A, NULL, C), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_matmul_f32(NULL, m, n, k, A, B, NULL), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_matmul_f32(NULL, m, n, k, host, B, C), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_matmul_f32(NULL, m, n, k, A, B, host), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "C") != NULL);
    CHECK_ST(NULL, carve_gemm_f32(NULL, m, n, k, 1.f, A, k - 1, B, n, 0.f, C, n), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_gemm_f32(NULL, m, n, k, 1.f, A, k, B, n - 1, 0.f, C, n), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_gemm_f32(NULL, m, n, k, 1.f, A, k, B, n, 0.f, C, n - 1), CARVE_ERR_INVALID);
    /* C overlapping A or B (in place, and partly). */
    CHECK_ST(NULL, carve_matmul_f32(NULL, m, n, k, A, B, A), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_matmul_f32(NULL, 32, n, k, A, B, A + 16 * k), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_matmul_f32(NULL, m, n, k, A, B, B + 1), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "overlaps") != NULL);
    CHECK_ST(NULL, carve__gemm_f32_variant(carve__gemm_f32_variant_count(), NULL, m, n, k, 1.f, A, k, B, n, 0.f, C,
                                           n),
             CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve__gemm_f32_variant(-7, NULL, m, n, k, 1.f, A, k, B, n, 0.f, C, n), CARVE_ERR_INVALID);
    /* Pointers not on a 4-byte boundary: an fp32 C at 2 mod 4 used to be
     * accepted and fault on the device. */
    CHECK_ST(NULL, carve_gemm_f32(NULL, 8, 8, 8, 1.f, A, 8, B, 8, 0.f, (float *)((char *)C + 2), 8),
             CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "aligned") != NULL);
    CHECK_ST(NULL, carve_matmul_f32(NULL, 8, 8, 8, (const float *)((const char *)A + 1), B, C), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve__gemm_f32_variant(9, NULL, 8, 8, 8, 1.f, A, 8, (const float *)((const char *)B + 3), 8, 0.f,
                                           C, 8),
             CARVE_ERR_INVALID);
    /* More thread blocks than a grid holds (the count used to wrap). */
    CHECK_ST(NULL, carve_gemm_f32(NULL, INT_MAX - 5, 32768, 1, 1.f, A, 1, B, 32768, 0.f, C, 32768), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "thread blocks") != NULL);

    /* Nothing was launched: no error is pending, and A and C are as set. */
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    float *hc = malloc((size_t)m * n * 4), *ha = malloc((size_t)m * k * 4);
    CUDA_OK(cudaMemcpy(hc, C, (size_t)m * n * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(ha, A, (size_t)m * k * 4, cudaMemcpyDeviceToHost));
    size_t changed = 0;
    for (size_t i = 0; i < (size_t)m * n; i++)
        changed += !nan_bits(hc[i]);
    for (size_t i = 0; i < (size_t)m * k; i++) {
        uint32_t u;
        memcpy(&u, &ha[i], 4);
        changed += u != 0x3F3F3F3Fu;
    }
    CHECK(changed == 0);
    /* A valid call afterwards still works. */
    CHECK_OK(NULL, carve_matmul_f32(NULL, m, n, k, A, B, C));
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());

    free(host);
    free(hc);
    free(ha);
    CHECK_OK(arena, carve_free(arena, pa));
    CHECK_OK(arena, carve_free(arena, pb));
    CHECK_OK(arena, carve_free(arena, pc));
}

/* ---- C in A's padding columns -------------------------------------------- */

/* A m x k with lda = 2k, C = A + k with ldc = 2k: C's rows are A's padding,
 * no byte in common, so the call is legal (the overlap check used to refuse
 * it, comparing spans). Every variant: C right, A's own columns and the
 * padding past C untouched. Aligned, so the float4 variants run. */
static void padding_columns(carve_arena *arena) {
    const int m = 96, n = 32, k = 40, lda = 2 * k, ldb = n;
    const size_t asz = (size_t)m * lda, bsz = (size_t)k * ldb;
    float *hA = malloc(asz * 4), *hB = malloc(bsz * 4), *out = malloc(asz * 4), *ref = malloc((size_t)m * n * 4);
    if (!hA || !hB || !out || !ref) {
        fprintf(stderr, "host out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < asz; i++) {
        uint32_t nan = 0xFFFFFFFFu;
        if ((int)(i % lda) < k)
            hA[i] = rand_val();
        else
            memcpy(&hA[i], &nan, 4);
    }
    for (size_t i = 0; i < bsz; i++)
        hB[i] = rand_val();
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0.f;
            for (int kk = 0; kk < k; kk++)
                acc = fmaf(hA[(size_t)i * lda + kk], hB[(size_t)kk * ldb + j], acc);
            ref[(size_t)i * n + j] = acc;
        }
    void *pa, *pb;
    CHECK_OK(arena, carve_alloc(arena, asz * 4, NULL, &pa));
    CHECK_OK(arena, carve_alloc(arena, bsz * 4, NULL, &pb));
    float *dA = pa, *dB = pb, *dC = dA + k;
    CUDA_OK(cudaMemcpy(dB, hB, bsz * 4, cudaMemcpyHostToDevice));
    for (int v = -1; v < carve__gemm_f32_variant_count(); v++) {
        CUDA_OK(cudaMemcpy(dA, hA, asz * 4, cudaMemcpyHostToDevice));
        carve_status st = v < 0 ? carve_gemm_f32(NULL, m, n, k, 1.f, dA, lda, dB, ldb, 0.f, dC, lda)
                                : carve__gemm_f32_variant(v, NULL, m, n, k, 1.f, dA, lda, dB, ldb, 0.f, dC, lda);
        CHECK_OK(NULL, st);
        CUDA_OK(cudaDeviceSynchronize());
        CUDA_OK(cudaMemcpy(out, dA, asz * 4, cudaMemcpyDeviceToHost));
        const int tf32 = v >= 0 && carve__gemm_f32_variant_is_tf32(v);
        size_t a_changed = 0, c_wrong = 0, pad_changed = 0;
        double err2 = 0, ref2 = 0;
        for (int i = 0; i < m; i++)
            for (int j = 0; j < lda; j++) {
                const size_t at = (size_t)i * lda + j;
                if (j < k) {
                    a_changed += memcmp(&out[at], &hA[at], 4) != 0;
                } else if (j < k + n) {
                    const float r = ref[(size_t)i * n + (j - k)];
                    c_wrong += isnan(out[at]) || (!tf32 && !(out[at] == r)); /* fp32: the FMA chain, bit for bit */
                    err2 += ((double)out[at] - r) * ((double)out[at] - r);
                    ref2 += (double)r * r;
                } else {
                    pad_changed += !nan_bits(out[at]);
                }
            }
        if (!(sqrt(err2 / ref2) < 5e-3)) /* TF32's bound, as in run_variant */
            c_wrong++;
        test_checks++;
        if (a_changed || c_wrong || pad_changed) {
            char d[200];
            snprintf(d, sizeof d, "%s: %zu of A changed, %zu of C wrong, %zu of the padding after C written",
                     v < 0 ? "carve_gemm_f32" : carve__gemm_f32_variant_name(v), a_changed, c_wrong, pad_changed);
            test_fail(__FILE__, __LINE__, "C in A's padding columns", d);
        }
    }
    printf("C in A's padding columns: %d variants and the default\n", carve__gemm_f32_variant_count());
    CHECK_OK(arena, carve_free(arena, pa));
    CHECK_OK(arena, carve_free(arena, pb));
    free(hA);
    free(hB);
    free(out);
    free(ref);
}

/* An error left pending before a call (a refused cudaMalloc) is not the
 * call's: it answers CARVE_OK and C is written once. Launches once read
 * the pending error as their own and queued the kernel again, so with
 * beta 1 C got A * B twice. Every variant and the automatic choice; A and
 * B all ones, C ones: every element k + 1. */
static void pending_error(carve_arena *arena) {
    const int m = 64, n = 64, k = 64;
    const size_t sz = (size_t)m * k * sizeof(float);
    float *h = malloc(sz), *dA, *dB, *dC;
    if (!h) {
        fprintf(stderr, "FAIL: host allocation\n");
        exit(1);
    }
    CHECK_OK(arena, carve_alloc(arena, sz, NULL, (void **)&dA));
    CHECK_OK(arena, carve_alloc(arena, sz, NULL, (void **)&dB));
    CHECK_OK(arena, carve_alloc(arena, sz, NULL, (void **)&dC));
    for (int i = 0; i < m * k; i++)
        h[i] = 1.f;
    CUDA_OK(cudaMemcpy(dA, h, sz, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dB, h, sz, cudaMemcpyHostToDevice));
    for (int v = -1; v < carve__gemm_f32_variant_count(); v++) {
        CUDA_OK(cudaMemcpy(dC, h, sz, cudaMemcpyHostToDevice));
        void *huge = NULL;
        CHECK(cudaMalloc(&huge, (size_t)1 << 62) != cudaSuccess); /* pending now */
        const carve_status st = v < 0 ? carve_gemm_f32(NULL, m, n, k, 1.f, dA, k, dB, n, 1.f, dC, n)
                                      : carve__gemm_f32_variant(v, NULL, m, n, k, 1.f, dA, k, dB, n, 1.f, dC, n);
        CHECK(st == CARVE_OK);
        (void)cudaGetLastError();
        CUDA_OK(cudaDeviceSynchronize());
        CUDA_OK(cudaMemcpy(h, dC, sz, cudaMemcpyDeviceToHost));
        int bad = 0;
        for (int i = 0; i < m * n; i++)
            bad += h[i] != (float)(k + 1);
        CHECK(bad == 0);
        if (st != CARVE_OK || bad)
            fprintf(stderr, "  pending error, variant %d: status %d, %d of %d elements not %d\n", v, (int)st, bad,
                    m * n, k + 1);
        for (int i = 0; i < m * k; i++)
            h[i] = 1.f;
    }
    carve_free(arena, dA);
    carve_free(arena, dB);
    carve_free(arena, dC);
    free(h);
}

int main(void) {
    ktest_require_device();
    const int quick = ktest_quick();
    test_rng_seed(&rng, test_seed(0x6e11ull));
    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(cudaFree(NULL)); /* create the context before measuring free memory */
    size_t free_before = ktest_free_bytes();
    carve_arena *arena = ktest_arena();

    bad_arguments(arena);
    padding_columns(arena);
    pending_error(arena);

    /* m, n, k, lda, ldb, ldc, offset, alpha, beta. Shapes: 1 / 17 / 1000 /
     * 4097 combinations, tile multiples and near-misses, padded leading
     * dimensions, misaligned pointers, alpha and beta. */
    const gcase cases[] = {
        {1, 1, 1, 1, 1, 1, 0, 1.f, 0.f},
        {1, 1, 4097, 4097, 1, 1, 0, 1.f, 0.f},
        {1, 4097, 1, 1, 4097, 4097, 0, 1.f, 0.f},
        {4097, 1, 1, 1, 1, 1, 0, 1.f, 0.f},
        {1, 1000, 17, 17, 1000, 1000, 0, 1.f, 0.f},
        {17, 1, 1000, 1000, 1, 1, 0, 1.f, 0.f},
        {1000, 17, 1, 1, 17, 17, 0, 1.f, 0.f},
        {17, 17, 17, 17, 17, 17, 0, 1.f, 0.f},
        {4, 4, 4, 4, 4, 4, 0, 1.f, 0.f},
        {128, 128, 128, 128, 128, 128, 0, 1.f, 0.f},
        {129, 127, 33, 33, 127, 127, 0, 1.f, 0.f},
        {256, 260, 36, 36, 260, 260, 0, 1.f, 0.f},
        {100, 60, 50, 57, 61, 70, 0, 1.f, 0.f},          /* lda > k etc., unaligned */
        {192, 320, 64, 68, 328, 336, 0, 1.f, 0.f},       /* padded, aligned */
        {96, 96, 96, 96, 96, 96, 1, 1.f, 0.f},           /* misaligned pointers */
        {300, 200, 100, 100, 200, 200, 0, 0.75f, -0.5f}, /* alpha, beta */
        {64, 68, 72, 72, 68, 68, 0, 1.f, 1.f},
        {33, 40, 20, 20, 40, 44, 0, -2.f, 0.f},
        {1000, 1000, 1000, 1000, 1000, 1000, 0, 1.f, 0.f},
        {1000, 1000, 17, 17, 1000, 1000, 0, 1.f, 0.f},
        {1024, 1024, 1024, 1024, 1024, 1024, 0, 1.f, 0.f},
        {4097, 4097, 17, 17, 4097, 4097, 0, 1.f, 0.f},
        {17, 4097, 4097, 4097, 4097, 4097, 0, 1.f, 0.f},
        {4097, 17, 4097, 4097, 17, 17, 0, 1.f, 0.f},
        {2048, 2048, 2048, 2048, 2048, 2048, 0, 1.f, 0.f},
        {4096, 4096, 4096, 4096, 4096, 4096, 0, 1.f, 0.f},
        {4097, 4097, 4097, 4097, 4097, 4097, 0, 1.f, 0.f},
        {8192, 8192, 8192, 8192, 8192, 8192, 0, 1.f, 0.f},
    };
    double t0 = ktest_now();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const gcase *c = &cases[i];
        double flops = (double)c->m * c->n * c->k;
        if (quick && flops > (double)(1 << 24))
            continue;
        double t = ktest_now();
        unsigned long f0 = test_failures;
        run_case(arena, c);
        printf("%s m=%d n=%d k=%d lda=%d ldb=%d ldc=%d off=%d alpha=%g beta=%g (%.1f s)\n",
               test_failures == f0 ? "ok  " : "FAIL", c->m, c->n, c->k, c->lda, c->ldb, c->ldc, c->offset,
               (double)c->alpha, (double)c->beta, ktest_now() - t);
        fflush(stdout);
    }
    printf("gemm cases: %.1f s\n", ktest_now() - t0);

    CHECK_ARENA(arena);
    carve_arena_destroy(arena);
    size_t free_after = ktest_free_bytes();
    /* Every byte the arena reserved went back (a little slack for the
     * driver's own bookkeeping). */
    CHECK(free_after + ((size_t)8 << 20) >= free_before);
    return test_finish();
}
