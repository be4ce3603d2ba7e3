/*
 * test_gemm_stream_emu.cpp — carve_gemm's streaming kernel
 * (lib/kernels/gemm_tc_stream.cuh) run on host threads through
 * stream_emu.h, against an exact reference. Needs no GPU.
 *
 * Inputs are j/64 for integers j in [-64, 64] (exact in bf16): every
 * product is exact and every partial sum stays below 2^24 units of 2^-12,
 * so each fp32 output must equal the exact result (a bf16 C: the exact
 * result rounded to nearest even), whatever the order of the additions. A
 * case fails on any wrong element, on a written element of C's padding
 * (columns n .. ldc), on a NaN (C starts as NaN when beta is 0, and shared
 * memory starts as NaN, so an output never written or a fragment read from
 * shared memory never written shows), and aborts on a misaligned 16-byte
 * load of B. Every matrix is allocated to its last element exactly, so an
 * AddressSanitizer build also proves that nothing past A, B or C is read.
 *
 * Cases: both layouts of A (K-major, with 16-byte rows and without; and
 * M-major) and of B (N-major, K-major), M from 1 to 32 (one and two 16-row
 * tiles), n and k that are not multiples of 8 or 64 (the element-wise last
 * column group of an N-major B and last rows of a K-major one, the cut last
 * k step, warps with no k step at all), cluster sizes 1 to 8, alpha and
 * beta, fp32 and bf16 C. The grid is all of it: every cluster of every
 * case runs. Under ThreadSanitizer (slow with a thousand threads a
 * cluster) each shape runs one layout of the four, in turn; a data race
 * between the warps' staging, the block's reuse of shared memory and the
 * cluster's reduction shows there as a report.
 */
#include "stream_emu.h"

#include "kernels/gemm_tc_stream.cuh"

#include <cstdio>
#include <cstdlib>
#include <cstring>

using carve_tc::StreamParams;
using carve_tc::StreamSmem;

