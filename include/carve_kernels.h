/*
 * carve_kernels.h — device kernels that work on carved buffers.
 *
 * Matrix product and sum reduction in fp32, launched on a stream, reading and
 * writing device memory (buffers from a CUDA arena, or any device pointer).
 * Every function validates its arguments and returns a status instead of
 * launching with bad ones. No CUDA headers are needed to use this header.
 *
 * All functions are asynchronous with respect to the host (they enqueue work
 * on the stream and return), thread-safe, and never synchronize the device.
 * Pointer checks use cudaPointerGetAttributes: host pointers, NULL and
 * pointers the driver does not know give CARVE_ERR_INVALID.
 */
#ifndef CARVE_KERNELS_H
#define CARVE_KERNELS_H

#include "carve.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Row-major C[m,n] = A[m,k] * B[k,n], fp32 inputs, fp32 accumulation.
 * Returns CARVE_OK; CARVE_ERR_INVALID for m, n or k <= 0, a product that
 * overflows 64-bit indexing, NULL or non-device pointers, or C overlapping A
 * or B; CARVE_ERR_NO_DEVICE when no CUDA device is present;
 * CARVE_ERR_BACKEND if the launch fails (carve_last_error(NULL) names the
 * CUDA error).
 */
CARVE_API carve_status carve_matmul_f32(carve_stream s, int m, int n, int k,
                                        const float *A, const float *B, float *C);

/*
 * General form: C = alpha * A * B + beta * C with leading dimensions (row
 * strides, in elements) lda >= k, ldb >= n, ldc >= n. With beta == 0, C is
 * not read (it may hold NaN). Same statuses as carve_matmul_f32, plus
 * CARVE_ERR_INVALID for leading dimensions below the minimum.
 */
CARVE_API carve_status carve_gemm_f32(carve_stream s, int m, int n, int k, float alpha,
                                      const float *A, int lda, const float *B, int ldb,
                                      float beta, float *C, int ldc);

/*
 * *out = sum of x[0..n) (fp32 accumulation in CUB's tree order), written to
 * the device scalar out. CUB DeviceReduce::Sum does the work; its temporary
 * storage is carved from arena (a CUDA arena on the device that holds x) on
 * stream s and freed back to it in stream order: no cudaMalloc on this path.
 * Returns CARVE_OK; CARVE_ERR_INVALID for a NULL or non-CUDA arena, n == 0,
 * NULL or non-device pointers; CARVE_ERR_OOM if the temporary storage does
 * not fit in the arena; CARVE_ERR_NO_DEVICE; CARVE_ERR_BACKEND for CUDA
 * failures.
 */
CARVE_API carve_status carve_reduce_sum_f32(carve_arena *arena, carve_stream s,
                                            const float *x, size_t n, float *out);

#ifdef __cplusplus
}
#endif

#endif /* CARVE_KERNELS_H */
