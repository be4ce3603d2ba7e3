/*
 * driver.c — the CUDA backend through the driver API: segments from
 * cuMemAlloc, or in virtual-memory mode granules mapped into reserved
 * address space (driver_vmm.c), events from cuEvent*, all through the
 * entry-point table of driver_api.c, so this backend links neither cudart
 * nor libcuda and can sit under an interposer of both.
 *
 * The one idea: a driver backend belongs to a CUDA context, not only to a
 * device. It binds to the context current on the thread that opens it (a
 * program's own cuCtxCreate context), or else retains the device's primary
 * context (the one the runtime uses), and makes that context current around
 * every call that needs one, restoring the caller's afterwards. Events are
 * recycled through a small free list, as in the cudart backend. Every
 * allocation, free, event and wait goes into the arena's driver ledger
 * (ledger.h: cuMemAlloc and cuMemFree count as cudaMalloc and cudaFree;
 * in virtual-memory mode driver_vmm.c counts its own calls there).
 * Captures: cuStreamIsCapturing says whether a stream is being captured
 * (and, asked about the legacy stream, whether a blocking stream of the
 * context is: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT); the potentially unsafe
 * calls are made in relaxed capture mode (relax, below; driver_vmm.c's
 * through the same helper, driver_api.h), so that another thread's capture
 * in global mode neither refuses them nor breaks.
 */
#include <stdlib.h>
#include <string.h>

#include "backend/driver_api.h"
#include "backend/driver_vmm.h"
#include "backend/leaves.h"
#include "backend/peers.h"
#include "base/lock.h"

typedef struct drv_ctx {
    const carve_driver_api *api;
    CUcontext ctx;
    CUdevice dev;
    int retained;       /* ctx is the primary context, retained by us */
    carve_drv_vmm *vmm; /* virtual-memory mode; NULL: segments from cuMemAlloc */
    carve_mutex lock;   /* guards the event free list */
    CUevent *spare;
    size_t nspare, cap;
} drv_ctx;

static carve_status drv_error(const carve_driver_api *api, CUresult r, const char *what) {
    const char *name = NULL;
    if (!api || api->GetErrorName(r, &name) != CUDA_SUCCESS || !name)
        name = "unknown CUDA error";
    carve_backend_fail("%s: %s (%d)", what, name, (int)r);
    carve_backend_code(CARVE_DRIVER_ERROR_DRIVER, (int)r);
    switch (r) {
    case CUDA_ERROR_OUT_OF_MEMORY: return CARVE_ERR_OOM;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_NOT_INITIALIZED: return CARVE_ERR_NO_DEVICE;
    default: return CARVE_ERR_BACKEND;
    }
}

/* Make the backend's context current; *pushed says whether leave must pop. */
static carve_status enter(drv_ctx *c, int *pushed) {
    CUcontext cur = NULL;
    *pushed = 0;
    CUresult r = c->api->CtxGetCurrent(&cur);
    if (r != CUDA_SUCCESS)
        return drv_error(c->api, r, "cuCtxGetCurrent");
    if (cur == c->ctx)
        return CARVE_OK;
    if ((r = c->api->CtxPushCurrent(c->ctx)) != CUDA_SUCCESS)
        return drv_error(c->api, r, "cuCtxPushCurrent");
    *pushed = 1;
    return CARVE_OK;
}

static void leave(drv_ctx *c, int pushed) {
    CUcontext popped;
    if (pushed)
        (void)c->api->CtxPopCurrent(&popped);
}

/* Relaxed capture mode around one potentially unsafe call (driver_api.h). */
static int relax(const drv_ctx *c) { return carve_driver_relax(c->api); }

static void unrelax(const drv_ctx *c, int old) { carve_driver_unrelax(c->api, old); }

static carve_status drv_reserve(carve_be *be, size_t size, uintptr_t *base) {
    drv_ctx *c = be->ctx;
    int pushed;
    carve_status st = enter(c, &pushed);
    if (st != CARVE_OK)
        return st;
    CUdeviceptr p = 0;
    carve_ledger_add(&be->ledger, CARVE_DRV_MALLOC, 1, 0, size);
    int mode = relax(c);
    CUresult r = c->api->MemAlloc(&p, size);
    unrelax(c, mode);
    if (r == CUDA_SUCCESS)
        *base = (uintptr_t)p;
    else
        st = drv_error(c->api, r, "cuMemAlloc");
    leave(c, pushed);
    return st;
}

