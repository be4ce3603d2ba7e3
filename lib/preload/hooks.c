/*
 * hooks.c — the driver functions the interposer serves, under their exported
 * names: allocation and free (plain and stream-ordered, with their per-thread-
 * default-stream forms), memory information, legacy IPC export (refused on
 * virtual-memory granules), and the stream and capture
 * calls it must watch to keep frees safe.
 *
 * The one idea: every path through the CUDA runtime (static or shared) and
 * every driver-API program ends in these few entry points, reached either by
 * linking (exported symbols here) or by lookup (lookup.c hands out these same
 * functions from dlsym and cuGetProcAddress). Each serves a call from carve
 * when the calling thread's context has an arena, and otherwise calls the
 * driver's own function unchanged: pointers carve did not hand out, calls
 * before CUDA is up, allocations on a stream that is being captured into a
 * graph (the driver must make those graph nodes itself). What goes to the
 * driver is counted against the cap (meter.c) and given back when freed;
 * failures injected on purpose (faults.c) come first. carve-run's
 * measurement switch (carve_run_serve, include/carve_run.h) lives here too:
 * while it is off, new allocations take the driver's way, on the branch the
 * hooks already take when not everything is plain.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "carve_run.h"
#include "preload/exports.h"
#include "preload/preload.h"
#include "preload/timing.h"

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);
typedef CUresult (*alloc_async_fn)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*free_async_fn)(CUdeviceptr, CUstream);
typedef CUresult (*info_fn)(size_t *, size_t *);
typedef CUresult (*total_fn)(size_t *, CUdevice);
typedef CUresult (*stream_create_fn)(CUstream *, unsigned);
typedef CUresult (*stream_prio_fn)(CUstream *, unsigned, int);
typedef CUresult (*stream_destroy_fn)(CUstream);
typedef CUresult (*begin_fn)(CUstream, int);
typedef CUresult (*begin_v1_fn)(CUstream);
typedef CUresult (*begin_graph_fn)(CUstream, CUgraph, const CUgraphNode *, const void *, size_t, int);
typedef CUresult (*end_fn)(CUstream, CUgraph *);
typedef CUresult (*is_capturing_fn)(CUstream, int *);
typedef CUresult (*ctx_destroy_fn)(CUcontext);
typedef CUresult (*ctx_reset_fn)(CUdevice);
typedef CUresult (*ctx_retain_fn)(CUcontext *, CUdevice);
typedef CUresult (*ctx_release_fn)(CUdevice);
typedef CUresult (*ctx_state_fn)(CUdevice, unsigned *, int *);
typedef CUresult (*ipc_get_fn)(CUipcMemHandle *, CUdeviceptr);
typedef CUresult (*peer_fn)(CUcontext, unsigned);
typedef CUresult (*ctx_create_v2_fn)(CUcontext *, unsigned, CUdevice);
typedef CUresult (*ctx_create_v3_fn)(CUcontext *, void *, int, unsigned, CUdevice);
typedef CUresult (*ctx_create_v4_fn)(CUcontext *, void *, unsigned, CUdevice);
typedef CUresult (*green_create_fn)(void **, void *, CUdevice, unsigned);
typedef CUresult (*green_stream_fn)(CUstream *, void *, unsigned, int);

static struct {
    alloc_fn MemAlloc;
    free_fn MemFree;
    alloc_async_fn MemAllocAsync, MemAllocAsync_ptsz;
    free_async_fn MemFreeAsync, MemFreeAsync_ptsz;
    info_fn MemGetInfo;
    total_fn DeviceTotalMem;
    stream_create_fn StreamCreate;
    stream_prio_fn StreamCreateWithPriority;
    stream_destroy_fn StreamDestroy, StreamDestroy_v1;
    begin_fn BeginCapture, BeginCapture_ptsz;
    begin_v1_fn BeginCapture_v1, BeginCapture_v1_ptsz;
    begin_graph_fn BeginCaptureToGraph, BeginCaptureToGraph_ptsz;
    end_fn EndCapture, EndCapture_ptsz;
    is_capturing_fn IsCapturing, IsCapturing_ptsz;
    ctx_destroy_fn CtxDestroy, CtxDestroy_v1;
    ctx_reset_fn PrimaryCtxReset, PrimaryCtxReset_v1;
    ctx_retain_fn PrimaryCtxRetain;
    ctx_release_fn PrimaryCtxRelease, PrimaryCtxRelease_v1;
    ctx_state_fn PrimaryCtxGetState;
    ipc_get_fn IpcGetMemHandle;
    peer_fn EnablePeerAccess;
    ctx_create_v2_fn CtxCreate_v1, CtxCreate_v2;
    ctx_create_v3_fn CtxCreate_v3;
    ctx_create_v4_fn CtxCreate_v4;
    green_create_fn GreenCtxCreate;
    green_stream_fn GreenCtxStreamCreate;
} real;

static int resolved; /* atomic: CARVE_READY_* as carve_run.ready, 0 until resolve_all ran */

