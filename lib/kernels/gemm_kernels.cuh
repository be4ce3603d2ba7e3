/*
 * gemm_kernels.cuh — the SGEMM kernels: C = alpha * A * B + beta * C, all
 * row-major, fp32.
 *
 * The one idea: every thread owns an 8 x TN block of C in registers and
 * walks k in order, one rank-1 update per k (acc = fma(a, b, acc)). A block
 * of threads stages BM x BK of A and BK x BN of B in shared memory, so each
 * element loaded from global memory feeds BN (or BM) multiply-adds, and each
 * element loaded from shared memory feeds TN (or 8) of them. Because each
 * accumulator sees its k terms in order with one FMA each, every fp32
 * variant gives bit-identical results, equal to a sequential fp32 FMA loop.
 *
 * Two families share the tiling and the epilogue:
 *  - gemm_rs ("register staged"): the next tile is loaded from global memory
 *    into registers while the current one is multiplied, then stored to the
 *    other of two shared buffers. A is stored transposed (k-major) so a
 *    thread's 8 rows at one k are two float4 reads.
 *  - gemm_cpt: cp.async copies global to shared memory directly (no
 *    register staging) through a ring of STAGES buffers, so STAGES-1 tiles
 *    are in flight; A is transposed by copying each element on its own
 *    (4-byte copies), so the inner loop is the same as gemm_rs.
 *  - gemm_cpl and gemm_cpf: gemm_cpt's layout and copies, issued with far
 *    fewer instructions (LeanCopy); gemm_cpf also reads the operands of
 *    step k+1 from shared memory while step k is multiplied, across tile
 *    boundaries too, with the tile's barrier on its last step.
 * and gemm_tf32 uses a cp.async pipeline (A row-major) to feed mma.sync
 * m16n8k8 on tensor cores (inputs rounded to TF32).
 *
 * Edges cost no branches in the main loop: rows past m and columns past n
 * are clamped to the last valid one (the loaded values only reach outputs
 * that are never stored); only the k range is predicated, and out-of-range
 * k loads as zero. The VEC (float4) paths need 16-byte aligned rows:
 * A, B, C 16-byte aligned, lda, ldb, ldc, k and n multiples of 4. The scalar
 * path of gemm_rs handles every other shape.
 *
 * CARVE_GEMM_EMU: the kernels also compile as plain C++ against an emulation
 * layer (tests/kernels/gemm_emu.h) that runs a block's threads as host
 * threads, so their indexing and synchronization are tested without a GPU.
 */
#ifndef CARVE_GEMM_KERNELS_CUH
#define CARVE_GEMM_KERNELS_CUH

#include <stdint.h>

#include "tiles.h"

#ifndef CARVE_GEMM_EMU
#include <cuda_runtime.h>
#define CARVE_DEV __device__ __forceinline__
#endif

namespace carve_sgemm {

struct Params {
    int m, n, k;
    float alpha, beta;
    const float *A;
    const float *B;
    float *C;
    int lda, ldb, ldc;
    int tiles_m, tiles_n; /* grid is tiles_m * tiles_n blocks, in grouped order */
};

#ifndef CARVE_GEMM_EMU
CARVE_DEV float *smem_base() {
    extern __shared__ float4 carve_gemm_smem[];
    return reinterpret_cast<float *>(carve_gemm_smem);
}

/* 16- and 4-byte global -> shared copies; with valid false the bytes are
 * zeroed and nothing is read (src must still be a valid address). */
CARVE_DEV void cp_async16(float *dst, const float *src, bool valid) {
    unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    int bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes) : "memory");
}
CARVE_DEV void cp_async4(float *dst, const float *src, bool valid) {
    unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    int bytes = valid ? 4 : 0;
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(bytes) : "memory");
}
/* The same copies without the zero fill, for sources known to be inside. */
CARVE_DEV void cp_async16(float *dst, const float *src) {
    unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
}
CARVE_DEV void cp_async4(float *dst, const float *src) {
    unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src) : "memory");
}
CARVE_DEV void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
CARVE_DEV void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

CARVE_DEV float4 ld4(const float *p) { return *reinterpret_cast<const float4 *>(p); }
CARVE_DEV void st4(float *p, float4 v) { *reinterpret_cast<float4 *>(p) = v; }
CARVE_DEV float4 ldg4(const float *p) { return __ldg(reinterpret_cast<const float4 *>(p)); }
CARVE_DEV float ldg1(const float *p) { return __ldg(p); }

/* fp32 -> tf32: keep 10 mantissa bits, round to nearest, ties away from zero. */
CARVE_DEV uint32_t to_tf32(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}

