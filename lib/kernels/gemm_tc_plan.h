/*
 * gemm_tc_plan.h — how carve_gemm's Hopper path lays a problem out before
 * any launch: the tile width, the split-K factor and the workspace (split-K
 * partials, aligned copies of operands TMA cannot read in place).
 *
 * The one idea of the split-K choice: a GEMM whose output has fewer tiles
 * than the device has SMs (decode: m <= 256 tokens times a weight matrix)
 * leaves SMs idle while the busy ones stream all of k, so the time is one
 * tile's whole k loop. Splitting k over S thread blocks per tile makes
 * tiles * S blocks, each with 1/S of the k loop, at the price of writing
 * S fp32 partials per output element and a second kernel that adds them.
 * carve_tc_choose_splits counts both in one unit, the time one block takes
 * for one k tile of 64 while every SM streams its B tile from DRAM:
 *
 *   cost(S) = loops(tiles * S) * ceil(ktiles / S)         the k loops
 *           + 8 * S * M * N / (sms * BN * 128)            partials written and read  (S > 1)
 *           + CARVE_TC_REDUCE_COST                        the reduction's launch     (S > 1)
 *   loops(b) = floor(b / sms) + max(r / sms, CARVE_TC_WAVE_FLOOR / 100),
 *              r = b mod sms (the last term only where r > 0)
 *
 * (a k tile of B is BN * 64 * 2 bytes, so one unit moves sms * BN * 128
 * bytes across the chip; a partial is 4 bytes written and 4 read), and
 * takes the cheapest S, S = 1 on ties. A wave of fewer blocks than SMs
 * shares the bandwidth among fewer, but a block streams at most 1.25
 * times its share (CARVE_TC_WAVE_FLOOR, 80%): so an output with most SMs
 * busy is not split (the partials' bytes and the reduction's launch cost
 * more than the idle SMs give), and one with few is. Only outputs of fewer tiles than SMs
 * are split, no split has fewer than CARVE_TC_MIN_SPLIT_KTILES k tiles,
 * and S <= CARVE_TC_MAX_SPLITS. Fitted on an H100: bench_gemm_sweep
 * --decode under CARVE_GEMM_PATH=wgmma with S forced to 1, 2, 3, 4, 6, 8
 * on the 101 decode rows (bench/results/2026-11-27-h100/splitk-probe): the
 * rule's picks take 1.004 times the time of the fastest S of each row,
 * 1.17 at worst (the model without the floor, waves counted whole:
 * 1.021, 1.41 at worst, 128 x 11008 x 4096 split 3 ways where unsplit
 * was fastest); floors from 77% to 87% fit about as well (1.0045-1.0048),
 * 74% and 71% worse (1.007, 1.016).
 *
 * Decode shapes with few rows and wide outputs (M <= 4, N >= 8192; M <= 2,
 * N >= 4096; M <= 16
 * and N >= 1024, K-major B 4096 (M <= 8 from 3072, M <= 4 from 1024),
 * where B's rows are off 16 bytes) skip the
 * wgmma tile altogether: the streaming kernel (gemm_tc_stream.cuh) reads
 * each element of B once (16-byte loads; rows off 16 bytes as aligned
 * 16-byte copies into shared memory), from every SM. It can take up to CARVE_TC_STREAM_MAX_M rows, but the plan gives it
 * only the shapes where it measured faster than wgmma on the same card
 * (carve_tc_stream_chosen).
 * Its cost argument and its cluster size are below (carve_tc_stream_takes,
 * carve_tc_stream_cluster, carve_tc_stream_plan_cluster).
 *
 * Plain C, host only, so the CPU tests check it (tests/kernels/
 * test_gemm_plan.c); gemm_tc.cu uses it to plan each call.
 */
#ifndef CARVE_KERNEL_GEMM_TC_PLAN_H
#define CARVE_KERNEL_GEMM_TC_PLAN_H

#include <stdint.h>

#include "tiles.h"

#define CARVE_TC_BM 128            /* block tile rows (both widths) */
#define CARVE_TC_BK 64             /* k per stage */
#define CARVE_TC_MAX_SPLITS 16     /* thread blocks per output tile, at most */
#define CARVE_TC_MIN_SPLIT_KTILES 4 /* k tiles per split, at least: a 4-stage ring fills */
#define CARVE_TC_REDUCE_COST 3     /* the reduction's launch, in k-tile units (~2 us) */
#define CARVE_TC_WAVE_FLOOR 80     /* a wave of few blocks takes this share of a full one, at least (%) */
#define CARVE_TC_WS_ALIGN 256      /* each workspace piece starts on this (TMA needs 16) */

/* The tile width (128, 192 or 256 columns; 128 rows each) for an M x N
 * output on a device of sms SMs. The persistent kernel runs the tiles in
 * waves of sms; a wave takes about as long as one tile, which is about
 * BN + CARVE_TC_TILE_FIXED in the units of 64 columns of k work (wider
 * tiles do more per byte of A they load, and every tile pays its
 * epilogue). So the width with the fewest waves times that wins, the
 * widest on ties:
 *
 *   cost(BN) = ceil(tiles(BN) / sms) * (BN + CARVE_TC_TILE_FIXED)
 *
 * 3072 x 3072 on 132 SMs: 256 wide, 288 tiles, 3 waves (the last a sixth
 * full); 192 wide, 384 tiles, the same 3 waves of narrower tiles: 192.
 * 4096 x 4096: 4 waves of 256 against 6 of 192 and 8 of 128: 256. Where
 * every width fits in one wave (decode, small outputs) the narrowest wins:
 * more blocks, each with a shorter tile, and split-K (below) fills the rest.
 * CARVE_TC_TILE_FIXED was fitted on an H100 (bench/results/2026-11-28-h100,
 * `bn/`): every width forced (CARVE_GEMM_BN) on 14 prefill shapes, the
 * widths' times best matched by any value from 13 to 25; 16, inside that
 * range, then checked on unseen shapes. (It was 32, an estimate: 2048 x 11008
 * went 256 wide, 6 waves, the last a fifth full, 2% slower than 128.) */
#define CARVE_TC_TILE_FIXED 16

