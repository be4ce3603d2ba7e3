/*
 * gemm_tc_wgmma.cuh — the Hopper tensor-core GEMM path (sm_90a only):
 * warpgroup MMA (wgmma.mma_async) reading both operands from shared memory
 * that TMA (cp.async.bulk.tensor) fills, in a ring of stages (4 for the
 * 256- and 192-wide tiles, 6 for 128: as many as shared memory holds beside
 * the epilogue's 32 KiB of staging) guarded by mbarriers.
 *
 * Persistent: the launch has at most one block per SM (the caller's grid,
 * WgPlan.grid), and block b takes units b, b + grid, b + 2 * grid, ... of
 * the tiles (times the split-K shares), so that while its consumers write
 * one tile's C the producer already loads the next tile's first stages,
 * and no block pays a launch, a barrier setup or an empty pipeline per
 * tile. A grid of one block per unit is the one-tile kernel
 * (CARVE_GEMM_PERSIST=0, for comparison).
 *
 * Block tile 128 x BN x 64 (BN = 256, 192 or 128), 3 warpgroups: warpgroup 0 is
 * the producer (one thread issues the TMA loads; its registers are given
 * back with setmaxnreg), warpgroups 1 and 2 each compute 64 x BN with
 * m64nBNk16 wgmma, accumulators in registers. Stage s is "full" when its
 * TMA bytes have landed (full[s], transaction count) and "empty" when every
 * consumer thread has seen its wgmma group retire (empty[s], 256 arrivals);
 * consumers keep one wgmma group in flight.
 *
 * Shared tiles use the 128-byte swizzle that TMA writes and wgmma reads: a
 * K-major operand is one box of (64 k) x rows, 128 bytes a row; an MN-major
 * operand is rows/64 boxes of (64 mn) x (64 k), each 8 KiB. The tensor maps
 * describe the real matrix extents, so TMA zero-fills everything past the
 * edge (partial tiles in M, N and K need no special code; an MN-major B
 * box wholly past N is not loaded at all) and the epilogue masks its
 * stores. TMA needs 16-byte aligned bases and row strides; the caller
 * checks that (carve_tc_tma_ok) and otherwise uses mma.sync.
 *
 * Epilogue: where carve_tc_tma_store_ok holds (16-bit C, beta 0, no split,
 * C and its rows on 16 bytes, N a multiple of 8), each consumer warpgroup
 * writes its rows into shared memory 64 columns at a time, in the 128-byte
 * swizzle of a 64 x 64 box (two 8 KiB buffers a warpgroup), and one of its
 * threads stores each chunk with a TMA store that runs on while the next
 * tile's k loop does. Elsewhere it stores from registers, the two
 * neighbouring columns a thread holds as one access where C's base and ldc
 * allow (store_pair).
 *
 * The tensor maps are made with cuTensorMapEncodeTiled, found through
 * cudaGetDriverEntryPointByVersion so that libcarve does not link libcuda,
 * and passed to the kernel as __grid_constant__ parameters.
 *
 * Split-K: with SplitParams.splits = S > 1 there are S times as many units
 * as tiles; unit u computes tile u % tiles over the S-th share u / tiles of
 * the k tiles (carve_tc_split_begin) and writes its fp32 sums, unscaled, to
 * slice u / tiles of the partials (S slices of M x N, row stride N); the
 * reduction (gemm_tc_ws.cuh) adds the slices in order and applies alpha and
 * beta. With S = 1 the kernel is the plain one, epilogue included.
 */
#ifndef CARVE_GEMM_TC_WGMMA_CUH
#define CARVE_GEMM_TC_WGMMA_CUH

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "gemm_tc_common.cuh"
#include "gemm_tc_mma.cuh"
#include "gemm_tc_plan.h"