/* d = a * b + c on one m16n8k8 tile; fragments as in the PTX ISA. */
CARVE_DEV void mma_tf32(float d[4], const uint32_t a[4], const uint32_t b[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif

CARVE_DEV int imin(int a, int b) { return a < b ? a : b; }

/* Block index -> tile coordinates. Blocks run in groups of GROUP tile rows,
 * column by column inside a group, so the blocks resident at one time share
 * a few rows of A and columns of B in L2 instead of sweeping all of B. */
CARVE_DEV void tile_of(int bid, int tiles_m, int tiles_n, int &tm, int &tn) {
    const int GROUP = 8;
    int width = GROUP * tiles_n;
    int group = bid / width;
    int first = group * GROUP;
    int size = imin(tiles_m - first, GROUP);
    int r = bid - group * width;
    tm = first + r % size;
    tn = r / size;
}

/* Write 4 consecutive outputs of one row: C = alpha*acc (beta == 0: C is
 * not read) or fma(alpha, acc, beta*C). */
template <bool VEC>
CARVE_DEV void store4(const Params &p, int row, int col, const float v[4]) {
    if (row >= p.m || col >= p.n)
        return;
    float *c = p.C + (int64_t)row * p.ldc + col;
    if (VEC) { /* n % 4 == 0: the whole group is inside */
        float4 o;
        if (p.beta == 0.f) {
            o = make_float4(p.alpha * v[0], p.alpha * v[1], p.alpha * v[2], p.alpha * v[3]);
        } else {
            float4 old = ld4(c);
            o = make_float4(fmaf(p.alpha, v[0], p.beta * old.x), fmaf(p.alpha, v[1], p.beta * old.y),
                            fmaf(p.alpha, v[2], p.beta * old.z), fmaf(p.alpha, v[3], p.beta * old.w));
        }
        st4(c, o);
    } else {
#pragma unroll
        for (int e = 0; e < 4; e++)
            if (col + e < p.n)
                c[e] = p.beta == 0.f ? p.alpha * v[e] : fmaf(p.alpha, v[e], p.beta * c[e]);
    }
}

/* One BK-deep slice of the block tile, k in order: as points at the
 * thread's first row in k-major A (AP floats per k), bs at its first column
 * in B (BN floats per k). Rows are as[0..3] and as[32..35], columns
 * bs[16*q + 0..3]. */
template <int AP, int BN, int TN, int BK>
CARVE_DEV void multiply_tile(float (&acc)[8][TN], const float *as, const float *bs) {
#pragma unroll
    for (int kk = 0; kk < BK; kk++) {
        float a[8], b[TN];
        float4 a0 = ld4(as + kk * AP), a1 = ld4(as + kk * AP + 32);
        a[0] = a0.x; a[1] = a0.y; a[2] = a0.z; a[3] = a0.w;
        a[4] = a1.x; a[5] = a1.y; a[6] = a1.z; a[7] = a1.w;
#pragma unroll
        for (int q = 0; q < TN / 4; q++) {
            float4 bq = ld4(bs + kk * BN + q * 16);
            b[4 * q + 0] = bq.x; b[4 * q + 1] = bq.y; b[4 * q + 2] = bq.z; b[4 * q + 3] = bq.w;
        }
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
            for (int j = 0; j < TN; j++)
                acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
}

/* The epilogue of the SIMT kernels. Thread (lm, ln) of a warp holds rows
 * lm*4 + {0..3} and 32 + lm*4 + {0..3} of the warp's 64, columns
 * 16*q + ln*4 + {0..3}. Positions are recomputed here rather than kept live
 * in registers through the main loop. */
template <int WM, int WN, int TN, bool VEC>
CARVE_DEV void store_tile(const Params &p, const float (&acc)[8][TN]) {
    int tm, tn;
    tile_of(blockIdx.x, p.tiles_m, p.tiles_n, tm, tn);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int row0 = tm * (WM * 64) + (warp / WN) * 64 + (lane >> 2) * 4;
    const int col0 = tn * (WN * 4 * TN) + (warp % WN) * (4 * TN) + (lane & 3) * 4;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        int row = row0 + (i >> 2) * 32 + (i & 3);
#pragma unroll
        for (int q = 0; q < TN / 4; q++)
            store4<VEC>(p, row, col0 + q * 16, &acc[i][4 * q]);
    }
}

/* ---- register-staged double buffer ------------------------------------ */

/* Shared memory bytes of gemm_rs<WM, WN, TN, BK, ...>. */
constexpr int rs_smem_bytes(int WM, int WN, int TN, int BK) {
    return (2 * BK * (WM * 64 + 4) + 2 * BK * (WN * 4 * TN)) * 4;
}

/*
 * WM x WN warps; each warp computes 64 x (4*TN): its 32 lanes form 8 rows
 * by 4 columns of threads, each thread 8 x TN outputs as 4-wide pieces
 * (rows lm*4 + {0..3} and 32 + lm*4 + {0..3}; columns ln*4 + 16*q + {0..3}),
 * so that a warp's shared-memory reads at one k are a contiguous 128 bytes
 * of A and 16*TN bytes of B: no bank conflicts.
 */
template <int WM, int WN, int TN, int BK, bool VEC, int MINB>
__global__ void __launch_bounds__(WM *WN * 32, MINB) gemm_rs(Params p) {
    constexpr int NT = WM * WN * 32;
    constexpr int BM = WM * 64, BN = WN * 4 * TN;
    constexpr int AP = BM + 4; /* transposed A row; +4 makes the transposing stores conflict-free */
    constexpr int KQ = BK / 4;
    constexpr int A_LD = BM * KQ / NT;        /* 4-float pieces of A per thread per tile */
    constexpr int B_LD = BK * (BN / 4) / NT;  /* 4-float pieces of B per thread per tile */
    static_assert(BM * KQ % NT == 0 && BK * (BN / 4) % NT == 0, "tile loads must divide evenly");
    static_assert(TN % 4 == 0 && BK % 4 == 0, "4-wide pieces");

    float *As = smem_base();
    float *Bs = As + 2 * BK * AP;

    int tm, tn;
    tile_of(blockIdx.x, p.tiles_m, p.tiles_n, tm, tn);
    const int bm0 = tm * BM, bn0 = tn * BN;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm0 = (warp / WN) * 64, wn0 = (warp % WN) * (4 * TN);
    const int lm = lane >> 2, ln = lane & 3;
    const int K = p.k;

    /* Piece s of A (4 consecutive k of one row): row a_row + s*A_ROWS,
     * k a_k..a_k+3 of the tile. Piece s of B (4 consecutive columns of one
     * row): row b_k + s*B_ROWS, columns b_col..b_col+3. */
    constexpr int A_ROWS = NT / KQ, B_ROWS = NT / (BN / 4);
    static_assert(NT % KQ == 0 && NT % (BN / 4) == 0, "one k offset and one column per thread");
    const int a_k = (tid % KQ) * 4, a_row = tid / KQ;
    const float *a_ptr[A_LD];
#pragma unroll
    for (int s = 0; s < A_LD; s++)
        a_ptr[s] = p.A + (int64_t)imin(bm0 + a_row + s * A_ROWS, p.m - 1) * p.lda + a_k;
    const int a_sts = a_k * AP + a_row;
    const int b_k = tid / (BN / 4), b_col = (tid % (BN / 4)) * 4;
    int col = bn0 + b_col, b_last = 0;
    if (VEC)
        col = imin(col, p.n - 4);
    else
        b_last = p.n - 1 - col; /* offsets past b_last read column n-1 */
    const float *b_ptr = p.B + (int64_t)b_k * p.ldb + col;
    const int b_sts = b_k * BN + b_col;
    const int64_t b_pass = (int64_t)B_ROWS * p.ldb;

    float4 ra[A_LD], rb[B_LD];
    auto load = [&](int k0) {
        const int kk = k0 + a_k;
#pragma unroll
        for (int s = 0; s < A_LD; s++) {
            const float *q = a_ptr[s] + k0;
            if (VEC) {
                ra[s] = kk < K ? ldg4(q) : make_float4(0.f, 0.f, 0.f, 0.f);
            } else {
                ra[s].x = kk < K ? ldg1(q) : 0.f;
                ra[s].y = kk + 1 < K ? ldg1(q + 1) : 0.f;
                ra[s].z = kk + 2 < K ? ldg1(q + 2) : 0.f;
                ra[s].w = kk + 3 < K ? ldg1(q + 3) : 0.f;
            }
        }
        const float *brow = b_ptr + (int64_t)k0 * p.ldb;
#pragma unroll
        for (int s = 0; s < B_LD; s++) {
            const bool ok = k0 + b_k + s * B_ROWS < K;
            const float *q = brow + s * b_pass;
            if (VEC) {
                rb[s] = ok ? ldg4(q) : make_float4(0.f, 0.f, 0.f, 0.f);
            } else {
                const int l = b_last;
                rb[s].x = ok ? ldg1(q + (0 < l ? 0 : l)) : 0.f;
                rb[s].y = ok ? ldg1(q + (1 < l ? 1 : l)) : 0.f;
                rb[s].z = ok ? ldg1(q + (2 < l ? 2 : l)) : 0.f;
                rb[s].w = ok ? ldg1(q + (3 < l ? 3 : l)) : 0.f;
            }
        }
    };
    auto store = [&](int buf) {
        float *as = As + buf * BK * AP + a_sts;
        float *bs = Bs + buf * BK * BN + b_sts;
#pragma unroll
        for (int s = 0; s < A_LD; s++) {
            as[0 * AP + s * A_ROWS] = ra[s].x;
            as[1 * AP + s * A_ROWS] = ra[s].y;
            as[2 * AP + s * A_ROWS] = ra[s].z;
            as[3 * AP + s * A_ROWS] = ra[s].w;
        }
#pragma unroll
        for (int s = 0; s < B_LD; s++)
            st4(bs + s * B_ROWS * BN, rb[s]);
    };

    float acc[8][TN];
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < TN; j++)
            acc[i][j] = 0.f;

    const int tiles = carve_tiles(K, BK); /* (K + BK - 1) / BK overflows near INT_MAX */
    load(0);
    store(0);
    __syncthreads();
    for (int t = 0; t < tiles; t++) {
        const int buf = t & 1;
        if (t + 1 < tiles)
            load((t + 1) * BK); /* in flight during the multiply below */
        multiply_tile<AP, BN, TN, BK>(acc, As + buf * BK * AP + wm0 + lm * 4, Bs + buf * BK * BN + wn0 + ln * 4);
        if (t + 1 < tiles)
            store(buf ^ 1); /* that buffer was last read before the previous barrier */
        __syncthreads();
    }

    store_tile<WM, WN, TN, VEC>(p, acc);
}

/* ---- cp.async multi-stage, A transposed by 4-byte copies ---------------- */

constexpr int cpt_smem_bytes(int WM, int WN, int TN, int BK, int STAGES) {
    return STAGES * (BK * (WM * 64 + 4) + BK * (WN * 4 * TN)) * 4;
}

/*
 * The thread and warp grid, shared-memory layout and inner loop of gemm_rs,
 * but global memory goes to shared memory by cp.async through a ring of
 * STAGES buffers, STAGES-1 tiles ahead of the multiply, with no register
 * staging. A is transposed on the way: each element is its own 4-byte copy
 * (lanes take 8 consecutive k of 4 rows: one 32-byte sector per row read,
 * and with rows BM+4 floats apart the 32 writes hit 32 different banks).
 * B moves in 16-byte copies. VEC layouts only. Rows of A past m load as
 * zeros here (one pointer serves all of a thread's rows) instead of being
 * clamped.
 */
template <int WM, int WN, int TN, int BK, int STAGES, int MINB>
__global__ void __launch_bounds__(WM *WN * 32, MINB) gemm_cpt(Params p) {
    constexpr int NT = WM * WN * 32;
    constexpr int BM = WM * 64, BN = WN * 4 * TN;
    constexpr int AP = BM + 4;
    constexpr int ROWS = NT / 8;           /* A rows covered by one pass of the block */
    constexpr int A_PASS = BM / ROWS;      /* passes per 8-deep k slice */
    constexpr int B_ROWS = NT / (BN / 4);  /* B rows covered by one pass */
    constexpr int B_LD = BK / B_ROWS;      /* 16-byte copies of B per thread per tile */
    constexpr int STAGE = BK * AP + BK * BN;
    static_assert(BK % 8 == 0 && BM % ROWS == 0 && NT % (BN / 4) == 0 && BK % B_ROWS == 0,
                  "tile loads must divide evenly");
    static_assert(STAGES >= 2, "a ring needs two buffers");

    float *smem = smem_base();

    int tm, tn;
    tile_of(blockIdx.x, p.tiles_m, p.tiles_n, tm, tn);
    const int bm0 = tm * BM, bn0 = tn * BN;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm0 = (warp / WN) * 64, wn0 = (warp % WN) * (4 * TN);
    const int lm = lane >> 2, ln = lane & 3;
    const int K = p.k;

    /* A copy (pass r, slice h): row tid/8 + r*ROWS, k tid%8 + 8*h. Rows past
     * m are zero-filled (not clamped: one pointer serves every pass). */
    const int a_k = tid & 7, a_row = tid >> 3;
    const float *a_ptr = p.A + (int64_t)(bm0 + a_row) * p.lda + a_k;
    const int64_t a_pass = (int64_t)ROWS * p.lda;
    const int a_rows_left = p.m - bm0 - a_row; /* pass r is inside when r*ROWS < this */
    const int a_dst = a_k * AP + a_row;
    /* B copy s: row tid/(BN/4) + s*B_ROWS, columns (tid % (BN/4))*4 + 0..3. */
    const int b_k = tid / (BN / 4), b_col = (tid % (BN / 4)) * 4;
    const float *b_ptr = p.B + (int64_t)b_k * p.ldb + imin(bn0 + b_col, p.n - 4);
    const int b_dst = BK * AP + b_k * BN + b_col;
    const int64_t b_pass = (int64_t)B_ROWS * p.ldb;

    /* Issue the copies of the tile at k0 into stage st (zeros past k). */
    auto issue = [&](int k0, int st) {
        float *base = smem + st * STAGE;
#pragma unroll
        for (int h = 0; h < BK / 8; h++) {
            const bool kok = k0 + a_k + 8 * h < K;
#pragma unroll
            for (int r = 0; r < A_PASS; r++) {
                const bool ok = kok && r * ROWS < a_rows_left;
                cp_async4(base + a_dst + 8 * h * AP + r * ROWS, ok ? a_ptr + r * a_pass + k0 + 8 * h : p.A, ok);
            }
        }
#pragma unroll
        for (int s = 0; s < B_LD; s++) {
            bool ok = k0 + b_k + s * B_ROWS < K;
            cp_async16(base + b_dst + s * B_ROWS * BN, ok ? b_ptr + (int64_t)k0 * p.ldb + s * b_pass : p.B, ok);
        }
    };

    float acc[8][TN];
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < TN; j++)
            acc[i][j] = 0.f;

    const int tiles = carve_tiles(K, BK); /* (K + BK - 1) / BK overflows near INT_MAX */
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < tiles)
            issue(s * BK, s);
        cp_async_commit(); /* empty groups keep the count uniform */
    }
    for (int t = 0; t < tiles; t++) {
        cp_async_wait<STAGES - 2>(); /* this thread's copies of tile t landed */
        __syncthreads();             /* everyone's did, and everyone is done with tile t-1 */
        int next = t + STAGES - 1;   /* goes to the stage tile t-1 used */
        if (next < tiles)
            issue(next * BK, next % STAGES);
        cp_async_commit();
        const float *st = smem + (t % STAGES) * STAGE;
        multiply_tile<AP, BN, TN, BK>(acc, st + wm0 + lm * 4, st + BK * AP + wn0 + ln * 4);
    }
    cp_async_wait<0>(); /* only empty groups remain; leave nothing in flight */

    store_tile<WM, WN, TN, true>(p, acc);
}