namespace {

unsigned long checks, failures;
uint64_t rng_state = 0x5eed5eedull;

uint64_t next_u64() {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
float next_val() { return (float)((int)(next_u64() % 129) - 64) / 64.f; }

/* A buffer of exactly `elems` elements of `size` bytes on 16 bytes. */
void *exact_alloc(size_t elems, size_t size) {
    void *p = nullptr;
    if (posix_memalign(&p, 16, elems > 0 ? elems * size : 1) != 0) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    return p;
}

struct Case {
    int M, N, K, cs;
    bool ak, a_rows16, bkm, c_f32;
    float alpha, beta;
};

template <int MT, bool AK, bool BKM>
void launch(const StreamParams &p, int tiles) {
    for (int i = 0; i < tiles; i++)
        stream_emu::run_cluster(carve_tc::stream_gemm_kernel<__nv_bfloat16, MT, AK, BKM>, p, (unsigned)i,
                                p.clusters, sizeof(StreamSmem<MT>));
}

void run(const Case &c) {
    /* Stored shapes: A K-major M x K (lda >= K), else K x M (lda >= M);
     * B N-major K x N (ldb >= N, a multiple of 8), else N x K (ldb >= K). */
    const int a_rows = c.ak ? c.M : c.K, a_cols = c.ak ? c.K : c.M;
    const long long lda = c.ak && c.a_rows16 ? (a_cols + 7) / 8 * 8 + 8 : a_cols + (c.ak ? 1 : 3);
    const int b_rows = c.bkm ? c.N : c.K, b_cols = c.bkm ? c.K : c.N;
    const long long ldb = (b_cols + 7) / 8 * 8 + (c.N % 2 ? 8 : 0);
    const long long ldc = c.N + 3;
    const size_t an = (size_t)(a_rows - 1) * lda + a_cols, bn = (size_t)(b_rows - 1) * ldb + b_cols;
    const size_t cn = (size_t)(c.M - 1) * ldc + c.N, cel = c.c_f32 ? 4 : 2;
    uint16_t *A = (uint16_t *)exact_alloc(an, 2), *B = (uint16_t *)exact_alloc(bn, 2);
    unsigned char *C = (unsigned char *)exact_alloc(cn, cel), *C0 = (unsigned char *)exact_alloc(cn, cel);
    std::vector<double> a((size_t)c.M * c.K), b((size_t)c.K * c.N);
    for (size_t i = 0; i < an; i++)
        A[i] = carve_tc::f_to_bf16(next_val());
    for (size_t i = 0; i < bn; i++)
        B[i] = carve_tc::f_to_bf16(next_val());
    for (int m = 0; m < c.M; m++)
        for (int k = 0; k < c.K; k++)
            a[(size_t)m * c.K + k] = carve_tc::bf16_to_f(c.ak ? A[m * lda + k] : A[k * lda + m]);
    for (int k = 0; k < c.K; k++)
        for (int n = 0; n < c.N; n++)
            b[(size_t)k * c.N + n] = carve_tc::bf16_to_f(c.bkm ? B[n * ldb + k] : B[k * ldb + n]);
    if (c.beta == 0.f) {
        memset(C0, 0xFF, cn * cel); /* NaN: must not be read */
    } else {
        for (size_t i = 0; i < cn; i++) {
            const float v = next_val();
            if (c.c_f32)
                memcpy(C0 + 4 * i, &v, 4);
            else {
                const uint16_t h = carve_tc::f_to_bf16(v);
                memcpy(C0 + 2 * i, &h, 2);
            }
        }
    }
    memcpy(C, C0, cn * cel);

    StreamParams p;
    p.A = A, p.B = B, p.lda = lda, p.ldb = ldb;
    p.a_vec = c.ak && (uintptr_t)A % 16 == 0 && lda % 8 == 0;
    p.clusters = c.cs;
    p.ep = carve_tc::EpiParams{C, ldc, c.M, c.N, c.K, c.alpha, c.beta, c.c_f32 ? 1 : 0};
    const int tiles = carve_tiles(c.N, CARVE_TC_STREAM_COLS);
    if (c.M <= 16) {
        if (c.ak)
            c.bkm ? launch<1, true, true>(p, tiles) : launch<1, true, false>(p, tiles);
        else
            c.bkm ? launch<1, false, true>(p, tiles) : launch<1, false, false>(p, tiles);
    } else {
        if (c.ak)
            c.bkm ? launch<2, true, true>(p, tiles) : launch<2, true, false>(p, tiles);
        else
            c.bkm ? launch<2, false, true>(p, tiles) : launch<2, false, false>(p, tiles);
    }

    long wrong = 0, pad = 0;
    for (int m = 0; m < c.M; m++)
        for (long long n = 0; n < ldc && (size_t)m * ldc + n < cn; n++) {
            const size_t i = (size_t)m * ldc + n;
            if (n >= c.N) {
                pad += memcmp(C + i * cel, C0 + i * cel, cel) != 0;
                continue;
            }
            double ref = 0;
            for (int k = 0; k < c.K; k++)
                ref += a[(size_t)m * c.K + k] * b[(size_t)k * c.N + n];
            float want = (float)((double)c.alpha * ref), got;
            if (c.c_f32) {
                float c0;
                memcpy(&c0, C0 + 4 * i, 4);
                if (c.beta != 0.f)
                    want = fmaf(c.beta, c0, want);
                memcpy(&got, C + 4 * i, 4);
            } else {
                uint16_t c0, h;
                memcpy(&c0, C0 + 2 * i, 2);
                if (c.beta != 0.f)
                    want = fmaf(c.beta, carve_tc::bf16_to_f(c0), want);
                want = carve_tc::bf16_to_f(carve_tc::f_to_bf16(want));
                memcpy(&h, C + 2 * i, 2);
                got = carve_tc::bf16_to_f(h);
            }
            if (!(got == want)) {
                if (wrong < 3)
                    fprintf(stderr, "  (%d, %lld): got %.9g, want %.9g\n", m, n, got, want);
                wrong++;
            }
        }
    checks += 2;
    const bool ok = wrong == 0 && pad == 0;
    failures += !ok;
    printf("%s M=%d N=%d K=%d cluster %d, A %s%s, B %s, C %s, alpha %g beta %g: %ld wrong, %ld padding written\n",
           ok ? "ok  " : "FAIL", c.M, c.N, c.K, c.cs, c.ak ? "K-major" : "M-major",
           c.ak ? (p.a_vec ? " (16-byte rows)" : " (odd rows)") : "", c.bkm ? "K-major" : "N-major",
           c.c_f32 ? "f32" : "bf16", c.alpha, c.beta, wrong, pad);
    free(A);
    free(B);
    free(C);
    free(C0);
}

}  // namespace

int main() {
    static const int shapes[][4] = {
        /* M, N, K, cluster */
        {1, 64, 64, 1},   {3, 70, 130, 1},  {8, 7, 129, 1},   {16, 130, 300, 2}, {17, 77, 333, 1},
        {32, 65, 520, 2}, {5, 72, 600, 3},  {1, 1, 1, 1},     {32, 200, 17, 1},  {13, 63, 257, 2},
        {2, 129, 2100, 8}, {24, 9, 1000, 4},
    };
#if defined(__SANITIZE_THREAD__)
    const bool every_layout = false;
#else
    const bool every_layout = true;
#endif
    int i = 0, si = 0;
    for (const auto &s : shapes) {
        si++;
        for (int layout = 0; layout < 4; layout++, i++) {
            if (!every_layout && layout != si % 4)
                continue;
            Case c;
            c.M = s[0], c.N = s[1], c.K = s[2], c.cs = s[3];
            c.ak = !(layout & 2);
            c.bkm = layout & 1;
            c.a_rows16 = i % 3 != 0;
            c.c_f32 = i % 2 == 0;
            c.alpha = i % 3 == 1 ? 1.5f : 1.f;
            c.beta = i % 4 >= 2 ? 0.5f : 0.f;
            run(c);
        }
    }
    printf("%lu checks, %lu failed\n", checks, failures);
    return failures ? 1 : 0;
}
