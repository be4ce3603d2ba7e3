/*
 * test_gemm_stream_emu.cpp — carve_gemm's streaming kernel
 * (lib/kernels/gemm_tc_stream.cuh) run on host threads through
 * stream_emu.h, against an exact reference. Needs no GPU.
 *
 * Inputs are j/64 for integers j in [-64, 64] (exact in bf16 and fp16):
 * every product is exact and every partial sum stays below 2^24 units of
 * 2^-12, so each fp32 output must equal the exact result (a 16-bit C: the
 * exact result rounded to nearest even in the operands' type), whatever
 * the order of the additions. A case fails on any wrong element, on a
 * written element of C's padding (columns n .. ldc), on a NaN (C starts as
 * NaN when beta is 0, and shared memory starts as NaN, so an output never
 * written or a fragment read from shared memory never written shows), and
 * aborts on a misaligned 16-byte load of B. Every matrix is allocated to
 * its last element exactly, so an AddressSanitizer build also proves that
 * nothing past A, B or C is read; B's padding (past each row's or
 * column's own elements, up to ldb) holds NaN, which the kernel may read
 * but must not let into C (an N-major B's columns past N reach only
 * outputs that are not stored; a K-major B's k past K must be zeroed,
 * since NaN times A's zeros is NaN); A sometimes starts 2 bytes past 16 (the
 * 16-byte staging must not take it: UndefinedBehaviorSanitizer reports a
 * misaligned vector load). The launch goes through gemm_tc.cu's own host
 * code: stream_params (which chooses the staging of A) and stream_dispatch
 * (which chooses the kernel's instance).
 *
 * Cases: both layouts of A (K-major, with 16-byte rows and without; and
 * M-major) and of B (N-major, K-major), bf16 and fp16 operands, M from 1
 * to 32 (one and two 16-row tiles), n and k that are not multiples of 8 or
 * 64 (the element-wise last column group of an N-major B and last rows of
 * a K-major one, the cut last k step, warps with no k step at all),
 * cluster sizes 1 to 8, alpha and beta, fp32 and 16-bit C; then all of it
 * again with B's rows off 16 bytes (an odd ldb, or B's base 2 bytes past
 * 16: the kernel's realigned loads, and element-wise ones at B's first and
 * last 16 bytes, none outside B). The grid is all
 * of it: every cluster of every case runs. Under ThreadSanitizer (slow with
 * a thousand threads a cluster) each shape runs the one layout it names; a
 * data race between the warps' staging, the block's reuse of shared memory
 * and the cluster's reduction shows there as a report (stream_emu.h's mma
 * orders no memory, so a missing __syncwarp shows too), and a block whose
 * shared memory is read after it exited faults in every build.
 */
#include "stream_emu.h"

#include "kernels/gemm_tc_stream.cuh"

#include <cstdio>
#include <cstdlib>
#include <cstring>

using carve_tc::StreamParams;

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
    bool ak, a_rows16, a_off, bkm, c_f32, bf16;
    bool bu, b_off; /* B's rows off 16 bytes (an odd ldb); B's base 2 bytes past 16 */
    float alpha, beta;
};

float to_f(bool bf16, uint16_t h) { return bf16 ? carve_tc::bf16_to_f(h) : carve_tc::half_to_f(h); }
uint16_t from_f(bool bf16, float f) { return bf16 ? carve_tc::f_to_bf16(f) : carve_tc::f_to_half(f); }

