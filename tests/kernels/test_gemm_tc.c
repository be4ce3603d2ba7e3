/*
 * test_gemm_tc.c — carve_gemm (tensor-core GEMM, bf16/fp16 inputs, fp32
 * accumulation) on the GPU against cuBLAS (cublasGemmEx, same types, fp32
 * compute), both paths (wgmma + TMA on Hopper, mma.sync) forced in turn
 * through CARVE_GEMM_PATH.
 *
 * Inputs are j/64 for random integers j in [-64, 64]: exact in bf16 and
 * fp16, so both libraries see the same values and every product is exact in
 * fp32; differences come only from the order of fp32 additions and the
 * final rounding. The reference is cublasGemmEx with the same input types,
 * CUBLAS_COMPUTE_32F and an fp32 C (C0 widened), rounded on the host to the
 * output type when that is 16-bit: cuBLAS with a 16-bit C was seen (H100,
 * CUDA 13.0) to differ from the exactly rounded result by several units in
 * the last place where alpha*AB and beta*C0 cancel, so it is no yardstick
 * for one-ulp agreement. Tolerance per element (docs/kernels.md):
 *   |carve - ref| <= u * |ref| + 1e-5 * max|ref| + 1e-6
 * where u is 0 for fp32 output, 2^-7 for bf16 (two units in the last place:
 * both sides round once) and 2^-10 for fp16. cuBLAS is not always right
 * either: where carve is out of that tolerance of it, the element is judged
 * against the exact product computed on the host (gemm_judge.h), and 16
 * elements of every case are checked against the exact product whatever
 * cuBLAS says. An element where cuBLAS is off the exact product and carve
 * on it is no failure; each such case gets a "note:" line and the last
 * line before the check count sums them (an H100 with cuBLAS 12 left the
 * last value of k out of 64 x 1000 x 4097 with both operands MN-major, and
 * the two cases failed before the judge). Shapes include 1, 7, 127, 1000
 * and 4097 in every role, both storage orders, all four transpose pairs,
 * both input types, both output types, beta 0 (C poisoned with NaN, must not
 * be read) and beta != 0, exact and padded leading dimensions (padding must
 * keep its bytes). Buffers are carved from a CUDA arena. Bad arguments
 * (misaligned pointers, grids past the limit, a host arena) must return
 * CARVE_ERR_INVALID; legal layouts at the edges of the rules (operands on 2
 * bytes, C on its element size only, C in A's padding columns) must come
 * out exact, on the path expected: at m = 70 with the path forced, at
 * m = 3 under CARVE_GEMM_PATH=auto, where the decode kernel (A and B on 16
 * bytes) takes them on Hopper, at m = 4, 5 and 16 under auto with A off
 * 16 bytes, where wgmma does through a copy (or mma.sync without
 * workspace), at m = 20 under CARVE_GEMM_PATH=stream (forcing keeps them
 * on the streaming kernel) and at m = 20 and 70 under
 * CARVE_GEMM_PATH=decode (C on its element size, C in A's padding; A off
 * 16 bytes falls through to mma.sync without workspace). Chains
 * of calls on one stream, each reading what the one before wrote, with no
 * host wait between them (chain_cases: programmatic dependent launch), run
 * direct and captured into a CUDA graph. The decode kernel
 * (decode_cases, under CARVE_GEMM_PATH=decode) runs M from 1 to 256 in
 * every layout and its cluster sizes 1, 2, 4 and 8, and under the
 * automatic path either side of the plan's line at 64 rows. A call captured right after
 * another kernel shows in its graph's edges which of its launches may
 * start early (pdl_edge_cases: by default the call's first only where it is
 * the streaming or the decode kernel; CARVE_GEMM_PDL=0, 1 and 2 too). Exits
 * 77 without a device.
 *
 * Workspace (docs/kernels.md, "Workspace"): on Hopper, operands whose rows
 * break TMA's rules (lda or ldb not a multiple of 8, a base not on 16
 * bytes) run on wgmma through an aligned copy carved from the arena, and
 * outputs with fewer tiles than SMs split k (CARVE_GEMM_SPLITK forces 1 to
 * 8 splits on decode and odd shapes, all layouts). Every case checks the
 * path, the split factor and the copies the plan predicts, and that the
 * workspace came from the arena (one carve_alloc) and went back: allocated
 * bytes equal before the call, right after it and after a synchronization.
 * Without workspace (NULL arena; an arena whose limit is below what the
 * call asks for) the result is the same, unsplit, and on mma.sync when a
 * copy was needed. Split-K also runs on cudaStreamPerThread and on a
 * stream of the test's own.
 *
 * CARVE_TEST_QUICK=1 keeps to small shapes (for compute-sanitizer).
 */
#include <cublas_v2.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "carve_kernels.h"
#include "kernels/gemm_tc_plan.h"
#include "gemm_judge.h"
#include "ktest.h"

/* Internal (lib/kernels/gemm_tc.cu), about the calling thread's last
 * carve_gemm: the path (4 the decode kernel, 3 the tiny kernel, 2 the streaming kernel, 1 wgmma, 0 mma.sync, -1 nothing
 * launched), the
 * split-K factor (0 when nothing launched), and which operands went through
 * an aligned copy (bit 0: A, bit 1: B). */
int carve__gemm_tc_last_path(void);
int carve__gemm_tc_last_splits(void);
int carve__gemm_tc_last_copies(void);
int carve__gemm_tc_last_cols(void); /* the decode kernel's block width (128 or 64), else 0 */
int carve__gemm_tc_decode_active(int M, int cols, int cs);

static test_rng rng;
static int g_cc, g_sms;
static carve_arena *g_small; /* limit one granule (2 MiB): too small for some workspace */

static float rand_in(void) { return (float)((int)test_rng_below(&rng, 129) - 64) / 64.f; }

/* ---- one case ------------------------------------------------------------- */

typedef struct {
    int m, n, k;
    carve_order order;
    carve_transpose ta, tb;
    carve_dtype ab, c;
    float alpha, beta;
    int pad; /* leading dimensions rounded up to a multiple of 8, plus 8 */
    int path; /* CARVE_GEMM_PATH: 0 auto (the streaming kernel where the plan chooses it), 1 wgmma, 2 mma,
               * 3 stream (the streaming kernel wherever it takes the call), 4 decode (the decode kernel
               * wherever it takes the call) */
    int splits; /* CARVE_GEMM_SPLITK for the call; 0: unset (the plan chooses) */
    int cols;   /* CARVE_GEMM_DECODE_COLS for the call (64 or 128); 0: unset (the plan chooses) */
    int ws; /* the arena passed to carve_gemm: 0 the test's, 1 NULL, 2 g_small */
    int want_path, want_splits; /* for ws 2: what must run (else the plan's prediction) */
    carve_stream stream; /* NULL: the legacy default stream */
} tcase;

static double worst_err[5][3]; /* [path ran: wgmma, mma, stream, tiny, decode][c type]: max |d| / max|ref| seen */
/* Where cuBLAS was off the exact product and carve on it (gemm_judge.h):
 * cases, elements, and elements where cuBLAS lacked the last k term. */
static long g_ref_cases, g_ref_off, g_ref_tail;

static const char *tname(carve_dtype t) { return t == CARVE_DTYPE_F32 ? "f32" : t == CARVE_DTYPE_F16 ? "f16" : "bf16"; }

static int ld_of(int need, int pad) { return pad ? ((need + 7) / 8) * 8 + 8 : need; }

/* What carve_gemm must run for c (buffers from the arena: 256-byte
 * aligned): the path (4 the decode kernel, 3 the tiny kernel, 2 the streaming kernel, 1 wgmma, 0 mma.sync), the
 * split factor (the streaming kernel: its cluster size) and the copies
 * (bits as carve__gemm_tc_last_copies), from the plan
 * (lib/kernels/gemm_tc_plan.h: carve_tc_stream_chosen, M <= 4 with
 * N >= 8192 and M <= 2 with N >= 4096 under auto, and M <= 16 with N >= 1024 (B K-major: M <= 16
 * from 4096, 8 from 3072, 4 from 1024) where
 * B's rows are off 16 bytes, but not where the decode kernel takes the call
 * in 64-column blocks (carve_tc_stream_yields); every M it takes under stream; then
 * carve_tc_decode_chosen, M <= 32, 64 where N <= SMs x 128 and k >= 64 x 64, or 128 where the decode kernel's
 * cluster rule splits k, with A K-major and both operands on TMA's rules,
 * every M up to 256 under decode) and whether the call has workspace. */
static void predict(const tcase *c, int lda, int ldb, int *path, int *splits, int *copies, int *cols) {
    const int row = c->order == CARVE_ROW_MAJOR;
    const int M = row ? c->m : c->n, N = row ? c->n : c->m;
    const int bad_a = lda % 8 != 0, bad_b = ldb % 8 != 0;
    *path = 0, *splits = 1, *copies = 0, *cols = 0;
    if (c->path == 2)
        return;
    /* The canonical B is the caller's B (row-major) or A (column-major). */
    const int b_rows = row ? !bad_b : !bad_a, b_kmajor = row ? c->tb == CARVE_TRANS : c->ta == CARVE_TRANS;
    const int a_kmajor = row ? c->ta == CARVE_NO_TRANS : c->tb == CARVE_NO_TRANS;
    /* The decode kernel's plan where it may take the call (auto up to 128
     * rows, or decode; A K-major, on TMA's rules): its block width (the
     * plan's, carve_tc_decode_cols, or the forced one: 64 only up to 128
     * rows) and cluster size. */
    const int dc_may = g_cc == 90 && (c->path == 0 || c->path == 4) && carve_tc_decode_takes(M, a_kmajor) && !bad_a &&
                       !bad_b && (c->path == 4 || M <= CARVE_TC_DECODE_PLAN_SPLIT_M);
    int dc_cols = 0, dc_planned = 1;
    if (dc_may) {
        int a128[4], a64[4];
        for (int i = 0; i < 4; i++) {
            a128[i] = carve__gemm_tc_decode_active(M, CARVE_TC_DECODE_ROWS, 1 << i);
            a64[i] = carve__gemm_tc_decode_active(M, CARVE_TC_DECODE_NARROW, 1 << i);
        }
        dc_cols = c->cols == 128 || (c->cols == 64 && M <= 128) ? c->cols
                                                                 : carve_tc_decode_cols(M, N, c->k, g_sms, a128, a64);
        dc_planned = carve_tc_decode_cluster(N, c->k, dc_cols, g_sms, dc_cols == 64 ? a64 : a128);
    }
    /* The streaming kernel gives way to 64-column decode tiles in clusters
     * (looked at where N <= SMs x 64). */
    const int yields = c->path == 0 && dc_may && (int64_t)N <= (int64_t)g_sms * CARVE_TC_DECODE_NARROW &&
                       carve_tc_stream_yields(dc_cols, dc_planned);
    if (g_cc == 90 && (c->path == 0 || c->path == 3) && carve_tc_stream_chosen(M, N, b_rows, b_kmajor, c->path == 3) &&
        !yields) {
        *path = 2;
        *splits = c->splits ? carve_tc_stream_clamp_cluster(c->splits, c->k)
                            : carve_tc_stream_plan_cluster(M, N, c->k, g_sms, b_kmajor, b_rows);
        return;
    }
    if (c->path == 0 && g_cc >= 80 && carve_tc_tiny(M, N, c->k)) { /* the tiny kernel, under auto only */
        *path = 3;
        return;
    }
    if (dc_may && (c->path == 4 || carve_tc_decode_chosen(M, N, c->k, dc_planned, g_sms))) {
        /* The decode kernel on TMA's rules: where the plan chooses it
         * (carve_tc_decode_chosen, by its rows, the output's width and its
         * own cluster size), every problem
         * it takes under CARVE_GEMM_PATH=decode. */
        *path = 4;
        *splits = c->splits ? carve_tc_decode_clamp_cluster(c->splits, c->k) : dc_planned;
        *cols = dc_cols;
        return;
    }
    if (g_cc != 90)
        return;
    /* CARVE_GEMM_BN forces the width as gemm_tc.cu reads it (the suite
     * runs once more with each width forced: tools or by hand). */
    const char *fb = getenv("CARVE_GEMM_BN");
    const int forced = !fb ? 0 : !strcmp(fb, "128") ? 128 : !strcmp(fb, "192") ? 192 : !strcmp(fb, "256") ? 256 : 0;
    const int bn = forced ? forced : carve_tc_choose_bn(M, N, g_sms);
    const int s = c->splits ? carve_tc_clamp_splits(c->splits, M, N, c->k, bn)
                            : carve_tc_choose_splits(M, N, c->k, bn, g_sms);
    if (c->ws == 1 || ((bad_a || bad_b) && !carve_tc_copy_pays(c->k))) {
        /* no workspace, or k too short for copies to pay: no split, no copy */
        *path = bad_a || bad_b ? 0 : 1;
        return;
    }
    *path = 1, *splits = s, *copies = bad_a | (bad_b << 1);
}

