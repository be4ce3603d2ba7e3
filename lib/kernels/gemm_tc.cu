/*
 * gemm_tc.cu — carve_gemm: tensor-core GEMM with bf16 or fp16 inputs and
 * fp32 accumulation (output in the input type or fp32), row- or
 * column-major, optional transposes, alpha/beta, on a stream.
 *
 * This file is compiled twice (lib/kernels/meson.build):
 *  - for the project's gencode: argument checks, the choice of path and the
 *    mma.sync path (gemm_tc_mma.cuh), which runs on sm_80 and later;
 *  - with CARVE_GEMM_TC_SM90A_PART for sm_90a only (when the build targets
 *    sm_90): the wgmma + TMA path (gemm_tc_wgmma.cuh) and its host side
 *    (tensor maps through the driver entry point, launch).
 * Every call is first reduced to one canonical problem: row-major
 * C[M,N] = A[M,K] * B[K,N] with each input K-major or MN-major (a
 * column-major call computes C^T = op(B)^T op(A)^T, swapping the operands).
 * Paths: on devices of compute capability 9.0 when the sm_90a object is
 * built, the streaming kernel for the fewest rows (gemm_tc_stream.cuh: at
 * most 4 rows with at least 8192 columns, 2 with at least 4096, and 16 with
 * at least 1024 (B K-major: 4096, or 8 rows from 3072 and 4 from 1024)
 * where B's rows are off 16 bytes), the
 * tiny kernel for tiny products, the decode kernel for the other decode
 * shapes (gemm_tc_decode.cuh: A K-major, A and B on TMA's rules, at most
 * 32 rows, 64 where one wave of its tiles covers the columns and k holds
 * 64 tiles, or 128 where it splits k in a cluster; gemm_tc_plan.h says why,
 * with the figures) and wgmma for the rest; mma.sync everywhere else.
 * CARVE_GEMM_PATH=wgmma|mma|stream|decode|auto overrides the choice
 * (stream: the streaming kernel for every problem it can take, up to 32
 * rows; decode: the decode kernel for every one it can take, up to 256).
 *
 * The wgmma path may take workspace from the call's arena, once per call,
 * on the call's stream (gemm_tc_plan.h plans it, gemm_tc_ws.cuh has the
 * kernels that use it): split-K partials when the output has fewer tiles
 * than the device has SMs, and an aligned copy of each operand that breaks
 * TMA's rules (16-byte aligned base, lda and ldb multiples of 8 elements).
 * The workspace is freed right after the last launch that uses it, in
 * stream order. Without it (no arena, or the arena cannot give it) the call
 * still runs: unsplit, and on mma.sync when an operand needed a copy.
 */
#include "gemm_tc_common.cuh"

#ifdef CARVE_GEMM_TC_SM90A_PART
/* ======================= sm_90a half: wgmma + TMA ======================= */
#include <atomic>
#include <mutex>
#include <stdlib.h>
#include <string.h>
#include <type_traits>

#include "gemm_tc_decode.cuh"
#include "gemm_tc_stream.cuh"
#include "gemm_tc_wgmma.cuh"

namespace {

using namespace carve_tc;

/* The grid args.c checks is the mma.sync path's; this path's tiles are as
 * tall and at least as wide, so its grid is never larger. */
static_assert(kWgBM == kMmaBM, "the wgmma grid fits where the mma.sync grid does");

typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                              const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* cuTensorMapEncodeTiled from the driver the runtime already loaded
 * (libcarve does not link libcuda itself). NULL if the driver lacks it. */
encode_fn get_encode() {
    static std::once_flag once;
    static encode_fn fn = nullptr;
    std::call_once(once, [] {
        void *p = nullptr;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) ==
                cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            fn = reinterpret_cast<encode_fn>(p);
        (void)cudaGetLastError();
    });
    return fn;
}

/* A 2-D map of a row-major matrix rows x cols (row stride ld elements),
 * boxes of 64 columns (128 bytes, the swizzle span) x box_rows rows. */
bool make_map(encode_fn enc, CUtensorMap *map, bool bf16, const void *base, long long rows, long long cols,
              long long ld, int box_rows) {
    cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    cuuint64_t strides[1] = {(cuuint64_t)ld * 2};
    cuuint32_t box[2] = {64, (cuuint32_t)box_rows};
    cuuint32_t estr[2] = {1, 1};
    CUresult r = enc(map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
                     const_cast<void *>(base), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                     CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS;
}

/* CARVE_GEMM_TMA_STORE=0 keeps C's stores in registers (for comparison;
 * read on every call). */
bool tma_store_env() {
    const char *v = getenv("CARVE_GEMM_TMA_STORE");
    return !(v && strcmp(v, "0") == 0);
}

/* Launch kern (cfg, its dynamic shared memory cfg.dynamicSmemBytes) after
 * opting it in to that much shared memory once per process (ready); where
 * the launch fails, opt in again and launch once more (the opt-in may be
 * gone: a device reset, another device). */
template <typename... P, typename... A>
cudaError_t launch_opted_in(std::atomic<int> &ready, void (*kern)(P...), const cudaLaunchConfig_t &cfg, bool pdl,
                            A... args) {
    const void *fn = reinterpret_cast<const void *>(kern);
    const int smem = (int)cfg.dynamicSmemBytes;
    if (!ready.load(std::memory_order_acquire)) {
        cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e != cudaSuccess)
            return e;
        ready.store(1, std::memory_order_release);
    }
    cudaError_t e = carve_tc_launch(cfg, pdl, kern, args...);
    if (e != cudaSuccess) {
        ready.store(0, std::memory_order_release);
        if (cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) == cudaSuccess) {
            ready.store(1, std::memory_order_release);
            e = carve_tc_launch(cfg, pdl, kern, args...);
        }
    }
    return e;
}

