/*
 * stream_emu.h — just enough of CUDA to run lib/kernels/gemm_tc_stream.cuh
 * (carve_gemm's streaming kernel for decode shapes) on the host, so that its
 * fragment layout, edges and synchronization are tested without a GPU.
 *
 * One thread block cluster runs at a time, every thread of it a host
 * thread: __syncwarp, __syncthreads and the cluster barrier are
 * std::barriers over the warp, the block and the cluster (each orders
 * memory, as its CUDA namesake does); each block's shared memory is its
 * own mapping filled with 0xFF bytes (NaN as bf16, fp16 and fp32, so a
 * read of anything never written poisons the output), map_shared_rank
 * moves a pointer from the caller's block to another's, and when the last
 * thread of a block returns its shared memory becomes unreadable
 * (PROT_NONE), so a read of it through distributed shared memory after
 * its block has exited faults, as it may on the device. mma.sync
 * m16n8k16 (bf16 or fp16 in, fp32 accumulate) is a warp-wide exchange
 * through per-warp slots that reads each lane's fragments where the PTX
 * ISA puts them (written out again here from the ISA, not from the
 * kernel); products and sums in double, rounded once per instruction.
 * mma.sync orders no memory, so neither does the exchange: its slots and
 * counters are relaxed atomics, its waits are futex calls, and the only
 * ordering it has comes from fences, which ThreadSanitizer does not
 * model. A kernel that relies on an mma to separate two warps' shared
 * memory accesses therefore shows there as a data race. The 16-byte load
 * of B aborts when its address is not 16-byte aligned, as it would fault
 * on the device. EpiParams and store_out are the ones of
 * gemm_tc_common.cuh and gemm_tc_mma.cuh, written for the host (fp32 C,
 * or C of the operands' type).
 */
#ifndef CARVE_STREAM_EMU_H
#define CARVE_STREAM_EMU_H

#define CARVE_GEMM_EMU 1

#include <barrier>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

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

/* A warp: the barrier of __syncwarp, and the mma exchange's slots for the
 * lanes' fragments and two counters that only grow (lanes that have
 * written their fragments for an instruction, lanes that have read
 * everyone's), all accessed with relaxed atomics. */
struct Warp {
    std::barrier<> bar{32};
    uint32_t arrived = 0, left = 0;
    uint32_t a[32][4], b[32][2];
};

struct Block {
    explicit Block(size_t bytes) : bar(128), threads(128) {
        const long page = sysconf(_SC_PAGESIZE);
        map_bytes = (bytes + (size_t)page - 1) / (size_t)page * (size_t)page;
        void *m = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            fprintf(stderr, "stream_emu: no memory for a block's shared memory\n");
            abort();
        }
        smem = static_cast<unsigned char *>(m);
        memset(smem, 0xFF, bytes);
        for (Warp *&w : warps)
            w = new Warp;
    }
    ~Block() {
        for (Warp *w : warps)
            delete w;
        munmap(smem, map_bytes);
    }
    std::barrier<> bar;
    std::atomic<int> threads; /* threads of the block still running */
    unsigned char *smem;
    size_t map_bytes;
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
inline thread_local uint32_t mma_calls; /* mma instructions this thread has issued */

/* The shared memory of blocks that have exited, for the fault handler:
 * [lo, hi) and the block's rank; written before the mapping is protected. */
struct Exited {
    std::atomic<uintptr_t> lo, hi;
    std::atomic<unsigned> rank;
};
inline Exited exited[8];

[[noreturn]] inline void die(const char *what, const void *p) {
    fprintf(stderr, "stream_emu: %s (%p) in block %u thread %u\n", what, p, bid.x, tid.x);
    abort();
}

inline void on_fault(int, siginfo_t *si, void *) {
    const uintptr_t a = (uintptr_t)si->si_addr;
    for (const Exited &e : exited)
        if (a >= e.lo.load(std::memory_order_relaxed) && a < e.hi.load(std::memory_order_relaxed)) {
            static const char msg[] = "stream_emu: read of a block's shared memory after the block exited "
                                      "(distributed shared memory needs a cluster barrier before exit)\n";
            (void)!write(2, msg, sizeof msg - 1);
            _exit(3);
        }
    signal(SIGSEGV, SIG_DFL);
    raise(SIGSEGV);
}