static inline int carve_tc_choose_bn(int M, int N, int sms) {
    static const int widths[3] = {256, 192, 128};
    if (sms <= 0)
        sms = 1;
    int best = 256;
    int64_t best_cost = -1;
    for (int i = 0; i < 3; i++) {
        const int64_t waves = (carve_grid(M, N, CARVE_TC_BM, widths[i]) + sms - 1) / sms;
        const int64_t cost = waves * (widths[i] + CARVE_TC_TILE_FIXED);
        if (best_cost < 0 || cost < best_cost) {
            best_cost = cost;
            best = widths[i];
        }
    }
    return best;
}

/* Whether the wgmma epilogue may write C with TMA stores (from shared
 * memory, while the next tile's k loop runs): C in a 16-bit type, beta 0
 * (C is not read), no split (the partials are fp32), and C as TMA writes
 * it: a 16-byte base, rows on 16 bytes (ldc a multiple of 8), and N a
 * multiple of 8, so that no 16-byte piece of a row crosses column N: a
 * TMA store of rows ending inside such a piece changed C's padding on the
 * H100 (bench/results/2026-11-26-h100g; with a dense C that would be the
 * next row's first elements). */
static inline int carve_tc_tma_store_ok(uintptr_t c, int64_t ldc, int N, float beta, int c_f32, int splits) {
    return !c_f32 && beta == 0.0f && splits == 1 && c % 16 == 0 && ldc % 8 == 0 && N % 8 == 0;
}

/* Tiny products (at most CARVE_TC_TINY_MACS multiply-adds, and k at most
 * CARVE_TC_TINY_K, so that no thread walks a long k alone: a few hundred
 * cycles of work) run on a kernel of one thread an output
 * (gemm_tc_tiny.cuh) when the path is the automatic one and the streaming
 * kernel does not take them: the tiled kernels fill their pipelines for
 * longer than such a product takes. */
#define CARVE_TC_TINY_MACS 4096
#define CARVE_TC_TINY_K 64

static inline int carve_tc_tiny(int M, int N, int K) {
    /* Each factor bounded before the product, which cannot overflow then. */
    return M >= 1 && N >= 1 && K >= 1 && M <= CARVE_TC_TINY_MACS && N <= CARVE_TC_TINY_MACS && K <= CARVE_TC_TINY_K &&
           (int64_t)M * N * K <= CARVE_TC_TINY_MACS;
}

/* The persistent kernel's grid for `units` tiles (times the split-K
 * shares): one block an SM at most (a block takes a whole SM's shared
 * memory), never more blocks than units. */
static inline int carve_tc_persist_grid(int64_t units, int sms) {
    if (sms <= 0)
        sms = 1;
    return units < (int64_t)sms ? (int)units : sms;
}

/* The split-K factor for an M x N x K problem with BN-wide tiles on a
 * device of sms SMs (the model above). 1 when no split pays. */
static inline int carve_tc_choose_splits(int M, int N, int K, int bn, int sms) {
    const int64_t tiles = carve_grid(M, N, CARVE_TC_BM, bn);
    const int ktiles = carve_tiles(K, CARVE_TC_BK);
    if (sms <= 0 || tiles >= sms || ktiles < 2 * CARVE_TC_MIN_SPLIT_KTILES)
        return 1;
    const double unit_bytes = (double)sms * bn * 128.0;
    const double mn = (double)M * (double)N;
    const double floor_share = CARVE_TC_WAVE_FLOOR / 100.0;
    /* S = 1: one wave of `tiles` blocks, all of k. */
    const double share1 = (double)tiles / sms;
    int best = 1;
    double best_cost = (double)ktiles * (share1 > floor_share ? share1 : floor_share);
    for (int s = 2; s <= CARVE_TC_MAX_SPLITS; s++) {
        const int per = carve_tiles(ktiles, s);
        if (ktiles / s < CARVE_TC_MIN_SPLIT_KTILES)
            break;
        const int64_t blocks = tiles * s, rest = blocks % sms;
        const double share = (double)rest / sms;
        const double loops = (double)(blocks / sms) + (rest ? (share > floor_share ? share : floor_share) : 0.0);
        const double cost = loops * per + 8.0 * s * mn / unit_bytes + CARVE_TC_REDUCE_COST;
        if (cost < best_cost) {
            best_cost = cost;
            best = s;
        }
    }
    return best;
}

/* A forced split factor (CARVE_GEMM_SPLITK) made legal: at most
 * CARVE_TC_MAX_SPLITS and the number of k tiles (every split has one), and
 * the grid (tiles * S blocks) within a launch's limit. At least 1. */
static inline int carve_tc_clamp_splits(int forced, int M, int N, int K, int bn) {
    const int64_t tiles = carve_grid(M, N, CARVE_TC_BM, bn);
    const int ktiles = carve_tiles(K, CARVE_TC_BK);
    int s = forced < 1 ? 1 : forced;
    if (s > CARVE_TC_MAX_SPLITS)
        s = CARVE_TC_MAX_SPLITS;
    if (s > ktiles)
        s = ktiles;
    while (s > 1 && tiles * s > CARVE_MAX_GRID)
        s--;
    return s;
}

/* The first k tile of split `split` of `splits`: splits share the k tiles
 * as evenly as whole tiles allow (sizes differ by one at most, none empty
 * when splits <= ktiles). ktiles < 2^26 and splits <= 16: no overflow. */
#if defined(__CUDACC__)
__host__ __device__
#endif
static inline int carve_tc_split_begin(int ktiles, int split, int splits) {
    return (int)(((int64_t)ktiles * split) / splits);
}

/* Whether copying operands whose rows TMA cannot read pays: only with at
 * least one whole k tile. Below that, mma.sync's element-wise loads cost a
 * few microseconds at most, and the copies' two extra launches cost as
 * much; such calls stay on mma.sync. */
static inline int carve_tc_copy_pays(int K) {
    return K >= CARVE_TC_BK;
}

/* The leading dimension of an aligned copy of a matrix with `cols`
 * elements of 2 bytes per row: the next multiple of 8 (16-byte rows). */
static inline int64_t carve_tc_copy_ld(int cols) {
    return ((int64_t)cols + 7) / 8 * 8;
}