static void resolve_all(void) {
    carve_faults_init();
    carve_meter_init();
    carve_session_init();
#define R(field, name) CARVE_SET_FN(real.field, carve_real_driver(name))
    R(MemAlloc, "cuMemAlloc_v2");
    R(MemFree, "cuMemFree_v2");
    R(MemAllocAsync, "cuMemAllocAsync");
    R(MemAllocAsync_ptsz, "cuMemAllocAsync_ptsz");
    R(MemFreeAsync, "cuMemFreeAsync");
    R(MemFreeAsync_ptsz, "cuMemFreeAsync_ptsz");
    R(MemGetInfo, "cuMemGetInfo_v2");
    R(DeviceTotalMem, "cuDeviceTotalMem_v2");
    R(StreamCreate, "cuStreamCreate");
    R(StreamCreateWithPriority, "cuStreamCreateWithPriority");
    R(StreamDestroy, "cuStreamDestroy_v2");
    R(StreamDestroy_v1, "cuStreamDestroy");
    R(BeginCapture, "cuStreamBeginCapture_v2");
    R(BeginCapture_v1, "cuStreamBeginCapture");
    R(BeginCapture_v1_ptsz, "cuStreamBeginCapture_ptsz");
    R(BeginCapture_ptsz, "cuStreamBeginCapture_v2_ptsz");
    R(BeginCaptureToGraph, "cuStreamBeginCaptureToGraph");
    R(BeginCaptureToGraph_ptsz, "cuStreamBeginCaptureToGraph_ptsz");
    R(EndCapture, "cuStreamEndCapture");
    R(EndCapture_ptsz, "cuStreamEndCapture_ptsz");
    R(IsCapturing, "cuStreamIsCapturing");
    R(IsCapturing_ptsz, "cuStreamIsCapturing_ptsz");
    R(CtxDestroy, "cuCtxDestroy_v2");
    R(CtxDestroy_v1, "cuCtxDestroy");
    R(PrimaryCtxReset, "cuDevicePrimaryCtxReset_v2");
    R(PrimaryCtxReset_v1, "cuDevicePrimaryCtxReset");
    R(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    R(PrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    R(PrimaryCtxRelease_v1, "cuDevicePrimaryCtxRelease");
    R(PrimaryCtxGetState, "cuDevicePrimaryCtxGetState");
    R(IpcGetMemHandle, "cuIpcGetMemHandle");
    R(EnablePeerAccess, "cuCtxEnablePeerAccess");
    R(CtxCreate_v1, "cuCtxCreate");
    R(CtxCreate_v2, "cuCtxCreate_v2");
    R(CtxCreate_v3, "cuCtxCreate_v3");
    R(CtxCreate_v4, "cuCtxCreate_v4");
    R(GreenCtxCreate, "cuGreenCtxCreate");
    R(GreenCtxStreamCreate, "cuGreenCtxStreamCreate");
#undef R
    /* From 0 only: a second resolve_all racing the first leaves a switch
     * that carve_run_serve turned meanwhile as it is. */
    int none = 0;
    __atomic_compare_exchange_n(&resolved, &none, carve_faults_armed ? CARVE_READY_FAULTS : CARVE_READY_SERVE, 0,
                                __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

static inline void resolve(void) {
    if (CARVE_UNLIKELY(!__atomic_load_n(&resolved, __ATOMIC_ACQUIRE)))
        resolve_all();
}

__attribute__((constructor)) static void preload_start(void) { resolve_all(); }

#define NOT_SUPPORTED 801 /* CUDA_ERROR_NOT_SUPPORTED: the driver lacks the function */
#define CALL_REAL(fn, ...) (real.fn ? real.fn(__VA_ARGS__) : NOT_SUPPORTED)

/* The context to serve this call from, or NULL to pass it through. */
static carve_ctx *serving(void) {
    resolve();
    carve_ctx *c = carve_ctx_current();
    if (c && !carve_ctx_arena(c)) {
        carve_session_warn(carve_ctx_device(c), carve_ctx_last_error(c));
        return NULL;
    }
    return c;
}

/* The default streams (NULL, legacy, per-thread) name no particular
 * stream: allocations and frees on them are unordered. */
static int is_default_stream(CUstream s) { return (uintptr_t)s <= 2; }

/* Whether s is being captured into a graph right now (cheap when nothing
 * is). The per-thread stream can be captured (CU_STREAM_PER_THREAD, or
 * NULL in a _ptsz call); the legacy stream cannot. */
static int captured(CUstream s, int ptsz) {
    if (!carve_capture_active() || s == CU_STREAM_LEGACY || (!s && !ptsz))
        return 0;
    int status = CU_STREAM_CAPTURE_STATUS_NONE;
    is_capturing_fn f = ptsz && real.IsCapturing_ptsz ? real.IsCapturing_ptsz : real.IsCapturing;
    return f && f(s, &status) == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE;
}

#define NOINLINE __attribute__((noinline))

static NOINLINE CUresult alloc_not_served(CUdeviceptr *dptr, size_t size, CUstream stream, int ordered, int ptsz,
                                          CUresult r, carve_ctx *c);

static NOINLINE CUresult alloc_passed(CUdeviceptr *dptr, size_t size, CUstream stream, int ordered, int ptsz);

/* An allocation when not everything is plain: resolve; then the answer to a
 * call that is to fail on purpose (CUDA_ERROR_OUT_OF_MEMORY, nothing
 * allocated), the driver's while carve_run_serve has turned serving off, or
 * CARVE_CTX_NOT_SERVED: serve it as usual. */
static NOINLINE CUresult alloc_first(CUdeviceptr *dptr, size_t size, CUstream stream, int ordered, int ptsz) {
    resolve();
    if (carve_faults_armed && dptr && size && carve_fault_next())
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (__atomic_load_n(&resolved, __ATOMIC_ACQUIRE) == CARVE_READY_PASS)
        return alloc_passed(dptr, size, stream, ordered, ptsz);
    return CARVE_CTX_NOT_SERVED;
}

static inline CUresult do_alloc(CUdeviceptr *dptr, size_t size, CUstream stream, int ordered, int ptsz) {
    if (CARVE_UNLIKELY(__atomic_load_n(&resolved, __ATOMIC_ACQUIRE) != CARVE_READY_SERVE)) {
        CUresult first = alloc_first(dptr, size, stream, ordered, ptsz);
        if (first != CARVE_CTX_NOT_SERVED)
            return first;
    }
    uint64_t t = carve_clock_in();
    uintptr_t p = 0;
    carve_ctx *c = NULL;
    carve_stream s = ordered && !is_default_stream(stream) ? (carve_stream)stream : NULL;
    CUresult r = CARVE_CTX_NOT_SERVED;
    if (CARVE_LIKELY(dptr && size && !(ordered && captured(stream, ptsz))))
        r = carve_ctx_alloc(size, s, 0, &p, &c);
    if (CARVE_LIKELY(r == CUDA_SUCCESS)) {
        *dptr = (CUdeviceptr)p;
        if (CARVE_UNLIKELY(carve_run.watching))
            carve_session_saw_alloc(c, p, size, s);
        carve_clock_out(c, t);
        return r;
    }
    return alloc_not_served(dptr, size, stream, ordered, ptsz, r, c);
}

/* Why carve's arena could not serve size bytes: the arena's own words, and,
 * when the cap holds memory outside this arena, what holds it. */
static void oom_message(carve_ctx *c, size_t size) {
    int dev = carve_ctx_device(c);
    carve_meter_view v;
    char why[1024], held[448];
    if (carve_meter_get(dev, &v) && v.cap != SIZE_MAX && v.bytes > carve_memory_reserved(carve_ctx_arena(c))) {
        carve_counted_explain(dev, held, sizeof(held));
        snprintf(why, sizeof(why), "%s\n  Outside this arena: %s", carve_ctx_last_error(c), held);
        carve_session_oom(dev, size, why);
    } else {
        carve_session_oom(dev, size, carve_ctx_last_error(c));
    }
}

/* An allocation carve did not serve: out of memory, or the driver's. */
static CUresult alloc_not_served(CUdeviceptr *dptr, size_t size, CUstream stream, int ordered, int ptsz,
                                 CUresult r, carve_ctx *c) {
    if (r != CARVE_CTX_NOT_SERVED) {
        if (r == CUDA_ERROR_OUT_OF_MEMORY)
            oom_message(c, size);
        return r;
    }
    /* Not served: no context, an arena that could not be made, a NULL
     * pointer or size 0 (the driver's answer), or a graph node. */
    if (!c)
        c = carve_ctx_current();
    if (c && !carve_ctx_arena(c)) {
        carve_session_warn(carve_ctx_device(c), carve_ctx_last_error(c));
        c = NULL;
    }
    carve_ctx_passthrough(c);
    /* Counted against the cap, unless it is a graph's allocation node (the
     * driver allocates graph memory when the graph runs, which carve does
     * not see: not counted) or the process is a forked child (nothing is
     * counted there). A stream-ordered allocation outlives its context. */
    int dev = -1;
    void *ctx = NULL;
    if (dptr && size && __atomic_load_n(&carve_run.ready, __ATOMIC_ACQUIRE) && !(ordered && captured(stream, ptsz)))
        carve_meter_where(&dev, &ctx);
    if (dev >= 0 && carve_counted_take(dev, size, CARVE_METER_DRIVER) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    r = !ordered ? CALL_REAL(MemAlloc, dptr, size)
        : ptsz   ? CALL_REAL(MemAllocAsync_ptsz, dptr, size, stream)
                 : CALL_REAL(MemAllocAsync, dptr, size, stream);
    if (dev >= 0) {
        if (r != CUDA_SUCCESS)
            carve_meter_untake(dev, size, CARVE_METER_DRIVER);
        else
            carve_meter_add_ptr((uintptr_t)*dptr, size, size, dev, CARVE_METER_DRIVER, ordered ? NULL : ctx);
    }
    if (r == CUDA_SUCCESS && dptr)
        carve_session_trace_alloc((uintptr_t)*dptr, size, ordered ? (carve_stream)stream : NULL);
    return r;
}

/* An allocation while carve_run_serve has turned serving off: the driver's,
 * as any allocation passed through (counted against the cap). Where the
 * driver has no memory left for it, carve first gives back what the
 * context's arena holds cached or waiting (cuMemGetInfo counts that memory
 * as the program's to have, and would be wrong otherwise), and the driver
 * is asked once more. */
static CUresult alloc_passed(CUdeviceptr *dptr, size_t size, CUstream stream, int ordered, int ptsz) {
    CUresult r = alloc_not_served(dptr, size, stream, ordered, ptsz, CARVE_CTX_NOT_SERVED, NULL);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && !(ordered && captured(stream, ptsz))) {
        carve_ctx *c = carve_ctx_current();
        if (c && carve_ctx_make_room(c))
            r = alloc_not_served(dptr, size, stream, ordered, ptsz, CARVE_CTX_NOT_SERVED, NULL);
    }
    return r;
}

static NOINLINE CUresult free_not_ours(CUdeviceptr dptr, CUstream stream, int ordered, int ptsz);

static inline CUresult do_free(CUdeviceptr dptr, CUstream stream, int ordered, int ptsz) {
    if (!dptr) /* as the driver: freeing NULL does nothing */
        return free_not_ours(dptr, stream, ordered, ptsz);
    resolve();
    uint64_t t = carve_clock_in();
    carve_ctx *c = NULL;
    CUresult r = CARVE_CTX_NOT_OURS;
    if (CARVE_LIKELY(__atomic_load_n(&carve_run.ready, __ATOMIC_RELAXED))) {
        /* On a default stream, or on a stream being captured, a free is
         * treated as unordered: kept until all earlier work has completed. */
        int use_stream = ordered && !is_default_stream(stream) && !captured(stream, ptsz);
        r = carve_ctx_free((uintptr_t)dptr, use_stream, (carve_stream)stream,
                           carve_run.watching ? carve_session_saw_free : NULL, &c);
    }
    if (CARVE_LIKELY(r != CARVE_CTX_NOT_OURS)) {
        carve_clock_out(c, t);
        return r;
    }
    return free_not_ours(dptr, stream, ordered, ptsz);
}

/* A free of a pointer carve did not hand out (NULL included). */
static CUresult free_not_ours(CUdeviceptr dptr, CUstream stream, int ordered, int ptsz) {
    if (!dptr) /* as the driver: freeing NULL does nothing */
        return ordered ? (ptsz ? CALL_REAL(MemFreeAsync_ptsz, dptr, stream) : CALL_REAL(MemFreeAsync, dptr, stream))
                       : CALL_REAL(MemFree, dptr);
    /* Not a buffer carve handed out. Memory inside the arena of any live
     * context (a stray or double free, whichever context is current) never
     * goes to the driver, which would free the whole segment under carve. */
    if (carve_ctx_contains((uintptr_t)dptr))
        return CUDA_ERROR_INVALID_VALUE;
    carve_ctx_passthrough(carve_ctx_current());
    /* A free on a stream being captured is a node of the graph: the driver
     * frees the memory when the graph runs, which carve does not see, so
     * it stays counted against the cap. */
    int counted = __atomic_load_n(&carve_run.ready, __ATOMIC_ACQUIRE) && !(ordered && captured(stream, ptsz));
    CUresult r = !ordered ? CALL_REAL(MemFree, dptr)
        : ptsz   ? CALL_REAL(MemFreeAsync_ptsz, dptr, stream)
                 : CALL_REAL(MemFreeAsync, dptr, stream);
    if (r == CUDA_SUCCESS) {
        if (counted)
            carve_meter_forget_ptr((uintptr_t)dptr); /* pitched, pool or passed-through memory comes back */
        carve_session_trace_free((uintptr_t)dptr);
    }
    return r;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) { return do_alloc(dptr, bytesize, NULL, 0, 0); }
CUresult cuMemFree_v2(CUdeviceptr dptr) { return do_free(dptr, NULL, 0, 0); }

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
    return do_alloc(dptr, bytesize, hStream, 1, 0);
}
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
    return do_alloc(dptr, bytesize, hStream, 1, 1);
}
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) { return do_free(dptr, hStream, 1, 0); }
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) { return do_free(dptr, hStream, 1, 1); }

