/*
 * nocuda.c — the kernel API when carve is built without CUDA: the same
 * argument checks as the CUDA build (args.c), so a bad call gets the same
 * CARVE_ERR_INVALID, and CARVE_ERR_NO_DEVICE for every call that passes them.
 */
#include "carve_kernels.h"
#include "engine/error.h"
#include "kernels/args.h"

static carve_status no_cuda(carve_status checked, const char *fn) {
    if (checked != CARVE_OK)
        return checked;
    return carve_fail(NULL, CARVE_ERR_NO_DEVICE, "%s: carve was built without CUDA", fn);
}

carve_status carve_matmul_f32(carve_stream s, int m, int n, int k, const float *A, const float *B, float *C) {
    const char *fn = "carve_matmul_f32";
    return no_cuda(carve_k_check_gemm_f32(fn, m, n, k, A, k, B, n, C, n, CARVE_K_GRID_TILE, CARVE_K_GRID_TILE), fn);
}

carve_status carve_gemm_f32(carve_stream s, int m, int n, int k, float alpha, const float *A, int lda,
                            const float *B, int ldb, float beta, float *C, int ldc) {
    const char *fn = "carve_gemm_f32";
    return no_cuda(carve_k_check_gemm_f32(fn, m, n, k, A, lda, B, ldb, C, ldc, CARVE_K_GRID_TILE, CARVE_K_GRID_TILE),
                   fn);
}

carve_status carve_reduce_sum_f32(carve_arena *arena, carve_stream s, const float *x, size_t n, float *out) {
    const char *fn = "carve_reduce_sum_f32";
    return no_cuda(carve_k_check_reduce(fn, arena, x, n, out), fn);
}

carve_status carve_gemm(carve_arena *arena, carve_stream s, carve_order order, carve_transpose transa,
                        carve_transpose transb, int m, int n, int k, float alpha, const void *A, int lda,
                        const void *B, int ldb, float beta, void *C, int ldc, carve_dtype ab_type,
                        carve_dtype c_type) {
    const char *fn = "carve_gemm";
    return no_cuda(carve_k_check_gemm(fn, arena, order, transa, transb, m, n, k, A, lda, B, ldb, C, ldc, ab_type,
                                      c_type),
                   fn);
}
