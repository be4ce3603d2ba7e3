/*
 * ktest.h — what the GPU kernel tests share: skipping without a device,
 * checking every CUDA call, the quick mode, a CUDA arena.
 */
#ifndef CARVE_KTEST_H
#define CARVE_KTEST_H

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "carve.h"
#include "test_util.h"

/* A CUDA call that must succeed; on failure the test stops (the device
 * state is unknown afterwards). */
#define CUDA_OK(call)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        test_checks++;                                                                             \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "FAIL %s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call,                \
                    cudaGetErrorName(e_), cudaGetErrorString(e_));                                 \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Exit 77 (meson: skipped) when no CUDA device can be used. */
static inline void ktest_require_device(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("SKIP: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorName(e) : "0 devices");
        exit(77);
    }
}

/* CARVE_TEST_QUICK=1: only small sizes (for compute-sanitizer runs). */
static inline int ktest_quick(void) {
    const char *q = getenv("CARVE_TEST_QUICK");
    return q && *q && strcmp(q, "0") != 0;
}

static inline double ktest_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A CUDA arena on device 0 that grows on demand. */
static inline carve_arena *ktest_arena(void) {
    return test_arena(CARVE_BACKEND_CUDA, 1, 0, 0);
}

/* Device free memory now (for the leak check at the end of a test). */
static inline size_t ktest_free_bytes(void) {
    size_t f = 0, t = 0;
    CUDA_OK(cudaMemGetInfo(&f, &t));
    return f;
}

#endif
