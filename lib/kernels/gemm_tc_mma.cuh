/*
 * gemm_tc_mma.cuh — the sm_80+ tensor-core GEMM path: mma.sync m16n8k16
 * (bf16/fp16 in, fp32 accumulate) fed by ldmatrix from shared memory that
 * cp.async fills, several stages deep.
 *
 * Block tile 128 x 128 x 32, 4 warps (2 x 2), each warp 64 x 64: per k16 step
 * a warp loads 4 A fragments and 8 B fragments with ldmatrix.x4 and issues 32
 * mma.sync. Shared tiles keep the global layout (K-major or MN-major, chosen
 * per operand by template) with 16-byte chunks XOR-swizzled so that the 8 row
 * addresses of every ldmatrix phase hit distinct banks; MN-major tiles are
 * read with ldmatrix.trans. VEC kernels copy 16-byte chunks with cp.async
 * (partial chunks at the matrix edge zero-filled through the src-size
 * operand); the others (rows not 16-byte aligned) copy element by element
 * with bounds checks. The epilogue masks every store to the M x N box.
 */
#ifndef CARVE_GEMM_TC_MMA_CUH
#define CARVE_GEMM_TC_MMA_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "gemm_tc_common.cuh"

namespace carve_tc {

constexpr int kMmaBM = 128, kMmaBN = 128, kMmaBK = 32, kMmaStages = 4, kMmaThreads = 128;
constexpr int kMmaStageElems = kMmaBM * kMmaBK + kMmaBN * kMmaBK;
constexpr int kMmaSmem = kMmaStages * kMmaStageElems * 2; /* 64 KiB */

/* Physical 16-byte chunk of logical chunk c in row r of a tile whose rows
 * hold CPR chunks (4: 64-byte rows; 16: 256-byte rows). */
template <int CPR>
__device__ __forceinline__ int swz(int r, int c) {
    if (CPR == 4)
        return c ^ ((r >> 1) & 3);
    return c ^ (r & 7);
}

__device__ __forceinline__ uint32_t smem_u32(const void *p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

template <bool TRANS>
__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3) {
    if (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                     : "r"(addr));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                     : "r"(addr));
}

template <typename T>
__device__ __forceinline__ void mma16816(float *d, const uint32_t *a, const uint32_t *b);

template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float *d, const uint32_t *a, const uint32_t *b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <>
__device__ __forceinline__ void mma16816<__half>(float *d, const uint32_t *a, const uint32_t *b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <typename T>
__device__ __forceinline__ float to_f(T x);
template <>
__device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }
template <>
__device__ __forceinline__ float to_f<__half>(__half x) { return __half2float(x); }
template <typename T>
__device__ __forceinline__ T from_f(float x);
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }

/* One output element: alpha * acc + beta * C (C not read when beta == 0),
 * bounds already checked by the caller. */
template <typename T>
__device__ __forceinline__ void store_out(const EpiParams &p, int r, int c, float acc) {
    float v = p.alpha * acc;
    if (p.c_f32) {
        float *C = static_cast<float *>(p.C) + (long long)r * p.ldc + c;
        if (p.beta != 0.f)
            v = fmaf(p.beta, *C, v);
        *C = v;
    } else {
        T *C = static_cast<T *>(p.C) + (long long)r * p.ldc + c;
        if (p.beta != 0.f)
            v = fmaf(p.beta, to_f<T>(*C), v);
        *C = from_f<T>(v);
    }
}

/* Copy a ROWS x (CPR*8) tile whose storage rows start at global row r0 and
 * column c0 (rows beyond nrows and columns beyond ncols read as zero) into
 * the swizzled shared tile at s. */
template <typename T, int ROWS, int CPR, bool VEC>
__device__ __forceinline__ void load_tile(T *s, const T *g, long long ld, int r0, int c0, int nrows, int ncols,
                                          int tid) {
    constexpr int kChunks = ROWS * CPR;
    static_assert(kChunks % kMmaThreads == 0, "tile chunks must divide evenly");
#pragma unroll
    for (int i = 0; i < kChunks / kMmaThreads; i++) {
        int id = tid + i * kMmaThreads;
        int r = id / CPR, c = id % CPR;
        int gr = r0 + r, gc = c0 + c * 8;
        T *dst = s + r * (CPR * 8) + swz<CPR>(r, c) * 8;
        int valid = 0;
        if (gr < nrows && gc < ncols)
            valid = ncols - gc < 8 ? ncols - gc : 8;
        if (VEC) {
            const T *src = valid > 0 ? g + (long long)gr * ld + gc : g;
            cp_async16(smem_u32(dst), src, valid * 2);
        } else {
            union {
                uint4 v;
                T e[8];
            } u;
            u.v = make_uint4(0, 0, 0, 0);
            const T *src = g + (long long)gr * ld + gc;
            for (int e = 0; e < valid; e++)
                u.e[e] = src[e];
            *reinterpret_cast<uint4 *>(dst) = u.v;
        }
    }
}

/* AK: A is K-major (shared [BM][BK]), else M-major (shared [BK][BM]).
 * BK_: B is K-major (shared [BN][BK]), else N-major (shared [BK][BN]). */