/* ---- cp.async with lean copies, and a register fragment pipeline --------- */

/*
 * The copies of gemm_cpt cost more issue slots than they need: every tile
 * recomputes each source address from the tile index (64-bit multiplies),
 * tests every row against m and every k against K, and selects a fallback
 * address for each copy; with BK 16 that is about 120 PTX instructions per
 * thread per tile, next to 1024 FFMAs. LeanCopy moves the same tiles with
 * about 45:
 *  - each of a thread's A rows has its own pointer, clamped to row m-1 at
 *    the start (as in gemm_rs), so no copy of A tests its row;
 *  - the pointers step by one tile per issue (one 64-bit add each), and a
 *    thread's copies within a tile sit at constant offsets from them and
 *    from the stage's base (immediates in the instruction);
 *  - only a tile that reaches past k (the last one, when BK does not divide
 *    k) takes the predicated path; every other tile copies unconditionally.
 * The thread-to-element mapping and the shared-memory layout are those of
 * gemm_cpt (A k-major with rows BM+4 floats apart, B row-major), so the
 * inner loop and the exact FMA order are unchanged.
 */
template <int BM, int BN, int BK, int NT>
struct LeanCopy {
    static constexpr int AP = BM + 4;
    static constexpr int STAGE = BK * AP + BK * BN; /* floats per stage */
    static constexpr int ROWS = NT / 8;             /* A rows covered by one pass of the block */
    static constexpr int A_PASS = BM / ROWS;
    static constexpr int B_ROWS = NT / (BN / 4);    /* B rows covered by one pass */
    static constexpr int B_LD = BK / B_ROWS;
    static_assert(BK % 8 == 0 && BM % ROWS == 0 && NT % (BN / 4) == 0 && BK % B_ROWS == 0,
                  "tile loads must divide evenly");

