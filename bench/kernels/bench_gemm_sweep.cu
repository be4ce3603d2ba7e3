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
 * 28672 x 8192, 8192 x 28672) at m = 1, 8, 32, 128, 512, 2048, 8192; odd
 * sizes (999 x 1023 x 1001, 4097 x 4095 x 4093, 1 x 1 x 1, 7 x 13 x 17,
 * 3 x 50257 x 768) and issue 29's decode gaps (16 x 12288 x 4096,
 * 128 x 4096 x 14336); then decode with B transposed (kind decode-nt: B
 * stored n x k, ldb = k, the layout of x @ W^T with a weight of out x in
 * features) for n x k = 4096 x 4096, 14336 x 4096, 4096 x 14336,
 * 28672 x 8192, 8192 x 28672 at m = 1, 8, 32: 87 in all; --quick keeps
 * 13.
 *
 * Method: operands and workspace carved from one CUDA arena on one stream;
 * 3 warm-up calls each, then repetitions interleaved (carve, cuBLAS, ...),
 * each timed with CUDA events; the figure is the median (30 by default).
 * TFLOP/s = 2mnk / time. For m <= 256 the row also gives the fraction of
 * the memory roofline: the bytes of A, B and C (2 each) over the device's
 * bandwidth, nominal (cudaDeviceGetAttribute: memory clock x 2 transfers a
 * clock x bus width) unless --bw GB/s names a measured one; the header line
 * says which. The row also names carve's path (stream: the streaming kernel
 * for decode shapes; wgmma; mma), its split-K factor (for stream, the
 * cluster size: blocks per 64 columns) and the operands it copied (A, B).
 *
 * --check: after the timing, C is poisoned, both libraries run once more,
 * and a kernel compares every element: max |carve - cuBLAS| / max |cuBLAS|
 * must be at most 2^-6 (two units in the last place of the largest bf16
 * element; the inputs are j/64, so both fp32 sums are exact and the
 * results are in fact equal) and no element NaN. The exit status is 1 when
 * any shape fails.
 *
 * Usage: bench_gemm_sweep [--quick] [--reps N] [--check] [--json FILE] [--bw GB/s]
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "carve.h"
#include "carve_kernels.h"
#include "bench_cuda.cuh"

extern "C" int carve__gemm_tc_last_path(void);
extern "C" int carve__gemm_tc_last_splits(void);
extern "C" int carve__gemm_tc_last_copies(void);

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

struct Row {
    Shape s;
    double carve_ms = 0, cublas_ms = 0;
    int path = -1, splits = 0, copies = 0;
    double rel = -1;
    unsigned nans = 0;
    bool checked = false, ok = true;
};

static double median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
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
    const std::vector<int> ms = quick ? std::vector<int>{1, 128, 2048} : std::vector<int>{1, 8, 32, 128, 512, 2048, 8192};
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
    const std::vector<int> ntm = quick ? std::vector<int>{8} : std::vector<int>{1, 8, 32};
    for (const NK &p : nt)
        for (int m : ntm)
            v.push_back({m, p.n, p.k, "decode-nt", true});
    return v;
}

