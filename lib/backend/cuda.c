/*
 * cuda.c — the CUDA backend: segments from cudaMalloc, released with
 * cudaFree; events, the device guard and error mapping come from
 * cuda_common.c.
 */
#include "backend/cuda_common.h"
#include "backend/leaves.h"

#include <string.h>

typedef carve_cuda_ctx cuda_ctx;

static carve_status cuda_reserve(carve_be *be, size_t size, uintptr_t *base) {
    cuda_ctx *c = be->ctx;
    int prev;
    carve_status st = carve_cuda_enter(c->device, &prev);
    if (st != CARVE_OK)
        return st;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, size);
    if (e == cudaSuccess)
        *base = (uintptr_t)p;
    else
        st = carve_cuda_error(e, "cudaMalloc");
    carve_cuda_leave(c->device, prev);
    return st;
}

static carve_status cuda_release(carve_be *be, uintptr_t base, size_t size) {
    (void)size;
    cuda_ctx *c = be->ctx;
    int prev;
    carve_status st = carve_cuda_enter(c->device, &prev);
    if (st != CARVE_OK)
        return st;
    cudaError_t e = cudaFree((void *)base);
    if (e != cudaSuccess)
        st = carve_cuda_error(e, "cudaFree");
    carve_cuda_leave(c->device, prev);
    return st;
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