/* Bytes of a workspace piece of `bytes` rounded up to CARVE_TC_WS_ALIGN;
 * 0 for 0. */
static inline uint64_t carve_tc_ws_round(uint64_t bytes) {
    return (bytes + CARVE_TC_WS_ALIGN - 1) / CARVE_TC_WS_ALIGN * CARVE_TC_WS_ALIGN;
}

/* Bytes of an aligned copy of a rows x cols matrix of 2-byte elements. */
static inline uint64_t carve_tc_copy_bytes(int rows, int cols) {
    return carve_tc_ws_round((uint64_t)rows * (uint64_t)carve_tc_copy_ld(cols) * 2u);
}

/* Bytes of the split-K partials: splits slices of M x N fp32; 0 for one
 * split, UINT64_MAX when the count would pass 2^62 (no such workspace). */
static inline uint64_t carve_tc_partial_bytes(int M, int N, int splits) {
    if (splits <= 1)
        return 0;
    const uint64_t mn = (uint64_t)M * (uint64_t)N; /* < 2^62 */
    if (mn > ((uint64_t)1 << 62) / 4u / (uint64_t)splits)
        return UINT64_MAX;
    return carve_tc_ws_round(mn * 4u * (uint64_t)splits);
}

/* ---- the streaming kernel (decode: M <= 32) ------------------------------
 *
 * A product with few rows is a read of B (K x N, 2 bytes an element) and
 * little else: at M = 32, 2*M flops per 2 bytes of B is 32 flop/byte, a
 * tenth of what the tensor cores need to be the bound on an H100 (about
 * 300). What matters is that every SM streams B at once. The wgmma tile is
 * 128 rows tall and 128 to 256 wide, so 4096 columns make 16 to 32 tiles,
 * and split-K (above) buys SMs with a second launch for the reduction (2 us,
 * a fifth of the 10 us that 32 MB of B take at 3.35 TB/s).
 *
 * The streaming kernel instead gives each warp 64 columns of B and a run of
 * k, loads them with 16-byte loads whose registers are the mma.sync
 * fragments (along n for an N-major B, along k for a K-major one), and splits
 * k over the CARVE_TC_STREAM_WARPS warps of a block and over the blocks of
 * a thread block cluster (CARVE_TC_STREAM_MAX_CLUSTER at most, the portable
 * size), whose partial sums meet in distributed shared memory: no
 * workspace, no second launch, and a fixed order of additions.
 *
 * The kernel's limit, M <= 32: the accumulators cost 32 registers a thread per
 * 16 rows, next to 64 for the B loads in flight; at M = 32 a thread holds
 * 168 registers with an N-major B (3 blocks of 128 threads an SM) and
 * 194-204 with a K-major one (2 blocks; docs/kernels.md has ptxas's
 * table). Beyond 32 rows the warps an SM holds, and with them the bytes
 * in flight, fall, while the wgmma path's 128-row tile reuses each B tile
 * for more rows and its split-K reduction weighs less next to its larger k
 * loops. The plan's line is lower, where the kernel measured faster
 * (carve_tc_stream_chosen, below). */
#define CARVE_TC_STREAM_MAX_M 32      /* rows (canonical M) the streaming kernel takes */
#define CARVE_TC_STREAM_COLS 64       /* columns of a block (and of each of its warps) */
#define CARVE_TC_STREAM_UNIT 64       /* k rows a warp loads per step of its loop */
#define CARVE_TC_STREAM_WARPS 4       /* warps of a block, each on its own run of k */
#define CARVE_TC_STREAM_MAX_CLUSTER 8 /* blocks of a cluster (the portable limit) */

/* Whether B (either layout) has its rows on 16 bytes: a 16-byte aligned
 * base and ldb a multiple of 8 elements. The streaming kernel then loads
 * 16 bytes as they are; otherwise it stages the aligned 16-byte chunks
 * that hold them in shared memory (M <= 16: gemm_tc_stream.cuh, stage_b)
 * or reads each 8 elements from the two aligned 16 bytes that hold them
 * (ld_b16_any). */
static inline int carve_tc_stream_b_rows(uintptr_t b, int64_t ldb) {
    return b % 16 == 0 && ldb % 8 == 0;
}

/* Whether the streaming kernel takes a canonical problem of M rows: M from
 * 1 to CARVE_TC_STREAM_MAX_M, B in either layout, on any 2 bytes. A, C, n
 * and k may be anything the API accepts. */
static inline int carve_tc_stream_takes(int M) {
    return M >= 1 && M <= CARVE_TC_STREAM_MAX_M;
}

/* ---- where the plan chooses it: few rows and wide outputs -------------
 *
 * bench_gemm_sweep --decode on one H100 80GB HBM3 (132 SMs, cuBLAS 13.1;
 * bench/results/2026-11-27-h100/l2-probe, two runs averaged: B N-major as
 * it is, B K-major with the L2 prefetch its loads have now) timed both paths
 * forced, in the same repetitions, on 8 decoder projections (row-major NN)
 * and 5 with B transposed at each m (14 at m = 16), every result equal to
 * cuBLAS's, as a stream of calls with B read from device memory (the
 * calls rotate over copies of the operands that pass twice the L2 cache;
 * see the benchmark's header). carve / cuBLAS, stream then wgmma:
 *
 *   m = 1:  stream 0.66-0.97, wgmma 0.75-0.95; stream faster on 4 of 13
 *   m = 2:  stream 0.63-0.93, wgmma 0.75-0.95; stream faster on 4 of 13
 *   m = 4:  stream 0.59-0.93, wgmma 0.75-0.96; stream faster on 3 of 13
 *   m = 8:  stream faster on 0 of 13;  m = 16: 2 of 14 (ties, 0.84-0.89)
 *   m = 24, 32: stream faster on 0 of 13
 *
 * The shapes it won there were the outputs of at least 12288 columns
 * (14336 x 4096 and 28672 x 8192, n x k, in both layouts: 0.80-0.97
 * against 0.81-0.94) at m <= 4. Those figures ran the kernel at the
 * cluster sizes of an earlier model, which on most shapes were the wrong
 * ones (carve_tc_stream_cluster, below); at the sizes it picks now (each
 * shape timed at every size in the same session, bench/results/
 * 2026-11-27-h100/splitk-probe, set beside the wgmma path of the same
 * card's sweep, gemm2) the kernel is faster than wgmma at m <= 4 on every
 * output of 8192 columns or more but one (28672 x 8192 with B K-major:
 * 0.93 against 0.95-0.96), e.g. 8192 x 8192 0.94-0.95 against 0.83, 11008 x
 * 4096 0.92-0.95 against 0.84-0.86; at 4096 columns it wins on some
 * (4096 x 14336: 0.93 against 0.88) and ties or loses on 4096 x 4096 in
 * both layouts (0.72-0.95 against 0.75-0.94). From m = 8 on wgmma is
 * faster on most shapes. Hence M <= 4 with N >= 8192 (CARVE_TC_STREAM_PLAN_MAX_M,
 * CARVE_TC_STREAM_WIDE_N). CARVE_GEMM_PATH=stream still runs M up to
 * CARVE_TC_STREAM_MAX_M on the kernel (gemm_tc.cu). */
