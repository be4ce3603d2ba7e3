/*
 * backend_cuda.c — segments from cudaMalloc, events from cudaEvent.
 *
 * Every call makes the arena's device current and restores the caller's
 * device afterwards, so an arena on device 1 can be used from a thread whose
 * current device is 0. Errors are mapped to statuses with the CUDA error's
 * name in the message, and the runtime's last error is cleared so the caller
 * never inherits a non-sticky error from carve. Events are recycled through
 * a small free list: cudaEventCreate costs more than a record.
 */
#include "backend_cuda.h"

#include <string.h>

typedef carve_cuda_ctx cuda_ctx;

carve_status carve_cuda_error(cudaError_t e, const char *what) {
    (void)cudaGetLastError(); /* leave no error behind for the caller */
    carve_backend_fail("%s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
    switch (e) {
    case cudaErrorMemoryAllocation: return CARVE_ERR_OOM;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice: return CARVE_ERR_NO_DEVICE;
    default: return CARVE_ERR_BACKEND;
    }
}

#define map_error carve_cuda_error

carve_status carve_cuda_enter(int dev, int *prev) {
    cudaError_t e = cudaGetDevice(prev);
    if (e != cudaSuccess)
        return map_error(e, "cudaGetDevice");
    if (*prev != dev && (e = cudaSetDevice(dev)) != cudaSuccess)
        return map_error(e, "cudaSetDevice");
    return CARVE_OK;
}

void carve_cuda_leave(int dev, int prev) {
    if (prev != dev)
        (void)cudaSetDevice(prev);
}

#define enter carve_cuda_enter
#define leave carve_cuda_leave

static carve_status cuda_reserve(carve_be *be, size_t size, uintptr_t *base) {
    cuda_ctx *c = be->ctx;
    int prev;
    carve_status st = enter(c->device, &prev);
    if (st != CARVE_OK)
        return st;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, size);
    if (e == cudaSuccess)
        *base = (uintptr_t)p;
    else
        st = map_error(e, "cudaMalloc");
    leave(c->device, prev);
    return st;
}

static carve_status cuda_release(carve_be *be, uintptr_t base, size_t size) {
    (void)size;
    cuda_ctx *c = be->ctx;
    int prev;
    carve_status st = enter(c->device, &prev);
    if (st != CARVE_OK)
        return st;
    cudaError_t e = cudaFree((void *)base);
    if (e != cudaSuccess)
        st = map_error(e, "cudaFree");
    leave(c->device, prev);
    return st;
}

carve_status carve_cuda_event_record(carve_be *be, carve_stream s, void **out) {
    cuda_ctx *c = be->ctx;
    *out = NULL;
    int prev;
    carve_status st = enter(c->device, &prev);
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
        e = cudaEventRecord(ev, (cudaStream_t)s);
        what = "cudaEventRecord";
    }
    if (e != cudaSuccess) {
        st = map_error(e, what);
        if (ev)
            (void)cudaEventDestroy(ev);
    } else {
        *out = ev;
    }
    leave(c->device, prev);
    return st;
}

int carve_cuda_event_query(carve_be *be, void *ev) {
    (void)be;
    cudaError_t e = cudaEventQuery((cudaEvent_t)ev);
    if (e == cudaSuccess)
        return 1;
    (void)cudaGetLastError();
    return e == cudaErrorNotReady ? 0 : -1;
}

carve_status carve_cuda_event_sync(carve_be *be, void *ev) {
    (void)be;
    cudaError_t e = cudaEventSynchronize((cudaEvent_t)ev);
    return e == cudaSuccess ? CARVE_OK : map_error(e, "cudaEventSynchronize");
}

carve_status carve_cuda_device_sync(carve_be *be) {
    cuda_ctx *c = be->ctx;
    int prev;
    carve_status st = enter(c->device, &prev);
    if (st != CARVE_OK)
        return st;
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess)
        st = map_error(e, "cudaDeviceSynchronize");
    leave(c->device, prev);
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
    int entered = enter(c->device, &prev) == CARVE_OK;
    for (size_t i = 0; i < c->nspare; i++)
        (void)cudaEventDestroy(c->spare[i]);
    if (entered)
        leave(c->device, prev);
    free(c->spare);
    carve_mutex_destroy(&c->lock);
}

static void cuda_destroy(carve_be *be) {
    carve_cuda_ctx_destroy(be->ctx);
    free(be->ctx);
}

static const carve_backend_ops cuda_ops = {
    .reserve = cuda_reserve,
    .release = cuda_release,
    .event_record = carve_cuda_event_record,
    .event_query = carve_cuda_event_query,
    .event_sync = carve_cuda_event_sync,
    .device_sync = carve_cuda_device_sync,
    .event_release = carve_cuda_event_release,
    .destroy = cuda_destroy,
};

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
        map_error(e, "cudaGetDeviceCount");
        return CARVE_ERR_NO_DEVICE;
    }
    if (device < 0 || device >= n) {
        carve_backend_fail("device %d does not exist (%d device%s visible)", device, n, n == 1 ? "" : "s");
        return CARVE_ERR_NO_DEVICE;
    }
    int prev;
    carve_status st = enter(device, &prev);
    if (st != CARVE_OK)
        return st;
    e = cudaMemGetInfo(free_bytes, total_bytes);
    if (e != cudaSuccess)
        st = map_error(e, "cudaMemGetInfo");
    leave(device, prev);
    return st;
}

carve_status carve_backend_open_cuda(carve_be *be, int device) {
    size_t free_b, total_b;
    carve_status st = carve_cuda_mem_info(device, &free_b, &total_b);
    if (st != CARVE_OK)
        return st;
    cuda_ctx *c = calloc(1, sizeof(*c));
    if (!c) {
        carve_backend_fail("host memory exhausted");
        return CARVE_ERR_OOM;
    }
    c->device = device;
    carve_mutex_init(&c->lock);
    be->ctx = c;
    be->ops = &cuda_ops;
    be->total_bytes = total_b;
    return CARVE_OK;
}