/* The path (tcase's numbering: 0 auto, 1 wgmma, 2 mma, 3 stream, 4 decode) and the
 * forced split or cluster size (0: the plan's) the next carve_gemm takes. */
static void force_path(int path, int splits) {
    static const char *const path_names[5] = {"auto", "wgmma", "mma", "stream", "decode"};
    setenv("CARVE_GEMM_PATH", path_names[path], 1);
    unsetenv("CARVE_GEMM_DECODE_COLS"); /* run_case sets it for its call */
    if (splits) {
        char sv[16];
        snprintf(sv, sizeof sv, "%d", splits);
        setenv("CARVE_GEMM_SPLITK", sv, 1);
    } else {
        unsetenv("CARVE_GEMM_SPLITK");
    }
}

static void run_case(carve_arena *arena, cublasHandle_t h, const tcase *c) {
    const int row = c->order == CARVE_ROW_MAJOR;
    const int a_rows = c->ta ? c->k : c->m, a_cols = c->ta ? c->m : c->k;
    const int b_rows = c->tb ? c->n : c->k, b_cols = c->tb ? c->k : c->n;
    const int lda = ld_of(row ? a_cols : a_rows, c->pad), ldb = ld_of(row ? b_cols : b_rows, c->pad);
    const int ldc = ld_of(row ? c->n : c->m, c->pad);
    const size_t asz = (size_t)(row ? a_rows : a_cols) * lda, bsz = (size_t)(row ? b_rows : b_cols) * ldb;
    const size_t csz = (size_t)(row ? c->m : c->n) * ldc;
    const size_t cel = c->c == CARVE_DTYPE_F32 ? 4 : 2;

    uint16_t *hA = malloc(asz * 2), *hB = malloc(bsz * 2);
    unsigned char *hC0 = malloc(csz * cel), *hC = malloc(csz * cel);
    float *hR = malloc(csz * 4); /* the reference is fp32 (see the header) */
    if (!hA || !hB || !hC0 || !hC || !hR) {
        fprintf(stderr, "FAIL: host allocation\n");
        exit(1);
    }
    for (size_t i = 0; i < asz; i++)
        hA[i] = c->ab == CARVE_DTYPE_BF16 ? f2bf(rand_in()) : f2h(rand_in());
    for (size_t i = 0; i < bsz; i++)
        hB[i] = c->ab == CARVE_DTYPE_BF16 ? f2bf(rand_in()) : f2h(rand_in());
    if (c->beta == 0.f) {
        memset(hC0, 0xFF, csz * cel); /* NaN in every type: must not be read */
    } else {
        for (size_t i = 0; i < csz; i++) {
            float v = rand_in();
            if (cel == 4)
                memcpy(hC0 + 4 * i, &v, 4);
            else {
                uint16_t b = c->c == CARVE_DTYPE_BF16 ? f2bf(v) : f2h(v);
                memcpy(hC0 + 2 * i, &b, 2);
            }
        }
    }

    void *dA, *dB, *dC, *dR;
    CHECK_OK(arena, carve_alloc(arena, asz * 2, NULL, &dA));
    CHECK_OK(arena, carve_alloc(arena, bsz * 2, NULL, &dB));
    CHECK_OK(arena, carve_alloc(arena, csz * cel, NULL, &dC));
    CHECK_OK(arena, carve_alloc(arena, csz * 4, NULL, &dR));
    CUDA_OK(cudaMemcpy(dA, hA, asz * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dB, hB, bsz * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dC, hC0, csz * cel, cudaMemcpyHostToDevice));
    for (size_t i = 0; i < csz; i++) { /* C0 widened to fp32 (NaN stays NaN) */
        if (cel == 4) {
            memcpy(&hR[i], hC0 + 4 * i, 4);
        } else {
            uint16_t b;
            memcpy(&b, hC0 + 2 * i, 2);
            hR[i] = c->c == CARVE_DTYPE_BF16 ? bf2f(b) : h2f(b);
        }
    }
    CUDA_OK(cudaMemcpy(dR, hR, csz * 4, cudaMemcpyHostToDevice));

    force_path(c->path, c->splits);
    if (c->cols)
        setenv("CARVE_GEMM_DECODE_COLS", c->cols == 64 ? "64" : "128", 1);
    carve_arena *wsa = c->ws == 0 ? arena : c->ws == 1 ? NULL : g_small;
    carve_stats before, after, synced;
    CUDA_OK(cudaDeviceSynchronize()); /* the inputs are in place for any stream */
    if (wsa)
        CHECK_OK(wsa, carve_get_stats(wsa, &before));
    carve_status st = carve_gemm(wsa, c->stream, c->order, c->ta, c->tb, c->m, c->n, c->k, c->alpha, dA, lda, dB,
                                 ldb, c->beta, dC, ldc, c->ab, c->c);
    const int ran = carve__gemm_tc_last_path(), splits = carve__gemm_tc_last_splits();
    const int copies = carve__gemm_tc_last_copies(), cols = carve__gemm_tc_last_cols();
    CHECK(st == CARVE_OK);
    if (st != CARVE_OK)
        fprintf(stderr, "  carve_gemm: %s\n", carve_last_error(NULL));
    unsetenv("CARVE_GEMM_SPLITK");
    unsetenv("CARVE_GEMM_DECODE_COLS");
    /* The path, split and copies the plan predicts: wgmma wherever it
     * exists (through copies when rows break TMA's rules and there is
     * workspace). */
    int want_path, want_splits, want_copies, want_cols;
    predict(c, lda, ldb, &want_path, &want_splits, &want_copies, &want_cols);
    if (c->ws == 2) {
        want_path = c->want_path, want_splits = c->want_splits;
        if (want_path == 0)
            want_copies = 0;
        if (want_path != 4)
            want_cols = 0;
    }
    CHECK(ran == want_path);
    CHECK(splits == want_splits);
    CHECK(copies == want_copies);
    CHECK(cols == want_cols);
    if (ran != want_path || splits != want_splits || copies != want_copies || cols != want_cols)
        fprintf(stderr, "  ran path %d, %d splits, copies %d, %d columns; want %d, %d, %d, %d\n", ran, splits, copies,
                cols, want_path, want_splits, want_copies, want_cols);
    /* Workspace: one allocation from the arena when the call split or
     * copied, given back before the call returned (a stream-ordered free). */
    if (wsa) {
        CHECK_OK(wsa, carve_get_stats(wsa, &after));
        CUDA_OK(cudaDeviceSynchronize());
        CHECK_OK(wsa, carve_get_stats(wsa, &synced));
        const uint64_t took = ran == 1 && (splits > 1 || copies) ? 1 : 0;
        CHECK(after.num_allocs - before.num_allocs == took);
        CHECK(after.allocated_bytes == before.allocated_bytes);
        CHECK(synced.allocated_bytes == before.allocated_bytes);
        CHECK(carve_memory_allocated(wsa) == before.allocated_bytes);
    }

    cudaDataType_t abt = c->ab == CARVE_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    cudaDataType_t ct = CUDA_R_32F;
    cublasOperation_t oa = c->ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = c->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasStatus_t bs;
    if (row) /* row-major C = op(A) op(B)  <=>  column-major C^T = op(B)^T op(A)^T */
        bs = cublasGemmEx(h, ob, oa, c->n, c->m, c->k, &c->alpha, dB, abt, ldb, dA, abt, lda, &c->beta, dR, ct, ldc,
                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    else
        bs = cublasGemmEx(h, oa, ob, c->m, c->n, c->k, &c->alpha, dA, abt, lda, dB, abt, ldb, &c->beta, dR, ct, ldc,
                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    CHECK(bs == CUBLAS_STATUS_SUCCESS);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(hC, dC, csz * cel, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(hR, dR, csz * 4, cudaMemcpyDeviceToHost));

    /* Against cuBLAS, and against the exact product where the two differ
     * (gemm_judge.h); outside the box (padding) the bytes must be C0's. */
    const gj_call call = {row, c->ta == CARVE_TRANS, c->tb == CARVE_TRANS, c->m, c->n, c->k,
                          c->ab == CARVE_DTYPE_BF16, c->c == CARVE_DTYPE_F32 ? GJ_F32
                                                     : c->c == CARVE_DTYPE_F16 ? GJ_F16
                                                                               : GJ_BF16,
                          c->alpha, c->beta, hA, hB, lda, ldb, ldc, hC0, 0};
    gj_result jr;
    gj_judge(&call, hC, hR, &jr, stderr);
    const double maxd = jr.maxd, maxref = jr.maxref;
    test_checks += 4;
    int ok = jr.bad == 0 && jr.bad_pad == 0 && jr.nan_out == 0;
    if (!ok) {
        char msg[256];
        snprintf(msg, sizeof msg,
                 "%ld elements out of tolerance (%ld of 16 spot checks off the exact product, %ld not checked "
                 "against it), %ld padding changed, %ld NaN",
                 jr.bad, jr.spot_bad, jr.unchecked, jr.bad_pad, jr.nan_out);
        test_fail(__FILE__, __LINE__, "carve_gemm matches cublasGemmEx or the exact product", msg);
    }
    double rel = maxref > 0 ? maxd / maxref : maxd;
    int ci = c->c == CARVE_DTYPE_F32 ? 0 : c->c == CARVE_DTYPE_F16 ? 1 : 2;
    int pi = ran == 1 ? 0 : ran == 2 ? 2 : ran == 3 ? 3 : ran == 4 ? 4 : 1;
    if (rel > worst_err[pi][ci])
        worst_err[pi][ci] = rel;
    if (!ok || c->m * (double)c->n * c->k >= 1e9 || splits > 1 || copies || c->ws || ran == 2 || ran == 4 ||
        jr.ref_off)
        printf("%s %s m=%d n=%d k=%d %s%s %s->%s ld=%d,%d,%d alpha=%g beta=%g path=%s%s splits=%d copies=%d ws=%d: "
               "max|d|=%.3g max|ref|=%.3g%s\n",
               ok ? "ok  " : "FAIL", row ? "row" : "col", c->m, c->n, c->k, c->ta ? "T" : "N", c->tb ? "T" : "N",
               tname(c->ab), tname(c->c), lda, ldb, ldc, c->alpha, c->beta,
               ran == 4 ? "decode" : ran == 3 ? "tiny" : ran == 2 ? "stream" : ran == 1 ? "wgmma" : "mma",
               cols == 64 ? "/64" : cols == 128 ? "/128" : "", splits, copies, c->ws, maxd, maxref, ok ? "" : "  <---");
    if (jr.ref_off) { /* cuBLAS is wrong there, carve is not: said, not failed */
        g_ref_cases++, g_ref_off += jr.ref_off, g_ref_tail += jr.ref_tail;
        printf("  note: cuBLAS is off the exact product in %ld elements of this case, %ld of them by exactly the "
               "term of the last k; carve_gemm is on it in all of them\n",
               jr.ref_off, jr.ref_tail);
    }

    carve_free(arena, dA);
    carve_free(arena, dB);
    carve_free(arena, dC);
    carve_free(arena, dR);
    free(hA);
    free(hB);
    free(hC0);
    free(hC);
    free(hR);
}

/* ---- bad arguments ---------------------------------------------------------- */

static void check_bad_arguments(carve_arena *arena) {
    void *dA, *dB, *dC;
    CHECK_OK(arena, carve_alloc(arena, 4096, NULL, &dA));
    CHECK_OK(arena, carve_alloc(arena, 4096, NULL, &dB));
    CHECK_OK(arena, carve_alloc(arena, 4096, NULL, &dC));
    const carve_dtype bf = CARVE_DTYPE_BF16, f32 = CARVE_DTYPE_F32;
    const carve_order R = CARVE_ROW_MAJOR;
    const carve_transpose N = CARVE_NO_TRANS;
    static char host[4096];
#define GEMM(m, n, k, A, lda, B, ldb, C, ldc, ab, c) \
    carve_gemm(arena, NULL, R, N, N, m, n, k, 1.f, A, lda, B, ldb, 0.f, C, ldc, ab, c)
    CHECK(GEMM(8, 8, 8, dA, 8, dB, 8, dC, 8, bf, f32) == CARVE_OK);
    CHECK(GEMM(0, 8, 8, dA, 8, dB, 8, dC, 8, bf, f32) == CARVE_ERR_INVALID);
    CHECK(GEMM(8, -1, 8, dA, 8, dB, 8, dC, 8, bf, f32) == CARVE_ERR_INVALID);
    CHECK(GEMM(8, 8, 0, dA, 8, dB, 8, dC, 8, bf, f32) == CARVE_ERR_INVALID);
    CHECK(GEMM(8, 8, 8, dA, 7, dB, 8, dC, 8, bf, f32) == CARVE_ERR_INVALID);
    CHECK(GEMM(8, 8, 8, dA, 8, dB, 7, dC, 8, bf, f32) == CARVE_ERR_INVALID);
    CHECK(GEMM(8, 8, 8, dA, 8, dB, 8, dC, 7, bf, f32) == CARVE_ERR_INVALID);
    CHECK(GEMM(8, 8, 8, NULL, 8, dB, 8, dC, 8, bf, f32) == CARVE_ERR_INVALID);
    CHECK(GEMM(8, 8, 8, dA, 8, host, 8, dC, 8, bf, f32) == CARVE_ERR_INVALID);
    CHECK(GEMM(8, 8, 8, dA, 8, dB, 8, NULL, 8, bf, f32) == CARVE_ERR_INVALID);
    CHECK(GEMM(8, 8, 8, dA, 8, dB, 8, dC, 8, f32, f32) == CARVE_ERR_INVALID);
    CHECK(GEMM(8, 8, 8, dA, 8, dB, 8, dC, 8, bf, CARVE_DTYPE_F16) == CARVE_ERR_INVALID);
    CHECK(GEMM(8, 8, 8, dA, 8, dB, 8, dC, 8, (carve_dtype)7, f32) == CARVE_ERR_INVALID);
    CHECK(GEMM(8, 8, 8, dA, 8, dB, 8, dA, 8, bf, f32) == CARVE_ERR_INVALID); /* C overlaps A */
    /* Misaligned for the element type: a bf16 operand at an odd address, an
     * fp32 C at 2 mod 4, a bf16 C at an odd address (they used to be
     * accepted and fault on the device). */
    CHECK(GEMM(8, 8, 8, (char *)dA + 1, 8, dB, 8, dC, 8, bf, f32) == CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "aligned") != NULL);
    CHECK(GEMM(8, 8, 8, dA, 8, (char *)dB + 3, 8, dC, 8, CARVE_DTYPE_F16, f32) == CARVE_ERR_INVALID);
    CHECK(GEMM(8, 8, 8, dA, 8, dB, 8, (char *)dC + 2, 8, bf, f32) == CARVE_ERR_INVALID);
    CHECK(GEMM(8, 8, 8, dA, 8, dB, 8, (char *)dC + 1, 8, bf, bf) == CARVE_ERR_INVALID);
    /* More thread blocks than a grid holds (the count used to wrap). */
    CHECK(GEMM(INT_MAX - 5, 32768, 1, dA, 1, dB, 32768, dC, 32768, bf, bf) == CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "thread blocks") != NULL);
    CHECK(carve__gemm_tc_last_path() == -1);
    /* A host arena is refused; a cuda_driver one (what carve-run uses) is
     * device memory and accepted. */
    carve_arena *host_arena = test_arena(CARVE_BACKEND_HOST, 1, 0, 0);
    CHECK(carve_gemm(host_arena, NULL, R, N, N, 8, 8, 8, 1.f, dA, 8, dB, 8, 0.f, dC, 8, bf, f32) ==
          CARVE_ERR_INVALID);
    carve_arena_destroy(host_arena);
    carve_arena *drv_arena = test_arena(CARVE_BACKEND_CUDA_DRIVER, 1, 0, 0);
    CHECK_OK(NULL, carve_gemm(drv_arena, NULL, R, N, N, 8, 8, 8, 1.f, dA, 8, dB, 8, 0.f, dC, 8, bf, f32));
    CUDA_OK(cudaDeviceSynchronize());
    carve_arena_destroy(drv_arena);
    CHECK(carve_gemm(arena, NULL, (carve_order)2, N, N, 8, 8, 8, 1.f, dA, 8, dB, 8, 0.f, dC, 8, bf, f32) ==
          CARVE_ERR_INVALID);
    CHECK(carve_gemm(arena, NULL, R, (carve_transpose)5, N, 8, 8, 8, 1.f, dA, 8, dB, 8, 0.f, dC, 8, bf, f32) ==
          CARVE_ERR_INVALID);
    /* Column-major minimums: lda >= m (A m x k), ldb >= k, ldc >= m. */
    CHECK(carve_gemm(arena, NULL, CARVE_COL_MAJOR, N, N, 16, 8, 8, 1.f, dA, 8, dB, 8, 0.f, dC, 16, bf, f32) ==
          CARVE_ERR_INVALID);
    CHECK(carve_gemm(NULL, NULL, CARVE_COL_MAJOR, N, N, 16, 8, 8, 1.f, dA, 16, dB, 8, 0.f, dC, 16, bf, f32) ==
          CARVE_OK);
    CHECK(strstr(carve_last_error(NULL), "") != NULL);
#undef GEMM
    CUDA_OK(cudaDeviceSynchronize());
    carve_free(arena, dA);
    carve_free(arena, dB);
    carve_free(arena, dC);
}

