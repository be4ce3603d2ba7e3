/*
 * args.h — the kernels' argument checks that need no device: values of
 * enums, shapes and leading dimensions, the grid a launch would need, the
 * arena's kind, NULL and misaligned pointers, and whether C shares a byte
 * with what A or B reads.
 *
 * One set of checks for both builds: with CUDA (matmul.cu, gemm_tc.cu,
 * reduce.cu run them before any call to the device) and without (nocuda.c
 * runs them, then answers CARVE_ERR_NO_DEVICE), so a bad call gets the same
 * status and message from either. They read only the arguments (pointers as
 * numbers), so tests run them on any machine (tests/kernels/test_kargs.c).
 * Each returns CARVE_OK, or CARVE_ERR_INVALID with the reason recorded for
 * carve_last_error(NULL).
 */
#ifndef CARVE_KERNEL_ARGS_H
#define CARVE_KERNEL_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include "carve_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The tile whose grid carve_gemm_f32 (the automatic pick) and carve_gemm
 * launch at most: 128 x 128 (kLargeVariant and variant 0 in
 * gemm_table.cuh; kMmaBM x kMmaBN in gemm_tc_mma.cuh, which is also the
 * wgmma path's narrow tile). Smaller tiles are picked only for outputs of
 * fewer 128 x 128 tiles than the device has SMs. */
#define CARVE_K_GRID_TILE 128

/* The bytes a kernel reads or writes in one matrix: `rows` runs of `width`
 * bytes, `stride` bytes apart, the first at `base`. */
typedef struct carve_k_bytes {
    uintptr_t base;
    uint64_t rows, stride, width;
} carve_k_bytes;

/* 1 when some byte is in both x and y, else 0. Exact (the padding between
 * rows is not counted), in O(log stride) steps whatever the row counts. */
int carve_k_bytes_overlap(const carve_k_bytes *x, const carve_k_bytes *y);

/* carve_gemm_f32's checks (carve_matmul_f32: lda = k, ldb = ldc = n), for
 * a launch of tile_m x tile_n thread blocks. */
carve_status carve_k_check_gemm_f32(const char *fn, int m, int n, int k, const float *A, int lda, const float *B,
                                    int ldb, const float *C, int ldc, int tile_m, int tile_n);

/* carve_gemm's checks (its grid: CARVE_K_GRID_TILE squares). */
carve_status carve_k_check_gemm(const char *fn, const carve_arena *arena, carve_order order, carve_transpose transa,
                                carve_transpose transb, int m, int n, int k, const void *A, int lda, const void *B,
                                int ldb, const void *C, int ldc, carve_dtype ab_type, carve_dtype c_type);

/* carve_reduce_sum_f32's checks. */
carve_status carve_k_check_reduce(const char *fn, const carve_arena *arena, const float *x, size_t n,
                                  const float *out);

#ifdef __cplusplus
}
#endif

#endif
