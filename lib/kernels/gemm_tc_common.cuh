/*
 * gemm_tc_common.cuh — what the two halves of the tensor-core GEMM share:
 * the canonical problem (row-major C[M,N] = A[M,K] * B[K,N] with each input
 * K-major or MN-major) and the entry point of the Hopper (sm_90a) path.
 *
 * gemm_tc.cu is compiled twice: once for the project's gencode (argument
 * checks, dispatch and the mma.sync path) and, when the build targets sm_90,
 * once more for sm_90a only with CARVE_GEMM_TC_SM90A_PART defined (the
 * wgmma + TMA path, gemm_tc_wgmma.cuh, the decode kernel,
 * gemm_tc_decode.cuh, and the streaming kernel for the fewest rows,
 * gemm_tc_stream.cuh). The second object defines
 * carve_gemm_tc_wgmma_run, carve_gemm_tc_stream_run and the decode
 * kernel's carve_gemm_tc_decode_run and carve_gemm_tc_decode_active; the first calls
 * them.
 */
#ifndef CARVE_GEMM_TC_COMMON_CUH
#define CARVE_GEMM_TC_COMMON_CUH

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>

#include "tiles.h"

namespace carve_tc {

/* C[M,N] (row-major, ldc) = alpha * A * B + beta * C, fp32 accumulation.
 * a_kmajor: element (m,k) of A at A[m*lda + k], else at A[k*lda + m].
 * b_kmajor: element (k,n) of B at B[n*ldb + k], else at B[k*ldb + n].
 * bf16: inputs are bf16 (else fp16); c_f32: C is fp32 (else the input type).
 * beta == 0: C is never read. */
struct Problem {
    const void *A;
    const void *B;
    void *C;
    int M, N, K;
    long long lda, ldb, ldc;
    float alpha, beta;
    bool a_kmajor, b_kmajor, bf16, c_f32;
    cudaStream_t stream;
};

/* Parameters the kernels read (one struct, passed by value). */
struct EpiParams {
    void *C;
    long long ldc;
    int M, N, K;
    float alpha, beta;
    int c_f32;
};

/* The wgmma launch the caller planned (gemm_tc_plan.h): tile width bn (128,
 * 192 or 256), the split-K factor and the grid (the persistent kernel's
 * blocks, at most one an SM; 0: one block a unit); with splits > 1,
 * partial holds splits slices of M x N fp32 (workspace from the arena) and
 * the kernel writes there, not to C: the caller queues the reduction
 * (gemm_tc_ws.cuh). */
struct WgPlan {
    int bn;
    int splits;
    float *partial;
    int grid;
    bool first; /* the call's first kernel (no copy before it): carve_tc_pdl_attr */
};

/* Host side: whether a kernel of a call is launched with programmatic
 * dependent launch (below), and *attr set to it if so. Every kernel after
 * the first of a call: the kernel before it is the call's own, which waits
 * for the one before it, so the chain stays in stream order. The first
 * kernel of a call (first) where it is memory-bound (early: the decode and
 * streaming kernels, whose calls are short enough that the gap between two
 * calls is a large share of each), so that it is placed while the kernel
 * before it ends: it waits (griddepcontrol.wait) before it reads or writes
 * memory, and that wait covers the work queued before it, also where the
 * kernel just before was itself launched this way and never waited, and
 * where a copy, a memset, a host function or another stream's work joined
 * by an event came before, directly and in graphs: in every case
 * tests/kernels/test_pdl_order.cu checks on the device (an H100, driver
 * 580: docs/kernels.md). CARVE_GEMM_PDL=1: no call's first kernel;
 * 2: every call's first kernel; 0: none (read on every call; for
 * comparisons). */
static inline bool carve_tc_pdl_attr(cudaLaunchAttribute *attr, bool first, bool early) {
    const char *v = getenv("CARVE_GEMM_PDL");
    const char how = v && v[0] ? v[0] : 'd';
    if (how == '0')
        return false;
    if (first && !(how == '2' || (how != '1' && early)))
        return false;
    attr->id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr->val.programmaticStreamSerializationAllowed = 1;
    return true;
}

/* cudaLaunchKernelEx(&cfg, kernel, args...), its error cleared and
 * returned; where it fails and cfg's last attribute is programmatic
 * dependent launch (pdl), once more without it (a driver that refuses it:
 * the kernel then waits for all work before it, as any launch). */
template <typename... P, typename... A>
static inline cudaError_t carve_tc_launch(cudaLaunchConfig_t cfg, bool pdl, void (*kernel)(P...), A... args) {
    cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, args...);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        if (pdl) {
            cfg.numAttrs--;
            e = cudaLaunchKernelEx(&cfg, kernel, args...);
            if (e != cudaSuccess)
                (void)cudaGetLastError();
        }
    }
    return e;
}