static carve_status drv_release(carve_be *be, uintptr_t base, size_t size) {
    drv_ctx *c = be->ctx;
    int pushed;
    carve_status st = enter(c, &pushed);
    if (st != CARVE_OK)
        return st;
    carve_ledger_add(&be->ledger, CARVE_DRV_FREE, 1, 0, size);
    int mode = relax(c);
    CUresult r = c->api->MemFree((CUdeviceptr)base);
    unrelax(c, mode);
    if (r != CUDA_SUCCESS)
        st = drv_error(c->api, r, "cuMemFree");
    leave(c, pushed);
    return st;
}

static carve_status drv_event_record(carve_be *be, carve_stream s, void **out) {
    drv_ctx *c = be->ctx;
    *out = NULL;
    if (c->api->CaptureActive && c->api->CaptureActive()) {
        carve_backend_fail("no event is recorded while a graph capture is in progress");
        return CARVE_ERR_BACKEND;
    }
    int pushed;
    carve_status st = enter(c, &pushed);
    if (st != CARVE_OK)
        return st;
    CUevent ev = NULL;
    carve_mutex_lock(&c->lock);
    if (c->nspare)
        ev = c->spare[--c->nspare];
    carve_mutex_unlock(&c->lock);
    CUresult r = CUDA_SUCCESS;
    const char *what = "cuEventCreate";
    if (!ev)
        r = c->api->EventCreate(&ev, CU_EVENT_DISABLE_TIMING);
    if (r == CUDA_SUCCESS) {
        carve_ledger_add(&be->ledger, CARVE_DRV_EVENT_RECORD, 1, 0, 0);
        r = c->api->EventRecord(ev, (CUstream)s);
        what = "cuEventRecord";
    }
    if (r != CUDA_SUCCESS) {
        st = drv_error(c->api, r, what);
        if (ev)
            (void)c->api->EventDestroy(ev);
    } else {
        *out = ev;
    }
    leave(c, pushed);
    return st;
}

static int drv_context_capturing(carve_be *be);

/* A refusal for a capture's sake (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
 * through CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD): it says nothing about
 * whether the work is done. */
static int capture_refusal(CUresult r) {
    return r >= CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED && r <= CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
}

/* Without cuThreadExchangeStreamCaptureMode (a lookup may omit it) the
 * calling thread keeps its own mode, in which asking about or waiting for
 * an event while another thread captures in global mode is refused and
 * breaks that capture: neither is done while a capture is seen. */
static int cannot_relax(carve_be *be) {
    const drv_ctx *c = be->ctx;
    return !c->api->ThreadExchangeStreamCaptureMode && drv_context_capturing(be);
}

static int drv_event_query(carve_be *be, void *ev) {
    drv_ctx *c = be->ctx;
    if (cannot_relax(be))
        return 0;
    carve_ledger_add(&be->ledger, CARVE_DRV_EVENT_QUERY, 1, 0, 0);
    int mode = relax(c);
    CUresult r = c->api->EventQuery((CUevent)ev);
    unrelax(c, mode);
    if (r == CUDA_SUCCESS)
        return 1;
    return r == CUDA_ERROR_NOT_READY || capture_refusal(r) ? 0 : -1;
}

static carve_status drv_event_sync(carve_be *be, void *ev) {
    drv_ctx *c = be->ctx;
    if (cannot_relax(be)) {
        carve_backend_fail("no event is waited for while a stream capture is underway and the driver cannot make "
                           "the wait in relaxed capture mode (no cuThreadExchangeStreamCaptureMode)");
        return CARVE_ERR_BACKEND;
    }
    carve_ledger_add(&be->ledger, CARVE_DRV_EVENT_SYNC, 1, 0, 0);
    int mode = relax(c);
    CUresult r = c->api->EventSynchronize((CUevent)ev);
    unrelax(c, mode);
    return r == CUDA_SUCCESS ? CARVE_OK : drv_error(c->api, r, "cuEventSynchronize");
}