int main(int argc, char **argv) {
    bool quick = false, check = false;
    int reps = 30;
    const char *json = nullptr;
    double bw_arg = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--check"))
            check = true;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json = argv[++i];
        else if (!strcmp(argv[i], "--bw") && i + 1 < argc)
            bw_arg = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--quick] [--reps N] [--check] [--json FILE] [--bw GB/s]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1)
        reps = 1;
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

    printf("bench_gemm_sweep on %s (%d SMs), bf16 in, fp32 accumulate, bf16 out, row-major NN (decode-nt: NT),"
           " median of %d reps; memory bandwidth %.0f GB/s (%s)\n",
           prop.name, prop.multiProcessorCount, reps, bw / 1e9, bw_src);
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const float alpha = 1.f, beta = 0.f;
    std::vector<Row> rows;
    for (const Shape &s : shapes(quick)) {
        Row r;
        r.s = s;
        void *A, *B, *C, *R;
        const size_t an = (size_t)s.m * s.k, bn = (size_t)s.k * s.n, cn = (size_t)s.m * s.n;
        if (carve_alloc(arena, an * 2, st, &A) != CARVE_OK || carve_alloc(arena, bn * 2, st, &B) != CARVE_OK ||
            carve_alloc(arena, cn * 2, st, &C) != CARVE_OK || carve_alloc(arena, cn * 2, st, &R) != CARVE_OK) {
            fprintf(stderr, "carve_alloc: %s\n", carve_last_error(arena));
            return 1;
        }
        fill_kernel<<<1024, 256, 0, st>>>((__nv_bfloat16 *)A, an, 1);
        fill_kernel<<<1024, 256, 0, st>>>((__nv_bfloat16 *)B, bn, 2);
        auto run = [&](int which) {
            if (which == 1) {
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
            r.path = carve__gemm_tc_last_path();
            r.splits = carve__gemm_tc_last_splits();
            r.copies = carve__gemm_tc_last_copies();
        };
        for (int w = 0; w < 3; w++)
            for (int which = 0; which < 2; which++)
                run(which);
        std::vector<float> t[2];
        for (int i = 0; i < reps; i++)
            for (int which = 0; which < 2; which++) {
                CK(cudaEventRecord(e0, st));
                run(which);
                CK(cudaEventRecord(e1, st));
                CK(cudaEventSynchronize(e1));
                float ms = 0;
                CK(cudaEventElapsedTime(&ms, e0, e1));
                t[which].push_back(ms);
            }
        r.carve_ms = median(t[0]);
        r.cublas_ms = median(t[1]);
        if (check) {
            CK(cudaMemsetAsync(C, 0xFF, cn * 2, st)); /* NaN: every element must be written */
            CK(cudaMemsetAsync(R, 0xFF, cn * 2, st));
            run(0);
            run(1);
            CK(cudaMemsetAsync(dcmp, 0, 3 * sizeof(unsigned), st));
            compare_kernel<<<256, 256, 0, st>>>((const __nv_bfloat16 *)C, (const __nv_bfloat16 *)R, cn, dcmp);
            CK(cudaGetLastError());
            unsigned hc[3];
            CK(cudaMemcpyAsync(hc, dcmp, sizeof hc, cudaMemcpyDeviceToHost, st));
            CK(cudaStreamSynchronize(st));
            float md, mr;
            memcpy(&md, &hc[0], 4);
            memcpy(&mr, &hc[1], 4);
            r.checked = true;
            r.nans = hc[2];
            r.rel = mr > 0 ? md / mr : md;
            r.ok = r.nans == 0 && r.rel <= 1.0 / 64;
        }
        carve_free(arena, A);
        carve_free(arena, B);
        carve_free(arena, C);
        carve_free(arena, R);
        CK(cudaStreamSynchronize(st));
        rows.push_back(r);
        fprintf(stderr, "  %d x %d x %d done\n", s.m, s.n, s.k);
    }

    printf("| kind | m | n | k | path | splits | copied | carve TFLOP/s | cuBLAS TFLOP/s | carve / cuBLAS | carve / "
           "roofline | cuBLAS / roofline |%s\n",
           check ? " max rel err | check |" : "");
    printf("|---|---:|---:|---:|---|---:|---|---:|---:|---:|---:|---:|%s\n", check ? "---:|---|" : "");
    int failed = 0;
    double worst_ratio = 1e30;
    for (const Row &r : rows) {
        const Shape &s = r.s;
        const double fl = 2.0 * s.m * s.n * (double)s.k;
        const double bytes = 2.0 * ((double)s.m * s.k + (double)s.k * s.n + (double)s.m * s.n);
        const double floor_ms = bytes / bw * 1e3;
        char roof_c[32] = "-", roof_b[32] = "-";
        if (s.m <= 256) { /* decode and decode-nt */
            snprintf(roof_c, sizeof roof_c, "%.2f", floor_ms / r.carve_ms);
            snprintf(roof_b, sizeof roof_b, "%.2f", floor_ms / r.cublas_ms);
        }
        const char *cp = r.copies == 3 ? "A,B" : r.copies == 1 ? "A" : r.copies == 2 ? "B" : "-";
        const char *path = r.path == 2 ? "stream" : r.path == 1 ? "wgmma" : "mma";
        printf("| %s | %d | %d | %d | %s | %d | %s | %.1f | %.1f | %.2f | %s | %s |", s.kind, s.m, s.n, s.k,
               path, r.splits, cp, fl / r.carve_ms / 1e9, fl / r.cublas_ms / 1e9,
               r.cublas_ms / r.carve_ms, roof_c, roof_b);
        if (check)
            printf(" %.3g | %s |", r.rel, r.ok ? "ok" : "FAIL");
        printf("\n");
        failed += !r.ok;
        worst_ratio = std::min(worst_ratio, r.cublas_ms / r.carve_ms);
    }
    printf("bench_gemm_sweep: %zu shapes, lowest carve / cuBLAS %.2f%s\n", rows.size(), worst_ratio,
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
                   "\"reps\": %d, \"rows\": [\n",
                prop.name, prop.multiProcessorCount, bw / 1e9, bw_arg > 0 ? "given" : "nominal", reps);
        for (size_t i = 0; i < rows.size(); i++) {
            const Row &r = rows[i];
            const Shape &s = r.s;
            const double fl = 2.0 * s.m * s.n * (double)s.k;
            const double bytes = 2.0 * ((double)s.m * s.k + (double)s.k * s.n + (double)s.m * s.n);
            const double floor_ms = bytes / bw * 1e3;
            fprintf(f, "  {\"kind\": \"%s\", \"m\": %d, \"n\": %d, \"k\": %d, \"path\": \"%s\", \"splits\": %d, "
                       "\"copies\": %d, \"transb\": %s, \"carve_ms\": %.6f, \"cublas_ms\": %.6f, "
                       "\"carve_tflops\": %.3f, \"cublas_tflops\": %.3f, \"ratio\": %.4f",
                    s.kind, s.m, s.n, s.k, r.path == 2 ? "stream" : r.path == 1 ? "wgmma" : "mma", r.splits,
                    r.copies, s.tb ? "true" : "false", r.carve_ms,
                    r.cublas_ms, fl / r.carve_ms / 1e9, fl / r.cublas_ms / 1e9, r.cublas_ms / r.carve_ms);
            if (s.m <= 256)
                fprintf(f, ", \"roofline_carve\": %.4f, \"roofline_cublas\": %.4f", floor_ms / r.carve_ms,
                        floor_ms / r.cublas_ms);
            if (r.checked)
                fprintf(f, ", \"max_rel_err\": %.6g, \"nans\": %u, \"check\": %s", r.rel, r.nans,
                        r.ok ? "true" : "false");
            fprintf(f, "}%s\n", i + 1 < rows.size() ? "," : "");
        }
        fprintf(f, "]}\n");
        fclose(f);
    }
    cudaFree(dcmp);
    cublasDestroy(h);
    cudaStreamDestroy(st);
    carve_arena_destroy(arena);
    return check && failed ? 1 : 0;
}
