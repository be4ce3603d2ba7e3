/*
 * test_gemm_limits.c — carve_gemm_f32 and carve_gemm at extents near
 * INT_MAX, on the GPU: the legal calls whose tile arithmetic overflowed an
 * int. Suite kernels-limits (not kernels: it takes minutes and tens of GiB).
 *
 * k near INT_MAX. (k + BK - 1) / BK wrapped negative, the main loop never
 * ran, and C came back as beta * C with CARVE_OK. Each case is one thread
 * block walking all of k, so they all run at once, on a stream each:
 *  - fp32 1 x 1 x (2^31 - 1): the scalar path (variant 0, BK 8);
 *  - fp32 1 x 4 x (2^31 - 4): the automatic pick (64 x 64 tiles, BK 16);
 *  - bf16 1 x 1 x (2^31 - 8), 16-byte rows: wgmma (BK 64) where the device
 *    has it, and mma.sync with cp.async (BK 32);
 *  - bf16 1 x 1 x (2^31 - 1): mma.sync with element-wise loads;
 *  - bf16 1 x 1 x (2^31 - 8) under CARVE_GEMM_PATH=stream: the streaming
 *    kernel on Hopper (B's row on 16 bytes), its 2^25 k steps in runs over
 *    a cluster of 8 blocks; mma.sync elsewhere;
 *  - the same under CARVE_GEMM_PATH=decode: the decode kernel on Hopper
 *    (its 2^25 k tiles shared by a cluster of 8 blocks), mma.sync
 *    elsewhere;
 *  - CARVE_TEST_LIMITS=all: every fp32 variant at 1 x 4 x (2^31 - 4) too
 *    (by estimate, 2^31 k steps of 256 cycles: about five minutes for the
 *    128 x 256 ones, two and a half for 128 x 128; not yet measured).
 * A and B are zero but for ten k (0, 1, 2, 2^30 and the last few of each
 * k), where A is 1 and B holds distinct powers of two, so C is a bit mask
 * of the terms that were added: a missing or doubled one shows.
 * fp32 buffers: 8 GiB (A) and 32 GiB (B, k x 4); bf16: 4 + 4 GiB.
 *
 * m or n near INT_MAX. ceil(m / 128) wrapped negative, the grid check
 * passed, and the launch failed (or the grid was not the one checked).
 * One case after another, each with A, B and C filled, C poisoned with NaN
 * first and read back whole (2^31 - 1 elements):
 *  - fp32 (2^31 - 1) x 1 x 1 and 1 x (2^31 - 1) x 1 (8 + 8 GiB each);
 *  - bf16 (2^31 - 1) x 1 x 1, bf16 C (mma.sync, element-wise; 4 + 4 GiB);
 *  - bf16 1 x (2^31 - 1) x 1, B's row off 16 bytes (ldb odd), bf16 C: the
 *    streaming kernel reading B in place on Hopper (its last 16 bytes
 *    element by element), mma.sync elsewhere (4 + 4 GiB);
 *  - bf16 (2^31 - 1) x 1 x 8 with 16-byte rows, fp32 C (wgmma on Hopper;
 *    32 + 8 GiB);
 *  - bf16 1 x (2^31 - 8) x 1, B's row on 16 bytes (ldb a multiple of 8),
 *    bf16 C, under the automatic choice: the streaming kernel on Hopper
 *    (2^25 clusters of one block; 4 + 4 GiB), mma.sync elsewhere;
 *  - bf16 1 x (2^31 - 1) x 8 and 1 x (2^31 - 8) x 8, B transposed (K-major
 *    rows on 16 bytes), bf16 C, forced onto wgmma with the 192-wide tile:
 *    the last tile's columns pass INT_MAX counted from 0; the register and
 *    the TMA-store epilogue (32 + 4 GiB);
 *  - bf16 1 x (2^31 - 1) x 8, B transposed, forced onto the decode kernel:
 *    2^24 blocks of 128 columns, the last one's 127 columns ending at
 *    2^31 - 2, its last column masked, and with 64-column blocks forced
 *    (CARVE_GEMM_DECODE_COLS=64): 2^25 blocks, the last one's 63 columns
 *    ending at 2^31 - 2 (32 + 4 GiB each).
 * The n-big decode cases have one row and 2^31 columns, which the plan
 * gives the streaming kernel (up to 4 rows where C is wide, up to 32
 * where B's rows are off 16 bytes: gemm_tc_plan.h), so they need no
 * CARVE_GEMM_PATH;
 * the 1 x 1 x k one is narrow and forces it.
 * A case the device has no memory for is skipped, and said so.
 * CARVE_TEST_LIMITS=k or =mn runs one half; =k-hopper only the k cases of
 * the Hopper paths (wgmma, the streaming and the decode kernels: seconds,
 * where mma.sync's one block walks k for minutes). CARVE_TEST_QUICK=1 (the
 * compute-sanitizer runs) skips the whole test (exit 77). Exits 77 without a
 * device.
 */
