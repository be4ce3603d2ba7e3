/*
 * fake_cudart.c — a stand-in libcudart.so.13 with two "devices" of host
 * memory, so that the default arenas (carve_device_arena, CUDA backend) exist
 * on a machine without a GPU and the routing layer's paths through them can
 * be tested (test_default_arenas.c, run with LD_LIBRARY_PATH pointing here).
 *
 * The one idea: carve's CUDA backend needs only a handful of runtime calls in
 * segments mode (device count and selection, cudaMalloc / cudaFree, events,
 * memory info), and every one of them can be answered from host memory: a
 * "device pointer" is a host pointer, events are always complete. Kernel
 * launches and IPC fail as they would without a device. A test finds
 * fake_cudart_devices to tell this runtime from a real one. The symbols carry the version libcudart.so.13 (the map
 * file), as the real library's do.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef int cudaError_t;
enum { OK = 0, ERR_VALUE = 1, ERR_MEMORY = 2, ERR_NO_DEVICE = 100, ERR_DEVICE = 101, ERR_UNSUPPORTED = 801 };

#define NDEV 2
#define DEVICE_BYTES ((size_t)8 << 30)
#define ALIGN ((size_t)2 << 20)

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t g_used[NDEV];
static __thread int t_device;
static __thread cudaError_t t_last;

/* A device allocation: ALIGN bytes of header in front, so the pointer is aligned. */
typedef struct block {
    size_t size;
    int device;
} block;

static cudaError_t fail(cudaError_t e) { return t_last = e; }

EXPORT cudaError_t cudaGetDeviceCount(int *n) {
    *n = NDEV;
    return OK;
}

EXPORT cudaError_t cudaGetDevice(int *d) {
    *d = t_device;
    return OK;
}

EXPORT cudaError_t cudaSetDevice(int d) {
    if (d < 0 || d >= NDEV)
        return fail(ERR_DEVICE);
    t_device = d;
    return OK;
}

EXPORT cudaError_t cudaMalloc(void **p, size_t size) {
    *p = NULL;
    pthread_mutex_lock(&g_lock);
    int ok = size <= DEVICE_BYTES - g_used[t_device];
    if (ok)
        g_used[t_device] += size;
    pthread_mutex_unlock(&g_lock);
    void *m = NULL;
    if (!ok || posix_memalign(&m, ALIGN, ALIGN + size) != 0) {
        if (ok) {
            pthread_mutex_lock(&g_lock);
            g_used[t_device] -= size;
            pthread_mutex_unlock(&g_lock);
        }
        return fail(ERR_MEMORY);
    }
    block *b = m;
    b->size = size;
    b->device = t_device;
    *p = (char *)m + ALIGN;
    return OK;
}

EXPORT cudaError_t cudaFree(void *p) {
    if (!p)
        return OK;
    block *b = (block *)((char *)p - ALIGN);
    pthread_mutex_lock(&g_lock);
    g_used[b->device] -= b->size;
    pthread_mutex_unlock(&g_lock);
    free(b);
    return OK;
}

EXPORT cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total) {
    pthread_mutex_lock(&g_lock);
    *free_bytes = DEVICE_BYTES - g_used[t_device];
    pthread_mutex_unlock(&g_lock);
    *total = DEVICE_BYTES;
    return OK;
}

EXPORT cudaError_t cudaDeviceSynchronize(void) { return OK; }

EXPORT cudaError_t cudaEventCreateWithFlags(void **e, unsigned flags) {
    (void)flags;
    *e = malloc(16);
    return *e ? OK : fail(ERR_MEMORY);
}

EXPORT cudaError_t cudaEventDestroy(void *e) {
    free(e);
    return OK;
}

EXPORT cudaError_t cudaEventRecord(void *e, void *s) {
    (void)e;
    (void)s;
    return OK;
}

/* Events are always complete: a wait for one has nothing to wait for. */
EXPORT cudaError_t cudaStreamWaitEvent(void *s, void *e, unsigned flags) {
    (void)s;
    (void)e;
    (void)flags;
    return OK;
}

/* No stream is ever captured here (cudaStreamCaptureStatusNone). */
EXPORT cudaError_t cudaStreamIsCapturing(void *s, int *status) {
    (void)s;
    *status = 0;
    return OK;
}

EXPORT cudaError_t cudaEventQuery(void *e) {
    (void)e;
    return OK;
}

EXPORT cudaError_t cudaEventSynchronize(void *e) {
    (void)e;
    return OK;
}

EXPORT cudaError_t cudaStreamCreateWithFlags(void **s, unsigned flags) {
    (void)flags;
    *s = malloc(16);
    return *s ? OK : fail(ERR_MEMORY);
}

EXPORT cudaError_t cudaStreamDestroy(void *s) {
    free(s);
    return OK;
}

EXPORT cudaError_t cudaDeviceCanAccessPeer(int *can, int d, int peer) {
    (void)d;
    (void)peer;
    *can = 0;
    return OK;
}