template <int BN, typename T, bool AK, bool BKM>
cudaError_t launch(const Problem &pr, const CUtensorMap &ma, const CUtensorMap &mb, const CUtensorMap &mc,
                   const EpiParams &ep, const SplitParams &sp, int grid, bool first) {
    auto kern = wgmma_gemm_kernel<BN, T, AK, BKM>;
    constexpr int smem = WgCfg<BN>::kSmem;
    static std::atomic<int> ready{0};
    /* The units: tiles, at most the 128 x 128 grid args.c checked, times
     * the splits, within the limit (carve_tc_clamp_splits, or fewer tiles
     * than SMs when the heuristic split); the persistent grid, fewer. */
    int64_t blocks = carve_grid(pr.M, pr.N, kWgBM, BN) * sp.splits;
    if (grid > 0 && grid < blocks)
        blocks = grid;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)blocks, 1, 1);
    cfg.blockDim = dim3(kWgThreads, 1, 1);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = pr.stream;
    cudaLaunchAttribute attr[1];
    const bool pdl = carve_tc_pdl_attr(&attr[0], first, false);
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 1 : 0;
    return launch_opted_in(ready, kern, cfg, pdl, ma, mb, mc, ep, sp);
}

template <int BN, typename T>
cudaError_t launch_layout(const Problem &pr, const CUtensorMap &ma, const CUtensorMap &mb, const CUtensorMap &mc,
                          const EpiParams &ep, const SplitParams &sp, int grid, bool first) {
    if (pr.a_kmajor)
        return pr.b_kmajor ? launch<BN, T, true, true>(pr, ma, mb, mc, ep, sp, grid, first)
                           : launch<BN, T, true, false>(pr, ma, mb, mc, ep, sp, grid, first);
    return pr.b_kmajor ? launch<BN, T, false, true>(pr, ma, mb, mc, ep, sp, grid, first)
                       : launch<BN, T, false, false>(pr, ma, mb, mc, ep, sp, grid, first);
}

template <int BN>
cudaError_t launch_type(const Problem &pr, const CUtensorMap &ma, const CUtensorMap &mb, const CUtensorMap &mc,
                        const EpiParams &ep, const SplitParams &sp, int grid, bool first) {
    return pr.bf16 ? launch_layout<BN, __nv_bfloat16>(pr, ma, mb, mc, ep, sp, grid, first)
                   : launch_layout<BN, __half>(pr, ma, mb, mc, ep, sp, grid, first);
}

/* A cluster of `cs` blocks of a streaming kernel instance on a device: 0
 * not asked yet, 1 the device can place one, 2 it cannot (cs blocks that
 * fit no GPC: a MIG instance or an MPS client with a few SMs). */
constexpr int kStMaxDevices = 64;
std::atomic<signed char> g_placeable[kStMaxDevices][kStInstances][CARVE_TC_STREAM_MAX_CLUSTER];

/* The largest cluster size up to `cs` that the device can place for this
 * instance (cudaOccupancyMaxActiveClusters > 0, asked once per device,
 * instance and size, so a call pays one cudaGetDevice and an atomic load);
 * a size the query cannot judge (another error) counts as placeable, and
 * the launch judges it. 1 at least. bu: B's rows off 16 bytes (the
 * instance). */
int placeable_cluster(const Problem &pr, bool bu, const cudaLaunchConfig_t &base, int cs) {
    int dev = -1;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        (void)cudaGetLastError();
        dev = -1;
    }
    const int inst = stream_instance(pr.bf16, pr.M, pr.a_kmajor, pr.b_kmajor, bu);
    for (; cs > 1; cs--) {
        std::atomic<signed char> *slot = dev >= 0 && dev < kStMaxDevices ? &g_placeable[dev][inst][cs - 1] : nullptr;
        int known = slot ? slot->load(std::memory_order_relaxed) : 0;
        if (known == 0) {
            cudaLaunchConfig_t cfg = base;
            cudaLaunchAttribute attr[1];
            attr[0].id = cudaLaunchAttributeClusterDimension;
            attr[0].val.clusterDim.x = (unsigned)cs;
            attr[0].val.clusterDim.y = 1;
            attr[0].val.clusterDim.z = 1;
            cfg.gridDim = dim3((unsigned)cs, 1, 1);
            cfg.attrs = attr;
            cfg.numAttrs = 1;
            int n = 0;
            const cudaError_t e = stream_dispatch(pr.bf16, pr.M, pr.a_kmajor, pr.b_kmajor, bu, [&](auto kernel) {
                return cudaOccupancyMaxActiveClusters(&n, kernel, &cfg);
            });
            if (e != cudaSuccess)
                (void)cudaGetLastError();
            known = e == cudaSuccess ? (n > 0 ? 1 : 2) : e == cudaErrorInvalidClusterSize ? 2 : 1;
            if (slot)
                slot->store((signed char)known, std::memory_order_relaxed);
        }
        if (known == 1)
            break;
    }
    return cs;
}

/* The streaming kernel, A and B in either layout (stream_dispatch picks
 * the instance); the grid is the 64-column tiles times the cluster size,
 * one cluster a tile. *cs: the planned cluster size in, the launched one
 * out (smaller where the device cannot place the planned one). */
cudaError_t stream_launch(const Problem &pr, StreamParams sp, int *cs) {
    const int64_t tiles = carve_tiles(pr.N, kStCols);
    cudaLaunchConfig_t cfg = {};
    cfg.blockDim = dim3(kStThreads, 1, 1);
    cfg.dynamicSmemBytes = 0;
    cfg.stream = pr.stream;
    const bool bu = !carve_tc_stream_b_rows((uintptr_t)pr.B, pr.ldb); /* B's rows off 16 bytes */
    sp.clusters = *cs = placeable_cluster(pr, bu, cfg, sp.clusters);
    cfg.gridDim = dim3((unsigned)(tiles * sp.clusters), 1, 1);
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)sp.clusters;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    const bool pdl = carve_tc_pdl_attr(&attr[1], true, true); /* the call's only kernel */
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 2 : 1;
    const cudaError_t e = stream_dispatch(pr.bf16, pr.M, pr.a_kmajor, pr.b_kmajor, bu, [&](auto kernel) {
        return carve_tc_launch(cfg, pdl, kernel, sp); /* the error reported through the return value */
    });
    if (e == cudaErrorInvalidClusterSize)
        return cudaErrorNotSupported; /* nothing was queued: the wgmma path takes it */
    return e;
}

/* The decode kernel (gemm_tc_decode.cuh): the grid is ceil(N / COLS)
 * tiles times the cluster size cs, in clusters of cs. */
