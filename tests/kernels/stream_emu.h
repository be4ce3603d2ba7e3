/*
 * stream_emu.h — just enough of CUDA to run lib/kernels/gemm_tc_stream.cuh
 * (carve_gemm's streaming kernel for decode shapes) on the host, so that its
 * fragment layout, edges and synchronization are tested without a GPU.
 *
 * One thread block cluster runs at a time, every thread of it a host
 * thread: __syncwarp, __syncthreads and the cluster barrier are
 * std::barriers over the warp, the block and the cluster; each block's
 * shared memory is its own buffer filled with 0xFF bytes (NaN as bf16,
 * fp16 and fp32, so a read of anything never written poisons the output), and
 * map_shared_rank moves a pointer from the caller's block to another's.
 * mma.sync m16n8k16 (bf16 or fp16 in, fp32 accumulate) is a warp-wide exchange
 * through per-warp slots that reads each lane's fragments where the PTX
 * ISA puts them (written out again here from the ISA, not from the
 * kernel); products and sums in double, rounded once per instruction. The
 * 16-byte load of B aborts when its address is not 16-byte aligned, as it
 * would fault on the device. EpiParams and store_out are the ones of
 * gemm_tc_common.cuh and gemm_tc_mma.cuh, written for the host (fp32 C,
 * or C of the operands' type).
 */
#ifndef CARVE_STREAM_EMU_H
#define CARVE_STREAM_EMU_H

#define CARVE_GEMM_EMU 1

#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)

struct alignas(16) uint4 {
    uint32_t x, y, z, w;
};
struct alignas(8) uint2 {
    uint32_t x, y;
};
inline uint4 make_uint4(uint32_t x, uint32_t y, uint32_t z, uint32_t w) { return uint4{x, y, z, w}; }
inline uint2 make_uint2(uint32_t x, uint32_t y) { return uint2{x, y}; }

struct emu_dim3 {
    unsigned x, y, z;
};

struct __nv_bfloat16 {
    uint16_t bits;
};
struct __half {
    uint16_t bits;
};

/* prmt.b32 in its default mode: byte i of the result is byte (s >> 4i) & 7
 * of the pair {y, x} (x the low four bytes). */
inline uint32_t __byte_perm(uint32_t x, uint32_t y, uint32_t s) {
    const uint64_t v = (uint64_t)x | ((uint64_t)y << 32);
    uint32_t r = 0;
    for (int i = 0; i < 4; i++)
        r |= (uint32_t)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xFF) << (8 * i);
    return r;
}

namespace stream_emu {

struct Warp {
    std::barrier<> bar{32};
    uint32_t a[32][4], b[32][2];
};

struct Block {
    explicit Block(size_t bytes) : bar(128), mem(new unsigned char[bytes + 16]) {
        smem = mem.get();
        while ((uintptr_t)smem & 15u)
            smem++;
        memset(smem, 0xFF, bytes);
        for (Warp *&w : warps)
            w = new Warp;
    }
    ~Block() {
        for (Warp *w : warps)
            delete w;
    }
    std::barrier<> bar;
    std::unique_ptr<unsigned char[]> mem;
    unsigned char *smem;
    Warp *warps[4];
};

struct Cluster {
    explicit Cluster(int count) : bar(count * 128) {}
    std::barrier<> bar;
    std::vector<std::unique_ptr<Block>> blocks;
};

inline Cluster *cluster = nullptr;
inline thread_local emu_dim3 tid, bid;
inline thread_local unsigned rank;

[[noreturn]] inline void die(const char *what, const void *p) {
    fprintf(stderr, "stream_emu: %s (%p) in block %u thread %u\n", what, p, bid.x, tid.x);
    abort();
}

inline Block &block() { return *cluster->blocks[rank]; }
inline unsigned char *block_smem() { return block().smem; }

/* Run kernel(p) as cluster `index` of a grid of clusters of `cs` blocks
 * (blockIdx.x = index * cs + rank), each block with smem_bytes of shared
 * memory. */
template <class Kernel, class P>
void run_cluster(Kernel kernel, const P &p, unsigned index, int cs, size_t smem_bytes) {
    Cluster c(cs);
    for (int r = 0; r < cs; r++)
        c.blocks.emplace_back(new Block(smem_bytes));
    cluster = &c;
    std::vector<std::thread> pool;
    pool.reserve((size_t)cs * 128);
    for (int i = 0; i < cs * 128; i++)
        pool.emplace_back([&, i] {
            rank = (unsigned)(i / 128);
            tid = emu_dim3{(unsigned)(i % 128), 0, 0};
            bid = emu_dim3{index * (unsigned)cs + rank, 0, 0};
            kernel(p);
        });
    for (std::thread &t : pool)
        t.join();
    cluster = nullptr;
}

}  // namespace stream_emu

#define threadIdx stream_emu::tid
#define blockIdx stream_emu::bid
#define CARVE_STREAM_SMEM(type, name) type &name = *reinterpret_cast<type *>(stream_emu::block_smem())

inline void __syncwarp() { stream_emu::block().warps[stream_emu::tid.x >> 5]->bar.arrive_and_wait(); }
inline void __syncthreads() { stream_emu::block().bar.arrive_and_wait(); }

namespace cooperative_groups {
struct cluster_group {
    unsigned block_rank() const { return stream_emu::rank; }
    void sync() const { stream_emu::cluster->bar.arrive_and_wait(); }
    template <class T>
    T *map_shared_rank(T *p, unsigned r) const {
        const size_t off = (size_t)(reinterpret_cast<unsigned char *>(p) - stream_emu::block_smem());
        return reinterpret_cast<T *>(stream_emu::cluster->blocks[r]->smem + off);
    }
};
inline cluster_group this_cluster() { return cluster_group{}; }
}  // namespace cooperative_groups