#define CARVE_TC_STREAM_PLAN_MAX_M 4 /* rows (canonical M) the plan gives the streaming kernel, */
#define CARVE_TC_STREAM_WIDE_N 8192  /* where C has at least this many columns (canonical N) */

/* And at 1 or 2 rows from 4096 columns: the sweep times both paths in the
 * same pass (bench_gemm_sweep's stream and wgmma columns, B from device
 * memory), and over five passes on H100s (bench/results/2026-11-27-h100b
 * plan2 sweep and decode2; 2026-11-27-h100c staged/sweep, final/sweep and
 * final/decode) the streaming kernel at the cluster rule's size (4 on
 * 4096 columns) was the faster on the 4096-column decode rows at m = 1
 * and 2 in 44 of 50 (4096 x 4096, 4096 x 11008, 4096 x 14336, and 4096 x
 * 4096 and 4096 x 14336 with B K-major; m = 1 e.g. 0.92 / 0.86 and 0.93 /
 * 0.88 of cuBLAS against wgmma's): geometric mean 1.027 of wgmma's speed,
 * 0.966 at worst (2 x 4096 x 4096, B N-major, where the two are within
 * 3% in every pass); at m = 4 its margin
 * shrinks and on 4096 x 4096 with B N-major it lost in all five (0.71-0.74
 * against 0.73-0.76). Hence M <= 2 with N >= 4096
 * (CARVE_TC_STREAM_NARROW_MAX_M, CARVE_TC_STREAM_NARROW_N); widths
 * between 4096 and 8192 other than 4096 were not measured. */
#define CARVE_TC_STREAM_NARROW_MAX_M 2
#define CARVE_TC_STREAM_NARROW_N 4096

/* B's rows off 16 bytes (an odd ldb): the wgmma path would first copy B
 * into aligned workspace, reading B and writing its copy before the
 * product reads it again; the streaming kernel reads B in place, and at
 * one 16-row tile stages it through shared memory (gemm_tc_stream.cuh,
 * stage_b: aligned 16-byte copies, realigned as the fragments are read),
 * as fast per byte as on aligned rows or nearly. Measured on an H100
 * (bench/results/2026-11-27-h100c, staged/ and staged2/: each shape on both paths and
 * at cluster sizes 1 to 4, carve / cuBLAS, streaming kernel at the
 * cluster rule's size then wgmma with the copy, at m = 1, 2, 4, 8, 16):
 * B N-major, 50257 x 768 0.89 / 0.39 .. 1.59 / 0.75, 32001 x 4096 1.26 /
 * 0.49 .. 1.59 / 0.64, 4097 x 4096 0.66 / 0.39 .. 1.06 / 0.78, 2049 x
 * 4096 0.69 / 0.52 .. 0.92 / 0.81, 1025 x 768 1.02 / 0.53 .. 1.29 / 0.89,
 * 1025 x 4096 0.58 / 0.53, 1.04 / 0.95, 1.00 / 0.93, 0.90 / 0.95, 0.95 /
 * 0.97 (even), 513 x 4096 and 257 x 4096 lose (0.47-1.04 against
 * 0.48-1.06); B K-major, 32000 x 4097 0.82 / 0.39 .. 0.90 / 0.68, 4096 x
 * 4097 0.78 / 0.45, 0.90 / 0.53, 0.95 / 0.61, 0.96 / 0.73, 0.84 / 0.89,
 * 4096 x 11009 0.82 / 0.43 .. 0.76 / 0.76, 1024 x 4097 loses from m = 4
 * (0.75 / 0.83 .. 0.38 / 0.74). Hence, besides the aligned rule, M <= 16
 * with N >= 1024 for B N-major and N >= 4096 for B K-major
 * (CARVE_TC_STREAM_ODD_MAX_M, CARVE_TC_STREAM_ODD_N, CARVE_TC_STREAM_ODD_KMAJOR_N;
 * narrower outputs were not measured or lose). At 17 to 32 rows B is not
 * staged (two 16-row tiles hold more registers and the staging does not
 * fit beside them in 48 KiB): those stay on wgmma (at m = 32, 50257 x
 * 4096: 0.76 / 0.78 in ../2026-11-27-h100 gemm2/odd.json).
 *
 * B K-major at 1024 to 4095 columns, measured later on an H100
 * (bench/results/2026-11-27-h100i, probe/: n = 1024, 1536, 2048, 3072 and
 * 3584, k = 2049, 4097, 8193 and 11009, m = 1 to 16, each shape on both
 * paths in one run): the streaming kernel won at m <= 4 on all 60 such
 * shapes (1.01-2.00 times wgmma's speed after the copy, which reads and
 * writes B once more and launches twice), at m = 8 from 3072 columns
 * (1.03-1.29) and lost at m = 8 below it (0.53-0.89) and from 12 rows
 * (0.36-1.08, slower on 37 of 40). Hence also M <= 4 from 1024 columns and
 * M <= 8 from 3072 (CARVE_TC_STREAM_ODD_KMAJOR_FEW_M / _N,
 * CARVE_TC_STREAM_ODD_KMAJOR_MID_M / _N). Checked on 72 shapes outside
 * that set (valid/: n = 1280, 2560, 3328 and 4000, k = 3073, 6145 and
 * 14337, m = 1, 3, 4, 5, 6 and 8), the plan against the one before it in
 * one run: 1.11-1.94 times as fast, geometric mean 1.27. */