template <int BM, int COLS, typename T, bool WK>
cudaError_t decode_launch(const Problem &pr, const CUtensorMap &mw, const CUtensorMap &mx, const EpiParams &ep,
                          int cs) {
    auto kern = decode_gemm_kernel<BM, COLS, T, WK>;
    constexpr int smem = DcCfg<BM, COLS>::kSmem;
    static std::atomic<int> ready{0};
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)(carve_tiles(pr.N, COLS) * (int64_t)cs), 1, 1);
    cfg.blockDim = dim3(DcCfg<BM, COLS>::kThreads, 1, 1);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = pr.stream;
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)cs;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    const bool pdl = carve_tc_pdl_attr(&attr[1], true, true); /* the call's only kernel */
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 2 : 1;
    return launch_opted_in(ready, kern, cfg, pdl, mw, mx, ep);
}

/* Clusters of cs blocks of the decode kernel for M rows that the device
 * holds at once (cudaOccupancyMaxActiveClusters; the count depends on the
 * block's shared memory and threads, that is on BM and COLS, not on the
 * types or B's layout), asked once per device, BM, COLS and size: stored
 * as count + 1, 0 not asked, and -1 where the query failed. */
constexpr int kDcWidths = 6;
std::atomic<int> g_dc_active[kStMaxDevices][kDcWidths][2][4];

template <int BM, int COLS>
int decode_active_query(int cs) {
    auto kern = decode_gemm_kernel<BM, COLS, __nv_bfloat16, true>;
    constexpr int smem = DcCfg<BM, COLS>::kSmem;
    if (cudaFuncSetAttribute(reinterpret_cast<const void *>(kern), cudaFuncAttributeMaxDynamicSharedMemorySize,
                             smem) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)cs, 1, 1);
    cfg.blockDim = dim3(DcCfg<BM, COLS>::kThreads, 1, 1);
    cfg.dynamicSmemBytes = smem;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)cs;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, kern, &cfg) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return n;
}

template <int BM, int COLS>
cudaError_t decode_type(const Problem &pr, const CUtensorMap &mw, const CUtensorMap &mx, const EpiParams &ep, int cs) {
    if (pr.bf16)
        return pr.b_kmajor ? decode_launch<BM, COLS, __nv_bfloat16, true>(pr, mw, mx, ep, cs)
                           : decode_launch<BM, COLS, __nv_bfloat16, false>(pr, mw, mx, ep, cs);
    return pr.b_kmajor ? decode_launch<BM, COLS, __half, true>(pr, mw, mx, ep, cs)
                       : decode_launch<BM, COLS, __half, false>(pr, mw, mx, ep, cs);
}

/* The two things done per decode kernel: ask its co-resident clusters,
 * launch it. */
struct DcQuery {
    int cs;
    static int refused() { return -1; }
    template <int BM, int COLS>
    int run() const { return decode_active_query<BM, COLS>(cs); }
};
struct DcLaunch {
    const Problem &pr;
    const CUtensorMap &mw, &mx;
    const EpiParams &ep;
    int cs;
    static cudaError_t refused() { return cudaErrorNotSupported; }
    template <int BM, int COLS>
    cudaError_t run() const { return decode_type<BM, COLS>(pr, mw, mx, ep, cs); }
};

/* f.run<BM, COLS>() for the kernel of M rows (BM, the narrow side:
 * carve_tc_decode_bm) and cols columns a block (128, or 64 up to BM =
 * 128); F::refused() for any other width. */
template <typename F>
auto with_decode_kernel(int M, int cols, const F &f) -> decltype(f.template run<8, 128>()) {
    const int bm = carve_tc_decode_bm(M);
    if (cols != CARVE_TC_DECODE_ROWS && (cols != CARVE_TC_DECODE_NARROW || bm > 128))
        return F::refused();
    if (cols == CARVE_TC_DECODE_NARROW)
        return bm == 8    ? f.template run<8, 64>()
               : bm == 16 ? f.template run<16, 64>()
               : bm == 32 ? f.template run<32, 64>()
               : bm == 64 ? f.template run<64, 64>()
                          : f.template run<128, 64>();
    return bm == 8     ? f.template run<8, 128>()
           : bm == 16  ? f.template run<16, 128>()
           : bm == 32  ? f.template run<32, 128>()
           : bm == 64  ? f.template run<64, 128>()
           : bm == 128 ? f.template run<128, 128>()
                       : f.template run<256, 128>();
}

}  // namespace

extern "C" cudaError_t carve_gemm_tc_stream_run(const Problem *pp, int *clusters, const char **why) {
    const Problem &pr = *pp;
    if (!carve_tc_stream_takes(pr.M)) {
        *why = "the streaming kernel takes M <= 32";
        return cudaErrorNotSupported;
    }
    if (*clusters < 1 || *clusters > CARVE_TC_STREAM_MAX_CLUSTER) {
        *why = "cluster size out of range";
        return cudaErrorNotSupported;
    }
    const EpiParams ep{pr.C, pr.ldc, pr.M, pr.N, pr.K, pr.alpha, pr.beta, pr.c_f32 ? 1 : 0};
    const StreamParams sp = stream_params(pr.A, pr.lda, pr.a_kmajor, pr.B, pr.ldb, pr.b_kmajor, *clusters, ep);
    const cudaError_t e = stream_launch(pr, sp, clusters);
    if (e == cudaErrorNotSupported)
        *why = "the device refused the cluster size";
    return e;
}

extern "C" void carve_gemm_tc_decode_active(int M, int active128[4], int active64[4]) {
    const int bm = carve_tc_decode_bm(M);
    int dev = -1;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        (void)cudaGetLastError();
        dev = -1;
    }
    const int w = bm == 8 ? 0 : bm == 16 ? 1 : bm == 32 ? 2 : bm == 64 ? 3 : bm == 128 ? 4 : 5;
    for (int c = 0; c < 2; c++) {
        const int cols = c ? CARVE_TC_DECODE_NARROW : CARVE_TC_DECODE_ROWS;
        int *active = c ? active64 : active128;
        for (int i = 0; i < 4; i++) {
            if (c && bm > 128) { /* no narrow kernel */
                active[i] = -1;
                continue;
            }
            std::atomic<int> *slot = dev >= 0 && dev < kStMaxDevices ? &g_dc_active[dev][w][c][i] : nullptr;
            int v = slot ? slot->load(std::memory_order_relaxed) : 0;
            if (v == 0) {
                const int n = with_decode_kernel(M, cols, DcQuery{1 << i});
                v = n < 0 ? -1 : n + 1;
                if (slot)
                    slot->store(v, std::memory_order_relaxed);
            }
            active[i] = v > 0 ? v - 1 : -1;
        }
    }
}