/* ---- layouts at the edges of the rules ------------------------------------ */

/* Row-major bf16 C = A * B (alpha 1, beta 0) with A, B, C placed a_off,
 * b_off, c_off bytes into their buffers, or C in A's padding columns
 * (lda = ldc = 2k, C = A + k elements, bf16 C). Inputs j/64: every sum is
 * exact in fp32, so C must equal the exact product (rounded to nearest even
 * for a bf16 C) on every path. want_path: 4 decode, 2 stream, 1 wgmma, 0 mma.sync. */
static void edge_layout(carve_arena *arena, carve_arena *ws, int m, const char *name, size_t a_off, size_t b_off,
                        size_t c_off, carve_dtype ct, int c_in_a_pad, const char *path, int want_path) {
    const int n = 40, k = 72; /* a whole k tile and a part: copies pay */
    const int lda = c_in_a_pad ? 2 * k : k, ldb = n, ldc = c_in_a_pad ? lda : n;
    const size_t cel = ct == CARVE_DTYPE_F32 ? 4 : 2;
    const size_t asz = (size_t)m * lda, bsz = (size_t)k * ldb, csz = (size_t)m * ldc;
    uint16_t *hA = malloc(asz * 2), *hB = malloc(bsz * 2), *outA = malloc(asz * 2);
    unsigned char *outC = malloc(csz * cel);
    double *ref = malloc((size_t)m * n * sizeof(double));
    if (!hA || !hB || !outA || !outC || !ref) {
        fprintf(stderr, "FAIL: host allocation\n");
        exit(1);
    }
    for (size_t i = 0; i < asz; i++)
        hA[i] = (int)(i % lda) < k ? f2bf(rand_in()) : 0xFFFF; /* padding: NaN */
    for (size_t i = 0; i < bsz; i++)
        hB[i] = f2bf(rand_in());
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double acc = 0;
            for (int kk = 0; kk < k; kk++)
                acc += (double)bf2f(hA[(size_t)i * lda + kk]) * (double)bf2f(hB[(size_t)kk * ldb + j]);
            ref[(size_t)i * n + j] = acc;
        }
    void *pa, *pb, *pc = NULL;
    CHECK_OK(arena, carve_alloc(arena, asz * 2 + a_off, NULL, &pa));
    CHECK_OK(arena, carve_alloc(arena, bsz * 2 + b_off, NULL, &pb));
    char *dA = (char *)pa + a_off, *dB = (char *)pb + b_off, *dC;
    if (c_in_a_pad) {
        dC = dA + 2 * k;
    } else {
        CHECK_OK(arena, carve_alloc(arena, csz * cel + c_off, NULL, &pc));
        dC = (char *)pc + c_off;
        CUDA_OK(cudaMemset(dC, 0xFF, csz * cel));
    }
    CUDA_OK(cudaMemcpy(dA, hA, asz * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dB, hB, bsz * 2, cudaMemcpyHostToDevice));
    setenv("CARVE_GEMM_PATH", path, 1);
    carve_status st = carve_gemm(ws, NULL, CARVE_ROW_MAJOR, CARVE_NO_TRANS, CARVE_NO_TRANS, m, n, k, 1.f, dA, lda,
                                 dB, ldb, 0.f, dC, ldc, CARVE_DTYPE_BF16, ct);
    const int ran = carve__gemm_tc_last_path();
    CHECK_OK(NULL, st);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(outA, dA, asz * 2, cudaMemcpyDeviceToHost));
    if (c_in_a_pad)
        memcpy(outC, outA, csz * cel); /* C's elements are A's padding columns */
    else
        CUDA_OK(cudaMemcpy(outC, dC, csz * cel, cudaMemcpyDeviceToHost));
    size_t wrong = 0, a_changed = 0, pad_changed = 0;
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < ldc; j++) {
            const size_t at = (size_t)i * ldc + j, col = c_in_a_pad ? (size_t)j - (size_t)k : (size_t)j;
            if (c_in_a_pad && j < k) { /* A's own columns */
                a_changed += outA[at] != hA[at];
                continue;
            }
            if (col >= (size_t)n) {
                uint16_t h;
                memcpy(&h, outC + at * cel, 2);
                pad_changed += h != 0xFFFF;
                continue;
            }
            const double r = ref[(size_t)i * n + col];
            if (cel == 4) {
                float x;
                memcpy(&x, outC + 4 * at, 4);
                wrong += !(x == (float)r);
            } else {
                uint16_t x;
                memcpy(&x, outC + 2 * at, 2);
                wrong += x != f2bf((float)r);
            }
        }
    }
    for (size_t i = 0; !c_in_a_pad && i < asz; i++)
        a_changed += outA[i] != hA[i];
    test_checks += 2;
    if (wrong || a_changed || pad_changed) {
        char d[256];
        snprintf(d, sizeof d, "%s: %zu of C wrong, %zu of A changed, %zu padding elements written", name, wrong,
                 a_changed, pad_changed);
        test_fail(__FILE__, __LINE__, "edge layout", d);
    }
    if (ran != want_path) {
        char d[128];
        snprintf(d, sizeof d, "%s: ran path %d, want %d", name, ran, want_path);
        test_fail(__FILE__, __LINE__, "edge layout path", d);
    }
    printf("%s %s (path %s)\n", wrong || a_changed || pad_changed || ran != want_path ? "FAIL" : "ok  ", name,
           ran == 4 ? "decode" : ran == 3 ? "tiny" : ran == 2 ? "stream" : ran == 1 ? "wgmma" : "mma");
    CHECK_OK(arena, carve_free(arena, pa));
    CHECK_OK(arena, carve_free(arena, pb));
    CHECK_OK(arena, carve_free(arena, pc));
    free(hA);
    free(hB);
    free(outA);
    free(outC);
    free(ref);
}

