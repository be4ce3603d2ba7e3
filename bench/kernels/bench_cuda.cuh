// bench_cuda.cuh — what the bf16 GEMM benchmarks share: CK, which exits
// with the file, line and CUDA error when a runtime call fails, and
// fill_kernel, which fills a bf16 buffer with values in [-1, 1] that a
// seed makes reproducible (exact in bf16, so results can be compared
// element by element).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CK(call)                                                                                    \
    do {                                                                                            \
        cudaError_t e_ = (call);                                                                    \
        if (e_ != cudaSuccess) {                                                                    \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                                \
        }                                                                                           \
    } while (0)

static __global__ void fill_kernel(__nv_bfloat16 *p, size_t n, unsigned seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned x = (unsigned)i * 2654435761u ^ seed;
        x ^= x >> 13;
        x *= 0x5bd1e995u;
        x ^= x >> 15;
        p[i] = __float2bfloat16(((int)(x % 129) - 64) / 64.f);
    }
}