extern "C" cudaError_t carve_gemm_tc_decode_run(const Problem *pp, int cols, int *clusters, const char **why) {
    const Problem &pr = *pp;
    if (!carve_tc_decode_takes(pr.M, pr.a_kmajor ? 1 : 0)) {
        *why = "the decode kernel takes M <= 256 with A K-major";
        return cudaErrorNotSupported;
    }
    if (cols != CARVE_TC_DECODE_ROWS && !(cols == CARVE_TC_DECODE_NARROW && pr.M <= 128)) {
        *why = "the decode kernel's blocks are 128 columns wide, or 64 for M <= 128";
        return cudaErrorNotSupported;
    }
    if (!carve_tc_tma_ok(pr)) {
        *why = "TMA needs 16-byte aligned A and B and lda, ldb multiples of 8";
        return cudaErrorNotSupported;
    }
    encode_fn enc = get_encode();
    if (!enc) {
        *why = "the driver has no cuTensorMapEncodeTiled";
        return cudaErrorNotSupported;
    }
    if (*clusters != 1 && *clusters != 2 && *clusters != 4 && *clusters != 8) {
        *why = "the decode kernel's cluster size is 1, 2, 4 or 8"; /* its reduction splits a block's columns evenly */
        return cudaErrorNotSupported;
    }
    const int bm = carve_tc_decode_bm(pr.M);
    CUtensorMap mw, mx;
    bool ok = pr.b_kmajor ? make_map(enc, &mw, pr.bf16, pr.B, pr.N, pr.K, pr.ldb, cols)
                          : make_map(enc, &mw, pr.bf16, pr.B, pr.K, pr.N, pr.ldb, kWgBK);
    ok = ok && make_map(enc, &mx, pr.bf16, pr.A, pr.M, pr.K, pr.lda, bm);
    if (!ok) {
        *why = "cuTensorMapEncodeTiled refused the operands";
        return cudaErrorNotSupported;
    }
    const EpiParams ep{pr.C, pr.ldc, pr.M, pr.N, pr.K, pr.alpha, pr.beta, pr.c_f32 ? 1 : 0};
    /* A cluster the device cannot place (a MIG instance or an MPS client
     * with few SMs) is refused before anything is queued: half as large,
     * down to 1. */
    for (int cs = *clusters;; cs /= 2) {
        cudaError_t e = with_decode_kernel(pr.M, cols, DcLaunch{pr, mw, mx, ep, cs});
        const bool refused = e == cudaErrorInvalidClusterSize;
        if (!refused || cs == 1) {
            *clusters = cs;
            if (refused) {
                *why = "the device refused the cluster size";
                return cudaErrorNotSupported;
            }
            return e;
        }
    }
}

extern "C" bool carve_gemm_tc_wgmma_ready(void) { return get_encode() != nullptr; }

extern "C" cudaError_t carve_gemm_tc_wgmma_run(const Problem *pp, const WgPlan *plan, const char **why) {
    const Problem &pr = *pp;
    if (!carve_tc_tma_ok(pr)) {
        *why = "TMA needs 16-byte aligned A and B and lda, ldb multiples of 8";
        return cudaErrorNotSupported;
    }
    encode_fn enc = get_encode();
    if (!enc) {
        *why = "the driver has no cuTensorMapEncodeTiled";
        return cudaErrorNotSupported;
    }
    const int bn = plan->bn == 256 || plan->bn == 192 ? plan->bn : 128;
    SplitParams sp{plan->partial, plan->splits > 1 && plan->partial ? plan->splits : 1, 0};

    CUtensorMap ma, mb;
    bool ok = pr.a_kmajor ? make_map(enc, &ma, pr.bf16, pr.A, pr.M, pr.K, pr.lda, kWgBM)
                          : make_map(enc, &ma, pr.bf16, pr.A, pr.K, pr.M, pr.lda, kWgBK);
    ok = ok && (pr.b_kmajor ? make_map(enc, &mb, pr.bf16, pr.B, pr.N, pr.K, pr.ldb, bn)
                            : make_map(enc, &mb, pr.bf16, pr.B, pr.K, pr.N, pr.ldb, kWgBK));
    if (!ok) {
        *why = "cuTensorMapEncodeTiled refused the operands";
        return cudaErrorNotSupported;
    }
    /* C through TMA stores where it can be (carve_tc_tma_store_ok; a map
     * the driver refuses only means the register epilogue); else the
     * kernel never reads mc, which then repeats A's map. */
    CUtensorMap mc = ma;
    if (tma_store_env() &&
        carve_tc_tma_store_ok((uintptr_t)pr.C, pr.ldc, pr.N, pr.beta, pr.c_f32 ? 1 : 0, sp.splits) &&
        make_map(enc, &mc, pr.bf16, pr.C, pr.M, pr.N, pr.ldc, 64))
        sp.store_tma = 1;
    else
        mc = ma;
    EpiParams ep{pr.C, pr.ldc, pr.M, pr.N, pr.K, pr.alpha, pr.beta, pr.c_f32 ? 1 : 0};
    if (bn == 256)
        return launch_type<256>(pr, ma, mb, mc, ep, sp, plan->grid, plan->first);
    if (bn == 192)
        return launch_type<192>(pr, ma, mb, mc, ep, sp, plan->grid, plan->first);
    return launch_type<128>(pr, ma, mb, mc, ep, sp, plan->grid, plan->first);
}

#else
/* ================= main half: checks, dispatch, mma.sync ================= */
#include <atomic>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "carve_kernels.h"
#include "gemm_tc_mma.cuh"
#include "gemm_tc_plan.h"
#include "gemm_tc_tiny.cuh"
#include "gemm_tc_ws.cuh"
#include "kernel_common.h"

