/*
 * bench_kernels.cu — the kernels against their peers, in one run on one
 * device: SGEMM (every carve variant, cuBLAS SGEMM, cuBLAS TF32), sum
 * reduction (carve, CUB with temp storage allocated once, CUB with
 * cudaMalloc/cudaFree per call, CUB with cudaMallocAsync per call, and the
 * measured streaming-read ceiling), and an inference-like step loop whose
 * intermediates are allocated and freed every step by cudaMalloc,
 * cudaMallocAsync or carve.
 *
 * Method: every figure is a median over many repetitions after warm-up,
 * timed with CUDA events (host wall clock for the step loop, which includes
 * the host-side allocator work). Peers are interleaved repetition by
 * repetition so that clock and temperature drift hits all of them alike.
 * GEMM inputs rotate through enough copies to exceed twice the L2 when one
 * set would fit in it. FLOP count 2*m*n*k; reduction bytes 4*n read.
 *
 * Usage: bench_kernels [--quick] [--json PATH]
 *   --quick   fewer sizes and repetitions (a smoke run)
 *   --json    machine-readable copy of every figure; default
 *             $OUT/bench_kernels.json when $OUT is set
 */
#include <cublas_v2.h>
#include <cub/device/device_reduce.cuh>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "carve.h"
#include "carve_kernels.h"
#include "kernels/gemm_variants.h"

#define CK(call)                                                                                          \
    do {                                                                                                  \
        cudaError_t e_ = (call);                                                                          \
        if (e_ != cudaSuccess) {                                                                          \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));       \
            exit(1);                                                                                      \
        }                                                                                                 \
    } while (0)
#define CKB(call)                                                                                         \
    do {                                                                                                  \
        cublasStatus_t s_ = (call);                                                                       \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                \
            fprintf(stderr, "%s:%d: %s: cublas status %d\n", __FILE__, __LINE__, #call, (int)s_);         \
            exit(1);                                                                                      \
        }                                                                                                 \
    } while (0)
#define CKC(call)                                                                                         \
    do {                                                                                                  \
        carve_status s_ = (call);                                                                         \
        if (s_ != CARVE_OK) {                                                                             \
            fprintf(stderr, "%s:%d: %s: %s: %s\n", __FILE__, __LINE__, #call, carve_status_str(s_),      \
                    carve_last_error(nullptr));                                                           \
            exit(1);                                                                                      \
        }                                                                                                 \
    } while (0)

