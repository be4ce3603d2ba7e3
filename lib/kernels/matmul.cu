/*
 * matmul.cu — fp32 matrix product on carved buffers (baseline tiled kernel).
 */
#include "carve_kernels.h"
#include "kernel_common.h"

#include <stdint.h>

namespace {

constexpr int TILE = 16;

__global__ void gemm_tiled(int m, int n, int k, float alpha, const float *__restrict__ A, int lda,
                           const float *__restrict__ B, int ldb, float beta, float *__restrict__ C, int ldc) {
    __shared__ float As[TILE][TILE + 1];
    __shared__ float Bs[TILE][TILE + 1];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.f;
    for (int t = 0; t < k; t += TILE) {
        int ak = t + threadIdx.x, bk = t + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = row < m && ak < k ? A[(int64_t)row * lda + ak] : 0.f;
        Bs[threadIdx.y][threadIdx.x] = bk < k && col < n ? B[(int64_t)bk * ldb + col] : 0.f;
        __syncthreads();
#pragma unroll
        for (int i = 0; i < TILE; i++)
            acc += As[threadIdx.y][i] * Bs[i][threadIdx.x];
        __syncthreads();
    }
    if (row < m && col < n) {
        float *c = &C[(int64_t)row * ldc + col];
        *c = beta == 0.f ? alpha * acc : alpha * acc + beta * *c;
    }
}

bool overlaps(const void *a, size_t abytes, const void *b, size_t bbytes) {
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y + bbytes && y < x + abytes;
}

}  // namespace

extern "C" carve_status carve_gemm_f32(carve_stream s, int m, int n, int k, float alpha, const float *A, int lda,
                                       const float *B, int ldb, float beta, float *C, int ldc) {
    const char *fn = "carve_gemm_f32";
    if (m <= 0 || n <= 0 || k <= 0)
        return carve_fail(nullptr, CARVE_ERR_INVALID, "%s: m=%d n=%d k=%d must all be positive", fn, m, n, k);
    if (lda < k || ldb < n || ldc < n)
        return carve_fail(nullptr, CARVE_ERR_INVALID, "%s: leading dimensions lda=%d ldb=%d ldc=%d are below k=%d, n=%d",
                          fn, lda, ldb, ldc, k, n);
    carve_status st = carve_k::check_device_present(fn);
    if (st != CARVE_OK)
        return st;
    if ((st = carve_k::check_device_ptr(A, fn, "A")) != CARVE_OK ||
        (st = carve_k::check_device_ptr(B, fn, "B")) != CARVE_OK ||
        (st = carve_k::check_device_ptr(C, fn, "C")) != CARVE_OK)
        return st;
    size_t abytes = ((size_t)(m - 1) * lda + k) * sizeof(float);
    size_t bbytes = ((size_t)(k - 1) * ldb + n) * sizeof(float);
    size_t cbytes = ((size_t)(m - 1) * ldc + n) * sizeof(float);
    if (overlaps(C, cbytes, A, abytes) || overlaps(C, cbytes, B, bbytes))
        return carve_fail(nullptr, CARVE_ERR_INVALID, "%s: C overlaps A or B", fn);
    dim3 block(TILE, TILE), grid((n + TILE - 1) / TILE, (m + TILE - 1) / TILE);
    if (grid.y > 65535)
        return carve_fail(nullptr, CARVE_ERR_INVALID, "%s: m=%d is too large for this kernel", fn, m);
    gemm_tiled<<<grid, block, 0, reinterpret_cast<cudaStream_t>(s)>>>(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    return carve_k::launch_status(cudaGetLastError(), fn);
}

extern "C" carve_status carve_matmul_f32(carve_stream s, int m, int n, int k, const float *A, const float *B,
                                         float *C) {
    return carve_gemm_f32(s, m, n, k, 1.0f, A, k, B, n, 0.0f, C, n);
}