inline Block &block() { return *cluster->blocks[rank]; }
inline unsigned char *block_smem() { return block().smem; }

/* Run kernel(p) as cluster `index` of a grid of clusters of `cs` blocks
 * (blockIdx.x = index * cs + rank), each block with smem_bytes of shared
 * memory. */
template <class Kernel, class P>
void run_cluster(Kernel kernel, const P &p, unsigned index, int cs, size_t smem_bytes) {
    static const bool handler = [] {
        struct sigaction sa = {};
        sa.sa_sigaction = on_fault;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        return sigaction(SIGSEGV, &sa, nullptr) == 0;
    }();
    (void)handler;
    Cluster c(cs);
    for (int r = 0; r < cs; r++)
        c.blocks.emplace_back(new Block(smem_bytes));
    for (Exited &e : exited)
        e.lo.store(0, std::memory_order_relaxed), e.hi.store(0, std::memory_order_relaxed);
    cluster = &c;
    std::vector<std::thread> pool;
    pool.reserve((size_t)cs * 128);
    for (int i = 0; i < cs * 128; i++)
        pool.emplace_back([&, i] {
            rank = (unsigned)(i / 128);
            tid = emu_dim3{(unsigned)(i % 128), 0, 0};
            bid = emu_dim3{index * (unsigned)cs + rank, 0, 0};
            mma_calls = 0;
            kernel(p);
            Block &b = block();
            if (b.threads.fetch_sub(1) == 1) { /* the block's last thread: its shared memory goes away */
                Exited &e = exited[rank];
                e.rank.store(rank, std::memory_order_relaxed);
                e.lo.store((uintptr_t)b.smem, std::memory_order_relaxed);
                e.hi.store((uintptr_t)b.smem + b.map_bytes, std::memory_order_relaxed);
                if (mprotect(b.smem, b.map_bytes, PROT_NONE) != 0)
                    die("mprotect failed", b.smem);
            }
        });
    for (std::thread &t : pool)
        t.join();
    cluster = nullptr;
}

/* A fence: ordering on the host, and no happens-before edge for
 * ThreadSanitizer, which does not model fences (GCC says so with -Wtsan;
 * here that is the point). */
#if defined(__SANITIZE_THREAD__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtsan"
#endif
inline void fence(std::memory_order o) { std::atomic_thread_fence(o); }
#if defined(__SANITIZE_THREAD__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/* Wait until the counter at p reaches `target` (relaxed loads, futex
 * sleeps: nothing ThreadSanitizer takes for synchronization). */
inline void wait_for(uint32_t *p, uint32_t target) {
    for (;;) {
        const uint32_t v = __atomic_load_n(p, __ATOMIC_RELAXED);
        if ((int32_t)(v - target) >= 0)
            return;
        syscall(SYS_futex, p, FUTEX_WAIT_PRIVATE, v, nullptr, nullptr, 0);
    }
}