#define CARVE_TC_STREAM_ODD_MAX_M 16
#define CARVE_TC_STREAM_ODD_N 1024
#define CARVE_TC_STREAM_ODD_KMAJOR_N 4096
#define CARVE_TC_STREAM_ODD_KMAJOR_FEW_M 4
#define CARVE_TC_STREAM_ODD_KMAJOR_FEW_N 1024
#define CARVE_TC_STREAM_ODD_KMAJOR_MID_M 8
#define CARVE_TC_STREAM_ODD_KMAJOR_MID_N 3072

/* Whether a call of M x N (canonical) runs on the streaming kernel where
 * the device has it: with `forced` (CARVE_GEMM_PATH=stream), every problem
 * the kernel takes (carve_tc_stream_takes: 1 to 32 rows); otherwise the
 * plan's choice among them: M <= 4 with N >= 8192, M <= 2 with
 * N >= 4096, and with B's rows off
 * 16 bytes (b_rows_aligned 0) also M <= 16 with N >= 1024 (b_kmajor 0: B
 * N-major), or with B K-major M <= 16 from N >= 4096, M <= 8 from 3072
 * and M <= 4 from 1024 (above). The rest go to the wgmma path (or the tiny
 * kernel). */
static inline int carve_tc_stream_chosen(int M, int N, int b_rows_aligned, int b_kmajor, int forced) {
    if (!carve_tc_stream_takes(M))
        return 0;
    if (forced)
        return 1;
    if (M <= CARVE_TC_STREAM_PLAN_MAX_M && N >= CARVE_TC_STREAM_WIDE_N)
        return 1;
    if (M <= CARVE_TC_STREAM_NARROW_MAX_M && N >= CARVE_TC_STREAM_NARROW_N)
        return 1;
    if (b_rows_aligned || M > CARVE_TC_STREAM_ODD_MAX_M)
        return 0;
    if (!b_kmajor)
        return N >= CARVE_TC_STREAM_ODD_N;
    return N >= CARVE_TC_STREAM_ODD_KMAJOR_N ||
           (M <= CARVE_TC_STREAM_ODD_KMAJOR_MID_M && N >= CARVE_TC_STREAM_ODD_KMAJOR_MID_N) ||
           (M <= CARVE_TC_STREAM_ODD_KMAJOR_FEW_M && N >= CARVE_TC_STREAM_ODD_KMAJOR_FEW_N);
}

/* Whether the kernel stages A with 16-byte loads: A K-major with a 16-byte
 * aligned base and lda a multiple of 8 elements (every row, and every
 * 64-element step of it, on 16 bytes); otherwise element by element. */
static inline int carve_tc_stream_a_vec(int a_kmajor, uintptr_t a, int64_t lda) {
    return a_kmajor && a % 16 == 0 && lda % 8 == 0;
}

/* The 16-row tiles of A the kernel is built for: 1 for M <= 16, else 2. */
static inline int carve_tc_stream_mt(int M) {
    return M <= 16 ? 1 : 2;
}

/* The cluster size (blocks per 64 columns, each on its share of k) for an
 * M x N x K streaming product on sms SMs: the smallest from 1 up to
 * CARVE_TC_STREAM_PLAN_MAX_CLUSTER (and no more than gives every warp one
 * step of k) whose grid, tiles * cs blocks, reaches carve_tc_stream_grid_q
 * quarters of a block an SM: 6 (one and a half) at M <= 16, 5 at M > 16
 * (two 16-row tiles: fewer blocks fit an SM); with a K-major B, then the
 * smallest from there up that gives a warp no more than
 * CARVE_TC_STREAM_KMAJOR_STEPS steps of k, if one does. B's rows on or off
 * 16 bytes do not change it (both hold four blocks an SM at M <= 16 with
 * B N-major: gemm_tc_stream.cuh, kStMinBlocks; fitted on B N-major. With
 * B's rows off 16 bytes, staged, four blocks an SM in both layouts, it is
 * within 5% of the fastest size of 1 to 4 on 53 of 66 N-major shapes the
 * plan streams (geometric mean 0.97, worst 0.74: 8 x 1025 x 768, where
 * the cap at U / 4 keeps it at 3) and 27 of 30 K-major ones (1.01, worst
 * 0.93: 1 x 50264 x 769): bench/results/2026-11-27-h100c, staged/ and
 * staged2/; at M > 16, two blocks, it is used unmeasured). Fitted on an H100 (132
 * SMs) from every decode shape timed under each forced size (bench/
 * results/2026-11-27-h100/splitk-probe, 1 to 8, B's rows on 16 bytes;
 * bench/results/2026-11-27-h100b/bu4-probe, 1 to 4, rows off 16 bytes):
 * over 120 shapes it runs at 0.977 of the fastest size's speed (geometric
 * mean; the worst 0.81, 50257 x 4096 at m = 1, where 2 is faster), where
 * the earlier cost model (the busiest SM's blocks times a warp's steps,
 * from two blocks an SM up to 8) ran at 0.82 (worst 0.38, 32 x 11008 x
 * 4096 at 8; it gave 8 to 4 x 32008 x 4096 too, which runs 1.3 times
 * faster on 1). Larger clusters
 * lose on most shapes (short k runs next to the cluster's reduction, and
 * clusters of 8 are harder to place); they were the fastest on few, by
 * little but once (8 x 8192 x 28672 with B K-major: 0.89 of cuBLAS at 8,
 * 0.83 at 4). At M <= CARVE_TC_STREAM_FEW_ROWS, where 4 blocks a tile
 * give at most one block an SM (at most 33 tiles, 2112 columns, on 132
 * SMs), the first size may go up to CARVE_TC_STREAM_FEW_MAX_CLUSTER (the
 * K-major step rule stays within CARVE_TC_STREAM_PLAN_MAX_CLUSTER): the
 * plan streams such outputs only where B's rows are off 16 bytes
 * (N-major from 1024 columns, and K-major at m <= 4 from 1024, where the
 * same sizes ran at 0.91-1.00 of the fastest of 1-8 on 20 shapes:
 * bench/results/2026-11-27-h100i clusters/). There, m = 1-4, 1025, 1537 and 2049
 * columns with k of 2100-11008 (8, 8 and 6 blocks) ran 1.05-1.42 times as
 * fast as at 4 (1 x 1025 x 4096: 0.59 -> 0.77 of cuBLAS; 1 x 2049 x 11008:
 * 0.77 -> 1.00), but 3073 columns (49 tiles, 5 blocks) ran at 0.85-0.86 of
 * 4's speed, and m = 16 was slower at 8 (1025: 0.94 -> 0.91):
 * bench/results/2026-11-27-h100c/cluster8, 2026-11-27-h100d/cluster. */