namespace {

using namespace carve_tc;

/* args.c checks the grid of this tile, the mma.sync path's (and the wgmma
 * path's narrow one, whose grid is never smaller than its wide one's). */
static_assert(kMmaBM == CARVE_K_GRID_TILE && kMmaBN == CARVE_K_GRID_TILE, "the checked grid is the launched one");

/* What the calling thread's last carve_gemm ran, for tests and benchmarks
 * (carve__gemm_tc_last_*): the path (4 the decode kernel, 3 the tiny kernel, 2 the streaming
 * kernel, 1 wgmma, 0 mma.sync, -1 nothing), the split-K factor (for the streaming and decode kernels, the
 * cluster size: blocks per 64 or 128 columns), and which operands (bit 0: A, bit
 * 1: B, as the caller named them) went through an aligned copy. */
thread_local int t_last_path = -1;
thread_local int t_last_splits = 0;
thread_local int t_last_copies = 0;
thread_local int t_last_cols = 0;

template <typename T, bool AK, bool BKM, bool VEC>
cudaError_t mma_launch(const Problem &pr, const EpiParams &ep) {
    auto kern = mma_gemm_kernel<T, AK, BKM, VEC>;
    static std::atomic<int> ready{0};
    if (!ready.load(std::memory_order_acquire)) {
        cudaError_t e = cudaFuncSetAttribute(reinterpret_cast<const void *>(kern),
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, kMmaSmem);
        if (e != cudaSuccess)
            return e;
        ready.store(1, std::memory_order_release);
    }
    const int64_t tiles = carve_grid(pr.M, pr.N, kMmaBM, kMmaBN); /* at most CARVE_MAX_GRID (args.c) */
    const T *A = static_cast<const T *>(pr.A), *B = static_cast<const T *>(pr.B);
    /* cudaLaunchKernelEx answers for this launch alone: an error left
     * pending before the call is not taken for its failure (the kernel,
     * queued, would run again in the retry). */
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)tiles, 1, 1);
    cfg.blockDim = dim3(kMmaThreads, 1, 1);
    cfg.dynamicSmemBytes = kMmaSmem;
    cfg.stream = pr.stream;
    cudaError_t e = carve_tc_launch(cfg, false, kern, A, pr.lda, B, pr.ldb, ep);
    if (e != cudaSuccess) { /* the opt-in may be gone (device reset): once more */
        ready.store(0, std::memory_order_release);
        if (cudaFuncSetAttribute(reinterpret_cast<const void *>(kern), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 kMmaSmem) == cudaSuccess) {
            ready.store(1, std::memory_order_release);
            e = carve_tc_launch(cfg, false, kern, A, pr.lda, B, pr.ldb, ep);
        }
    }
    return e;
}

template <typename T, bool VEC>
cudaError_t mma_layout(const Problem &pr, const EpiParams &ep) {
    if (pr.a_kmajor)
        return pr.b_kmajor ? mma_launch<T, true, true, VEC>(pr, ep) : mma_launch<T, true, false, VEC>(pr, ep);
    return pr.b_kmajor ? mma_launch<T, false, true, VEC>(pr, ep) : mma_launch<T, false, false, VEC>(pr, ep);
}

/* A tiny product (carve_tc_tiny): one thread an element of C. */
cudaError_t run_tiny(const Problem &pr) {
    const EpiParams ep{pr.C, pr.ldc, pr.M, pr.N, pr.K, pr.alpha, pr.beta, pr.c_f32 ? 1 : 0};
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)(((long long)pr.M * pr.N + kTinyThreads - 1) / kTinyThreads), 1, 1);
    cfg.blockDim = dim3(kTinyThreads, 1, 1);
    cfg.stream = pr.stream;
    const int ak = pr.a_kmajor ? 1 : 0, bk = pr.b_kmajor ? 1 : 0;
    if (pr.bf16)
        return carve_tc_launch(cfg, false, tiny_gemm_kernel<__nv_bfloat16>, static_cast<const __nv_bfloat16 *>(pr.A),
                               pr.lda, ak, static_cast<const __nv_bfloat16 *>(pr.B), pr.ldb, bk, ep);
    return carve_tc_launch(cfg, false, tiny_gemm_kernel<__half>, static_cast<const __half *>(pr.A), pr.lda, ak,
                           static_cast<const __half *>(pr.B), pr.ldb, bk, ep);
}

cudaError_t run_mma(const Problem &pr) {
    EpiParams ep{pr.C, pr.ldc, pr.M, pr.N, pr.K, pr.alpha, pr.beta, pr.c_f32 ? 1 : 0};
    /* cp.async needs 16-byte aligned sources: whole rows of 8 elements. */
    bool vec = carve_tc_tma_ok(pr);
    if (pr.bf16)
        return vec ? mma_layout<__nv_bfloat16, true>(pr, ep) : mma_layout<__nv_bfloat16, false>(pr, ep);
    return vec ? mma_layout<__half, true>(pr, ep) : mma_layout<__half, false>(pr, ep);
}

/* CARVE_GEMM_PATH: 0 auto, 1 wgmma, 2 mma, 3 stream, 4 decode (read on every call:
 * cheap, and tests and benchmarks switch it between calls). wgmma keeps
 * decode shapes off the streaming kernel; stream puts every problem the
 * kernel can take on it (up to 32 rows, where the plan gives it 4 of
 * outputs of at least 8192 columns, 2 of at least 4096 but those the
 * decode kernel takes in 64-column tiles that split k (carve_tc_stream_yields),
 * or 16 of at least 1024 (K-major B: 4096, 8 rows from 3072, 4 from 1024)
 * where B's rows are off 16 bytes: carve_tc_stream_chosen) and leaves the rest to the
 * plan; decode puts every problem the decode kernel takes on it (up to 256
 * rows, A K-major, on TMA's rules) and the rest on wgmma or mma.sync.
 * Anything else is auto. */
int path_env() {
    const char *v = getenv("CARVE_GEMM_PATH");
    if (!v || !*v || strcmp(v, "auto") == 0)
        return 0;
    if (strcmp(v, "wgmma") == 0)
        return 1;
    if (strcmp(v, "mma") == 0)
        return 2;
    if (strcmp(v, "stream") == 0)
        return 3;
    if (strcmp(v, "decode") == 0)
        return 4;
    return 0;
}

#ifdef CARVE_GEMM_TC_HAVE_SM90A
/* CARVE_GEMM_SPLITK: 0 (unset, "auto" or not a number from 1 to 64) lets
 * the plan choose; N forces N splits on the wgmma path (clamped by
 * carve_tc_clamp_splits; 1 turns split-K off) and clusters of N blocks on
 * the streaming kernel (clamped by carve_tc_stream_clamp_cluster) and on
 * the decode kernel (the power of two at or below N, up to 8:
 * carve_tc_decode_clamp_cluster). For tests and benchmarks. */
/* CARVE_GEMM_BN=128|192|256 forces the wgmma tile width (tests and
 * benchmarks); anything else leaves the plan's. */
