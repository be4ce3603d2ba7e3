/*
 * cuda.c — the CUDA backend: segments from cudaMalloc, released with
 * cudaFree; events, the device guard and error mapping come from
 * cuda_common.c.
 *
 * cudaMalloc memory is reachable from every device that enabled peer access
 * to its device, so granting peers means enabling peer access from them
 * (once, at creation, and only when the configuration names them: it changes
 * the whole process). Opening the backend only makes the list; the grant op
 * enables, last of all, once carve_arena_create has judged everything else,
 * so a creation that is refused leaves the process as it was (and a grant
 * that fails partway takes back what it enabled). Sharing with another process goes through
 * cudaIpcGetMemHandle on the segment that holds a buffer; the importing side
 * opens each exported segment once per device and counts its users, since
 * the driver maps a handle only once per process.
 */
#include "backend/cuda_common.h"
#include "backend/leaves.h"
#include "backend/peers.h"

#include <cuda.h>
#include <string.h>

typedef struct cuda_ctx {
    carve_cuda_ctx cuda;                /* first: the shared event code reads it */
    int peers[CARVE_PEERS_MAX + 1], npeers; /* the owner first, then the devices to enable */
} cuda_ctx;

static carve_status cuda_reserve(carve_be *be, size_t size, uintptr_t *base) {
    carve_cuda_ctx *c = be->ctx;
    int prev;
    carve_status st = carve_cuda_enter(c->device, &prev);
    if (st != CARVE_OK)
        return st;
    void *p = NULL;
    carve_ledger_add(&be->ledger, CARVE_DRV_MALLOC, 1, 0, size);
    int mode = carve_cuda_relax();
    cudaError_t e = cudaMalloc(&p, size);
    carve_cuda_unrelax(mode);
    if (e == cudaSuccess)
        *base = (uintptr_t)p;
    else
        st = carve_cuda_error(e, "cudaMalloc");
    carve_cuda_leave(c->device, prev);
    return st;
}

static carve_status cuda_release(carve_be *be, uintptr_t base, size_t size) {
    carve_cuda_ctx *c = be->ctx;
    int prev;
    carve_status st = carve_cuda_enter(c->device, &prev);
    if (st != CARVE_OK)
        return st;
    carve_ledger_add(&be->ledger, CARVE_DRV_FREE, 1, 0, size);
    int mode = carve_cuda_relax();
    cudaError_t e = cudaFree((void *)base);
    carve_cuda_unrelax(mode);
    if (e != cudaSuccess)
        st = carve_cuda_error(e, "cudaFree");
    carve_cuda_leave(c->device, prev);
    return st;
}

/* The cudaMalloc segment holding [addr, addr+size), by its handle. */
static carve_status cuda_export(carve_be *be, uintptr_t addr, size_t size, carve_ipc_desc *d, int **fds) {
    carve_cuda_ctx *c = be->ctx;
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
    cuda_ctx *c = be->ctx;
    carve_cuda_ctx_destroy(&c->cuda);
    free(c);
}

/* Peer access from every device the configuration names to the arena's
 * device: what makes cudaMalloc memory reachable from them (all of it,
 * segments reserved before included). Already enabled is fine. When one
 * fails, the access this call enabled is disabled again, so the process is
 * left as it was. */
static carve_status cuda_grant(carve_be *be) {
    cuda_ctx *c = be->ctx;
    int device = c->cuda.device, enabled[CARVE_PEERS_MAX + 1], nenabled = 0;
    carve_status st = CARVE_OK;
    for (int i = 1; st == CARVE_OK && i < c->npeers; i++) {
        int prev;
        if ((st = carve_cuda_enter(c->peers[i], &prev)) != CARVE_OK)
            break;
        cudaError_t e = cudaDeviceEnablePeerAccess(device, 0);
        if (e == cudaSuccess)
            enabled[nenabled++] = c->peers[i];
        else if (e == cudaErrorPeerAccessAlreadyEnabled)
            (void)cudaGetLastError();
        else
            st = carve_cuda_error(e, "cudaDeviceEnablePeerAccess");
        carve_cuda_leave(c->peers[i], prev);
    }
    for (int i = 0; st != CARVE_OK && i < nenabled; i++) {
        int prev;
        if (carve_cuda_enter(enabled[i], &prev) != CARVE_OK)
            continue;
        if (cudaDeviceDisablePeerAccess(device) != cudaSuccess)
            (void)cudaGetLastError();
        carve_cuda_leave(enabled[i], prev);
    }
    return st;
}

static const carve_backend_ops cuda_ops = {
    .reserve = cuda_reserve,
    .release = cuda_release,
    .event_record = carve_cuda_event_record,
    .event_query = carve_cuda_event_query,
    .event_sync = carve_cuda_event_sync,
    .event_follow = carve_cuda_event_follow,
    .capturing = carve_cuda_capturing,
    .context_capturing = carve_cuda_context_capturing,
    .device_sync = carve_cuda_device_sync,
    .event_release = carve_cuda_event_release,
    .destroy = cuda_destroy,
    .export_buffer = cuda_export,
    .grant = cuda_grant,
};

carve_status carve_backend_open_cuda(carve_be *be, const carve_config *cfg) {
    int device = cfg->device;
    size_t free_b, total_b;
    carve_status st = carve_cuda_mem_info(device, &free_b, &total_b);
    if (st != CARVE_OK)
        return st;
    cuda_ctx *c = calloc(1, sizeof(*c));
    if (!c) {
        carve_backend_fail_host("host memory exhausted");
        return CARVE_ERR_OOM;
    }
    /* Which devices to enable (checked now: one that does not exist or
     * cannot access device is refused); enabled by cuda_grant. */
    c->npeers = 1;
    c->peers[0] = device;
    if ((cfg->peers == CARVE_PEERS_ALL || cfg->peers == CARVE_PEERS_LIST) &&
        (st = carve_cuda_peer_list(cfg, device, c->peers, &c->npeers)) != CARVE_OK) {
        free(c);
        return st;
    }
    c->cuda.device = device;
    carve_mutex_init(&c->cuda.lock);
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
        carve_backend_fail_host("host memory exhausted");
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
    int prev;
    if (!o) {
        carve_backend_fail("no segment opened at %#lx on device %d", (unsigned long)base, device);
        st = CARVE_ERR_BACKEND;
    } else if (o->users > 1) {
        o->users--;
    } else if (carve_cuda_enter(device, &prev) != CARVE_OK) {
        st = CARVE_ERR_NO_DEVICE; /* nothing done: the mapping stays */
    } else {
        *pp = o->next;
        cudaError_t e = cudaIpcCloseMemHandle((void *)base);
        if (e != cudaSuccess && (st = carve_cuda_error(e, "cudaIpcCloseMemHandle")) == CARVE_ERR_NO_DEVICE)
            st = CARVE_ERR_BACKEND; /* NO_DEVICE says nothing was done, and this was */
        carve_cuda_leave(device, prev);
        free(o);
    }
    carve_mutex_unlock(&opened_lock);
    return st;
}
