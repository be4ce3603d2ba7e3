/*
 * gemm_variants.h — the SGEMM kernel variants behind carve_gemm_f32, for
 * tests and benchmarks (not installed, not exported: these symbols have
 * hidden visibility and are reached by linking the static internal library).
 *
 * carve_gemm_f32 runs CARVE__GEMM_AUTO, which picks a variant by shape. The
 * benchmark times every variant in one run so the default can be chosen from
 * measurements; the tests run every variant on every shape.
 */
#ifndef CARVE_GEMM_VARIANTS_H
#define CARVE_GEMM_VARIANTS_H

#include "carve.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The variant carve_gemm_f32 uses: chosen per call by shape and alignment. */
#define CARVE__GEMM_AUTO (-1)

/* Number of variants; valid indices are 0 .. count-1. */
int carve__gemm_f32_variant_count(void);

/* Short name, e.g. "simt_cp_128x128x16_s3"; NULL for an index out of range. */
const char *carve__gemm_f32_variant_name(int variant);

/* 1 if the variant multiplies in TF32 on tensor cores (inputs rounded to
 * 10 mantissa bits, fp32 accumulation), 0 for fp32 FFMA variants. */
int carve__gemm_f32_variant_is_tf32(int variant);

/* The variant CARVE__GEMM_AUTO picks for this call (shape, leading
 * dimensions and pointer alignment decide), or -1 if the arguments are
 * invalid. Needs the current device only to read its SM count. */
int carve__gemm_f32_auto_variant(int m, int n, int k, const float *A, int lda, const float *B, int ldb,
                                 const float *C, int ldc);

/* carve_gemm_f32 with an explicit variant (or CARVE__GEMM_AUTO). Same
 * checks and statuses as carve_gemm_f32, plus CARVE_ERR_INVALID for an
 * unknown variant. Variants that need 16-byte aligned rows fall back to the
 * guarded path of variant 0 when the arguments are not aligned. */
carve_status carve__gemm_f32_variant(int variant, carve_stream s, int m, int n, int k, float alpha,
                                     const float *A, int lda, const float *B, int ldb, float beta, float *C,
                                     int ldc);

#ifdef __cplusplus
}
#endif

#endif
