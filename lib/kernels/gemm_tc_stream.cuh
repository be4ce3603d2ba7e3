/*
 * gemm_tc_stream.cuh — carve_gemm's streaming kernel for decode shapes: a
 * canonical problem of at most 32 rows (CARVE_TC_STREAM_MAX_M), B N-major
 * (row k of B contiguous along n) or K-major (column n contiguous along k:
 * a weight stored out-features x in-features), on Hopper (thread block
 * clusters; sm_90a object). B's rows on 16 bytes are read as they are; rows
 * off 16 bytes (an odd ldb: a vocabulary of 50257 columns) are read in
 * place too, with no copy of B: at one 16-row tile each warp copies the
 * aligned 16-byte chunks that hold its step of B into shared memory
 * (cp.async, no registers held while they are in flight) and realigns
 * them as it reads the fragments (stage_b); at two, each 8 elements come
 * from the two aligned 16 bytes that hold them (ld_b16_any).
 *
 * The one idea: such a product is a read of B, so the kernel reads every
 * element of B once from memory, 16 bytes a load (B's rows off 16 bytes:
 * 9 aligned chunks for 8 of a line, or two aligned loads a lane, the
 * second mostly served by L1), with every SM busy, and
 * feeds mma.sync straight from the loaded registers, choosing which k each
 * fragment slot stands for so that the loads need no shuffling. Thread
 * (group g, thread t of its quad, as mma.sync numbers them) of a warp:
 *  - N-major: loads rows 4t .. 4t+3 of a 16-row k step at columns
 *    8g .. 8g+7: a warp reads 16 rows x 64 columns, 128 contiguous bytes a
 *    row. Eight m16n8k16 products use them: product j takes column 8g + j
 *    of the thread's vectors as its column g, and k slots (2t, 2t+1, 2t+8,
 *    2t+9) stand for rows 4t .. 4t+3. Two byte permutes turn two rows of 8
 *    columns into the (k, k+1) pairs a B fragment holds. Product j's output
 *    column 2t is C's column 16t + j, column 2t+1 is 16t + 8 + j.
 *  - K-major: loads column 8j + g at rows 32h + 8t .. +7 of a 64-row step
 *    (j = 0..7, h = 0, 1): 128 contiguous bytes of each column a step.
 *    Product j of k step s takes column 8j + g as its column g, and its k
 *    slots stand for rows 32(s/2) + 8t + 4(s%2) .. +3, whose pairs are
 *    words of the loaded vector as they are. Product j's output column c
 *    is C's column 8j + c.
 * A's fragments follow the same permutation of k (A is staged in shared
 * memory, K-major, so a fragment is one 8-byte read).
 *
 * Work: a block of CARVE_TC_STREAM_WARPS warps owns 64 columns; the blocks
 * of one cluster (cs of them, gemm_tc_plan.h chooses) own the same columns,
 * and the 4 * cs warps share k in runs of 64-row steps that differ by one
 * step at most. Each warp stages A's rows for its step in its own slice of
 * shared memory (only __syncwarp between warps' steps), so no block
 * barrier sits in the main loop. Rows past M are zero fragments, rows of k
 * past K are zeros in both operands, columns past N load zeros and are not
 * stored; a last group of fewer than 8 columns loads element by element.
 *
 * The reduction: every warp writes its fp32 sums to its block's shared
 * memory; after a cluster barrier the threads of the cluster share the
 * outputs, and each adds the 4 * cs sums of its outputs in one fixed order
 * (block rank, then warp) through distributed shared memory, then stores
 * alpha * sum + beta * C as the other paths do (store_out). No workspace,
 * no atomics, one launch: the same call gives the same bits every time.
 *
 * CARVE_GEMM_EMU: the kernel also compiles as plain C++ against an
 * emulation layer (tests/kernels/stream_emu.h) that runs a cluster's
 * threads as host threads and provides what this file takes from CUDA
 * (the cluster, the warp's mma.sync, the 16-byte load, shared memory,
 * EpiParams and store_out), so its indexing, edges and synchronization
 * are tested without a GPU (tests/kernels/test_gemm_stream_emu.cpp).
 */
