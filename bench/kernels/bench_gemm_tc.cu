/*
 * bench_gemm_tc.cu — carve_gemm (bf16 inputs, fp32 accumulation, bf16
 * output, row-major, no transposes) against cublasGemmEx with the same
 * types, in one run on one device: square sizes 2048, 4096, 8192 and
 * inference shapes (M = 1, 16, 64, 256 tokens times N = K = 4096, 8192,
 * 16384). Each path of carve (auto, and mma.sync forced) is timed too.
 *
 * Method: warm-up, then repetitions interleaved (carve, mma, cuBLAS, ...)
 * so that clock drift hits all alike; each repetition timed with CUDA
 * events; the figure is the median. FLOPs 2*M*N*K. Inputs carved from a
 * CUDA arena.
 *
 * Usage: bench_gemm_tc [--quick] [--reps N]
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "carve.h"
#include "carve_kernels.h"
#include "bench_cuda.cuh"

extern "C" int carve__gemm_tc_last_path(void);

struct Row {
    int m, n, k;
    double carve_ms, mma_ms, cublas_ms;
    int path;
};

static double median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main(int argc, char **argv) {
    bool quick = false;
    int reps = 50;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
    }
    if (quick)
        reps = 10;
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("bench_gemm_tc: no CUDA device, nothing measured\n");
        return 0;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
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

    std::vector<Row> rows;
    std::vector<int> sq = quick ? std::vector<int>{2048, 4096} : std::vector<int>{2048, 4096, 8192};
    for (int s : sq)
        rows.push_back({s, s, s, 0, 0, 0, -1});
    std::vector<int> toks = quick ? std::vector<int>{1, 64} : std::vector<int>{1, 16, 64, 256};
    std::vector<int> dims = quick ? std::vector<int>{4096} : std::vector<int>{4096, 8192, 16384};
    for (int d : dims)
        for (int t : toks)
            rows.push_back({t, d, d, 0, 0, 0, -1});

    printf("bench_gemm_tc on %s (%d SMs), bf16 in, fp32 accumulate, bf16 out, row-major NN, median of %d reps\n",
           prop.name, prop.multiProcessorCount, reps);
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const float alpha = 1.f, beta = 0.f;
    for (Row &r : rows) {
        void *A, *B, *C, *R;
        size_t an = (size_t)r.m * r.k, bn = (size_t)r.k * r.n, cn = (size_t)r.m * r.n;
        if (carve_alloc(arena, an * 2, st, &A) != CARVE_OK || carve_alloc(arena, bn * 2, st, &B) != CARVE_OK ||
            carve_alloc(arena, cn * 2, st, &C) != CARVE_OK || carve_alloc(arena, cn * 2, st, &R) != CARVE_OK) {
            fprintf(stderr, "carve_alloc: %s\n", carve_last_error(arena));
            return 1;
        }
        fill_kernel<<<1024, 256, 0, st>>>((__nv_bfloat16 *)A, an, 1);
        fill_kernel<<<1024, 256, 0, st>>>((__nv_bfloat16 *)B, bn, 2);
        auto run = [&](int which) {
            if (which == 2) {
                cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, r.n, r.m, r.k, &alpha, B, CUDA_R_16BF, r.n, A, CUDA_R_16BF,
                             r.k, &beta, R, CUDA_R_16BF, r.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
                return;
            }
            setenv("CARVE_GEMM_PATH", which == 0 ? "auto" : "mma", 1);
            carve_status s = carve_gemm(arena, (carve_stream)st, CARVE_ROW_MAJOR, CARVE_NO_TRANS, CARVE_NO_TRANS,
                                           r.m, r.n, r.k, alpha, A, r.k, B, r.n, beta, C, r.n, CARVE_DTYPE_BF16,
                                           CARVE_DTYPE_BF16);
            if (s != CARVE_OK) {
                fprintf(stderr, "carve_gemm: %s\n", carve_last_error(NULL));
                exit(1);
            }
            if (which == 0)
                r.path = carve__gemm_tc_last_path();
        };
        for (int w = 0; w < 3; w++)
            for (int which = 0; which < 3; which++)
                run(which);
        std::vector<float> t[3];
        for (int i = 0; i < reps; i++)
            for (int which = 0; which < 3; which++) {
                CK(cudaEventRecord(e0, st));
                run(which);
                CK(cudaEventRecord(e1, st));
                CK(cudaEventSynchronize(e1));
                float ms = 0;
                CK(cudaEventElapsedTime(&ms, e0, e1));
                t[which].push_back(ms);
            }
        r.carve_ms = median(t[0]);
        r.mma_ms = median(t[1]);
        r.cublas_ms = median(t[2]);
        carve_free(arena, A);
        carve_free(arena, B);
        carve_free(arena, C);
        carve_free(arena, R);
        CK(cudaStreamSynchronize(st));
    }
    printf("| M | N | K | carve path | carve TFLOP/s | mma.sync TFLOP/s | cuBLAS TFLOP/s | carve / cuBLAS |\n");
    printf("|---:|---:|---:|---|---:|---:|---:|---:|\n");
    for (const Row &r : rows) {
        double fl = 2.0 * r.m * r.n * (double)r.k;
        printf("| %d | %d | %d | %s | %.1f | %.1f | %.1f | %.2f |\n", r.m, r.n, r.k,
               r.path == 2 ? "stream" : r.path == 1 ? "wgmma" : "mma", fl / r.carve_ms / 1e9, fl / r.mma_ms / 1e9,
               fl / r.cublas_ms / 1e9, r.cublas_ms / r.carve_ms);
    }
    cublasDestroy(h);
    carve_arena_destroy(arena);
    return 0;
}
