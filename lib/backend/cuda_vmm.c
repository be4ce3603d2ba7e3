/*
 * cuda_vmm.c — the CUDA virtual-memory backend: address space from
 * cuMemAddressReserve, physical memory mapped into it granule by granule
 * with cuMemCreate + cuMemMap + cuMemSetAccess, and unmapped with cuMemUnmap
 * + cuMemRelease, so carve_empty_cache (and the arena's lazy trimming) can
 * give back memory in the middle of an arena.
 *
 * The driver functions are fetched through the runtime's entry-point query,
 * so carve links against cudart only. Each 2 MiB granule is its own physical
 * allocation (the driver unmaps whole mappings only), and its handle is kept
 * in a table per address reservation. A run of granules is committed with
 * one cuMemMap per granule and a single cuMemSetAccess over the run. Inside
 * a recycle window (the engine opens one while it unmaps granules to map
 * others), unmapped handles are kept on a stack and mapped again in place
 * of new ones, which saves a cuMemRelease and a cuMemCreate per granule;
 * closing the window releases what was not reused. Events, the device guard
 * and error messages are shared with the cudaMalloc backend (cuda_common.h).
 */
#include <cuda.h>
#include <string.h>

#include "backend/cuda_common.h"
#include "backend/leaves.h"

typedef struct va_range {
    uintptr_t base;
    size_t size;
    CUmemGenericAllocationHandle *handles; /* one per granule, 0 = unmapped */
    struct va_range *next;
} va_range;

