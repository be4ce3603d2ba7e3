/*
 * bench_gemm_sweep.cu — carve_gemm against cublasGemmEx over the shapes an
 * inference engine runs, in one process on one device: a speed sweep and,
 * with --check, a correctness sweep of the same calls.
 *
 * bf16 in, fp32 accumulate, bf16 out, row-major, no transposes, alpha 1,
 * beta 0, dense leading dimensions (lda = k, ldb = ldc = n: odd k or n
 * give rows TMA cannot read in place). Shapes: squares 256 .. 16384; the
 * projections of 7B- and 70B-class decoders (n x k = 4096 x 4096,
 * 11008 x 4096, 4096 x 11008, 14336 x 4096, 4096 x 14336, 8192 x 8192,
 * 28672 x 8192, 8192 x 28672) at m = 1, 2, 4, 8, 16, 24, 32, 64, 128,
 * 256, 512, 2048, 8192; odd sizes (999 x 1023 x 1001, 4097 x 4095 x 4093, 1 x 1 x 1,
 * 7 x 13 x 17, 3 x 50257 x 768) and issue 29's decode gaps
 * (16 x 12288 x 4096, 128 x 4096 x 14336); then decode with B transposed
 * (kind decode-nt: B stored n x k, ldb = k, the layout of x @ W^T with a
 * weight of out x in features) for n x k = 4096 x 4096, 14336 x 4096,
 * 4096 x 14336, 28672 x 8192, 8192 x 28672 at m = 1, 2, 4, 8, 16, 24, 32:
 * 155 in all; --quick keeps 13.
 *
 * Method: operands and workspace carved from one CUDA arena on one stream.
 * Each row first times the first call of carve and of cuBLAS on the shape
 * (cold: before any warm-up), then 3 warm-up calls each, then repetitions
 * interleaved (carve, cuBLAS, ...), each timed with CUDA events, and the
 * figure is the median (30 by default). A repetition times a batch of
 * back-to-back calls (10 by default, --batch N) and divides by it: a
 * stream of calls, as an engine queues its layers, so that a call is
 * timed by its kernels and not by the launch gap after an idle device.
 * On decode rows (m <= 256) the calls rotate over copies of A, B and C,
 * enough that at least twice the L2 size is read between two uses of one
 * copy (at most 16 copies: the smallest products stay in the cache even
 * so), so that B comes from device memory as it does in a model whose
 * weights do not fit the cache. Beside it the row gives the ratio for one
 * call timed alone (events around a single call on an idle device, after
 * writing a buffer of twice the L2 size: what a lone call's latency is,
 * its operands in memory), and the first call's time (the same, the
 * first call of each library on the shape; the first row of the process
 * also pays each library's module loading).
 * TFLOP/s = 2mnk / time. For m <= 256 the row also gives the fraction of
 * the memory roofline: the bytes of A, B and C (2 each) over the device's
 * bandwidth, nominal (cudaDeviceGetAttribute: memory clock x 2 transfers a
 * clock x bus width) unless --bw GB/s names a measured one; the header line
 * says which. The row also names carve's path (stream: the streaming kernel
 * for the fewest rows; decode: the decode kernel; wgmma; mma; tiny), its
 * split-K factor (for stream and decode, the cluster size: blocks per 64
 * or 128 columns) and the operands it copied (A, B). The header line
 * before the table gives the clusters of the decode kernel the device
 * holds at once (what its cluster rule counts on).
 *
 * Both paths on decode rows: rows of kind decode and decode-nt with
 * m <= 32 (what the streaming kernel can take) also time carve under
 * CARVE_GEMM_PATH=stream and under CARVE_GEMM_PATH=wgmma, interleaved with
 * the plan's call and cuBLAS's in the same repetitions, so the two paths
 * meet on one card whichever the plan picks (it gives the streaming kernel
 * m <= 4 where n >= 8192, and m <= 16 where n >= 12288 and B's rows are
 * off 16 bytes: lib/kernels/gemm_tc_plan.h). The
 * row gives each forced path's carve / cuBLAS (and the path that ran,
 * where it is not the one asked: mma.sync off Hopper), and a summary per m
 * gives both ranges, on how many shapes the streaming kernel was the
 * faster, and on how many the plan's call ran on the faster of the two.
 * The plan's column keeps whatever CARVE_GEMM_PATH the benchmark was
 * started with.
 *
 * --check: after the timing, C is poisoned, both libraries run once more,
 * and a kernel compares every element: max |carve - cuBLAS| / max |cuBLAS|
 * must be at most 2^-6 (two units in the last place of the largest bf16
 * element; the inputs are j/64, so both fp32 sums are exact and the
 * results are in fact equal) and no element NaN; on the rows that time
 * both paths, each forced path is checked the same way (C poisoned before
 * each). The exit status is 1 when any shape fails.
 *
 * --decode times only the rows of at most 256 rows of kinds decode and
 * decode-nt and the odd 3 x 50257 x 768 (B's rows off 16 bytes): the
 * memory-bound part of the sweep.
 *
 * --shape MxNxK (or MxNxKt, B transposed; repeatable) times only the
 * shapes given, of kind "given" (m <= 256 counts as decode: rotated
 * operands, both paths timed where m <= 32).
 *
 * --mid times only 12 mid-size, prefill and odd shapes (squares 1024 ..
 * 8192, four prefill projections, two odd sizes): the ones where the tile
 * width and the grid decide, to compare them (CARVE_GEMM_BN,
 * CARVE_GEMM_PERSIST=0) in a few seconds.
 *
 * Usage: bench_gemm_sweep [--quick | --mid | --decode | --shape MxNxK[t] ...] [--reps N] [--batch N] [--check]
 *                         [--json FILE] [--bw GB/s]
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "carve.h"
#include "carve_kernels.h"
#include "bench_cuda.cuh"
#include "kernels/gemm_tc_plan.h"

extern "C" int carve__gemm_tc_last_path(void);
extern "C" int carve__gemm_tc_last_splits(void);
extern "C" int carve__gemm_tc_last_copies(void);
extern "C" int carve__gemm_tc_last_cols(void);
extern "C" int carve__gemm_tc_decode_active(int M, int cols, int cs);

/* out[0] = max |c - r| (float bits), out[1] = max |r|, out[2] = NaNs in c.
 * Non-negative floats order as their bit patterns. */