#ifndef CARVE_GEMM_TC_STREAM_CUH
#define CARVE_GEMM_TC_STREAM_CUH

#include <stdint.h>

#ifndef CARVE_GEMM_EMU
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gemm_tc_common.cuh"
#include "gemm_tc_mma.cuh"
/* A block's shared memory, one variable of type `type`. */
#define CARVE_STREAM_SMEM(type, name) __shared__ __align__(16) type name
#endif
#include "gemm_tc_plan.h"

namespace carve_tc {

constexpr int kStWarps = CARVE_TC_STREAM_WARPS, kStThreads = kStWarps * 32;
constexpr int kStCols = CARVE_TC_STREAM_COLS, kStUnit = CARVE_TC_STREAM_UNIT;
/* Staged A rows: a step's 64 k plus 16 of padding (160 bytes), so that the
 * 8-byte fragment reads of a half warp (4 rows x 4 threads) hit 32
 * distinct banks, and 16-byte stores stay aligned. */
constexpr int kStLdA = kStUnit + 16;
static_assert(kStCols == 64 && kStUnit == 64, "the fragment layout below is for 64 columns and 64-row steps");

struct StreamParams {
    const void *A;
    const void *B;
    long long lda, ldb;
    long long b_elems; /* B's extent in elements, from B to its last element + 1 */
    int a_vec;    /* A K-major with 16-byte rows: staged with 16-byte loads */
    int clusters; /* blocks per 64 columns (the cluster size) */
    EpiParams ep;
};

/* B staged in shared memory (kStStaged below): a row of a warp's step (64
 * columns, 128 bytes off 16; K-major: a column's 64 k) spans 9 aligned
 * 16-byte chunks. */
constexpr int kStChunks = 9;

/* Whether an instance stages B through shared memory: B's rows off 16
 * bytes, one 16-row tile (stage_b below). */
template <int MT, bool BU>
constexpr bool kStStaged = BU && MT == 1;

/* A block's shared memory: the warps' staged A (and, SB, B) during the
 * main loop, then the warps' sums (33 floats a row: the reduction's reads,
 * which walk columns, spread over banks). 47,104 bytes with SB (MT = 1),
 * under the 48 KiB of static shared memory a block may have. */
template <int MT, bool SB = false>
union StreamSmem {
    struct {
        uint16_t a[kStWarps][16 * MT][kStLdA];
        uint4 b[SB ? kStWarps : 1][SB ? kStUnit * kStChunks : 1];
    } st;
    float red[kStWarps][MT * 32][33];
};

/* The shared memory a block of the instance for (M, B's layout, B's rows
 * off 16 bytes) has. */
inline int stream_smem_bytes(int M, bool b_kmajor, bool b_unaligned) {
    (void)b_kmajor;
    return carve_tc_stream_mt(M) == 2 ? (int)sizeof(StreamSmem<2>)
           : b_unaligned                ? (int)sizeof(StreamSmem<1, true>)
                                        : (int)sizeof(StreamSmem<1>);
}

#ifndef CARVE_GEMM_EMU
/* 16 bytes of B, read once: no L1 allocation. */
__device__ __forceinline__ uint4 ld_b16(const uint16_t *p) {
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
}

/* The same for a K-major B, asking L2 for the whole 256 bytes around them:
 * a thread reads 16 bytes of a column and the warp 128 bytes of it per
 * step, so the fetch brings the column's next step too. On an H100 with B
 * read from device memory (bench_gemm_sweep --decode, bench/results/
 * 2026-11-27-h100/l2-probe): 28672 x 8192 at m = 1, 0.73 -> 0.94 of cuBLAS;
 * 8192 x 28672, 0.77 -> 0.91; 4096 x 4096, 0.78 -> 0.70. For an N-major B
 * (128 bytes of a row a warp, the next 128 another block's) it lost as
 * often as it won, so that stays as it was. */
__device__ __forceinline__ uint4 ld_b16_pf(const uint16_t *p) {
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];\n"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
}

/* 16 bytes of B that a neighbouring lane reads as well: kept in L1; a
 * plain load (not the read-only path: see ld_b16_any). */
