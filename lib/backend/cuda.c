/*
 * cuda.c — the CUDA backend: segments from cudaMalloc, released with
 * cudaFree; events, the device guard and error mapping come from
 * cuda_common.c.
 *
 * cudaMalloc memory is reachable from every device that enabled peer access
 * to its device, so granting peers means enabling peer access from them
 * (once, at creation, and only when the configuration names them: it changes
 * the whole process). Sharing with another process goes through
 * cudaIpcGetMemHandle on the segment that holds a buffer; the importing side
 * opens each exported segment once per device and counts its users, since
 * the driver maps a handle only once per process.
 */
#include "backend/cuda_common.h"
#include "backend/leaves.h"
#include "backend/peers.h"

#include <cuda.h>
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

/* The cudaMalloc segment holding [addr, addr+size), by its handle. */
static carve_status cuda_export(carve_be *be, uintptr_t addr, size_t size, carve_ipc_desc *d, int **fds) {
    cuda_ctx *c = be->ctx;
    typedef CUresult (*range_fn)(CUdeviceptr *, size_t *, CUdeviceptr); /* cuMemGetAddressRange */
    static range_fn fn_cached;
    range_fn range = __atomic_load_n(&fn_cached, __ATOMIC_ACQUIRE);
    if (!range) {
        void *fn = carve_cuda_driver_fn("cuMemGetAddressRange");
        if (!fn)
            return CARVE_ERR_BACKEND;
        memcpy(&range, &fn, sizeof(fn));
        __atomic_store_n(&fn_cached, range, __ATOMIC_RELEASE);
    }
    int prev;
    carve_status st = carve_cuda_enter(c->device, &prev);
    if (st != CARVE_OK)
        return st;
    CUdeviceptr base = 0;
    size_t len = 0;
    cudaIpcMemHandle_t h;
    CUresult r = range(&base, &len, (CUdeviceptr)addr);
    cudaError_t e = cudaSuccess;
    if (r != CUDA_SUCCESS) {
        carve_backend_fail("cuMemGetAddressRange: CUresult %d", (int)r);
        st = CARVE_ERR_BACKEND;
    } else if ((e = cudaIpcGetMemHandle(&h, (void *)base)) != cudaSuccess) {
        st = carve_cuda_error(e, "cudaIpcGetMemHandle");
    }
    carve_cuda_leave(c->device, prev);
    if (st != CARVE_OK)
        return st;
    d->kind = CARVE_IPC_CUDA;
    d->size = size;
    d->offset = addr - (uintptr_t)base;
    d->piece_bytes = len;
    d->num_fds = 0;
    d->device = c->device;
    memcpy(d->cuda_handle, &h, sizeof(h) < sizeof(d->cuda_handle) ? sizeof(h) : sizeof(d->cuda_handle));
    *fds = NULL;
    return CARVE_OK;
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
    .export_buffer = cuda_export,
};

/* Peer access from every device the configuration names to device: what
 * makes cudaMalloc memory reachable from them. Already enabled is fine. */
static carve_status enable_peers(const carve_config *cfg, int device) {
    int peers[CARVE_PEERS_MAX + 1], n = 0;
    carve_status st = carve_cuda_peer_list(cfg, device, peers, &n);
    for (int i = 1; st == CARVE_OK && i < n; i++) {
        int prev;
        if ((st = carve_cuda_enter(peers[i], &prev)) != CARVE_OK)
            break;
        cudaError_t e = cudaDeviceEnablePeerAccess(device, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled)
            (void)cudaGetLastError();
        else if (e != cudaSuccess)
            st = carve_cuda_error(e, "cudaDeviceEnablePeerAccess");
        carve_cuda_leave(peers[i], prev);
    }
    return st;
}

carve_status carve_backend_open_cuda(carve_be *be, const carve_config *cfg) {
    int device = cfg->device;
    size_t free_b, total_b;
    carve_status st = carve_cuda_mem_info(device, &free_b, &total_b);
    if (st != CARVE_OK)
        return st;
    if ((cfg->peers == CARVE_PEERS_ALL || cfg->peers == CARVE_PEERS_LIST) &&
        (st = enable_peers(cfg, device)) != CARVE_OK)
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
    be->ipc = 1;
    return CARVE_OK;
}

/* Segments this process opened from other processes: one entry per handle
 * and device, with its users. */
typedef struct opened {
    unsigned char handle[CUDA_IPC_HANDLE_SIZE];
    int device;
    uintptr_t base;
    unsigned long users;
    struct opened *next;
} opened;
static carve_mutex opened_lock = PTHREAD_MUTEX_INITIALIZER;
static opened *opened_list;

carve_status carve_backend_import_cuda(const carve_ipc_desc *d, int device, uintptr_t *base) {
    *base = 0;
    size_t free_b, total_b;
    carve_status st = carve_cuda_mem_info(device, &free_b, &total_b);
    if (st != CARVE_OK)
        return st;
    carve_mutex_lock(&opened_lock);
    opened *o = opened_list;
    while (o && (o->device != device || memcmp(o->handle, d->cuda_handle, sizeof(o->handle)) != 0))
        o = o->next;
    if (o) {
        o->users++;
        *base = o->base;
    } else if (!(o = calloc(1, sizeof(*o)))) {
        carve_backend_fail("host memory exhausted");
        st = CARVE_ERR_OOM;
    } else {
        int prev;
        if ((st = carve_cuda_enter(device, &prev)) == CARVE_OK) {
            cudaIpcMemHandle_t h;
            memcpy(&h, d->cuda_handle, sizeof(h));
            void *p = NULL;
            cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
            if (e != cudaSuccess)
                st = carve_cuda_error(e, "cudaIpcOpenMemHandle");
            carve_cuda_leave(device, prev);
            o->base = (uintptr_t)p;
        }
        if (st == CARVE_OK) {
            memcpy(o->handle, d->cuda_handle, sizeof(o->handle));
            o->device = device;
            o->users = 1;
            o->next = opened_list;
            opened_list = o;
            *base = o->base;
        } else {
            free(o);
        }
    }
    carve_mutex_unlock(&opened_lock);
    return st;
}

carve_status carve_backend_close_cuda(int device, uintptr_t base) {
    carve_mutex_lock(&opened_lock);
    opened **pp = &opened_list;
    while (*pp && ((*pp)->device != device || (*pp)->base != base))
        pp = &(*pp)->next;
    opened *o = *pp;
    carve_status st = CARVE_OK;
    if (!o) {
        carve_backend_fail("no segment opened at %#lx on device %d", (unsigned long)base, device);
        st = CARVE_ERR_BACKEND;
    } else if (--o->users == 0) {
        *pp = o->next;
        int prev;
        if ((st = carve_cuda_enter(device, &prev)) == CARVE_OK) {
            cudaError_t e = cudaIpcCloseMemHandle((void *)base);
            if (e != cudaSuccess)
                st = carve_cuda_error(e, "cudaIpcCloseMemHandle");
            carve_cuda_leave(device, prev);
        }
        free(o);
    }
    carve_mutex_unlock(&opened_lock);
    return st;
}
