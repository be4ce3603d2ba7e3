/*
 * matmul.cu — carve_matmul_f32 / carve_gemm_f32: argument checks, then one
 * of the SGEMM kernels of gemm_kernels.cuh.
 *
 * Every argument is checked before anything is launched (a bad call returns
 * CARVE_ERR_INVALID and enqueues nothing): first what needs no device
 * (args.c, shared with the build without CUDA), then the pointers' memory.
 * The variant is picked per call: shapes whose rows are not 16-byte
 * aligned take the guarded scalar path; problems too small to give every
 * SM a 128 x 128 tile take kSmallVariant; everything else takes
 * kLargeVariant. The variants are listed in one table
 * (gemm_table.cuh) so that tests and benchmarks can run each by index.
 */
#include "args.h"
#include "carve_kernels.h"
#include "gemm_table.cuh"
#include "gemm_variants.h"
#include "kernel_common.h"

#include <atomic>
#include <stdint.h>

namespace {

using namespace carve_sgemm;

constexpr int kMaxDevices = 64;
std::atomic<int> g_sm_count[kMaxDevices];
/* Bit v: variant v's kernels may use their shared memory on that device. */
std::atomic<unsigned> g_smem_ready[kMaxDevices];

int sm_count() {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) {
        (void)cudaGetLastError();
        return 132;
    }
    int n = g_sm_count[dev].load(std::memory_order_relaxed);
    if (n > 0)
        return n;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0) {
        (void)cudaGetLastError();
        return 132;
    }
    g_sm_count[dev].store(n, std::memory_order_relaxed);
    return n;
}

/* Kernels above 48 KiB of dynamic shared memory must opt in, per device. */
cudaError_t allow_smem(int v, kernel_fn f) {
    const Variant &var = kVariants[v];
    if (var.smem <= 48 * 1024)
        return cudaSuccess;
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess)
        return e;
    bool cache = dev >= 0 && dev < kMaxDevices;
    if (cache && (g_smem_ready[dev].load(std::memory_order_acquire) >> v & 1u))
        return cudaSuccess;
    e = cudaFuncSetAttribute(reinterpret_cast<const void *>(f), cudaFuncAttributeMaxDynamicSharedMemorySize,
                             var.smem);
    if (e == cudaSuccess && cache)
        g_smem_ready[dev].fetch_or(1u << v, std::memory_order_acq_rel);
    return e;
}

void forget_smem(int v) {
    int dev = 0;
    if (cudaGetDevice(&dev) == cudaSuccess && dev >= 0 && dev < kMaxDevices)
        g_smem_ready[dev].fetch_and(~(1u << v), std::memory_order_acq_rel);
    (void)cudaGetLastError();
}

int pick(int m, int n, bool vec) {
    if (!vec)
        return 0;
    return carve_grid(m, n, 128, 128) < sm_count() ? kSmallVariant : kLargeVariant;
}

/* The tile of the grid a call launches: the variant's own (or variant 0's
 * when it needs alignment the call lacks); for the automatic pick,
 * CARVE_K_GRID_TILE, the only tile it uses for outputs of more 128 x 128
 * tiles than the device has SMs (kLargeVariant and variant 0 are 128 x 128,
 * and kSmallVariant's grid is at most four times the SM count). */
void grid_tile(int variant, int n, int k, const float *A, int lda, const float *B, int ldb, const float *C, int ldc,
               int *tile_m, int *tile_n) {
    *tile_m = *tile_n = CARVE_K_GRID_TILE;
    if (variant == CARVE__GEMM_AUTO)
        return;
    int v = variant;
    if (!(vec_ok(n, k, A, lda, B, ldb, C, ldc) ? kVariants[v].vec : kVariants[v].scalar))
        v = 0;
    *tile_m = kVariants[v].bm;
    *tile_n = kVariants[v].bn;
}

/* Checks shared by every entry point; CARVE_OK when a launch may follow.
 * What needs no device first (args.c, shared with the build without CUDA),
 * then the device and the pointers' memory. */