int bn_env() {
    const char *v = getenv("CARVE_GEMM_BN");
    if (!v || !*v)
        return 0;
    return strcmp(v, "128") == 0 ? 128 : strcmp(v, "192") == 0 ? 192 : strcmp(v, "256") == 0 ? 256 : 0;
}

/* CARVE_GEMM_DECODE_COLS=64|128 forces the decode kernel's block width
 * (tests and benchmarks; 64 only where M <= 128, else 128); anything else
 * leaves the plan's (carve_tc_decode_cols). */
int decode_cols_env() {
    const char *v = getenv("CARVE_GEMM_DECODE_COLS");
    if (!v || !*v)
        return 0;
    return strcmp(v, "64") == 0 ? CARVE_TC_DECODE_NARROW : strcmp(v, "128") == 0 ? CARVE_TC_DECODE_ROWS : 0;
}

/* CARVE_GEMM_PERSIST=0 launches the wgmma kernel one block a unit (the
 * one-tile kernel, for comparison); the default is the persistent grid. */
bool persist_env() {
    const char *v = getenv("CARVE_GEMM_PERSIST");
    return !(v && strcmp(v, "0") == 0);
}

int splitk_env() {
    const char *v = getenv("CARVE_GEMM_SPLITK");
    if (!v || !*v)
        return 0;
    char *end = nullptr;
    long x = strtol(v, &end, 10);
    return (end && *end == 0 && x >= 1 && x <= 64) ? (int)x : 0;
}
#endif

constexpr int kMaxDevices = 64;
std::atomic<int> g_cc[kMaxDevices];  /* major*10 + minor, 0 = not read yet */

#ifdef CARVE_GEMM_TC_HAVE_SM90A
std::atomic<int> g_sms[kMaxDevices]; /* multiprocessors, 0 = not read yet */

int device_sms() {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 132;
    }
    bool cache = dev >= 0 && dev < kMaxDevices;
    int n = cache ? g_sms[dev].load(std::memory_order_relaxed) : 0;
    if (n)
        return n;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0) {
        (void)cudaGetLastError();
        return 132;
    }
    if (cache)
        g_sms[dev].store(n, std::memory_order_relaxed);
    return n;
}
#endif

int device_cc() {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    bool cache = dev >= 0 && dev < kMaxDevices;
    int cc = cache ? g_cc[dev].load(std::memory_order_relaxed) : 0;
    if (cc)
        return cc;
    int ma = 0, mi = 0;
    if (cudaDeviceGetAttribute(&ma, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&mi, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    cc = ma * 10 + mi;
    if (cache)
        g_cc[dev].store(cc, std::memory_order_relaxed);
    return cc;
}

#ifdef CARVE_GEMM_TC_HAVE_SM90A
/* Whether arena can give this call workspace: an arena (args.c checked its
 * kind) whose memory is on the current device. */
bool ws_usable(carve_arena *arena) {
    if (!arena)
        return false;
    carve_config cfg;
    int dev = 0;
    if (carve_arena_get_config(arena, &cfg) != CARVE_OK)
        return false;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    return cfg.device == dev;
}

/* One operand of the canonical problem as stored: rows x cols, row stride
 * ld (K-major: M or N rows of K; MN-major: K rows of M or N). */
struct Stored {
    int rows, cols;
};
Stored stored_a(const Problem &pr) { return pr.a_kmajor ? Stored{pr.M, pr.K} : Stored{pr.K, pr.M}; }
Stored stored_b(const Problem &pr) { return pr.b_kmajor ? Stored{pr.N, pr.K} : Stored{pr.K, pr.N}; }

bool tma_ok_one(const void *p, long long ld) { return (uintptr_t)p % 16 == 0 && ld % 8 == 0; }

/* The workspace kernels' launch: blocks of kWsThreads, no shared memory. */
cudaLaunchConfig_t ws_config(unsigned blocks, cudaStream_t stream) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(blocks, 1, 1);
    cfg.blockDim = dim3(kWsThreads, 1, 1);
    cfg.stream = stream;
    return cfg;
}

cudaError_t launch_copy(const void *src, long long ld_src, void *dst, Stored sh, cudaStream_t stream, int sms,
                        bool first) {
    const long long ld = carve_tc_copy_ld(sh.cols);
    cudaLaunchConfig_t cfg = ws_config(ws_blocks((long long)sh.rows * (ld / 8), sms), stream);
    cudaLaunchAttribute attr[1];
    const bool pdl = carve_tc_pdl_attr(&attr[0], first, false);
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 1 : 0;
    return carve_tc_launch(cfg, pdl, copy_rows_kernel, static_cast<const uint16_t *>(src), ld_src,
                           static_cast<uint16_t *>(dst), ld, sh.rows, sh.cols);
}

cudaError_t launch_reduce(const Problem &pr, const float *partial, int splits, int sms) {
    EpiParams ep{pr.C, pr.ldc, pr.M, pr.N, pr.K, pr.alpha, pr.beta, pr.c_f32 ? 1 : 0};
    cudaLaunchConfig_t cfg = ws_config(ws_blocks((long long)pr.M * pr.N, sms), pr.stream);
    cudaLaunchAttribute attr[1];
    const bool pdl = carve_tc_pdl_attr(&attr[0], false, false); /* after the GEMM */
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 1 : 0;
    /* store_out ignores T for an fp32 C */
    return pr.bf16 || pr.c_f32 ? carve_tc_launch(cfg, pdl, splitk_reduce_kernel<__nv_bfloat16>, partial, splits, ep)
                               : carve_tc_launch(cfg, pdl, splitk_reduce_kernel<__half>, partial, splits, ep);
}

/* The Hopper path with its workspace (docs/kernels.md, "Workspace"): the
 * plan (tile width, split-K factor, which operands need an aligned copy),
 * one carve_alloc on the call's stream for all of it, the copies, the
 * GEMM, the reduction, then carve_free, in stream order after them. No
 * workspace (no arena, another device's, or the arena cannot give it): no
 * split, and cudaErrorNotSupported when an operand needed a copy, so that
 * mma.sync takes the call; so too when one needs a copy and k is shorter
 * than a k tile (carve_tc_copy_pays). *freed is the status of the free. */
cudaError_t run_wgmma(carve_arena *arena, const Problem &pr, int flip, carve_status *freed) {
    *freed = CARVE_OK;
    const int sms = device_sms();
    const Stored sa = stored_a(pr), sb = stored_b(pr);
    const bool copy_a = !tma_ok_one(pr.A, pr.lda), copy_b = !tma_ok_one(pr.B, pr.ldb);
    if ((copy_a || copy_b) && !carve_tc_copy_pays(pr.K))
        return cudaErrorNotSupported; /* short k: mma.sync is as quick as the copies' launches */
    const int forced_bn = bn_env();
    const int bn = forced_bn ? forced_bn : carve_tc_choose_bn(pr.M, pr.N, sms);
    const int forced = splitk_env();
    int splits = forced ? carve_tc_clamp_splits(forced, pr.M, pr.N, pr.K, bn)
                        : carve_tc_choose_splits(pr.M, pr.N, pr.K, bn, sms);

    const uint64_t pbytes = carve_tc_partial_bytes(pr.M, pr.N, splits);
    const uint64_t abytes = copy_a ? carve_tc_copy_bytes(sa.rows, sa.cols) : 0;
    const uint64_t bbytes = copy_b ? carve_tc_copy_bytes(sb.rows, sb.cols) : 0;
    const uint64_t limit = (uint64_t)1 << 62; /* each piece is below 2^62 unless refused */
    void *ws = nullptr;
    if (pbytes + abytes + bbytes > 0) {
        const bool fits = pbytes < limit && abytes < limit && bbytes < limit;
        /* Any failure (out of memory above all) only means no workspace. */
        if (!fits || !ws_usable(arena) || carve_alloc(arena, (size_t)(pbytes + abytes + bbytes), (carve_stream)pr.stream,
                                                      &ws) != CARVE_OK)
            ws = nullptr;
        if (!ws) {
            if (copy_a || copy_b)
                return cudaErrorNotSupported;
            splits = 1;
        }
    }
    char *const base = static_cast<char *>(ws);
    Problem q = pr;
    cudaError_t e = cudaSuccess;
    if (copy_a) {
        q.A = base + pbytes;
        q.lda = carve_tc_copy_ld(sa.cols);
        e = launch_copy(pr.A, pr.lda, base + pbytes, sa, pr.stream, sms, true);
    }
    if (copy_b && e == cudaSuccess) {
        q.B = base + pbytes + abytes;
        q.ldb = carve_tc_copy_ld(sb.cols);
        e = launch_copy(pr.B, pr.ldb, base + pbytes + abytes, sb, pr.stream, sms, !copy_a);
    }
    const int grid = persist_env() ? carve_tc_persist_grid(carve_grid(pr.M, pr.N, CARVE_TC_BM, bn) * splits, sms) : 0;
    const WgPlan plan{bn, splits, splits > 1 ? reinterpret_cast<float *>(base) : nullptr, grid, !copy_a && !copy_b};
    const char *why = nullptr;
    if (e == cudaSuccess)
        e = carve_gemm_tc_wgmma_run(&q, &plan, &why);
    if (e == cudaSuccess && splits > 1)
        e = launch_reduce(pr, plan.partial, splits, sms);
    if (e == cudaSuccess) {
        t_last_splits = splits;
        t_last_copies = (copy_a ? (flip ? 2 : 1) : 0) | (copy_b ? (flip ? 1 : 2) : 0);
    }
    /* Stream-ordered: work queued on this stream before the free (the
     * kernels above) may still run; carve hands the bytes again at once
     * only to later allocations on the same stream, whose work runs after
     * it, and to other streams only once it has completed (include/carve.h,
     * "Stream ordering"). */
    if (ws)
        *freed = carve_free(arena, ws);
    return e;
}
#endif

}  // namespace