#include <limits.h>
#include <stdint.h>

#include "carve_kernels.h"
#include "kernels/gemm_variants.h"
#include "ktest.h"

/* Internal (lib/kernels/gemm_tc.cu): 4 the decode kernel, 3 the tiny kernel, 2 the streaming kernel, 1 wgmma, 0
 * mma.sync, -1 nothing. */
int carve__gemm_tc_last_path(void);
int carve__gemm_tc_last_cols(void); /* the decode kernel's block width (128 or 64), else 0 */

static int g_cc;

static uint16_t bf16_of(float f) { /* exact for the values used here */
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

static float float_of_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static int enough_memory(size_t bytes, const char *what) {
    size_t free_b = 0, total = 0;
    CUDA_OK(cudaMemGetInfo(&free_b, &total));
    if (free_b >= bytes + ((size_t)1 << 30))
        return 1;
    printf("SKIP %s: needs %.1f GiB, the device has %.1f GiB free\n", what, (double)bytes / (1 << 30),
           (double)free_b / (1 << 30));
    return 0;
}

static void *dev_alloc(size_t bytes) {
    void *p = NULL;
    CUDA_OK(cudaMalloc(&p, bytes));
    return p;
}

/* ---- k near INT_MAX ---------------------------------------------------------- */

#define NPOS 10

typedef struct {
    const char *name;
    int k;               /* the case's k */
    int n;               /* 1 or 4 */
    float *C;            /* device, n floats */
    cudaStream_t s;
    carve_status st;
    int path;            /* bf16: the path that ran */
    int want_path;       /* bf16: -1 any, else the path (4 decode, 2 stream, 1 wgmma, 0 mma.sync) */
} kcase;

/* Expected C[j]: sum of B's weights at the marked positions below k. */
static float k_expected(const int64_t *pos, int k, int j) {
    float sum = 0.f;
    for (int p = 0; p < NPOS; p++)
        if (pos[p] < k)
            sum += (float)(1 << p) * (float)(j + 1);
    return sum;
}

static void k_check(kcase *c, const int64_t *pos) {
    float got[4];
    CUDA_OK(cudaMemcpy(got, c->C, (size_t)c->n * sizeof(float), cudaMemcpyDeviceToHost));
    int ok = c->st == CARVE_OK;
    for (int j = 0; j < c->n; j++)
        ok = ok && got[j] == k_expected(pos, c->k, j);
    if (c->want_path >= 0)
        ok = ok && c->path == c->want_path;
    test_checks++;
    char d[300];
    snprintf(d, sizeof d, "%s k=%d: status %s, C[0] = %g (want %g), C[n-1] = %g (want %g), path %d (want %d)",
             c->name, c->k, carve_status_str(c->st), (double)got[0], (double)k_expected(pos, c->k, 0),
             (double)got[c->n - 1], (double)k_expected(pos, c->k, c->n - 1), c->path, c->want_path);
    if (!ok)
        test_fail(__FILE__, __LINE__, "gemm with k near INT_MAX", d);
    printf("%s %s\n", ok ? "ok  " : "FAIL", d);
}

static void k_near_int_max(int all_variants, int hopper_only) {
    const int k1 = INT_MAX, k4 = INT_MAX - 3, kb8 = INT_MAX - 7; /* 2^31-1, 2^31-4, 2^31-8 */
    /* Marked k: the first two, the middle, and the last tile of each k. */
    const int64_t pos[NPOS] = {0, 1, 2, (int64_t)1 << 30, kb8 - 17, kb8 - 1, k4 - 2, k4 - 1, k1 - 2, k1 - 1};
    kcase cases[32];
    int nc = 0;
    const double t0 = ktest_now();

    float *A = NULL, *B = NULL;
    uint16_t *Ah = NULL, *Bh = NULL;
    const size_t fa = (size_t)k1 * 4, fb = (size_t)k1 * 4 * 4, ha = (size_t)k1 * 2;
    const int do_f32 = !hopper_only && enough_memory(fa + fb, "fp32 k near INT_MAX");
    if (do_f32) {
        A = dev_alloc(fa);
        B = dev_alloc(fb);
        CUDA_OK(cudaMemset(A, 0, fa));
        CUDA_OK(cudaMemset(B, 0, fb));
        for (int p = 0; p < NPOS; p++) {
            const float one = 1.f, w[4] = {(float)(1 << p), 2.f * (1 << p), 3.f * (1 << p), 4.f * (1 << p)};
            CUDA_OK(cudaMemcpy(A + pos[p], &one, 4, cudaMemcpyHostToDevice));
            CUDA_OK(cudaMemcpy(B + 4 * pos[p], w, sizeof w, cudaMemcpyHostToDevice));
        }
    }
    const int do_bf16 = g_cc >= 80 && enough_memory(2 * ha, "bf16 k near INT_MAX");
    if (do_bf16) {
        Ah = dev_alloc(ha);
        Bh = dev_alloc(ha);
        CUDA_OK(cudaMemset(Ah, 0, ha));
        CUDA_OK(cudaMemset(Bh, 0, ha));
        for (int p = 0; p < NPOS; p++) {
            const uint16_t one = bf16_of(1.f), w = bf16_of((float)(1 << p));
            CUDA_OK(cudaMemcpy(Ah + pos[p], &one, 2, cudaMemcpyHostToDevice));
            CUDA_OK(cudaMemcpy(Bh + pos[p], &w, 2, cudaMemcpyHostToDevice));
        }
    }
    CUDA_OK(cudaDeviceSynchronize());

    /* Launch every case on its own stream; C starts as NaN (set on that
     * stream, which does not wait for the legacy one). */
#define NEW_CASE(nm, kk, nn)                                                        \
    kcase *c = &cases[nc++];                                                       \
    memset(c, 0, sizeof *c);                                                       \
    c->name = nm, c->k = kk, c->n = nn, c->want_path = -1, c->path = -1;           \
    c->C = dev_alloc(4 * sizeof(float));                                           \
    CUDA_OK(cudaStreamCreateWithFlags(&c->s, cudaStreamNonBlocking));              \
    CUDA_OK(cudaMemsetAsync(c->C, 0xFF, 4 * sizeof(float), c->s))
    if (do_f32) {
        { /* B's column 0 with ldb = 4: the scalar path */
            NEW_CASE("carve_gemm_f32 1x1", k1, 1);
            c->st = carve_gemm_f32((carve_stream)c->s, 1, 1, k1, 1.f, A, k1, B, 4, 0.f, c->C, 1);
        }
        {
            NEW_CASE("carve_gemm_f32 1x4", k4, 4);
            c->st = carve_gemm_f32((carve_stream)c->s, 1, 4, k4, 1.f, A, k4, B, 4, 0.f, c->C, 4);
        }
        for (int v = 0; all_variants && v < carve__gemm_f32_variant_count(); v++) {
            NEW_CASE(carve__gemm_f32_variant_name(v), k4, 4);
            c->st = carve__gemm_f32_variant(v, (carve_stream)c->s, 1, 4, k4, 1.f, A, k4, B, 4, 0.f, c->C, 4);
        }
    }
    if (do_bf16) {
        static const char *const names[5] = {"carve_gemm bf16 wgmma", "carve_gemm bf16 mma",
                                             "carve_gemm bf16 mma elementwise", "carve_gemm bf16 stream",
                                             "carve_gemm bf16 decode"};
        static const char *const paths[5] = {"wgmma", "mma", "mma", "stream", "decode"};
        for (int i = 0; i < 5; i++) {
            if (hopper_only && (i == 1 || i == 2))
                continue; /* mma.sync's one block over all of k: minutes */
            const int k = i == 2 ? k1 : kb8;
            NEW_CASE(names[i], k, 1);
            setenv("CARVE_GEMM_PATH", paths[i], 1);
            /* A 1 x k, B stored transposed (1 x k): both rows of k. */
            c->st = carve_gemm(NULL, (carve_stream)c->s, CARVE_ROW_MAJOR, CARVE_NO_TRANS, CARVE_TRANS, 1, 1, k, 1.f,
                               Ah, k, Bh, k, 0.f, c->C, 1, CARVE_DTYPE_BF16, CARVE_DTYPE_F32);
            c->path = carve__gemm_tc_last_path();
            c->want_path = i == 0 && g_cc == 90 ? 1 : i == 0 ? -1 : i == 3 && g_cc == 90 ? 2 : i == 4 && g_cc == 90 ? 4 : 0;
        }
        unsetenv("CARVE_GEMM_PATH");
    }
#undef NEW_CASE
    printf("k near INT_MAX: %d cases launched; waiting\n", nc);
    fflush(stdout);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaGetLastError());
    for (int i = 0; i < nc; i++) {
        k_check(&cases[i], pos);
        CUDA_OK(cudaStreamDestroy(cases[i].s));
        CUDA_OK(cudaFree(cases[i].C));
    }
    CUDA_OK(cudaFree(A));
    CUDA_OK(cudaFree(B));
    CUDA_OK(cudaFree(Ah));
    CUDA_OK(cudaFree(Bh));
    printf("k near INT_MAX: %.1f s\n", ktest_now() - t0);
}

