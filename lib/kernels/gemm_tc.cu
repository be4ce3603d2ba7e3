/*
 * gemm_tc.cu — carve_gemm: tensor-core GEMM with bf16 or fp16 inputs and
 * fp32 accumulation (output in the input type or fp32), row- or
 * column-major, optional transposes, alpha/beta, on a stream.
 *
 * This file is compiled twice (lib/kernels/meson.build):
 *  - for the project's gencode: argument checks, the choice of path and the
 *    mma.sync path (gemm_tc_mma.cuh), which runs on sm_80 and later;
 *  - with CARVE_GEMM_TC_SM90A_PART for sm_90a only (when the build targets
 *    sm_90): the wgmma + TMA path (gemm_tc_wgmma.cuh) and its host side
 *    (tensor maps through the driver entry point, launch).
 * Every call is first reduced to one canonical problem: row-major
 * C[M,N] = A[M,K] * B[K,N] with each input K-major or MN-major (a
 * column-major call computes C^T = op(B)^T op(A)^T, swapping the operands).
 * Paths: wgmma on devices of compute capability 9.0 when the sm_90a object
 * is built and TMA's alignment rules hold (16-byte aligned A and B, lda and
 * ldb multiples of 8 elements); mma.sync everywhere else. CARVE_GEMM_PATH=
 * wgmma|mma|auto overrides the choice (wgmma still falls back when its
 * rules do not hold). The kernels need no workspace.
 */
#include "gemm_tc_common.cuh"

#ifdef CARVE_GEMM_TC_SM90A_PART
/* ======================= sm_90a half: wgmma + TMA ======================= */
#include <atomic>
#include <mutex>
#include <type_traits>

#include "gemm_tc_wgmma.cuh"

namespace {

using namespace carve_tc;

/* The grid args.c checks is the mma.sync path's; this path's tiles are as
 * tall and at least as wide, so its grid is never larger. */
static_assert(kWgBM == kMmaBM, "the wgmma grid fits where the mma.sync grid does");

typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                              const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* cuTensorMapEncodeTiled from the driver the runtime already loaded
 * (libcarve does not link libcuda itself). NULL if the driver lacks it. */
encode_fn get_encode() {
    static std::once_flag once;
    static encode_fn fn = nullptr;
    std::call_once(once, [] {
        void *p = nullptr;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) ==
                cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            fn = reinterpret_cast<encode_fn>(p);
        (void)cudaGetLastError();
    });
    return fn;
}

/* A 2-D map of a row-major matrix rows x cols (row stride ld elements),
 * boxes of 64 columns (128 bytes, the swizzle span) x box_rows rows. */
bool make_map(encode_fn enc, CUtensorMap *map, bool bf16, const void *base, long long rows, long long cols,
              long long ld, int box_rows) {
    cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    cuuint64_t strides[1] = {(cuuint64_t)ld * 2};
    cuuint32_t box[2] = {64, (cuuint32_t)box_rows};
    cuuint32_t estr[2] = {1, 1};
    CUresult r = enc(map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
                     const_cast<void *>(base), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                     CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS;
}

template <int BN, typename T, bool AK, bool BKM>
cudaError_t launch(const Problem &pr, const CUtensorMap &ma, const CUtensorMap &mb, const EpiParams &ep) {
    auto kern = wgmma_gemm_kernel<BN, T, AK, BKM>;
    constexpr int smem = WgCfg<BN>::kSmem;
    static std::atomic<int> ready{0};
    if (!ready.load(std::memory_order_acquire)) {
        cudaError_t e = cudaFuncSetAttribute(reinterpret_cast<const void *>(kern),
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e != cudaSuccess)
            return e;
        ready.store(1, std::memory_order_release);
    }
    const int64_t tiles = carve_grid(pr.M, pr.N, kWgBM, BN); /* at most the 128 x 128 grid args.c checked */
    kern<<<(unsigned)tiles, kWgThreads, smem, pr.stream>>>(ma, mb, ep);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) { /* the opt-in may be gone (device reset): once more */
        ready.store(0, std::memory_order_release);
        if (cudaFuncSetAttribute(reinterpret_cast<const void *>(kern), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 smem) == cudaSuccess) {
            ready.store(1, std::memory_order_release);
            kern<<<(unsigned)tiles, kWgThreads, smem, pr.stream>>>(ma, mb, ep);
            e = cudaGetLastError();
        }
    }
    return e;
}

template <int BN, typename T>
cudaError_t launch_layout(const Problem &pr, const CUtensorMap &ma, const CUtensorMap &mb, const EpiParams &ep) {
    if (pr.a_kmajor)
        return pr.b_kmajor ? launch<BN, T, true, true>(pr, ma, mb, ep) : launch<BN, T, true, false>(pr, ma, mb, ep);
    return pr.b_kmajor ? launch<BN, T, false, true>(pr, ma, mb, ep) : launch<BN, T, false, false>(pr, ma, mb, ep);
}

}  // namespace

