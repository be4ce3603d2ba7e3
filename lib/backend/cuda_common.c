/*
 * cuda_common.c — what the two CUDA backends share: the device guard, error
 * mapping, events and the device queries.
 *
 * Every call makes the arena's device current and restores the caller's
 * device afterwards, so an arena on device 1 can be used from a thread whose
 * current device is 0. Errors are mapped to statuses with the CUDA error's
 * name in the message, and the runtime's last error is cleared so the caller
 * never inherits a non-sticky error from carve. Events are recycled through
 * a small free list: cudaEventCreate costs more than a record. Records,
 * queries and waits go into the arena's driver ledger (ledger.h). The calls
 * the driver calls potentially unsafe during a stream capture are made in
 * relaxed capture mode (carve_cuda_relax), so that a capture in global
 * mode on another thread neither refuses them nor breaks.
 */
#include "backend/cuda_common.h"

#include <cuda.h>
#include <string.h>

#include "backend/leaves.h"
#include "backend/peers.h"

typedef carve_cuda_ctx cuda_ctx;

carve_status carve_cuda_error(cudaError_t e, const char *what) {
    (void)cudaGetLastError(); /* leave no error behind for the caller */
    carve_backend_fail("%s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
    carve_backend_code(CARVE_DRIVER_ERROR_RUNTIME, (int)e);
    switch (e) {
    case cudaErrorMemoryAllocation: return CARVE_ERR_OOM;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice: return CARVE_ERR_NO_DEVICE;
    default: return CARVE_ERR_BACKEND;
    }
}

carve_status carve_cuda_enter(int dev, int *prev) {
    cudaError_t e = cudaGetDevice(prev);
    if (e != cudaSuccess)
        return carve_cuda_error(e, "cudaGetDevice");
    if (*prev != dev && (e = cudaSetDevice(dev)) != cudaSuccess)
        return carve_cuda_error(e, "cudaSetDevice");
    return CARVE_OK;
}

void carve_cuda_leave(int dev, int prev) {
    if (prev != dev)
        (void)cudaSetDevice(prev);
}

carve_status carve_cuda_event_record(carve_be *be, carve_stream s, void **out) {
    cuda_ctx *c = be->ctx;
    *out = NULL;
    int prev;
    carve_status st = carve_cuda_enter(c->device, &prev);
    if (st != CARVE_OK)
        return st;
    cudaEvent_t ev = NULL;
    carve_mutex_lock(&c->lock);
    if (c->nspare)
        ev = c->spare[--c->nspare];
    carve_mutex_unlock(&c->lock);
    cudaError_t e = cudaSuccess;
    if (!ev)
        e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    const char *what = "cudaEventCreateWithFlags";
    if (e == cudaSuccess) {
        carve_ledger_add(&be->ledger, CARVE_DRV_EVENT_RECORD, 1, 0, 0);
        e = cudaEventRecord(ev, (cudaStream_t)s);
        what = "cudaEventRecord";
    }
    if (e != cudaSuccess) {
        st = carve_cuda_error(e, what);
        if (ev)
            (void)cudaEventDestroy(ev);
    } else {
        *out = ev;
    }
    carve_cuda_leave(c->device, prev);
    return st;
}

/* A stream of the backend's own waits for the program's event, and an event
 * recorded after the wait completes with it: the program's event can be
 * recorded again or destroyed at once, since a wait takes the record it
 * sees when it is queued. */
carve_status carve_cuda_event_follow(carve_be *be, void *user, void **out) {
    cuda_ctx *c = be->ctx;
    *out = NULL;
    int prev;
    carve_status st = carve_cuda_enter(c->device, &prev);
    if (st != CARVE_OK)
        return st;
    cudaError_t e = cudaSuccess;
    carve_mutex_lock(&c->lock);
    if (!c->follow)
        e = cudaStreamCreateWithFlags(&c->follow, cudaStreamNonBlocking);
    cudaStream_t fs = c->follow;
    carve_mutex_unlock(&c->lock);
    if (e != cudaSuccess) {
        st = carve_cuda_error(e, "cudaStreamCreateWithFlags");
    } else if ((e = cudaStreamWaitEvent(fs, (cudaEvent_t)user, 0)) != cudaSuccess) {
        st = carve_cuda_error(e, "cudaStreamWaitEvent");
    }
    carve_cuda_leave(c->device, prev);
    return st == CARVE_OK ? carve_cuda_event_record(be, (carve_stream)fs, out) : st;
}

/* A driver entry point, found once through the runtime's entry-point query
 * (NULL where the driver has none); *state: 0 not asked yet, 1 asked. */
static void *driver_entry(const char *name, void **slot, int *state) {
    if (!__atomic_load_n(state, __ATOMIC_ACQUIRE)) {
        void *p = NULL;
        enum cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess) {
            (void)cudaGetLastError();
            p = NULL;
        }
        __atomic_store_n(slot, p, __ATOMIC_RELAXED);
        __atomic_store_n(state, 1, __ATOMIC_RELEASE);
    }
    return __atomic_load_n(slot, __ATOMIC_RELAXED);
}

