/*
 * cuda_vmm.c — the CUDA virtual-memory backend: address space from
 * cuMemAddressReserve, physical memory mapped into it granule by granule
 * with cuMemCreate + cuMemMap + cuMemSetAccess, and unmapped with cuMemUnmap
 * + cuMemRelease, so carve_empty_cache (and the arena's lazy trimming) can
 * give back memory in the middle of an arena.
 *
 * The driver functions are fetched through the runtime's entry-point query,
 * so carve links against cudart only. The engine says where each mapping
 * starts and ends (a piece: one 2 MiB granule, or one mapping of the
 * granules a request covers in untouched room; the driver unmaps whole
 * mappings only), and each mapping is its own physical allocation. The one
 * idea that keeps this file's memory independent of what is mapped: a
 * handle is released as soon as it is mapped (the mapping holds the memory,
 * and cuMemUnmap frees it), so nothing is kept per mapping; where a handle is
 * needed again (to recycle it, or to export it) cuMemRetainAllocationHandle
 * gets it back from the address. A run is committed with one cuMemMap per
 * piece and a single cuMemSetAccess over the run. Inside a recycle window
 * (the engine opens one while it unmaps granules to map others), unmapped
 * granules' handles are kept on a stack and mapped again in place of new
 * ones, which saves a cuMemCreate and the memory's release per granule;
 * closing the window releases what was not reused. Events, the device guard
 * and error messages are shared with the cudaMalloc backend (cuda_common.h).
 * Every driver call made for the arena goes into its driver ledger
 * (ledger.h), as the virtual backend counts the same work.
 *
 * Access: cudaDeviceEnablePeerAccess does not reach memory mapped with
 * cuMemMap, so every cuMemSetAccess names each device the configuration
 * grants the memory to (peers.c), the owner first. Sharing: where the
 * configuration asks for it, memory is created with POSIX file-descriptor
 * handles, so a buffer can be exported as one descriptor per mapping it
 * lies in (the engine says where they begin and end) and mapped whole by
 * another process (carve_backend_import_fds, below).
 */
#include <cuda.h>
#include <string.h>
#include <unistd.h>

#include "backend/cuda_common.h"
#include "backend/leaves.h"
#include "backend/peers.h"

typedef struct va_range { /* an address reservation */
    uintptr_t base;
    size_t size;
    struct va_range *next;
} va_range;

typedef struct vmm_ctx {
    carve_cuda_ctx cuda; /* first: the shared event code reads it */
    CUmemAllocationProp prop;       /* without shareable handles */
    CUmemAllocationProp prop_fd;    /* with POSIX file-descriptor handles */
    int fd_handles;                 /* new granules use prop_fd (atomic: cleared if the driver refuses it) */
    int fd_required;                /* ipc=1: no falling back to prop */
    CUmemAccessDesc *access;        /* owner first, then the peers */
    size_t naccess;
    carve_mutex lock;    /* guards the list of ranges and the recycled handles */
    va_range *ranges;
    int recycling;       /* recycle windows open (one per engine thread mapping) */
    CUmemGenericAllocationHandle *spare; /* unmapped handles kept in the window */
    size_t nspare, capspare;
} vmm_ctx;

static struct {
    CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*free)(CUdeviceptr, size_t);
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
    CUresult (*release)(CUmemGenericAllocationHandle);
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*unmap)(CUdeviceptr, size_t);
    CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*granularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
    CUresult (*retain)(CUmemGenericAllocationHandle *, void *);
    CUresult (*error_name)(CUresult, const char **);
    CUresult (*attribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*export_handle)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType, unsigned long long);
    CUresult (*import_handle)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType);
} drv;

static int load_driver(void) {
    static int loaded; /* 1 ok, -1 failed */
    if (__atomic_load_n(&loaded, __ATOMIC_ACQUIRE))
        return loaded;
    struct {
        const char *name;
        void **fn;
    } syms[] = {
        {"cuMemAddressReserve", (void **)&drv.reserve}, {"cuMemAddressFree", (void **)&drv.free},
        {"cuMemCreate", (void **)&drv.create},          {"cuMemRelease", (void **)&drv.release},
        {"cuMemMap", (void **)&drv.map},                {"cuMemUnmap", (void **)&drv.unmap},
        {"cuMemSetAccess", (void **)&drv.set_access},   {"cuMemGetAllocationGranularity", (void **)&drv.granularity},
        {"cuMemRetainAllocationHandle", (void **)&drv.retain},
        {"cuGetErrorName", (void **)&drv.error_name},   {"cuDeviceGetAttribute", (void **)&drv.attribute},
        {"cuDeviceGet", (void **)&drv.device_get},
        {"cuMemExportToShareableHandle", (void **)&drv.export_handle},
        {"cuMemImportFromShareableHandle", (void **)&drv.import_handle},
    };
    int ok = 1;
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        enum cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion(syms[i].name, syms[i].fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess || !*syms[i].fn) {
            (void)cudaGetLastError();
            carve_backend_fail("the driver has no %s", syms[i].name);
            ok = 0;
            break;
        }
    }
    __atomic_store_n(&loaded, ok ? 1 : -1, __ATOMIC_RELEASE);
    return ok ? 1 : -1;
}