    const float *a[A_PASS]; /* row a_row + r*ROWS (clamped), k a_k of the next tile */
    const float *b;         /* row b_k, columns b_col..+3 (clamped) of the next tile */
    int64_t b_pass;         /* B_ROWS rows of B */
    int64_t b_step;         /* BK rows of B */
    int a_k, b_k;
    int a_dst, b_dst;       /* this thread's offsets inside a stage */

    CARVE_DEV LeanCopy(const Params &p, int bm0, int bn0, int tid) {
        a_k = tid & 7;
        const int a_row = tid >> 3;
#pragma unroll
        for (int r = 0; r < A_PASS; r++)
            a[r] = p.A + (int64_t)imin(bm0 + a_row + r * ROWS, p.m - 1) * p.lda + a_k;
        a_dst = a_k * AP + a_row;
        b_k = tid / (BN / 4);
        const int b_col = (tid % (BN / 4)) * 4;
        b = p.B + (int64_t)b_k * p.ldb + imin(bn0 + b_col, p.n - 4);
        b_pass = (int64_t)B_ROWS * p.ldb;
        b_step = (int64_t)BK * p.ldb;
        b_dst = BK * AP + b_k * BN + b_col;
    }

    /* Copy the tile at k0 (the one after the previous call's) into stage. */
    CARVE_DEV void issue(float *stage, int k0, const Params &p) {
        float *da = stage + a_dst, *db = stage + b_dst;
        if (k0 <= p.k - BK) { /* k0 + BK overflows on the last tile when k is near INT_MAX */
#pragma unroll
            for (int h = 0; h < BK / 8; h++)
#pragma unroll
                for (int r = 0; r < A_PASS; r++)
                    cp_async4(da + 8 * h * AP + r * ROWS, a[r] + 8 * h);
#pragma unroll
            for (int s = 0; s < B_LD; s++)
                cp_async16(db + s * B_ROWS * BN, b + s * b_pass);
        } else { /* the last tile, cut by k: zeros past it */
#pragma unroll
            for (int h = 0; h < BK / 8; h++) {
                const bool ok = k0 + a_k + 8 * h < p.k;
#pragma unroll
                for (int r = 0; r < A_PASS; r++)
                    cp_async4(da + 8 * h * AP + r * ROWS, ok ? a[r] + 8 * h : p.A, ok);
            }
#pragma unroll
            for (int s = 0; s < B_LD; s++) {
                const bool ok = k0 + b_k + s * B_ROWS < p.k;
                cp_async16(db + s * B_ROWS * BN, ok ? b + s * b_pass : p.B, ok);
            }
        }
#pragma unroll
        for (int r = 0; r < A_PASS; r++)
            a[r] += BK;
        b += b_step;
    }
};

