/*
 * gemm_emu.h — just enough of CUDA to run lib/kernels/gemm_kernels.cuh on
 * the host, so that the kernels' indexing, edge handling and
 * synchronization are tested on machines without a GPU.
 *
 * One block runs at a time as real host threads (one per CUDA thread):
 * __syncthreads is a barrier over them, shared memory is one buffer filled
 * with NaN before each block (reading shared memory that was never written
 * poisons the output), and float4 accesses abort when not 16-byte aligned,
 * as they would fault on the device. cp.async copies are queued per thread
 * and performed either at the wait that retires them (the latest moment the
 * hardware may finish them) or at issue (the earliest), so a missing wait or
 * a missing barrier before a buffer is refilled shows up as wrong results
 * in one of the two modes, and as a data race under ThreadSanitizer.
 * mma.sync is a warp-wide exchange through per-warp slots.
 */
#ifndef CARVE_GEMM_EMU_H
#define CARVE_GEMM_EMU_H

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
#define __launch_bounds__(...)
#define CARVE_DEV inline

struct alignas(16) float4 {
    float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

struct emu_dim3 {
    unsigned x, y, z;
};

namespace emu {

enum copy_mode { COPY_AT_WAIT, COPY_AT_ISSUE };

struct Copy {
    float *dst;
    const float *src;
    int bytes;
    bool valid;
};

struct Warp {
    std::barrier<> bar{32};
    uint32_t a[32][4], b[32][2];
    float c[32][4];
};

struct Block {
    std::barrier<> *bar;
    float *smem;
    std::vector<std::unique_ptr<Warp>> warps;
};

inline copy_mode mode = COPY_AT_WAIT;
inline Block *block = nullptr;
inline thread_local emu_dim3 tid, bid;
inline thread_local std::vector<std::vector<Copy>> groups; /* committed, oldest first */
inline thread_local std::vector<Copy> open_group;

[[noreturn]] inline void die(const char *what, const void *p) {
    fprintf(stderr, "gemm_emu: %s (%p) in block %u thread %u\n", what, p, bid.x, tid.x);
    abort();
}

inline void check16(const void *p) {
    if ((uintptr_t)p & 15u)
        die("misaligned 16-byte access", p);
}

inline void perform(const Copy &c) {
    if (c.valid)
        memcpy(c.dst, c.src, (size_t)c.bytes);
    else
        memset(c.dst, 0, (size_t)c.bytes);
}

inline void copy(float *dst, const float *src, int bytes, bool valid) {
    if (bytes == 16) {
        check16(dst);
        if (valid)
            check16(src);
    }
    Copy c{dst, src, bytes, valid};
    if (mode == COPY_AT_ISSUE)
        perform(c);
    else
        open_group.push_back(c);
}

}  // namespace emu

#define threadIdx emu::tid
#define blockIdx emu::bid

inline void __syncthreads() { emu::block->bar->arrive_and_wait(); }
inline float *smem_base() { return emu::block->smem; }

inline void cp_async16(float *dst, const float *src, bool valid) { emu::copy(dst, src, 16, valid); }
inline void cp_async4(float *dst, const float *src, bool valid) { emu::copy(dst, src, 4, valid); }
inline void cp_async16(float *dst, const float *src) { emu::copy(dst, src, 16, true); }
inline void cp_async4(float *dst, const float *src) { emu::copy(dst, src, 4, true); }
inline void cp_async_commit() {
    emu::groups.push_back(std::move(emu::open_group));
    emu::open_group.clear();
}
template <int N>
inline void cp_async_wait() {
    while (emu::groups.size() > (size_t)N) {
        for (const emu::Copy &c : emu::groups.front())
            emu::perform(c);
        emu::groups.erase(emu::groups.begin());
    }
}

inline float4 ld4(const float *p) {
    emu::check16(p);
    float4 v;
    memcpy(&v, p, sizeof v);
    return v;
}
inline void st4(float *p, float4 v) {
    emu::check16(p);
    memcpy(p, &v, sizeof v);
}
inline float4 ldg4(const float *p) { return ld4(p); }
inline float ldg1(const float *p) { return *p; }

/* cvt.rna.tf32.f32 for finite values: round the low 13 mantissa bits away,
 * ties away from zero. */
inline uint32_t to_tf32(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u)
        u = (u + 0x1000u) & 0xffffe000u;
    return u;
}