carve_status validate(const char *fn, int variant, int m, int n, int k, const float *A, int lda, const float *B,
                      int ldb, const float *C, int ldc) {
    int tile_m = CARVE_K_GRID_TILE, tile_n = CARVE_K_GRID_TILE;
    if (m > 0 && n > 0 && k > 0)
        grid_tile(variant, n, k, A, lda, B, ldb, C, ldc, &tile_m, &tile_n);
    carve_status st = carve_k_check_gemm_f32(fn, m, n, k, A, lda, B, ldb, C, ldc, tile_m, tile_n);
    if (st != CARVE_OK)
        return st;
    if ((st = carve_k::check_device_present(fn)) != CARVE_OK)
        return st;
    if ((st = carve_k::check_device_ptr(A, fn, "A")) != CARVE_OK ||
        (st = carve_k::check_device_ptr(B, fn, "B")) != CARVE_OK ||
        (st = carve_k::check_device_ptr(C, fn, "C")) != CARVE_OK)
        return st;
    return CARVE_OK;
}

carve_status run(const char *fn, int variant, carve_stream s, int m, int n, int k, float alpha, const float *A,
                 int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    if (variant != CARVE__GEMM_AUTO && (variant < 0 || variant >= kNumVariants))
        return carve_fail(nullptr, CARVE_ERR_INVALID, "%s: no variant %d (there are %d)", fn, variant,
                          kNumVariants);
    carve_status st = validate(fn, variant, m, n, k, A, lda, B, ldb, C, ldc);
    if (st != CARVE_OK)
        return st;
    int v = variant;
    if (v == CARVE__GEMM_AUTO)
        v = pick(m, n, vec_ok(n, k, A, lda, B, ldb, C, ldc));
    Plan pl = make_plan(v, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    if (pl.blocks > (uint64_t)CARVE_MAX_GRID) /* validate checked this grid; never taken */
        return carve_fail(nullptr, CARVE_ERR_INVALID, "%s: %llu thread blocks are more than a grid holds", fn,
                          (unsigned long long)pl.blocks);
    cudaError_t e = allow_smem(pl.variant, pl.f);
    if (e != cudaSuccess)
        return carve_k::launch_status(e, fn);
    /* cudaLaunchKernelEx answers for this launch alone: an error left
     * pending before the call is not taken for its failure (the kernel,
     * queued, would run again below: twice with beta != 0 is wrong). */
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)pl.blocks, 1, 1);
    cfg.blockDim = dim3(pl.threads, 1, 1);
    cfg.dynamicSmemBytes = pl.smem;
    cfg.stream = reinterpret_cast<cudaStream_t>(s);
    e = cudaLaunchKernelEx(&cfg, pl.f, pl.p);
    if (e != cudaSuccess && pl.smem > 48 * 1024) {
        (void)cudaGetLastError();
        /* The opt-in may have been lost (cudaDeviceReset): set it again. */
        forget_smem(pl.variant);
        if ((e = allow_smem(pl.variant, pl.f)) == cudaSuccess)
            e = cudaLaunchKernelEx(&cfg, pl.f, pl.p);
    }
    return carve_k::launch_status(e, fn);
}

}  // namespace

extern "C" int carve__gemm_f32_variant_count(void) { return kNumVariants; }

extern "C" const char *carve__gemm_f32_variant_name(int variant) {
    return variant >= 0 && variant < kNumVariants ? kVariants[variant].name : nullptr;
}

extern "C" int carve__gemm_f32_variant_is_tf32(int variant) {
    return variant >= 0 && variant < kNumVariants ? kVariants[variant].tf32 : 0;
}

extern "C" int carve__gemm_f32_auto_variant(int m, int n, int k, const float *A, int lda, const float *B, int ldb,
                                            const float *C, int ldc) {
    if (m <= 0 || n <= 0 || k <= 0 || lda < k || ldb < n || ldc < n)
        return -1;
    return pick(m, n, vec_ok(n, k, A, lda, B, ldb, C, ldc));
}

extern "C" carve_status carve__gemm_f32_variant(int variant, carve_stream s, int m, int n, int k, float alpha,
                                                const float *A, int lda, const float *B, int ldb, float beta,
                                                float *C, int ldc) {
    return run("carve__gemm_f32_variant", variant, s, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

extern "C" carve_status carve_gemm_f32(carve_stream s, int m, int n, int k, float alpha, const float *A, int lda,
                                       const float *B, int ldb, float beta, float *C, int ldc) {
    return run("carve_gemm_f32", CARVE__GEMM_AUTO, s, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

extern "C" carve_status carve_matmul_f32(carve_stream s, int m, int n, int k, const float *A, const float *B,
                                         float *C) {
    return run("carve_matmul_f32", CARVE__GEMM_AUTO, s, m, n, k, 1.0f, A, k, B, n, 0.0f, C, n);
}