/* Count this lane in at p; the lane that completes `target` wakes the rest. */
inline void count_in(uint32_t *p, uint32_t target) {
    if (__atomic_add_fetch(p, 1u, __ATOMIC_RELAXED) == target)
        syscall(SYS_futex, p, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
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
    const float mag = e == 31 ? (m ? NAN : INFINITY)
                      : e == 0  ? ldexpf((float)m, -24)
                                : ldexpf((float)(m | 1024), e - 25);
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

/* As gemm_tc_common.cuh: one block runs its kernel alone here. */
inline void grid_dep_wait() {}
inline void grid_dep_launch() {}

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

/* mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32, lane =
 * 4 * group + t (PTX ISA, "Matrix Fragments for mma.m16n8k16"): A (16 x
 * 16) element i of the 8 a lane holds (register i / 2, half i % 2) is at
 * row g (i < 2 or 4 <= i < 6, else g + 8), column 2t + (i & 1) (+ 8 for
 * i >= 4); B (16 x 8) element i of 4 (register i / 2) at row 2t + (i & 1)
 * (+ 8 for i >= 2), column g; C (16 x 8) c_i at row g (+ 8 for i >= 2),
 * column 2t + (i & 1).
 *
 * The exchange of call c (every lane of a warp makes the same calls, in
 * the same order): wait until all 32 lanes have read call c - 1's slots,
 * write this lane's, count in as arrived, wait for all 32, read every
 * lane's, count in as left. Fences keep it correct on the host; all
 * accesses are relaxed atomics, so no happens-before edge between lanes
 * comes from it. */
template <typename T>
inline void mma16816(float *d, const uint32_t *a, const uint32_t *b) {
    stream_emu::Warp &w = *stream_emu::block().warps[stream_emu::tid.x >> 5];
    const int lane = stream_emu::tid.x & 31;
    const uint32_t c = stream_emu::mma_calls++;
    stream_emu::wait_for(&w.left, 32u * c);
    stream_emu::fence(std::memory_order_acquire);
    for (int i = 0; i < 4; i++)
        __atomic_store_n(&w.a[lane][i], a[i], __ATOMIC_RELAXED);
    for (int i = 0; i < 2; i++)
        __atomic_store_n(&w.b[lane][i], b[i], __ATOMIC_RELAXED);
    stream_emu::fence(std::memory_order_release);
    stream_emu::count_in(&w.arrived, 32u * (c + 1));
    stream_emu::wait_for(&w.arrived, 32u * (c + 1));
    stream_emu::fence(std::memory_order_acquire);
    uint32_t ra[32][4], rb[32][2];
    for (int l = 0; l < 32; l++) {
        for (int i = 0; i < 4; i++)
            ra[l][i] = __atomic_load_n(&w.a[l][i], __ATOMIC_RELAXED);
        for (int i = 0; i < 2; i++)
            rb[l][i] = __atomic_load_n(&w.b[l][i], __ATOMIC_RELAXED);
    }
    stream_emu::fence(std::memory_order_release); /* the reads are done before the slots are refilled */
    stream_emu::count_in(&w.left, 32u * (c + 1));
    double A[16][16], B[16][8];
    for (int l = 0; l < 32; l++) {
        const int g = l >> 2, t = l & 3;
        for (int i = 0; i < 8; i++) {
            const int row = (i < 2 || (i >= 4 && i < 6)) ? g : g + 8, col = 2 * t + (i & 1) + (i >= 4 ? 8 : 0);
            A[row][col] = to_f<T>((uint16_t)(ra[l][i / 2] >> (16 * (i & 1))));
        }
        for (int i = 0; i < 4; i++) {
            const int row = 2 * t + (i & 1) + (i >= 2 ? 8 : 0);
            B[row][g] = to_f<T>((uint16_t)(rb[l][i / 2] >> (16 * (i & 1))));
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
}

/* B's extent as the test allocated it: every 16-byte load must lie in it
 * (what an AddressSanitizer build would also see, checked in every build). */
inline const uint16_t *emu_b_lo, *emu_b_hi;

/* The 16-byte loads of B (the kernel's two cache policies alike). */
inline uint4 ld_b16(const uint16_t *p) {
    if ((uintptr_t)p & 15u)
        stream_emu::die("misaligned 16-byte load of B", p);
    if (emu_b_lo && (p < emu_b_lo || emu_b_hi - p < 8))
        stream_emu::die("16-byte load outside B", p);
    uint4 v;
    memcpy(&v, p, sizeof v);
    return v;
}
inline uint4 ld_b16_l1(const uint16_t *p) { return ld_b16(p); }
inline uint4 ld_b16_pf(const uint16_t *p) { return ld_b16(p); }

/* cp.async of 16 bytes of B to shared memory: checked as the 16-byte
 * load is when issued, and landed (read and written) only at the issuing
 * lane's wait, as late as the device may land it: so a fragment read
 * before the wait, or by another lane before the warp's barrier that
 * follows the wait, sees shared memory as it was (NaN at first), and a
 * wait that moved past the barrier shows as wrong results or, under
 * ThreadSanitizer, as races. */
inline thread_local std::vector<std::pair<uint4 *, const uint16_t *>> emu_copies;
inline void stream_copy16(uint4 *dst, const uint16_t *src) {
    (void)ld_b16(src);
    emu_copies.emplace_back(dst, src);
}
inline void stream_copies_wait() {
    for (const auto &c : emu_copies)
        *c.first = ld_b16(c.second);
    emu_copies.clear();
}

}  // namespace carve_tc

#endif