namespace carve_tc {

constexpr int kWgBM = 128, kWgBK = 64, kWgThreads = 384;
static_assert(kWgBM == CARVE_TC_BM && kWgBK == CARVE_TC_BK, "the plan (gemm_tc_plan.h) counts these tiles");

/* Split-K (above): partial is S slices of M x N fp32 when splits > 1,
 * unused when splits == 1. */
struct SplitParams {
    float *partial;
    int splits;
    int store_tma; /* the epilogue stores C through mapC (carve_tc_tma_store_ok), else from registers */
};

template <int BN>
struct WgCfg {
    /* Stages of the ring: as many as fit (227 KiB of shared memory a block)
     * beside the epilogue's staging. */
    static constexpr int kStages = BN == 256 ? 4 : BN == 192 ? 4 : 6;
    static constexpr int kABytes = kWgBM * kWgBK * 2;
    static constexpr int kBBytes = BN * kWgBK * 2;
    static constexpr int kStageBytes = kABytes + kBBytes;
    /* The TMA-store epilogue's staging: two 64 x 64 chunks (8 KiB, 16-bit)
     * for each consumer warpgroup. */
    static constexpr int kStageOut = 2 * 2 * 8192;
    /* 1 KiB of slack to align the ring to the 1024-byte swizzle atom, then
     * the staging, then the barriers. */
    static constexpr int kSmem = 1024 + kStages * kStageBytes + kStageOut + 2 * kStages * 8;
};

/* ---- PTX wrappers -------------------------------------------------------- */

__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, int bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, int parity) {
    uint32_t done = 0;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!done);
}
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap *map, uint32_t bar, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, "
                 "%4}], [%2];\n" ::"r"(dst),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1)
                 : "memory");
}
/* TMA store of the box at (c0, c1) from shared memory, in a bulk group. */
__device__ __forceinline__ void tma_store_2d(const CUtensorMap *map, uint32_t src, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
                     reinterpret_cast<uint64_t>(map)),
                 "r"(src), "r"(c0), "r"(c1)
                 : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
/* At most N of this thread's bulk groups still reading shared memory. */
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
/* Named barrier over one warpgroup (id 1 or 2; 0 is __syncthreads). */
__device__ __forceinline__ void wg_bar(int id) { asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory"); }
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* Keep the compiler from moving accumulator accesses across wgmma fences. */
__device__ __forceinline__ void reg_fence(float &x) { asm volatile("" : "+f"(x)::"memory"); }

/* Shared-memory matrix descriptor, 128-byte swizzle: start address, leading
 * and stride byte offsets (all >> 4). */
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
    uint64_t d = 0;
    d |= (uint64_t)((addr & 0x3FFFF) >> 4);
    d |= (uint64_t)((lbo >> 4) & 0x3FFF) << 16;
    d |= (uint64_t)((sbo >> 4) & 0x3FFF) << 32;
    d |= (uint64_t)1 << 62;
    return d;
}

/* m64n128k16, fp32 accumulators d[0..64) in wgmma's fragment order. */
template <bool BF16, int TA, int TB>
__device__ __forceinline__ void wgmma_n128(float *d, uint64_t da, uint64_t db, int scale_d) {
    if (BF16)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
                     "{"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
                     "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
                     "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                     "}, %64, %65, p, 1, 1, %67, %68;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                       "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                       "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                       "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                       "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                     : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
                     "{"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
                     "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
                     "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                     "}, %64, %65, p, 1, 1, %67, %68;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                       "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                       "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                       "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                       "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                     : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));
}

/* m64n256k16, fp32 accumulators d[0..128) in wgmma's fragment order. */
template <bool BF16, int TA, int TB>
__device__ __forceinline__ void wgmma_n256(float *d, uint64_t da, uint64_t db, int scale_d) {
    if (BF16)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
                     "{"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
                     "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
                     "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
                     "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
                     "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
                     "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
                     "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
                     "}, %128, %129, p, 1, 1, %131, %132;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                       "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                       "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                       "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                       "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                       "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                       "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                       "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
                       "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
                       "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
                       "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
                       "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
                       "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                     : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
                     "{"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
                     "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
                     "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
                     "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
                     "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
                     "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
                     "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
                     "}, %128, %129, p, 1, 1, %131, %132;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                       "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                       "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                       "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                       "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                       "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                       "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                       "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
                       "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
                       "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
                       "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
                       "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
                       "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                     : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));
}

/* m64n192k16, fp32 accumulators d[0..96) in wgmma's fragment order. */
template <bool BF16, int TA, int TB>
__device__ __forceinline__ void wgmma_n192(float *d, uint64_t da, uint64_t db, int scale_d) {
    if (BF16)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 "
                     "{"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
                     "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
                     "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
                     "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
                     "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
                     "}, %96, %97, p, 1, 1, %99, %100;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                       "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                       "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                       "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                       "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                       "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                       "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                       "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
                       "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
                     : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16 "
                     "{"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
                     "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
                     "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
                     "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
                     "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
                     "}, %96, %97, p, 1, 1, %99, %100;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                       "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                       "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                       "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                       "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                       "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                       "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                       "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
                       "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
                     : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));
}