namespace {

/* ---- results ------------------------------------------------------------- */

struct Row {
    std::string section, name, unit;
    double size;   /* m=n=k, n, or hidden size */
    double median; /* seconds */
    double p10, p90;
    double value;  /* TFLOP/s, GB/s, or ms */
    double ratio;  /* against the section's reference; NAN if none */
    std::string ratio_to;
    int reps;
};
std::vector<Row> g_rows;
int g_sms = 132;

double median_of(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n == 0 ? NAN : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
double quantile(std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    if (v.empty())
        return NAN;
    size_t i = (size_t)std::lround(q * (double)(v.size() - 1));
    return v[i];
}

/* ---- device helpers -------------------------------------------------------- */

__global__ void fill_kernel(float *x, size_t n, uint64_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t z = seed + i * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        float mag = (float)((z >> 40) + 1) * (1.f / 16777216.f);
        x[i] = (z & 1) ? -mag : mag;
    }
}

void fill(float *x, size_t n, uint64_t seed) {
    fill_kernel<<<1024, 256>>>(x, n, seed);
    CK(cudaGetLastError());
}

/* The streaming-read ceiling: every element read once with 16-byte loads,
 * summed so the loads cannot be dropped, one partial per block. */
__global__ void read_kernel(const float4 *__restrict__ x, size_t n4, float *__restrict__ partial) {
    float s = 0.f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
        float4 v = __ldcs(x + i);
        s += (v.x + v.y) + (v.z + v.w);
    }
    for (int o = 16; o > 0; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    __shared__ float ws[32];
    if ((threadIdx.x & 31) == 0)
        ws[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.f;
        for (unsigned w = 0; w < blockDim.x / 32; w++)
            t += ws[w];
        partial[blockIdx.x] = t;
    }
}

struct Events {
    std::vector<cudaEvent_t> ev;
    explicit Events(size_t n) : ev(n) {
        for (auto &e : ev)
            CK(cudaEventCreate(&e));
    }
    ~Events() {
        for (auto &e : ev)
            cudaEventDestroy(e);
    }
};

double elapsed_s(cudaEvent_t a, cudaEvent_t b) {
    float ms = 0.f;
    CK(cudaEventElapsedTime(&ms, a, b));
    return ms * 1e-3;
}

/* ---- SGEMM ------------------------------------------------------------------ */

struct GemmImpl {
    std::string name;
    int variant;  /* carve variant, CARVE__GEMM_AUTO, or -10 cuBLAS, -11 cuBLAS TF32 */
};

void gemm_call(const GemmImpl &im, cublasHandle_t h, int s, const float *A, const float *B, float *C) {
    const float one = 1.f, zero = 0.f;
    if (im.variant <= -10) {
        CKB(cublasSetMathMode(h, im.variant == -11 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
        /* Row-major C = A B is column-major C^T = B^T A^T. */
        CKB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, s, s, s, &one, B, s, A, s, &zero, C, s));
    } else if (im.variant == CARVE__GEMM_AUTO) {
        CKC(carve_gemm_f32(nullptr, s, s, s, 1.f, A, s, B, s, 0.f, C, s));
    } else {
        CKC(carve__gemm_f32_variant(im.variant, nullptr, s, s, s, 1.f, A, s, B, s, 0.f, C, s));
    }
}

void bench_gemm(const std::vector<int> &sizes, bool quick, size_t l2_bytes) {
    cublasHandle_t h;
    CKB(cublasCreate(&h));
    std::vector<GemmImpl> impls;
    for (int v = 0; v < carve__gemm_f32_variant_count(); v++)
        impls.push_back({std::string("carve ") + carve__gemm_f32_variant_name(v), v});
    impls.push_back({"carve_gemm_f32 (default)", CARVE__GEMM_AUTO});
    impls.push_back({"cuBLAS SGEMM", -10});
    impls.push_back({"cuBLAS TF32", -11});

    for (int s : sizes) {
        size_t elems = (size_t)s * s, set_bytes = 3 * elems * sizeof(float);
        /* Rotate input sets so the ones timed back to back exceed 2x L2. */
        int nsets = set_bytes >= 2 * l2_bytes ? 1 : (int)((2 * l2_bytes + set_bytes - 1) / set_bytes);
        std::vector<float *> A(nsets), B(nsets), C(nsets);
        for (int i = 0; i < nsets; i++) {
            CK(cudaMalloc(&A[i], elems * 4));
            CK(cudaMalloc(&B[i], elems * 4));
            CK(cudaMalloc(&C[i], elems * 4));
            fill(A[i], elems, 1000 + i);
            fill(B[i], elems, 2000 + i);
        }
        CK(cudaDeviceSynchronize());
        double flop = 2.0 * s * (double)s * s;
        /* Sanity: the default variant agrees with cuBLAS SGEMM. */
        {
            std::vector<float> c1(elems), c2(elems);
            gemm_call({"", CARVE__GEMM_AUTO}, h, s, A[0], B[0], C[0]);
            CK(cudaMemcpy(c1.data(), C[0], elems * 4, cudaMemcpyDeviceToHost));
            gemm_call({"", -10}, h, s, A[0], B[0], C[0]);
            CK(cudaMemcpy(c2.data(), C[0], elems * 4, cudaMemcpyDeviceToHost));
            double e2 = 0, r2 = 0;
            for (size_t i = 0; i < elems; i++) {
                e2 += ((double)c1[i] - c2[i]) * ((double)c1[i] - c2[i]);
                r2 += (double)c2[i] * c2[i];
            }
            double rel = std::sqrt(e2 / r2);
            printf("  [check] %d: carve_gemm_f32 vs cuBLAS SGEMM rel diff %.2e%s\n", s, rel,
                   rel < 1e-5 ? "" : "  <-- UNEXPECTED");
        }
        /* Repetitions: about 1 s of work per implementation (fewer in quick). */
        double est = flop / 40e12;
        int reps = (int)std::min(200.0, std::max(quick ? 3.0 : 10.0, (quick ? 0.1 : 0.6) / est));
        int warm = std::max(2, reps / 10);
        for (auto &im : impls)
            for (int w = 0; w < warm; w++)
                gemm_call(im, h, s, A[w % nsets], B[w % nsets], C[w % nsets]);
        CK(cudaDeviceSynchronize());
        Events ev(2 * impls.size() * reps);
        for (int r = 0; r < reps; r++)
            for (size_t i = 0; i < impls.size(); i++) {
                int set = (int)((r * impls.size() + i) % nsets);
                size_t e = 2 * (i * reps + r);
                CK(cudaEventRecord(ev.ev[e]));
                gemm_call(impls[i], h, s, A[set], B[set], C[set]);
                CK(cudaEventRecord(ev.ev[e + 1]));
            }
        CK(cudaDeviceSynchronize());
        double cublas_t = NAN, cublas_tf32_t = NAN;
        std::vector<Row> rows;
        for (size_t i = 0; i < impls.size(); i++) {
            std::vector<double> t(reps);
            for (int r = 0; r < reps; r++)
                t[r] = elapsed_s(ev.ev[2 * (i * reps + r)], ev.ev[2 * (i * reps + r) + 1]);
            Row row{"gemm", impls[i].name, "TFLOP/s", (double)s, median_of(t), quantile(t, 0.1), quantile(t, 0.9),
                    0, NAN, "", reps};
            row.value = flop / row.median / 1e12;
            if (impls[i].variant == -10)
                cublas_t = row.median;
            if (impls[i].variant == -11)
                cublas_tf32_t = row.median;
            rows.push_back(row);
        }
        for (size_t i = 0; i < impls.size(); i++) {
            bool tf32 = impls[i].variant == -11 ||
                        (impls[i].variant >= 0 && carve__gemm_f32_variant_is_tf32(impls[i].variant));
            rows[i].ratio = (tf32 ? cublas_tf32_t : cublas_t) / rows[i].median;
            rows[i].ratio_to = tf32 ? "cuBLAS TF32" : "cuBLAS SGEMM";
            g_rows.push_back(rows[i]);
        }
        for (int i = 0; i < nsets; i++) {
            CK(cudaFree(A[i]));
            CK(cudaFree(B[i]));
            CK(cudaFree(C[i]));
        }
        printf("  gemm %d done (%d reps, %d input sets)\n", s, reps, nsets);
        fflush(stdout);
    }
    CKB(cublasDestroy(h));
}

/* ---- reduction ---------------------------------------------------------------- */

void bench_reduce(carve_arena *arena, size_t n, bool quick) {
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    carve_stream cs = (carve_stream)st;
    float *x, *out, *partial, *copy_dst;
    CK(cudaMalloc(&x, n * 4));
    CK(cudaMalloc(&copy_dst, n * 4));
    CK(cudaMalloc(&out, 4));
    const int read_blocks = g_sms * 8;
    CK(cudaMalloc(&partial, read_blocks * 4));
    fill(x, n, 77);
    CK(cudaDeviceSynchronize());
    size_t prealloc_bytes = 0;
    CK(cub::DeviceReduce::Sum(nullptr, prealloc_bytes, x, out, n, st));
    void *prealloc;
    CK(cudaMalloc(&prealloc, prealloc_bytes));
    cudaMemPool_t pool;
    CK(cudaDeviceGetDefaultMemPool(&pool, 0));
    uint64_t thresh = UINT64_MAX;
    CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &thresh));

    enum { CARVE, CUB_ONCE, CUB_MALLOC, CUB_ASYNC, READ, MEMCPY, NIMPL };
    const char *names[NIMPL] = {"carve_reduce_sum_f32 (temp from arena)", "CUB, temp cudaMalloc'ed once",
                                "CUB, cudaMalloc+cudaFree per call", "CUB, cudaMallocAsync per call",
                                "read ceiling (float4 read kernel)", "cudaMemcpy D2D (read+write)"};
    auto call = [&](int impl) {
        size_t tb = prealloc_bytes;
        void *tmp = nullptr;
        switch (impl) {
        case CARVE:
            CKC(carve_reduce_sum_f32(arena, cs, x, n, out));
            break;
        case CUB_ONCE:
            CK(cub::DeviceReduce::Sum(prealloc, tb, x, out, n, st));
            break;
        case CUB_MALLOC:
            CK(cub::DeviceReduce::Sum(nullptr, tb, x, out, n, st));
            CK(cudaMalloc(&tmp, tb));
            CK(cub::DeviceReduce::Sum(tmp, tb, x, out, n, st));
            CK(cudaFree(tmp));
            break;
        case CUB_ASYNC:
            CK(cub::DeviceReduce::Sum(nullptr, tb, x, out, n, st));
            CK(cudaMallocAsync(&tmp, tb, st));
            CK(cub::DeviceReduce::Sum(tmp, tb, x, out, n, st));
            CK(cudaFreeAsync(tmp, st));
            break;
        case READ:
            read_kernel<<<read_blocks, 256, 0, st>>>(reinterpret_cast<const float4 *>(x), n / 4, partial);
            CK(cudaGetLastError());
            break;
        case MEMCPY:
            CK(cudaMemcpyAsync(copy_dst, x, n * 4, cudaMemcpyDeviceToDevice, st));
            break;
        }
    };
    const int batch = 10, batches = quick ? 5 : 30, warm = 3;
    for (int i = 0; i < NIMPL; i++)
        for (int w = 0; w < warm; w++)
            call(i);
    CK(cudaStreamSynchronize(st));
    std::vector<std::vector<double>> t(NIMPL);
    Events ev(2);
    for (int b = 0; b < batches; b++)
        for (int i = 0; i < NIMPL; i++) {
            CK(cudaEventRecord(ev.ev[0], st));
            for (int r = 0; r < batch; r++)
                call(i);
            CK(cudaEventRecord(ev.ev[1], st));
            CK(cudaEventSynchronize(ev.ev[1]));
            t[i].push_back(elapsed_s(ev.ev[0], ev.ev[1]) / batch);
        }
    double med[NIMPL];
    for (int i = 0; i < NIMPL; i++)
        med[i] = median_of(t[i]);
    for (int i = 0; i < NIMPL; i++) {
        double bytes = (i == MEMCPY ? 2.0 : 1.0) * 4.0 * (double)n;
        Row row{"reduce", names[i], "GB/s", (double)n, med[i], quantile(t[i], 0.1), quantile(t[i], 0.9),
                bytes / med[i] / 1e9, med[READ] / med[i] * (i == MEMCPY ? 2.0 : 1.0), "read ceiling",
                batches * batch};
        g_rows.push_back(row);
    }
    /* The allocator's share: carve against the same reduction with its
     * storage allocated once, and the per-call patterns against carve. */
    const struct {
        const char *name;
        int other;
    } speed[] = {{"t(CUB temp once) / t(carve)", CUB_ONCE},
                 {"t(cudaMalloc per call) / t(carve)", CUB_MALLOC},
                 {"t(cudaMallocAsync per call) / t(carve)", CUB_ASYNC}};
    for (const auto &sp : speed) {
        Row r{"reduce-ratio", sp.name, "x", (double)n, med[sp.other], 0, 0, med[sp.other] / med[CARVE],
              med[sp.other] / med[CARVE], "carve", batches * batch};
        g_rows.push_back(r);
    }
    CK(cudaFree(prealloc));
    CK(cudaFree(x));
    CK(cudaFree(copy_dst));
    CK(cudaFree(out));
    CK(cudaFree(partial));
    CK(cudaStreamDestroy(st));
    printf("  reduce done\n");
    fflush(stdout);
}