/* cuThreadExchangeStreamCaptureMode. */
typedef CUresult (*exchange_fn)(CUstreamCaptureMode *);
static exchange_fn exchange(void) {
    static void *slot;
    static int state;
    void *p = driver_entry("cuThreadExchangeStreamCaptureMode", &slot, &state);
    exchange_fn f;
    memcpy(&f, &p, sizeof(f));
    return f;
}

/* cuStreamIsCapturing: asked through the driver, whose refusal leaves the
 * runtime's last error (the program's) as it was. */
typedef CUresult (*is_capturing_fn)(CUstream, CUstreamCaptureStatus *);
static is_capturing_fn is_capturing(void) {
    static void *slot;
    static int state;
    void *p = driver_entry("cuStreamIsCapturing", &slot, &state);
    is_capturing_fn f;
    memcpy(&f, &p, sizeof(f));
    return f;
}

int carve_cuda_relax(void) {
    exchange_fn fn = exchange();
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (!fn || fn(&m) != CUDA_SUCCESS)
        return -1;
    return (int)m;
}

void carve_cuda_unrelax(int old) {
    if (old >= 0) {
        CUstreamCaptureMode m = (CUstreamCaptureMode)old;
        (void)exchange()(&m);
    }
}

/* A blocking stream of the device's context is being captured: asked about
 * the legacy stream, the driver says CUDA_ERROR_STREAM_CAPTURE_IMPLICIT (the
 * only way it tells; compute-sanitizer reports each such answer as an API
 * error). Asked through the driver, so that the runtime's last error stays
 * the program's; through the runtime (cudaErrorStreamCaptureImplicit, then
 * cleared) where the driver's entry point is not found. */
int carve_cuda_context_capturing(carve_be *be) {
    carve_cuda_ctx *c = be->ctx;
    int prev;
    if (carve_cuda_enter(c->device, &prev) != CARVE_OK)
        return 0;
    int capturing;
    is_capturing_fn f = is_capturing();
    if (f) {
        CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
        capturing = f(CU_STREAM_LEGACY, &status) == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    } else {
        enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
        cudaError_t e = cudaStreamIsCapturing(cudaStreamLegacy, &status);
        if (e != cudaSuccess)
            (void)cudaGetLastError();
        capturing = e == cudaErrorStreamCaptureImplicit;
    }
    carve_cuda_leave(c->device, prev);
    return capturing;
}

int carve_cuda_capturing(carve_be *be, carve_stream s) {
    (void)be;
    enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    cudaError_t e = cudaStreamIsCapturing((cudaStream_t)s, &status);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return status != cudaStreamCaptureStatusNone;
}

/* A refusal for a capture's sake (cudaErrorStreamCaptureUnsupported
 * through cudaErrorStreamCaptureWrongThread): it says nothing about whether
 * the work is done. */
static int capture_refusal(cudaError_t e) {
    return e >= cudaErrorStreamCaptureUnsupported && e <= cudaErrorStreamCaptureWrongThread;
}

/* Without cuThreadExchangeStreamCaptureMode the calling thread keeps its
 * own mode, in which asking about or waiting for an event while another
 * thread captures in global mode is refused and breaks that capture:
 * neither is done while a capture is seen. */
static int cannot_relax(carve_be *be) { return !exchange() && carve_cuda_context_capturing(be); }

int carve_cuda_event_query(carve_be *be, void *ev) {
    if (cannot_relax(be))
        return 0;
    carve_ledger_add(&be->ledger, CARVE_DRV_EVENT_QUERY, 1, 0, 0);
    int mode = carve_cuda_relax();
    cudaError_t e = cudaEventQuery((cudaEvent_t)ev);
    carve_cuda_unrelax(mode);
    if (e == cudaSuccess)
        return 1;
    (void)cudaGetLastError();
    return e == cudaErrorNotReady || capture_refusal(e) ? 0 : -1;
}

