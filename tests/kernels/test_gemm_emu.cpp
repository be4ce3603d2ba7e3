/*
 * test_gemm_emu.cpp — every SGEMM variant, run on host threads through
 * gemm_emu.h, against a sequential fp32 FMA reference. Needs no GPU.
 *
 * The fp32 variants accumulate each output's k terms in order with one FMA
 * each, so they must match the sequential reference exactly; the TF32
 * variant is held to a relative error bound instead. Each case also checks
 * that C's padding (columns n..ldc) is never written, that every output is
 * written (C starts as NaN when beta is 0), and, through AddressSanitizer
 * builds, that nothing outside A, B, C is read. cp.async variants run in
 * both copy modes of the emulator.
 *
 * Far edges: with m or n at or near INT_MAX (2^31 - 1) the grid has 2^24
 * and more blocks, too many to run on the host, so each variant runs its
 * first and last blocks only, on matrices of tens of GiB of address space
 * (mmap, never touched but where those blocks read) that end right before
 * an inaccessible page: a read or write past the last row or column
 * faults. The launch plan must count the tiles without overflow (it used
 * to compute a negative tile count), the last block's rows or columns must
 * be right, and the rows before it untouched.
 *
 * CARVE_TEST_SEED changes the random inputs; CARVE_EMU_VARIANT=i runs only
 * variant i (useful under ThreadSanitizer, which is slow with this many
 * threads).
 */
#include "gemm_emu.h"

#include "kernels/gemm_table.cuh"

#include <sys/mman.h>
#include <unistd.h>

#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

using carve_sgemm::kNumVariants;
using carve_sgemm::kVariants;

