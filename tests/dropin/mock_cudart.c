/*
 * mock_cudart.c — a stand-in shared CUDA runtime (libcudart_mock.so) for the
 * CPU drop-in tests: the few runtime functions programs allocate with.
 *
 * The one idea: it reaches the driver the way every CUDA runtime does — it
 * opens libcuda.so.1, looks up cuGetProcAddress_v2 with dlsym and fetches
 * each driver function through it — so under carve-run its calls land in
 * the interposer's driver hooks, as a real shared cudart's do. Like the real
 * one it starts lazily (the first call that needs a context makes device
 * 0's primary context current), keeps a per-thread last error that
 * cudaGetLastError reads and clears, maps driver errors to runtime ones,
 * and takes a NULL stream as the legacy stream in the plain functions and as
 * the per-thread stream in the _ptsz ones. It counts every call into it
 * (mock_cudart_calls), so a test can tell a call the interposer's exported
 * runtime functions answered themselves from one they passed on to here.
 * The pitched, 3-D and pool allocations reach the driver as the real
 * runtime's do (cuMemAllocPitch, cuMemAllocFromPoolAsync).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef struct mock_ctx *CUcontext;
typedef struct mock_stream *CUstream;
typedef int cudaError_t;

enum {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorUnknown = 999,
};

static struct {
    CUresult (*Init)(unsigned);
    CUresult (*CtxGetCurrent)(CUcontext *);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*PrimaryCtxRetain)(CUcontext *, int);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemAllocAsync)(CUdeviceptr *, size_t, CUstream);
    CUresult (*MemAllocAsync_ptsz)(CUdeviceptr *, size_t, CUstream);
    CUresult (*MemFreeAsync)(CUdeviceptr, CUstream);
    CUresult (*MemFreeAsync_ptsz)(CUdeviceptr, CUstream);
    CUresult (*MemAllocPitch)(CUdeviceptr *, size_t *, size_t, size_t, unsigned);
    CUresult (*MemAllocFromPool)(CUdeviceptr *, size_t, void *, CUstream);
} drv;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int drv_ok;
static unsigned long long calls; /* atomic */
static __thread cudaError_t last_error;

static void fetch(const char *name, unsigned long long flags, void *slot,
                  CUresult (*gpa)(const char *, void **, int, unsigned long long, int *)) {
    void *fn = NULL;
    int status = 0;
    if (gpa(name, &fn, 12000, flags, &status) == 0 && fn)
        memcpy(slot, &fn, sizeof(fn));
}

static void start_driver(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    void *sym = h ? dlsym(h, "cuGetProcAddress_v2") : NULL;
    CUresult (*gpa)(const char *, void **, int, unsigned long long, int *) = NULL;
    if (!sym)
        return;
    memcpy(&gpa, &sym, sizeof(sym));
    fetch("cuInit", 0, &drv.Init, gpa);
    fetch("cuCtxGetCurrent", 0, &drv.CtxGetCurrent, gpa);
    fetch("cuCtxSetCurrent", 0, &drv.CtxSetCurrent, gpa);
    fetch("cuDevicePrimaryCtxRetain", 0, &drv.PrimaryCtxRetain, gpa);
    fetch("cuMemAlloc", 0, &drv.MemAlloc, gpa);
    fetch("cuMemFree", 0, &drv.MemFree, gpa);
    fetch("cuMemAllocAsync", 0, &drv.MemAllocAsync, gpa);
    fetch("cuMemAllocAsync", 2 /* per-thread default stream */, &drv.MemAllocAsync_ptsz, gpa);
    fetch("cuMemFreeAsync", 0, &drv.MemFreeAsync, gpa);
    fetch("cuMemFreeAsync", 2, &drv.MemFreeAsync_ptsz, gpa);
    fetch("cuMemAllocPitch", 0, &drv.MemAllocPitch, gpa);
    fetch("cuMemAllocFromPoolAsync", 0, &drv.MemAllocFromPool, gpa);
    drv_ok = drv.Init && drv.CtxGetCurrent && drv.CtxSetCurrent && drv.PrimaryCtxRetain && drv.MemAlloc &&
             drv.MemFree && drv.MemAllocAsync && drv.MemAllocAsync_ptsz && drv.MemFreeAsync &&
             drv.MemFreeAsync_ptsz && drv.Init(0) == 0;
}

static cudaError_t fail(cudaError_t e) {
    if (e != cudaSuccess)
        last_error = e;
    return e;
}

static cudaError_t from_driver(CUresult r) {
    switch (r) {
    case 0: return cudaSuccess;
    case 1: return fail(cudaErrorInvalidValue);
    case 2: return fail(cudaErrorMemoryAllocation);
    case 3: return fail(cudaErrorInitializationError);
    case 900: return fail(cudaErrorStreamCaptureUnsupported);
    case 901: return fail(cudaErrorStreamCaptureInvalidated);
    default: return fail(cudaErrorUnknown);
    }
}