template <int BN, bool BF16, int TA, int TB>
__device__ __forceinline__ void wgmma_tile(float *d, uint64_t da, uint64_t db, int scale_d) {
    if (BN == 256)
        wgmma_n256<BF16, TA, TB>(d, da, db, scale_d);
    else if (BN == 192)
        wgmma_n192<BF16, TA, TB>(d, da, db, scale_d);
    else
        wgmma_n128<BF16, TA, TB>(d, da, db, scale_d);
}

/* Descriptor of the 64 (mn) x 16 (k) slice at mn offset mn0 (a multiple of
 * 64) and k offset k0 (a multiple of 16) of a stage tile at base.
 * K-major: rows of 128 bytes (64 k), 8-row groups 1024 bytes apart; a k step
 * of 16 is 32 bytes along the row (the swizzle is applied to the address).
 * MN-major: 8 KiB boxes of 64 mn per k row, 128-byte rows; LBO steps from
 * one 64-wide mn box to the next, SBO from one 8-row k group to the next. */
template <bool KMAJOR>
__device__ __forceinline__ uint64_t operand_desc(uint32_t base, int mn0, int k0) {
    if (KMAJOR)
        return smem_desc(base + mn0 * 128 + k0 * 2, 16, 1024);
    return smem_desc(base + (mn0 / 64) * 8192 + k0 * 128, 8192, 1024);
}

/* Where a side of the ring is: stage s, the parity of the ring's pass
 * (phase), and whether the ring has been gone round once (wrapped: from
 * then on the producer waits for a stage to be given back before it fills
 * it). Full barrier of stage s at bars + 8 s, empty barrier at
 * bars + 8 (S + s). */
template <int S>
struct WgRing {
    int s = 0, phase = 0;
    bool wrapped = false;
    __device__ __forceinline__ void next() {
        if (++s == S) {
            s = 0;
            phase ^= 1;
            wrapped = true;
        }
    }
    __device__ __forceinline__ uint32_t full(uint32_t bars) const { return bars + 8 * s; }
    __device__ __forceinline__ uint32_t empty(uint32_t bars) const { return bars + 8 * (S + s); }
    /* The stage before this one's empty barrier. */
    __device__ __forceinline__ uint32_t empty_prev(uint32_t bars) const { return bars + 8 * (S + (s == 0 ? S - 1 : s - 1)); }
};

/* The producer's turn at a stage: wait until the consumers gave it back
 * (past the first pass), then expect tx_bytes of TMA on its full barrier. */
template <int S>
__device__ __forceinline__ void wg_produce_begin(const WgRing<S> &r, uint32_t bars, int tx_bytes) {
    if (r.wrapped)
        mbar_wait(r.empty(bars), r.phase ^ 1);
    mbar_expect_tx(r.full(bars), tx_bytes);
}

/* A consumer warpgroup's k tile: wait for the stage to be full, issue its
 * wgmma group (issue(stage): the k16 steps, into the NACC accumulators d),
 * keep that one group in flight (wait for the group before it), give back
 * the stage before this one where release_prev (it belongs to this unit:
 * not at a unit's first k tile), and step the ring. */
template <int NACC, int S, typename Issue>
__device__ __forceinline__ void wg_consume(float *d, WgRing<S> &r, uint32_t bars, bool release_prev, Issue issue) {
    mbar_wait(r.full(bars), r.phase);
#pragma unroll
    for (int i = 0; i < NACC; i++)
        reg_fence(d[i]);
    wgmma_fence();
    issue(r.s);
    wgmma_commit();
#pragma unroll
    for (int i = 0; i < NACC; i++)
        reg_fence(d[i]);
    wgmma_wait<1>();
    if (release_prev)
        mbar_arrive(r.empty_prev(bars));
    r.next();
}

/* Where unit u of the launch lies: units are the output tiles times the
 * split-K factor; unit u is split u / tiles of tile u % tiles. Tiles go in
 * groups of 8 tile rows, column by column within a group, so that the
 * blocks running at once share rows of A and columns of B in L2. */
struct WgUnit {
    int m0, n0;           /* the tile's first row and column */
    int split;            /* which share of k */
    int kt_first, ktiles; /* the share: k tiles kt_first .. kt_first + ktiles - 1 */
};