/* ---- inference-like step loop ------------------------------------------------- */

/* One step: H1 = X W1, H2 = H1 W2, H3 = H2 W3, s = sum(H3), read s on the
 * host. H1, H2, H3, s and the reduction's temp storage are allocated and
 * freed inside the step by the allocator under test; the kernels are the
 * same for all three. */
enum alloc_kind { A_MALLOC, A_ASYNC, A_CARVE, NALLOC };
const char *alloc_name[NALLOC] = {"cudaMalloc/cudaFree", "cudaMallocAsync (pool, no release)", "carve"};

struct StepCtx {
    int b, h;
    cudaStream_t st;
    carve_arena *arena;
    const float *X, *W[3];
    float *host_out;
};

void *xalloc(alloc_kind k, StepCtx &c, size_t bytes) {
    void *p = nullptr;
    if (k == A_MALLOC)
        CK(cudaMalloc(&p, bytes));
    else if (k == A_ASYNC)
        CK(cudaMallocAsync(&p, bytes, c.st));
    else
        CKC(carve_alloc(c.arena, bytes, (carve_stream)c.st, &p));
    return p;
}
void xfree(alloc_kind k, StepCtx &c, void *p) {
    if (k == A_MALLOC)
        CK(cudaFree(p));
    else if (k == A_ASYNC)
        CK(cudaFreeAsync(p, c.st));
    else
        CKC(carve_free(c.arena, p));
}

