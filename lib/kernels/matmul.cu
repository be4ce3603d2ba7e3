/*
 * matmul.cu — carve_matmul_f32 / carve_gemm_f32: argument checks, then one
 * of the SGEMM kernels of gemm_kernels.cuh.
 *
 * Every argument is checked before anything is launched (a bad call returns
 * CARVE_ERR_INVALID and enqueues nothing). The variant is picked per call:
 * shapes whose rows are not 16-byte aligned take the guarded scalar path;
 * problems too small to give every SM a 128 x 128 tile take kSmallVariant;
 * everything else takes kLargeVariant. The variants are listed in one table
 * (gemm_table.cuh) so that tests and benchmarks can run each by index.
 */
#include "carve_kernels.h"
#include "gemm_table.cuh"
#include "gemm_variants.h"
#include "kernel_common.h"

#include <atomic>
#include <limits.h>
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

bool overlaps(const void *a, size_t abytes, const void *b, size_t bbytes) {
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y + bbytes && y < x + abytes;
}

int pick(int m, int n, bool vec) {
    if (!vec)
        return 0;
    long long tiles = (long long)((m + 127) / 128) * ((n + 127) / 128);
    return tiles < sm_count() ? kSmallVariant : kLargeVariant;
}

/* Checks shared by every entry point; CARVE_OK when a launch may follow. */
carve_status validate(const char *fn, int m, int n, int k, const float *A, int lda, const float *B, int ldb,
                      const float *C, int ldc) {
    if (m <= 0 || n <= 0 || k <= 0)
        return carve_fail(nullptr, CARVE_ERR_INVALID, "%s: m=%d n=%d k=%d must all be positive", fn, m, n, k);
    if (lda < k || ldb < n || ldc < n)
        return carve_fail(nullptr, CARVE_ERR_INVALID,
                          "%s: leading dimensions lda=%d ldb=%d ldc=%d are below k=%d, n=%d", fn, lda, ldb, ldc,
                          k, n);
    /* Element spans; each below 2^62, so byte counts fit in 64 bits. */
    uint64_t aspan = (uint64_t)(m - 1) * (uint64_t)lda + (uint64_t)k;
    uint64_t bspan = (uint64_t)(k - 1) * (uint64_t)ldb + (uint64_t)n;
    uint64_t cspan = (uint64_t)(m - 1) * (uint64_t)ldc + (uint64_t)n;
    const uint64_t limit = (uint64_t)1 << 61;
    if (aspan > limit || bspan > limit || cspan > limit)
        return carve_fail(nullptr, CARVE_ERR_INVALID, "%s: a matrix spans more than 2^61 elements", fn);
    long long tiles = (long long)((m + 63) / 64) * ((n + 63) / 64);
    if (tiles > INT_MAX)
        return carve_fail(nullptr, CARVE_ERR_INVALID, "%s: m=%d by n=%d needs too many thread blocks", fn, m, n);
    carve_status st = carve_k::check_device_present(fn);
    if (st != CARVE_OK)
        return st;
    if ((st = carve_k::check_device_ptr(A, fn, "A")) != CARVE_OK ||
        (st = carve_k::check_device_ptr(B, fn, "B")) != CARVE_OK ||
        (st = carve_k::check_device_ptr(C, fn, "C")) != CARVE_OK)
        return st;
    if (overlaps(C, cspan * sizeof(float), A, aspan * sizeof(float)) ||
        overlaps(C, cspan * sizeof(float), B, bspan * sizeof(float)))
        return carve_fail(nullptr, CARVE_ERR_INVALID, "%s: C [%p, +%llu floats) overlaps A or B", fn, (void *)C,
                          (unsigned long long)cspan);
    return CARVE_OK;
}

carve_status run(const char *fn, int variant, carve_stream s, int m, int n, int k, float alpha, const float *A,
                 int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    if (variant != CARVE__GEMM_AUTO && (variant < 0 || variant >= kNumVariants))
        return carve_fail(nullptr, CARVE_ERR_INVALID, "%s: no variant %d (there are %d)", fn, variant,
                          kNumVariants);
    carve_status st = validate(fn, m, n, k, A, lda, B, ldb, C, ldc);
    if (st != CARVE_OK)
        return st;
    int v = variant;
    if (v == CARVE__GEMM_AUTO)
        v = pick(m, n, vec_ok(n, k, A, lda, B, ldb, C, ldc));
    Plan pl = make_plan(v, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    cudaError_t e = allow_smem(pl.variant, pl.f);
    if (e != cudaSuccess)
        return carve_k::launch_status(e, fn);
    cudaStream_t stream = reinterpret_cast<cudaStream_t>(s);
    pl.f<<<pl.blocks, pl.threads, pl.smem, stream>>>(pl.p);
    e = cudaGetLastError();
    if (e != cudaSuccess && pl.smem > 48 * 1024) {
        /* The opt-in may have been lost (cudaDeviceReset): set it again. */
        forget_smem(pl.variant);
        if ((e = allow_smem(pl.variant, pl.f)) == cudaSuccess) {
            pl.f<<<pl.blocks, pl.threads, pl.smem, stream>>>(pl.p);
            e = cudaGetLastError();
        }
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