namespace {

unsigned long checks, failures;

uint64_t rng_state;
uint64_t next_u64() {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* Uniform magnitude in [1/64, 1], random sign: never zero. */
float next_val() {
    float mag = (float)((next_u64() >> 40) + 1) / (float)(1u << 24);
    mag = mag < 1.f / 64 ? 1.f / 64 : mag;
    return (next_u64() & 1) ? mag : -mag;
}

/* A float array of exactly n elements starting offset floats past a
 * 16-byte boundary, so AddressSanitizer sees any read past either end. */
struct Buf {
    float *p;
    Buf(size_t n, int offset) {
        p = static_cast<float *>(aligned_alloc(16, ((n + offset) * 4 + 15) / 16 * 16));
        p += offset;
        base = p - offset;
    }
    ~Buf() { free(base); }
    Buf(const Buf &) = delete;
    Buf &operator=(const Buf &) = delete;
    float *base;
};

struct Case {
    int m, n, k, lda_pad, ldb_pad, ldc_pad, offset;
    float alpha, beta;
};

void run_case(int v, const Case &c, emu::copy_mode mode) {
    const int lda = c.k + c.lda_pad, ldb = c.n + c.ldb_pad, ldc = c.n + c.ldc_pad;
    const size_t asz = (size_t)(c.m - 1) * lda + c.k, bsz = (size_t)(c.k - 1) * ldb + c.n;
    const size_t csz = (size_t)c.m * ldc; /* whole rows: the padding is checked too */
    Buf A(asz, c.offset), B(bsz, c.offset), C(csz, c.offset);
    for (size_t i = 0; i < asz; i++)
        A.p[i] = next_val();
    for (size_t i = 0; i < bsz; i++)
        B.p[i] = next_val();
    std::vector<float> c0(csz);
    for (size_t i = 0; i < csz; i++) {
        bool pad = (int)(i % ldc) >= c.n;
        c0[i] = pad ? -12345.f : c.beta == 0.f ? NAN : next_val();
        C.p[i] = c0[i];
    }

    carve_sgemm::Plan pl =
        carve_sgemm::make_plan(v, c.m, c.n, c.k, c.alpha, A.p, lda, B.p, ldb, c.beta, C.p, ldc);
    emu::mode = mode;
    emu::launch(pl.f, (unsigned)pl.blocks, pl.threads, pl.smem, pl.p);

    const bool tf32 = kVariants[pl.variant].tf32 != 0;
    size_t mismatches = 0, unwritten = 0, pad_written = 0;
    double err2 = 0, ref2 = 0;
    long first_bad = -1;
    std::vector<float> acc((size_t)c.n);
    std::vector<double> acc64((size_t)c.n);
    for (int i = 0; i < c.m; i++) {
        for (int j = 0; j < c.n; j++) {
            acc[j] = 0.f;
            acc64[j] = 0.0;
        }
        for (int kk = 0; kk < c.k; kk++) {
            float a = A.p[(size_t)i * lda + kk];
            for (int j = 0; j < c.n; j++) {
                float b = B.p[(size_t)kk * ldb + j];
                acc[j] = fmaf(a, b, acc[j]);
                acc64[j] += (double)a * b;
            }
        }
        for (int j = 0; j < ldc; j++) {
            size_t idx = (size_t)i * ldc + j;
            float out = C.p[idx];
            if (j >= c.n) {
                if (!(out == -12345.f))
                    pad_written++;
                continue;
            }
            float ref = c.beta == 0.f ? c.alpha * acc[j] : fmaf(c.alpha, acc[j], c.beta * c0[idx]);
            double ref64 = c.alpha * acc64[j] + (c.beta == 0.f ? 0.0 : (double)c.beta * c0[idx]);
            if (std::isnan(out))
                unwritten++;
            if (!tf32 && !(out == ref)) {
                mismatches++;
                if (first_bad < 0)
                    first_bad = (long)idx;
            }
            err2 += ((double)out - ref64) * ((double)out - ref64);
            ref2 += ref64 * ref64;
        }
    }
    double rel = std::sqrt(err2 / (ref2 > 0 ? ref2 : 1));
    bool ok = unwritten == 0 && pad_written == 0 && mismatches == 0 && (tf32 ? rel < 3e-3 : rel < 1e-5);
    checks++;
    if (!ok) {
        failures++;
        fprintf(stderr,
                "FAIL variant %d %s (ran %s) m=%d n=%d k=%d lda=%d ldb=%d ldc=%d off=%d alpha=%g beta=%g "
                "mode=%s: %zu mismatches (first at %ld), %zu unwritten, %zu padding written, rel err %.3g\n",
                v, kVariants[v].name, kVariants[pl.variant].name, c.m, c.n, c.k, lda, ldb, ldc, c.offset,
                (double)c.alpha, (double)c.beta, mode == emu::COPY_AT_WAIT ? "copy-at-wait" : "copy-at-issue",
                mismatches, first_bad, unwritten, pad_written, rel);
    }
}

/* count floats of address space ending right before an inaccessible page;
 * pages never written read as zero and cost no memory. */
struct FarBuf {
    void *map = MAP_FAILED;
    size_t len = 0;
    float *p = nullptr;
    explicit FarBuf(size_t count) {
        const size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes = count * 4;
        len = (bytes + page - 1) / page * page + page;
        map = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (map == MAP_FAILED || mprotect(static_cast<char *>(map) + len - page, page, PROT_NONE) != 0) {
            perror("gemm_emu: mmap");
            exit(1);
        }
        p = reinterpret_cast<float *>(static_cast<char *>(map) + len - page - bytes);
    }
    ~FarBuf() {
        if (map != MAP_FAILED)
            munmap(map, len);
    }
    FarBuf(const FarBuf &) = delete;
    FarBuf &operator=(const FarBuf &) = delete;
};

/* Variant v on an m x n x k product (dense leading dimensions) of which
 * only the first and the last thread blocks run. */
void run_far_edge(int v, int m, int n, int k) {
    FarBuf A((size_t)m * k), B((size_t)k * n), C((size_t)m * n);
    const int lda = k, ldb = n, ldc = n;
    carve_sgemm::Plan pl = carve_sgemm::make_plan(v, m, n, k, 1.f, A.p, lda, B.p, ldb, 0.f, C.p, ldc);
    const carve_sgemm::Variant &var = kVariants[pl.variant];
    const int64_t tiles_m = ((int64_t)m + var.bm - 1) / var.bm, tiles_n = ((int64_t)n + var.bn - 1) / var.bn;
    checks++;
    if (pl.p.tiles_m != tiles_m || pl.p.tiles_n != tiles_n || pl.blocks != (uint64_t)(tiles_m * tiles_n)) {
        failures++;
        fprintf(stderr, "FAIL variant %d m=%d n=%d: plan of %d x %d tiles, %llu blocks (want %lld x %lld)\n", v, m,
                n, pl.p.tiles_m, pl.p.tiles_n, (unsigned long long)pl.blocks, (long long)tiles_m,
                (long long)tiles_n);
        return;
    }
    /* The first and last tile rows (m big) or columns (n big) get inputs
     * and NaN in C, as do one tile of rows or columns before the last. */
    const bool m_big = m > n;
    const int64_t last0 = m_big ? (tiles_m - 1) * var.bm : (tiles_n - 1) * var.bn;
    const int64_t span = m_big ? var.bm : var.bn;
    std::vector<int64_t> lines; /* rows (m big) or columns (n big) that get data */
    for (int64_t i = 0; i < span; i++)
        lines.push_back(i);
    for (int64_t i = last0 - span; i < (m_big ? m : n); i++)
        lines.push_back(i);
    for (int64_t i : lines) {
        if (m_big) {
            for (int kk = 0; kk < k; kk++)
                A.p[i * lda + kk] = next_val();
            for (int j = 0; j < n; j++)
                C.p[i * ldc + j] = NAN;
        } else {
            for (int kk = 0; kk < k; kk++)
                B.p[(int64_t)kk * ldb + i] = next_val();
            for (int r = 0; r < m; r++)
                C.p[(int64_t)r * ldc + i] = NAN;
        }
    }
    if (m_big) {
        for (int64_t i = 0; i < (int64_t)k * n; i++)
            B.p[i] = next_val();
    } else {
        for (int64_t i = 0; i < (int64_t)m * k; i++)
            A.p[i] = next_val();
    }
    const unsigned ids[2] = {0, (unsigned)(pl.blocks - 1)};
    emu::mode = emu::COPY_AT_WAIT;
    emu::launch_blocks(pl.f, ids, 2, pl.threads, pl.smem, pl.p);

    /* Lines of the first and last tiles: the sequential FMA chain (TF32:
     * within its bound); the tile before the last: untouched (NaN). */
    const bool tf32 = var.tf32 != 0;
    size_t wrong = 0, touched = 0;
    for (int64_t i : lines) {
        const bool ran = i < span || i >= last0;
        for (int o = 0; o < (m_big ? n : m); o++) {
            const int64_t r = m_big ? i : o, c = m_big ? o : i;
            const float out = C.p[r * ldc + c];
            if (!ran) {
                touched += !std::isnan(out);
                continue;
            }
            float acc = 0.f;
            double acc64 = 0.0;
            for (int kk = 0; kk < k; kk++) {
                acc = fmaf(A.p[r * lda + kk], B.p[(int64_t)kk * ldb + c], acc);
                acc64 += (double)A.p[r * lda + kk] * B.p[(int64_t)kk * ldb + c];
            }
            wrong += tf32 ? !(std::fabs(out - acc64) <= 3e-3 * (std::fabs(acc64) + 1.0)) : !(out == acc);
        }
    }
    if (wrong || touched) {
        failures++;
        fprintf(stderr, "FAIL variant %d %s (ran %s) m=%d n=%d k=%d: %zu outputs wrong in the first and last "
                "tiles, %zu written in the tile before the last\n", v, kVariants[v].name, var.name, m, n, k, wrong,
                touched);
    }
}

}  // namespace

int main() {
    const char *seed = getenv("CARVE_TEST_SEED");
    rng_state = seed ? strtoull(seed, nullptr, 0) : 0x5eed0001ull;

    /* Aligned shapes (the float4 kernels run) with partial tiles in m, n and
     * k; unaligned ones (variant 0's guarded path runs); alpha/beta. */
    const Case cases[] = {
        {128, 128, 16, 0, 0, 0, 0, 1.f, 0.f},    /* exact tiles */
        {130, 136, 40, 0, 0, 0, 0, 1.f, 0.f},    /* partial m, n, k tiles */
        {1, 4, 4, 0, 0, 0, 0, 1.f, 0.f},         /* smallest aligned */
        {200, 260, 36, 4, 8, 4, 0, 1.f, 0.f},    /* padded leading dimensions */
        {67, 12, 100, 0, 0, 0, 0, 0.5f, -2.f},   /* beta: C is read */
        {5, 300, 8, 0, 0, 0, 0, -1.5f, 0.f},     /* alpha */
        {17, 17, 17, 0, 0, 0, 0, 1.f, 0.f},      /* unaligned everything */
        {1, 1, 1, 0, 0, 0, 0, 1.f, 0.f},
        {33, 5, 70, 3, 1, 2, 0, 1.f, 0.5f},      /* lda > k, odd everything */
        {64, 64, 64, 0, 0, 0, 1, 1.f, 0.f},      /* aligned shape, misaligned pointers */
        {3, 129, 20, 0, 0, 0, 0, 1.f, 0.f},      /* n just past a tile */
        {129, 1, 12, 0, 3, 0, 0, 1.f, 0.f},      /* n = 1 */
        {150, 260, 264, 4, 4, 0, 0, 1.f, 0.5f},  /* many k tiles, a cut one last; partial m, n */
    };
    const char *only = getenv("CARVE_EMU_VARIANT"); /* run one variant, e.g. under TSan */
    for (int v = 0; v < kNumVariants; v++) {
        if (only && atoi(only) != v)
            continue;
        const bool async = strstr(kVariants[v].name, "_cp") != nullptr; /* _cp_, _cpl_, _cpf_ */
        for (const Case &c : cases) {
            run_case(v, c, emu::COPY_AT_WAIT);
            if (async) /* the mode matters only where cp.async is used */
                run_case(v, c, emu::COPY_AT_ISSUE);
        }
        /* Far edges: m or n of 2^31 - 1 (the scalar path) and 2^31 - 4 (the
         * float4 paths, which need n and k multiples of 4). */
        run_far_edge(v, INT_MAX, 1, 3);
        run_far_edge(v, 2, INT_MAX, 1);
        run_far_edge(v, INT_MAX - 3, 4, 8);
        run_far_edge(v, 4, INT_MAX - 3, 4);
        printf("variant %d %-24s done\n", v, kVariants[v].name);
        fflush(stdout);
    }
    printf("%lu checks, %lu failed\n", checks, failures);
    return failures ? 1 : 0;
}