static carve_status drv_error(CUresult r, const char *what) {
    const char *name = "CUDA_ERROR_UNKNOWN";
    if (drv.error_name)
        drv.error_name(r, &name);
    carve_backend_fail("%s: %s", what, name);
    carve_backend_code(CARVE_DRIVER_ERROR_DRIVER, (int)r);
    return r == CUDA_ERROR_OUT_OF_MEMORY ? CARVE_ERR_OOM : CARVE_ERR_BACKEND;
}

static va_range *range_of(vmm_ctx *c, uintptr_t addr) {
    carve_mutex_lock(&c->lock);
    va_range *r = c->ranges;
    while (r && !(addr >= r->base && addr < r->base + r->size))
        r = r->next;
    carve_mutex_unlock(&c->lock);
    return r;
}

static carve_status vmm_reserve(carve_be *be, size_t size, uintptr_t *base) {
    vmm_ctx *c = be->ctx;
    va_range *r = calloc(1, sizeof(*r));
    if (!r) {
        carve_backend_fail_host("host memory exhausted");
        return CARVE_ERR_OOM;
    }
    int prev;
    carve_status st = carve_cuda_enter(c->cuda.device, &prev);
    CUdeviceptr p = 0;
    CUresult e = CUDA_SUCCESS;
    if (st == CARVE_OK) {
        int mode = carve_cuda_relax();
        e = drv.reserve(&p, size, CARVE_SEGMENT_GRANULE, 0, 0);
        carve_cuda_unrelax(mode);
        carve_ledger_add(&be->ledger, CARVE_DRV_RESERVE, 1, 0, size);
        carve_cuda_leave(c->cuda.device, prev);
    }
    if (st == CARVE_OK && e != CUDA_SUCCESS)
        st = drv_error(e, "cuMemAddressReserve");
    if (st != CARVE_OK) {
        free(r);
        return st;
    }
    r->base = (uintptr_t)p;
    r->size = size;
    carve_mutex_lock(&c->lock);
    r->next = c->ranges;
    c->ranges = r;
    carve_mutex_unlock(&c->lock);
    *base = r->base;
    return CARVE_OK;
}

static carve_status vmm_release(carve_be *be, uintptr_t base, size_t size) {
    vmm_ctx *c = be->ctx;
    carve_mutex_lock(&c->lock);
    va_range **pp = &c->ranges;
    while (*pp && (*pp)->base != base)
        pp = &(*pp)->next;
    va_range *r = *pp;
    if (r)
        *pp = r->next;
    carve_mutex_unlock(&c->lock);
    int mode = carve_cuda_relax();
    CUresult e = drv.free((CUdeviceptr)base, size);
    carve_cuda_unrelax(mode);
    carve_ledger_add(&be->ledger, CARVE_DRV_UNRESERVE, 1, 0, size);
    free(r);
    return e == CUDA_SUCCESS ? CARVE_OK : drv_error(e, "cuMemAddressFree");
}

/* Whether [addr, addr+size) is whole pieces of piece bytes (whole granules;
 * with rest_ok, the last piece may be shorter) inside one reservation; a
 * message when not. */
static int pieces_ok(vmm_ctx *c, uintptr_t addr, size_t size, size_t piece, const char *what, int rest_ok) {
    va_range *r = range_of(c, addr);
    if (!r || size == 0 || piece == 0 || piece % CARVE_SEGMENT_GRANULE || size % CARVE_SEGMENT_GRANULE ||
        (!rest_ok && size % piece) ||
        (addr - r->base) % CARVE_SEGMENT_GRANULE || size > r->size - (addr - r->base)) {
        carve_backend_fail("%s of %zu bytes in pieces of %zu at %#lx outside a reserved range", what, size, piece,
                           (unsigned long)addr);
        return 0;
    }
    return 1;
}