static __global__ void compare_kernel(const __nv_bfloat16 *c, const __nv_bfloat16 *r, size_t n, unsigned *out) {
    unsigned md = 0, mr = 0, nan = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float x = __bfloat162float(c[i]), y = __bfloat162float(r[i]);
        if (x != x) {
            nan++;
            continue;
        }
        md = max(md, __float_as_uint(fabsf(x - y)));
        mr = max(mr, __float_as_uint(fabsf(y)));
    }
    atomicMax(&out[0], md);
    atomicMax(&out[1], mr);
    if (nan)
        atomicAdd(&out[2], nan);
}

struct Shape {
    int m, n, k;
    const char *kind;
    bool tb = false; /* B stored n x k (transposed), ldb = k */
};

/* The calls a row times: carve as planned, cuBLAS, and on the rows that
 * compare both paths carve under CARVE_GEMM_PATH=stream and =wgmma. */
enum { kPlan, kCublas, kStream, kWgmma, kCalls };

struct Row {
    Shape s;
    bool both = false;  /* times kStream and kWgmma too */
    double ms[kCalls] = {};  /* a call in a stream of calls (the batch) */
    double one[kCalls] = {}; /* one call timed alone */
    double first[2] = {};    /* ms of the first call: carve's plan, cuBLAS */
    int sets = 1;            /* operand sets rotated over */
    int path[kCalls] = {-1, -1, -1, -1}, splits[kCalls] = {}, copies = 0;
    int cols = 0; /* the plan's call on the decode kernel: its block width */
    double rel[kCalls] = {-1, -1, -1, -1};
    unsigned nans[kCalls] = {};
    bool checked = false, ok = true;
};

static const char *path_name(int p) { return p == 4 ? "decode" : p == 3 ? "tiny" : p == 2 ? "stream" : p == 1 ? "wgmma" : "mma"; }