/*
 * gemm_cpt's pipeline (a ring of STAGES buffers, STAGES-1 tiles in flight,
 * one barrier per tile) and inner loop, with LeanCopy's copies. VEC layouts
 * only.
 */
template <int WM, int WN, int TN, int BK, int STAGES, int MINB>
__global__ void __launch_bounds__(WM *WN * 32, MINB) gemm_cpl(Params p) {
    constexpr int NT = WM * WN * 32;
    constexpr int BM = WM * 64, BN = WN * 4 * TN;
    using Copy = LeanCopy<BM, BN, BK, NT>;
    constexpr int AP = Copy::AP, STAGE = Copy::STAGE;
    static_assert(STAGES >= 2, "a ring needs two buffers");

    float *smem = smem_base();

    int tm, tn;
    tile_of(blockIdx.x, p.tiles_m, p.tiles_n, tm, tn);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm0 = (warp / WN) * 64, wn0 = (warp % WN) * (4 * TN);
    const int lm = lane >> 2, ln = lane & 3;
    Copy cp(p, tm * BM, tn * BN, tid);

    float acc[8][TN];
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < TN; j++)
            acc[i][j] = 0.f;

    const int tiles = carve_tiles(p.k, BK);
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < tiles)
            cp.issue(smem + s * STAGE, s * BK, p);
        cp_async_commit(); /* empty groups keep the count uniform */
    }
    int rd = 0, wr = STAGES - 1; /* stage of tile t, stage of tile t+STAGES-1 */
    for (int t = 0; t < tiles; t++) {
        cp_async_wait<STAGES - 2>(); /* this thread's copies of tile t landed */
        __syncthreads();             /* everyone's did, and everyone is done with tile t-1 */
        if (t + STAGES - 1 < tiles)
            cp.issue(smem + wr * STAGE, (t + STAGES - 1) * BK, p);
        cp_async_commit();
        const float *st = smem + rd * STAGE;
        multiply_tile<AP, BN, TN, BK>(acc, st + wm0 + lm * 4, st + BK * AP + wn0 + ln * 4);
        wr = rd; /* tile t's stage takes tile t+STAGES next */
        rd = rd + 1 == STAGES ? 0 : rd + 1;
    }
    cp_async_wait<0>(); /* only empty groups remain; leave nothing in flight */

    store_tile<WM, WN, TN, true>(p, acc);
}