template <typename T, bool AK, bool BKM, bool VEC>
__global__ void __launch_bounds__(kMmaThreads) mma_gemm_kernel(const T *__restrict__ A, long long lda,
                                                               const T *__restrict__ B, long long ldb, EpiParams p) {
    extern __shared__ __align__(128) unsigned char mma_smem[];
    T *smem = reinterpret_cast<T *>(mma_smem);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp >> 1, wn = warp & 1;

    /* Tile order: groups of 8 tile-rows walked column by column, so blocks
     * resident together share rows of A and columns of B in L2. */
    const int tiles_m = carve_tiles(p.M, kMmaBM), tiles_n = carve_tiles(p.N, kMmaBN);
    const int bid = blockIdx.x, per_group = 8 * tiles_n;
    const int first_m = (bid / per_group) * 8;
    const int gsize = tiles_m - first_m < 8 ? tiles_m - first_m : 8;
    const int tm = first_m + (bid % per_group) % gsize, tn = (bid % per_group) / gsize;
    const int m0 = tm * kMmaBM, n0 = tn * kMmaBN;

    const int ktiles = carve_tiles(p.K, kMmaBK); /* (K + BK - 1) / BK overflows near INT_MAX */
    /* A: K-major rows = m, cols = k; M-major rows = k, cols = m (same for B). */
    auto load_stage = [&](int stage, int kt) {
        T *As = smem + stage * kMmaStageElems;
        T *Bs = As + kMmaBM * kMmaBK;
        int k0 = kt * kMmaBK;
        if (AK)
            load_tile<T, kMmaBM, kMmaBK / 8, VEC>(As, A, lda, m0, k0, p.M, p.K, tid);
        else
            load_tile<T, kMmaBK, kMmaBM / 8, VEC>(As, A, lda, k0, m0, p.K, p.M, tid);
        if (BKM)
            load_tile<T, kMmaBN, kMmaBK / 8, VEC>(Bs, B, ldb, n0, k0, p.N, p.K, tid);
        else
            load_tile<T, kMmaBK, kMmaBN / 8, VEC>(Bs, B, ldb, k0, n0, p.K, p.N, tid);
    };

    float acc[4][8][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[i][j][e] = 0.f;

#pragma unroll
    for (int s = 0; s < kMmaStages - 1; s++) {
        if (s < ktiles)
            load_stage(s, s);
        cp_async_commit();
    }

    const int q = lane >> 3, r8 = lane & 7;
    for (int kt = 0; kt < ktiles; kt++) {
        cp_async_wait<kMmaStages - 2>();
        __syncthreads();
        {
            int nk = kt + kMmaStages - 1;
            if (nk < ktiles)
                load_stage(nk % kMmaStages, nk);
            cp_async_commit();
        }
        const T *As = smem + (kt % kMmaStages) * kMmaStageElems;
        const T *Bs = As + kMmaBM * kMmaBK;
#pragma unroll
        for (int kk = 0; kk < kMmaBK; kk += 16) {
            uint32_t af[4][4], bf[8][2];
#pragma unroll
            for (int mi = 0; mi < 4; mi++) {
                const T *ptr;
                if (AK) {
                    int row = wm * 64 + mi * 16 + (q & 1) * 8 + r8;
                    int ch = (kk >> 3) + (q >> 1);
                    ptr = As + row * kMmaBK + swz<kMmaBK / 8>(row, ch) * 8;
                } else {
                    int row = kk + (q >> 1) * 8 + r8;
                    int ch = (wm * 64 + mi * 16 + (q & 1) * 8) >> 3;
                    ptr = As + row * kMmaBM + swz<kMmaBM / 8>(row, ch) * 8;
                }
                ldsm_x4<!AK>(smem_u32(ptr), af[mi][0], af[mi][1], af[mi][2], af[mi][3]);
            }
#pragma unroll
            for (int nj = 0; nj < 4; nj++) {
                const T *ptr;
                if (BKM) {
                    int row = wn * 64 + nj * 16 + (q >> 1) * 8 + r8;
                    int ch = (kk >> 3) + (q & 1);
                    ptr = Bs + row * kMmaBK + swz<kMmaBK / 8>(row, ch) * 8;
                } else {
                    int row = kk + (q & 1) * 8 + r8;
                    int ch = (wn * 64 + nj * 16 + (q >> 1) * 8) >> 3;
                    ptr = Bs + row * kMmaBN + swz<kMmaBN / 8>(row, ch) * 8;
                }
                ldsm_x4<!BKM>(smem_u32(ptr), bf[2 * nj][0], bf[2 * nj][1], bf[2 * nj + 1][0], bf[2 * nj + 1][1]);
            }
#pragma unroll
            for (int mi = 0; mi < 4; mi++)
#pragma unroll
                for (int ni = 0; ni < 8; ni++)
                    mma16816<T>(acc[mi][ni], af[mi], bf[ni]);
        }
    }
    cp_async_wait<0>();

    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mi = 0; mi < 4; mi++)
#pragma unroll
        for (int ni = 0; ni < 8; ni++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int r = m0 + wm * 64 + mi * 16 + g + (e >> 1) * 8;
                int c = n0 + wn * 64 + ni * 8 + 2 * t + (e & 1);
                if (r < p.M && c < p.N)
                    store_out<T>(p, r, c, acc[mi][ni][e]);
            }
}

}  // namespace carve_tc

#endif