static double median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

/* --mid: the shapes where the tile grid and the epilogue decide (mid
 * sizes, prefill, odd), for comparing tile widths and grids quickly. */
static std::vector<Shape> mid_shapes() {
    std::vector<Shape> v;
    for (int s : {1024, 2048, 3072, 4096, 6144, 8192})
        v.push_back({s, s, s, "square"});
    v.push_back({2048, 14336, 4096, "prefill"});
    v.push_back({4096, 4096, 14336, "prefill"});
    v.push_back({512, 4096, 4096, "prefill"});
    v.push_back({2048, 4096, 4096, "prefill"});
    v.push_back({999, 1023, 1001, "odd"});
    v.push_back({4097, 4095, 4093, "odd"});
    return v;
}

static std::vector<Shape> shapes(bool quick) {
    std::vector<Shape> v;
    const std::vector<int> sq = quick ? std::vector<int>{1024, 4096}
                                      : std::vector<int>{256, 512, 1024, 2048, 3072, 4096, 6144, 8192, 16384};
    for (int s : sq)
        v.push_back({s, s, s, "square"});
    struct NK {
        int n, k;
    };
    const std::vector<NK> proj = quick ? std::vector<NK>{{4096, 4096}, {14336, 4096}}
                                       : std::vector<NK>{{4096, 4096},  {11008, 4096}, {4096, 11008}, {14336, 4096},
                                                         {4096, 14336}, {8192, 8192},  {28672, 8192}, {8192, 28672}};
    const std::vector<int> ms = quick ? std::vector<int>{1, 128, 2048}
                                      : std::vector<int>{1, 2, 4, 8, 16, 24, 32, 64, 128, 256, 512, 2048, 8192};
    for (const NK &p : proj)
        for (int m : ms)
            v.push_back({m, p.n, p.k, m <= 256 ? "decode" : "prefill"});
    v.push_back({999, 1023, 1001, "odd"});
    if (!quick)
        v.push_back({4097, 4095, 4093, "odd"});
    if (!quick)
        v.push_back({1, 1, 1, "odd"});
    v.push_back({7, 13, 17, "odd"});
    v.push_back({3, 50257, 768, "odd"});
    v.push_back({16, 12288, 4096, "decode"});
    if (!quick)
        v.push_back({128, 4096, 14336, "decode"});
    const std::vector<NK> nt = quick ? std::vector<NK>{{4096, 4096}}
                                     : std::vector<NK>{{4096, 4096}, {14336, 4096}, {4096, 14336}, {28672, 8192},
                                                       {8192, 28672}};
    const std::vector<int> ntm = quick ? std::vector<int>{8} : std::vector<int>{1, 2, 4, 8, 16, 24, 32};
    for (const NK &p : nt)
        for (int m : ntm)
            v.push_back({m, p.n, p.k, "decode-nt", true});
    return v;
}