__device__ __forceinline__ uint4 ld_b16_l1(const uint16_t *p) {
    uint4 v;
    asm("ld.global.ca.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

/* 16 aligned bytes of B copied to shared memory without passing through
 * registers (cp.async, through L2 only: a plain, coherent read, as the
 * padding of B's rows may hold C); stream_copies_wait makes this thread's
 * copies land. */
__device__ __forceinline__ void stream_copy16(uint4 *dst, const uint16_t *src) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void stream_copies_wait() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}
#endif

/* The first `valid` (0 to 7) elements at p, zeros after. */
__device__ __forceinline__ uint4 ld_b_tail(const uint16_t *p, int valid) {
    uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
    for (int e = 0; e < 8; e++)
        if (e < valid)
            w[e >> 1] |= (uint32_t)p[e] << (16 * (e & 1));
    return make_uint4(w[0], w[1], w[2], w[3]);
}

/* Elements off .. off + 7 of the 16 in x then y (x's first): whole words
 * (off / 2) by selects, then half a word (odd off) by one byte permute a
 * word. No branch on off: the lanes of a warp differ in it. */
__device__ __forceinline__ uint4 realign(const uint4 &x, const uint4 &y, int off) {
    const uint32_t w[8] = {x.x, x.y, x.z, x.w, y.x, y.y, y.z, y.w};
    uint32_t u[6], v[5];
#pragma unroll
    for (int i = 0; i < 6; i++)
        u[i] = (off & 4) ? w[i + 2] : w[i];
#pragma unroll
    for (int i = 0; i < 5; i++)
        v[i] = (off & 2) ? u[i + 1] : u[i];
    const uint32_t sel = (off & 1) ? 0x5432u : 0x3210u;
    return make_uint4(__byte_perm(v[0], v[1], sel), __byte_perm(v[1], v[2], sel), __byte_perm(v[2], v[3], sel),
                      __byte_perm(v[3], v[4], sel));
}

/* B's rows off 16 bytes, two 16-row tiles (one tile stages B instead:
 * stage_b): the 8 elements at p (2-byte aligned), read from
 * the two aligned 16 bytes that hold them where both lie in [lo, hi) (B's
 * extent), else (within B's first 16 and last 31 bytes) element by
 * element. The second 16 bytes are the first a neighbouring lane loads
 * (the next 8 columns of the row, or the next 8 k of the column): both
 * loads keep them in L1, so the warp's second load is mostly served
 * there. The loads may cover B's padding (columns or k past B's own, up
 * to ldb), where C may legally lie and other blocks write during the
 * kernel: so plain loads, not the read-only path, and those bytes are
 * thrown away. (Handing the second 16 bytes over by shuffle instead, one
 * load a lane and a second in the lanes with no neighbour, measured
 * slower on an H100: 3 x 50257 x 768 at 0.49 of cuBLAS against 0.62,
 * bench/results/2026-11-27-h100/shuffle-probe; that version also read
 * wrong columns where N is a multiple of 8 but not of 64, which the
 * emulation test caught, and the probe's shapes did not have.) */
__device__ __forceinline__ uint4 ld_b16_any(const uint16_t *p, const uint16_t *lo, const uint16_t *hi) {
    const int off = (int)(((uintptr_t)p >> 1) & 7);
    const uintptr_t ca = (uintptr_t)p & ~(uintptr_t)15;
    if (ca < (uintptr_t)lo || ca + 32 > (uintptr_t)hi)
        return ld_b_tail(p, 8);
    const uint16_t *c = reinterpret_cast<const uint16_t *>(ca);
    return realign(ld_b16_l1(c), ld_b16_l1(c + 8), off);
}

/* B's rows off 16 bytes, staged (kStStaged): each of the step's 64 lines
 * of B (N-major: rows k0 .. k0+63 of the block's 64 columns; K-major:
 * columns nbase .. nbase+63 at k0 .. k0+63) into sb as the 9 aligned
 * 16-byte chunks that hold it: copied by stream_copy16 where the chunk lies
 * in B's extent [lo, hi), element by element (zeros outside B) where it
 * lies across an end of B, zeros for N-major rows past K and K-major
 * columns past N. Line l sits at position stream_line_pos(l), so that a
 * quarter warp's 16-byte reads (8 lanes: g = 0, 1 and t = 0 .. 3) fall in
 * 8 distinct bank groups: N-major, the rows 4t + r of two chunk columns
 * g, g + 1; K-major, chunks 4h + t of two columns 8j + g. Elements past
 * the line's own (N-major: columns past N, B's padding or the next row;
 * K-major: k past K) are read and thrown away: an output column depends
 * on its own column of B only, and those past N are not stored; k past K
 * is zeroed as the fragments are read (stream_kmask). line(l): the
 * address of line l's first element. On an H100 (bench/results/
 * 2026-11-27-h100c, staged/ and staged2/, carve / cuBLAS, the kernel before -> staged,
 * same run): 50257 x 768 at m = 1, 4, 16: 0.53 -> 0.89, 0.61 -> 1.01,
 * 0.96 -> 1.59; 32001 x 4096: 0.83 -> 1.26, 0.64 -> 0.96, 1.05 -> 1.59;
 * B K-major, 32000 x 4097: 0.35 -> 0.83, 0.57 -> 1.27, 0.49 -> 0.90; a
 * fraction of the memory roofline of 0.53-0.65, where aligned rows reach
 * 0.68-0.78 (the 9th chunk of each line, and the realignment). */
template <bool BKM>
__device__ __forceinline__ int stream_line_pos(int l) {
    if (BKM) { /* column 8j + g at 8j + (g / 2) + 4 (g % 2) */
        const int g = l & 7;
        return (l & ~7) + (g >> 1) + 4 * (g & 1);
    }
    const int q = 4 * (l >> 4) + (l & 3), t = (l >> 2) & 3; /* row l = 16 (q / 4) + 4t + q % 4 */
    return 8 * (q >> 1) + 2 * t + (q & 1);
}
template <bool BKM, class Line>
__device__ __forceinline__ void stage_b(uint4 *sb, const Line &line, long long first, long long count,
                                        const uint16_t *lo, const uint16_t *hi, int lane) {
    for (int i = lane; i < kStUnit * kStChunks; i += 32) {
        const int l = i / kStChunks, c = i - l * kStChunks;
        uint4 *dst = &sb[stream_line_pos<BKM>(l) * kStChunks + c];
        const bool ok = first + l < count;
        const uintptr_t ca = ((uintptr_t)line(l) & ~(uintptr_t)15) + 16 * (uintptr_t)c;
        if (ok && ca >= (uintptr_t)lo && ca + 16 <= (uintptr_t)hi) {
            stream_copy16(dst, reinterpret_cast<const uint16_t *>(ca));
        } else {
            uint32_t w[4] = {0, 0, 0, 0};
            if (ok)
#pragma unroll
                for (int e = 0; e < 8; e++) {
                    const uint16_t *q = reinterpret_cast<const uint16_t *>(ca) + e;
                    if (q >= lo && q < hi)
                        w[e >> 1] |= (uint32_t)*q << (16 * (e & 1));
                }
            *dst = make_uint4(w[0], w[1], w[2], w[3]);
        }
    }
}

/* 8 staged elements of line l from chunk c on (c, c + 1 realigned by the
 * line's offset from 16 bytes). */
template <bool BKM, class Line>
__device__ __forceinline__ uint4 staged8(const uint4 *sb, const Line &line, int l, int c) {
    const uint4 *p = &sb[stream_line_pos<BKM>(l) * kStChunks + c];
    return realign(p[0], p[1], (int)(((uintptr_t)line(l) >> 1) & 7));
}

/* v with its elements from `valid` on (0 to 8) zeroed. */
__device__ __forceinline__ uint4 stream_kmask(uint4 v, int valid) {
    uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const uint32_t keep = valid >= 2 * i + 2 ? 0xffffffffu : valid == 2 * i + 1 ? 0xffffu : 0u;
        w[i] &= keep;
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

__device__ __forceinline__ uint32_t word(const uint4 &v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

/* Rows 0 .. M-1 of A for k0 .. k0+63 into sa (K-major), zeros past K. */
template <bool AK>
__device__ __forceinline__ void stage_a(uint16_t (*sa)[kStLdA], const StreamParams &p, long long k0, int lane) {
    const uint16_t *A = static_cast<const uint16_t *>(p.A);
    const int M = p.ep.M, K = p.ep.K;
    if (AK && p.a_vec && k0 + kStUnit <= K) {
        for (int i = lane; i < M * (kStUnit / 8); i += 32) {
            const int m = i >> 3, c = (i & 7) * 8;
            *reinterpret_cast<uint4 *>(&sa[m][c]) = *reinterpret_cast<const uint4 *>(A + m * p.lda + k0 + c);
        }
    } else if (AK) {
        for (int i = lane; i < M * kStUnit; i += 32) {
            const int m = i / kStUnit, kk = i % kStUnit;
            const long long k = k0 + kk;
            sa[m][kk] = k < K ? A[m * p.lda + k] : (uint16_t)0;
        }
    } else { /* A[k * lda + m]: lanes along m, the stored rows */
        for (int i = lane; i < M * kStUnit; i += 32) {
            const int kk = i / M, m = i - kk * M;
            const long long k = k0 + kk;
            sa[m][kk] = k < K ? A[k * p.lda + m] : (uint16_t)0;
        }
    }
}

/* Blocks an SM holds (the register budget, 65536 / (128 * blocks)): the
 * most at which ptxas (CUDA 13.0) spills nothing, but for B K-major with
 * rows off 16 bytes at one 16-row tile. With B's rows off 16 bytes at one
 * tile (staged through shared memory: a step's B is no longer held in
 * registers) both layouts run four blocks (128 registers; 47,104 bytes of
 * shared memory a block, 188 KiB an SM): B N-major with no spills, B
 * K-major with 4 (A M-major) or 12 (A K-major) bytes of spill stores and
 * as many of loads a thread, which the figures at stage_b include; before
 * the staging, B N-major there spilled 36-84 bytes a thread at four blocks
 * and B K-major held 160-164 registers (three). */
template <int MT, bool BKM, bool BU>
constexpr int kStMinBlocks = MT == 1 ? (BKM && !BU ? 3 : 4) : (BKM || BU ? 2 : 3);

/* MT: 16-row tiles of A (M <= 16 * MT). AK: A K-major (else M-major).
 * BKM: B K-major (else N-major). BU: B's rows not on 16 bytes. */
template <typename T, int MT, bool AK, bool BKM, bool BU>
__global__ void __launch_bounds__(kStThreads, kStMinBlocks<MT, BKM, BU>) stream_gemm_kernel(const StreamParams p) {
    namespace cg = cooperative_groups;
    constexpr bool SB = kStStaged<MT, BU>;
    using Smem = StreamSmem<MT, SB>;
    CARVE_STREAM_SMEM(Smem, sm);
    /* Launched after the kernel before it may have started (gemm_tc_common.cuh):
     * nothing in global memory is touched before it is done. This kernel
     * never lets the next start early: blocks of the next placed while this
     * one runs crowd the SMs unevenly (back-to-back calls ran up to 10%
     * slower). */
    grid_dep_wait();
    cg::cluster_group cluster = cg::this_cluster();
    const int cs = p.clusters, rank = (int)cluster.block_rank();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int M = p.ep.M, N = p.ep.N, K = p.ep.K;
    const long long nbase = (long long)(blockIdx.x / cs) * kStCols, n0 = nbase + 8 * g;
    const int nvalid = N - n0 >= 8 ? 8 : N - n0 > 0 ? (int)(N - n0) : 0;
    /* N-major: this thread's 8 columns; K-major: its column 8j + g is
     * B + j * jstep (valid when bit j of jvalid is set). */
    const uint16_t *B = static_cast<const uint16_t *>(p.B);
    const uint16_t *const b_lo = B, *const b_hi = B + p.b_elems;
    const long long jstep = 8 * p.ldb;
    /* SB: line l of the step at k0 (stage_b) */
    const uint16_t *const Bsb = B + (BKM ? nbase * p.ldb : nbase);
    const long long ldb = p.ldb;
    unsigned jvalid = 0;
    if (!BKM && nvalid > 0)
        B += n0;
    if (BKM) {
        B += (nbase + g) * p.ldb;
#pragma unroll
        for (int j = 0; j < 8; j++)
            jvalid |= (nbase + 8 * j + g < N ? 1u : 0u) << j;
    }

    /* This warp's run of k steps. */
    const long long units = carve_tiles(K, kStUnit);
    const int runs = cs * kStWarps, run = rank * kStWarps + warp;
    const long long ub = carve_tc_stream_run_begin(units, run, runs);
    const long long ue = carve_tc_stream_run_begin(units, run + 1, runs);

    float acc[MT][8][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int r = 0; r < 4; r++)
                acc[mt][j][r] = 0.f;

    uint16_t(*sa)[kStLdA] = sm.st.a[warp];
    uint4 *const sb = sm.st.b[SB ? warp : 0];
    /* The staged rows past M are zeros for the whole loop (stage_a writes
     * rows 0 .. M-1 only), so the fragment reads below need no test (but
     * where B is staged too: there the lanes of those rows skip theirs). */
    for (int i = M * kStUnit + lane; i < 16 * MT * kStUnit; i += 32)
        sa[i / kStUnit][i % kStUnit] = 0;
    for (long long u = ub; u < ue; u++) {
        const long long k0 = u * kStUnit;
        /* B first: its loads are in flight while A is staged. N-major:
         * bv[s][r] is row 16s + 4t + r of the step at columns 8g .. 8g+7
         * (SB: read from shared memory below, one s at a time).
         * K-major: bv[j][h] is column 8j + g at rows 32h + 8t .. +7. */
        uint4 bv[BKM ? 8 : 4][BKM ? 2 : 4];
        const auto line = [&](int l) { return BKM ? Bsb + l * ldb + k0 : Bsb + (k0 + l) * ldb; };
        if constexpr (SB) {
            __syncwarp(); /* the last step's reads of sb are done */
            stage_b<BKM>(sb, line, BKM ? nbase : k0, BKM ? N : K, b_lo, b_hi, lane);
        } else if constexpr (!BKM) {
            if (!BU && nvalid == 8 && k0 + kStUnit <= K) { /* a whole step: no test a load */
                const uint16_t *src = B + (k0 + 4 * t) * p.ldb;
#pragma unroll
                for (int s = 0; s < 4; s++)
#pragma unroll
                    for (int r = 0; r < 4; r++)
                        bv[s][r] = ld_b16(src + (16 * s + r) * p.ldb);
            } else {
#pragma unroll
                for (int s = 0; s < 4; s++)
#pragma unroll
                    for (int r = 0; r < 4; r++) {
                        const long long row = k0 + 16 * s + 4 * t + r;
                        const uint16_t *src = B + row * p.ldb;
                        if (row < K && nvalid == 8)
                            bv[s][r] = BU ? ld_b16_any(src, b_lo, b_hi) : ld_b16(src);
                        else if (row < K && nvalid > 0)
                            bv[s][r] = ld_b_tail(src, nvalid);
                        else
                            bv[s][r] = make_uint4(0, 0, 0, 0);
                    }
            }
        } else if (!BU && jvalid == 0xffu && k0 + kStUnit <= K) { /* a whole step: no test a load */
#pragma unroll
            for (int h = 0; h < 2; h++)
#pragma unroll
                for (int j = 0; j < 8; j++)
                    bv[j][h] = ld_b16_pf(B + j * jstep + k0 + 32 * h + 8 * t);
        } else {
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const long long k = k0 + 32 * h + 8 * t;
                const int kvalid = K - k >= 8 ? 8 : K - k > 0 ? (int)(K - k) : 0;
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    const uint16_t *src = B + j * jstep + k;
                    const bool ok = (jvalid >> j) & 1u;
                    if (ok && kvalid == 8)
                        bv[j][h] = BU ? ld_b16_any(src, b_lo, b_hi) : ld_b16_pf(src);
                    else if (ok && kvalid > 0)
                        bv[j][h] = ld_b_tail(src, kvalid);
                    else
                        bv[j][h] = make_uint4(0, 0, 0, 0);
                }
            }
        }
        __syncwarp(); /* the last step's fragment reads are done */
        stage_a<AK>(sa, p, k0, lane);
        if constexpr (SB)
            stream_copies_wait(); /* this lane's copies of B landed; the barrier shows them to the warp */
        __syncwarp();
#pragma unroll
        for (int s = 0; s < 4; s++) {
            if constexpr (SB && !BKM) {
#pragma unroll
                for (int r = 0; r < 4; r++)
                    bv[s][r] = staged8<BKM>(sb, line, 16 * s + 4 * t + r, g);
            } else if constexpr (SB) {
                if ((s & 1) == 0) { /* rows 32h + 8t .. +7 of the 8 columns, h = s / 2 */
                    const int h = s >> 1;
                    const long long kk = k0 + 32 * h + 8 * t;
                    const int kvalid = K - kk >= 8 ? 8 : K - kk > 0 ? (int)(K - kk) : 0;
#pragma unroll
                    for (int j = 0; j < 8; j++)
                        bv[j][h] = stream_kmask(staged8<BKM>(sb, line, 8 * j + g, 4 * h + t), kvalid);
                }
            }
            /* The step's k slots (2t, 2t+1, 2t+8, 2t+9) are rows kofs ..
             * kofs+3 of this thread's quad: N-major 4t .. 4t+3 of the
             * step's 16; K-major 4 of the 8 rows of a 16-byte load. */
            const int kofs = BKM ? 32 * (s >> 1) + 8 * t + 4 * (s & 1) : 16 * s + 4 * t;
            uint32_t a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                /* SB: the lanes of rows past M do not read (shared
                 * memory is what the staged kernel waits for) */
                const uint2 z = make_uint2(0, 0);
                const uint2 lo =
                    !SB || 16 * mt + g < M ? *reinterpret_cast<const uint2 *>(&sa[16 * mt + g][kofs]) : z;
                const uint2 hi =
                    !SB || 16 * mt + g + 8 < M ? *reinterpret_cast<const uint2 *>(&sa[16 * mt + g + 8][kofs]) : z;
                a[mt][0] = lo.x, a[mt][1] = hi.x, a[mt][2] = lo.y, a[mt][3] = hi.y;
            }
#pragma unroll
            for (int j = 0; j < 8; j++) {
                uint32_t b[2];
                if constexpr (!BKM) {
                    const uint32_t sel = (j & 1) ? 0x7632u : 0x5410u;
                    b[0] = __byte_perm(word(bv[s][0], j >> 1), word(bv[s][1], j >> 1), sel);
                    b[1] = __byte_perm(word(bv[s][2], j >> 1), word(bv[s][3], j >> 1), sel);
                } else {
                    b[0] = word(bv[j][s >> 1], 2 * (s & 1));
                    b[1] = word(bv[j][s >> 1], 2 * (s & 1) + 1);
                }
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
                    mma16816<T>(acc[mt][j], a[mt], b);
            }
        }
    }

    __syncthreads(); /* the sums overlay every warp's staged A */
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int r = 0; r < 4; r++)
                sm.red[warp][(mt * 8 + j) * 4 + r][lane] = acc[mt][j][r];
    cluster.sync(); /* every block's sums are written and visible */

    /* Output (row, col) of this tile: register 2 * (row's half) + e of
     * lane 4 * (row % 8) + t, in 16-row tile row / 16, of product j where
     * N-major: j = col % 8, col = 16t + 8e + j (product j's column 2t + e
     * is column 8 (2t + e) + j of the vectors); K-major: j = col / 8,
     * col = 8j + 2t + e (product j's column g is B's column 8j + g). */
    for (int o = rank * kStThreads + threadIdx.x; o < M * kStCols; o += cs * kStThreads) {
        const int row = o / kStCols, col = o % kStCols;
        const long long n = nbase + col;
        if (n >= N)
            continue;
        const int rr = row & 15;
        const int j = BKM ? col >> 3 : col & 7, e = BKM ? col & 1 : (col >> 3) & 1;
        const int tq = BKM ? (col & 7) >> 1 : col >> 4;
        const int slot = ((row >> 4) * 8 + j) * 4 + (rr >> 3) * 2 + e, ln = (rr & 7) * 4 + tq;
        float sum = 0.f;
        for (int q = 0; q < cs; q++) {
            const Smem *rs = cluster.map_shared_rank(&sm, q);
#pragma unroll
            for (int w = 0; w < kStWarps; w++)
                sum += rs->red[w][slot][ln];
        }
        store_out<T>(p.ep, row, (int)n, sum);
    }
    cluster.sync(); /* no block leaves while another reads its sums */
}