carve_status carve_cuda_event_sync(carve_be *be, void *ev) {
    if (cannot_relax(be)) {
        carve_backend_fail("no event is waited for while a stream capture is underway and the driver cannot make "
                           "the wait in relaxed capture mode (no cuThreadExchangeStreamCaptureMode)");
        return CARVE_ERR_BACKEND;
    }
    carve_ledger_add(&be->ledger, CARVE_DRV_EVENT_SYNC, 1, 0, 0);
    int mode = carve_cuda_relax();
    cudaError_t e = cudaEventSynchronize((cudaEvent_t)ev);
    carve_cuda_unrelax(mode);
    return e == cudaSuccess ? CARVE_OK : carve_cuda_error(e, "cudaEventSynchronize");
}

carve_status carve_cuda_device_sync(carve_be *be) {
    cuda_ctx *c = be->ctx;
    int prev;
    carve_status st = carve_cuda_enter(c->device, &prev);
    if (st != CARVE_OK)
        return st;
    carve_ledger_add(&be->ledger, CARVE_DRV_DEVICE_SYNC, 1, 0, 0);
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess)
        st = carve_cuda_error(e, "cudaDeviceSynchronize");
    carve_cuda_leave(c->device, prev);
    return st;
}

void carve_cuda_event_release(carve_be *be, void *ev) {
    cuda_ctx *c = be->ctx;
    carve_mutex_lock(&c->lock);
    if (c->nspare == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        cudaEvent_t *n = realloc(c->spare, cap * sizeof(*n));
        if (n) {
            c->spare = n;
            c->cap = cap;
        }
    }
    if (c->nspare < c->cap) {
        c->spare[c->nspare++] = (cudaEvent_t)ev;
        ev = NULL;
    }
    carve_mutex_unlock(&c->lock);
    if (ev)
        (void)cudaEventDestroy((cudaEvent_t)ev);
}

void carve_cuda_ctx_destroy(carve_cuda_ctx *c) {
    int prev;
    int entered = carve_cuda_enter(c->device, &prev) == CARVE_OK;
    for (size_t i = 0; i < c->nspare; i++)
        (void)cudaEventDestroy(c->spare[i]);
    if (c->follow)
        (void)cudaStreamDestroy(c->follow);
    if (entered)
        carve_cuda_leave(c->device, prev);
    free(c->spare);
    carve_mutex_destroy(&c->lock);
}

int carve_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

carve_status carve_cuda_mem_info(int device, size_t *free_bytes, size_t *total_bytes) {
    *free_bytes = *total_bytes = 0;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        carve_cuda_error(e, "cudaGetDeviceCount");
        return CARVE_ERR_NO_DEVICE;
    }
    if (device < 0 || device >= n) {
        carve_backend_fail("device %d does not exist (%d device%s visible)", device, n, n == 1 ? "" : "s");
        return CARVE_ERR_NO_DEVICE;
    }
    int prev;
    carve_status st = carve_cuda_enter(device, &prev);
    if (st != CARVE_OK)
        return st;
    /* Made at arena creation, which may come during another thread's
     * capture: relaxed, as every call carve makes that a driver may count
     * as potentially unsafe (the documentation does not list this one
     * either way). */
    int mode = carve_cuda_relax();
    e = cudaMemGetInfo(free_bytes, total_bytes);
    carve_cuda_unrelax(mode);
    if (e != cudaSuccess)
        st = carve_cuda_error(e, "cudaMemGetInfo");
    carve_cuda_leave(device, prev);
    return st;
}

static int can_access(int peer, int owner, void *arg) {
    (void)arg;
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, peer, owner) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return can;
}

carve_status carve_cuda_peer_list(const carve_config *cfg, int device, int *out, int *n) {
    *n = 0;
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess)
        return carve_cuda_error(e, "cudaGetDeviceCount");
    return carve_peer_list(cfg->peers, cfg->peer_devices, device, ndev, can_access, NULL, out, n);
}

void *carve_cuda_driver_fn(const char *name) {
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess || !fn) {
        (void)cudaGetLastError();
        carve_backend_fail("the driver has no %s", name);
        return NULL;
    }
    return fn;
}