namespace carve_tc {

/* As gemm_tc_common.cuh. */
struct EpiParams {
    void *C;
    long long ldc;
    int M, N, K;
    float alpha, beta;
    int c_f32;
};

inline float bf16_to_f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
inline uint16_t f_to_bf16(float f) { /* round to nearest even (finite values) */
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
inline float half_to_f(uint16_t h) {
    const int e = (h >> 10) & 31, m = h & 1023;
    const float mag = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(m | 1024), e - 25);
    return (h & 0x8000u) ? -mag : mag;
}
inline uint16_t f_to_half(float f) { /* round to nearest even */
    const uint16_t sign = std::signbit(f) ? 0x8000u : 0u;
    const float a = fabsf(f);
    if (std::isnan(a))
        return 0x7E00u;
    if (a >= 65520.f) /* rounds past the largest finite, 65504 */
        return sign | 0x7C00u;
    int e;
    frexpf(a, &e); /* a = x * 2^e, 0.5 <= x < 1 */
    const int q = e - 11 < -24 ? -24 : e - 11; /* the unit of the last place */
    const float units = nearbyintf(ldexpf(a, -q)); /* exact scaling; the default mode rounds to even */
    const uint32_t u = (uint32_t)units;
    if (q == -24) /* subnormal, or the first normal reached by rounding */
        return sign | (uint16_t)u;
    if (u == 2048) /* rounded up to the next binade */
        return sign | (uint16_t)(((q + 1 + 25) << 10));
    return sign | (uint16_t)(((q + 25) << 10) | (u & 1023));
}
template <typename T>
inline float to_f(uint16_t h);
template <>
inline float to_f<__nv_bfloat16>(uint16_t h) { return bf16_to_f(h); }
template <>
inline float to_f<__half>(uint16_t h) { return half_to_f(h); }
template <typename T>
inline uint16_t from_f(float f);
template <>
inline uint16_t from_f<__nv_bfloat16>(float f) { return f_to_bf16(f); }
template <>
inline uint16_t from_f<__half>(float f) { return f_to_half(f); }

/* As gemm_tc_mma.cuh: alpha * acc + beta * C, C not read when beta is 0;
 * a 16-bit C is of the operands' type T. */
template <typename T>
inline void store_out(const EpiParams &p, int r, int c, float acc) {
    float v = p.alpha * acc;
    if (p.c_f32) {
        float *C = static_cast<float *>(p.C) + (long long)r * p.ldc + c;
        if (p.beta != 0.f)
            v = fmaf(p.beta, *C, v);
        *C = v;
    } else {
        uint16_t *C = static_cast<uint16_t *>(p.C) + (long long)r * p.ldc + c;
        if (p.beta != 0.f)
            v = fmaf(p.beta, to_f<T>(*C), v);
        *C = from_f<T>(v);
    }
}

/* mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32, lane = 4 * group + t
 * (PTX ISA, "Matrix Fragments for mma.m16n8k16"): A (16 x 16) element i of
 * the 8 a lane holds (register i / 2, half i % 2) is at row g (i < 2 or
 * 4 <= i < 6, else g + 8), column 2t + (i & 1) (+ 8 for i >= 4); B
 * (16 x 8) element i of 4 (register i / 2) at row 2t + (i & 1) (+ 8 for
 * i >= 2), column g; C (16 x 8) c_i at row g (+ 8 for i >= 2), column
 * 2t + (i & 1). */
template <typename T>
inline void mma16816(float *d, const uint32_t *a, const uint32_t *b) {
    stream_emu::Warp &w = *stream_emu::block().warps[stream_emu::tid.x >> 5];
    const int lane = stream_emu::tid.x & 31;
    memcpy(w.a[lane], a, sizeof w.a[lane]);
    memcpy(w.b[lane], b, sizeof w.b[lane]);
    w.bar.arrive_and_wait();
    double A[16][16], B[16][8];
    for (int l = 0; l < 32; l++) {
        const int g = l >> 2, t = l & 3;
        for (int i = 0; i < 8; i++) {
            const int row = (i < 2 || (i >= 4 && i < 6)) ? g : g + 8, col = 2 * t + (i & 1) + (i >= 4 ? 8 : 0);
            A[row][col] = to_f<T>((uint16_t)(w.a[l][i / 2] >> (16 * (i & 1))));
        }
        for (int i = 0; i < 4; i++) {
            const int row = 2 * t + (i & 1) + (i >= 2 ? 8 : 0);
            B[row][g] = to_f<T>((uint16_t)(w.b[l][i / 2] >> (16 * (i & 1))));
        }
    }
    const int g = lane >> 2, t = lane & 3;
    for (int i = 0; i < 4; i++) {
        const int row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i & 1);
        double sum = d[i];
        for (int kk = 0; kk < 16; kk++)
            sum += A[row][kk] * B[kk][col];
        d[i] = (float)sum;
    }
    w.bar.arrive_and_wait(); /* nobody refills the slots before everyone has read them */
}

/* The 16-byte load of B. */
inline uint4 ld_b16(const uint16_t *p) {
    if ((uintptr_t)p & 15u)
        stream_emu::die("misaligned 16-byte load of B", p);
    uint4 v;
    memcpy(&v, p, sizeof v);
    return v;
}

}  // namespace carve_tc

#endif