/* The host's side of a launch, shared with the CPU tests (which drive the
 * kernel through these two as gemm_tc.cu does). The kernel's parameters
 * for a canonical problem: */
inline StreamParams stream_params(const void *A, long long lda, bool a_kmajor, const void *B, long long ldb,
                                  bool b_kmajor, int clusters, const EpiParams &ep) {
    StreamParams sp;
    sp.A = A, sp.B = B, sp.lda = lda, sp.ldb = ldb;
    /* B is K x N N-major or N x K K-major: (rows - 1) * ldb + the last row. */
    sp.b_elems = b_kmajor ? (long long)(ep.N - 1) * ldb + ep.K : (long long)(ep.K - 1) * ldb + ep.N;
    sp.a_vec = carve_tc_stream_a_vec(a_kmajor, (uintptr_t)A, lda);
    sp.clusters = clusters;
    sp.ep = ep;
    return sp;
}

/* launch(kernel), with the instance of stream_gemm_kernel a problem of M
 * rows (at most CARVE_TC_STREAM_MAX_M) needs: the operands' type, the
 * 16-row tiles (carve_tc_stream_mt), A's and B's layouts, whether B's rows
 * are off 16 bytes (carve_tc_stream_b_rows); stream_instance numbers the
 * instances 0 to kStInstances - 1. */
