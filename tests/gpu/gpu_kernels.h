/*
 * gpu_kernels.h — the test kernels (gpu_kernels.cu) as C functions: the
 * buffer pattern, pattern fill and verify, the late writer and a float ramp.
 * Each launches asynchronously on stream s, on the current device, and ends
 * the test (exit 1) if the launch fails.
 */
#ifndef CARVE_GPU_KERNELS_H
#define CARVE_GPU_KERNELS_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __CUDACC__
#define GPU_HD __host__ __device__
#else
#define GPU_HD
#endif

/* The pattern word `word` of buffer `id` (a splitmix64 finaliser of both). */
static inline GPU_HD uint64_t gpu_pattern(uint64_t id, uint64_t word) {
    uint64_t z = id * 0x9E3779B97F4A7C15ull + word * 0xD1B54A32D192ED03ull + 0x632BE59BD9B4E019ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Write gpu_pattern(id, i) into every 64-bit word i of buf[0, bytes); a tail
 * of fewer than 8 bytes gets the low bytes of word bytes/8's pattern. buf must
 * be 8-byte aligned. */
void gpu_fill(void *buf, size_t bytes, uint64_t id, cudaStream_t s);
/* Add the number of words (and tail bytes) of buf that differ from the
 * pattern of id to *dcount (device memory, see gpu_counter). */
void gpu_verify(const void *buf, size_t bytes, uint64_t id, unsigned long long *dcount, cudaStream_t s);
/* The late writer: a small grid whose blocks first sleep delay_ms
 * milliseconds (by the GPU's global timer), then fill buf as gpu_fill does.
 * It occupies few SMs, so other streams run beside it. */
void gpu_late_fill(void *buf, size_t bytes, uint64_t id, unsigned delay_ms, cudaStream_t s);
/* buf[i] = scale * (i % 1024): exact in float for small integer scales. */
void gpu_fill_ramp(float *buf, size_t n, float scale, cudaStream_t s);
/* Add the number of i with buf[i] != scale * (i % 1024) to *dcount. */
void gpu_verify_ramp(const float *buf, size_t n, float scale, unsigned long long *dcount, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