/* ---- m or n near INT_MAX ------------------------------------------------------- */

/* Every element of the device array C (count elements of esize bytes) must
 * be `want` (compared bit for bit). */
static void check_all(const char *what, const void *C, size_t count, size_t esize, const void *want) {
    const size_t chunk = (size_t)64 << 20; /* elements */
    unsigned char *h = malloc(chunk * esize);
    if (!h) {
        fprintf(stderr, "host out of memory\n");
        exit(1);
    }
    size_t bad = 0, first = SIZE_MAX;
    uint32_t w4 = 0;
    uint16_t w2 = 0;
    if (esize == 4)
        memcpy(&w4, want, 4);
    else
        memcpy(&w2, want, 2);
    for (size_t at = 0; at < count; at += chunk) {
        size_t cnt = count - at < chunk ? count - at : chunk, bad0 = bad;
        CUDA_OK(cudaMemcpy(h, (const unsigned char *)C + at * esize, cnt * esize, cudaMemcpyDeviceToHost));
        if (esize == 4) {
            const uint32_t *v = (const uint32_t *)h;
            for (size_t i = 0; i < cnt; i++)
                bad += v[i] != w4;
        } else {
            const uint16_t *v = (const uint16_t *)h;
            for (size_t i = 0; i < cnt; i++)
                bad += v[i] != w2;
        }
        for (size_t i = 0; bad > bad0 && first == SIZE_MAX && i < cnt; i++)
            if (memcmp(h + i * esize, want, esize) != 0)
                first = at + i;
    }
    free(h);
    test_checks++;
    char d[200];
    snprintf(d, sizeof d, "%s: %zu of %zu elements wrong (first at %zu)", what, bad, count, first);
    if (bad)
        test_fail(__FILE__, __LINE__, "gemm with m or n near INT_MAX", d);
    printf("%s %s\n", bad ? "FAIL" : "ok  ", d);
}