int main(int argc, char **argv) {
    bool quick = false, check = false, mid = false, decode = false;
    std::vector<Shape> given;
    int reps = 30, batch = 10;
    const char *json = nullptr;
    double bw_arg = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--mid"))
            mid = true;
        else if (!strcmp(argv[i], "--decode"))
            decode = true;
        else if (!strcmp(argv[i], "--shape") && i + 1 < argc) {
            Shape g{0, 0, 0, "given"};
            char t = 0;
            const int got = sscanf(argv[++i], "%dx%dx%d%c", &g.m, &g.n, &g.k, &t);
            if (got < 3 || g.m < 1 || g.n < 1 || g.k < 1 || (got == 4 && t != 't')) {
                fprintf(stderr, "--shape %s: want MxNxK or MxNxKt with positive sizes\n", argv[i]);
                return 2;
            }
            g.tb = got == 4;
            given.push_back(g);
        }
        else if (!strcmp(argv[i], "--check"))
            check = true;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json = argv[++i];
        else if (!strcmp(argv[i], "--bw") && i + 1 < argc)
            bw_arg = atof(argv[++i]);
        else {
            fprintf(stderr,
                    "usage: %s [--quick | --mid | --decode | --shape MxNxK[t] ...] [--reps N] [--batch N] [--check]"
                    " [--json FILE] [--bw GB/s]\n",
                    argv[0]);
            return 2;
        }
    }
    if (reps < 1)
        reps = 1;
    if (batch < 1)
        batch = 1;
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("bench_gemm_sweep: no CUDA device, nothing measured\n");
        return 0;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    int clock_khz = 0, bus_bits = 0;
    CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, 0));
    CK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0));
    const double bw_nominal = 2.0 * clock_khz * 1e3 * bus_bits / 8.0; /* bytes/s */
    const double bw = bw_arg > 0 ? bw_arg * 1e9 : bw_nominal;
    const char *bw_src = bw_arg > 0 ? "given (--bw)" : "nominal: memory clock x 2 x bus width";

    carve_config cfg;
    carve_config_init(&cfg);
    cfg.backend = CARVE_BACKEND_CUDA;
    carve_arena *arena = nullptr;
    if (carve_arena_create(&cfg, &arena) != CARVE_OK) {
        fprintf(stderr, "carve_arena_create: %s\n", carve_last_error(NULL));
        return 1;
    }
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS)
        return 1;
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    cublasSetStream(h, st);
    unsigned *dcmp = nullptr;
    CK(cudaMalloc(&dcmp, 3 * sizeof(unsigned)));
    /* Written before every call timed alone: whatever the L2 cache held is
     * gone, the same for both libraries. */
    const size_t flush_bytes = 2 * (size_t)std::max(prop.l2CacheSize, 1 << 20);
    void *flush = nullptr;
    CK(cudaMalloc(&flush, flush_bytes));
    int flushes = 0;
    auto flush_l2 = [&]() { CK(cudaMemsetAsync(flush, ++flushes & 0xFF, flush_bytes, st)); };

    printf("bench_gemm_sweep on %s (%d SMs), bf16 in, fp32 accumulate, bf16 out, row-major NN (decode-nt: NT),"
           " median of %d reps of %d back-to-back calls (decode rows rotate operand sets over twice the %d MiB L2);"
           " memory bandwidth %.0f GB/s (%s)\n",
           prop.name, prop.multiProcessorCount, reps, batch, prop.l2CacheSize >> 20, bw / 1e9, bw_src);
    /* What the decode kernel's cluster rule counts on (gemm_tc_plan.h,
     * carve_tc_decode_cluster): clusters the device holds at once. */
    if (carve__gemm_tc_decode_active(1, 128, 1) >= 0) {
        printf("decode kernel: clusters of 1/2/4/8 blocks held at once:");
        for (int cols : {128, 64})
            for (int m : {1, 128, 256})
                if (cols == 128 || m <= 128)
                    printf(" %d columns, M <= %d: %d/%d/%d/%d;", cols, m == 1 ? 64 : m,
                           carve__gemm_tc_decode_active(m, cols, 1), carve__gemm_tc_decode_active(m, cols, 2),
                           carve__gemm_tc_decode_active(m, cols, 4), carve__gemm_tc_decode_active(m, cols, 8));
        printf("\n");
    }
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const float alpha = 1.f, beta = 0.f;
    /* The plan's call runs under the CARVE_GEMM_PATH the benchmark was
     * started with; the forced calls set their own around each call. */
    const char *env_path = getenv("CARVE_GEMM_PATH");
    std::string start_path = env_path ? env_path : "";
    const bool had_path = env_path != nullptr;
    auto set_path = [&](int which) {
        if (which == kStream)
            setenv("CARVE_GEMM_PATH", "stream", 1);
        else if (which == kWgmma)
            setenv("CARVE_GEMM_PATH", "wgmma", 1);
        else if (had_path)
            setenv("CARVE_GEMM_PATH", start_path.c_str(), 1);
        else
            unsetenv("CARVE_GEMM_PATH");
    };
    std::vector<Row> rows;
    for (const Shape &s : !given.empty() ? given : mid ? mid_shapes() : shapes(quick)) {
        if (decode && given.empty() && !(s.m <= 256 && (!strncmp(s.kind, "decode", 6) || s.n == 50257)))
            continue;
        Row r;
        r.s = s;
        r.both = (!strncmp(s.kind, "decode", 6) || !strcmp(s.kind, "given")) && s.m <= CARVE_TC_STREAM_MAX_M;
        std::vector<int> calls = {kPlan, kCublas};
        if (r.both)
            calls.insert(calls.end(), {kStream, kWgmma});
        const size_t an = (size_t)s.m * s.k, bn = (size_t)s.k * s.n, cn = (size_t)s.m * s.n;
        /* Decode rows: enough operand sets that what the calls read passes
         * twice the L2 cache between two uses of one set. */
        const double set_bytes = 2.0 * (an + bn + 2 * cn);
        if (s.m <= 256)
            r.sets = std::min(16, 1 + (int)std::ceil(2.0 * prop.l2CacheSize / set_bytes));
        std::vector<void *> As(r.sets), Bs(r.sets), Cs(r.sets), Rs(r.sets);
        for (int q = 0; q < r.sets; q++) {
            if (carve_alloc(arena, an * 2, st, &As[q]) != CARVE_OK || carve_alloc(arena, bn * 2, st, &Bs[q]) != CARVE_OK ||
                carve_alloc(arena, cn * 2, st, &Cs[q]) != CARVE_OK || carve_alloc(arena, cn * 2, st, &Rs[q]) != CARVE_OK) {
                fprintf(stderr, "carve_alloc: %s\n", carve_last_error(arena));
                return 1;
            }
            fill_kernel<<<1024, 256, 0, st>>>((__nv_bfloat16 *)As[q], an, 1);
            fill_kernel<<<1024, 256, 0, st>>>((__nv_bfloat16 *)Bs[q], bn, 2);
        }
        void *const C = Cs[0], *const R = Rs[0];
        /* CARVE_GEMM_PATH is set by the caller of run (set_path), outside
         * the timed interval. */
        auto run = [&](int which, int q) {
            const void *A = As[q], *B = Bs[q];
            void *C = Cs[q], *R = Rs[q];
            if (which == kCublas) {
                /* Row-major C = A op(B) is column-major C^T = op(B)^T A^T. */
                cublasStatus_t cs = cublasGemmEx(h, s.tb ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, s.n, s.m, s.k,
                                                 &alpha, B, CUDA_R_16BF, s.tb ? s.k : s.n, A, CUDA_R_16BF, s.k,
                                                 &beta, R, CUDA_R_16BF, s.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
                if (cs != CUBLAS_STATUS_SUCCESS) {
                    fprintf(stderr, "cublasGemmEx %dx%dx%d: status %d\n", s.m, s.n, s.k, (int)cs);
                    exit(1);
                }
                return;
            }
            carve_status cs = carve_gemm(arena, (carve_stream)st, CARVE_ROW_MAJOR, CARVE_NO_TRANS,
                                         s.tb ? CARVE_TRANS : CARVE_NO_TRANS, s.m, s.n, s.k, alpha, A, s.k, B,
                                         s.tb ? s.k : s.n, beta, C, s.n, CARVE_DTYPE_BF16, CARVE_DTYPE_BF16);
            if (cs != CARVE_OK) {
                fprintf(stderr, "carve_gemm %dx%dx%d: %s\n", s.m, s.n, s.k, carve_last_error(NULL));
                exit(1);
            }
            r.path[which] = carve__gemm_tc_last_path();
            r.splits[which] = carve__gemm_tc_last_splits();
            if (which == kPlan) {
                r.copies = carve__gemm_tc_last_copies();
                r.cols = carve__gemm_tc_last_cols();
            }
        };
        /* ms of what calls() queues on st, timed with events around it. */
        auto timed = [&](auto calls) {
            CK(cudaEventRecord(e0, st));
            calls();
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            return ms;
        };
        /* One call alone on an idle device, its operands out of L2. */
        auto alone = [&](int which) {
            flush_l2();
            CK(cudaStreamSynchronize(st));
            return timed([&] { run(which, 0); });
        };
        /* Cold: the first call of each library on this shape. */
        for (int which : {kPlan, kCublas}) {
            set_path(which);
            r.first[which == kPlan ? 0 : 1] = alone(which);
        }
        for (int w = 0; w < 3; w++)
            for (int which : calls)
                for (int q = 0; q < r.sets; q++) {
                    set_path(which);
                    run(which, q);
                }
        std::vector<float> t[kCalls], t1[kCalls];
        int next = 0; /* the operand set of the next call */
        for (int i = 0; i < reps; i++)
            for (int which : calls) {
                set_path(which);
                const float ms = timed([&] {
                    for (int b = 0; b < batch; b++) {
                        run(which, next);
                        next = (next + 1) % r.sets;
                    }
                });
                t[which].push_back(ms / batch);
                t1[which].push_back(alone(which));
            }
        for (int which : calls) {
            r.ms[which] = median(t[which]);
            r.one[which] = median(t1[which]);
        }
        if (check) {
            CK(cudaMemsetAsync(R, 0xFF, cn * 2, st)); /* NaN: every element must be written */
            run(kCublas, 0);
            for (int which : calls) {
                if (which == kCublas)
                    continue;
                CK(cudaMemsetAsync(C, 0xFF, cn * 2, st));
                set_path(which);
                run(which, 0);
                CK(cudaMemsetAsync(dcmp, 0, 3 * sizeof(unsigned), st));
                compare_kernel<<<256, 256, 0, st>>>((const __nv_bfloat16 *)C, (const __nv_bfloat16 *)R, cn, dcmp);
                CK(cudaGetLastError());
                unsigned hc[3];
                CK(cudaMemcpyAsync(hc, dcmp, sizeof hc, cudaMemcpyDeviceToHost, st));
                CK(cudaStreamSynchronize(st));
                float md, mr;
                memcpy(&md, &hc[0], 4);
                memcpy(&mr, &hc[1], 4);
                r.nans[which] = hc[2];
                r.rel[which] = mr > 0 ? md / mr : md;
                r.ok = r.ok && r.nans[which] == 0 && r.rel[which] <= 1.0 / 64;
            }
            r.checked = true;
        }
        set_path(kPlan);
        for (int q = 0; q < r.sets; q++) {
            carve_free(arena, As[q]);
            carve_free(arena, Bs[q]);
            carve_free(arena, Cs[q]);
            carve_free(arena, Rs[q]);
        }
        CK(cudaStreamSynchronize(st));
        rows.push_back(r);
        fprintf(stderr, "  %d x %d x %d done\n", s.m, s.n, s.k);
    }

    /* A forced path's carve / cuBLAS, with the path that ran when it is not
     * the one asked (mma.sync off Hopper; wgmma where the streaming kernel
     * refused the call). */
    auto forced = [](const Row &r, int which, char *buf, size_t len) {
        if (!r.both) {
            snprintf(buf, len, "-");
            return;
        }
        const int asked = which == kStream ? 2 : 1;
        snprintf(buf, len, "%.2f%s%s%s", r.ms[kCublas] / r.ms[which], r.path[which] == asked ? "" : " (",
                 r.path[which] == asked ? "" : path_name(r.path[which]), r.path[which] == asked ? "" : ")");
    };
    printf("| kind | m | n | k | path | splits | copied | carve TFLOP/s | cuBLAS TFLOP/s | carve / cuBLAS | carve / "
           "roofline | cuBLAS / roofline | stream / cuBLAS | wgmma / cuBLAS | wgmma splits | sets | one call: carve / "
           "cuBLAS | first call us: carve / cuBLAS |%s\n",
           check ? " max rel err | check |" : "");
    printf("|---|---:|---:|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|%s\n",
           check ? "---:|---|" : "");
    int failed = 0;
    double worst_ratio = 1e30;
    for (const Row &r : rows) {
        const Shape &s = r.s;
        const double fl = 2.0 * s.m * s.n * (double)s.k;
        const double bytes = 2.0 * ((double)s.m * s.k + (double)s.k * s.n + (double)s.m * s.n);
        const double floor_ms = bytes / bw * 1e3;
        char roof_c[32] = "-", roof_b[32] = "-", fs[32], fw[32], ws[16] = "-";
        if (s.m <= 256) { /* decode and decode-nt */
            snprintf(roof_c, sizeof roof_c, "%.2f", floor_ms / r.ms[kPlan]);
            snprintf(roof_b, sizeof roof_b, "%.2f", floor_ms / r.ms[kCublas]);
        }
        forced(r, kStream, fs, sizeof fs);
        forced(r, kWgmma, fw, sizeof fw);
        if (r.both)
            snprintf(ws, sizeof ws, "%d", r.splits[kWgmma]);
        const char *cp = r.copies == 3 ? "A,B" : r.copies == 1 ? "A" : r.copies == 2 ? "B" : "-";
        printf("| %s | %d | %d | %d | %s | %d | %s | %.1f | %.1f | %.2f | %s | %s | %s | %s | %s | %d | %.2f | %.0f / %.0f |",
               s.kind, s.m, s.n, s.k, r.cols == 64 ? "decode/64" : path_name(r.path[kPlan]), r.splits[kPlan], cp,
               fl / r.ms[kPlan] / 1e9,
               fl / r.ms[kCublas] / 1e9, r.ms[kCublas] / r.ms[kPlan], roof_c, roof_b, fs, fw, ws, r.sets,
               r.one[kCublas] / r.one[kPlan], r.first[0] * 1e3, r.first[1] * 1e3);
        if (check) {
            double worst = 0;
            for (int which : {kPlan, kStream, kWgmma})
                worst = std::max(worst, r.rel[which]);
            printf(" %.3g | %s |", worst, r.ok ? "ok" : "FAIL");
        }
        printf("\n");
        failed += !r.ok;
        worst_ratio = std::min(worst_ratio, r.ms[kCublas] / r.ms[kPlan]);
    }
    /* Both paths per m, over the rows that timed both (decode and
     * decode-nt together): the ranges of carve / cuBLAS, on how many
     * shapes the streaming kernel took less time than wgmma, and on how
     * many the plan's call ran on the one of the two that took less. */
    std::vector<int> both_m;
    for (const Row &r : rows)
        if (r.both && strcmp(r.s.kind, "given") && std::find(both_m.begin(), both_m.end(), r.s.m) == both_m.end())
            both_m.push_back(r.s.m);
    std::sort(both_m.begin(), both_m.end());
    for (int m : both_m) {
        double slo = 1e30, shi = 0, wlo = 1e30, whi = 0;
        int shapes_m = 0, stream_faster = 0, plan_faster = 0;
        for (const Row &r : rows) {
            if (!r.both || r.s.m != m || !strcmp(r.s.kind, "given"))
                continue;
            const double sr = r.ms[kCublas] / r.ms[kStream], wr = r.ms[kCublas] / r.ms[kWgmma];
            slo = std::min(slo, sr), shi = std::max(shi, sr), wlo = std::min(wlo, wr), whi = std::max(whi, wr);
            shapes_m++;
            const bool sf = r.ms[kStream] < r.ms[kWgmma];
            stream_faster += sf;
            plan_faster += (r.path[kPlan] == 2 && sf) || (r.path[kPlan] == 1 && !sf);
        }
        printf("bench_gemm_sweep: m = %d: carve / cuBLAS stream %.2f-%.2f, wgmma %.2f-%.2f; stream faster on %d of %d "
               "shapes, the plan's path on %d (it gives stream m <= %d where n >= %d, m <= %d where n >= %d)\n",
               m, slo, shi, wlo, whi, stream_faster, shapes_m, plan_faster, CARVE_TC_STREAM_PLAN_MAX_M,
               CARVE_TC_STREAM_WIDE_N, CARVE_TC_STREAM_NARROW_MAX_M, CARVE_TC_STREAM_NARROW_N);
    }
    double worst_one = 1e30;
    for (const Row &r : rows)
        worst_one = std::min(worst_one, r.one[kCublas] / r.one[kPlan]);
    printf("bench_gemm_sweep: %zu shapes, lowest carve / cuBLAS %.2f (one call alone: %.2f)%s\n", rows.size(),
           worst_ratio, worst_one,
           check ? (failed ? ", check FAILED" : ", every result within tolerance") : "");
    if (check && failed)
        printf("bench_gemm_sweep: %d shapes out of tolerance\n", failed);

    if (json) {
        FILE *f = fopen(json, "w");
        if (!f) {
            fprintf(stderr, "cannot write %s\n", json);
            return 1;
        }
        fprintf(f, "{\"device\": \"%s\", \"sms\": %d, \"bandwidth_gbs\": %.1f, \"bandwidth_source\": \"%s\", "
                   "\"reps\": %d, \"batch\": %d, \"l2_bytes\": %d, \"rows\": [\n",
                prop.name, prop.multiProcessorCount, bw / 1e9, bw_arg > 0 ? "given" : "nominal", reps, batch,
                prop.l2CacheSize);
        for (size_t i = 0; i < rows.size(); i++) {
            const Row &r = rows[i];
            const Shape &s = r.s;
            const double fl = 2.0 * s.m * s.n * (double)s.k;
            const double bytes = 2.0 * ((double)s.m * s.k + (double)s.k * s.n + (double)s.m * s.n);
            const double floor_ms = bytes / bw * 1e3;
            fprintf(f, "  {\"kind\": \"%s\", \"m\": %d, \"n\": %d, \"k\": %d, \"path\": \"%s\", \"splits\": %d, "
                       "\"cols\": %d, \"copies\": %d, \"transb\": %s, \"carve_ms\": %.6f, \"cublas_ms\": %.6f, "
                       "\"carve_tflops\": %.3f, \"cublas_tflops\": %.3f, \"ratio\": %.4f",
                    s.kind, s.m, s.n, s.k, path_name(r.path[kPlan]), r.splits[kPlan], r.cols, r.copies,
                    s.tb ? "true" : "false", r.ms[kPlan], r.ms[kCublas], fl / r.ms[kPlan] / 1e9,
                    fl / r.ms[kCublas] / 1e9, r.ms[kCublas] / r.ms[kPlan]);
            fprintf(f, ", \"sets\": %d, \"one_carve_ms\": %.6f, \"one_cublas_ms\": %.6f, \"one_ratio\": %.4f, "
                       "\"first_carve_ms\": %.6f, \"first_cublas_ms\": %.6f",
                    r.sets, r.one[kPlan], r.one[kCublas], r.one[kCublas] / r.one[kPlan], r.first[0], r.first[1]);
            if (s.m <= 256)
                fprintf(f, ", \"roofline_carve\": %.4f, \"roofline_cublas\": %.4f", floor_ms / r.ms[kPlan],
                        floor_ms / r.ms[kCublas]);
            if (r.checked)
                fprintf(f, ", \"max_rel_err\": %.6g, \"nans\": %u, \"check\": %s", r.rel[kPlan], r.nans[kPlan],
                        r.ok ? "true" : "false");
            for (int which : {kStream, kWgmma}) {
                if (!r.both)
                    break;
                const char *p = which == kStream ? "stream" : "wgmma";
                fprintf(f, ", \"%s_path\": \"%s\", \"%s_splits\": %d, \"%s_ms\": %.6f, \"%s_ratio\": %.4f", p,
                        path_name(r.path[which]), p, r.splits[which], p, r.ms[which], p, r.ms[kCublas] / r.ms[which]);
                if (s.m <= 256)
                    fprintf(f, ", \"%s_roofline\": %.4f", p, floor_ms / r.ms[which]);
                if (r.checked)
                    fprintf(f, ", \"%s_max_rel_err\": %.6g, \"%s_nans\": %u", p, r.rel[which], p, r.nans[which]);
            }
            fprintf(f, "}%s\n", i + 1 < rows.size() ? "," : "");
        }
        fprintf(f, "]}\n");
        fclose(f);
    }
    cudaFree(dcmp);
    cudaFree(flush);
    cublasDestroy(h);
    cudaStreamDestroy(st);
    carve_arena_destroy(arena);
    return check && failed ? 1 : 0;
}