extern "C" cudaError_t carve_gemm_tc_wgmma_run(const Problem *pp, const char **why) {
    const Problem &pr = *pp;
    if (!carve_tc_tma_ok(pr)) {
        *why = "TMA needs 16-byte aligned A and B and lda, ldb multiples of 8";
        return cudaErrorNotSupported;
    }
    encode_fn enc = get_encode();
    if (!enc) {
        *why = "the driver has no cuTensorMapEncodeTiled";
        return cudaErrorNotSupported;
    }
    /* Wide tiles when they still give every SM work, else 128 x 128. */
    int sms = 132, dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) !=
                                                     cudaSuccess)
        (void)cudaGetLastError();
    const int64_t wide_tiles = carve_grid(pr.M, pr.N, kWgBM, 256);
    const int bn = wide_tiles >= sms ? 256 : 128;

    CUtensorMap ma, mb;
    bool ok = pr.a_kmajor ? make_map(enc, &ma, pr.bf16, pr.A, pr.M, pr.K, pr.lda, kWgBM)
                          : make_map(enc, &ma, pr.bf16, pr.A, pr.K, pr.M, pr.lda, kWgBK);
    ok = ok && (pr.b_kmajor ? make_map(enc, &mb, pr.bf16, pr.B, pr.N, pr.K, pr.ldb, bn)
                            : make_map(enc, &mb, pr.bf16, pr.B, pr.K, pr.N, pr.ldb, kWgBK));
    if (!ok) {
        *why = "cuTensorMapEncodeTiled refused the operands";
        return cudaErrorNotSupported;
    }
    EpiParams ep{pr.C, pr.ldc, pr.M, pr.N, pr.K, pr.alpha, pr.beta, pr.c_f32 ? 1 : 0};
    if (bn == 256)
        return pr.bf16 ? launch_layout<256, __nv_bfloat16>(pr, ma, mb, ep) : launch_layout<256, __half>(pr, ma, mb, ep);
    return pr.bf16 ? launch_layout<128, __nv_bfloat16>(pr, ma, mb, ep) : launch_layout<128, __half>(pr, ma, mb, ep);
}

#else
/* ================= main half: checks, dispatch, mma.sync ================= */
#include <atomic>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "carve_kernels.h"
#include "gemm_tc_mma.cuh"
#include "kernel_common.h"

namespace {

using namespace carve_tc;

/* args.c checks the grid of this tile, the mma.sync path's (and the wgmma
 * path's narrow one, whose grid is never smaller than its wide one's). */
static_assert(kMmaBM == CARVE_K_GRID_TILE && kMmaBN == CARVE_K_GRID_TILE, "the checked grid is the launched one");

thread_local int t_last_path = -1;

template <typename T, bool AK, bool BKM, bool VEC>
cudaError_t mma_launch(const Problem &pr, const EpiParams &ep) {
    auto kern = mma_gemm_kernel<T, AK, BKM, VEC>;
    static std::atomic<int> ready{0};
    if (!ready.load(std::memory_order_acquire)) {
        cudaError_t e = cudaFuncSetAttribute(reinterpret_cast<const void *>(kern),
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, kMmaSmem);
        if (e != cudaSuccess)
            return e;
        ready.store(1, std::memory_order_release);
    }
    const int64_t tiles = carve_grid(pr.M, pr.N, kMmaBM, kMmaBN); /* at most CARVE_MAX_GRID (args.c) */
    const T *A = static_cast<const T *>(pr.A), *B = static_cast<const T *>(pr.B);
    kern<<<(unsigned)tiles, kMmaThreads, kMmaSmem, pr.stream>>>(A, pr.lda, B, pr.ldb, ep);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) { /* the opt-in may be gone (device reset): once more */
        ready.store(0, std::memory_order_release);
        if (cudaFuncSetAttribute(reinterpret_cast<const void *>(kern), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 kMmaSmem) == cudaSuccess) {
            ready.store(1, std::memory_order_release);
            kern<<<(unsigned)tiles, kMmaThreads, kMmaSmem, pr.stream>>>(A, pr.lda, B, pr.ldb, ep);
            e = cudaGetLastError();
        }
    }
    return e;
}

template <typename T, bool VEC>
cudaError_t mma_layout(const Problem &pr, const EpiParams &ep) {
    if (pr.a_kmajor)
        return pr.b_kmajor ? mma_launch<T, true, true, VEC>(pr, ep) : mma_launch<T, true, false, VEC>(pr, ep);
    return pr.b_kmajor ? mma_launch<T, false, true, VEC>(pr, ep) : mma_launch<T, false, false, VEC>(pr, ep);
}

