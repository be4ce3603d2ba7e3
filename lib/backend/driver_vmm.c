/*
 * driver_vmm.c — the driver-API backend's virtual-memory mode: address
 * space reserved with cuMemAddressReserve, physical memory created with
 * cuMemCreate one granule at a time and mapped with cuMemMap, access
 * granted with one cuMemSetAccess per run; cuMemUnmap gives a granule back.
 *
 * The one idea, as in cuda_vmm.c: a handle is released as soon as it is
 * mapped, so the mapping alone holds the memory and unmapping frees it;
 * nothing is kept per mapping. Every call goes through the driver table
 * (driver_api.c), which under carve-run is the driver's real entry points
 * (metered against the cap by the interposer), never its hooks. The
 * reserved ranges are the one thing remembered: when the context the arena
 * serves is taken away, the driver frees nothing of this memory (it belongs
 * to no context), so carve_drv_vmm_abandon walks the ranges granule by
 * granule, unmaps what is still mapped (cuMemRetainAllocationHandle tells
 * which) and frees the ranges.
 */
#include "backend/driver_vmm.h"

#include <stdlib.h>
#include <string.h>

#include "base/lock.h"

typedef struct drv_range {
    uintptr_t base;
    size_t size;
    struct drv_range *next;
} drv_range;

struct carve_drv_vmm {
    const carve_driver_api *api;
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    carve_mutex lock; /* guards ranges and gone */
    drv_range *ranges;
    int gone;         /* abandoned: every call fails */
};

static carve_status vmm_error(const carve_driver_api *api, CUresult r, const char *what) {
    const char *name = NULL;
    if (api->GetErrorName(r, &name) != CUDA_SUCCESS || !name)
        name = "unknown CUDA error";
    carve_backend_fail("%s: %s (%d)", what, name, (int)r);
    return r == CUDA_ERROR_OUT_OF_MEMORY ? CARVE_ERR_OOM : CARVE_ERR_BACKEND;
}

static int is_gone(carve_drv_vmm *v) {
    carve_mutex_lock(&v->lock);
    int gone = v->gone;
    carve_mutex_unlock(&v->lock);
    if (gone)
        carve_backend_fail("the arena's CUDA context is gone");
    return gone;
}

carve_status carve_drv_vmm_check(const carve_driver_api *api, CUdevice dev) {
    if (!api->MemAddressReserve || !api->MemAddressFree || !api->MemCreate || !api->MemRelease || !api->MemMap ||
        !api->MemUnmap || !api->MemSetAccess || !api->MemGetAllocationGranularity ||
        !api->MemRetainAllocationHandle || !api->DeviceGetAttribute) {
        carve_backend_fail("the CUDA driver lacks the virtual-memory functions (cuMemCreate, cuMemMap, ...)");
        return CARVE_ERR_NO_DEVICE;
    }
    int ok = 0;
    if (api->DeviceGetAttribute(&ok, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) != CUDA_SUCCESS ||
        !ok) {
        carve_backend_fail("the device does not support virtual memory management (cuMemCreate/cuMemMap)");
        return CARVE_ERR_NO_DEVICE;
    }
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = (int)dev;
    size_t gran = 0;
    CUresult r = api->MemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != CUDA_SUCCESS)
        return vmm_error(api, r, "cuMemGetAllocationGranularity");
    if (gran == 0 || CARVE_SEGMENT_GRANULE % gran) {
        carve_backend_fail("the device's mapping granularity (%zu bytes) does not divide 2 MiB", gran);
        return CARVE_ERR_NO_DEVICE;
    }
    return CARVE_OK;
}

carve_drv_vmm *carve_drv_vmm_new(const carve_driver_api *api, int ordinal) {
    carve_drv_vmm *v = calloc(1, sizeof(*v));
    if (!v) {
        carve_backend_fail("host memory exhausted");
        return NULL;
    }
    v->api = api;
    v->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    v->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    v->prop.location.id = ordinal;
    v->access.location = v->prop.location;
    v->access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    carve_mutex_init(&v->lock);
    return v;
}

void carve_drv_vmm_free(carve_drv_vmm *v) {
    while (v->ranges) { /* the engine released them; this frees leftovers' records */
        drv_range *r = v->ranges;
        v->ranges = r->next;
        free(r);
    }
    carve_mutex_destroy(&v->lock);
    free(v);
}

