/*
 * carve_kernels.h — device kernels that work on carved buffers.
 *
 * Matrix products (fp32, and bf16/fp16 on tensor cores with fp32
 * accumulation) and sum reduction in fp32, launched on a stream, reading and
 * writing device memory (buffers from a CUDA arena, or any device pointer).
 * Every function validates its arguments and returns a status instead of
 * launching with bad ones. No CUDA headers are needed to use this header.
 *
 * All functions are asynchronous with respect to the host (they enqueue work
 * on the stream and return) and thread-safe. None synchronizes the device,
 * but carve_reduce_sum_f32 when its arena is out of room (see there). Any
 * stream may be passed, cudaStreamPerThread included.
 *
 * Arguments are checked before anything is launched, in two steps: first
 * what needs no device (shapes, enum values, the grid, the arena's backend,
 * NULL and misaligned pointers, overlap), so a bad call gets
 * CARVE_ERR_INVALID whether or not a device is present and whether or not
 * carve was built with CUDA; then the pointers themselves, with
 * cudaPointerGetAttributes: host pointers and pointers the driver does not
 * know give CARVE_ERR_INVALID. Only a call that passes the first step gets
 * CARVE_ERR_NO_DEVICE.
 *
 * Alignment: every pointer must be aligned to the size of its elements
 * (4 bytes for fp32, 2 for bf16 and fp16); buffers from carve_alloc are,
 * so this is about pointers into them. Faster paths that need 16 bytes
 * are chosen only where the arguments allow them, never required.
 * Overlap: C may not share a byte with A or B, counting only the bytes a
 * call reads or writes (the m x n box of C, the stored boxes of A and B):
 * a C placed in the padding between the rows of A (lda > k) is fine.
 * Sizes: m, n and k may each be as large as INT_MAX; a call is refused when
 * its output needs more thread blocks than one grid holds:
 * ceil(m / 128) * ceil(n / 128) > 2^31 - 1.
 */
#ifndef CARVE_KERNELS_H
#define CARVE_KERNELS_H

#include "carve.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Row-major C[m,n] = A[m,k] * B[k,n], fp32 inputs, fp32 accumulation.
 * Returns CARVE_OK; CARVE_ERR_INVALID for m, n or k <= 0, a matrix spanning
 * more than 2^61 elements, more thread blocks than a grid holds (above),
 * NULL, non-device pointers or pointers not on a 4-byte boundary, or C
 * sharing a byte with A or B; CARVE_ERR_NO_DEVICE when no CUDA device is
 * present or carve was built without CUDA; CARVE_ERR_BACKEND if the launch
 * fails (carve_last_error(NULL) names the CUDA error).
 */
CARVE_API carve_status carve_matmul_f32(carve_stream s, int m, int n, int k,
                                        const float *A, const float *B, float *C);

/*
 * General form: C = alpha * A * B + beta * C with leading dimensions (row
 * strides, in elements) lda >= k, ldb >= n, ldc >= n. With beta == 0, C is
 * not read (it may hold NaN). Same statuses as carve_matmul_f32, plus
 * CARVE_ERR_INVALID for leading dimensions below the minimum.
 */
CARVE_API carve_status carve_gemm_f32(carve_stream s, int m, int n, int k, float alpha,
                                      const float *A, int lda, const float *B, int ldb,
                                      float beta, float *C, int ldc);

