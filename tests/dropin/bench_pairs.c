/*
 * bench_pairs.c — the interposer's cost per allocation+free pair on the CPU:
 * N pairs of one size through the driver API (cuMemAlloc_v2+cuMemFree_v2,
 * cuMemAllocAsync+cuMemFreeAsync on a non-blocking stream) or through a
 * shared CUDA runtime (cudaMalloc+cudaFree, cudaMallocAsync+cudaFreeAsync;
 * here the mock runtime of mock_cudart.c), over the mock driver.
 *
 * The one idea: the pairs run inside one function, bench_pairs_loop, so
 * callgrind can collect exactly their instructions (count_pairs.sh toggles
 * collection on that function and divides by N); the mock driver and
 * runtime count the calls that reached them, so the same run says how many
 * driver calls a pair costs, which is what dominates on a real GPU. Prints
 * one line: "pairs MODE N SIZE ns_per_pair driver_calls_per_pair
 * runtime_calls_per_pair".
 *
 * Usage: dropin_bench_pairs driver|async|runtime|runtime-async [N [SIZE]]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mock_api.h"

int cudaMalloc(void **p, size_t size);
int cudaFree(void *p);
int cudaMallocAsync(void **p, size_t size, CUstream s);
int cudaFreeAsync(void *p, CUstream s);
unsigned long long mock_cudart_calls(void);

enum mode { DRIVER, ASYNC, RUNTIME, RUNTIME_ASYNC };

static inline unsigned long one_pair(enum mode m, size_t size, CUstream s) {
    CUdeviceptr d = 0;
    void *p = NULL;
    switch (m) {
    case DRIVER: return (cuMemAlloc_v2(&d, size) != 0) + (cuMemFree_v2(d) != 0);
    case ASYNC: return (cuMemAllocAsync(&d, size, s) != 0) + (cuMemFreeAsync(d, s) != 0);
    case RUNTIME: return (cudaMalloc(&p, size) != 0) + (cudaFree(p) != 0);
    case RUNTIME_ASYNC: return (cudaMallocAsync(&p, size, s) != 0) + (cudaFreeAsync(p, s) != 0);
    }
    return 1;
}

/* The measured loop: nothing else runs inside it. */
/* noipa: never merged with warm_up (same code), so callgrind can find it. */
__attribute__((noipa)) unsigned long bench_pairs_loop(enum mode m, long n, size_t size, CUstream s);
__attribute__((noipa)) unsigned long bench_pairs_loop(enum mode m, long n, size_t size, CUstream s) {
    unsigned long bad = 0;
    for (long i = 0; i < n; i++)
        bad += one_pair(m, size, s);
    return bad;
}

/* The same pairs, before measuring (segments reserved, caches warm). */
__attribute__((noipa)) static unsigned long warm_up(enum mode m, long n, size_t size, CUstream s) {
    unsigned long bad = 0;
    for (long i = 0; i < n; i++)
        bad += one_pair(m, size, s);
    return bad;
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    static const char *const names[] = {"driver", "async", "runtime", "runtime-async"};
    int m = -1;
    for (int i = 0; argc > 1 && i < 4; i++)
        if (strcmp(argv[1], names[i]) == 0)
            m = i;
    if (m < 0 || argc > 4) {
        fprintf(stderr, "usage: dropin_bench_pairs driver|async|runtime|runtime-async [N [SIZE]]\n");
        return 2;
    }
    long n = argc > 2 ? atol(argv[2]) : 100000;
    size_t size = argc > 3 ? (size_t)strtoull(argv[3], NULL, 10) : 4096;
    CUcontext ctx;
    CUstream s = NULL;
    if (m == DRIVER || m == ASYNC) { /* a driver-API program sets its context up itself */
        cuInit(0);
        cuDevicePrimaryCtxRetain(&ctx, 0);
        cuCtxSetCurrent(ctx);
    } else {
        cudaFree(NULL); /* the usual way to start the runtime */
    }
    if (m == ASYNC || m == RUNTIME_ASYNC)
        cuStreamCreate(&s, 1 /* non-blocking */);
    unsigned long bad = warm_up((enum mode)m, 1000, size, s);
    unsigned long long drv0 = mock_cuda_calls(), rt0 = mock_cudart_calls();
    double t0 = now_ns();
    bad += bench_pairs_loop((enum mode)m, n, size, s);
    double t1 = now_ns();
    unsigned long long drv = mock_cuda_calls() - drv0, rt = mock_cudart_calls() - rt0;
    if (s)
        cuStreamDestroy_v2(s);
    printf("pairs %s %ld %zu %.1f %.3f %.3f\n", names[m], n, size, (t1 - t0) / (double)n, (double)drv / (double)n,
           (double)rt / (double)n);
    if (bad)
        fprintf(stderr, "dropin_bench_pairs: %lu calls failed\n", bad);
    return bad ? 1 : 0;
}
