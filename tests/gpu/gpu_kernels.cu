/*
 * gpu_kernels.cu — the test kernels behind gpu_kernels.h: pattern fill and
 * verify, the late writer, and a float ramp for collective tests.
 *
 * Every kernel is a grid-stride loop, so one launch covers any size; the
 * verifiers touch the shared counter only when they found a mismatch, so a
 * correct run costs no atomics.
 */
#include "gpu_kernels.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

namespace {

const unsigned kThreads = 256;

unsigned grid_for(size_t n, unsigned max_blocks) {
    size_t b = (n + kThreads - 1) / kThreads;
    if (b < 1)
        b = 1;
    return b > max_blocks ? max_blocks : (unsigned)b;
}

__device__ uint64_t global_ns() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ void fill_words(uint64_t *w, size_t nwords, unsigned char *tail, unsigned ntail, uint64_t id) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < nwords; i += stride)
        w[i] = gpu_pattern(id, i);
    if (blockIdx.x == 0 && threadIdx.x < ntail)
        tail[threadIdx.x] = (unsigned char)(gpu_pattern(id, nwords) >> (8 * threadIdx.x));
}

__global__ void k_fill(uint64_t *w, size_t nwords, unsigned char *tail, unsigned ntail, uint64_t id) {
    fill_words(w, nwords, tail, ntail, id);
}

__global__ void k_late_fill(uint64_t *w, size_t nwords, unsigned char *tail, unsigned ntail, uint64_t id,
                            uint64_t delay_ns) {
    if (threadIdx.x == 0) {
        uint64_t t0 = global_ns();
        while (global_ns() - t0 < delay_ns)
            __nanosleep(20000);
    }
    __syncthreads();
    fill_words(w, nwords, tail, ntail, id);
}

__global__ void k_verify(const uint64_t *w, size_t nwords, const unsigned char *tail, unsigned ntail, uint64_t id,
                         unsigned long long *count) {
    unsigned long long bad = 0;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < nwords; i += stride)
        bad += w[i] != gpu_pattern(id, i);
    if (blockIdx.x == 0 && threadIdx.x < ntail)
        bad += tail[threadIdx.x] != (unsigned char)(gpu_pattern(id, nwords) >> (8 * threadIdx.x));
    if (bad)
        atomicAdd(count, bad);
}

__global__ void k_fill_ramp(float *x, size_t n, float scale) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        x[i] = scale * (float)(i & 1023);
}

__global__ void k_verify_ramp(const float *x, size_t n, float scale, unsigned long long *count) {
    unsigned long long bad = 0;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        bad += x[i] != scale * (float)(i & 1023);
    if (bad)
        atomicAdd(count, bad);
}

void launched(const char *what) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "FATAL %s:%d: %s launch failed: %s\n", __FILE__, __LINE__, what, cudaGetErrorName(e));
        exit(1);
    }
}

}  // namespace

extern "C" void gpu_fill(void *buf, size_t bytes, uint64_t id, cudaStream_t s) {
    size_t nw = bytes / 8;
    k_fill<<<grid_for(nw, 4096), kThreads, 0, s>>>((uint64_t *)buf, nw, (unsigned char *)buf + nw * 8,
                                                   (unsigned)(bytes % 8), id);
    launched("k_fill launch");
}

extern "C" void gpu_verify(const void *buf, size_t bytes, uint64_t id, unsigned long long *dcount, cudaStream_t s) {
    size_t nw = bytes / 8;
    k_verify<<<grid_for(nw, 4096), kThreads, 0, s>>>((const uint64_t *)buf, nw,
                                                     (const unsigned char *)buf + nw * 8, (unsigned)(bytes % 8),
                                                     id, dcount);
    launched("k_verify launch");
}

extern "C" void gpu_late_fill(void *buf, size_t bytes, uint64_t id, unsigned delay_ms, cudaStream_t s) {
    size_t nw = bytes / 8;
    /* 16 blocks: few enough that every block is resident at once (they all
     * wake after the delay) and that other streams keep most SMs. */
    k_late_fill<<<grid_for(nw, 16), kThreads, 0, s>>>((uint64_t *)buf, nw, (unsigned char *)buf + nw * 8,
                                                      (unsigned)(bytes % 8), id, (uint64_t)delay_ms * 1000000u);
    launched("k_late_fill launch");
}

extern "C" void gpu_fill_ramp(float *buf, size_t n, float scale, cudaStream_t s) {
    k_fill_ramp<<<grid_for(n, 4096), kThreads, 0, s>>>(buf, n, scale);
    launched("k_fill_ramp launch");
}

extern "C" void gpu_verify_ramp(const float *buf, size_t n, float scale, unsigned long long *dcount,
                                cudaStream_t s) {
    k_verify_ramp<<<grid_for(n, 4096), kThreads, 0, s>>>(buf, n, scale, dcount);
    launched("k_verify_ramp launch");
}