inline float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* m16n8k8 with the PTX fragment layout: lane = 4*group + t; A (16 x 8)
 * a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4); B (8 x 8) b0 (t, g),
 * b1 (t+4, g); C (16 x 8) c0 (g, 2t), c1 (g, 2t+1), c2 (g+8, 2t),
 * c3 (g+8, 2t+1). Products and sums in double, rounded once. */
inline void mma_tf32(float d[4], const uint32_t a[4], const uint32_t b[2]) {
    emu::Warp &w = *emu::block->warps[emu::tid.x >> 5];
    const int lane = emu::tid.x & 31;
    memcpy(w.a[lane], a, sizeof w.a[lane]);
    memcpy(w.b[lane], b, sizeof w.b[lane]);
    memcpy(w.c[lane], d, sizeof w.c[lane]);
    w.bar.arrive_and_wait();
    const int g = lane >> 2, t = lane & 3;
    for (int e = 0; e < 4; e++) {
        int row = g + (e >= 2 ? 8 : 0), col = 2 * t + (e & 1);
        double sum = w.c[lane][e];
        for (int kk = 0; kk < 8; kk++) {
            uint32_t av = w.a[(row & 7) * 4 + (kk & 3)][(row >= 8 ? 1 : 0) + (kk >= 4 ? 2 : 0)];
            uint32_t bv = w.b[col * 4 + (kk & 3)][kk >= 4 ? 1 : 0];
            sum += (double)from_bits(av) * (double)from_bits(bv);
        }
        d[e] = (float)sum;
    }
    w.bar.arrive_and_wait(); /* nobody refills the slots before everyone has read them */
}

namespace emu {

/* Run kernel(p) on the blocks ids[0..count) of a grid (blockIdx.x =
 * ids[i]), threads each, with smem_bytes of shared memory. The threads are
 * started once and run the blocks one after another, meeting at a barrier
 * between blocks. */
template <class Kernel, class P>
void launch_blocks(Kernel kernel, const unsigned *ids, size_t count, int threads, int smem_bytes, const P &p) {
    size_t floats = (size_t)smem_bytes / 4;
    std::unique_ptr<float[]> mem(new float[floats + 4]);
    float *base = mem.get();
    while ((uintptr_t)base & 15u)
        base++;
    std::barrier<> bar(threads);
    Block blk;
    blk.bar = &bar;
    blk.smem = base;
    for (int w = 0; w < (threads + 31) / 32; w++)
        blk.warps.emplace_back(new Warp);
    block = &blk;
    std::vector<std::thread> pool;
    pool.reserve((size_t)threads);
    for (int t = 0; t < threads; t++)
        pool.emplace_back([&, t] {
            tid = emu_dim3{(unsigned)t, 0, 0};
            for (size_t i = 0; i < count; i++) {
                bid = emu_dim3{ids ? ids[i] : (unsigned)i, 0, 0};
                if (t == 0)
                    for (size_t f = 0; f < floats; f++)
                        base[f] = NAN; /* what a block never wrote reads as NaN */
                groups.clear();
                open_group.clear();
                bar.arrive_and_wait();
                kernel(p);
                if (!open_group.empty())
                    die("cp.async copies issued but never committed", nullptr);
                for (const std::vector<Copy> &gr : groups)
                    if (!gr.empty())
                        die("kernel exited with cp.async copies never waited for", nullptr);
                bar.arrive_and_wait(); /* the block is over before shared memory is reset */
            }
        });
    for (std::thread &th : pool)
        th.join();
    block = nullptr;
}

/* Run kernel(p) on a whole grid of blocks. */
template <class Kernel, class P>
void launch(Kernel kernel, unsigned blocks, int threads, int smem_bytes, const P &p) {
    launch_blocks(kernel, nullptr, blocks, threads, smem_bytes, p);
}

}  // namespace emu

#endif