/* The operands of one k step: the thread's 8 rows of A (k-major, AP floats
 * per k) and TN columns of B, from the thread's first row / column. */
template <int AP, int BN, int TN>
CARVE_DEV void load_frag(float (&a)[8], float (&b)[TN], const float *as, const float *bs, int kk) {
    float4 a0 = ld4(as + kk * AP), a1 = ld4(as + kk * AP + 32);
    a[0] = a0.x; a[1] = a0.y; a[2] = a0.z; a[3] = a0.w;
    a[4] = a1.x; a[5] = a1.y; a[6] = a1.z; a[7] = a1.w;
#pragma unroll
    for (int q = 0; q < TN / 4; q++) {
        float4 bq = ld4(bs + kk * BN + q * 16);
        b[4 * q + 0] = bq.x; b[4 * q + 1] = bq.y; b[4 * q + 2] = bq.z; b[4 * q + 3] = bq.w;
    }
}

template <int TN>
CARVE_DEV void outer_product(float (&acc)[8][TN], const float (&a)[8], const float (&b)[TN]) {
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < TN; j++)
            acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
}

/*
 * gemm_cpl with the shared-memory reads pipelined through registers, so
 * that no warp waits for shared memory at a tile boundary:
 *  - two sets of operand registers: while step kk is multiplied, the
 *    operands of step kk+1 are being read;
 *  - the barrier moves from the top of a tile to its last step. There the
 *    thread waits for tile t+1, the block meets (everyone has read all of
 *    tile t into registers), the operands of tile t+1's first step are read,
 *    and the last step of tile t is multiplied while they arrive;
 *  - the stage tile t held is free right after that barrier, so tile
 *    t+STAGES is copied into it at once. All STAGES buffers fill at the
 *    start, and STAGES-1 tiles stay in flight, as in gemm_cpt.
 * Same copies (LeanCopy), layout and FMA order as gemm_cpl. VEC layouts only.
 */