extern "C" int carve__gemm_tc_last_path(void) { return t_last_path; }
extern "C" int carve__gemm_tc_last_splits(void) { return t_last_splits; }
extern "C" int carve__gemm_tc_last_copies(void) { return t_last_copies; }
extern "C" int carve__gemm_tc_last_cols(void) { return t_last_cols; }

/* For tests and benchmarks: the clusters of cs blocks (1, 2, 4 or 8) of
 * the decode kernel for M rows in blocks of cols columns (128 or 64) that
 * the current device holds at once, as the plan counts them
 * (carve_tc_decode_cluster); -1 where unknown or not built. */
extern "C" int carve__gemm_tc_decode_active(int M, int cols, int cs) {
#ifdef CARVE_GEMM_TC_HAVE_SM90A
    if (device_cc() != 90 || !carve_gemm_tc_wgmma_ready() || M < 1 || M > CARVE_TC_DECODE_MAX_M)
        return -1;
    if (cols != CARVE_TC_DECODE_ROWS && cols != CARVE_TC_DECODE_NARROW)
        return -1;
    int a128[4], a64[4];
    carve_gemm_tc_decode_active(M, a128, a64);
    const int *active = cols == CARVE_TC_DECODE_NARROW ? a64 : a128;
    return cs == 1 ? active[0] : cs == 2 ? active[1] : cs == 4 ? active[2] : cs == 8 ? active[3] : -1;
#else
    (void)M;
    (void)cols;
    (void)cs;
    return -1;
#endif
}