/* ---- the measurement switch (include/carve_run.h) ------------------------ *
 * One state for both kinds of entry point: carve_run.ready, which the
 * runtime exports read, and this file's resolved, which the driver hooks
 * read, change together under a lock (taken around fork, so that a child
 * never finds it held). Frees never look at the switch. */
static pthread_mutex_t serve_lock = PTHREAD_MUTEX_INITIALIZER;
static void serve_lock_take(void) { pthread_mutex_lock(&serve_lock); }
static void serve_lock_give(void) { pthread_mutex_unlock(&serve_lock); }
__attribute__((constructor)) static void serve_fork_safe(void) {
    pthread_atfork(serve_lock_take, serve_lock_give, serve_lock_give);
}

int carve_run_serve(int on) {
    resolve();
    serve_lock_take();
    int was = __atomic_load_n(&carve_run.ready, __ATOMIC_ACQUIRE), r = -1;
    if (was != CARVE_READY_NOT_YET) { /* not a child that serves nothing */
        int now = !on ? CARVE_READY_PASS : carve_faults_armed ? CARVE_READY_FAULTS : CARVE_READY_SERVE;
        __atomic_store_n(&resolved, now, __ATOMIC_RELEASE);
        __atomic_store_n(&carve_run.ready, now, __ATOMIC_RELEASE);
        r = was != CARVE_READY_PASS;
    }
    serve_lock_give();
    return r;
}