#define CARVE_TC_STREAM_PLAN_MAX_CLUSTER 4
#define CARVE_TC_STREAM_FEW_ROWS 4
#define CARVE_TC_STREAM_FEW_MAX_CLUSTER 8
#define CARVE_TC_STREAM_KMAJOR_STEPS 24
static inline int carve_tc_stream_grid_q(int M) {
    return M > 16 ? 5 : 6;
}

static inline int carve_tc_stream_cluster(int M, int N, int K, int sms, int b_kmajor) {
    if (sms <= 0)
        sms = 1;
    const int64_t tiles = carve_tiles(N, CARVE_TC_STREAM_COLS);
    const int64_t units = carve_tiles(K, CARVE_TC_STREAM_UNIT);
    const int64_t most = units / CARVE_TC_STREAM_WARPS;
    const int64_t cap = M <= CARVE_TC_STREAM_FEW_ROWS && tiles * CARVE_TC_STREAM_PLAN_MAX_CLUSTER <= sms
                            ? CARVE_TC_STREAM_FEW_MAX_CLUSTER
                            : CARVE_TC_STREAM_PLAN_MAX_CLUSTER;
    int64_t hi = most < cap ? most : cap, hk = most < CARVE_TC_STREAM_PLAN_MAX_CLUSTER ? most : CARVE_TC_STREAM_PLAN_MAX_CLUSTER;
    if (hi < 1)
        hi = 1;
    if (hk < 1)
        hk = 1;
    const int64_t want = ((int64_t)sms * carve_tc_stream_grid_q(M) + 3) / 4;
    int g = (int)hi;
    for (int cs = 1; cs < (int)hi; cs++)
        if (tiles * cs >= want) {
            g = cs;
            break;
        }
    for (int cs = g; b_kmajor && cs <= (int)hk; cs++)
        if ((units + CARVE_TC_STREAM_WARPS * cs - 1) / (CARVE_TC_STREAM_WARPS * cs) <= CARVE_TC_STREAM_KMAJOR_STEPS)
            return cs;
    return g;
}

/* A forced cluster size (CARVE_GEMM_SPLITK) made legal: 1 to
 * CARVE_TC_STREAM_MAX_CLUSTER, and no more than gives each of the block's
 * warps one k step (at least 1). */
static inline int carve_tc_stream_clamp_cluster(int forced, int K) {
    const int64_t units = carve_tiles(K, CARVE_TC_STREAM_UNIT);
    int64_t hi = units / CARVE_TC_STREAM_WARPS;
    if (hi > CARVE_TC_STREAM_MAX_CLUSTER)
        hi = CARVE_TC_STREAM_MAX_CLUSTER;
    if (hi < 1)
        hi = 1;
    return forced < 1 ? 1 : forced > hi ? (int)hi : forced;
}

/* The plan's cluster size for a streaming product, B's rows counted
 * (b_rows_aligned 0: off 16 bytes): carve_tc_stream_cluster, but for B
 * K-major with rows off 16 bytes at M <= 8 below
 * CARVE_TC_STREAM_ODD_KMAJOR_N columns where that rule stops at 4 (more
 * than sms / 4 tiles: from 2113 columns on 132 SMs), 6, or 8 where k is
 * over CARVE_TC_STREAM_ODD_KMAJOR_LONG_K (clamped as a forced size). Those
 * blocks stage B through shared memory and four fit an SM; at 4 the grid
 * held 1.2-1.7 blocks an SM. Measured on an H100 (bench/results/
 * 2026-11-27-h100i, clusters/: every size 1, 2, 3, 4, 6 and 8 on 30 shapes
 * of the K-major lines, n = 1024-3584, k = 2049-11009, m = 1-8, two runs
 * each): on the 10 shapes this moves, 1.03-1.22 times as fast as at 4
 * (8 x 3584 x 11009: 0.82 of the fastest size -> 1.00); over all 30 the
 * plan runs at 0.982 of the fastest size's speed (geometric mean; worst
 * 0.91), 0.951 before. */
#define CARVE_TC_STREAM_ODD_KMAJOR_CLUSTER 6
#define CARVE_TC_STREAM_ODD_KMAJOR_LONG_CLUSTER 8
#define CARVE_TC_STREAM_ODD_KMAJOR_LONG_K 6144
static inline int carve_tc_stream_plan_cluster(int M, int N, int K, int sms, int b_kmajor, int b_rows_aligned) {
    const int64_t tiles = carve_tiles(N, CARVE_TC_STREAM_COLS);
    if (b_kmajor && !b_rows_aligned && M >= 1 && M <= CARVE_TC_STREAM_ODD_KMAJOR_MID_M &&
        N < CARVE_TC_STREAM_ODD_KMAJOR_N && tiles * CARVE_TC_STREAM_PLAN_MAX_CLUSTER > (sms > 0 ? sms : 1))
        return carve_tc_stream_clamp_cluster(K > CARVE_TC_STREAM_ODD_KMAJOR_LONG_K ? CARVE_TC_STREAM_ODD_KMAJOR_LONG_CLUSTER
                                                                                : CARVE_TC_STREAM_ODD_KMAJOR_CLUSTER,
                                             K);
    return carve_tc_stream_cluster(M, N, K, sms, b_kmajor);
}