static void fill_f32(float *p, size_t count, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    if ((u & 0xFF) * 0x01010101u == u) {
        CUDA_OK(cudaMemset(p, (int)(u & 0xFF), count * 4));
        return;
    }
    for (size_t i = 0; i < count; i++)
        CUDA_OK(cudaMemcpy(p + i, &v, 4, cudaMemcpyHostToDevice));
}

static void mn_f32(int m_big) {
    const int M = m_big ? INT_MAX : 1, N = m_big ? 1 : INT_MAX;
    const size_t big = (size_t)INT_MAX * 4;
    char what[96];
    snprintf(what, sizeof what, "carve_gemm_f32 %d x %d x 1", M, N);
    if (!enough_memory(2 * big, what))
        return;
    const double t0 = ktest_now();
    /* The long operand holds 0x3F3F3F3F (about 0.747) everywhere, the other
     * is 2: every output is twice the pattern, exactly. */
    float *X = dev_alloc(big), *C = dev_alloc(big), *y = dev_alloc(4);
    float pattern;
    const uint32_t bits = 0x3F3F3F3Fu;
    memcpy(&pattern, &bits, 4);
    fill_f32(X, (size_t)INT_MAX, pattern);
    fill_f32(y, 1, 2.f);
    CUDA_OK(cudaMemset(C, 0xFF, big));
    carve_status st = m_big ? carve_gemm_f32(NULL, M, 1, 1, 1.f, X, 1, y, 1, 0.f, C, 1)
                            : carve_gemm_f32(NULL, 1, N, 1, 1.f, y, 1, X, N, 0.f, C, N);
    CHECK_OK(NULL, st);
    CUDA_OK(cudaDeviceSynchronize());
    const float want = 2.f * pattern;
    check_all(what, C, (size_t)INT_MAX, 4, &want);
    CUDA_OK(cudaFree(X));
    CUDA_OK(cudaFree(C));
    CUDA_OK(cudaFree(y));
    printf("  (%.1f s)\n", ktest_now() - t0);
}