/* The runtime's lazy start: the driver, then a current context. */
static cudaError_t enter(void) {
    __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
    pthread_once(&once, start_driver);
    if (!drv_ok)
        return fail(cudaErrorInitializationError);
    CUcontext cur = NULL;
    if (drv.CtxGetCurrent(&cur) == 0 && cur)
        return cudaSuccess;
    if (drv.PrimaryCtxRetain(&cur, 0) != 0 || drv.CtxSetCurrent(cur) != 0)
        return fail(cudaErrorInitializationError);
    return cudaSuccess;
}

EXPORT cudaError_t cudaMalloc(void **p, size_t size) {
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return e;
    if (!p)
        return fail(cudaErrorInvalidValue);
    *p = NULL;
    if (!size)
        return cudaSuccess;
    CUdeviceptr d = 0;
    e = from_driver(drv.MemAlloc(&d, size));
    if (e == cudaSuccess)
        *p = (void *)(uintptr_t)d;
    return e;
}

EXPORT cudaError_t cudaFree(void *p) {
    cudaError_t e = enter(); /* cudaFree(NULL) starts the runtime */
    if (e != cudaSuccess || !p)
        return e;
    return from_driver(drv.MemFree((CUdeviceptr)(uintptr_t)p));
}

/* The driver's function is read once enter() has found it: this may be
 * the process's first call into the runtime. */
static cudaError_t malloc_async(void **p, size_t size, CUstream s, int ptsz) {
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return e;
    if (!p)
        return fail(cudaErrorInvalidValue);
    *p = NULL;
    CUdeviceptr d = 0;
    e = from_driver((ptsz ? drv.MemAllocAsync_ptsz : drv.MemAllocAsync)(&d, size, s));
    if (e == cudaSuccess)
        *p = (void *)(uintptr_t)d;
    return e;
}

EXPORT cudaError_t cudaMallocAsync(void **p, size_t size, CUstream s) {
    return malloc_async(p, size, s, 0);
}
EXPORT cudaError_t cudaMallocAsync_ptsz(void **p, size_t size, CUstream s) {
    return malloc_async(p, size, s, 1);
}

EXPORT cudaError_t cudaFreeAsync(void *p, CUstream s) {
    cudaError_t e = enter();
    return e != cudaSuccess ? e : from_driver(drv.MemFreeAsync((CUdeviceptr)(uintptr_t)p, s));
}
EXPORT cudaError_t cudaFreeAsync_ptsz(void *p, CUstream s) {
    cudaError_t e = enter();
    return e != cudaSuccess ? e : from_driver(drv.MemFreeAsync_ptsz((CUdeviceptr)(uintptr_t)p, s));
}

EXPORT cudaError_t cudaMallocPitch(void **p, size_t *pitch, size_t width, size_t height) {
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return e;
    if (!p || !pitch || !drv.MemAllocPitch)
        return fail(cudaErrorInvalidValue);
    CUdeviceptr d = 0;
    e = from_driver(drv.MemAllocPitch(&d, pitch, width, height, 16));
    *p = e == cudaSuccess ? (void *)(uintptr_t)d : NULL;
    return e;
}

typedef struct cudaPitchedPtr {
    void *ptr;
    size_t pitch, xsize, ysize;
} cudaPitchedPtr;
typedef struct cudaExtent {
    size_t width, height, depth;
} cudaExtent;

/* A 3-D allocation is a pitched one of height x depth rows. */
EXPORT cudaError_t cudaMalloc3D(cudaPitchedPtr *p, cudaExtent e3) {
    if (!p)
        return fail(cudaErrorInvalidValue);
    size_t pitch = 0;
    void *ptr = NULL;
    cudaError_t e = cudaMallocPitch(&ptr, &pitch, e3.width, e3.height * e3.depth);
    *p = (cudaPitchedPtr){ptr, pitch, e3.width, e3.height};
    return e;
}

EXPORT cudaError_t cudaMallocFromPoolAsync(void **p, size_t size, void *pool, CUstream s) {
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return e;
    if (!p || !drv.MemAllocFromPool)
        return fail(cudaErrorInvalidValue);
    CUdeviceptr d = 0;
    e = from_driver(drv.MemAllocFromPool(&d, size, pool, s));
    *p = e == cudaSuccess ? (void *)(uintptr_t)d : NULL;
    return e;
}

EXPORT cudaError_t cudaGetLastError(void) {
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}
EXPORT cudaError_t cudaPeekAtLastError(void) { return last_error; }

/* Calls into this runtime so far (the tests' view of what was passed on). */
EXPORT unsigned long long mock_cudart_calls(void) { return __atomic_load_n(&calls, __ATOMIC_RELAXED); }