constexpr int kStInstances = 32;
inline int stream_instance(bool bf16, int M, bool a_kmajor, bool b_kmajor, bool b_unaligned) {
    return (b_unaligned ? 16 : 0) | (bf16 ? 8 : 0) | (carve_tc_stream_mt(M) == 2 ? 4 : 0) | (a_kmajor ? 2 : 0) |
           (b_kmajor ? 1 : 0);
}
template <bool BU, class Launch>
auto stream_dispatch_b(int inst, Launch &&launch) {
    using H = __half;
    using BF = __nv_bfloat16;
    switch (inst & 15) {
    case 0: return launch(stream_gemm_kernel<H, 1, false, false, BU>);
    case 1: return launch(stream_gemm_kernel<H, 1, false, true, BU>);
    case 2: return launch(stream_gemm_kernel<H, 1, true, false, BU>);
    case 3: return launch(stream_gemm_kernel<H, 1, true, true, BU>);
    case 4: return launch(stream_gemm_kernel<H, 2, false, false, BU>);
    case 5: return launch(stream_gemm_kernel<H, 2, false, true, BU>);
    case 6: return launch(stream_gemm_kernel<H, 2, true, false, BU>);
    case 7: return launch(stream_gemm_kernel<H, 2, true, true, BU>);
    case 8: return launch(stream_gemm_kernel<BF, 1, false, false, BU>);
    case 9: return launch(stream_gemm_kernel<BF, 1, false, true, BU>);
    case 10: return launch(stream_gemm_kernel<BF, 1, true, false, BU>);
    case 11: return launch(stream_gemm_kernel<BF, 1, true, true, BU>);
    case 12: return launch(stream_gemm_kernel<BF, 2, false, false, BU>);
    case 13: return launch(stream_gemm_kernel<BF, 2, false, true, BU>);
    case 14: return launch(stream_gemm_kernel<BF, 2, true, false, BU>);
    default: return launch(stream_gemm_kernel<BF, 2, true, true, BU>);
    }
}
template <class Launch>
auto stream_dispatch(bool bf16, int M, bool a_kmajor, bool b_kmajor, bool b_unaligned, Launch &&launch) {
    const int inst = stream_instance(bf16, M, a_kmajor, b_kmajor, b_unaligned);
    return b_unaligned ? stream_dispatch_b<true>(inst, launch) : stream_dispatch_b<false>(inst, launch);
}

}  // namespace carve_tc

#endif