/* bf16 in; k = 1 (element-wise mma.sync, bf16 C) or m big with k = 8 and
 * lda = ldb = 8 (16-byte rows: wgmma on Hopper, fp32 C). With n big, the
 * streaming kernel on Hopper, with its grid of 2^25 clusters of one block:
 * 1 x (2^31 - 1) x 1, B's one row off 16 bytes (ldb odd: read in place,
 * its last 16 bytes element by element), or with n_big_rows16
 * 1 x (2^31 - 8) x 1, B's row on 16 bytes (ldb a multiple of 8), its last
 * column at 2^31 - 9. */
static void mn_bf16(int m_big, int k, int n_big_rows16) {
    const int M = m_big ? INT_MAX : 1, N = m_big ? 1 : n_big_rows16 ? INT_MAX - 7 : INT_MAX;
    const int c_f32 = k == 8;
    const size_t big = m_big ? (size_t)M : (size_t)N;
    const size_t xbytes = big * (size_t)k * 2, cbytes = big * (c_f32 ? 4 : 2);
    char what[96];
    snprintf(what, sizeof what, "carve_gemm bf16 %d x %d x %d -> %s", M, N, k, c_f32 ? "f32" : "bf16");
    if (!enough_memory(xbytes + cbytes, what))
        return;
    const double t0 = ktest_now();
    /* 0x3F3F is 0.74609375 in bf16; the short operand is 2. */
    uint16_t *X = dev_alloc(xbytes), *y = dev_alloc(8 * 8 * 2);
    void *C = dev_alloc(cbytes);
    CUDA_OK(cudaMemset(X, 0x3F, xbytes));
    uint16_t two[64];
    for (int i = 0; i < 64; i++)
        two[i] = bf16_of(2.f);
    CUDA_OK(cudaMemcpy(y, two, sizeof two, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(C, 0xFF, cbytes));
    const carve_dtype ct = c_f32 ? CARVE_DTYPE_F32 : CARVE_DTYPE_BF16;
    carve_status st;
    if (m_big) /* A m x k (lda k), B k x 1 (ldb k: 16-byte rows when k = 8) */
        st = carve_gemm(NULL, NULL, CARVE_ROW_MAJOR, CARVE_NO_TRANS, CARVE_NO_TRANS, M, 1, k, 1.f, X, k, y, k, 0.f, C,
                        1, CARVE_DTYPE_BF16, ct);
    else /* A 1 x 1, B 1 x n (ldb n) */
        st = carve_gemm(NULL, NULL, CARVE_ROW_MAJOR, CARVE_NO_TRANS, CARVE_NO_TRANS, 1, N, 1, 1.f, y, 1, X, N, 0.f, C,
                        N, CARVE_DTYPE_BF16, ct);
    const int path = carve__gemm_tc_last_path();
    CHECK_OK(NULL, st);
    if (g_cc == 90 && !m_big)
        CHECK(path == 2);
    else if (c_f32 && g_cc == 90)
        CHECK(path == 1);
    else
        CHECK(path == 0);
    CUDA_OK(cudaDeviceSynchronize());
    const float exact = (float)k * 2.f * float_of_bf16(0x3F3F); /* 1.4921875 * k: exact in both types */
    if (c_f32) {
        check_all(what, C, big, 4, &exact);
    } else {
        const uint16_t want = bf16_of(exact);
        check_all(what, C, big, 2, &want);
    }
    CUDA_OK(cudaFree(X));
    CUDA_OK(cudaFree(y));
    CUDA_OK(cudaFree(C));
    printf("  (%.1f s, path %s)\n", ktest_now() - t0, path == 2 ? "stream" : path == 1 ? "wgmma" : "mma");
}

/* bf16 1 x n x 8 on the wgmma path with a forced tile width (bn), or on the decode kernel (bn NULL; dcols its
 * block width, "64" or "128"), n near
 * INT_MAX: A 1 x 8, B stored n x 8 (transposed, ldb 8: K-major rows on 16
 * bytes), bf16 C 1 x n. With the 192-wide tile the last tile starts at
 * column 2^31 - 128, so its columns counted from 0 pass INT_MAX (they went
 * negative and passed the edge mask). n = 2^31 - 1: the register epilogue;
 * n = 2^31 - 8 (a multiple of 8): the TMA-store epilogue, whose last
 * chunk lies wholly past n. */
static void mn_bf16_wgmma(int n, const char *bn, const char *dcols) {
    const size_t N = (size_t)n, bbytes = N * 8 * 2, cbytes = N * 2;
    char what[96];
    if (bn)
        snprintf(what, sizeof what, "carve_gemm bf16 1 x %d x 8 -> bf16, wgmma %s wide", n, bn);
    else
        snprintf(what, sizeof what, "carve_gemm bf16 1 x %d x 8 -> bf16, decode kernel %s wide", n, dcols);
    if (!enough_memory(bbytes + cbytes, what))
        return;
    const double t0 = ktest_now();
    uint16_t *B = dev_alloc(bbytes), *a = dev_alloc(8 * 2);
    void *C = dev_alloc(cbytes);
    CUDA_OK(cudaMemset(B, 0x3F, bbytes));
    uint16_t two[8];
    for (int i = 0; i < 8; i++)
        two[i] = bf16_of(2.f);
    CUDA_OK(cudaMemcpy(a, two, sizeof two, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(C, 0xFF, cbytes));
    setenv("CARVE_GEMM_PATH", bn ? "wgmma" : "decode", 1);
    if (bn)
        setenv("CARVE_GEMM_BN", bn, 1);
    else
        setenv("CARVE_GEMM_DECODE_COLS", dcols, 1);
    const carve_status st = carve_gemm(NULL, NULL, CARVE_ROW_MAJOR, CARVE_NO_TRANS, CARVE_TRANS, 1, n, 8, 1.f, a, 8,
                                       B, 8, 0.f, C, n, CARVE_DTYPE_BF16, CARVE_DTYPE_BF16);
    const int path = carve__gemm_tc_last_path(), cols = carve__gemm_tc_last_cols();
    unsetenv("CARVE_GEMM_PATH");
    unsetenv("CARVE_GEMM_BN");
    unsetenv("CARVE_GEMM_DECODE_COLS");
    CHECK_OK(NULL, st);
    CHECK(path == (g_cc == 90 ? (bn ? 1 : 4) : 0));
    CHECK(cols == (g_cc == 90 && !bn ? atoi(dcols) : 0));
    CUDA_OK(cudaDeviceSynchronize());
    const uint16_t want = bf16_of(8.f * 2.f * float_of_bf16(0x3F3F));
    check_all(what, C, N, 2, &want);
    CUDA_OK(cudaFree(B));
    CUDA_OK(cudaFree(a));
    CUDA_OK(cudaFree(C));
    printf("  (%.1f s, path %s)\n", ktest_now() - t0, path == 4 ? "decode" : path == 1 ? "wgmma" : "mma");
}

int main(void) {
    ktest_require_device();
    if (ktest_quick()) {
        printf("SKIP: CARVE_TEST_QUICK is set (these cases walk 2^31 elements)\n");
        return 77;
    }
    const char *sel = getenv("CARVE_TEST_LIMITS");
    const int all = sel && strcmp(sel, "all") == 0;
    const int hopper_k = sel && strcmp(sel, "k-hopper") == 0;
    const int do_k = !sel || all || hopper_k || strcmp(sel, "k") == 0, do_mn = !sel || all || strcmp(sel, "mn") == 0;
    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(cudaFree(NULL));
    int ma = 0, mi = 0;
    CUDA_OK(cudaDeviceGetAttribute(&ma, cudaDevAttrComputeCapabilityMajor, 0));
    CUDA_OK(cudaDeviceGetAttribute(&mi, cudaDevAttrComputeCapabilityMinor, 0));
    g_cc = ma * 10 + mi;
    const size_t free_before = ktest_free_bytes();

    if (do_k)
        k_near_int_max(all, hopper_k);
    if (do_mn) {
        mn_f32(1);
        mn_f32(0);
        if (g_cc >= 80) {
            mn_bf16(1, 1, 0);
            mn_bf16(0, 1, 0);
            mn_bf16(1, 8, 0);
            mn_bf16(0, 1, 1);
            mn_bf16_wgmma(INT_MAX, "192", NULL);
            mn_bf16_wgmma(INT_MAX - 7, "192", NULL);
            mn_bf16_wgmma(INT_MAX, NULL, "128");
            mn_bf16_wgmma(INT_MAX, NULL, "64");
        }
    }
    CHECK(ktest_free_bytes() + ((size_t)64 << 20) >= free_before);
    return test_finish();
}