/* What the program can still obtain under the cap: from a context carve
 * serves, with its arena's cached memory; from one it does not serve (an
 * arena that could not be made, a context taken away right now), the cap
 * all the same, when one is set. */
CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
    carve_ctx *c = serving();
    if (!free_bytes || !total_bytes || !__atomic_load_n(&carve_run.ready, __ATOMIC_ACQUIRE))
        return CALL_REAL(MemGetInfo, free_bytes, total_bytes);
    int dev = -1;
    void *ctx = NULL;
    if (c)
        dev = carve_ctx_device(c);
    else if (carve_meter_where(&dev, &ctx) != 0 || carve_meter_cap(dev) == SIZE_MAX)
        return CALL_REAL(MemGetInfo, free_bytes, total_bytes);
    return carve_ctx_mem_info(c, dev, free_bytes, total_bytes);
}

/* A device's memory as the program should size itself from it: the cap
 * when one is configured for the device (CARVE_CONF), the real size else. */
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
    resolve();
    CUresult r = CALL_REAL(DeviceTotalMem, bytes, dev);
    if (r != CUDA_SUCCESS || !bytes || !__atomic_load_n(&carve_run.ready, __ATOMIC_RELAXED))
        return r;
    size_t cap = carve_meter_cap((int)dev);
    if (cap >= CARVE_SEGMENT_GRANULE && cap < *bytes)
        *bytes = cap;
    return r;
}