void step(alloc_kind k, StepCtx &c) {
    const size_t act = (size_t)c.b * c.h * 4;
    carve_stream cs = (carve_stream)c.st;
    float *h1 = (float *)xalloc(k, c, act);
    CKC(carve_gemm_f32(cs, c.b, c.h, c.h, 1.f, c.X, c.h, c.W[0], c.h, 0.f, h1, c.h));
    float *h2 = (float *)xalloc(k, c, act);
    CKC(carve_gemm_f32(cs, c.b, c.h, c.h, 1.f, h1, c.h, c.W[1], c.h, 0.f, h2, c.h));
    xfree(k, c, h1);
    float *h3 = (float *)xalloc(k, c, act);
    CKC(carve_gemm_f32(cs, c.b, c.h, c.h, 1.f, h2, c.h, c.W[2], c.h, 0.f, h3, c.h));
    xfree(k, c, h2);
    float *s = (float *)xalloc(k, c, 4);
    const size_t n = (size_t)c.b * c.h;
    if (k == A_CARVE) {
        CKC(carve_reduce_sum_f32(c.arena, cs, h3, n, s));
    } else {
        size_t tb = 0;
        CK(cub::DeviceReduce::Sum(nullptr, tb, h3, s, n, c.st));
        void *tmp = xalloc(k, c, tb);
        CK(cub::DeviceReduce::Sum(tmp, tb, h3, s, n, c.st));
        xfree(k, c, tmp);
    }
    xfree(k, c, h3);
    CK(cudaMemcpyAsync(c.host_out, s, 4, cudaMemcpyDeviceToHost, c.st));
    xfree(k, c, s);
    CK(cudaStreamSynchronize(c.st));
}