typedef struct vmm_ctx {
    carve_cuda_ctx cuda; /* first: the shared event code reads it */
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
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
    CUresult (*error_name)(CUresult, const char **);
    CUresult (*attribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*device_get)(CUdevice *, int);
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
        {"cuGetErrorName", (void **)&drv.error_name},   {"cuDeviceGetAttribute", (void **)&drv.attribute},
        {"cuDeviceGet", (void **)&drv.device_get},
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
    if (r)
        r->handles = calloc(size / CARVE_SEGMENT_GRANULE, sizeof(*r->handles));
    if (!r || !r->handles) {
        if (r)
            free(r->handles);
        free(r);
        carve_backend_fail("host memory exhausted");
        return CARVE_ERR_OOM;
    }
    int prev;
    carve_status st = carve_cuda_enter(c->cuda.device, &prev);
    CUdeviceptr p = 0;
    CUresult e = CUDA_SUCCESS;
    if (st == CARVE_OK) {
        e = drv.reserve(&p, size, CARVE_SEGMENT_GRANULE, 0, 0);
        carve_cuda_leave(c->cuda.device, prev);
    }
    if (st == CARVE_OK && e != CUDA_SUCCESS)
        st = drv_error(e, "cuMemAddressReserve");
    if (st != CARVE_OK) {
        free(r->handles);
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
    CUresult e = drv.free((CUdeviceptr)base, size);
    if (r) {
        free(r->handles);
        free(r);
    }
    return e == CUDA_SUCCESS ? CARVE_OK : drv_error(e, "cuMemAddressFree");
}

/* The reservation holding [addr, addr+size) (whole granules) and the index
 * of its first granule; NULL (with a message) for anything else. */
static va_range *granules_of(vmm_ctx *c, uintptr_t addr, size_t size, const char *what, size_t *g) {
    va_range *r = range_of(c, addr);
    if (!r || size == 0 || size % CARVE_SEGMENT_GRANULE || (addr - r->base) % CARVE_SEGMENT_GRANULE ||
        size > r->size - (addr - r->base)) {
        carve_backend_fail("%s of %zu bytes at %#lx outside a reserved range", what, size, (unsigned long)addr);
        return NULL;
    }
    *g = (addr - r->base) / CARVE_SEGMENT_GRANULE;
    return r;
}

/* A handle for one granule: a recycled one, else a new one. */
static CUresult take_handle(vmm_ctx *c, CUmemGenericAllocationHandle *h) {
    carve_mutex_lock(&c->lock);
    int got = c->nspare > 0;
    if (got)
        *h = c->spare[--c->nspare];
    carve_mutex_unlock(&c->lock);
    return got ? CUDA_SUCCESS : drv.create(h, CARVE_SEGMENT_GRANULE, &c->prop, 0);
}

/* An unmapped handle: kept inside a recycle window (when there is room to
 * remember it), else released. */
static CUresult drop_handle(vmm_ctx *c, CUmemGenericAllocationHandle h) {
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
    return keep ? CUDA_SUCCESS : drv.release(h);
}

static carve_status vmm_commit(carve_be *be, uintptr_t addr, size_t size) {
    vmm_ctx *c = be->ctx;
    size_t g0;
    va_range *r = granules_of(c, addr, size, "commit", &g0);
    if (!r)
        return CARVE_ERR_BACKEND;
    size_t n = size / CARVE_SEGMENT_GRANULE, i = 0;
    CUresult e = CUDA_SUCCESS;
    const char *what = "cuMemCreate";
    for (; i < n; i++) {
        CUmemGenericAllocationHandle h = 0;
        if ((e = take_handle(c, &h)) != CUDA_SUCCESS)
            break;
        uintptr_t at = addr + i * CARVE_SEGMENT_GRANULE;
        if ((e = drv.map((CUdeviceptr)at, CARVE_SEGMENT_GRANULE, 0, h, 0)) != CUDA_SUCCESS) {
            what = "cuMemMap";
            drop_handle(c, h);
            break;
        }
        r->handles[g0 + i] = h;
    }
    if (i == n && (e = drv.set_access((CUdeviceptr)addr, size, &c->access, 1)) != CUDA_SUCCESS)
        what = "cuMemSetAccess";
    if (e == CUDA_SUCCESS)
        return CARVE_OK;
    while (i-- > 0) { /* all or nothing: undo the granules mapped */
        drv.unmap((CUdeviceptr)(addr + i * CARVE_SEGMENT_GRANULE), CARVE_SEGMENT_GRANULE);
        drop_handle(c, r->handles[g0 + i]);
        r->handles[g0 + i] = 0;
    }
    return drv_error(e, what);
}

static carve_status vmm_decommit(carve_be *be, uintptr_t addr, size_t size) {
    vmm_ctx *c = be->ctx;
    size_t g0;
    va_range *r = granules_of(c, addr, size, "decommit", &g0);
    if (!r)
        return CARVE_ERR_BACKEND;
    for (size_t i = 0; i < size / CARVE_SEGMENT_GRANULE; i++) {
        CUresult e = drv.unmap((CUdeviceptr)(addr + i * CARVE_SEGMENT_GRANULE), CARVE_SEGMENT_GRANULE);
        if (e != CUDA_SUCCESS)
            return drv_error(e, "cuMemUnmap");
        e = drop_handle(c, r->handles[g0 + i]);
        r->handles[g0 + i] = 0;
        if (e != CUDA_SUCCESS)
            return drv_error(e, "cuMemRelease");
    }
    return CARVE_OK;
}

static void vmm_recycle(carve_be *be, int on) {
    vmm_ctx *c = be->ctx;
    carve_mutex_lock(&c->lock);
    c->recycling += on ? 1 : -1;
    if (c->recycling == 0) { /* the last window closed: give back what was not reused */
        for (size_t i = 0; i < c->nspare; i++)
            drv.release(c->spare[i]);
        c->nspare = 0;
    }
    carve_mutex_unlock(&c->lock);
}

static void vmm_destroy(carve_be *be) {
    vmm_ctx *c = be->ctx;
    carve_cuda_ctx_destroy(&c->cuda);
    carve_mutex_destroy(&c->lock);
    while (c->ranges) { /* the engine released them; this only frees leftovers */
        va_range *r = c->ranges;
        c->ranges = r->next;
        free(r->handles);
        free(r);
    }
    for (size_t i = 0; i < c->nspare; i++)
        drv.release(c->spare[i]);
    free(c->spare);
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
    .device_sync = carve_cuda_device_sync,
    .event_release = carve_cuda_event_release,
    .destroy = vmm_destroy,
};

carve_status carve_backend_open_cuda_vmm(carve_be *be, int device) {
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
    vmm_ctx *c = calloc(1, sizeof(*c));
    if (!c) {
        carve_backend_fail("host memory exhausted");
        return CARVE_ERR_OOM;
    }
    c->cuda.device = device;
    carve_mutex_init(&c->cuda.lock);
    carve_mutex_init(&c->lock);
    c->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    c->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    c->prop.location.id = device;
    c->access.location = c->prop.location;
    c->access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
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
    return CARVE_OK;
}