/* The first k step (of CARVE_TC_STREAM_UNIT rows) of run `run` of `runs`
 * in a streaming product of `units` steps: runs differ by one step at
 * most; a run may be empty when runs > units. */
#if defined(__CUDACC__)
__host__ __device__
#endif
static inline int64_t carve_tc_stream_run_begin(int64_t units, int run, int runs) {
    return units * run / runs;
}

/* ---- the decode kernel (M <= 256, A K-major) ----------------------------
 *
 * gemm_tc_decode.cuh: wgmma with the operands' roles swapped, B's 128
 * columns a block on the 64-row side of two warpgroups (or 64 columns on
 * one: carve_tc_decode_cols) and A's M rows
 * (padded to carve_tc_decode_bm: 8, 16, 32, 64, 128 or 256) on the narrow
 * side, a ring of 4 to 12 TMA stages, and k split over the blocks of a
 * cluster whose sums meet in distributed shared memory (no workspace, one
 * launch). A must be K-major (its rows are the narrow operand, read
 * along k); B either layout; both on TMA's rules (carve_tc_tma_ok). */
#define CARVE_TC_DECODE_MAX_M 256     /* rows (canonical M) the decode kernel takes */
#define CARVE_TC_DECODE_ROWS 128      /* columns of C a block (two warpgroups of 64) */
#define CARVE_TC_DECODE_NARROW 64     /* or, for narrow outputs, 64 (one warpgroup), M <= 128 */
#define CARVE_TC_DECODE_MAX_CLUSTER 8 /* blocks of a cluster, each on its share of k (the portable limit) */
#define CARVE_TC_DECODE_MIN_KTILES 4  /* k tiles (of 64) a block's share, at least, when the plan splits */

/* Whether the decode kernel takes a canonical problem of M rows with A
 * K-major (a_kmajor) or not. */
static inline int carve_tc_decode_takes(int M, int a_kmajor) {
    return M >= 1 && M <= CARVE_TC_DECODE_MAX_M && a_kmajor;
}

/* The narrow side the kernel is built for: M rounded up to 8, 16, 32, 64,
 * 128 or 256. */
static inline int carve_tc_decode_bm(int M) {
    return M <= 8 ? 8 : M <= 16 ? 16 : M <= 32 ? 32 : M <= 64 ? 64 : M <= 128 ? 128 : 256;
}

/* The cluster size for an N x K decode product in blocks of cols columns
 * (ceil(N / cols) tiles): the largest power of two up to CARVE_TC_DECODE_MAX_CLUSTER at
 * which every tile's cluster runs at once (tiles <= active[i], the
 * clusters of 2^i blocks the device holds together: cudaOccupancyMax-
 * ActiveClusters, which counts what fits each GPC: 0 where none fits, as
 * on a MIG instance or an MPS client with few SMs; sms >> i where it is
 * negative, unknown) and every share keeps CARVE_TC_DECODE_MIN_KTILES k
 * tiles; 1 at least. A second wave of clusters costs a whole share's time
 * again, while the first wave's blocks could have streamed faster. */
static inline int carve_tc_decode_cluster(int N, int K, int cols, int sms, const int active[4]) {
    const int64_t tiles = carve_tiles(N, cols == CARVE_TC_DECODE_NARROW ? CARVE_TC_DECODE_NARROW : CARVE_TC_DECODE_ROWS);
    const int ktiles = carve_tiles(K, CARVE_TC_BK);
    int cs = 1;
    for (int i = 1; (1 << i) <= CARVE_TC_DECODE_MAX_CLUSTER; i++) {
        const int c = 1 << i;
        const int64_t fit = active && active[i] >= 0 ? active[i] : (int64_t)(sms > 0 ? sms : 1) / c;
        if (tiles > fit || ktiles / c < CARVE_TC_DECODE_MIN_KTILES)
            break;
        cs = c;
    }
    return cs;
}

/* The block width for an N x K decode product of M rows: 64 columns where
 * their tiles, at their own cluster size, put more blocks on the device in
 * one wave than 128-column tiles do at theirs (active64 and active128: the
 * clusters of each width the device holds at once, as for
 * carve_tc_decode_cluster) and each block's share of k still holds
 * CARVE_TC_DECODE_NARROW_MIN_KTILES k tiles; else 128. 128 past M = 128
 * (the narrow block's one warpgroup would hold 128 accumulators a thread
 * at BM = 256). Where both fill the device alike, 128: one block reads A
 * once for twice the columns. On an H100, 4096 columns at k = 4096: 32
 * tiles of 128 in clusters of 2 (64 SMs: 32 clusters of 4 would need 128
 * of the 120 blocks that clusters of 4 hold at once), against 64 tiles of
 * 64 in clusters of 2 (128 SMs), 32 k tiles a share. Measured on an H100
 * (bench/results/2026-11-27-h100h): with shares of 32 to 112 k tiles
 * (4096 columns, k = 4096 to 14336) 64 columns ran 1.03-1.16 times as
 * fast; with short shares (k of 256 to 1024, outputs of 1024 to 8192
 * columns, m = 1-32, calls of a few microseconds) 0.58-1.05 at m = 1 and
 * 8 and up to 1.64 at m = 32, a loss where it mattered least: hence the
 * floor. */
#define CARVE_TC_DECODE_NARROW_MIN_KTILES 16
static inline int carve_tc_decode_cols(int M, int N, int K, int sms, const int active128[4], const int active64[4]) {
    if (M > 128)
        return CARVE_TC_DECODE_ROWS;
    const int64_t t128 = carve_tiles(N, CARVE_TC_DECODE_ROWS), t64 = carve_tiles(N, CARVE_TC_DECODE_NARROW);
    const int64_t fit64 = active64 && active64[0] >= 0 ? active64[0] : (int64_t)(sms > 0 ? sms : 1);
    if (t64 > fit64) /* not one wave even unsplit */
        return CARVE_TC_DECODE_ROWS;
    const int c64 = carve_tc_decode_cluster(N, K, CARVE_TC_DECODE_NARROW, sms, active64);
    if (carve_tiles(K, CARVE_TC_BK) / c64 < CARVE_TC_DECODE_NARROW_MIN_KTILES)
        return CARVE_TC_DECODE_ROWS;
    const int64_t b128 = t128 * carve_tc_decode_cluster(N, K, CARVE_TC_DECODE_ROWS, sms, active128);
    return t64 * c64 > b128 ? CARVE_TC_DECODE_NARROW : CARVE_TC_DECODE_ROWS;
}

