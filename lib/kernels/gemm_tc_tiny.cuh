/*
 * gemm_tc_tiny.cuh — carve_gemm's kernel for tiny products (at most
 * CARVE_TC_TINY_MACS multiply-adds: gemm_tc_plan.h, carve_tc_tiny): one
 * thread an element of C, its k loop in fp32 over A and B read element by
 * element in either layout, then the epilogue every path shares
 * (store_out). A product that small is one launch and a few hundred cycles
 * of work; the tiled kernels spend longer than that filling their
 * pipelines for it (7 x 13 x 17 took 9 us a call on mma.sync on an H100).
 */
#ifndef CARVE_GEMM_TC_TINY_CUH
#define CARVE_GEMM_TC_TINY_CUH

#include <stdint.h>

#include "gemm_tc_common.cuh"
#include "gemm_tc_mma.cuh"

namespace carve_tc {

constexpr int kTinyThreads = 128;

/* C[M,N] of the canonical problem (gemm_tc_common.cuh): A element (m, k)
 * at A[m * lda + k] when ak, else A[k * lda + m]; B element (k, n) at
 * B[n * ldb + k] when bk, else B[k * ldb + n]. */
template <typename T>
__global__ void __launch_bounds__(kTinyThreads)
    tiny_gemm_kernel(const T *A, long long lda, int ak, const T *B, long long ldb, int bk, EpiParams p) {
    const long long o = (long long)blockIdx.x * kTinyThreads + threadIdx.x;
    if (o >= (long long)p.M * p.N)
        return;
    const int r = (int)(o / p.N), c = (int)(o % p.N);
    float acc = 0.f;
    for (int k = 0; k < p.K; k++) {
        const float a = to_f<T>(ak ? A[(long long)r * lda + k] : A[(long long)k * lda + r]);
        const float b = to_f<T>(bk ? B[(long long)c * ldb + k] : B[(long long)k * ldb + c]);
        acc = fmaf(a, b, acc);
    }
    store_out<T>(p, r, c, acc);
}

}  // namespace carve_tc

#endif