/* A handle for one piece: a recycled granule, else a new one. With ipc
 * automatic, a driver that refuses file-descriptor handles for a reason
 * other than memory gets plain ones from then on, and the arena says it can
 * no longer export (be->ipc 0: carve_arena_get_config and carve_ipc_export
 * read it). */
static CUresult take_handle(carve_be *be, vmm_ctx *c, size_t piece, CUmemGenericAllocationHandle *h) {
    int got = 0;
    if (piece == CARVE_SEGMENT_GRANULE) {
        carve_mutex_lock(&c->lock);
        if ((got = c->nspare > 0))
            *h = c->spare[--c->nspare];
        carve_mutex_unlock(&c->lock);
    }
    if (got)
        return CUDA_SUCCESS;
    carve_ledger_add(&be->ledger, CARVE_DRV_CREATE, 1, 0, piece);
    if (!__atomic_load_n(&c->fd_handles, __ATOMIC_RELAXED))
        return drv.create(h, piece, &c->prop, 0);
    CUresult e = drv.create(h, piece, &c->prop_fd, 0);
    if (e == CUDA_SUCCESS || e == CUDA_ERROR_OUT_OF_MEMORY || c->fd_required)
        return e;
    __atomic_store_n(&c->fd_handles, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&be->ipc, 0, __ATOMIC_RELAXED);
    carve_ledger_add(&be->ledger, CARVE_DRV_CREATE, 1, 0, piece);
    return drv.create(h, piece, &c->prop, 0);
}

/* A handle no longer needed: kept inside a recycle window (a granule's,
 * where there is room to remember it), else released. */
static CUresult drop_handle(carve_be *be, vmm_ctx *c, CUmemGenericAllocationHandle h, size_t piece) {
    carve_mutex_lock(&c->lock);
    int keep = c->recycling;
    if (keep && c->nspare == c->capspare) {
        size_t cap = c->capspare ? 2 * c->capspare : 64;
        CUmemGenericAllocationHandle *n = realloc(c->spare, cap * sizeof(*n));
        if (n) {
            c->spare = n;
            c->capspare = cap;
        } else {
            keep = 0;
        }
    }
    if (keep)
        c->spare[c->nspare++] = h;
    carve_mutex_unlock(&c->lock);
    if (keep)
        return CUDA_SUCCESS;
    carve_ledger_add(&be->ledger, CARVE_DRV_RELEASE, 1, 0, piece);
    return drv.release(h);
}

static int recycling(vmm_ctx *c) {
    carve_mutex_lock(&c->lock);
    int on = c->recycling > 0;
    carve_mutex_unlock(&c->lock);
    return on;
}

static carve_status vmm_commit_relaxed(carve_be *be, uintptr_t addr, size_t size, size_t piece);

/* The creates, maps and access of a commit, and the unmaps and releases of a
 * decommit, are made in relaxed capture mode (cuda_common.c). */
static carve_status vmm_commit(carve_be *be, uintptr_t addr, size_t size, size_t piece) {
    int mode = carve_cuda_relax();
    carve_status st = vmm_commit_relaxed(be, addr, size, piece);
    carve_cuda_unrelax(mode);
    return st;
}

static carve_status vmm_decommit_relaxed(carve_be *be, uintptr_t addr, size_t size, size_t piece, size_t *done);

static carve_status vmm_decommit(carve_be *be, uintptr_t addr, size_t size, size_t piece, size_t *done) {
    int mode = carve_cuda_relax();
    carve_status st = vmm_decommit_relaxed(be, addr, size, piece, done);
    carve_cuda_unrelax(mode);
    return st;
}