void bench_steps(carve_arena *arena, int hsize, bool quick) {
    StepCtx c;
    c.b = c.h = hsize;
    c.arena = arena;
    CK(cudaStreamCreateWithFlags(&c.st, cudaStreamNonBlocking));
    float *X, *W[3];
    CK(cudaMalloc(&X, (size_t)c.b * c.h * 4));
    fill(X, (size_t)c.b * c.h, 5);
    for (int i = 0; i < 3; i++) {
        CK(cudaMalloc(&W[i], (size_t)c.h * c.h * 4));
        fill(W[i], (size_t)c.h * c.h, 6 + i);
    }
    c.X = X;
    for (int i = 0; i < 3; i++)
        c.W[i] = W[i];
    CK(cudaMallocHost(&c.host_out, 4));
    CK(cudaDeviceSynchronize());

    const int rounds = quick ? 3 : 10, per_round = quick ? 10 : 40, warm = 20;
    std::vector<std::vector<double>> t(NALLOC);
    for (int k = 0; k < NALLOC; k++)
        for (int w = 0; w < warm; w++)
            step((alloc_kind)k, c);
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < NALLOC; k++)
            for (int i = 0; i < per_round; i++) {
                auto t0 = std::chrono::steady_clock::now();
                step((alloc_kind)k, c);
                auto t1 = std::chrono::steady_clock::now();
                t[k].push_back(std::chrono::duration<double>(t1 - t0).count());
            }
    double carve_med = median_of(t[A_CARVE]);
    for (int k = 0; k < NALLOC; k++) {
        Row row{"step", alloc_name[k], "ms", (double)hsize, median_of(t[k]), quantile(t[k], 0.1),
                quantile(t[k], 0.9), median_of(t[k]) * 1e3, median_of(t[k]) / carve_med, "carve (speed-up of carve)",
                rounds * per_round};
        g_rows.push_back(row);
    }
    CK(cudaFreeHost(c.host_out));
    CK(cudaFree(X));
    for (int i = 0; i < 3; i++)
        CK(cudaFree(W[i]));
    CK(cudaStreamDestroy(c.st));
    printf("  steps h=%d done\n", hsize);
    fflush(stdout);
}

