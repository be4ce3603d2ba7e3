/*
 * gemm_tc_decode.cuh — carve_gemm's decode kernel (sm_90a): a canonical
 * problem of at most 256 rows (CARVE_TC_DECODE_MAX_M) with A K-major, on
 * the tensor cores through wgmma and TMA, with the operands' roles
 * swapped: the weight B is wgmma's 64-row side and the few rows of A its
 * narrow side.
 *
 * At decode the product is a read of B and little else (gemm_tc_plan.h).
 * The wgmma kernel (gemm_tc_wgmma.cuh) puts A's rows on its 128-row side,
 * so at m = 8 it computes and stages 16 times what it needs, and its
 * split-K pays a second launch and fp32 partials in global memory. Here
 * C^T = B^T A^T instead: a block owns COLS = 128 or 64 columns of C (COLS
 * rows of B^T, one consumer warpgroup per 64) and all of C's M rows,
 * padded to BM = 8, 16, 32, 64, 128 or 256 (m64nBMk16 wgmma); a stage of
 * the ring is COLS x 64 x 2 bytes of B and BM x 64 x 2 bytes of A, so at
 * COLS = 128 the ring holds 12 stages at BM <= 16 (about 200 KiB of B in
 * flight a block), 11 at 32, 9 at 64, 7 at 128 and 4 at 256, and at
 * COLS = 64 (BM <= 128) 12 stages up to BM = 64 and 9 at 128. The narrow
 * blocks are for outputs too narrow to fill the device with 128-column
 * tiles at the cluster sizes it holds at once (4096 columns: 32 tiles,
 * clusters of 2 on 64 SMs; 64 tiles of 64 columns fill 128;
 * carve_tc_decode_cols).
 *
 * Split-K inside a cluster: the cs blocks of a cluster (1, 2, 4 or 8,
 * carve_tc_decode_cluster) own the same COLS columns and the cs shares of
 * k (carve_tc_split_begin); after its k loop each block writes its fp32
 * sums to its own shared memory (over the drained ring), the cluster
 * barrier makes them visible, and block r adds columns r * COLS / cs .. of
 * all cs blocks, in rank order, through distributed shared memory, and writes
 * C (alpha, beta). No workspace, no second launch, a fixed order of
 * additions. A second cluster barrier keeps every block's shared memory
 * alive until the others have read it.
 *
 * B is either layout: K-major (a weight stored out-features x
 * in-features: one box of 64 k x COLS rows a stage) or N-major (COLS / 64
 * boxes of 64 columns x 64 k, the second not loaded when it lies wholly
 * past N, as in the wgmma kernel). The tensor maps carry the real extents, so TMA
 * fills rows past M and N and k past K with zeros; only C's stores are
 * masked. TMA's rules (16-byte bases, lda and ldb multiples of 8) are the
 * caller's to check (carve_tc_tma_ok).
 */
#ifndef CARVE_GEMM_TC_DECODE_CUH
#define CARVE_GEMM_TC_DECODE_CUH

#include <cooperative_groups.h>
#include <cuda.h>
#include <stdint.h>

#include "gemm_tc_common.cuh"
#include "gemm_tc_plan.h"
#include "gemm_tc_wgmma.cuh"

namespace carve_tc {

namespace dc_cg = cooperative_groups;

static_assert(CARVE_TC_DECODE_ROWS == 128 && CARVE_TC_DECODE_NARROW == 64,
              "blocks of one or two consumer warpgroups of 64 rows of B^T");

template <int BM, int COLS>
struct DcCfg {
    static_assert(COLS == 64 || COLS == 128, "one or two consumer warpgroups");
    static constexpr int kConsumers = COLS / 64;         /* consumer warpgroups */
    static constexpr int kThreads = 128 * (1 + kConsumers); /* and the producer's */
    static constexpr int kABytes = COLS * kWgBK * 2;     /* B^T: COLS rows of 64 k */
    static constexpr int kBBytes = BM * kWgBK * 2;      /* A: BM rows of 64 k */
    static constexpr int kStageBytes = kABytes + kBBytes;
    static constexpr int kMaxStages = 12;
    static constexpr int kFit = (227 * 1024 - 1024 - 2 * kMaxStages * 8) / kStageBytes;
    static constexpr int kStages = kFit < kMaxStages ? kFit : kMaxStages;
    /* The sums a block writes for the cluster: BM x COLS fp32, C's row m
     * at m * kRedLd (4 floats of padding: the fragments' stores hit 32
     * banks), over the ring once it has drained. */
    static constexpr int kRedLd = COLS + 4;
    static_assert(BM * kRedLd * 4 <= kStages * kStageBytes, "the sums fit in the ring");
    static constexpr int kSmem = 1024 + kStages * kStageBytes + 2 * kStages * 8;
};

/* m64n8k16, fp32 accumulators d[0..4) in wgmma's fragment order. */
template <bool BF16, int TA, int TB>
__device__ __forceinline__ void wgmma_n8(float *d, uint64_t da, uint64_t db, int scale_d) {
#define CARVE_WGMMA_N8(TY)                                                   \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"                 \
                 "wgmma.mma_async.sync.aligned.m64n8k16.f32." TY "." TY " "  \
                 "{%0, %1, %2, %3}, %4, %5, p, 1, 1, %7, %8;\n}\n"           \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])            \
                 : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB))
    if (BF16)
        CARVE_WGMMA_N8("bf16");
    else
        CARVE_WGMMA_N8("f16");