static carve_status vmm_commit_relaxed(carve_be *be, uintptr_t addr, size_t size, size_t piece) {
    vmm_ctx *c = be->ctx;
    if (!pieces_ok(c, addr, size, piece, "commit", 1))
        return CARVE_ERR_BACKEND;
    size_t n = size / piece + (size % piece != 0), i = 0; /* the last mapping: what is left */
    CUresult e = CUDA_SUCCESS;
    const char *what = "cuMemCreate";
    for (; i < n; i++) {
        size_t len = size - i * piece < piece ? size - i * piece : piece;
        CUmemGenericAllocationHandle h = 0;
        if ((e = take_handle(be, c, len, &h)) != CUDA_SUCCESS)
            break;
        e = drv.map((CUdeviceptr)(addr + i * piece), len, 0, h, 0);
        carve_ledger_add(&be->ledger, CARVE_DRV_MAP, 1, 1, len);
        carve_ledger_add(&be->ledger, CARVE_DRV_RELEASE, 1, 0, len);
        drv.release(h); /* mapped: the mapping holds the memory now, and unmapping frees it */
        if (e != CUDA_SUCCESS) {
            what = "cuMemMap";
            break;
        }
    }
    if (i == n) {
        carve_ledger_add(&be->ledger, CARVE_DRV_ACCESS, 1, n, size);
        if ((e = drv.set_access((CUdeviceptr)addr, size, c->access, c->naccess)) != CUDA_SUCCESS)
            what = "cuMemSetAccess";
    }
    if (e == CUDA_SUCCESS)
        return CARVE_OK;
    while (i-- > 0) { /* all or nothing: undo the pieces mapped (their memory goes with them) */
        size_t len = size - i * piece < piece ? size - i * piece : piece;
        carve_ledger_add(&be->ledger, CARVE_DRV_UNMAP, 1, 1, len);
        drv.unmap((CUdeviceptr)(addr + i * piece), len);
    }
    return drv_error(e, what);
}

static carve_status vmm_decommit_relaxed(carve_be *be, uintptr_t addr, size_t size, size_t piece, size_t *done) {
    vmm_ctx *c = be->ctx;
    *done = 0;
    if (!pieces_ok(c, addr, size, piece, "decommit", 0))
        return CARVE_ERR_BACKEND;
    for (size_t off = 0; off < size; off += piece) {
        CUdeviceptr at = (CUdeviceptr)(addr + off);
        /* In a recycle window a granule's memory is kept for the next map:
         * its handle back from the address, before the unmap would free it. */
        CUmemGenericAllocationHandle h = 0;
        int keep = piece == CARVE_SEGMENT_GRANULE && recycling(c);
        if (keep) {
            carve_ledger_add(&be->ledger, CARVE_DRV_RETAIN, 1, 0, 0);
            keep = drv.retain(&h, (void *)at) == CUDA_SUCCESS;
        }
        carve_ledger_add(&be->ledger, CARVE_DRV_UNMAP, 1, 1, piece);
        CUresult e = drv.unmap(at, piece);
        if (e != CUDA_SUCCESS) {
            if (keep) {
                carve_ledger_add(&be->ledger, CARVE_DRV_RELEASE, 1, 0, piece);
                drv.release(h); /* the mapping still holds it */
            }
            return drv_error(e, "cuMemUnmap");
        }
        *done += piece;
        if (keep && (e = drop_handle(be, c, h, piece)) != CUDA_SUCCESS)
            return drv_error(e, "cuMemRelease");
    }
    return CARVE_OK;
}

static void vmm_recycle(carve_be *be, int on) {
    vmm_ctx *c = be->ctx;
    carve_mutex_lock(&c->lock);
    c->recycling += on ? 1 : -1;
    if (c->recycling == 0) { /* the last window closed: give back what was not reused */
        if (c->nspare)
            carve_ledger_add(&be->ledger, CARVE_DRV_RELEASE, c->nspare, 0, c->nspare * CARVE_SEGMENT_GRANULE);
        int mode = c->nspare ? carve_cuda_relax() : -1;
        for (size_t i = 0; i < c->nspare; i++)
            drv.release(c->spare[i]);
        carve_cuda_unrelax(mode);
        c->nspare = 0;
    }
    carve_mutex_unlock(&c->lock);
}

/* One descriptor per mapping, in address order: the handle behind each
 * (cuMemRetainAllocationHandle at its address), exported whole. */