/*
 * *out = sum of x[0..n) (fp32 accumulation in CUB's tree order), written to
 * the device scalar out. CUB DeviceReduce::Sum does the work; its temporary
 * storage (a few KiB) is carved from arena on stream s and freed back to it
 * in stream order: no cudaMalloc on this path. arena: an arena of device
 * memory on the current device, of the cuda or the cuda_driver backend (a
 * cuda_driver arena must belong to the CUDA context current on the calling
 * thread, which is not checked; carve-run's arenas do). s may be
 * cudaStreamPerThread, whose storage is carved for the legacy default stream
 * and comes back to the arena only once an event recorded on the calling
 * thread's per-thread stream has completed.
 * Does not synchronize the device, except where carve_alloc does: when the
 * arena has no room left for the storage, carve_alloc synchronizes the
 * device, gives cached memory back and retries before it answers
 * CARVE_ERR_OOM (carve.h).
 * Returns CARVE_OK; CARVE_ERR_INVALID for a NULL arena or one of the host or
 * virtual backend, an arena of another device, n == 0, NULL or non-device
 * pointers, pointers not on a 4-byte boundary; CARVE_ERR_OOM if the
 * temporary storage does not fit in the arena; CARVE_ERR_NO_DEVICE when no
 * CUDA device is present or carve was built without CUDA; CARVE_ERR_BACKEND
 * for CUDA failures.
 */
CARVE_API carve_status carve_reduce_sum_f32(carve_arena *arena, carve_stream s,
                                            const float *x, size_t n, float *out);

/* ---- tensor-core GEMM (bf16 / fp16 inputs, fp32 accumulation) ----------- */

/* Element types of carve_gemm's matrices. */
typedef enum carve_dtype {
    CARVE_DTYPE_F32 = 0,  /* IEEE binary32 */
    CARVE_DTYPE_F16 = 1,  /* IEEE binary16 */
    CARVE_DTYPE_BF16 = 2  /* bfloat16 */
} carve_dtype;

/* Storage order of all three matrices of one carve_gemm call. */
typedef enum carve_order { CARVE_ROW_MAJOR = 0, CARVE_COL_MAJOR = 1 } carve_order;

/* Whether an input is used as stored or transposed. */
typedef enum carve_transpose { CARVE_NO_TRANS = 0, CARVE_TRANS = 1 } carve_transpose;