EXPORT cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned flags) {
    (void)peer;
    (void)flags;
    return fail(ERR_UNSUPPORTED);
}

EXPORT cudaError_t cudaDeviceDisablePeerAccess(int peer) {
    (void)peer;
    return fail(ERR_UNSUPPORTED);
}

EXPORT cudaError_t cudaDeviceGetAttribute(int *v, int attr, int d) {
    (void)attr;
    (void)d;
    *v = 0;
    return OK;
}

EXPORT cudaError_t cudaGetDriverEntryPointByVersion(const char *name, void **fn, unsigned version,
                                                    unsigned long long flags, int *status) {
    (void)name;
    (void)version;
    (void)flags;
    *fn = NULL;
    if (status)
        *status = 0;
    return fail(ERR_UNSUPPORTED);
}

EXPORT const char *cudaGetErrorName(cudaError_t e) {
    return e == ERR_MEMORY ? "cudaErrorMemoryAllocation" : "cudaErrorFake";
}

EXPORT const char *cudaGetErrorString(cudaError_t e) { return e == OK ? "no error" : "fake runtime: not supported"; }

EXPORT cudaError_t cudaGetLastError(void) {
    cudaError_t e = t_last;
    t_last = OK;
    return e;
}

EXPORT cudaError_t cudaPeekAtLastError(void) { return t_last; }

EXPORT cudaError_t cudaPointerGetAttributes(void *attr, const void *p) {
    (void)attr;
    (void)p;
    return fail(ERR_VALUE);
}

EXPORT cudaError_t cudaIpcGetMemHandle(void *h, void *p) {
    (void)h;
    (void)p;
    return fail(ERR_UNSUPPORTED);
}

EXPORT cudaError_t cudaIpcOpenMemHandle(void **p, char h[64], unsigned flags) {
    (void)h;
    (void)flags;
    *p = NULL;
    return fail(ERR_UNSUPPORTED);
}

EXPORT cudaError_t cudaIpcCloseMemHandle(void *p) {
    (void)p;
    return fail(ERR_UNSUPPORTED);
}

EXPORT cudaError_t cudaFuncGetAttributes(void *attr, const void *f) {
    (void)attr;
    (void)f;
    return fail(ERR_NO_DEVICE);
}

EXPORT cudaError_t cudaFuncSetAttribute(const void *f, int attr, int v) {
    (void)f;
    (void)attr;
    (void)v;
    return fail(ERR_NO_DEVICE);
}

EXPORT cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, const void *f, int threads,
                                                                        size_t smem, unsigned flags) {
    (void)f;
    (void)threads;
    (void)smem;
    (void)flags;
    *n = 0;
    return fail(ERR_NO_DEVICE);
}

/* The streaming GEMM kernel asks whether a cluster size can be placed. */
EXPORT cudaError_t cudaOccupancyMaxActiveClusters(int *n, const void *f, const void *config) {
    (void)f;
    (void)config;
    *n = 0;
    return fail(ERR_NO_DEVICE);
}

/* What a program compiled with nvcc calls to register and launch kernels:
 * registration succeeds (nothing to register), launches fail. */
static void *g_fatbin;
EXPORT void **__cudaRegisterFatBinary(void *fatbin) {
    (void)fatbin;
    return &g_fatbin;
}
EXPORT void __cudaRegisterFatBinaryEnd(void **h) { (void)h; }
EXPORT void __cudaUnregisterFatBinary(void **h) { (void)h; }
EXPORT void __cudaRegisterFunction(void **h, const char *host, char *dev, const char *name, int limit, void *tid,
                                   void *bid, void *bdim, void *gdim, int *wsize) {
    (void)h, (void)host, (void)dev, (void)name, (void)limit, (void)tid, (void)bid, (void)bdim, (void)gdim,
        (void)wsize;
}
EXPORT void __cudaRegisterVar(void **h, char *host, char *dev, const char *name, int ext, size_t size, int constant,
                              int global) {
    (void)h, (void)host, (void)dev, (void)name, (void)ext, (void)size, (void)constant, (void)global;
}
EXPORT unsigned __cudaPushCallConfiguration(void) { return 0; }
EXPORT cudaError_t __cudaPopCallConfiguration(void) { return OK; }
EXPORT cudaError_t __cudaLaunchKernel(void) { return fail(ERR_NO_DEVICE); }
/* cuda_runtime.h's cudaLaunchKernelEx template (the kernels' launches, where
 * the compiler keeps it out of line) calls this one. */
EXPORT cudaError_t cudaLaunchKernelExC(void) { return fail(ERR_NO_DEVICE); }
EXPORT cudaError_t __cudaGetKernel(void) { return fail(ERR_NO_DEVICE); }

/* The number of devices this stand-in has: its mark, for the tests. */
EXPORT int fake_cudart_devices(void) { return NDEV; }