static void edge_layouts(carve_arena *arena) {
    const int wg = g_cc == 90 ? 1 : 0; /* where the wgmma path exists */
    const int st = g_cc == 90 ? 2 : 0; /* where the streaming kernel exists */
    const int dc = g_cc == 90 ? 4 : 0; /* where the decode kernel exists */
    const carve_dtype f32 = CARVE_DTYPE_F32, bf16 = CARVE_DTYPE_BF16;
    /* Operands on 2 bytes but not 16: legal; wgmma through aligned copies
     * with workspace, mma.sync without. */
    edge_layout(arena, arena, 70, "A, B 2 and 6 bytes in, fp32 C 4 bytes in", 2, 6, 4, f32, 0, "wgmma", wg);
    if (wg)
        CHECK(carve__gemm_tc_last_copies() == 3);
    edge_layout(arena, NULL, 70, "A, B 2 and 6 bytes in, no workspace", 2, 6, 4, f32, 0, "wgmma", 0);
    edge_layout(arena, arena, 70, "A 2 bytes in, bf16 C", 2, 0, 0, bf16, 0, "wgmma", wg);
    if (wg)
        CHECK(carve__gemm_tc_last_copies() == 1);
    /* C only on its own element size: both paths' epilogues. */
    edge_layout(arena, arena, 70, "bf16 C 2 bytes in", 0, 0, 2, bf16, 0, "wgmma", wg);
    edge_layout(arena, arena, 70, "fp32 C 4 bytes in", 0, 0, 4, f32, 0, "wgmma", wg);
    edge_layout(arena, arena, 70, "fp32 C 4 bytes in, mma.sync", 0, 0, 4, f32, 0, "mma", 0);
    /* C in A's padding columns: no byte in common, legal (it used to be
     * refused by comparing spans). */
    edge_layout(arena, arena, 70, "C in A's padding", 0, 0, 0, bf16, 1, "wgmma", wg);
    edge_layout(arena, arena, 70, "C in A's padding, mma.sync", 0, 0, 0, bf16, 1, "mma", 0);
    /* Decode shapes: the streaming kernel takes them on Hopper, whatever A
     * and C are (A staged element by element, C stored element by
     * element), under CARVE_GEMM_PATH=stream up to 32 rows (the kernel's
     * two 16-row tiles), with B on 16 bytes or off them (read in place).
     * The automatic choice gives these 40 columns to wgmma (the streaming
     * kernel only from 8192 columns): with workspace through copies of
     * the operands off 16 bytes, without it as they are, or on mma.sync
     * where one would need a copy. No workspace: the streaming kernel
     * needs none. */
    edge_layout(arena, NULL, 20, "m 20: A 2 bytes in, fp32 C 4 bytes in, stream", 2, 0, 4, f32, 0, "stream", st);
    edge_layout(arena, NULL, 20, "m 20: A 2 bytes in, bf16 C 2 bytes in, stream", 2, 0, 2, bf16, 0, "stream", st);
    edge_layout(arena, NULL, 3, "m 3: bf16 C 2 bytes in, auto", 0, 0, 2, bf16, 0, "auto", dc);
    edge_layout(arena, NULL, 4, "m 4: A 2 bytes in, fp32 C 4 bytes in, auto", 2, 0, 4, f32, 0, "auto", 0);
    edge_layout(arena, NULL, 20, "m 20: C in A's padding, stream", 0, 0, 0, bf16, 1, "stream", st);
    edge_layout(arena, NULL, 3, "m 3: C in A's padding, auto", 0, 0, 0, bf16, 1, "auto", dc);
    edge_layout(arena, NULL, 20, "m 20: fp32 C 4 bytes in, decode", 0, 0, 4, f32, 0, "decode", dc);
    edge_layout(arena, NULL, 70, "m 70: bf16 C 2 bytes in, decode", 0, 0, 2, bf16, 0, "decode", dc);
    edge_layout(arena, NULL, 20, "m 20: C in A's padding, decode", 0, 0, 0, bf16, 1, "decode", dc);
    edge_layout(arena, NULL, 20, "m 20: A 2 bytes in, decode (falls to mma.sync without workspace)", 2, 0, 0, bf16, 0,
                "decode", 0);
    edge_layout(arena, arena, 20, "m 20: B 6 bytes in, stream", 0, 6, 0, f32, 0, "stream", st);
    edge_layout(arena, arena, 20, "m 20: B 6 bytes in, auto", 0, 6, 0, bf16, 0, "auto", wg);
    if (wg)
        CHECK(carve__gemm_tc_last_copies() == 2);
    edge_layout(arena, NULL, 3, "m 3: A, B 2 and 6 bytes in, bf16 C 2 bytes in, auto", 2, 6, 2, bf16, 0, "auto", 0);
    edge_layout(arena, NULL, 32, "m 32: B 6 bytes in, C in A's padding, stream", 0, 6, 0, bf16, 1, "stream", st);
    /* Past the plan's line the automatic choice is wgmma: through a copy of
     * A (2 bytes in) with workspace, mma.sync without. */
    edge_layout(arena, arena, 5, "m 5: A 2 bytes in, fp32 C 4 bytes in, auto", 2, 0, 4, f32, 0, "auto", wg);
    if (wg)
        CHECK(carve__gemm_tc_last_copies() == 1);
    edge_layout(arena, NULL, 16, "m 16: A 2 bytes in, no workspace, auto", 2, 0, 4, f32, 0, "auto", 0);
}

/* ---- split-K and workspace ------------------------------------------------ */

static tcase base_case(int m, int n, int k, int lay, int v) {
    tcase c;
    memset(&c, 0, sizeof c);
    c.m = m, c.n = n, c.k = k;
    c.order = (lay & 4) ? CARVE_COL_MAJOR : CARVE_ROW_MAJOR;
    c.ta = (lay & 2) ? CARVE_TRANS : CARVE_NO_TRANS;
    c.tb = (lay & 1) ? CARVE_TRANS : CARVE_NO_TRANS;
    c.ab = (v & 1) ? CARVE_DTYPE_F16 : CARVE_DTYPE_BF16;
    c.c = (v & 2) ? CARVE_DTYPE_F32 : c.ab;
    c.alpha = v % 3 == 0 ? 1.5f : 1.f;
    c.beta = (v / 2) % 2 ? 0.5f : 0.f;
    c.pad = 1;
    c.path = 1;
    c.want_path = c.want_splits = -1;
    return c;
}

/* Decode and odd shapes with 1 to 8 splits forced and the plan's own
 * choice, every layout in turn, exact and odd leading dimensions (odd ones
 * go through the copies and split too). */
static int split_k_cases(carve_arena *arena, cublasHandle_t h, int quick) {
    static const int full[][3] = {
        {1, 4096, 4096}, {16, 4096, 4096}, {16, 12288, 4096}, {128, 4096, 14336},
        {64, 1000, 4097}, {200, 4097, 1001}, {256, 4096, 4096}, {5, 72, 130},
    };
    static const int small[][3] = {{16, 256, 2048}, {3, 200, 1000}, {130, 260, 720}, {5, 72, 130}};
    const int (*sh)[3] = quick ? small : full;
    const int nsh = quick ? (int)(sizeof small / sizeof small[0]) : (int)(sizeof full / sizeof full[0]);
    int n = 0;
    for (int si = 0; si < nsh; si++)
        for (int s = 0; s <= 8; s++) {
            tcase c = base_case(sh[si][0], sh[si][1], sh[si][2], (s + si) % 8, s + 2 * si);
            c.splits = s;
            c.pad = (s + si) % 3 != 0;
            run_case(arena, h, &c);
            n++;
        }
    return n;
}

/* Workspace that cannot be had, and other streams. */
static int workspace_cases(carve_arena *arena, cublasHandle_t h) {
    int n = 0;
    const int wg = g_cc == 90;
    /* No arena: odd rows run on mma.sync, aligned ones on wgmma unsplit. */
    tcase c = base_case(999, 1023, 1001, 0, 0);
    c.pad = 0;
    c.ws = 1;
    run_case(arena, h, &c), n++;
    c = base_case(16, 4096, 4096, 0, 1);
    c.ws = 1;
    run_case(arena, h, &c), n++;
    /* An arena of 2 MiB: 8 splits of 64 x 4096 fp32 (8 MiB) do not fit,
     * so the call runs unsplit; an aligned copy of a 2000 x 1001 A (4 MB)
     * does not fit, so it runs on mma.sync; 2 splits of 16 x 4096 (512 KiB)
     * fit. */
    c = base_case(64, 4096, 4096, 0, 2);
    c.ws = 2, c.splits = 8, c.want_path = wg, c.want_splits = 1;
    run_case(arena, h, &c), n++;
    c = base_case(2000, 1000, 1001, 0, 0);
    c.pad = 0;
    c.ws = 2, c.want_path = 0, c.want_splits = 1;
    run_case(arena, h, &c), n++;
    c = base_case(16, 4096, 4096, 1, 3);
    c.ws = 2, c.splits = 2, c.want_path = wg, c.want_splits = wg ? 2 : 1;
    run_case(arena, h, &c), n++;
    /* Split-K and copies on the per-thread stream and on a stream of our
     * own (its workspace carved for that stream). */
    cudaStream_t own;
    CUDA_OK(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking));
    for (int i = 0; i < 4; i++) {
        c = base_case(i < 2 ? 16 : 33, 4096, i < 2 ? 4096 : 2049, i, i);
        c.pad = i < 2;
        c.stream = (i % 2) ? (carve_stream)cudaStreamPerThread : (carve_stream)own;
        run_case(arena, h, &c), n++;
    }
    CUDA_OK(cudaStreamSynchronize(own));
    CUDA_OK(cudaStreamDestroy(own));
    return n;
}