template <int BN>
__device__ __forceinline__ WgUnit wg_unit(int u, const EpiParams &p, int splits) {
    const int tiles_m = carve_tiles(p.M, kWgBM), tiles_n = carve_tiles(p.N, BN);
    const int tiles = tiles_m * tiles_n; /* the launch's units fit an int (the grid args.c checked) */
    WgUnit w;
    w.split = u / tiles;
    const int bid = u - w.split * tiles, per_group = 8 * tiles_n;
    const int first_m = (bid / per_group) * 8;
    const int gsize = tiles_m - first_m < 8 ? tiles_m - first_m : 8;
    const int tm = first_m + (bid % per_group) % gsize, tn = (bid % per_group) / gsize;
    w.m0 = tm * kWgBM;
    w.n0 = tn * BN;
    const int ktiles_all = carve_tiles(p.K, kWgBK); /* (K + BK - 1) / BK overflows near INT_MAX */
    w.kt_first = carve_tc_split_begin(ktiles_all, w.split, splits);
    w.ktiles = carve_tc_split_begin(ktiles_all, w.split + 1, splits) - w.kt_first;
    return w;
}

/* Two neighbouring elements of one row of C, columns c and c + 1 (c even),
 * as one 4-byte (16-bit C) or 8-byte (fp32 C) access; the caller knows the
 * pair is inside C and aligned (wg_pairs_ok). */
template <typename T>
struct alignas(2 * sizeof(T)) WgPair {
    T x, y;
};

template <typename T>
__device__ __forceinline__ void store_pair(const EpiParams &p, int r, int c, float a0, float a1) {
    float v0 = p.alpha * a0, v1 = p.alpha * a1;
    if (p.c_f32) {
        float2 *C = reinterpret_cast<float2 *>(static_cast<float *>(p.C) + (long long)r * p.ldc + c);
        if (p.beta != 0.f) {
            const float2 o = *C;
            v0 = fmaf(p.beta, o.x, v0);
            v1 = fmaf(p.beta, o.y, v1);
        }
        *C = make_float2(v0, v1);
    } else {
        WgPair<T> *C = reinterpret_cast<WgPair<T> *>(static_cast<T *>(p.C) + (long long)r * p.ldc + c);
        if (p.beta != 0.f) {
            const WgPair<T> o = *C;
            v0 = fmaf(p.beta, to_f<T>(o.x), v0);
            v1 = fmaf(p.beta, to_f<T>(o.y), v1);
        }
        WgPair<T> w;
        w.x = from_f<T>(v0);
        w.y = from_f<T>(v1);
        *C = w;
    }
}

/* Whether every pair (row r, even column c) of C is aligned for
 * store_pair: C's base on two elements and ldc even. */
__device__ __forceinline__ bool wg_pairs_ok(const EpiParams &p, int elem_bytes) {
    return (uintptr_t)p.C % (uintptr_t)(2 * elem_bytes) == 0 && p.ldc % 2 == 0;
}