static carve_status drv_device_sync(carve_be *be) {
    drv_ctx *c = be->ctx;
    int pushed;
    carve_status st = enter(c, &pushed);
    if (st != CARVE_OK)
        return st;
    carve_ledger_add(&be->ledger, CARVE_DRV_DEVICE_SYNC, 1, 0, 0);
    CUresult r = c->api->CtxSynchronize();
    if (r != CUDA_SUCCESS)
        st = drv_error(c->api, r, "cuCtxSynchronize");
    leave(c, pushed);
    return st;
}

/* Whether s is being captured, asked in the backend's context (a stream
 * handle, and the per-thread stream, mean something in one context only). */
static int drv_capturing(carve_be *be, carve_stream s) {
    drv_ctx *c = be->ctx;
    int pushed;
    if (enter(c, &pushed) != CARVE_OK)
        return 0;
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult r = c->api->StreamIsCapturing((CUstream)s, &status);
    leave(c, pushed);
    return r == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* Under carve-run, whether any capture is in progress in the process (the
 * interposer counts them); otherwise whether a blocking stream of the
 * context is captured, which the driver tells when asked about the legacy
 * stream. A capture on a non-blocking stream is not seen here (the engine
 * asks about the streams it knows to be alive: types.h,
 * carve_capture_underway). */
static int drv_context_capturing(carve_be *be) {
    drv_ctx *c = be->ctx;
    if (c->api->CaptureActive)
        return c->api->CaptureActive() != 0;
    int pushed;
    if (enter(c, &pushed) != CARVE_OK)
        return 0;
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult r = c->api->StreamIsCapturing(CU_STREAM_LEGACY, &status);
    leave(c, pushed);
    return r == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
}

static void drv_event_release(carve_be *be, void *ev) {
    drv_ctx *c = be->ctx;
    carve_mutex_lock(&c->lock);
    if (c->nspare == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        CUevent *n = realloc(c->spare, cap * sizeof(*n));
        if (n) {
            c->spare = n;
            c->cap = cap;
        }
    }
    if (c->nspare < c->cap) {
        c->spare[c->nspare++] = (CUevent)ev;
        ev = NULL;
    }
    carve_mutex_unlock(&c->lock);
    if (ev)
        (void)c->api->EventDestroy((CUevent)ev);
}

static void drv_destroy(carve_be *be) {
    drv_ctx *c = be->ctx;
    int pushed;
    int entered = enter(c, &pushed) == CARVE_OK;
    for (size_t i = 0; i < c->nspare; i++)
        (void)c->api->EventDestroy(c->spare[i]);
    if (entered)
        leave(c, pushed);
    if (c->retained)
        (void)c->api->DevicePrimaryCtxRelease(c->dev);
    if (c->vmm) { /* it may release handles */
        int mode = relax(c);
        carve_drv_vmm_free(c->vmm);
        unrelax(c, mode);
    }
    free(c->spare);
    carve_mutex_destroy(&c->lock);
    free(c);
}

/* Virtual-memory mode: driver_vmm.c's calls, the backend's context current
 * and the thread in relaxed capture mode (every one of them may map, unmap
 * or release memory). */
static carve_status vmm_reserve(carve_be *be, size_t size, uintptr_t *base) {
    drv_ctx *c = be->ctx;
    int pushed;
    carve_status st = enter(c, &pushed);
    if (st != CARVE_OK)
        return st;
    int mode = relax(c);
    st = carve_drv_vmm_reserve(c->vmm, size, base);
    unrelax(c, mode);
    leave(c, pushed);
    return st;
}

/* Whether the context is to be made current around a call: not once the
 * arena was abandoned (the context is gone; the driver's virtual-memory
 * functions act on the process's address space). */
static carve_status enter_live(drv_ctx *c, int *pushed) {
    *pushed = 0;
    return carve_drv_vmm_state(c->vmm) ? CARVE_OK : enter(c, pushed);
}

static carve_status vmm_release(carve_be *be, uintptr_t base, size_t size) {
    drv_ctx *c = be->ctx;
    int pushed;
    carve_status st = enter_live(c, &pushed);
    if (st != CARVE_OK)
        return st;
    int mode = relax(c);
    st = carve_drv_vmm_release(c->vmm, base, size);
    unrelax(c, mode);
    leave(c, pushed);
    return st;
}

static carve_status vmm_commit(carve_be *be, uintptr_t addr, size_t size, size_t piece) {
    drv_ctx *c = be->ctx;
    int pushed;
    carve_status st = enter(c, &pushed);
    if (st != CARVE_OK)
        return st;
    int mode = relax(c);
    st = carve_drv_vmm_commit(c->vmm, addr, size, piece);
    unrelax(c, mode);
    leave(c, pushed);
    return st;
}

static carve_status vmm_decommit(carve_be *be, uintptr_t addr, size_t size, size_t piece, size_t *done) {
    drv_ctx *c = be->ctx;
    int pushed;
    *done = 0;
    carve_status st = enter_live(c, &pushed);
    if (st != CARVE_OK)
        return st;
    int mode = relax(c);
    st = carve_drv_vmm_decommit(c->vmm, addr, size, piece, done);
    unrelax(c, mode);
    leave(c, pushed);
    return st;
}

static void vmm_recycle(carve_be *be, int on) {
    drv_ctx *c = be->ctx;
    int mode = relax(c);
    carve_drv_vmm_recycle(c->vmm, on);
    unrelax(c, mode);
}

/* The context is gone: no context to enter. */
static void vmm_abandon(carve_be *be, int stage) {
    drv_ctx *c = be->ctx;
    int mode = relax(c);
    carve_drv_vmm_abandon(c->vmm, stage);
    unrelax(c, mode);
}

static const carve_backend_ops driver_ops = {
    .reserve = drv_reserve,
    .release = drv_release,
    .event_record = drv_event_record,
    .event_query = drv_event_query,
    .event_sync = drv_event_sync,
    .device_sync = drv_device_sync,
    .event_release = drv_event_release,
    .destroy = drv_destroy,
};
/* The same, for a driver that answers cuStreamIsCapturing: the engine asks
 * about captures through it. */
static const carve_backend_ops driver_ops_capture = {
    .reserve = drv_reserve,
    .release = drv_release,
    .event_record = drv_event_record,
    .event_query = drv_event_query,
    .event_sync = drv_event_sync,
    .capturing = drv_capturing,
    .context_capturing = drv_context_capturing,
    .device_sync = drv_device_sync,
    .event_release = drv_event_release,
    .destroy = drv_destroy,
};

static const carve_backend_ops driver_vmm_ops = {
    .reserve = vmm_reserve,
    .release = vmm_release,
    .commit = vmm_commit,
    .decommit = vmm_decommit,
    .recycle = vmm_recycle,
    .event_record = drv_event_record,
    .event_query = drv_event_query,
    .event_sync = drv_event_sync,
    .device_sync = drv_device_sync,
    .event_release = drv_event_release,
    .destroy = drv_destroy,
    .abandon = vmm_abandon,
};
/* The same, for a driver that answers cuStreamIsCapturing. */
static const carve_backend_ops driver_vmm_ops_capture = {
    .reserve = vmm_reserve,
    .release = vmm_release,
    .commit = vmm_commit,
    .decommit = vmm_decommit,
    .recycle = vmm_recycle,
    .event_record = drv_event_record,
    .event_query = drv_event_query,
    .event_sync = drv_event_sync,
    .capturing = drv_capturing,
    .context_capturing = drv_context_capturing,
    .device_sync = drv_device_sync,
    .event_release = drv_event_release,
    .destroy = drv_destroy,
    .abandon = vmm_abandon,
};

/* can_access for peers.h through the driver: whether device ordinal peer
 * can read and write owner's memory; a failed question counts as no. */
static int drv_can_access(int peer, int owner, void *arg) {
    const carve_driver_api *api = arg;
    CUdevice p = 0, o = 0;
    int can = 0;
    if (!api->DeviceCanAccessPeer || api->DeviceGet(&p, peer) != CUDA_SUCCESS ||
        api->DeviceGet(&o, owner) != CUDA_SUCCESS || api->DeviceCanAccessPeer(&can, p, o) != CUDA_SUCCESS)
        return 0;
    return can;
}

/* Virtual-memory mode's access list (peers.h): with peers=auto every
 * device of the ndev visible that can access device's memory, as cudaMalloc
 * memory is reachable once the program enables peer access; peers=none the
 * owner alone. */
static carve_status drv_peer_list(const carve_driver_api *api, const carve_config *cfg, int device, int ndev,
                                  int *out, int *n) {
    return carve_peer_list(cfg->peers, cfg->peer_devices, device, ndev, drv_can_access, (void *)api, out, n);
}

carve_status carve_backend_open_driver(carve_be *be, const carve_config *cfg) {
    int device = cfg->device;
    const carve_driver_api *api = carve_driver_api_get();
    if (!api)
        return CARVE_ERR_NO_DEVICE;
    CUresult r = api->Init(0);
    if (r != CUDA_SUCCESS)
        return drv_error(api, r, "cuInit");
    int n = 0;
    if ((r = api->DeviceGetCount(&n)) != CUDA_SUCCESS)
        return drv_error(api, r, "cuDeviceGetCount");
    if (device < 0 || device >= n) {
        carve_backend_fail("device %d does not exist (%d device%s visible)", device, n, n == 1 ? "" : "s");
        return CARVE_ERR_NO_DEVICE;
    }
    drv_ctx *c = calloc(1, sizeof(*c));
    if (!c) {
        carve_backend_fail_host("host memory exhausted");
        return CARVE_ERR_OOM;
    }
    c->api = api;
    if ((r = api->DeviceGet(&c->dev, device)) != CUDA_SUCCESS) {
        free(c);
        return drv_error(api, r, "cuDeviceGet");
    }
    /* The caller's current context if it is on this device, else the
     * device's primary context. */
    CUcontext cur = NULL;
    CUdevice cur_dev = -1;
    if (api->CtxGetCurrent(&cur) == CUDA_SUCCESS && cur) {
        if (api->CtxGetDevice(&cur_dev) == CUDA_SUCCESS && cur_dev == c->dev)
            c->ctx = cur;
    }
    if (!c->ctx) {
        if ((r = api->DevicePrimaryCtxRetain(&c->ctx, c->dev)) != CUDA_SUCCESS) {
            free(c);
            return drv_error(api, r, "cuDevicePrimaryCtxRetain");
        }
        c->retained = 1;
    }
    size_t total = 0;
    if ((r = api->DeviceTotalMem(&total, c->dev)) != CUDA_SUCCESS) {
        carve_status st = drv_error(api, r, "cuDeviceTotalMem");
        if (c->retained)
            (void)api->DevicePrimaryCtxRelease(c->dev);
        free(c);
        return st;
    }
    /* Virtual-memory mode when asked for, or automatic and the arena grows
     * on demand from nothing, as the cudart backends decide (open.c). */
    int want = cfg->vmm == 1 || (cfg->vmm == CARVE_VMM_AUTO && cfg->growth && !cfg->initial_bytes &&
                                 cfg->initial_fraction <= 0);
    if (want) {
        carve_status st = carve_drv_vmm_check(api, c->dev);
        int peers[CARVE_PEERS_MAX + 1], npeers = 0;
        if (st == CARVE_OK)
            st = drv_peer_list(api, cfg, device, n, peers, &npeers);
        if (st == CARVE_OK && !(c->vmm = carve_drv_vmm_new(api, &be->ledger, device, peers, npeers)))
            st = CARVE_ERR_OOM;
        if (st != CARVE_OK && (cfg->vmm == 1 || st == CARVE_ERR_OOM)) {
            if (c->retained)
                (void)api->DevicePrimaryCtxRelease(c->dev);
            free(c);
            return st;
        }
    }
    carve_mutex_init(&c->lock);
    be->ctx = c;
    if (c->vmm)
        be->ops = api->StreamIsCapturing ? &driver_vmm_ops_capture : &driver_vmm_ops;
    else
        be->ops = api->StreamIsCapturing ? &driver_ops_capture : &driver_ops;
    be->total_bytes = total;
    return CARVE_OK;
}