void run(const Case &c) {
    /* Stored shapes: A K-major M x K (lda >= K), else K x M (lda >= M);
     * B N-major K x N (ldb >= N, a multiple of 8, or odd with bu), else
     * N x K (ldb >= K, the same). */
    const int a_rows = c.ak ? c.M : c.K, a_cols = c.ak ? c.K : c.M;
    const long long lda = c.ak && c.a_rows16 ? (a_cols + 7) / 8 * 8 + 8 : a_cols + (c.ak ? 1 : 3);
    const int b_rows = c.bkm ? c.N : c.K, b_cols = c.bkm ? c.K : c.N;
    const long long ldb = c.bu ? b_cols + (b_cols % 2 ? 2 : 1) * (c.N % 3 ? 1 : 3)
                               : (b_cols + 7) / 8 * 8 + (c.N % 2 ? 8 : 0);
    const long long ldc = c.N + 3;
    const size_t off = c.a_off ? 1 : 0;  /* A's first element 2 bytes past 16 */
    const size_t boff = c.b_off ? 1 : 0; /* B's the same */
    const size_t an = (size_t)(a_rows - 1) * lda + a_cols, bn = (size_t)(b_rows - 1) * ldb + b_cols;
    const size_t cn = (size_t)(c.M - 1) * ldc + c.N, cel = c.c_f32 ? 4 : 2;
    uint16_t *A0 = (uint16_t *)exact_alloc(an + off, 2), *A = A0 + off;
    uint16_t *B0 = (uint16_t *)exact_alloc(bn + boff, 2), *B = B0 + boff;
    unsigned char *C = (unsigned char *)exact_alloc(cn, cel), *C0 = (unsigned char *)exact_alloc(cn, cel);
    std::vector<double> a((size_t)c.M * c.K), b((size_t)c.K * c.N);
    for (size_t i = 0; i < an; i++)
        A[i] = from_f(c.bf16, next_val());
    for (size_t i = 0; i < bn; i++) /* B's padding (each line past its b_cols elements) NaN: must not reach C */
        B[i] = (long long)(i % ldb) < b_cols ? from_f(c.bf16, next_val()) : (uint16_t)0xFFFF;
    for (int m = 0; m < c.M; m++)
        for (int k = 0; k < c.K; k++)
            a[(size_t)m * c.K + k] = to_f(c.bf16, c.ak ? A[m * lda + k] : A[k * lda + m]);
    for (int k = 0; k < c.K; k++)
        for (int n = 0; n < c.N; n++)
            b[(size_t)k * c.N + n] = to_f(c.bf16, c.bkm ? B[n * ldb + k] : B[k * ldb + n]);
    if (c.beta == 0.f) {
        memset(C0, 0xFF, cn * cel); /* NaN: must not be read */
    } else {
        for (size_t i = 0; i < cn; i++) {
            const float v = next_val();
            if (c.c_f32)
                memcpy(C0 + 4 * i, &v, 4);
            else {
                const uint16_t h = from_f(c.bf16, v);
                memcpy(C0 + 2 * i, &h, 2);
            }
        }
    }
    memcpy(C, C0, cn * cel);

    const StreamParams p =
        carve_tc::stream_params(A, lda, c.ak, B, ldb, c.bkm, c.cs,
                                carve_tc::EpiParams{C, ldc, c.M, c.N, c.K, c.alpha, c.beta, c.c_f32 ? 1 : 0});
    const bool bu = !carve_tc_stream_b_rows((uintptr_t)B, ldb);
    if (bu != (c.bu || c.b_off) || p.b_elems != (long long)bn) {
        printf("FAIL B's rows %s 16 bytes (want %s), extent %lld (want %zu)\n", bu ? "off" : "on",
               c.bu || c.b_off ? "off" : "on", p.b_elems, bn);
        failures++;
    }
    carve_tc::emu_b_lo = B, carve_tc::emu_b_hi = B + bn;
    const int tiles = carve_tiles(c.N, CARVE_TC_STREAM_COLS);
    const size_t smem = (size_t)carve_tc::stream_smem_bytes(c.M, c.bkm, bu);
    carve_tc::stream_dispatch(c.bf16, c.M, c.ak, c.bkm, bu, [&](auto kernel) {
        for (int i = 0; i < tiles; i++)
            stream_emu::run_cluster(kernel, p, (unsigned)i, p.clusters, smem);
    });

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
                    want = fmaf(c.beta, to_f(c.bf16, c0), want);
                want = to_f(c.bf16, from_f(c.bf16, want));
                memcpy(&h, C + 2 * i, 2);
                got = to_f(c.bf16, h);
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
    printf("%s %s M=%d N=%d K=%d cluster %d, A %s%s%s, B %s%s%s (ldb %lld), C %s, alpha %g beta %g: %ld wrong, %ld "
           "padding written\n",
           ok ? "ok  " : "FAIL", c.bf16 ? "bf16" : "fp16", c.M, c.N, c.K, c.cs, c.ak ? "K-major" : "M-major",
           c.ak ? (p.a_vec ? " (16-byte rows)" : " (rows staged element-wise)") : "", c.a_off ? " at 16 + 2 bytes" : "",
           c.bkm ? "K-major" : "N-major", bu ? " off 16 bytes" : "", c.b_off ? " at 16 + 2 bytes" : "", ldb,
           c.c_f32 ? "f32" : c.bf16 ? "bf16" : "fp16", c.alpha, c.beta, wrong, pad);
    if (p.a_vec != (c.ak && !c.a_off && lda % 8 == 0)) {
        printf("FAIL stream_params: A staged %s, want %s\n", p.a_vec ? "by 16 bytes" : "element-wise",
               p.a_vec ? "element-wise" : "by 16 bytes");
        failures++;
    }
    carve_tc::emu_b_lo = carve_tc::emu_b_hi = nullptr;
    free(A0);
    free(B0);
    free(C);
    free(C0);
}

}  // namespace

