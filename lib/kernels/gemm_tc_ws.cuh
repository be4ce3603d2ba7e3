/*
 * gemm_tc_ws.cuh — the two small kernels around carve_gemm's Hopper path
 * that work in workspace carved from the call's arena: the aligned copy of
 * an operand TMA cannot read in place, and the split-K reduction.
 *
 * Copy: TMA reads rows that start on 16 bytes, so a matrix whose leading
 * dimension is not a multiple of 8 elements (or whose base is not 16-byte
 * aligned) is copied once, row by row, into rows of carve_tc_copy_ld(cols)
 * elements; the columns past cols are zero (TMA never reads them: its map
 * carries the real extents). One thread per 16-byte chunk of the copy.
 *
 * Reduction: the wgmma kernel's S blocks per tile wrote S slices of fp32
 * sums (M x N each, row stride N). Each thread adds one element's slices in
 * slice order, 0 to S-1 (no atomics: the same inputs give the same bits on
 * every run), and stores alpha * sum + beta * C exactly as the plain
 * epilogue does (store_out).
 */
#ifndef CARVE_GEMM_TC_WS_CUH
#define CARVE_GEMM_TC_WS_CUH

#include <stdint.h>

#include "gemm_tc_common.cuh"
#include "gemm_tc_mma.cuh"

namespace carve_tc {

constexpr int kWsThreads = 256;

/* dst (rows x ld_dst, 16-byte rows, 16-byte aligned) = src (rows x cols,
 * row stride ld_src elements, 2-byte aligned); dst's columns cols ..
 * ld_dst - 1 are zero. ld_dst is a multiple of 8. */
__global__ void __launch_bounds__(kWsThreads) copy_rows_kernel(const uint16_t *__restrict__ src, long long ld_src,
                                                               uint16_t *__restrict__ dst, long long ld_dst,
                                                               int rows, int cols) {
    grid_dep_launch();
    grid_dep_wait(); /* gemm_tc_common.cuh */
    const long long per_row = ld_dst / 8;
    const long long total = (long long)rows * per_row;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long r = i / per_row, c0 = (i - r * per_row) * 8;
        const uint16_t *s = src + r * ld_src + c0;
        uint32_t w[4];
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const uint32_t lo = c0 + 2 * e < cols ? s[2 * e] : 0;
            const uint32_t hi = c0 + 2 * e + 1 < cols ? s[2 * e + 1] : 0;
            w[e] = lo | (hi << 16);
        }
        *reinterpret_cast<uint4 *>(dst + r * ld_dst + c0) = make_uint4(w[0], w[1], w[2], w[3]);
    }
}

/* C = alpha * sum over s of partial[s] + beta * C (C not read when beta is
 * 0), for the M x N box of p; partial holds splits slices of M x N. */
template <typename T>
__global__ void __launch_bounds__(kWsThreads) splitk_reduce_kernel(const float *__restrict__ partial, int splits,
                                                                   EpiParams p) {
    grid_dep_launch();
    grid_dep_wait(); /* gemm_tc_common.cuh */
    const long long mn = (long long)p.M * p.N;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < mn;
         i += (long long)gridDim.x * blockDim.x) {
        float acc = partial[i];
        for (int s = 1; s < splits; s++)
            acc += partial[s * mn + i];
        const int r = (int)(i / p.N), c = (int)(i - (long long)r * p.N);
        store_out<T>(p, r, c, acc);
    }
}

/* Blocks for a grid-stride loop over n items: enough to fill the device a
 * few times over, never past what a grid holds. */
static inline unsigned ws_blocks(long long n, int sms) {
    long long b = (n + kWsThreads - 1) / kWsThreads, cap = (long long)(sms > 0 ? sms : 132) * 16;
    return (unsigned)(b < 1 ? 1 : b > cap ? cap : b);
}

}  // namespace carve_tc

#endif
