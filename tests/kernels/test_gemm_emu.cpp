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
 * CARVE_TEST_SEED changes the random inputs; CARVE_EMU_VARIANT=i runs only
 * variant i (useful under ThreadSanitizer, which is slow with this many
 * threads).
 */
#include "gemm_emu.h"

#include "kernels/gemm_table.cuh"

#include <cinttypes>
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
    emu::launch(pl.f, pl.blocks, pl.threads, pl.smem, pl.p);

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
        printf("variant %d %-24s done\n", v, kVariants[v].name);
        fflush(stdout);
    }
    printf("%lu checks, %lu failed\n", checks, failures);
    return failures ? 1 : 0;
}