#undef CARVE_WGMMA_N8
}

/* m64n16k16, fp32 accumulators d[0..8) in wgmma's fragment order. */
template <bool BF16, int TA, int TB>
__device__ __forceinline__ void wgmma_n16(float *d, uint64_t da, uint64_t db, int scale_d) {
#define CARVE_WGMMA_N16(TY)                                                                                        \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"                                                      \
                 "wgmma.mma_async.sync.aligned.m64n16k16.f32." TY "." TY " "                                       \
                 "{%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, %11, %12;\n}\n"                               \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])  \
                 : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB))
    if (BF16)
        CARVE_WGMMA_N16("bf16");
    else
        CARVE_WGMMA_N16("f16");
#undef CARVE_WGMMA_N16
}

/* m64n32k16, fp32 accumulators d[0..16) in wgmma's fragment order. */
template <bool BF16, int TA, int TB>
__device__ __forceinline__ void wgmma_n32(float *d, uint64_t da, uint64_t db, int scale_d) {
#define CARVE_WGMMA_N32(TY)                                                                                                   \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"                                                                 \
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32." TY "." TY " "                                                  \
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, %19, %20;\n}\n"  \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),            \
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])       \
                 : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB))
    if (BF16)
        CARVE_WGMMA_N32("bf16");
    else
        CARVE_WGMMA_N32("f16");
#undef CARVE_WGMMA_N32
}

/* m64n64k16, fp32 accumulators d[0..32) in wgmma's fragment order. */
template <bool BF16, int TA, int TB>
__device__ __forceinline__ void wgmma_n64(float *d, uint64_t da, uint64_t db, int scale_d) {
#define CARVE_WGMMA_N64(TY)                                                                                                            \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                                                          \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " "                                                           \
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                             \
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, %35, %36;\n}\n"  \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),                     \
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),               \
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),             \
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])              \
                 : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB))
    if (BF16)
        CARVE_WGMMA_N64("bf16");
    else
        CARVE_WGMMA_N64("f16");
#undef CARVE_WGMMA_N64
}

template <int BM, bool BF16, int TA>
__device__ __forceinline__ void wgmma_dc(float *d, uint64_t da, uint64_t db, int scale_d) {
    if (BM == 8)
        wgmma_n8<BF16, TA, 0>(d, da, db, scale_d);
    else if (BM == 16)
        wgmma_n16<BF16, TA, 0>(d, da, db, scale_d);
    else if (BM == 32)
        wgmma_n32<BF16, TA, 0>(d, da, db, scale_d);
    else if (BM == 64)
        wgmma_n64<BF16, TA, 0>(d, da, db, scale_d);
    else if (BM == 128)
        wgmma_n128<BF16, TA, 0>(d, da, db, scale_d);
    else
        wgmma_n256<BF16, TA, 0>(d, da, db, scale_d);
}

/* The kernel. mapW: B as wgmma's A operand (WK: B K-major, boxes of 64 k x
 * COLS rows at (k0, n0); else N-major, boxes of 64 columns x 64 k at
 * (n0 + 64 c, k0)); mapX: A (K-major), boxes of 64 k x BM rows at (k0, 0).
 * The grid is ceil(N / COLS) x cs blocks of DcCfg::kThreads in clusters of
 * cs; block b owns columns (b / cs) * COLS .. and share rank of k. */
