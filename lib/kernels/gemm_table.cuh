/*
 * gemm_table.cuh — the list of SGEMM variants and how a call becomes a
 * launch plan (kernel, parameters, grid). Shared by matmul.cu, which
 * launches the plan on a stream, and by the host emulation test, which runs
 * the same plan on host threads: both see exactly the same table.
 */
#ifndef CARVE_GEMM_TABLE_CUH
#define CARVE_GEMM_TABLE_CUH

#include "gemm_kernels.cuh"
#include "tiles.h"

#include <stdint.h>

namespace carve_sgemm {

typedef void (*kernel_fn)(Params);

struct Variant {
    const char *name;
    kernel_fn vec;    /* kernel for 16-byte aligned layouts */
    kernel_fn scalar; /* kernel for any layout, or nullptr: use variant 0's */
    int bm, bn, threads, smem;
    int tf32;
};

/* Indices are what tests, benchmarks and docs/kernels.md refer to. */
inline const Variant kVariants[] = {
    {"simt_rs_128x128x8", gemm_rs<2, 4, 8, 8, true, 2>, gemm_rs<2, 4, 8, 8, false, 2>, 128, 128, 256,
     rs_smem_bytes(2, 4, 8, 8), 0},
    {"simt_rs_128x256x8", gemm_rs<2, 4, 16, 8, true, 1>, nullptr, 128, 256, 256, rs_smem_bytes(2, 4, 16, 8), 0},
    {"simt_cp_128x128x8_s4", gemm_cpt<2, 4, 8, 8, 4, 2>, nullptr, 128, 128, 256, cpt_smem_bytes(2, 4, 8, 8, 4),
     0},
    {"simt_cp_128x128x16_s3", gemm_cpt<2, 4, 8, 16, 3, 2>, nullptr, 128, 128, 256,
     cpt_smem_bytes(2, 4, 8, 16, 3), 0},
    {"simt_cp_128x256x8_s3", gemm_cpt<2, 4, 16, 8, 3, 1>, nullptr, 128, 256, 256, cpt_smem_bytes(2, 4, 16, 8, 3),
     0},
    {"simt_rs_64x64x8", gemm_rs<1, 2, 8, 8, true, 4>, nullptr, 64, 64, 64, rs_smem_bytes(1, 2, 8, 8), 0},
    {"simt_cp_64x64x16_s3", gemm_cpt<1, 2, 8, 16, 3, 4>, nullptr, 64, 64, 64, cpt_smem_bytes(1, 2, 8, 16, 3), 0},
    {"tf32_cp_128x128x16_s4", gemm_tf32<2, 4, 4, 4, 16, 4, 2>, nullptr, 128, 128, 256,
     tf32_smem_bytes(2, 4, 4, 4, 16, 4), 1},
    {"simt_cpl_128x128x16_s3", gemm_cpl<2, 4, 8, 16, 3, 2>, nullptr, 128, 128, 256,
     cpt_smem_bytes(2, 4, 8, 16, 3), 0},
    {"simt_cpf_128x128x16_s3", gemm_cpf<2, 4, 8, 16, 3, 2>, nullptr, 128, 128, 256,
     cpt_smem_bytes(2, 4, 8, 16, 3), 0},
    {"simt_cpf_128x128x32_s3", gemm_cpf<2, 4, 8, 32, 3, 2>, nullptr, 128, 128, 256,
     cpt_smem_bytes(2, 4, 8, 32, 3), 0},
};
constexpr int kNumVariants = (int)(sizeof(kVariants) / sizeof(kVariants[0]));

/* The default for large aligned problems, and for small ones (fewer
 * 128 x 128 tiles than the device has SMs). docs/kernels.md says why;
 * kLargeVariant must name a 128 x 128 variant (pick() counts those tiles). */
constexpr int kLargeVariant = 9;
constexpr int kSmallVariant = 6;

inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* Every row of A, B and C starts 16-byte aligned and n, k are multiples
 * of 4: the float4 (VEC) kernels apply. */
inline bool vec_ok(int n, int k, const float *A, int lda, const float *B, int ldb, const float *C, int ldc) {
    return aligned16(A) && aligned16(B) && aligned16(C) && lda % 4 == 0 && ldb % 4 == 0 && ldc % 4 == 0 &&
           n % 4 == 0 && k % 4 == 0;
}

struct Plan {
    kernel_fn f;
    Params p;
    uint64_t blocks; /* tiles_m * tiles_n: the caller checks it against the grid limit */
    int threads, smem;
    int variant; /* the variant that runs (0 when v needs alignment the call lacks) */
};

/* The launch of variant v (a valid index) for arguments already checked. */
inline Plan make_plan(int v, int m, int n, int k, float alpha, const float *A, int lda, const float *B, int ldb,
                      float beta, float *C, int ldc) {
    Plan pl;
    bool vec = vec_ok(n, k, A, lda, B, ldb, C, ldc);
    pl.f = vec ? kVariants[v].vec : kVariants[v].scalar;
    if (!pl.f) {
        v = 0;
        pl.f = kVariants[0].scalar;
    }
    const Variant &var = kVariants[v];
    pl.variant = v;
    pl.p.m = m;
    pl.p.n = n;
    pl.p.k = k;
    pl.p.alpha = alpha;
    pl.p.beta = beta;
    pl.p.A = A;
    pl.p.B = B;
    pl.p.C = C;
    pl.p.lda = lda;
    pl.p.ldb = ldb;
    pl.p.ldc = ldc;
    pl.p.tiles_m = carve_tiles(m, var.bm);
    pl.p.tiles_n = carve_tiles(n, var.bn);
    pl.blocks = (uint64_t)carve_grid(m, n, var.bm, var.bn);
    pl.threads = var.threads;
    pl.smem = var.smem;
    return pl;
}

}  // namespace carve_sgemm

#endif