carve_status carve_drv_vmm_reserve(carve_drv_vmm *v, size_t size, uintptr_t *base) {
    if (is_gone(v))
        return CARVE_ERR_NO_DEVICE;
    drv_range *r = calloc(1, sizeof(*r));
    if (!r) {
        carve_backend_fail("host memory exhausted");
        return CARVE_ERR_OOM;
    }
    CUdeviceptr p = 0;
    CUresult e = v->api->MemAddressReserve(&p, size, CARVE_SEGMENT_GRANULE, 0, 0);
    if (e != CUDA_SUCCESS) {
        free(r);
        return vmm_error(v->api, e, "cuMemAddressReserve");
    }
    r->base = (uintptr_t)p;
    r->size = size;
    carve_mutex_lock(&v->lock);
    r->next = v->ranges;
    v->ranges = r;
    carve_mutex_unlock(&v->lock);
    *base = r->base;
    return CARVE_OK;
}

carve_status carve_drv_vmm_release(carve_drv_vmm *v, uintptr_t base, size_t size) {
    carve_mutex_lock(&v->lock);
    drv_range **pp = &v->ranges;
    while (*pp && (*pp)->base != base)
        pp = &(*pp)->next;
    drv_range *r = *pp;
    if (r)
        *pp = r->next;
    int gone = v->gone;
    carve_mutex_unlock(&v->lock);
    free(r);
    if (gone) /* abandoned: the range was freed then */
        return CARVE_OK;
    CUresult e = v->api->MemAddressFree((CUdeviceptr)base, size);
    return e == CUDA_SUCCESS ? CARVE_OK : vmm_error(v->api, e, "cuMemAddressFree");
}

carve_status carve_drv_vmm_commit(carve_drv_vmm *v, uintptr_t addr, size_t size, size_t piece) {
    if (is_gone(v))
        return CARVE_ERR_NO_DEVICE;
    if (piece == 0 || size % piece) {
        carve_backend_fail("commit of %zu bytes in pieces of %zu", size, piece);
        return CARVE_ERR_BACKEND;
    }
    const carve_driver_api *api = v->api;
    size_t n = size / piece, i = 0;
    CUresult e = CUDA_SUCCESS;
    const char *what = "cuMemCreate";
    for (; i < n; i++) {
        CUmemGenericAllocationHandle h = 0;
        if ((e = api->MemCreate(&h, piece, &v->prop, 0)) != CUDA_SUCCESS)
            break;
        e = api->MemMap((CUdeviceptr)(addr + i * piece), piece, 0, h, 0);
        api->MemRelease(h); /* the mapping holds the memory now; unmapping frees it */
        if (e != CUDA_SUCCESS) {
            what = "cuMemMap";
            break;
        }
    }
    if (i == n && (e = api->MemSetAccess((CUdeviceptr)addr, size, &v->access, 1)) != CUDA_SUCCESS)
        what = "cuMemSetAccess";
    if (e == CUDA_SUCCESS)
        return CARVE_OK;
    while (i-- > 0) /* all or nothing */
        api->MemUnmap((CUdeviceptr)(addr + i * piece), piece);
    return vmm_error(api, e, what);
}

carve_status carve_drv_vmm_decommit(carve_drv_vmm *v, uintptr_t addr, size_t size, size_t piece, size_t *done) {
    *done = 0;
    if (is_gone(v))
        return CARVE_ERR_NO_DEVICE;
    for (size_t off = 0; off < size; off += piece) {
        CUresult e = v->api->MemUnmap((CUdeviceptr)(addr + off), piece);
        if (e != CUDA_SUCCESS)
            return vmm_error(v->api, e, "cuMemUnmap");
        *done += piece;
    }
    return CARVE_OK;
}

void carve_drv_vmm_abandon(carve_drv_vmm *v) {
    carve_mutex_lock(&v->lock);
    if (v->gone) {
        carve_mutex_unlock(&v->lock);
        return;
    }
    v->gone = 1;
    const carve_driver_api *api = v->api;
    for (drv_range *r = v->ranges; r; r = r->next) {
        for (size_t off = 0; off < r->size; off += CARVE_SEGMENT_GRANULE) {
            CUmemGenericAllocationHandle h = 0;
            void *at = (void *)(r->base + off);
            if (api->MemRetainAllocationHandle(&h, at) != CUDA_SUCCESS)
                continue; /* not mapped */
            api->MemRelease(h);
            api->MemUnmap((CUdeviceptr)(uintptr_t)at, CARVE_SEGMENT_GRANULE);
        }
        api->MemAddressFree((CUdeviceptr)r->base, r->size);
    }
    carve_mutex_unlock(&v->lock);
}