template <int WM, int WN, int TN, int BK, int STAGES, int MINB>
__global__ void __launch_bounds__(WM *WN * 32, MINB) gemm_cpf(Params p) {
    constexpr int NT = WM * WN * 32;
    constexpr int BM = WM * 64, BN = WN * 4 * TN;
    using Copy = LeanCopy<BM, BN, BK, NT>;
    constexpr int AP = Copy::AP, STAGE = Copy::STAGE;
    static_assert(STAGES >= 2, "a ring needs two buffers");
    static_assert(BK % 2 == 0, "a tile's first step uses operand set 0");

    float *smem = smem_base();

    int tm, tn;
    tile_of(blockIdx.x, p.tiles_m, p.tiles_n, tm, tn);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm0 = (warp / WN) * 64, wn0 = (warp % WN) * (4 * TN);
    const int lm = lane >> 2, ln = lane & 3;
    Copy cp(p, tm * BM, tn * BN, tid);
    const float *as0 = smem + wm0 + lm * 4;           /* the thread's operands in stage 0 */
    const float *bs0 = smem + BK * AP + wn0 + ln * 4;

    float acc[8][TN];
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < TN; j++)
            acc[i][j] = 0.f;

    /* Groups committed before tile t+1 is waited for: tiles 0 .. t+STAGES-1,
     * one per group (empty past the last tile). */
    const int tiles = carve_tiles(p.k, BK);
#pragma unroll
    for (int s = 0; s < STAGES; s++) {
        if (s < tiles)
            cp.issue(smem + s * STAGE, s * BK, p);
        cp_async_commit();
    }
    cp_async_wait<STAGES - 1>(); /* tile 0 landed */
    __syncthreads();

    float a[2][8], b[2][TN];
    load_frag<AP, BN, TN>(a[0], b[0], as0, bs0, 0);
    int rd = 0; /* stage of tile t */
    for (int t = 0; t < tiles; t++) {
        const float *as = as0 + rd * STAGE, *bs = bs0 + rd * STAGE;
#pragma unroll
        for (int kk = 0; kk < BK; kk++) {
            if (kk + 1 < BK) {
                load_frag<AP, BN, TN>(a[(kk + 1) & 1], b[(kk + 1) & 1], as, bs, kk + 1);
            } else if (t + 1 < tiles) {
                cp_async_wait<STAGES - 2>(); /* tile t+1 landed */
                __syncthreads();             /* everyone's did, and tile t is in registers */
                if (t + STAGES < tiles)
                    cp.issue(smem + rd * STAGE, (t + STAGES) * BK, p);
                cp_async_commit();
                rd = rd + 1 == STAGES ? 0 : rd + 1;
                load_frag<AP, BN, TN>(a[0], b[0], as0 + rd * STAGE, bs0 + rd * STAGE, 0);
            }
            outer_product<TN>(acc, a[kk & 1], b[kk & 1]);
        }
    }
    cp_async_wait<0>(); /* only empty groups remain; leave nothing in flight */

    store_tile<WM, WN, TN, true>(p, acc);
}

/* ---- TF32 tensor cores (mma.sync m16n8k8) ------------------------------- */

constexpr int tf32_smem_bytes(int WM, int WN, int MT, int NT8, int BK, int STAGES) {
    return STAGES * (WM * MT * 16 * (BK + 4) + BK * (WN * NT8 * 8 + 8)) * 4;
}

/*
 * WM x WN warps, each MT x NT8 mma tiles of 16 x 8. A rows are BK+4 floats
 * apart and B rows BN+8: a fragment read (8 rows/k by 4 k/columns) then
 * touches 32 different banks. VEC layouts only.
 */