template <int BM, int COLS, typename T, bool WK>
__global__ void __launch_bounds__(DcCfg<BM, COLS>::kThreads, 1)
    decode_gemm_kernel(const __grid_constant__ CUtensorMap mapW, const __grid_constant__ CUtensorMap mapX, EpiParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using Cfg = DcCfg<BM, COLS>;
    constexpr int kConsumerThreads = 128 * Cfg::kConsumers;
    constexpr int S = Cfg::kStages;
    constexpr bool kBf16 = sizeof(T) == 2 && !std::is_same<T, __half>::value;
    extern __shared__ __align__(1024) unsigned char dc_smem[];
    const uint32_t raw = smem_u32(dc_smem);
    const uint32_t ring = (raw + 1023) & ~1023u;
    const uint32_t bars = ring + S * Cfg::kStageBytes;
    auto full = [&](int s) { return bars + 8 * s; };
    auto empty = [&](int s) { return bars + 8 * (S + s); };
    auto w_stage = [&](int s) { return ring + s * Cfg::kStageBytes; };
    auto x_stage = [&](int s) { return ring + s * Cfg::kStageBytes + Cfg::kABytes; };
    float *const red = reinterpret_cast<float *>(dc_smem + (ring - raw));

    dc_cg::cluster_group cluster = dc_cg::this_cluster();
    const int cs = (int)cluster.num_blocks(), rank = (int)cluster.block_rank();
    const int tid = threadIdx.x, wg = tid / 128;
    /* The block's columns n0 .. n0 + COLS - 1 (n0 a multiple of COLS below
     * N: n0 + COLS - 1 <= 2^31 - 1), those below N stored. */
    const int n0 = (int)(blockIdx.x / (unsigned)cs) * COLS, ncols = p.N - n0;
    const int ktiles_all = carve_tiles(p.K, kWgBK);
    const int kt_first = carve_tc_split_begin(ktiles_all, rank, cs);
    const int ktiles = carve_tc_split_begin(ktiles_all, rank + 1, cs) - kt_first;

    if (tid == 0) {
        for (int s = 0; s < S; s++) {
            mbar_init(full(s), 1);
            mbar_init(empty(s), kConsumerThreads);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    }
    grid_dep_wait(); /* nothing in global memory is touched before the kernel before this one is done */
    __syncthreads();

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (tid == 0) {
            /* An N-major B box wholly past N is not loaded (gemm_tc_wgmma.cuh). */
            const int w_boxes = WK || ncols >= COLS ? COLS / 64 : (ncols + 63) / 64;
            const int tx_bytes = (WK ? Cfg::kABytes : w_boxes * 8192) + Cfg::kBBytes;
            WgRing<S> r;
            for (int kt = 0; kt < ktiles; kt++, r.next()) {
                wg_produce_begin(r, bars, tx_bytes);
                const int s = r.s;
                const int k0 = (kt_first + kt) * kWgBK; /* <= 2^31 - 64 */
                if (WK) {
                    tma_load_2d(w_stage(s), &mapW, full(s), k0, n0);
                } else {
#pragma unroll
                    for (int c = 0; c < COLS / 64; c++)
                        if (c < w_boxes)
                            tma_load_2d(w_stage(s) + c * 8192, &mapW, full(s), n0 + 64 * c, k0);
                }
                tma_load_2d(x_stage(s), &mapX, full(s), k0, 0);
            }
        }
        __syncwarp();
        cluster.sync(); /* the consumers' sums are written (below) */
        cluster.sync(); /* and read by every block of the cluster */
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int cw = wg - 1; /* consumer warpgroup: columns n0 + 64 cw .. of C */
    const int lt = tid - 128, warp = (tid % 128) / 32, lane = tid % 32;
    float d[BM / 2];
#pragma unroll
    for (int i = 0; i < BM / 2; i++)
        d[i] = 0.f;
    WgRing<S> r;
    for (int kt = 0; kt < ktiles; kt++)
        wg_consume<BM / 2>(d, r, bars, kt > 0, [&](int s) {
#pragma unroll
            for (int j = 0; j < kWgBK / 16; j++) {
                const uint64_t da = operand_desc<WK>(w_stage(s), 64 * cw, 16 * j);
                const uint64_t db = operand_desc<true>(x_stage(s), 0, 16 * j);
                wgmma_dc<BM, kBf16, WK ? 0 : 1>(d, da, db, (kt > 0 || j > 0) ? 1 : 0);
            }
        });
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < BM / 2; i++)
        reg_fence(d[i]);
    /* Every consumer warpgroup's last reads of the ring are done before
     * any writes its sums over it (every TMA write into it has landed:
     * each was waited for). */
    asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumerThreads) : "memory");
    /* Fragment layout: d[4j + 2i + c] is row 16 warp + lane/4 + 8i of the
     * warpgroup's 64 rows of B^T (column n0 + 64 cw + that of C), column
     * 8j + 2 (lane % 4) + c of the BM (row of C). */
#pragma unroll
    for (int j = 0; j < BM / 8; j++)
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int c = 0; c < 2; c++)
                red[(8 * j + 2 * (lane % 4) + c) * Cfg::kRedLd + 64 * cw + 16 * warp + lane / 4 + 8 * i] =
                    d[4 * j + 2 * i + c];
    cluster.sync(); /* every block's sums are written and visible */

    /* Block rank adds columns rank * R .. of the tile, R = COLS / cs (8 at
     * least), four at a time, over the cs blocks in rank order. */
    const int R = COLS / cs, quads = R / 4;
    const int rows = p.M < BM ? p.M : BM;
    for (int o = lt; o < rows * quads; o += kConsumerThreads) {
        const int m = o / quads, nl = rank * R + 4 * (o % quads);
        float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
        for (int q = 0; q < cs; q++) {
            const float *rs = cluster.map_shared_rank(red, q);
            const float4 v = *reinterpret_cast<const float4 *>(rs + m * Cfg::kRedLd + nl);
            sum.x += v.x;
            sum.y += v.y;
            sum.z += v.z;
            sum.w += v.w;
        }
        const float vals[4] = {sum.x, sum.y, sum.z, sum.w};
#pragma unroll
        for (int e = 0; e < 4; e++)
            if (nl + e < ncols)
                store_out<T>(p, m, n0 + nl + e, vals[e]);
    }
    cluster.sync(); /* no block leaves while another reads its sums */
#endif
}

}  // namespace carve_tc

#endif