int main() {
    /* M, N, K, cluster, and the layout ThreadSanitizer runs (bit 1: A
     * M-major, bit 0: B K-major). Two shapes are there for the
     * synchronization: 3 x 70 x 600 in one block, A K-major and B N-major,
     * needs the __syncwarp between a warp's last fragment reads of a step
     * and its staging of the next; 20 x 70 x 2100 in clusters of 8 needs
     * the cluster barrier before a block exits. Four more for the whole-step
     * loads of B (no test a load where a step lies inside K and a thread's
     * columns inside N): K at 63 past a multiple of 64 (1 x 64 x 127, 5 x
     * 72 x 191), where a step one row past K must not count as whole; N off
     * 8 with K a multiple of 64 (3 x 71 x 128), where the last column
     * group is partial in every step; clusters of 8 on 64 k rows (17 x 64
     * x 64), where most warps have no step. */
    static const int shapes[][5] = {
        {1, 64, 64, 1, 1},   {3, 70, 130, 1, 2},   {8, 7, 129, 1, 3},   {16, 130, 300, 2, 0}, {17, 77, 333, 1, 1},
        {32, 65, 520, 2, 2}, {5, 72, 600, 3, 3},   {1, 1, 1, 1, 0},     {32, 200, 17, 1, 1},  {13, 63, 257, 2, 2},
        {2, 129, 2100, 8, 3}, {24, 9, 1000, 4, 0}, {9, 66, 1300, 5, 1}, {30, 40, 1600, 6, 2}, {4, 100, 1800, 7, 3},
        {3, 70, 600, 1, 0},  {20, 70, 2100, 8, 1}, {1, 64, 127, 1, 0},  {5, 72, 191, 2, 1},   {3, 71, 128, 1, 2},
        {17, 64, 64, 8, 3},
    };
    setvbuf(stdout, nullptr, _IOLBF, 0); /* the cases before a fault (which ends the process) stay on record */
#if defined(__SANITIZE_THREAD__)
    const bool every_layout = false;
#else
    const bool every_layout = true;
#endif
    int i = 0;
    for (int b_rows = 0; b_rows < 2; b_rows++) {
        for (const auto &s : shapes) {
            for (int layout = 0; layout < 4; layout++, i++) {
                if (!every_layout && layout != s[4])
                    continue;
                Case c;
                c.M = s[0], c.N = s[1], c.K = s[2], c.cs = s[3];
                c.ak = !(layout & 2);
                c.bkm = layout & 1;
                c.a_rows16 = i % 3 != 0;
                c.a_off = i % 5 == 2;
                c.bf16 = i % 7 != 3 && i % 7 != 6;
                c.c_f32 = i % 2 == 0;
                c.alpha = i % 3 == 1 ? 1.5f : 1.f;
                c.beta = i % 4 >= 2 ? 0.5f : 0.f;
                /* The second round: B's rows off 16 bytes, by an odd ldb or
                 * (one case in three) only by B's base 2 bytes past 16. */
                c.b_off = b_rows && i % 3 == 0;
                c.bu = b_rows && !c.b_off;
                run(c);
            }
        }
    }
    printf("%lu checks, %lu failed\n", checks, failures);
    return failures ? 1 : 0;
}