/* ---- output ---------------------------------------------------------------------- */

std::string json_escape(const std::string &s) {
    std::string o;
    for (char ch : s) {
        if (ch == '"' || ch == '\\')
            o += '\\';
        o += ch;
    }
    return o;
}

void json_num(FILE *f, double v) {
    if (std::isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fprintf(f, "null");
}

}  // namespace

int main(int argc, char **argv) {
    bool quick = false;
    std::string json_path;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json_path = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--quick] [--json PATH]\n", argv[0]);
            return 2;
        }
    }
    if (json_path.empty() && getenv("OUT"))
        json_path = std::string(getenv("OUT")) + "/bench_kernels.json";
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    CK(cudaSetDevice(0));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    int clock_khz = 0, mem_clock_khz = 0, sms = 0, drv = 0, rt = 0;
    CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    CK(cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, 0));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    g_sms = sms;
    CK(cudaDriverGetVersion(&drv));
    CK(cudaRuntimeGetVersion(&rt));
    char date[64];
    time_t now = time(nullptr);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", gmtime(&now));
    /* fp32 FFMA peak at the reported max clock: 128 lanes per SM (sm_80+). */
    double fp32_peak = 2.0 * 128 * sms * clock_khz * 1e3 / 1e12;
    printf("bench_kernels: %s, %d SMs, %.0f MHz max, L2 %d MiB, sm_%d%d, driver %d, runtime %d, carve %s, %s%s\n",
           prop.name, sms, clock_khz / 1e3, prop.l2CacheSize >> 20, prop.major, prop.minor, drv, rt, carve_version(),
           date, quick ? " (quick)" : "");
    printf("fp32 FFMA peak at max clock: %.1f TFLOP/s\n", fp32_peak);
    fflush(stdout);

    carve_config cfg;
    carve_config_init(&cfg);
    carve_arena *arena = nullptr;
    CKC(carve_arena_create(&cfg, &arena));

    std::vector<int> sizes = quick ? std::vector<int>{1024, 4096} : std::vector<int>{1024, 2048, 4096, 8192};
    bench_gemm(sizes, quick, (size_t)prop.l2CacheSize);
    bench_reduce(arena, quick ? (size_t)1 << 26 : (size_t)1 << 28, quick);
    bench_steps(arena, 512, quick);
    bench_steps(arena, 1024, quick);

    /* The table. */
    printf("\n== carve kernels on %s (%s) ==\n", prop.name, date);
    std::string sec;
    for (const Row &r : g_rows) {
        if (r.section != sec) {
            sec = r.section;
            if (sec == "gemm")
                printf("\nSGEMM, m=n=k, row-major, alpha=1 beta=0 (median of interleaved reps; ratio = "
                       "time of the cuBLAS peer / time)\n%-34s %6s %9s %9s %8s  %s\n",
                       "implementation", "size", "ms", "TFLOP/s", "ratio", "vs");
            else if (sec == "reduce")
                printf("\nsum of n floats (median per call over batches of 10; ratio = read-ceiling time / "
                       "time)\n%-40s %10s %9s %8s %7s\n",
                       "implementation", "n", "ms", "GB/s", "ratio");
            else if (sec == "reduce-ratio")
                printf("\n");
            else if (sec == "step")
                printf("\ninference step: 3 matmuls b=h=H + sum, intermediates allocated and freed each step "
                       "(median host wall time; ratio = time / carve's time)\n%-36s %6s %9s %9s %9s %8s\n",
                       "allocator", "H", "ms", "p10 ms", "p90 ms", "t/t_carve");
        }
        if (sec == "gemm")
            printf("%-34s %6.0f %9.3f %9.2f %8.3f  %s\n", r.name.c_str(), r.size, r.median * 1e3, r.value, r.ratio,
                   r.ratio_to.c_str());
        else if (sec == "reduce")
            printf("%-40s %10.0f %9.4f %8.1f %7.3f\n", r.name.c_str(), r.size, r.median * 1e3, r.value, r.ratio);
        else if (sec == "reduce-ratio")
            printf("%-40s %10.0f %9s %8.3f\n", r.name.c_str(), r.size, "", r.value);
        else
            printf("%-36s %6.0f %9.3f %9.3f %9.3f %8.2f\n", r.name.c_str(), r.size, r.median * 1e3, r.p10 * 1e3,
                   r.p90 * 1e3, r.ratio);
    }
    printf("\n(carve_gemm_f32 picks per shape; see docs/kernels.md)\n");

    if (!json_path.empty()) {
        FILE *f = fopen(json_path.c_str(), "w");
        if (!f) {
            fprintf(stderr, "cannot write %s\n", json_path.c_str());
            return 1;
        }
        fprintf(f, "{\n  \"device\": \"%s\", \"sms\": %d, \"clock_mhz\": %.0f, \"l2_bytes\": %d, \"date\": \"%s\",\n",
                json_escape(prop.name).c_str(), sms, clock_khz / 1e3, prop.l2CacheSize, date);
        fprintf(f, "  \"driver\": %d, \"runtime\": %d, \"carve\": \"%s\", \"quick\": %s, \"fp32_peak_tflops\": ", drv, rt,
                carve_version(), quick ? "true" : "false");
        json_num(f, fp32_peak);
        fprintf(f, ",\n  \"rows\": [\n");
        for (size_t i = 0; i < g_rows.size(); i++) {
            const Row &r = g_rows[i];
            fprintf(f, "    {\"section\": \"%s\", \"name\": \"%s\", \"size\": %.0f, \"unit\": \"%s\", \"value\": ",
                    r.section.c_str(), json_escape(r.name).c_str(), r.size, r.unit.c_str());
            json_num(f, r.value);
            fprintf(f, ", \"median_s\": ");
            json_num(f, r.median);
            fprintf(f, ", \"p10_s\": ");
            json_num(f, r.p10);
            fprintf(f, ", \"p90_s\": ");
            json_num(f, r.p90);
            fprintf(f, ", \"ratio\": ");
            json_num(f, r.ratio);
            fprintf(f, ", \"ratio_to\": \"%s\", \"reps\": %d}%s\n", json_escape(r.ratio_to).c_str(), r.reps,
                    i + 1 < g_rows.size() ? "," : "");
        }
        fprintf(f, "  ]\n}\n");
        fclose(f);
        printf("wrote %s\n", json_path.c_str());
    }
    carve_arena_destroy(arena);
    return 0;
}
