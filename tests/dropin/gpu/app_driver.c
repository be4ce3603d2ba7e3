/*
 * app_driver.c — a program that calls the CUDA driver API directly (linked
 * with -lcuda, its own context from cuCtxCreate), for the drop-in tests.
 *
 * The one idea: without kernels, the driver's own memset and copies are
 * enough to prove that buffers never overlap: each live buffer is set to a
 * 32-bit value of its own with cuMemsetD32Async on a non-blocking stream,
 * and read back whole before it is freed. Prints "OK driver ..." or
 * "FAIL ..." and exits non-zero.
 *
 * "app_driver bench" times cuMemAlloc+cuMemFree and cuMemAllocAsync+
 * cuMemFreeAsync pairs of one size (warm-up, 21 repetitions, the median) for
 * 4 KiB, 1 MiB and 64 MiB ("bench-small": 4 KiB only): the interposer's
 * cost with no CUDA runtime layer in between.
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int failures;
#define CU(x)                                                                    \
    do {                                                                         \
        CUresult r_ = (x);                                                       \
        if (r_ != CUDA_SUCCESS) {                                                \
            const char *n_ = "?";                                                \
            cuGetErrorName(r_, &n_);                                             \
            printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #x, n_);         \
            failures++;                                                          \
        }                                                                        \
    } while (0)

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void bench(CUstream s, int nsizes) {
    const size_t sizes[] = {4096, 1 << 20, 64 << 20};
    for (int k = 0; k < nsizes; k++)
        for (int async_ = 0; async_ < 2; async_++) {
            enum { ITERS = 2000, REPS = 21 };
            double t[REPS];
            CUdeviceptr p;
            for (int w = 0; w < 200; w++) {
                CU(async_ ? cuMemAllocAsync(&p, sizes[k], s) : cuMemAlloc(&p, sizes[k]));
                CU(async_ ? cuMemFreeAsync(p, s) : cuMemFree(p));
            }
            for (int r = 0; r < REPS; r++) {
                double t0 = now_ns();
                for (int i = 0; i < ITERS; i++) {
                    CUresult e1 = async_ ? cuMemAllocAsync(&p, sizes[k], s) : cuMemAlloc(&p, sizes[k]);
                    CUresult e2 = async_ ? cuMemFreeAsync(p, s) : cuMemFree(p);
                    failures += e1 != CUDA_SUCCESS || e2 != CUDA_SUCCESS;
                }
                t[r] = (now_ns() - t0) / ITERS;
            }
            qsort(t, REPS, sizeof(double), cmp);
            printf("bench %s %zu B: %.1f ns per pair (median of %d x %d)\n",
                   async_ ? "cuMemAllocAsync+cuMemFreeAsync" : "cuMemAlloc+cuMemFree", sizes[k], t[REPS / 2], REPS,
                   ITERS);
        }
    CU(cuStreamSynchronize(s));
}

int main(int argc, char **argv) {
    CUdevice dev;
    CUcontext ctx;
    CU(cuInit(0));
    CU(cuDeviceGet(&dev, 0));
#if CUDA_VERSION >= 13000
    CU(cuCtxCreate(&ctx, NULL, 0, dev));
#else
    CU(cuCtxCreate(&ctx, 0, dev));
#endif
    CUstream s;
    CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    int small = argc > 1 && strcmp(argv[1], "bench-small") == 0;
    if (argc > 1 && (strcmp(argv[1], "bench") == 0 || small)) {
        bench(s, small ? 1 : 3);
        CU(cuStreamDestroy(s));
        CU(cuCtxDestroy(ctx));
        printf("%s bench\n", failures ? "FAILED" : "OK");
        return failures ? 1 : 0;
    }
    enum { N = 32 };
    CUdeviceptr p[N] = {0};
    size_t words[N];
    uint32_t val[N];
    uint32_t *host = malloc((size_t)(4 << 20));
    uint64_t r = 88172645463325252ull;
    unsigned long long bad = 0, allocs = 0;
    for (int step = 0; step < 1500; step++) {
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        int i = (int)(r % N);
        if (p[i]) {
            CU(cuMemcpyDtoHAsync(host, p[i], words[i] * 4, s));
            CU(cuStreamSynchronize(s));
            for (size_t k = 0; k < words[i]; k++)
                bad += host[k] != val[i];
            CU(step % 2 ? cuMemFree(p[i]) : cuMemFreeAsync(p[i], s));
            p[i] = 0;
        } else {
            words[i] = 64 + (size_t)(r >> 16) % (1u << 20);
            val[i] = (uint32_t)(r >> 32) | 1u;
            CU(step % 3 ? cuMemAlloc(&p[i], words[i] * 4) : cuMemAllocAsync(&p[i], words[i] * 4, s));
            if (p[i])
                CU(cuMemsetD32Async(p[i], val[i], words[i], s));
            allocs++;
        }
    }
    for (int i = 0; i < N; i++)
        if (p[i])
            CU(cuMemFree(p[i]));
    size_t f = 0, t = 0;
    CU(cuMemGetInfo(&f, &t));
    CU(cuStreamDestroy(s));
    CU(cuCtxDestroy(ctx));
    free(host);
    if (bad)
        printf("FAIL driver: %llu words did not hold their value\n", bad);
    printf("%s driver %llu allocations in an own context, %llu bad words, total %zu\n",
           failures || bad ? "FAILED" : "OK", allocs, bad, t);
    return failures || bad ? 1 : 0;
}