/* Tiny products under the automatic path (carve_tc_tiny: at most 4096
 * multiply-adds and k at most 64, where the streaming kernel does not take
 * them), every layout, both input types and outputs, alpha and beta (a
 * 16-bit C with beta 0.5 too), padded and dense leading dimensions; and
 * the first shapes past the line (4097 and more multiply-adds, k of 65 or
 * more), which must not take it. Each case checks the path the plan
 * predicts. */
static int tiny_cases(carve_arena *arena, cublasHandle_t h) {
    static const int sh[][3] = {{1, 1, 1},   {7, 13, 17},  {2, 3, 60},  {16, 16, 16}, {64, 1, 64},
                                {5, 1, 64},  {17, 16, 16}, {1, 1, 65},  {2, 3, 600},  {64, 64, 2}};
    int n = 0;
    for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++)
        for (int lay = 0; lay < 8; lay++) {
            tcase c = base_case(sh[i][0], sh[i][1], sh[i][2], lay, (int)(i + lay) & 3);
            c.path = 0;
            c.pad = (int)(i + lay) % 2;
            c.beta = lay % 3 == 1 ? 0.5f : 0.f; /* any output type */
            run_case(arena, h, &c);
            n++;
        }
    return n;
}

/* Decode shapes on the plan's own path (CARVE_GEMM_PATH=auto): the
 * streaming kernel where the plan chooses it (canonical M <= 4 with
 * N >= 8192, M <= 2 with N >= 4096; M <= 16 with N >= 1024, B K-major 4096 (8 rows from 3072,
 * 4 from 1024), where B's rows are
 * off 16 bytes: the dense layouts of an odd n or k; but the decode kernel
 * where it takes the call in 64-column blocks whose k splits:
 * carve_tc_stream_yields), the
 * decode kernel, wgmma or mma.sync elsewhere, and
 * predict() says which (its cluster size too, which for 2 x 8192 x 13000
 * differs with B's layout: 2 N-major, 3 K-major). Every shape the plan gives wgmma (m = 7 and 8 on
 * narrower outputs, m = 16 .. 33), and every one of 1 or 2 rows on 4096 to
 * 8448 columns (among them those the decode kernel takes: 4096 to 4224
 * columns on an H100), runs again under CARVE_GEMM_PATH=stream,
 * which keeps up to 32 rows on the streaming kernel (17 .. 32: its second
 * 16-row tile) and sends m = 33 to wgmma all the same. Every layout in
 * turn (A and B each K-major or MN-major: the kernel's four variants); for
 * column-major calls the shape's m and n swap, so that the canonical M
 * (the caller's n) is the small one. m = 1, 3, 6 and 8 on 12288 and 14336
 * columns, 1 on 8200 and 2 on 8192 (on and just past the plan's line), 12 on
 * 12289, 9 on 1025 and 16 on 1023 (either side of the line where an
 * N-major B's rows are off 16 bytes), 5 on 4097 (the same for a K-major
 * B), 4 on 1024 with k of 3001 and 9 on 3072 (the K-major lines at 4 rows
 * from 1024 columns and 8 from 3072; 7 on 3073 in the quick run), 3 on
 * 2200 and 2 on 3072 with k of 2049 and 6145 (its cluster sizes 6 and 8
 * there: carve_tc_stream_plan_cluster; 3 on 2200 in the full run only),
 * 1 on 1025 and 2 on 1537 with k past 2048 (clusters of
 * up to 8 under the plan at 4 rows or fewer), 2 on 4096 and 1 and 3 on 4096-4100 (either side of
 * the line for 1 or 2 rows), 7 on 12280 (just narrower), 8 on 11008 and 7,
 * 16, 17, 31, 32 and 33 (the first past the kernel's limit), n and k that
 * are not multiples of 8 (the last group of columns of an N-major B, the
 * last 8 rows of a K-major one, load element by element; the last k step
 * is cut), beta 0 and 0.5, both input and output types, padded and dense
 * leading dimensions (dense odd rows of B: read in place by the streaming
 * kernel, copied for wgmma), the
 * plan's cluster size and forced ones (1 to 8, so every size of the
 * cluster's reduction runs), and a NULL arena (the streaming kernel needs
 * no workspace). */
static int stream_cases(carve_arena *arena, cublasHandle_t h, int quick) {
    static const int full[][3] = {
        {1, 4096, 4096}, {3, 4100, 4103}, {8, 11008, 4096}, {16, 4096, 14336}, {32, 4096, 4096},
        {1, 1000, 1001}, {3, 65, 17},     {8, 7, 129},      {16, 1, 64},       {32, 200, 1},
        {17, 4101, 333}, {31, 8200, 3000}, {33, 4096, 1000}, {6, 12288, 1000}, {8, 14336, 4096},
        {7, 12280, 300},  {1, 8200, 700},   {12, 12289, 300}, {2, 8192, 13000}, {9, 1025, 300},
        {3, 4095, 129},   {5, 4097, 301},   {2, 4096, 600},   {8, 3072, 1001},  {9, 3072, 301},
        {2, 1537, 2100},  {4, 1024, 3001},  {5, 1024, 301},   {16, 1023, 200},  {2, 3072, 6145},
        {3, 2200, 2049},
        /* A shape's unpadded layouts (dense leading dimensions, so B's rows
         * are off 16 bytes where its row length is) have a K-major B only
         * at indexes 0 and 2 mod 3: every shape for a K-major line sits at
         * one; those at 1 mod 3 (1025, 1537 and 1023 columns, 4096 x 600)
         * are for N-major B or for no layout in particular. */
    };
    static const int small[][3] = {
        {1, 1000, 1001}, {3, 65, 17},     {8, 7, 129},  {16, 130, 300}, {32, 200, 65},
        {17, 77, 333},   {33, 64, 200},   {6, 12288, 72}, {1, 8200, 72}, {12, 12289, 72},
        {9, 1025, 72},   {5, 4097, 73},   {2, 4096, 72}, {1, 1025, 2049}, {3, 2200, 2049},
        {7, 3073, 301},  {1, 4100, 2100},
    };
    const int (*sh)[3] = quick ? small : full;
    const int nsh = quick ? (int)(sizeof small / sizeof small[0]) : (int)(sizeof full / sizeof full[0]);
    int n = 0;
    for (int si = 0; si < nsh; si++) {
        /* Canonical M and N are the shape's m and n in both orders. */
        const int forced_too = !carve_tc_stream_chosen(sh[si][0], sh[si][1], 1, 0, 0) ||
                               (sh[si][0] <= 2 && sh[si][1] >= 4096 && sh[si][1] <= 8448);
        for (int path = 0; path <= (forced_too ? 3 : 0); path += 3)
            for (int lay = 0; lay < 8; lay++) {
                const int col = lay & 4;
                tcase c = base_case(col ? sh[si][1] : sh[si][0], col ? sh[si][0] : sh[si][1], sh[si][2], lay,
                                    lay + si + path);
                c.path = path;
                c.beta = (lay + si + path) % 2 ? 0.5f : 0.f;
                c.pad = (lay + si) % 3 != 0;
                c.splits = (lay + 2 * si) % 4 == 1 ? 1 + (lay + si) % 8 : 0;
                c.ws = (lay + si) % 5 == 4; /* NULL arena */
                run_case(arena, h, &c);
                n++;
            }
    }
    /* Every cluster size on one shape that has a step for each warp of 8
     * blocks, row-major NN and NT (B N-major and K-major), both output
     * types, under CARVE_GEMM_PATH=stream; m = 19 (two row tiles), m = 4
     * (one) in quick mode. */
    for (int s = 1; s <= 16; s++) {
        tcase c = base_case(quick ? 4 : 19, quick ? 264 : 2056, quick ? 2049 : 4100, s > 8, s);
        c.path = 3;
        c.splits = 1 + (s - 1) % 8;
        run_case(arena, h, &c);
        n++;
    }
    return n;
}

/* The decode kernel (CARVE_GEMM_PATH=decode; lib/kernels/gemm_tc_decode.cuh):
 * M from 1 to 256 (each narrow width 8 to 256, and past it, 257), N
 * and k off every tile (1, 65, 127, 129, 4101 columns: an N-major B's
 * second box of 64 wholly past N or cut; k of 1, 63, 65, 4097), every
 * layout (A MN-major and rows off 16 bytes fall to the wgmma path, which
 * the case predicts), beta 0 and 0.5, both input and output types, the
 * plan's cluster size and forced ones (1, 2, 4, 8: every size of the
 * cluster's reduction), the plan's block width and both forced (64
 * columns only up to 128 rows: past it the case predicts 128), a NULL
 * arena (no workspace needed). */