/* Whether the streaming kernel gives its shapes (carve_tc_stream_chosen)
 * to the decode kernel under the automatic path: where the decode kernel
 * takes the call (A K-major, both operands on TMA's rules) and plans
 * 64-column blocks (cols, carve_tc_decode_cols; 0 where it does not take
 * it) in clusters of 2 or more (cs, carve_tc_decode_cluster: k splits).
 * On an H100 that is M <= 2 on outputs of 4096 to 4224 columns with k
 * over 1984, where 128-column decode tiles fill half the SMs and
 * 64-column ones all. Measured on an H100 (bench/results/2026-11-27-h100h), m = 1
 * and 2, the decode kernel against the streaming kernel, calls back to
 * back: 4096 x 4096 1.12-1.16 (B in both layouts), 4096 columns at k =
 * 11008 and 14336 1.03-1.10; one call alone with the L2 flushed 0.92-0.98
 * with B N-major (the cluster launch starts slower), 1.07-1.26 K-major. */
static inline int carve_tc_stream_yields(int cols, int cs) { return cols == CARVE_TC_DECODE_NARROW && cs >= 2; }

/* Where the plan gives a call the decode kernel (under the automatic path,
 * after the streaming kernel's shapes and the tiny kernel's, where the
 * kernel takes the call and TMA can read A and B): M <= 32 always, up to
 * 64 rows where its 128-column tiles fit one wave (N <= sms x 128) and k
 * holds 64 tiles or more, and up to 128 rows where the cluster rule splits
 * k (cs >= 2: at most 66 tiles, 8448 columns, on an H100). Measured on an H100 (bench/results/
 * 2026-11-27-h100g): over the decode sweep's 117 rows, the kernel forced
 * against the plan before it ran 1.015 times as fast (geometric mean),
 * 1.04-1.16 at m = 4-32 on every output but 4096 x 14336 (0.97-1.00, n x
 * k); at m = 128 it won where it split (4096 x 4096 0.84 of cuBLAS
 * against wgmma's 0.76, 8192 x 8192 0.91 against 0.86) and lost where it
 * did not (11008 x 4096 0.82 against 0.96, 28672 x 8192 0.91 against
 * 0.99: one 128-column block streams all of k alone, where the wgmma
 * kernel's 128-row tiles read each byte of B for all 128 rows at once and
 * split k over more SMs); at m = 256 wgmma won on every shape (0.90-1.08
 * against 0.63-0.98). At m <= 4 the streaming kernel keeps its shapes
 * (carve_tc_stream_chosen). The line at 64 rows came later (bench/results/
 * 2026-11-27-h100i, probe/: 8704 to 16384 columns, where the cluster rule
 * gives 1, at k = 4096 and 8192, m = 33, 48, 64 and 96, the kernel forced
 * against the plan in one run): at m = 33-64 it ran 0.98-1.18 times as
 * fast as the wgmma kernel over 48 such shapes (geometric mean 1.07, 1.05
 * or more on 30, below 1 on 2; 11008 x 4096 at m = 48: 0.90 of cuBLAS
 * against 0.82); at m = 96 it lost on 12 of 16 (0.81-0.97).
 * Past one wave (28672 x 8192, 224 tiles) wgmma kept m = 64 (0.96 against
 * 0.93). Checked on 51 shapes outside that set in the same folder (valid/:
 * 9728, 15360 and 16896 columns at k = 2048, 5120 and 14336, k = 256 to
 * 1024 at 2048 to 11008 columns, m = 40-64, both layouts of B), the plan
 * against the one before it: 1.01-1.14 times as fast from k = 4096 up,
 * but 0.94-1.05 at k = 2048 and 0.80-0.93 at k <= 1024 (a block's k is
 * then too short to fill its ring, where the wgmma kernel splits k), hence
 * the floor of 64 k tiles (CARVE_TC_DECODE_PLAN_WAVE_KTILES). cs: the
 * plan's cluster size (carve_tc_decode_cluster); N and K the output's
 * columns and the product's depth, sms the device's multiprocessors. */
#define CARVE_TC_DECODE_PLAN_M 32       /* rows the plan gives the decode kernel whatever its cluster size */
#define CARVE_TC_DECODE_PLAN_WAVE_M 64  /* rows it gives it where one wave of 128-column tiles covers N ... */
#define CARVE_TC_DECODE_PLAN_WAVE_KTILES 64 /* ... and k holds this many tiles of CARVE_TC_BK */
#define CARVE_TC_DECODE_PLAN_SPLIT_M 128 /* rows it gives it where the cluster rule splits k */
static inline int carve_tc_decode_chosen(int M, int N, int K, int cs, int sms) {
    return M >= 1 && (M <= CARVE_TC_DECODE_PLAN_M ||
                      (M <= CARVE_TC_DECODE_PLAN_WAVE_M && N >= 1 &&
                       (int64_t)N <= (int64_t)sms * CARVE_TC_DECODE_ROWS &&
                       carve_tiles(K, CARVE_TC_BK) >= CARVE_TC_DECODE_PLAN_WAVE_KTILES) ||
                      (M <= CARVE_TC_DECODE_PLAN_SPLIT_M && cs >= 2));
}

/* A forced cluster size (CARVE_GEMM_SPLITK) made legal: the largest power
 * of two up to it, to CARVE_TC_DECODE_MAX_CLUSTER and to the k tiles
 * (every share has one); 1 at least. */
static inline int carve_tc_decode_clamp_cluster(int forced, int K) {
    const int ktiles = carve_tiles(K, CARVE_TC_BK);
    int cs = 1;
    while (cs * 2 <= forced && cs * 2 <= CARVE_TC_DECODE_MAX_CLUSTER && cs * 2 <= ktiles)
        cs *= 2;
    return cs;
}

#endif