cudaError_t run_mma(const Problem &pr) {
    EpiParams ep{pr.C, pr.ldc, pr.M, pr.N, pr.K, pr.alpha, pr.beta, pr.c_f32 ? 1 : 0};
    /* cp.async needs 16-byte aligned sources: whole rows of 8 elements. */
    bool vec = carve_tc_tma_ok(pr);
    if (pr.bf16)
        return vec ? mma_layout<__nv_bfloat16, true>(pr, ep) : mma_layout<__nv_bfloat16, false>(pr, ep);
    return vec ? mma_layout<__half, true>(pr, ep) : mma_layout<__half, false>(pr, ep);
}

/* CARVE_GEMM_PATH: 0 auto, 1 wgmma, 2 mma (read on every call: cheap, and
 * tests switch it between calls). */
int path_env() {
    const char *v = getenv("CARVE_GEMM_PATH");
    if (!v || !*v || strcmp(v, "auto") == 0)
        return 0;
    if (strcmp(v, "wgmma") == 0)
        return 1;
    if (strcmp(v, "mma") == 0)
        return 2;
    return 0;
}

constexpr int kMaxDevices = 64;
std::atomic<int> g_cc[kMaxDevices]; /* major*10 + minor, 0 = not read yet */

int device_cc() {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    bool cache = dev >= 0 && dev < kMaxDevices;
    int cc = cache ? g_cc[dev].load(std::memory_order_relaxed) : 0;
    if (cc)
        return cc;
    int ma = 0, mi = 0;
    if (cudaDeviceGetAttribute(&ma, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&mi, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    cc = ma * 10 + mi;
    if (cache)
        g_cc[dev].store(cc, std::memory_order_relaxed);
    return cc;
}

}  // namespace

extern "C" int carve__gemm_tc_last_path(void) { return t_last_path; }

extern "C" carve_status carve_gemm(carve_arena *arena, carve_stream s, carve_order order, carve_transpose transa,
                                   carve_transpose transb, int m, int n, int k, float alpha, const void *A, int lda,
                                   const void *B, int ldb, float beta, void *C, int ldc, carve_dtype ab_type,
                                   carve_dtype c_type) {
    const char *fn = "carve_gemm";
    t_last_path = -1;
    /* What needs no device first (args.c, shared with the build without
     * CUDA), then the device and the pointers' memory. */
    carve_status st = carve_k_check_gemm(fn, arena, order, transa, transb, m, n, k, A, lda, B, ldb, C, ldc, ab_type,
                                         c_type);
    if (st != CARVE_OK)
        return st;
    if ((st = carve_k::check_device_present(fn)) != CARVE_OK)
        return st;
    if ((st = carve_k::check_device_ptr(A, fn, "A")) != CARVE_OK ||
        (st = carve_k::check_device_ptr(B, fn, "B")) != CARVE_OK ||
        (st = carve_k::check_device_ptr(C, fn, "C")) != CARVE_OK)
        return st;
    const bool row = order == CARVE_ROW_MAJOR, ta = transa == CARVE_TRANS, tb = transb == CARVE_TRANS;

    /* The canonical row-major problem. */
    Problem pr;
    pr.alpha = alpha;
    pr.beta = beta;
    pr.bf16 = ab_type == CARVE_DTYPE_BF16;
    pr.c_f32 = c_type == CARVE_DTYPE_F32;
    pr.C = C;
    pr.ldc = ldc;
    pr.K = k;
    pr.stream = reinterpret_cast<cudaStream_t>(s);
    if (row) {
        pr.M = m, pr.N = n;
        pr.A = A, pr.lda = lda, pr.a_kmajor = !ta;
        pr.B = B, pr.ldb = ldb, pr.b_kmajor = tb;
    } else { /* C^T (n x m, row-major) = op(B)^T * op(A)^T */
        pr.M = n, pr.N = m;
        pr.A = B, pr.lda = ldb, pr.a_kmajor = !tb;
        pr.B = A, pr.ldb = lda, pr.b_kmajor = ta;
    }

    const int want = path_env();
    cudaError_t e = cudaErrorNotSupported;
#ifdef CARVE_GEMM_TC_HAVE_SM90A
    if (want != 2 && device_cc() == 90) {
        const char *why = nullptr;
        e = carve_gemm_tc_wgmma_run(&pr, &why);
        if (e == cudaSuccess)
            t_last_path = 1;
    }
#endif
    if (e == cudaErrorNotSupported) {
        if (device_cc() < 80)
            return carve_fail(nullptr, CARVE_ERR_NO_DEVICE, "%s: the device (compute capability %d.%d) has no bf16/fp16 mma.sync (needs 8.0+)", fn, device_cc() / 10, device_cc() % 10);
        e = run_mma(pr);
        if (e == cudaSuccess)
            t_last_path = 0;
    }
    (void)want;
    return carve_k::launch_status(e, fn);
}

#endif /* CARVE_GEMM_TC_SM90A_PART */