static int decode_cases(carve_arena *arena, cublasHandle_t h, int quick) {
    static const int full[][3] = {
        {1, 4096, 4096}, {8, 4096, 4096}, {16, 4096, 14336}, {33, 1000, 1001}, {64, 12288, 1024},
        {7, 129, 65},    {64, 130, 64},   {9, 8200, 700},    {17, 65, 129},    {32, 4101, 333},
        {48, 200, 4097}, {2, 1, 64},      {5, 127, 4097},    {1, 64, 1},       {65, 256, 256},
        {3, 28672, 512}, {24, 1, 63},     {40, 2050, 2049},  {128, 4096, 4096}, {200, 1000, 1001},
        {256, 2049, 700}, {257, 300, 300}, {97, 8, 129},
    };
    static const int small[][3] = {
        {1, 200, 72}, {8, 130, 300}, {17, 65, 129}, {33, 77, 200}, {64, 130, 64},  {2, 1, 64},
        {5, 127, 257}, {1, 64, 1},   {24, 1, 63},   {65, 64, 64},  {130, 200, 72}, {256, 65, 129},
        {257, 64, 64},
    };
    const int (*sh)[3] = quick ? small : full;
    const int nsh = quick ? (int)(sizeof small / sizeof small[0]) : (int)(sizeof full / sizeof full[0]);
    int n = 0;
    for (int si = 0; si < nsh; si++)
        for (int lay = 0; lay < 8; lay++) {
            const int col = lay & 4;
            tcase c = base_case(col ? sh[si][1] : sh[si][0], col ? sh[si][0] : sh[si][1], sh[si][2], lay, lay + si);
            c.path = 4;
            c.beta = (lay + si) % 2 ? 0.5f : 0.f;
            c.pad = (lay + si) % 3 != 0;
            c.splits = (lay + 2 * si) % 4 == 1 ? 1 << ((lay + si) % 4) : 0;
            c.ws = (lay + si) % 5 == 4; /* NULL arena */
            c.cols = (lay + 2 * si) % 3 == 0 ? 64 : (lay + 2 * si) % 3 == 1 ? 128 : 0;
            run_case(arena, h, &c);
            n++;
        }
    /* The plan's line at 33-64 rows (one wave of 128-column tiles, k of 64
     * tiles or more) under the automatic path, and either side of it: at
     * 4032 (63 k tiles) and past one wave (16897 columns on 132 SMs) the
     * wgmma kernel. */
    static const int wave_full[][3] = {{48, 11008, 4096}, {64, 9000, 4033}, {40, 11008, 4032}, {33, 16897, 4096},
                                       {64, 16896, 5000}, {65, 11008, 4096}};
    static const int wave_small[][3] = {{48, 11008, 4096}, {40, 11008, 4032}};
    const int (*wv)[3] = quick ? wave_small : wave_full;
    const int nwv = quick ? 2 : (int)(sizeof wave_full / sizeof wave_full[0]);
    for (int si = 0; si < nwv; si++)
        for (int lay = 0; lay < 8; lay++) {
            const int col = lay & 4;
            tcase c = base_case(col ? wv[si][1] : wv[si][0], col ? wv[si][0] : wv[si][1], wv[si][2], lay, lay + si);
            c.path = 0;
            c.beta = (lay + si) % 2 ? 0.5f : 0.f;
            c.pad = (lay + si) % 3 != 0;
            run_case(arena, h, &c);
            n++;
        }
    /* Every cluster size at both block widths on one shape with k for 8
     * shares, row-major NN and NT (B N-major and K-major), both output
     * types: 64 columns in clusters of 8 add 8 columns a block. */
    for (int s = 1; s <= 16; s++) {
        tcase c = base_case(quick ? 4 : 19, quick ? 264 : 2056, quick ? 2049 : 4100, (s - 1) % 8 > 3, s);
        c.path = 4;
        c.splits = 1 << ((s - 1) % 4);
        c.cols = s > 8 ? 64 : 128;
        run_case(arena, h, &c);
        n++;
    }
    return n;
}

/* ---- chains: each call reads what the call before wrote ------------------
 *
 * The Hopper kernels start early under programmatic dependent launch
 * (gemm_tc_common.cuh: each waits for the kernel before it on the stream
 * before it touches memory; by default a call's first kernel too where it
 * is the streaming or the decode kernel, every call's first kernel under
 * CARVE_GEMM_PDL=2, which the chains also run), so a chain of calls on one
 * stream with no host wait between them is the case to prove: X[i+1] = X[i] * W, each
 * link on its own path (the plan's, wgmma split or not, the streaming
 * kernel with its own or a forced cluster size, mma.sync, and cuBLAS's
 * kernels between them), every X but the first NaN before the chain. W is
 * a permutation of columns with signs (one +-1 a column), so each link's
 * output is exact and known on the host, and a link that read its input
 * before the link before it had written it shows NaN or stale values. Rows
 * of X on K elements (16-byte rows) and on K + 1 (A's and C's rows off 16
 * bytes: the wgmma path copies A first, another kernel in the chain). The
 * chain runs on a non-blocking stream, then once more captured into a CUDA
 * graph (a graph pool holding the workspace) and replayed twice. The
 * chain's X are checked where a link ran, whatever path it ran. */
enum { CH_K = 4096, CH_LINKS = 10 };
typedef struct {
    int path; /* as tcase: 0 auto, 1 wgmma, 2 mma, 3 stream; 4 cuBLAS, 5 decode */
    int splits;
    int tb; /* B K-major */
} chain_link;

static const chain_link chain_links[CH_LINKS] = {
    {0, 0, 0}, {1, 4, 0}, {3, 0, 1}, {4, 0, 0}, {1, 1, 1}, {2, 0, 0}, {0, 0, 1}, {1, 3, 0}, {3, 2, 0}, {5, 2, 1},
};

/* One pass of the chain on s (cuBLAS links on carve's own plan when
 * !with_cublas);
 * *ran: bit path of each carve link that ran (1 wgmma, 2 stream), bit 4
 * when a wgmma link split. */
