/*
 * fault_app.c — one allocation through every entry point carve-run's
 * interposer numbers for fault injection (--fail-every, --fail-at), in
 * turn and for a few rounds, over the mock driver and the mock shared
 * runtime; run by test_dropin_cpu.py with and without the options.
 *
 * The one idea: the program numbers its own calls from 1 exactly as the
 * interposer must (one number per call of the program, whichever way it
 * reaches the driver), so it can print which calls failed and the test can
 * compare them with the options: the driver's entry points must answer
 * CUDA_ERROR_OUT_OF_MEMORY at those calls and the runtime's
 * cudaErrorMemoryAllocation, also in cudaGetLastError (once), and every
 * other call must succeed. What succeeds is freed at once, so whatever was
 * counted comes back.
 *
 * After each round, calls the driver refuses as invalid (a NULL pitch, a
 * NULL property, a NULL pointer) must answer CUDA_ERROR_INVALID_VALUE and
 * take no number.
 *
 * Prints "OK faults calls=N failed=K,K,... per_entry=NAME:n,... errors_ok=0|1
 * invalid_ok=0|1" or FAIL lines. Usage: dropin_fault_app [ROUNDS]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mock_api.h"

static int failures;

int cudaMalloc(void **p, size_t size);
int cudaFree(void *p);
int cudaMallocAsync(void **p, size_t size, CUstream s);
int cudaMallocAsync_ptsz(void **p, size_t size, CUstream s);
int cudaFreeAsync(void *p, CUstream s);
int cudaMallocPitch(void **p, size_t *pitch, size_t width, size_t height);
typedef struct cudaPitchedPtr {
    void *ptr;
    size_t pitch, xsize, ysize;
} cudaPitchedPtr;
typedef struct cudaExtent {
    size_t width, height, depth;
} cudaExtent;
int cudaMalloc3D(cudaPitchedPtr *p, cudaExtent e);
int cudaMallocFromPoolAsync(void **p, size_t size, CUmemoryPool pool, CUstream s);
int cudaGetLastError(void);

static CUstream stream;
static CUmemoryPool pool;

/* One allocation and, when it succeeds, its free; the allocation's result. */
typedef int (*entry_fn)(void);

static int d_alloc(void) {
    CUdeviceptr p;
    int r = cuMemAlloc_v2(&p, 4096);
    if (!r)
        CU(cuMemFree_v2(p));
    return r;
}
static int d_async(void) {
    CUdeviceptr p;
    int r = cuMemAllocAsync(&p, 4096, stream);
    if (!r)
        CU(cuMemFreeAsync(p, stream));
    return r;
}
static int d_async_ptsz(void) {
    CUdeviceptr p;
    int r = cuMemAllocAsync_ptsz(&p, 4096, stream);
    if (!r)
        CU(cuMemFreeAsync(p, stream));
    return r;
}
static int d_pitch(void) {
    CUdeviceptr p;
    size_t pitch;
    int r = cuMemAllocPitch_v2(&p, &pitch, 100, 10, 4);
    if (!r)
        CU(cuMemFree_v2(p));
    return r;
}
static int d_create(void) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = 1;
    prop.location.type = 1;
    CUmemGenericAllocationHandle h;
    int r = cuMemCreate(&h, (size_t)2 << 20, &prop, 0);
    if (!r)
        CU(cuMemRelease(h));
    return r;
}
static int d_pool(void) {
    CUdeviceptr p;
    int r = cuMemAllocFromPoolAsync(&p, 4096, pool, stream);
    if (!r)
        CU(cuMemFreeAsync(p, stream));
    return r;
}
static int d_pool_ptsz(void) {
    CUdeviceptr p;
    int r = cuMemAllocFromPoolAsync_ptsz(&p, 4096, pool, stream);
    if (!r)
        CU(cuMemFreeAsync(p, stream));
    return r;
}
static int r_malloc(void) {
    void *p;
    int r = cudaMalloc(&p, 4096);
    if (!r)
        CU(cudaFree(p));
    return r;
}
static int r_async(void) {
    void *p;
    int r = cudaMallocAsync(&p, 4096, stream);
    if (!r)
        CU(cudaFreeAsync(p, stream));
    return r;
}
static int r_async_ptsz(void) {
    void *p;
    int r = cudaMallocAsync_ptsz(&p, 4096, NULL);
    if (!r)
        CU(cudaFree(p));
    return r;
}
static int r_pitch(void) {
    void *p;
    size_t pitch;
    int r = cudaMallocPitch(&p, &pitch, 100, 10);
    if (!r)
        CU(cudaFree(p));
    return r;
}
static int r_3d(void) {
    cudaPitchedPtr p;
    cudaExtent e = {64, 4, 4};
    int r = cudaMalloc3D(&p, e);
    if (!r)
        CU(cudaFree(p.ptr));
    return r;
}
static int r_pool(void) {
    void *p;
    int r = cudaMallocFromPoolAsync(&p, 4096, pool, stream);
    if (!r)
        CU(cudaFreeAsync(p, stream));
    return r;
}