template <int WM, int WN, int MT, int NT8, int BK, int STAGES, int MINB>
__global__ void __launch_bounds__(WM *WN * 32, MINB) gemm_tf32(Params p) {
    constexpr int NT = WM * WN * 32;
    constexpr int BM = WM * MT * 16, BN = WN * NT8 * 8;
    constexpr int AS = BK + 4, BS = BN + 8;
    constexpr int KQ = BK / 4;
    constexpr int A_LD = BM * KQ / NT;
    constexpr int B_LD = BK * (BN / 4) / NT;
    constexpr int STAGE = BM * AS + BK * BS;
    static_assert(BM * KQ % NT == 0 && BK * (BN / 4) % NT == 0, "tile loads must divide evenly");
    static_assert(BK % 8 == 0, "k steps of 8");

    float *smem = smem_base();

    int tm, tn;
    tile_of(blockIdx.x, p.tiles_m, p.tiles_n, tm, tn);
    const int bm0 = tm * BM, bn0 = tn * BN;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm0 = (warp / WN) * (MT * 16), wn0 = (warp % WN) * (NT8 * 8);
    const int g = lane >> 2, t4 = lane & 3;
    const int K = p.k;

    const float *a_ptr[A_LD];
    int a_dst[A_LD], a_k[A_LD];
#pragma unroll
    for (int s = 0; s < A_LD; s++) {
        int c = tid + s * NT;
        int r = c / KQ;
        a_k[s] = (c % KQ) * 4;
        a_dst[s] = r * AS + a_k[s];
        a_ptr[s] = p.A + (int64_t)imin(bm0 + r, p.m - 1) * p.lda + a_k[s];
    }
    const float *b_ptr[B_LD];
    int b_dst[B_LD], b_k[B_LD];
#pragma unroll
    for (int s = 0; s < B_LD; s++) {
        int c = tid + s * NT;
        b_k[s] = c / (BN / 4);
        int col = (c % (BN / 4)) * 4;
        b_dst[s] = BM * AS + b_k[s] * BS + col;
        b_ptr[s] = p.B + (int64_t)b_k[s] * p.ldb + imin(bn0 + col, p.n - 4);
    }
    const int64_t b_step = (int64_t)BK * p.ldb;

    auto issue = [&](int k0, int st) {
        float *base = smem + st * STAGE;
#pragma unroll
        for (int s = 0; s < A_LD; s++) {
            bool ok = k0 + a_k[s] < K;
            cp_async16(base + a_dst[s], ok ? a_ptr[s] : p.A, ok);
            a_ptr[s] += BK;
        }
#pragma unroll
        for (int s = 0; s < B_LD; s++) {
            bool ok = k0 + b_k[s] < K;
            cp_async16(base + b_dst[s], ok ? b_ptr[s] : p.B, ok);
            b_ptr[s] += b_step;
        }
    };

    float acc[MT][NT8][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[i][j][e] = 0.f;

    const int tiles = carve_tiles(K, BK); /* (K + BK - 1) / BK overflows near INT_MAX */
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < tiles)
            issue(s * BK, s);
        cp_async_commit();
    }
    for (int t = 0; t < tiles; t++) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        {
            int next = t + STAGES - 1;
            if (next < tiles)
                issue(next * BK, next % STAGES);
            cp_async_commit();
        }
        const float *as = smem + (t % STAGES) * STAGE + (wm0 + g) * AS + t4;
        const float *bs = smem + (t % STAGES) * STAGE + BM * AS + t4 * BS + wn0 + g;
#pragma unroll
        for (int ks = 0; ks < BK; ks += 8) {
            uint32_t af[MT][4], bf[NT8][2];
#pragma unroll
            for (int i = 0; i < MT; i++) {
                const float *a = as + i * 16 * AS + ks;
                af[i][0] = to_tf32(a[0]);
                af[i][1] = to_tf32(a[8 * AS]);
                af[i][2] = to_tf32(a[4]);
                af[i][3] = to_tf32(a[8 * AS + 4]);
            }
#pragma unroll
            for (int j = 0; j < NT8; j++) {
                const float *b = bs + ks * BS + j * 8;
                bf[j][0] = to_tf32(b[0]);
                bf[j][1] = to_tf32(b[4 * BS]);
            }
#pragma unroll
            for (int i = 0; i < MT; i++)
#pragma unroll
                for (int j = 0; j < NT8; j++)
                    mma_tf32(acc[i][j], af[i], bf[j]);
        }
    }
    cp_async_wait<0>();

    /* Accumulator fragment: rows g and g+8, columns 2*t4 and 2*t4+1. */
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT8; j++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                int row = bm0 + wm0 + i * 16 + g + 8 * h;
                int col = bn0 + wn0 + j * 8 + 2 * t4;
                if (row >= p.m)
                    continue;
                float *c = p.C + (int64_t)row * p.ldc + col;
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    float v = acc[i][j][2 * h + e];
                    if (col + e < p.n)
                        c[e] = p.beta == 0.f ? p.alpha * v : fmaf(p.alpha, v, p.beta * c[e]);
                }
            }
}

}  // namespace carve_sgemm

#endif