static void chain_pass(carve_arena *arena, cublasHandle_t h, cudaStream_t s, int m, int ld, void *const *dX,
                       void *const *dW, int with_cublas, int *ran) {
    for (int i = 1; i <= CH_LINKS; i++)
        CUDA_OK(cudaMemsetAsync(dX[i], 0xFF, (size_t)m * ld * 2, s));
    for (int i = 0; i < CH_LINKS; i++) {
        const chain_link *l = &chain_links[i];
        const void *W = dW[2 * (i & 1) + l->tb];
        if (l->path == 4 && with_cublas) {
            const float one = 1.f, zero = 0.f;
            cublasStatus_t bs = cublasGemmEx(h, l->tb ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, CH_K, m, CH_K, &one,
                                             W, CUDA_R_16BF, CH_K, dX[i], CUDA_R_16BF, ld, &zero, dX[i + 1],
                                             CUDA_R_16BF, ld, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
            CHECK(bs == CUBLAS_STATUS_SUCCESS);
            continue;
        }
        force_path(l->path == 4 ? 0 : l->path == 5 ? 4 : l->path, l->splits); /* a cuBLAS link on carve: the plan's */
        carve_status st = carve_gemm(arena, s, CARVE_ROW_MAJOR, CARVE_NO_TRANS, l->tb ? CARVE_TRANS : CARVE_NO_TRANS,
                                     m, CH_K, CH_K, 1.f, dX[i], ld, W, CH_K, 0.f, dX[i + 1], ld, CARVE_DTYPE_BF16,
                                     CARVE_DTYPE_BF16);
        CHECK(st == CARVE_OK);
        if (st != CARVE_OK)
            fprintf(stderr, "  chain link %d: %s\n", i, carve_last_error(NULL));
        const int p = carve__gemm_tc_last_path();
        *ran |= p == 1 ? 1 : p == 2 ? 2 : p == 4 ? 8 : 0;
        if (p == 1 && carve__gemm_tc_last_splits() > 1)
            *ran |= 4;
    }
    unsetenv("CARVE_GEMM_SPLITK");
    unsetenv("CARVE_GEMM_PATH");
}

/* Every X of the chain against the host's; returns the first wrong link
 * + 1, 0 when all are right. */
static int chain_check(int m, int ld, void *const *dX, const uint16_t *hX, uint16_t *buf) {
    int link = 0;
    for (int i = 1; i <= CH_LINKS; i++) {
        CUDA_OK(cudaMemcpy(buf, dX[i], (size_t)m * ld * 2, cudaMemcpyDeviceToHost));
        long bad = 0;
        for (int r = 0; r < m; r++)
            for (int c = 0; c < CH_K; c++)
                bad += buf[(size_t)r * ld + c] != hX[((size_t)i * m + r) * CH_K + c];
        test_checks++;
        if (bad && !link) {
            link = i;
            char msg[128];
            snprintf(msg, sizeof msg, "m=%d ld=%d link %d (path %d, splits %d): %ld elements wrong", m, ld, i - 1,
                     chain_links[i - 1].path, chain_links[i - 1].splits, bad);
            test_fail(__FILE__, __LINE__, "a chained carve_gemm reads what the call before it wrote", msg);
        }
    }
    return link;
}

static int chain_cases(carve_arena *arena, cublasHandle_t h) {
    /* W0, W1 (permutations p, q with signs), each N-major and K-major. */
    const size_t wsz = (size_t)CH_K * CH_K;
    uint16_t *hW = calloc(wsz, 2);
    int *perm = malloc(2 * CH_K * sizeof(int));
    float *sign = malloc(2 * CH_K * sizeof(float));
    if (!hW || !perm || !sign) {
        fprintf(stderr, "FAIL: host allocation\n");
        exit(1);
    }
    void *dW[4];
    for (int w = 0; w < 2; w++) {
        int *p = perm + w * CH_K;
        for (int n = 0; n < CH_K; n++)
            p[n] = n;
        for (int n = CH_K - 1; n > 0; n--) { /* Fisher-Yates */
            int j = (int)test_rng_below(&rng, (uint64_t)n + 1), t = p[n];
            p[n] = p[j], p[j] = t;
        }
        for (int n = 0; n < CH_K; n++)
            sign[w * CH_K + n] = test_rng_below(&rng, 2) ? 1.f : -1.f;
        for (int kmaj = 0; kmaj < 2; kmaj++) {
            memset(hW, 0, wsz * 2);
            for (int n = 0; n < CH_K; n++) { /* W[k][n] = sign_n where k = p[n] */
                const size_t at = kmaj ? (size_t)n * CH_K + p[n] : (size_t)p[n] * CH_K + n;
                hW[at] = f2bf(sign[w * CH_K + n]);
            }
            CHECK_OK(arena, carve_alloc(arena, wsz * 2, NULL, &dW[2 * w + kmaj]));
            CUDA_OK(cudaMemcpy(dW[2 * w + kmaj], hW, wsz * 2, cudaMemcpyHostToDevice));
        }
    }
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_OK(cublasSetStream(h, s) == CUBLAS_STATUS_SUCCESS ? cudaSuccess : cudaErrorUnknown);
    static const int ms[] = {1, 4, 24};
    int n = 0, ran_all = 0;
    /* As the environment says (by default each call's kernels after its
     * first, and the first where it is the streaming or the decode kernel),
     * then with each call's first kernel too (CARVE_GEMM_PDL=2), unless the
     * environment turned it off. */
    const char *env = getenv("CARVE_GEMM_PDL");
    char saved[16] = "";
    const int had = env != NULL, passes = env && env[0] == '0' ? 1 : 2;
    if (had)
        snprintf(saved, sizeof saved, "%s", env);
    for (int across = 0; across < passes; across++)
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
        for (int odd = 0; odd < 2; odd++) {
            const int m = ms[mi], ld = CH_K + odd;
            if (across)
                setenv("CARVE_GEMM_PDL", "2", 1);
            /* X[i] on the host, exact: X[i+1][r][c] = sign_c X[i][r][p(c)] */
            uint16_t *hX = malloc((size_t)(CH_LINKS + 1) * m * CH_K * 2), *buf = malloc((size_t)m * ld * 2);
            if (!hX || !buf) {
                fprintf(stderr, "FAIL: host allocation\n");
                exit(1);
            }
            for (size_t e = 0; e < (size_t)m * CH_K; e++) { /* no zeros: a product of -1 and 0 is +0, not -0 */
                const float v = rand_in();
                hX[e] = f2bf(v != 0.f ? v : 0.5f);
            }
            for (int i = 0; i < CH_LINKS; i++) {
                const int w = i & 1;
                for (int r = 0; r < m; r++)
                    for (int c = 0; c < CH_K; c++) {
                        uint16_t v = hX[((size_t)i * m + r) * CH_K + perm[w * CH_K + c]];
                        hX[((size_t)(i + 1) * m + r) * CH_K + c] = sign[w * CH_K + c] < 0 ? v ^ 0x8000u : v;
                    }
            }
            void *dX[CH_LINKS + 1];
            for (int i = 0; i <= CH_LINKS; i++)
                CHECK_OK(arena, carve_alloc(arena, (size_t)m * ld * 2, NULL, &dX[i]));
            CUDA_OK(cudaMemset(dX[0], 0xFF, (size_t)m * ld * 2));
            CUDA_OK(cudaMemcpy2D(dX[0], (size_t)ld * 2, hX, (size_t)CH_K * 2, (size_t)CH_K * 2, (size_t)m,
                                 cudaMemcpyHostToDevice));
            CUDA_OK(cudaDeviceSynchronize());

            /* Direct, with cuBLAS links; twice (the second finds the
             * workspace in the stream's cache). */
            for (int rep = 0; rep < 2; rep++) {
                int ran = 0;
                chain_pass(arena, h, s, m, ld, dX, dW, 1, &ran);
                CUDA_OK(cudaStreamSynchronize(s));
                ran_all |= ran;
                if (chain_check(m, ld, dX, hX, buf) == 0 && rep == 0)
                    printf("ok   chain m=%d ld=%d%s: %d links (paths ran: %s%s%s%s)\n", m, ld,
                           across ? " CARVE_GEMM_PDL=2" : "", CH_LINKS, ran & 1 ? "wgmma " : "", ran & 4 ? "split " : "",
                           ran & 2 ? "stream " : "", ran & 8 ? "decode" : "");
                n++;
            }

            /* Captured (cuBLAS's links on carve: its own workspace rules
             * under capture are not what this tests), replayed twice; the
             * graph sets every X but the first to NaN first. */
            carve_graph_pool *g = NULL;
            CHECK_OK(arena, carve_graph_pool_create(arena, &g));
            CHECK_OK(arena, carve_graph_pool_begin(arena, g, (carve_stream)s));
            int ran = 0;
            chain_pass(arena, h, s, m, ld, dX, dW, 0, &ran); /* the warm-up: g maps the workspace */
            CUDA_OK(cudaStreamSynchronize(s));
            cudaGraph_t graph;
            cudaGraphExec_t exec;
            CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
            chain_pass(arena, h, s, m, ld, dX, dW, 0, &ran);
            CUDA_OK(cudaStreamEndCapture(s, &graph));
            CHECK_OK(arena, carve_graph_pool_end(arena, g, (carve_stream)s));
            CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
            for (int rep = 0; rep < 2; rep++) {
                CUDA_OK(cudaGraphLaunch(exec, s));
                CUDA_OK(cudaStreamSynchronize(s));
                if (chain_check(m, ld, dX, hX, buf) == 0 && rep == 0)
                    printf("ok   chain m=%d ld=%d%s: captured and replayed\n", m, ld, across ? " CARVE_GEMM_PDL=2" : "");
                n++;
            }
            CUDA_OK(cudaGraphExecDestroy(exec));
            CUDA_OK(cudaGraphDestroy(graph));
            CHECK_OK(arena, carve_graph_pool_release(arena, g));
            for (int i = 0; i <= CH_LINKS; i++)
                carve_free(arena, dX[i]);
            free(hX);
            free(buf);
            if (had)
                setenv("CARVE_GEMM_PDL", saved, 1);
            else
                unsetenv("CARVE_GEMM_PDL");
        }
    /* On Hopper the chain must have run the kernels it is about. */
    if (g_cc == 90) {
        CHECK((ran_all & 15) == 15);
        if ((ran_all & 15) != 15)
            fprintf(stderr, "  chain paths ran: %d (want wgmma, split, stream and decode)\n", ran_all);
    }
    CUDA_OK(cublasSetStream(h, NULL) == CUBLAS_STATUS_SUCCESS ? cudaSuccess : cudaErrorUnknown);
    CUDA_OK(cudaStreamDestroy(s));
    for (int i = 0; i < 4; i++)
        carve_free(arena, dW[i]);
    free(hW);
    free(perm);
    free(sign);
    return n;
}

/* An error left pending before a call (a refused cudaMalloc) is not the
 * call's: it answers CARVE_OK and C is written once. mma.sync's launch
 * once read the pending error as its own and queued the kernel again, so
 * with beta 1 C got A * B twice. Each path (tiny under auto at 16 x 16 x
 * 16); A and B all ones, an fp32 C of ones: every element k + 1. */
static int pending_error_cases(carve_arena *arena) {
    static const char *const paths[5] = {"mma", "wgmma", "stream", "auto", "decode"};
    const int n = 64;
    uint16_t *hab = malloc((size_t)n * n * 2);
    float *hc = malloc((size_t)n * n * 4);
    if (!hab || !hc) {
        fprintf(stderr, "FAIL: host allocation\n");
        exit(1);
    }
    for (int i = 0; i < n * n; i++)
        hab[i] = f2bf(1.f);
    void *dA, *dB, *dC;
    CHECK_OK(arena, carve_alloc(arena, (size_t)n * n * 2, NULL, &dA));
    CHECK_OK(arena, carve_alloc(arena, (size_t)n * n * 2, NULL, &dB));
    CHECK_OK(arena, carve_alloc(arena, (size_t)n * n * 4, NULL, &dC));
    CUDA_OK(cudaMemcpy(dA, hab, (size_t)n * n * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dB, hab, (size_t)n * n * 2, cudaMemcpyHostToDevice));
    for (int p = 0; p < 5; p++) {
        const int m = p == 2 ? 4 : p == 3 ? 16 : p == 4 ? 8 : n, nn = p == 3 ? 16 : n, k = p == 3 ? 16 : n;
        for (int i = 0; i < n * n; i++)
            hc[i] = 1.f;
        CUDA_OK(cudaMemcpy(dC, hc, (size_t)n * n * 4, cudaMemcpyHostToDevice));
        setenv("CARVE_GEMM_PATH", paths[p], 1);
        void *huge = NULL;
        CHECK(cudaMalloc(&huge, (size_t)1 << 62) != cudaSuccess); /* pending now */
        const carve_status st = carve_gemm(arena, NULL, CARVE_ROW_MAJOR, CARVE_NO_TRANS, CARVE_NO_TRANS, m, nn, k, 1.f,
                                           dA, k, dB, nn, 1.f, dC, nn, CARVE_DTYPE_BF16, CARVE_DTYPE_F32);
        const int ran = carve__gemm_tc_last_path();
        CHECK(st == CARVE_OK);
        (void)cudaGetLastError();
        CUDA_OK(cudaDeviceSynchronize());
        CUDA_OK(cudaMemcpy(hc, dC, (size_t)m * nn * 4, cudaMemcpyDeviceToHost));
        int bad = 0;
        for (int i = 0; i < m * nn; i++)
            bad += hc[i] != (float)(k + 1);
        CHECK(bad == 0);
        printf("%s pending error before the call, path %s (ran %d): status %d, %d of %d elements not %d\n",
               st == CARVE_OK && !bad ? "ok  " : "FAIL", paths[p], ran, (int)st, bad, m * nn, k + 1);
    }
    unsetenv("CARVE_GEMM_PATH");
    carve_free(arena, dA);
    carve_free(arena, dB);
    carve_free(arena, dC);
    free(hab);
    free(hc);
    return 5;
}

/* Which launches may start before the work before them ends, read from a
 * captured graph's edges (a launch with programmatic dependent launch is
 * captured as a programmatic edge from the kernel before it). A call is
 * captured right after another kernel (carve_gemm_f32's, launched as any
 * kernel): a call of three kernels on wgmma (split 4, A's rows off 16
 * bytes: a copy of A, the GEMM, the reduction), the same with B copied
 * instead (the copy of B is then the call's first kernel), a call of one
 * (the streaming kernel) and the plan's. On Hopper (where wgmma or the
 * streaming kernel ran: mma.sync and the tiny kernel never get the
 * attribute) the edge into the call's first kernel must be a programmatic
 * one by default where that kernel is the streaming or the decode kernel
 * (memory-bound: placed while the kernel before it ends; it waits for it
 * before it touches memory) and an ordinary one where it is a copy or
 * wgmma, an ordinary one under CARVE_GEMM_PDL=0 and 1, a programmatic one
 * under 2; the later kernels of a call must have programmatic edges by
 * default and under 1 and 2, none under 0. The paths must be the ones
 * named (checked on Hopper, as the chains are). */
static int pdl_edge_cases(carve_arena *arena) {
#if CUDART_VERSION >= 13000 /* cudaGraphGetEdges with edge data, as CUDA 13 names it */
    enum { EM = 8, EN = 1024, EK = 4096 };
    void *dA, *dB, *dC;
    float *dF;
    const int lda = EK + 1, ldb = EN + 1;
    CHECK_OK(arena, carve_alloc(arena, (size_t)EM * lda * 2, NULL, &dA));
    CHECK_OK(arena, carve_alloc(arena, (size_t)EK * ldb * 2, NULL, &dB));
    CHECK_OK(arena, carve_alloc(arena, (size_t)EM * EN * 2, NULL, &dC));
    CHECK_OK(arena, carve_alloc(arena, 3 * 16 * sizeof(float), NULL, (void **)&dF));
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_OK(cudaMemsetAsync(dA, 0, (size_t)EM * lda * 2, s));
    CUDA_OK(cudaMemsetAsync(dB, 0, (size_t)EK * ldb * 2, s));
    CUDA_OK(cudaMemsetAsync(dF, 0, 3 * 16 * sizeof(float), s));
    static const char *const settings[4] = {NULL, "2", "0", "1"};
    enum { NCALLS = 5 };
    static const struct {
        int path, splits, m, lda, ldb;
        int want_ran, want_copies, want_edges; /* on Hopper */
        const char *name;
    } calls[NCALLS] = {
        {1, 4, EM, EK + 1, EN, 1, 1, 3, "wgmma split 4, A copied"},
        {1, 4, EM, EK, EN + 1, 1, 2, 3, "wgmma split 4, B copied"},
        {3, 0, 2, EK, EN, 2, 0, 1, "streaming"},
        {4, 2, EM, EK, EN, 4, 0, 1, "decode"},
        {0, 0, EM, EK, EN, -1, -1, -1, "plan"},
    };
    const char *env = getenv("CARVE_GEMM_PDL");
    char saved[16] = "";
    if (env)
        snprintf(saved, sizeof saved, "%s", env);
    int n = 0;
    for (int set = 0; set < 4; set++) {
        if (settings[set])
            setenv("CARVE_GEMM_PDL", settings[set], 1);
        else
            unsetenv("CARVE_GEMM_PDL");
        for (int ci = 0; ci < NCALLS; ci++) {
            carve_graph_pool *g = NULL;
            CHECK_OK(arena, carve_graph_pool_create(arena, &g));
            CHECK_OK(arena, carve_graph_pool_begin(arena, g, (carve_stream)s));
            cudaGraph_t graph = NULL;
            cudaGraphNode_t before = NULL;
            int ran = -1, copies = -1;
            for (int pass = 0; pass < 2; pass++) { /* the warm-up maps the workspace in g */
                if (pass)
                    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
                CHECK(carve_gemm_f32((carve_stream)s, 4, 4, 4, 1.f, dF, 4, dF + 16, 4, 0.f, dF + 32, 4) == CARVE_OK);
                if (pass) {
                    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
                    const cudaGraphNode_t *deps = NULL;
                    size_t ndeps = 0;
                    CUDA_OK(cudaStreamGetCaptureInfo(s, &cs, NULL, NULL, &deps, NULL, &ndeps));
                    CHECK(cs == cudaStreamCaptureStatusActive && ndeps == 1);
                    before = ndeps == 1 ? deps[0] : NULL;
                }
                force_path(calls[ci].path, calls[ci].splits);
                CHECK(carve_gemm(arena, s, CARVE_ROW_MAJOR, CARVE_NO_TRANS, CARVE_NO_TRANS, calls[ci].m, EN, EK, 1.f, dA,
                                 calls[ci].lda, dB, calls[ci].ldb, 0.f, dC, EN, CARVE_DTYPE_BF16,
                                 CARVE_DTYPE_BF16) == CARVE_OK);
                ran = carve__gemm_tc_last_path();
                copies = carve__gemm_tc_last_copies();
                unsetenv("CARVE_GEMM_SPLITK");
                unsetenv("CARVE_GEMM_PATH");
                if (pass)
                    CUDA_OK(cudaStreamEndCapture(s, &graph));
                else
                    CUDA_OK(cudaStreamSynchronize(s));
            }
            CHECK_OK(arena, carve_graph_pool_end(arena, g, (carve_stream)s));
            size_t ne = 0;
            CUDA_OK(cudaGraphGetEdges(graph, NULL, NULL, NULL, &ne));
            cudaGraphNode_t *from = calloc(ne + 1, sizeof *from), *to = calloc(ne + 1, sizeof *to);
            cudaGraphEdgeData *ed = calloc(ne + 1, sizeof *ed);
            if (!from || !to || !ed) {
                fprintf(stderr, "FAIL: host allocation\n");
                exit(1);
            }
            CUDA_OK(cudaGraphGetEdges(graph, from, to, ed, &ne));
            /* first: the edge into the call's first node, 1 programmatic,
             * 0 ordinary, -1 none or not into a kernel; inner: the call's
             * edges (between kernels), inner_prog: those programmatic. */
            int first = -1, firsts = 0, inner = 0, inner_prog = 0;
            for (size_t e = 0; e < ne; e++) {
                enum cudaGraphNodeType tf, tt;
                CUDA_OK(cudaGraphNodeGetType(from[e], &tf));
                CUDA_OK(cudaGraphNodeGetType(to[e], &tt));
                const int prog = ed[e].type == cudaGraphDependencyTypeProgrammatic;
                const int kernels = tf == cudaGraphNodeTypeKernel && tt == cudaGraphNodeTypeKernel;
                if (from[e] == before) {
                    firsts++;
                    first = kernels ? prog : -1;
                } else {
                    inner += kernels;
                    inner_prog += prog;
                }
            }
            const int hopper = g_cc == 90 && (ran == 1 || ran == 2 || ran == 4);
            /* into the call's first kernel: programmatic by default where it
             * is the streaming or the decode kernel, under 2 wherever it is
             * a Hopper kernel, never under 0 and 1 */
            const int want_first = hopper && (set == 1 || (set == 0 && (ran == 2 || ran == 4)));
            int ok = firsts == 1 && first == want_first && inner == (int)ne - 1; /* kernels only, one chain */
            if (set == 2 || !hopper) /* (settings[2] is "0") */
                ok = ok && inner_prog == 0;
            else
                ok = ok && inner_prog == inner; /* every later kernel of the call */
            if (g_cc == 90 && calls[ci].want_ran >= 0)
                ok = ok && ran == calls[ci].want_ran && copies == calls[ci].want_copies &&
                     (int)ne == calls[ci].want_edges &&
                     (ran == 2 || ran == 3 || carve__gemm_tc_last_splits() == calls[ci].splits);
            CHECK(ok);
            printf("%s pdl edges, %s, CARVE_GEMM_PDL=%s (ran %d, copies %d): %zu edges, into the call's first "
                   "kernel %s, %d of %d within the call programmatic\n",
                   ok ? "ok  " : "FAIL", calls[ci].name, settings[set] ? settings[set] : "unset", ran, copies, ne,
                   first == 1 ? "programmatic" : first == 0 ? "ordinary" : firsts ? "none: not a kernel" : "none",
                   inner_prog, inner);
            free(from);
            free(to);
            free(ed);
            CUDA_OK(cudaGraphDestroy(graph));
            CHECK_OK(arena, carve_graph_pool_release(arena, g));
            n++;
        }
    }
    if (env)
        setenv("CARVE_GEMM_PDL", saved, 1);
    else
        unsetenv("CARVE_GEMM_PDL");
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaStreamDestroy(s));
    carve_free(arena, dA);
    carve_free(arena, dB);
    carve_free(arena, dC);
    carve_free(arena, dF);
    return n;
#else
    (void)arena;
    printf("skip pdl edges: built with CUDA before 13 (cudaGraphGetEdges without edge data)\n");
    return 0;
#endif
}