static carve_status vmm_export(carve_be *be, const carve_be_piece *pieces, size_t n, int **fds_out) {
    vmm_ctx *c = be->ctx;
    if (!__atomic_load_n(&c->fd_handles, __ATOMIC_RELAXED)) {
        carve_backend_fail("this arena's memory has no file-descriptor handles (ipc=0, or the device or driver "
                           "does not offer them): it cannot be exported");
        return CARVE_ERR_INVALID;
    }
    for (size_t i = 0; i < n; i++)
        if (!pieces_ok(c, pieces[i].addr, pieces[i].size, pieces[i].size, "export", 0))
            return CARVE_ERR_BACKEND;
    int *fds = malloc(n * sizeof(*fds));
    if (!fds) {
        carve_backend_fail_host("host memory exhausted");
        return CARVE_ERR_OOM;
    }
    carve_status st = CARVE_OK;
    size_t i = 0;
    int mode = carve_cuda_relax(); /* cuMemRelease is potentially unsafe during a capture */
    for (; i < n; i++) {
        CUmemGenericAllocationHandle h = 0;
        carve_ledger_add(&be->ledger, CARVE_DRV_RETAIN, 1, 0, 0);
        if (drv.retain(&h, (void *)pieces[i].addr) != CUDA_SUCCESS) {
            carve_backend_fail("mapping %zu of the buffer is not mapped", i);
            st = CARVE_ERR_BACKEND;
            break;
        }
        CUresult e = drv.export_handle(&fds[i], h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
        carve_ledger_add(&be->ledger, CARVE_DRV_RELEASE, 1, 0, 0);
        drv.release(h);
        if (e != CUDA_SUCCESS) {
            st = drv_error(e, "cuMemExportToShareableHandle");
            if (st == CARVE_ERR_OOM) /* what the driver says when the process is out of descriptors */
                st = CARVE_ERR_BACKEND;
            break;
        }
    }
    carve_cuda_unrelax(mode);
    if (st != CARVE_OK) {
        while (i-- > 0)
            close(fds[i]);
        free(fds);
        return st;
    }
    *fds_out = fds;
    return CARVE_OK;
}

static void vmm_destroy(carve_be *be) {
    vmm_ctx *c = be->ctx;
    carve_cuda_ctx_destroy(&c->cuda);
    carve_mutex_destroy(&c->lock);
    while (c->ranges) { /* the engine released them; this only frees leftovers */
        va_range *r = c->ranges;
        c->ranges = r->next;
        free(r);
    }
    for (size_t i = 0; i < c->nspare; i++)
        drv.release(c->spare[i]);
    free(c->spare);
    free(c->access);
    free(c);
}

static const carve_backend_ops vmm_ops = {
    .reserve = vmm_reserve,
    .release = vmm_release,
    .commit = vmm_commit,
    .decommit = vmm_decommit,
    .recycle = vmm_recycle,
    .event_record = carve_cuda_event_record,
    .event_query = carve_cuda_event_query,
    .event_sync = carve_cuda_event_sync,
    .event_follow = carve_cuda_event_follow,
    .capturing = carve_cuda_capturing,
    .context_capturing = carve_cuda_context_capturing,
    .device_sync = carve_cuda_device_sync,
    .event_release = carve_cuda_event_release,
    .destroy = vmm_destroy,
    .export_pieces = vmm_export,
};

carve_status carve_backend_open_cuda_vmm(carve_be *be, const carve_config *cfg) {
    int device = cfg->device;
    size_t free_b, total_b;
    carve_status st = carve_cuda_mem_info(device, &free_b, &total_b);
    if (st != CARVE_OK)
        return st;
    if (load_driver() != 1)
        return CARVE_ERR_NO_DEVICE;
    int vmm_ok = 0;
    CUdevice dev = 0;
    CUresult ea = drv.device_get(&dev, device);
    if (ea == CUDA_SUCCESS)
        ea = drv.attribute(&vmm_ok, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev);
    if (ea != CUDA_SUCCESS || !vmm_ok) {
        carve_backend_fail("device %d does not support virtual memory management (cuMemCreate/cuMemMap)", device);
        return CARVE_ERR_NO_DEVICE;
    }
    int fd_ok = 0;
    if (cfg->ipc != 0 &&
        drv.attribute(&fd_ok, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev) != CUDA_SUCCESS)
        fd_ok = 0;
    if (cfg->ipc == 1 && !fd_ok) {
        carve_backend_fail("device %d cannot export memory as POSIX file descriptors (ipc=1)", device);
        return CARVE_ERR_INVALID;
    }
    int peers[CARVE_PEERS_MAX + 1], npeers = 0;
    st = carve_cuda_peer_list(cfg, device, peers, &npeers);
    if (st != CARVE_OK)
        return st;
    vmm_ctx *c = calloc(1, sizeof(*c));
    CUmemAccessDesc *access = calloc((size_t)npeers, sizeof(*access));
    if (!c || !access) {
        free(c);
        free(access);
        carve_backend_fail_host("host memory exhausted");
        return CARVE_ERR_OOM;
    }
    c->cuda.device = device;
    carve_mutex_init(&c->cuda.lock);
    carve_mutex_init(&c->lock);
    c->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    c->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    c->prop.location.id = device;
    c->prop_fd = c->prop;
    c->prop_fd.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    c->fd_handles = fd_ok;
    c->fd_required = cfg->ipc == 1;
    for (int i = 0; i < npeers; i++) {
        access[i].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        access[i].location.id = peers[i];
        access[i].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    }
    c->access = access;
    c->naccess = (size_t)npeers;
    size_t gran = 0;
    CUresult e = drv.granularity(&gran, &c->prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (e != CUDA_SUCCESS || gran == 0 || CARVE_SEGMENT_GRANULE % gran != 0) {
        st = e != CUDA_SUCCESS ? drv_error(e, "cuMemGetAllocationGranularity") : CARVE_ERR_INVALID;
        if (e == CUDA_SUCCESS)
            carve_backend_fail("the device's mapping granularity (%zu bytes) does not divide 2 MiB", gran);
        vmm_destroy(&(carve_be){.ctx = c});
        return st;
    }
    be->ctx = c;
    be->ops = &vmm_ops;
    be->total_bytes = total_b;
    be->ipc = fd_ok;
    return CARVE_OK;
}

/* Another process's mappings, each handle mapped whole (sizes[i] bytes), in
 * order into fresh address space with access for device. Each imported
 * handle is released once mapped: the mapping keeps the memory, and
 * unmapping lets it go. These calls, and the unmaps of
 * carve_backend_close_fds, are made in relaxed capture mode, as every
 * potentially unsafe call of the backends is (backend.h). */
carve_status carve_backend_import_fds(const carve_ipc_desc *d, const int *fds, const size_t *sizes, int device,
                                      uintptr_t *base, size_t *len) {
    *base = 0;
    *len = 0;
    size_t free_b, total_b;
    carve_status st = carve_cuda_mem_info(device, &free_b, &total_b);
    if (st != CARVE_OK)
        return st;
    if (load_driver() != 1)
        return CARVE_ERR_NO_DEVICE;
    int prev;
    if ((st = carve_cuda_enter(device, &prev)) != CARVE_OK)
        return st;
    size_t n = d->num_fds, size = 0, i = 0, at = 0;
    for (size_t k = 0; k < n; k++)
        size += sizes[k];
    CUdeviceptr p = 0;
    const char *what = "cuMemAddressReserve";
    int mode = carve_cuda_relax();
    CUresult e = drv.reserve(&p, size, CARVE_SEGMENT_GRANULE, 0, 0);
    for (; e == CUDA_SUCCESS && i < n; i++) {
        CUmemGenericAllocationHandle h = 0;
        what = "cuMemImportFromShareableHandle";
        if ((e = drv.import_handle(&h, (void *)(uintptr_t)fds[i], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) !=
            CUDA_SUCCESS)
            break;
        what = "cuMemMap";
        e = drv.map(p + at, sizes[i], 0, h, 0);
        drv.release(h);
        if (e != CUDA_SUCCESS)
            break;
        at += sizes[i];
    }
    if (e == CUDA_SUCCESS) {
        CUmemAccessDesc a = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device},
                             .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
        what = "cuMemSetAccess";
        e = drv.set_access(p, size, &a, 1);
    }
    if (e != CUDA_SUCCESS) {
        st = drv_error(e, what);
        while (i-- > 0) {
            at -= sizes[i];
            drv.unmap(p + at, sizes[i]);
        }
        if (p)
            drv.free(p, size);
    } else {
        *base = (uintptr_t)p;
        *len = size;
    }
    carve_cuda_unrelax(mode);
    carve_cuda_leave(device, prev);
    return st;
}

carve_status carve_backend_close_fds(int device, uintptr_t base, const size_t *sizes, size_t n) {
    int prev;
    if (carve_cuda_enter(device, &prev) != CARVE_OK) /* nothing done: the mapping stays */
        return CARVE_ERR_NO_DEVICE;
    carve_status st = CARVE_OK;
    const char *what = "cuMemUnmap";
    CUresult e = CUDA_SUCCESS;
    size_t len = 0;
    int mode = carve_cuda_relax();
    for (size_t i = 0; i < n; i++) { /* whole mappings, as imported */
        CUresult u = drv.unmap((CUdeviceptr)(base + len), sizes[i]);
        if (e == CUDA_SUCCESS)
            e = u;
        len += sizes[i];
    }
    CUresult f = drv.free((CUdeviceptr)base, len);
    carve_cuda_unrelax(mode);
    if (e == CUDA_SUCCESS && f != CUDA_SUCCESS) {
        e = f;
        what = "cuMemAddressFree";
    }
    if (e != CUDA_SUCCESS)
        st = drv_error(e, what);
    carve_cuda_leave(device, prev);
    return st;
}