template <int BN, typename T, bool AK, bool BKM>
__global__ void __launch_bounds__(kWgThreads, 1)
    wgmma_gemm_kernel(const __grid_constant__ CUtensorMap mapA, const __grid_constant__ CUtensorMap mapB,
                      const __grid_constant__ CUtensorMap mapC, EpiParams p, SplitParams sp) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using Cfg = WgCfg<BN>;
    constexpr int S = Cfg::kStages;
    constexpr bool kBf16 = sizeof(T) == 2 && !std::is_same<T, __half>::value;
    extern __shared__ __align__(1024) unsigned char wg_smem[];
    const uint32_t raw = smem_u32(wg_smem);
    const uint32_t ring = (raw + 1023) & ~1023u;
    const uint32_t stage_out = ring + S * Cfg::kStageBytes; /* 1024-aligned: every stage is a multiple */
    const uint32_t bars = stage_out + Cfg::kStageOut;
    auto full = [&](int s) { return bars + 8 * s; };
    auto empty = [&](int s) { return bars + 8 * (S + s); };
    auto a_stage = [&](int s) { return ring + s * Cfg::kStageBytes; };
    auto b_stage = [&](int s) { return ring + s * Cfg::kStageBytes + Cfg::kABytes; };

    /* Split, the reduction comes next (gemm_tc_common.cuh: it waits for
     * this kernel): it may be placed at once. Unsplit, the next kernel is
     * the caller's, started only as this one ends (placed early, the next
     * call's blocks made back-to-back calls on 28672 x 8192 4-5% slower). */
    if (sp.splits > 1)
        grid_dep_launch();
    const int tid = threadIdx.x;
    const int wg = tid / 128;
    /* The one-unit grid's size: at most 2^31 - 1 (args.c, carve_tc_clamp_splits), so u + gridDim.x is
     * counted in 64 bits. */
    const long long units = (long long)carve_tiles(p.M, kWgBM) * carve_tiles(p.N, BN) * sp.splits;

    if (tid == 0) {
        for (int s = 0; s < S; s++) {
            mbar_init(full(s), 1);
            mbar_init(empty(s), 256);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    }
    grid_dep_wait(); /* nothing in global memory is touched before the kernel before this one is done */
    __syncthreads();

    /* Both sides walk the same units (u = blockIdx.x, + gridDim.x, ...) and
     * go round the ring over all of them: stage s, and the parity of the
     * ring's pass (phase), carried from one unit to the next, so the
     * producer runs into the next unit's first stages while the consumers
     * write this one's C. (Counted, not divided out of a k-tile count,
     * which a block of a huge launch could take past 2^31.) */
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (tid == 0) {
            WgRing<S> r;
            for (long long u = blockIdx.x; u < units; u += gridDim.x) {
                const WgUnit w = wg_unit<BN>((int)u, p, sp.splits);
                /* An MN-major B comes in boxes of 64 columns; a box wholly
                 * past N is not loaded (its coordinate, n0 + 64 c, may pass
                 * INT_MAX, and one moved back to N would be off 16 bytes,
                 * which TMA refuses): the columns it would hold are never
                 * stored, whatever the stage holds there. */
                const int ncols = p.N - w.n0;
                const int b_boxes = BKM || ncols >= BN ? BN / 64 : (ncols + 63) / 64;
                const int tx_bytes = Cfg::kABytes + (BKM ? Cfg::kBBytes : b_boxes * 8192);
                for (int kt = 0; kt < w.ktiles; kt++, r.next()) {
                    wg_produce_begin(r, bars, tx_bytes);
                    const int s = r.s;
                    const int k0 = (w.kt_first + kt) * kWgBK; /* <= 2^31 - 64: the last k tile ends by INT_MAX */
                    if (AK) {
                        tma_load_2d(a_stage(s), &mapA, full(s), k0, w.m0);
                    } else {
#pragma unroll
                        for (int c = 0; c < kWgBM / 64; c++)
                            tma_load_2d(a_stage(s) + c * 8192, &mapA, full(s), w.m0 + 64 * c, k0);
                    }
                    if (BKM) {
                        tma_load_2d(b_stage(s), &mapB, full(s), k0, w.n0);
                    } else {
#pragma unroll
                        for (int c = 0; c < BN / 64; c++)
                            if (c < b_boxes)
                                tma_load_2d(b_stage(s) + c * 8192, &mapB, full(s), w.n0 + 64 * c, k0);
                    }
                }
            }
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int cw = wg - 1; /* consumer warpgroup: rows 64*cw .. 64*cw+63 of the tile */
    const int lt = tid % 128, warp = lt / 32, lane = lt % 32;
    const bool pairs = sp.splits > 1 ? p.N % 2 == 0 : wg_pairs_ok(p, p.c_f32 ? 4 : (int)sizeof(T));
    float d[BN / 2];
    WgRing<S> r;
    unsigned chunks = 0; /* TMA-store chunks this warpgroup has written: chunk c uses buffer c % 2 */
    for (long long u = blockIdx.x; u < units; u += gridDim.x) {
        const WgUnit w = wg_unit<BN>((int)u, p, sp.splits);
#pragma unroll
        for (int i = 0; i < BN / 2; i++)
            d[i] = 0.f; /* what C gets where k is empty; the first wgmma of a tile overwrites it */

        for (int kt = 0; kt < w.ktiles; kt++)
            wg_consume<BN / 2>(d, r, bars, kt > 0, [&](int s) {
#pragma unroll
                for (int j = 0; j < kWgBK / 16; j++) {
                    const uint64_t da = operand_desc<AK>(a_stage(s), 64 * cw, 16 * j);
                    const uint64_t db = operand_desc<BKM>(b_stage(s), 0, 16 * j);
                    wgmma_tile<BN, kBf16, AK ? 0 : 1, BKM ? 0 : 1>(d, da, db, (kt > 0 || j > 0) ? 1 : 0);
                }
            });
        wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < BN / 2; i++)
            reg_fence(d[i]);
        if (w.ktiles > 0)
            mbar_arrive(r.empty_prev(bars)); /* the tile's last stage: the producer may refill it */

        /* Fragment layout: d[4j + 2i + c] is row 16*warp + lane/4 + 8i,
         * column 8j + 2*(lane%4) + c of this warpgroup's 64 x BN block: the
         * two values of c are neighbours in a row (an even column first). */
        /* Columns are counted from the tile's first (n0 + 191 passes
         * INT_MAX for the 192-wide tile's last tile when N is within 127
         * of it; rows end by INT_MAX: 2^31 is a multiple of 128). */
        const int rbase = w.m0 + 64 * cw + 16 * warp + lane / 4;
        const int cbase = 2 * (lane % 4), ncols = p.N - w.n0; /* this tile's columns: lc < ncols */
        if (sp.splits > 1) { /* this split's unscaled sums, into its slice of the partials */
            float *P = sp.partial + (long long)w.split * p.M * p.N;
#pragma unroll
            for (int j = 0; j < BN / 8; j++)
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    const int r = rbase + 8 * i, lc = cbase + 8 * j;
                    if (r >= p.M || lc >= ncols)
                        continue;
                    float *q = P + (long long)r * p.N + w.n0 + lc;
                    if (pairs && lc + 1 < ncols) {
                        *reinterpret_cast<float2 *>(q) = make_float2(d[4 * j + 2 * i], d[4 * j + 2 * i + 1]);
                    } else {
                        q[0] = d[4 * j + 2 * i];
                        if (lc + 1 < ncols)
                            q[1] = d[4 * j + 2 * i + 1];
                    }
                }
            continue;
        }
        if (sp.store_tma) {
            /* C through shared memory and TMA, 64 columns at a time: the
             * chunk in the 128-byte swizzle that the map's box has (16-byte
             * piece q of row r at piece q ^ (r % 8): the warp's 8 rows x 4
             * words hit 32 banks), two buffers a warpgroup, so that one
             * chunk is written while the one before is still being read.
             * The stores go on while the next tile's k loop runs; the map
             * clips rows past M and columns past N (a multiple of 8). */
            const int bar_id = 1 + cw;
            const int row0 = 16 * warp + lane / 4; /* and row0 + 8: (row0 + 8) % 8 == row0 % 8 */
#pragma unroll
            for (int q = 0; q < BN / 64; q++, chunks++) {
                const uint32_t buf = stage_out + (uint32_t)cw * 16384u + (chunks & 1u) * 8192u;
                if (lt == 0)
                    bulk_wait_read<1>(); /* the chunk before last, in this buffer, has been read */
                wg_bar(bar_id);
#pragma unroll
                for (int jj = 0; jj < 8; jj++) {
                    const int j = 8 * q + jj;
#pragma unroll
                    for (int i = 0; i < 2; i++) {
                        const int r = row0 + 8 * i;
                        WgPair<T> w2;
                        w2.x = from_f<T>(p.alpha * d[4 * j + 2 * i]);
                        w2.y = from_f<T>(p.alpha * d[4 * j + 2 * i + 1]);
                        const uint32_t a = buf + (uint32_t)r * 128u + (uint32_t)((jj ^ (r & 7)) * 16) +
                                           (uint32_t)(4 * (lane % 4));
                        const uint32_t bits = *reinterpret_cast<const uint32_t *>(&w2);
                        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(a), "r"(bits) : "memory");
                    }
                }
                asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
                wg_bar(bar_id);
                if (lt == 0) {
                    if (64 * q < ncols) /* a chunk wholly past N writes nothing (and n0 + 64 q may pass INT_MAX) */
                        tma_store_2d(&mapC, buf, w.n0 + 64 * q, w.m0 + 64 * cw);
                    bulk_commit(); /* an empty group where nothing was stored: the buffers' count stays */
                }
            }
            continue;
        }
#pragma unroll
        for (int j = 0; j < BN / 8; j++)
#pragma unroll
            for (int i = 0; i < 2; i++) {
                const int r = rbase + 8 * i, lc = cbase + 8 * j;
                if (r >= p.M || lc >= ncols)
                    continue;
                const int col = w.n0 + lc; /* < N: no overflow */
                if (pairs && lc + 1 < ncols) {
                    store_pair<T>(p, r, col, d[4 * j + 2 * i], d[4 * j + 2 * i + 1]);
                } else {
                    store_out<T>(p, r, col, d[4 * j + 2 * i]);
                    if (lc + 1 < ncols)
                        store_out<T>(p, r, col + 1, d[4 * j + 2 * i + 1]);
                }
            }
    }
    if (sp.store_tma && lt == 0)
        bulk_wait_all(); /* the block's shared memory must outlive the stores reading it */
#endif
}

}  // namespace carve_tc

#endif