/* Legacy CUDA IPC (cudaIpcGetMemHandle reaches this too) exports memory
 * from cuMemAlloc only, not the cuMemCreate granules of virtual-memory mode:
 * on those a clear refusal, CUDA_ERROR_NOT_SUPPORTED, and once per device
 * a line naming --mode segments, where carve's memory is cuMemAlloc
 * segments the driver exports as it does any other. */
CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr) {
    resolve();
    int dev = __atomic_load_n(&carve_run.ready, __ATOMIC_ACQUIRE) ? carve_ctx_vmm_device((uintptr_t)dptr) : -1;
    if (dev >= 0) {
        carve_session_ipc_refused(dev);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    /* Another process's work on an exported segment waits for no stream
     * of this one: ordered reuse (quarantine.c) ends here. */
    carve_q_mark_unordered("cuIpcGetMemHandle");
    return CALL_REAL(IpcGetMemHandle, pHandle, dptr);
}

/* ---- what ends ordered reuse (quarantine.c) -------------------------------- *
 * Work that may touch carve's memory without waiting for the legacy stream
 * of the context carve serves: another context's (a context created, a
 * green context, a second device's primary context), a peer's, or a stream
 * made where carve cannot see its flags (a green context's, non-blocking).
 * Each waits for every context's barrier before the call, once per process. */

CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
    resolve();
    carve_q_mark_unordered("cuCtxEnablePeerAccess");
    return CALL_REAL(EnablePeerAccess, peer, flags);
}

CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev) {
    resolve();
    carve_q_mark_unordered("cuCtxCreate");
    return CALL_REAL(CtxCreate_v1, pctx, flags, dev);
}

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
    resolve();
    carve_q_mark_unordered("cuCtxCreate_v2");
    return CALL_REAL(CtxCreate_v2, pctx, flags, dev);
}

CUresult cuCtxCreate_v3(CUcontext *pctx, void *params, int nparams, unsigned int flags, CUdevice dev) {
    resolve();
    carve_q_mark_unordered("cuCtxCreate_v3");
    return CALL_REAL(CtxCreate_v3, pctx, params, nparams, flags, dev);
}

CUresult cuCtxCreate_v4(CUcontext *pctx, void *params, unsigned int flags, CUdevice dev) {
    resolve();
    carve_q_mark_unordered("cuCtxCreate_v4");
    return CALL_REAL(CtxCreate_v4, pctx, params, flags, dev);
}

CUresult cuGreenCtxCreate(void **phCtx, void *desc, CUdevice dev, unsigned int flags) {
    resolve();
    carve_q_mark_unordered("cuGreenCtxCreate");
    return CALL_REAL(GreenCtxCreate, phCtx, desc, dev, flags);
}

CUresult cuGreenCtxStreamCreate(CUstream *phStream, void *greenCtx, unsigned int flags, int priority) {
    resolve();
    carve_q_mark_unordered("cuGreenCtxStreamCreate");
    return CALL_REAL(GreenCtxStreamCreate, phStream, greenCtx, flags, priority);
}