/* Calls the driver refuses as invalid: answered as it answers them
 * (CUDA_ERROR_INVALID_VALUE), never failed on purpose, never numbered. */
static int invalid_calls(void) {
    CUdeviceptr p;
    CUmemGenericAllocationHandle h;
    int pitch = cuMemAllocPitch_v2(&p, NULL, 100, 10, 4), create = cuMemCreate(&h, (size_t)2 << 20, NULL, 0),
        alloc = cuMemAlloc_v2(NULL, 4096);
    if (pitch != 1 || create != 1 || alloc != 1) {
        printf("FAIL invalid calls answered %d (NULL pitch), %d (NULL property), %d (NULL pointer)\n", pitch, create,
               alloc);
        return 0;
    }
    return 1;
}

static const struct {
    const char *name;
    entry_fn fn;
    int runtime;
} entries[] = {
    {"cuMemAlloc_v2", d_alloc, 0},           {"cuMemAllocAsync", d_async, 0},
    {"cuMemAllocAsync_ptsz", d_async_ptsz, 0}, {"cuMemAllocPitch_v2", d_pitch, 0},
    {"cuMemCreate", d_create, 0},            {"cuMemAllocFromPoolAsync", d_pool, 0},
    {"cuMemAllocFromPoolAsync_ptsz", d_pool_ptsz, 0},
    {"cudaMalloc", r_malloc, 1},             {"cudaMallocAsync", r_async, 1},
    {"cudaMallocAsync_ptsz", r_async_ptsz, 1}, {"cudaMallocPitch", r_pitch, 1},
    {"cudaMalloc3D", r_3d, 1},               {"cudaMallocFromPoolAsync", r_pool, 1},
};
#define NENTRIES ((int)(sizeof(entries) / sizeof(entries[0])))

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 3;
    CU(cudaFree(NULL)); /* the runtime starts, and makes device 0's primary context current */
    CU(cuStreamCreate(&stream, 1));
    CU(cuMemPoolCreate(&pool, NULL));
    char failed[4096] = "", *f = failed;
    int per_entry[NENTRIES] = {0}, errors_ok = 1, invalid_ok = 1, calls = 0;
    for (int round = 0; round < rounds; round++, invalid_ok &= invalid_calls())
        for (int j = 0; j < NENTRIES; j++) {
            int r = entries[j].fn();
            calls++;
            if (!r)
                continue;
            per_entry[j]++;
            f += snprintf(f, sizeof(failed) - (size_t)(f - failed), "%s%d", failed[0] ? "," : "", calls);
            /* the driver's CUDA_ERROR_OUT_OF_MEMORY, the runtime's cudaErrorMemoryAllocation (both 2),
             * recorded by the runtime for cudaGetLastError once */
            int last = entries[j].runtime ? cudaGetLastError() : 2;
            int cleared = entries[j].runtime ? cudaGetLastError() : 0;
            if (r != 2 || last != 2 || cleared != 0) {
                printf("FAIL call %d (%s): error %d, cudaGetLastError %d then %d\n", calls, entries[j].name, r, last,
                       cleared);
                errors_ok = 0;
            }
        }
    CU(cuStreamDestroy_v2(stream));
    CU(cuMemPoolDestroy(pool));
    printf("OK faults calls=%d failed=%s per_entry=", calls, failed[0] ? failed : "none");
    for (int j = 0; j < NENTRIES; j++)
        printf("%s%s:%d", j ? "," : "", entries[j].name, per_entry[j]);
    printf(" errors_ok=%d invalid_ok=%d\n", errors_ok, invalid_ok);
    return failures || !errors_ok ? 1 : 0;
}