/* Programmatic dependent launch (sm_90): a kernel launched with
 * cudaLaunchAttributeProgrammaticStreamSerialization may start while the
 * kernel before it on the stream still runs. grid_dep_wait blocks until
 * that kernel has completed and its writes are visible; every kernel so
 * launched calls it in every block before it touches global memory, so the
 * chain stays ordered (each kernel completes only after its own wait, that
 * is after the kernel before it). grid_dep_launch lets the next kernel so
 * launched be scheduled (it still waits in grid_dep_wait). Both are no-ops
 * without the attribute and before sm_90. */
__device__ __forceinline__ void grid_dep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void grid_dep_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

}  // namespace carve_tc

/* Launch the wgmma + TMA path (gemm_tc_wgmma.cuh, sm_90a object) as
 * planned. Returns cudaSuccess when launched; cudaErrorNotSupported when
 * this path cannot take the problem (alignment, no tensor-map entry point in
 * the driver, a map the driver refuses): the caller falls back to mma.sync;
 * any other error is a launch failure. *why names the reason for a
 * fallback. */
extern "C" cudaError_t carve_gemm_tc_wgmma_run(const carve_tc::Problem *p, const carve_tc::WgPlan *plan,
                                               const char **why);

/* Launch the streaming kernel (gemm_tc_stream.cuh, sm_90a object) for a
 * problem carve_tc_stream_takes accepts, with *clusters blocks per 64
 * columns (carve_tc_stream_cluster), or the largest smaller size the
 * device can place (cudaOccupancyMaxActiveClusters: a MIG instance or an
 * MPS client may have no GPC with room for 8); *clusters is the size
 * launched. Returns cudaSuccess when launched; cudaErrorNotSupported when
 * the problem is not one it takes or the launch refused the cluster size
 * (cudaErrorInvalidClusterSize; *why says why): the caller goes on to the
 * wgmma path; any other error is a launch failure. */
extern "C" cudaError_t carve_gemm_tc_stream_run(const carve_tc::Problem *p, int *clusters, const char **why);

/* Launch the decode kernel (gemm_tc_decode.cuh, sm_90a object) for a
 * problem carve_tc_decode_takes accepts, on TMA's rules, in blocks of cols
 * columns (128, or 64 for M <= 128: carve_tc_decode_cols) with *clusters
 * blocks a tile (carve_tc_decode_cluster, a power of two), or half as many
 * as often as the device refuses the size; *clusters is the size launched.
 * Returns cudaSuccess when launched; cudaErrorNotSupported when the kernel
 * cannot take the problem (*why says why): the caller goes on to the next
 * path; any other error is a launch failure. */
extern "C" cudaError_t carve_gemm_tc_decode_run(const carve_tc::Problem *p, int cols, int *clusters,
                                                const char **why);

/* active128[i] and active64[i]: the clusters of 2^i blocks (i = 0..3) of
 * the decode kernel for M rows in blocks of 128 and of 64 columns that the
 * current device holds at once, -1 where the query failed or the kernel
 * does not exist (64 columns past M = 128) (asked once per device, narrow
 * width and column width, then cached; sm_90a object). */
extern "C" void carve_gemm_tc_decode_active(int M, int active128[4], int active64[4]);

/* Whether the driver offers what the wgmma path needs (the tensor-map
 * encoder), so that the caller plans for it (sm_90a object). */
extern "C" bool carve_gemm_tc_wgmma_ready(void);

/* Per-problem check of the wgmma path's alignment rules (TMA: 16-byte
 * aligned base addresses and row strides). */
static inline bool carve_tc_tma_ok(const carve_tc::Problem &p) {
    return ((uintptr_t)p.A % 16 == 0) && ((uintptr_t)p.B % 16 == 0) && (p.lda % 8 == 0) && (p.ldb % 8 == 0);
}

#endif