/* A primary context of a second device (the runtime retains one for each
 * device a program uses). */
static int first_device = -1;

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
    resolve();
    int first = -1;
    if (!__atomic_compare_exchange_n(&first_device, &first, (int)dev, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) &&
        first != (int)dev)
        carve_q_mark_unordered("cuDevicePrimaryCtxRetain of a second device");
    return CALL_REAL(PrimaryCtxRetain, pctx, dev);
}

/* ---- streams and captures ------------------------------------------------ */

CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags) {
    resolve();
    carve_ctx_stream_creating(Flags); /* before the stream exists (quarantine.c, ordered reuse) */
    CUresult r = CALL_REAL(StreamCreate, phStream, Flags);
    if (r == CUDA_SUCCESS && phStream)
        carve_ctx_stream_created((carve_stream)*phStream, Flags);
    return r;
}

CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority) {
    resolve();
    carve_ctx_stream_creating(flags);
    CUresult r = CALL_REAL(StreamCreateWithPriority, phStream, flags, priority);
    if (r == CUDA_SUCCESS && phStream)
        carve_ctx_stream_created((carve_stream)*phStream, flags);
    return r;
}

/* resolve() first, by the caller: destroy is read from real. */
static CUresult stream_destroy(CUstream s, stream_destroy_fn destroy) {
    carve_ctx_stream_destroyed((carve_stream)s); /* while it still exists */
    return destroy ? destroy(s) : NOT_SUPPORTED;
}

CUresult cuStreamDestroy_v2(CUstream hStream) {
    resolve();
    return stream_destroy(hStream, real.StreamDestroy);
}

/* The driver's first entry points under their unversioned names (found
 * with dlsym, ctypes, or linked by old programs) are watched as the later
 * ones: a stream destroyed, a context destroyed or reset, a capture begun. */
CUresult cuStreamDestroy(CUstream hStream) {
    resolve();
    return stream_destroy(hStream, real.StreamDestroy_v1);
}

/* Captures are counted by stream (captures.c); NULL in a _ptsz call is the
 * per-thread stream. */
static carve_stream capture_key(CUstream s, int ptsz) { return (carve_stream)(!s && ptsz ? CU_STREAM_PER_THREAD : s); }

/* A capture is counted before it begins, and carve's recorders that looked
 * at the count before are waited for: from the moment the driver begins
 * it, nothing of carve's can be recorded on the legacy stream (which would
 * join the capture and break it). A capture that does not begin is taken
 * back. */
static void capture_begin(CUstream s, int ptsz) {
    carve_capture_begin(capture_key(s, ptsz));
    carve_ctx_capture_fence();
}

/* The driver's answer r to the begin that capture_begin announced. */
static CUresult capture_begun(CUstream s, int ptsz, CUresult r) {
    if (r != CUDA_SUCCESS)
        carve_capture_end(capture_key(s, ptsz));
    return r;
}

/* A capture ends when the driver says the stream is no longer capturing
 * (an invalidated capture ends too; a stream that was not capturing, or one
 * ended from the wrong thread, does not). */
static void capture_end(CUstream s, int ptsz) {
    int status = CU_STREAM_CAPTURE_STATUS_NONE;
    is_capturing_fn f = ptsz && real.IsCapturing_ptsz ? real.IsCapturing_ptsz : real.IsCapturing;
    if (!f || f(s, &status) != CUDA_SUCCESS || status == CU_STREAM_CAPTURE_STATUS_NONE)
        carve_capture_end(capture_key(s, ptsz));
}

CUresult cuStreamBeginCapture_v2(CUstream hStream, int mode) {
    resolve();
    capture_begin(hStream, 0);
    return capture_begun(hStream, 0, CALL_REAL(BeginCapture, hStream, mode));
}

/* The first cuStreamBeginCapture took no mode: global. */
CUresult cuStreamBeginCapture(CUstream hStream) {
    resolve();
    capture_begin(hStream, 0);
    return capture_begun(hStream, 0, CALL_REAL(BeginCapture_v1, hStream));
}

CUresult cuStreamBeginCapture_ptsz(CUstream hStream) {
    resolve();
    capture_begin(hStream, 1);
    return capture_begun(hStream, 1, CALL_REAL(BeginCapture_v1_ptsz, hStream));
}

CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, int mode) {
    resolve();
    capture_begin(hStream, 1);
    return capture_begun(hStream, 1, CALL_REAL(BeginCapture_ptsz, hStream, mode));
}

CUresult cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph, const CUgraphNode *deps, const void *data,
                                     size_t ndeps, int mode) {
    resolve();
    capture_begin(hStream, 0);
    return capture_begun(hStream, 0, CALL_REAL(BeginCaptureToGraph, hStream, hGraph, deps, data, ndeps, mode));
}

CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph, const CUgraphNode *deps,
                                          const void *data, size_t ndeps, int mode) {
    resolve();
    capture_begin(hStream, 1);
    return capture_begun(hStream, 1, CALL_REAL(BeginCaptureToGraph_ptsz, hStream, hGraph, deps, data, ndeps, mode));
}

CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph) {
    resolve();
    CUresult r = CALL_REAL(EndCapture, hStream, phGraph);
    capture_end(hStream, 0);
    return r;
}

CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph) {
    resolve();
    CUresult r = CALL_REAL(EndCapture_ptsz, hStream, phGraph);
    capture_end(hStream, 1);
    return r;
}

/* ---- contexts that go away ---------------------------------------------- */

/* A context the driver destroys or resets is forgotten before (nothing is
 * served from its arena while the driver frees its memory) and no arena is
 * made for its handle until the call is over: an allocation racing the
 * call goes to the driver, as it would without carve-run. The memory of
 * the context counted against the cap is given back once the driver has
 * freed it. */
/* resolve() first, by the caller: destroy is read from real. */
static CUresult ctx_destroy(CUcontext ctx, ctx_destroy_fn destroy) {
    carve_ctx_going(ctx, 1);
    CUresult r = destroy ? destroy(ctx) : NOT_SUPPORTED;
    carve_ctx_settled(ctx, r == CUDA_SUCCESS);
    return r;
}

CUresult cuCtxDestroy_v2(CUcontext ctx) {
    resolve();
    return ctx_destroy(ctx, real.CtxDestroy);
}

CUresult cuCtxDestroy(CUcontext ctx) {
    resolve();
    return ctx_destroy(ctx, real.CtxDestroy_v1);
}

static CUresult primary_reset(CUdevice dev, ctx_reset_fn reset) {
    CUcontext primary = NULL;
    if (real.PrimaryCtxRetain && real.PrimaryCtxRetain(&primary, dev) == CUDA_SUCCESS) {
        carve_ctx_going(primary, 1);
        real.PrimaryCtxRelease(dev);
    }
    CUresult r = reset ? reset(dev) : NOT_SUPPORTED;
    carve_ctx_settled(primary, r == CUDA_SUCCESS);
    return r;
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
    resolve();
    return primary_reset(dev, real.PrimaryCtxReset);
}

CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
    resolve();
    return primary_reset(dev, real.PrimaryCtxReset_v1);
}

/* The last release of a primary context resets it: the driver frees its
 * memory, and a later retain makes a fresh context behind the same handle.
 * The handle is found before (a retain undone at once, only while the
 * context is active); no arena is made for it during the release, and
 * carve forgets it, and gives back the memory counted in it, if the
 * release left it inactive. */
static CUresult primary_release(CUdevice dev, ctx_release_fn release) {
    CUcontext primary = NULL;
    unsigned flags = 0;
    int active = 0;
    int known = real.PrimaryCtxGetState && real.PrimaryCtxRetain && real.PrimaryCtxRelease &&
                real.PrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS && active &&
                real.PrimaryCtxRetain(&primary, dev) == CUDA_SUCCESS;
    if (known) {
        real.PrimaryCtxRelease(dev);
        carve_ctx_going(primary, 0);
    }
    CUresult r = release ? release(dev) : NOT_SUPPORTED;
    if (known)
        carve_ctx_settled(primary, r == CUDA_SUCCESS && real.PrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS &&
                                       !active);
    return r;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    resolve();
    return primary_release(dev, real.PrimaryCtxRelease);
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
    resolve();
    return primary_release(dev, real.PrimaryCtxRelease_v1);
}
