/* kernels_nocuda.c — the kernel API when carve is built without CUDA. */
#include "engine/error.h"
#include "carve_kernels.h"

static carve_status no_cuda(const char *fn) {
    return carve_fail(NULL, CARVE_ERR_NO_DEVICE, "%s: carve was built without CUDA", fn);
}

carve_status carve_matmul_f32(carve_stream s, int m, int n, int k, const float *A, const float *B, float *C) {
    return no_cuda("carve_matmul_f32");
}

carve_status carve_gemm_f32(carve_stream s, int m, int n, int k, float alpha, const float *A, int lda,
                            const float *B, int ldb, float beta, float *C, int ldc) {
    return no_cuda("carve_gemm_f32");
}

carve_status carve_reduce_sum_f32(carve_arena *arena, carve_stream s, const float *x, size_t n, float *out) {
    return no_cuda("carve_reduce_sum_f32");
}

carve_status carve_gemm(carve_arena *arena, carve_stream s, carve_order order, carve_transpose transa,
                        carve_transpose transb, int m, int n, int k, float alpha, const void *A, int lda,
                        const void *B, int ldb, float beta, void *C, int ldc, carve_dtype ab_type,
                        carve_dtype c_type) {
    return no_cuda("carve_gemm");
}