extern "C" carve_status carve_gemm(carve_arena *arena, carve_stream s, carve_order order, carve_transpose transa,
                                   carve_transpose transb, int m, int n, int k, float alpha, const void *A, int lda,
                                   const void *B, int ldb, float beta, void *C, int ldc, carve_dtype ab_type,
                                   carve_dtype c_type) {
    const char *fn = "carve_gemm";
    t_last_path = -1;
    t_last_splits = 0;
    t_last_cols = 0;
    t_last_copies = 0;
    /* What needs no device first (args.c, shared with the build without
     * CUDA), then the device and the pointers' memory. */
    carve_status st = carve_k_check_gemm(fn, arena, order, transa, transb, m, n, k, A, lda, B, ldb, C, ldc, ab_type,
                                         c_type);
    if (st != CARVE_OK)
        return st;
    if ((st = carve_k::check_device_present(fn)) != CARVE_OK)
        return st;
    if ((st = carve_k::check_device_ptr(A, fn, "A")) != CARVE_OK ||
        (st = carve_k::check_device_ptr(B, fn, "B")) != CARVE_OK ||
        (st = carve_k::check_device_ptr(C, fn, "C")) != CARVE_OK)
        return st;
    const bool row = order == CARVE_ROW_MAJOR, ta = transa == CARVE_TRANS, tb = transb == CARVE_TRANS;

    /* The canonical row-major problem. */
    Problem pr;
    pr.alpha = alpha;
    pr.beta = beta;
    pr.bf16 = ab_type == CARVE_DTYPE_BF16;
    pr.c_f32 = c_type == CARVE_DTYPE_F32;
    pr.C = C;
    pr.ldc = ldc;
    pr.K = k;
    pr.stream = reinterpret_cast<cudaStream_t>(s);
    if (row) {
        pr.M = m, pr.N = n;
        pr.A = A, pr.lda = lda, pr.a_kmajor = !ta;
        pr.B = B, pr.ldb = ldb, pr.b_kmajor = tb;
    } else { /* C^T (n x m, row-major) = op(B)^T * op(A)^T */
        pr.M = n, pr.N = m;
        pr.A = B, pr.lda = ldb, pr.a_kmajor = !tb;
        pr.B = A, pr.ldb = lda, pr.b_kmajor = ta;
    }

    const int want = path_env();
    cudaError_t e = cudaErrorNotSupported;
    carve_status freed = CARVE_OK;
#ifdef CARVE_GEMM_TC_HAVE_SM90A
    /* The decode kernel's plan, where it may take the call: its block
     * width (carve_tc_decode_cols, or CARVE_GEMM_DECODE_COLS) and cluster
     * size. */
    const bool dc_may = (want == 0 || want == 4) && device_cc() == 90 && carve_gemm_tc_wgmma_ready() &&
                        carve_tc_decode_takes(pr.M, pr.a_kmajor ? 1 : 0) && carve_tc_tma_ok(pr) &&
                        (want == 4 || pr.M <= CARVE_TC_DECODE_PLAN_SPLIT_M);
    int dc_cols = 0, dc_planned = 1; /* 0: not planned yet */
    int sms_read = 0;                 /* the device's SMs, read once a call (0: not yet) */
    auto sms_of = [&]() { return sms_read ? sms_read : (sms_read = device_sms()); };
    auto plan_decode = [&]() {
        if (dc_cols)
            return;
        int a128[4], a64[4];
        const int sms = sms_of();
        carve_gemm_tc_decode_active(pr.M, a128, a64);
        const int fcols = decode_cols_env();
        dc_cols = fcols && (fcols == CARVE_TC_DECODE_ROWS || pr.M <= 128)
                      ? fcols
                      : carve_tc_decode_cols(pr.M, pr.N, pr.K, sms, a128, a64);
        dc_planned = carve_tc_decode_cluster(pr.N, pr.K, dc_cols, sms, dc_cols == CARVE_TC_DECODE_NARROW ? a64 : a128);
    };
    const int b_rows = carve_tc_stream_b_rows((uintptr_t)pr.B, pr.ldb);
    bool st_go = (want == 0 || want == 3) && device_cc() == 90 &&
                 carve_tc_stream_chosen(pr.M, pr.N, b_rows, pr.b_kmajor, want == 3);
    /* The streaming kernel gives way where the decode kernel would run in
     * 64-column tiles, at most one an SM (so only where N <= SMs x 64 is
     * the decode plan made for it). */
    if (st_go && want == 0 && dc_may && (int64_t)pr.N <= (int64_t)sms_of() * CARVE_TC_DECODE_NARROW) {
        plan_decode();
        st_go = !carve_tc_stream_yields(dc_cols, dc_planned);
    }
    if (st_go) {
        /* Decode shapes: the streaming kernel, no workspace. */
        const int forced = splitk_env();
        int clusters = forced ? carve_tc_stream_clamp_cluster(forced, pr.K)
                              : carve_tc_stream_plan_cluster(pr.M, pr.N, pr.K, sms_of(), pr.b_kmajor, b_rows);
        const char *why = nullptr;
        e = carve_gemm_tc_stream_run(&pr, &clusters, &why);
        if (e == cudaSuccess) {
            t_last_path = 2;
            t_last_splits = clusters;
        }
    }
#endif
    if (e == cudaErrorNotSupported && want == 0 && device_cc() >= 80 && carve_tc_tiny(pr.M, pr.N, pr.K)) {
        /* A tiny product, where the streaming kernel did not take it. Its
         * launch's error is the call's: no other path runs after it. */
        e = run_tiny(pr);
        if (e == cudaSuccess) {
            t_last_path = 3;
            t_last_splits = 1;
        }
        return carve_k::launch_status(e, fn);
    }
#ifdef CARVE_GEMM_TC_HAVE_SM90A
    if (e == cudaErrorNotSupported && dc_may) {
        /* The decode kernel, no workspace: where the plan chooses it (its
         * own cluster size decides), every problem it takes under
         * CARVE_GEMM_PATH=decode. */
        plan_decode();
        if (want == 4 || carve_tc_decode_chosen(pr.M, pr.N, pr.K, dc_planned, sms_of())) {
            const int forced = splitk_env();
            int clusters = forced ? carve_tc_decode_clamp_cluster(forced, pr.K) : dc_planned;
            const char *why = nullptr;
            e = carve_gemm_tc_decode_run(&pr, dc_cols, &clusters, &why);
            if (e == cudaSuccess) {
                t_last_path = 4;
                t_last_splits = clusters;
                t_last_cols = dc_cols;
            }
        }
    }
    if (e == cudaErrorNotSupported && want != 2 && device_cc() == 90 && carve_gemm_tc_wgmma_ready()) {
        e = run_wgmma(arena, pr, !row, &freed);
        if (e == cudaSuccess)
            t_last_path = 1;
    }
#endif
    if (e == cudaErrorNotSupported) {
        if (device_cc() < 80)
            return carve_fail(nullptr, CARVE_ERR_NO_DEVICE, "%s: the device (compute capability %d.%d) has no bf16/fp16 mma.sync (needs 8.0+)", fn, device_cc() / 10, device_cc() % 10);
        e = run_mma(pr);
        if (e == cudaSuccess) {
            t_last_path = 0;
            t_last_splits = 1;
        }
    }
    (void)want;
    (void)arena;
    st = carve_k::launch_status(e, fn);
    if (st == CARVE_OK && freed != CARVE_OK) { /* queued, but the workspace stays carved */
        char why[256];
        snprintf(why, sizeof why, "%s", carve_last_error(arena));
        return carve_fail(nullptr, freed, "%s: the product is queued, but its workspace could not be freed (%s)", fn,
                          why);
    }
    return st;
}

#endif /* CARVE_GEMM_TC_SM90A_PART */