/*
 * C = alpha * op(A) * op(B) + beta * C on tensor cores, as BLAS gemm: op(A)
 * is m x k, op(B) k x n, C m x n; all three stored in `order` with leading
 * dimensions lda, ldb, ldc in elements (row-major: the row stride, at least
 * the stored matrix's column count; column-major: the column stride, at
 * least its row count). A and B are ab_type (CARVE_DTYPE_F16 or
 * CARVE_DTYPE_BF16); products are accumulated in fp32; C is c_type, either
 * ab_type (rounded to nearest even) or CARVE_DTYPE_F32. With beta == 0, C is
 * not read (it may hold NaN). Elements of C outside the m x n box (the
 * padding up to ldc) are never touched.
 *
 * A and B must be on 2-byte boundaries, C on the size of c_type's elements
 * (4 bytes for f32, 2 for f16 and bf16).
 *
 * arena: an arena of the cuda or cuda_driver backend for workspace, or
 * NULL. On Hopper (compute capability 9.0) a product of at least 8192
 * columns and at most 4 rows (rows: m row-major, n column-major; columns
 * the other one), of at least 4096 columns and at most 2 rows, or of at
 * most 16 rows where its weight operand
 * (row-major B, column-major A) has rows off 16 bytes and the product at
 * least 1024 columns (4096 where that operand is transposed, or with it
 * transposed at most 8 rows from 3072 columns and 4 from 1024), runs on a
 * streaming kernel (unless the decode kernel below takes it in blocks of
 * 64 columns with k split over a cluster: on an H100 4096 to 4224 columns
 * with k over 1984, the activations' rows along k, on TMA's rules) that
 * reads the weight in place and needs no workspace (docs/kernels.md,
 * "Decode shapes"); other decode products (at most 32 rows, 64 where
 * one wave of 128-column blocks covers the columns and k is at least
 * 4033, or 128 where k splits over a cluster; A not transposed, A and B 16-byte aligned
 * with leading dimensions multiples of 8) run on a decode kernel, warpgroup
 * MMA with the weight on the tall side, blocks of 128 or 64 columns, and k
 * split inside a thread block cluster, one launch and no workspace (docs/kernels.md, "Decode shapes:
 * the decode kernel"); the rest runs as
 * warpgroup MMA
 * fed by TMA, which may take workspace from the arena with one carve_alloc
 * on stream s (docs/kernels.md, "Workspace"): split-K partials when the
 * output has fewer tiles than the device has SMs (decode shapes), and an
 * aligned copy of A or B when it is not 16-byte aligned or its leading
 * dimension is not a multiple of 8. The workspace is freed with carve_free
 * before the call returns, after the launches that use it (stream-ordered:
 * carve_memory_allocated is back where it was when the call returns).
 * Without workspace (NULL arena, an arena of another device, or one that
 * cannot give it) the result is the same: the call runs unsplit, and on
 * mma.sync when an operand needed a copy. On sm_80 and later the work runs
 * as mma.sync. Under the automatic path, a tiny product (at most 4096
 * multiply-adds, k at most 64) that the streaming kernel does not take
 * runs, on any of them, on a kernel of one thread an element of C instead
 * (docs/kernels.md, "Paths and dispatch"). The environment variable
 * CARVE_GEMM_PATH=wgmma|mma|stream|decode|auto forces a path (for tests
 * and benchmarks; wgmma also keeps small products off the streaming and
 * decode kernels; stream puts on the streaming kernel every product it can
 * take, up to 32 rows, decode on the decode kernel every one it can take,
 * up to 256 rows, and both leave the rest to the automatic choice);
 * CARVE_GEMM_BN=128|192|256 forces the warpgroup MMA's tile width,
 * CARVE_GEMM_DECODE_COLS=64|128 the decode kernel's block width,
 * CARVE_GEMM_PERSIST=0 its one-block-a-tile grid and CARVE_GEMM_TMA_STORE=0
 * its register epilogue (for tests and comparisons).
 *
 * The work runs in stream order on s, as any kernel launch: it waits for
 * all work queued on s before the call, and work queued after it sees its
 * result. On Hopper a call's kernels after its first (copies, GEMM,
 * split-K reduction) start while the one before them ends, each waiting
 * for it before it touches memory (programmatic dependent launch;
 * docs/kernels.md, "Back-to-back kernels"), and so does its first kernel
 * where that is the decode or the streaming kernel (back-to-back decode
 * calls overlap: 2.5% faster on the decode sweep, H100); its wait covers
 * the work queued on s before the call in every case
 * tests/kernels/test_pdl_order.cu checks on the device (kernels launched
 * the same way that never wait, copies, memsets, host functions, other
 * streams joined by events, graphs; all held on an H100, driver 580).
 * CARVE_GEMM_PDL=2 gives every call's first kernel the attribute, 1 none
 * of them, 0 no kernel at all (for comparisons).
 *
 * Returns CARVE_OK; CARVE_ERR_INVALID for m, n or k <= 0, leading
 * dimensions below the minimum, unknown order, transpose or type values,
 * a c_type other than ab_type or f32, an arena of the host or virtual
 * backend, a matrix spanning more than 2^60 elements, more thread blocks
 * than a grid holds (above), NULL, non-device or misaligned pointers, C
 * sharing a byte with A or B; CARVE_ERR_NO_DEVICE when no CUDA device (or
 * one older than sm_80) is present or carve was built without CUDA;
 * CARVE_ERR_BACKEND if a launch fails (carve_last_error(NULL) names the
 * CUDA error) or the workspace could not be freed (the product is queued).
 * Never fails for want of workspace. Thread-safe. Does not synchronize the
 * device, except as carve_alloc does when the arena has no room left for
 * the workspace (it synchronizes and retries before the call goes on
 * without workspace).
 */
CARVE_API carve_status carve_gemm(carve_arena *arena, carve_stream s, carve_order order, carve_transpose transa,
                                  carve_transpose transb, int m, int n, int k, float alpha, const void *A, int lda,
                                  const void *B, int ldb, float beta, void *C, int ldc, carve_dtype ab_type,
                                  carve_dtype c_type);

#ifdef __cplusplus
}
#endif

#endif /* CARVE_KERNELS_H */