int main(void) {
    ktest_require_device();
    const int quick = ktest_quick();
    test_rng_seed(&rng, test_seed(0x7c6e3ull));
    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(cudaFree(NULL));
    int ma = 0, mi = 0;
    CUDA_OK(cudaDeviceGetAttribute(&ma, cudaDevAttrComputeCapabilityMajor, 0));
    CUDA_OK(cudaDeviceGetAttribute(&mi, cudaDevAttrComputeCapabilityMinor, 0));
    g_cc = ma * 10 + mi;
    CUDA_OK(cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, 0));
    if (g_cc < 80) {
        printf("SKIP: compute capability %d.%d has no bf16 mma.sync\n", ma, mi);
        return 77;
    }
    size_t free_before = ktest_free_bytes();
    carve_arena *arena = ktest_arena();
    g_small = test_arena(CARVE_BACKEND_CUDA, 1, 0, (size_t)2 << 20);
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "FAIL: cublasCreate\n");
        return 1;
    }
    int cublas_version = 0;
    (void)cublasGetVersion(h, &cublas_version); /* printed: the reference's faults depend on it */
    printf("gemm_tc: cuBLAS %d, compute capability %d.%d, %d SMs\n", cublas_version, ma, mi, g_sms);

    check_bad_arguments(arena);
    edge_layouts(arena);

    static const int full_shapes[][3] = {
        {1, 1, 1},       {7, 7, 7},         {1, 7, 127},      {7, 127, 1},      {127, 127, 127},
        {127, 1000, 7},  {1000, 1, 1000},   {1000, 1000, 1000}, {1, 4097, 1000}, {4097, 7, 127},
        {16, 4096, 4096}, {128, 256, 64},   {256, 512, 1024}, {1000, 4097, 127}, {4097, 1000, 1},
        {64, 8192, 4096}, {2048, 2048, 4097}, {4097, 4097, 1000}, {1500, 3000, 300},
    };
    /* 1500 x 3000 has more tiles than an H100 has SMs at every width (144,
     * 192 or 288), so persistent blocks take two or three tiles each; its 5
     * k tiles (the last one short) wrap the rings of 4 and 6 stages in the
     * middle of a tile. N = 3000 with a 16-bit C and beta 0 takes the
     * TMA-store epilogue. */
    static const int quick_shapes[][3] = {
        {1, 1, 1}, {7, 7, 7}, {1, 7, 127}, {127, 127, 127}, {127, 200, 7}, {130, 260, 72}, {16, 256, 256},
        {1500, 3000, 300},
    };
    const int (*shapes)[3] = quick ? quick_shapes : full_shapes;
    const int nshapes = quick ? (int)(sizeof quick_shapes / sizeof quick_shapes[0])
                              : (int)(sizeof full_shapes / sizeof full_shapes[0]);
    double t0 = ktest_now();
    int ncases = 0;
    for (int si = 0; si < nshapes; si++) {
        for (int path = 1; path <= 2; path++) {
            for (int lay = 0; lay < 8; lay++) {
                tcase c;
                c.m = shapes[si][0], c.n = shapes[si][1], c.k = shapes[si][2];
                c.order = (lay & 4) ? CARVE_COL_MAJOR : CARVE_ROW_MAJOR;
                c.ta = (lay & 2) ? CARVE_TRANS : CARVE_NO_TRANS;
                c.tb = (lay & 1) ? CARVE_TRANS : CARVE_NO_TRANS;
                int v = (lay + si + path) & 3;
                c.ab = (v & 1) ? CARVE_DTYPE_F16 : CARVE_DTYPE_BF16;
                c.c = (v & 2) ? CARVE_DTYPE_F32 : c.ab;
                c.alpha = (lay + si) % 3 == 0 ? 1.5f : 1.f;
                c.beta = (lay + si) % 2 ? 0.5f : 0.f;
                c.pad = (lay + si + path) % 3 != 0; /* two of three padded: the wgmma path gets odd shapes */
                c.path = path;
                c.splits = 0, c.ws = 0, c.stream = NULL;
                c.want_path = c.want_splits = -1;
                run_case(arena, h, &c);
                ncases++;
            }
        }
    }
    printf("gemm_tc: %d cases in %.1f s\n", ncases, ktest_now() - t0);
    t0 = ktest_now();
    ncases = split_k_cases(arena, h, quick);
    ncases += workspace_cases(arena, h);
    printf("gemm_tc: %d split-K and workspace cases in %.1f s\n", ncases, ktest_now() - t0);
    t0 = ktest_now();
    ncases = stream_cases(arena, h, quick);
    printf("gemm_tc: %d decode (streaming kernel) cases in %.1f s\n", ncases, ktest_now() - t0);
    t0 = ktest_now();
    ncases = tiny_cases(arena, h);
    printf("gemm_tc: %d tiny-product cases in %.1f s\n", ncases, ktest_now() - t0);
    t0 = ktest_now();
    ncases = decode_cases(arena, h, quick);
    printf("gemm_tc: %d decode-kernel cases in %.1f s\n", ncases, ktest_now() - t0);
    pending_error_cases(arena);
    pdl_edge_cases(arena);
    t0 = ktest_now();
    ncases = chain_cases(arena, h);
    printf("gemm_tc: %d chains in %.1f s\n", ncases, ktest_now() - t0);
    static const char *cn[3] = {"f32", "f16", "bf16"}, *pn[5] = {"wgmma", "mma", "stream", "tiny", "decode"};
    for (int p = 0; p < 5; p++)
        for (int ci = 0; ci < 3; ci++)
            printf("gemm_tc: worst max|carve - reference| / max|cublas|, path %s, output %s: %.3g\n", pn[p],
                   cn[ci], worst_err[p][ci]);
    /* A wrong reference is no failure of carve_gemm, but it is said. */
    printf("gemm_tc: cuBLAS %d off the exact product in %ld cases (%ld elements, %ld of them by exactly the term "
           "of the last k), carve_gemm on it there\n",
           cublas_version, g_ref_cases, g_ref_off, g_ref_tail);

    cublasDestroy(h);
    CHECK_ARENA(arena);
    CHECK_ARENA(g_small);
    CHECK(carve_memory_allocated(g_small) == 0);
    carve_arena_destroy(g_small);
    carve_arena_destroy(arena);
    CHECK(ktest_free_bytes() + ((size_t)64 << 20) >= free_before);
    return test_finish();
}
