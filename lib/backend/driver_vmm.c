/*
 * driver_vmm.c — the driver-API backend's virtual-memory mode: address
 * space reserved with cuMemAddressReserve, physical memory created with
 * cuMemCreate one granule at a time and mapped with cuMemMap, access
 * granted with one cuMemSetAccess per run (one descriptor per device the
 * configuration grants: peers.h); cuMemUnmap gives a granule back.
 *
 * The one idea, as in cuda_vmm.c: a handle is released as soon as it is
 * mapped, so the mapping alone holds the memory and unmapping frees it;
 * nothing is kept per mapping. Inside a recycle window (the engine opens
 * one while it unmaps granules to map others) an unmapped granule's handle
 * is taken back from its address first (cuMemRetainAllocationHandle) and
 * kept to be mapped again in place of a new one, which saves a cuMemCreate
 * and a release per granule; closing the window releases what was not
 * reused. Every call goes through the driver table (driver_api.c), which
 * under carve-run is the driver's real entry points (metered against the
 * cap by the interposer), never its hooks.
 *
 * A handle whose cuMemRelease fails still holds its memory: it is tried
 * again at once, and if that fails too it is kept and released again at
 * the next unmap, the end of a recycle window, abandonment or destruction
 * (the cap counts it until then, as the driver does). Likewise a piece a
 * failed commit could not unmap again (its rollback's cuMemUnmap refused
 * twice) is remembered as mapped: unmapped before the next commit (which
 * fails while one in its range stays mapped) and before its range is freed.
 *
 * The reserved ranges are the one thing remembered: when the context the
 * arena serves is taken away, the driver frees nothing of this memory (it
 * belongs to no context). Abandoning is then done in two stages (backend.h):
 * first no call takes memory any more, and the engine unmaps what its
 * records say is mapped (decommit still acts, without the gone context),
 * which costs what is mapped, not the address space; then every range is
 * freed, and from then on nothing acts: the addresses may be another's.
 *
 * Pieces, as in cuda_vmm.c: the engine commits in pieces of a granule or
 * of a larger mapping (maps.c records those), the last one of a commit
 * possibly shorter, and decommits whole mappings only, one call per piece;
 * only a granule's handle is kept for reuse in a recycle window. Every
 * driver call made for the arena goes into its driver ledger (ledger.h),
 * counted where it is made, as the virtual backend counts the same work; a
 * handle released later (kept, or refused before) counts its piece's bytes.
 * The calls run with the thread in relaxed capture mode: driver.c makes
 * every call into this file so (driver_api.h's carve_driver_relax).
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

enum { LIVE, REFUSING, FREED }; /* the states of abandonment */

typedef struct handles {
    CUmemGenericAllocationHandle *h;
    size_t *size; /* each handle's bytes */
    size_t n, cap;
} handles;

/* Pieces a failed commit left mapped: its rollback's cuMemUnmap was
 * refused twice, so the engine holds them unmapped while the driver does
 * not. */
typedef struct strays {
    struct {
        uintptr_t addr;
        size_t size;
    } *s;
    size_t n, cap;
} strays;

struct carve_drv_vmm {
    const carve_driver_api *api;
    carve_ledger *ledger; /* the arena's (the backend's carve_be) */
    CUmemAllocationProp prop;
    CUmemAccessDesc *access; /* owner first, then the peers (peers.h) */
    size_t naccess;
    carve_mutex lock; /* guards everything below */
    drv_range *ranges;
    int state;        /* LIVE, REFUSING or FREED */
    int recycling;    /* recycle windows open */
    handles spare;    /* unmapped granules' handles kept in a window */
    handles stuck;    /* handles whose release failed, to be released again */
    strays stray;     /* unmapped again before the next commit and before their range is freed */
};

static carve_status vmm_error(const carve_driver_api *api, CUresult r, const char *what) {
    const char *name = NULL;
    if (api->GetErrorName(r, &name) != CUDA_SUCCESS || !name)
        name = "unknown CUDA error";
    carve_backend_fail("%s: %s (%d)", what, name, (int)r);
    carve_backend_code(CARVE_DRIVER_ERROR_DRIVER, (int)r);
    return r == CUDA_ERROR_OUT_OF_MEMORY ? CARVE_ERR_OOM : CARVE_ERR_BACKEND;
}

int carve_drv_vmm_state(carve_drv_vmm *v) {
    carve_mutex_lock(&v->lock);
    int s = v->state;
    carve_mutex_unlock(&v->lock);
    return s;
}

static int refuses(carve_drv_vmm *v) {
    if (carve_drv_vmm_state(v) == LIVE)
        return 0;
    carve_backend_fail("the arena's CUDA context is gone");
    return 1;
}

/* Lock held: push h (of size bytes) on l; 0, or -1 when host memory ran
 * out. */
static int push(handles *l, CUmemGenericAllocationHandle h, size_t size) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        CUmemGenericAllocationHandle *n = realloc(l->h, cap * sizeof(*n));
        if (n)
            l->h = n;
        size_t *z = n ? realloc(l->size, cap * sizeof(*z)) : NULL;
        if (!z)
            return -1;
        l->size = z;
        l->cap = cap;
    }
    l->h[l->n] = h;
    l->size[l->n++] = size;
    return 0;
}

/* Release h (of size bytes), once more at once if the driver refuses; a
 * handle refused twice is kept (lock not held) to be released later. */
static void release(carve_drv_vmm *v, CUmemGenericAllocationHandle h, size_t size) {
    carve_ledger_add(v->ledger, CARVE_DRV_RELEASE, 1, 0, size);
    if (v->api->MemRelease(h) == CUDA_SUCCESS)
        return;
    carve_ledger_add(v->ledger, CARVE_DRV_RELEASE, 1, 0, size);
    if (v->api->MemRelease(h) == CUDA_SUCCESS)
        return;
    carve_mutex_lock(&v->lock);
    (void)push(&v->stuck, h, size); /* no room to remember it: its memory is lost, as the driver's refusal said */
    carve_mutex_unlock(&v->lock);
}

/* Lock held: release the handles whose release failed before; those
 * refused again stay. */
static void release_stuck(carve_drv_vmm *v) {
    size_t k = 0;
    for (size_t i = 0; i < v->stuck.n; i++) {
        carve_ledger_add(v->ledger, CARVE_DRV_RELEASE, 1, 0, v->stuck.size[i]);
        if (v->api->MemRelease(v->stuck.h[i]) != CUDA_SUCCESS) {
            v->stuck.h[k] = v->stuck.h[i];
            v->stuck.size[k++] = v->stuck.size[i];
        }
    }
    v->stuck.n = k;
}

/* Lock held: remember [addr, addr + size) as mapped; -1 when host memory
 * ran out. */
static int push_stray(strays *l, uintptr_t addr, size_t size) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 8;
        void *n = realloc(l->s, cap * sizeof(*l->s));
        if (!n)
            return -1;
        l->s = n;
        l->cap = cap;
    }
    l->s[l->n].addr = addr;
    l->s[l->n++].size = size;
    return 0;
}

/* Lock held: unmap the stray pieces that overlap [lo, hi). Those the
 * driver refuses again stay remembered, unless drop (their range is being
 * freed: the addresses may be another's next). Returns how many of those
 * in [lo, hi) are still mapped. */
static size_t unmap_strays(carve_drv_vmm *v, uintptr_t lo, uintptr_t hi, int drop) {
    size_t k = 0, left = 0;
    for (size_t i = 0; i < v->stray.n; i++) {
        uintptr_t a = v->stray.s[i].addr;
        size_t n = v->stray.s[i].size;
        int in = a < hi && lo < a + n;
        if (in)
            carve_ledger_add(v->ledger, CARVE_DRV_UNMAP, 1, 1, n);
        if (in && v->api->MemUnmap((CUdeviceptr)a, n) == CUDA_SUCCESS)
            continue;
        left += in;
        if (!(in && drop))
            v->stray.s[k++] = v->stray.s[i];
    }
    v->stray.n = k;
    return left;
}

/* Lock held: release the kept handles of the recycle window. */
static void release_spare(carve_drv_vmm *v) {
    if (v->spare.n)
        carve_ledger_add(v->ledger, CARVE_DRV_RELEASE, v->spare.n, 0, v->spare.n * CARVE_SEGMENT_GRANULE);
    for (size_t i = 0; i < v->spare.n; i++)
        if (v->api->MemRelease(v->spare.h[i]) != CUDA_SUCCESS)
            (void)push(&v->stuck, v->spare.h[i], CARVE_SEGMENT_GRANULE);
    v->spare.n = 0;
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

carve_drv_vmm *carve_drv_vmm_new(const carve_driver_api *api, carve_ledger *ledger, int ordinal, const int *peers,
                                 int npeers) {
    carve_drv_vmm *v = calloc(1, sizeof(*v));
    CUmemAccessDesc *access = npeers > 0 ? calloc((size_t)npeers, sizeof(*access)) : NULL;
    if (!v || !access) {
        free(v);
        free(access);
        carve_backend_fail("host memory exhausted");
        return NULL;
    }
    v->api = api;
    v->ledger = ledger;
    v->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    v->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    v->prop.location.id = ordinal;
    for (int i = 0; i < npeers; i++) {
        access[i].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        access[i].location.id = peers[i];
        access[i].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    }
    v->access = access;
    v->naccess = (size_t)npeers;
    carve_mutex_init(&v->lock);
    return v;
}

void carve_drv_vmm_free(carve_drv_vmm *v) {
    carve_mutex_lock(&v->lock);
    if (v->state != FREED) { /* abandoned: released then */
        release_spare(v);
        release_stuck(v);
    }
    carve_mutex_unlock(&v->lock);
    while (v->ranges) { /* the engine released them; this frees leftovers' records */
        drv_range *r = v->ranges;
        v->ranges = r->next;
        free(r);
    }
    free(v->spare.h);
    free(v->spare.size);
    free(v->stuck.h);
    free(v->stuck.size);
    free(v->stray.s);
    free(v->access);
    carve_mutex_destroy(&v->lock);
    free(v);
}

carve_status carve_drv_vmm_reserve(carve_drv_vmm *v, size_t size, uintptr_t *base) {
    if (refuses(v))
        return CARVE_ERR_NO_DEVICE;
    drv_range *r = calloc(1, sizeof(*r));
    if (!r) {
        carve_backend_fail("host memory exhausted");
        return CARVE_ERR_OOM;
    }
    CUdeviceptr p = 0;
    CUresult e = v->api->MemAddressReserve(&p, size, CARVE_SEGMENT_GRANULE, 0, 0);
    carve_ledger_add(v->ledger, CARVE_DRV_RESERVE, 1, 0, size);
    if (e != CUDA_SUCCESS) {
        free(r);
        return vmm_error(v->api, e, "cuMemAddressReserve");
    }
    r->base = (uintptr_t)p;
    r->size = size;
    carve_mutex_lock(&v->lock);
    int live = v->state == LIVE; /* abandoned meanwhile: the range would never be freed */
    if (live) {
        r->next = v->ranges;
        v->ranges = r;
    }
    carve_mutex_unlock(&v->lock);
    if (!live) {
        carve_ledger_add(v->ledger, CARVE_DRV_UNRESERVE, 1, 0, size);
        (void)v->api->MemAddressFree(p, size);
        free(r);
        carve_backend_fail("the arena's CUDA context is gone");
        return CARVE_ERR_NO_DEVICE;
    }
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
    int freed = v->state == FREED;
    if (!freed && v->stray.n) /* what a failed commit left mapped, or the range cannot be freed */
        (void)unmap_strays(v, base, base + size, 1);
    carve_mutex_unlock(&v->lock);
    free(r);
    if (freed) /* abandoned: the range was freed then */
        return CARVE_OK;
    carve_ledger_add(v->ledger, CARVE_DRV_UNRESERVE, 1, 0, size);
    CUresult e = v->api->MemAddressFree((CUdeviceptr)base, size);
    return e == CUDA_SUCCESS ? CARVE_OK : vmm_error(v->api, e, "cuMemAddressFree");
}

/* A handle for one piece of piece bytes: a kept granule's (for a piece of
 * a granule), else a new one. */
static CUresult take_handle(carve_drv_vmm *v, size_t piece, CUmemGenericAllocationHandle *h) {
    int got = 0;
    if (piece == CARVE_SEGMENT_GRANULE) {
        carve_mutex_lock(&v->lock);
        if ((got = v->spare.n > 0))
            *h = v->spare.h[--v->spare.n];
        carve_mutex_unlock(&v->lock);
    }
    if (got)
        return CUDA_SUCCESS;
    carve_ledger_add(v->ledger, CARVE_DRV_CREATE, 1, 0, piece);
    return v->api->MemCreate(h, piece, &v->prop, 0);
}

/* Whether [addr, addr+size) is whole pieces of piece bytes (whole granules;
 * with rest_ok, the last piece may be shorter); a message when not. */
static int pieces_ok(uintptr_t addr, size_t size, size_t piece, const char *what, int rest_ok) {
    const size_t g = CARVE_SEGMENT_GRANULE;
    if (size == 0 || piece == 0 || piece % g || size % g || addr % g || (!rest_ok && size % piece)) {
        carve_backend_fail("%s of %zu bytes in pieces of %zu at %#lx", what, size, piece, (unsigned long)addr);
        return 0;
    }
    return 1;
}

carve_status carve_drv_vmm_commit(carve_drv_vmm *v, uintptr_t addr, size_t size, size_t piece) {
    if (refuses(v))
        return CARVE_ERR_NO_DEVICE;
    if (!pieces_ok(addr, size, piece, "commit", 1))
        return CARVE_ERR_BACKEND;
    const carve_driver_api *api = v->api;
    carve_mutex_lock(&v->lock); /* what an earlier failed commit left mapped goes first */
    size_t left = v->stray.n ? unmap_strays(v, addr, addr + size, 0) : 0;
    carve_mutex_unlock(&v->lock);
    if (left) {
        carve_backend_fail("commit at %#lx: %zu pieces an earlier failed commit left mapped are still mapped "
                           "(cuMemUnmap refused again)", (unsigned long)addr, left);
        return CARVE_ERR_BACKEND;
    }
    size_t n = size / piece + (size % piece != 0), i = 0; /* the last mapping: what is left */
    CUresult e = CUDA_SUCCESS;
    const char *what = "cuMemCreate";
    for (; i < n; i++) {
        size_t len = size - i * piece < piece ? size - i * piece : piece;
        CUmemGenericAllocationHandle h = 0;
        if ((e = take_handle(v, len, &h)) != CUDA_SUCCESS)
            break;
        e = api->MemMap((CUdeviceptr)(addr + i * piece), len, 0, h, 0);
        carve_ledger_add(v->ledger, CARVE_DRV_MAP, 1, 1, len);
        release(v, h, len); /* mapped: the mapping holds the memory now, unmapping frees it; else it goes */
        if (e != CUDA_SUCCESS) {
            what = "cuMemMap";
            break;
        }
    }
    if (i == n) {
        carve_ledger_add(v->ledger, CARVE_DRV_ACCESS, 1, n, size);
        if ((e = api->MemSetAccess((CUdeviceptr)addr, size, v->access, v->naccess)) != CUDA_SUCCESS)
            what = "cuMemSetAccess";
    }
    if (e == CUDA_SUCCESS)
        return CARVE_OK;
    while (i-- > 0) { /* all or nothing; a piece the driver will not unmap is remembered */
        CUdeviceptr at = (CUdeviceptr)(addr + i * piece);
        size_t len = size - i * piece < piece ? size - i * piece : piece;
        carve_ledger_add(v->ledger, CARVE_DRV_UNMAP, 1, 1, len);
        if (api->MemUnmap(at, len) == CUDA_SUCCESS)
            continue;
        carve_ledger_add(v->ledger, CARVE_DRV_UNMAP, 1, 1, len);
        if (api->MemUnmap(at, len) == CUDA_SUCCESS)
            continue;
        carve_mutex_lock(&v->lock);
        (void)push_stray(&v->stray, (uintptr_t)at, len); /* no room: it stays mapped, as the driver's refusal said */
        carve_mutex_unlock(&v->lock);
    }
    return vmm_error(api, e, what);
}

carve_status carve_drv_vmm_decommit(carve_drv_vmm *v, uintptr_t addr, size_t size, size_t piece, size_t *done) {
    *done = 0;
    carve_mutex_lock(&v->lock);
    int state = v->state, window = v->recycling > 0 && piece == CARVE_SEGMENT_GRANULE;
    if (state != FREED && v->stuck.n)
        release_stuck(v);
    carve_mutex_unlock(&v->lock);
    if (state == FREED) { /* the ranges are freed: the addresses may be another's */
        carve_backend_fail("the arena's CUDA context is gone");
        return CARVE_ERR_NO_DEVICE;
    }
    if (!pieces_ok(addr, size, piece, "decommit", 0))
        return CARVE_ERR_BACKEND;
    const carve_driver_api *api = v->api;
    for (size_t off = 0; off < size; off += piece) {
        CUdeviceptr at = (CUdeviceptr)(addr + off);
        /* In a recycle window the granule's memory is kept for the next
         * map: its handle back from the address, before the unmap frees it. */
        CUmemGenericAllocationHandle h = 0;
        int keep = window && state == LIVE;
        if (keep) {
            carve_ledger_add(v->ledger, CARVE_DRV_RETAIN, 1, 0, 0);
            keep = api->MemRetainAllocationHandle(&h, (void *)at) == CUDA_SUCCESS;
        }
        carve_ledger_add(v->ledger, CARVE_DRV_UNMAP, 1, 1, piece);
        CUresult e = api->MemUnmap(at, piece);
        if (e != CUDA_SUCCESS) {
            if (keep)
                release(v, h, piece); /* the mapping still holds it */
            return vmm_error(api, e, "cuMemUnmap");
        }
        *done += piece;
        if (keep) {
            carve_mutex_lock(&v->lock);
            int kept = v->recycling > 0 && push(&v->spare, h, piece) == 0;
            carve_mutex_unlock(&v->lock);
            if (!kept)
                release(v, h, piece);
        }
    }
    return CARVE_OK;
}

void carve_drv_vmm_recycle(carve_drv_vmm *v, int on) {
    carve_mutex_lock(&v->lock);
    v->recycling += on ? 1 : -1;
    if (v->recycling == 0 && v->state != FREED) { /* the last window closed: give back what was not reused */
        release_spare(v);
        release_stuck(v);
    }
    carve_mutex_unlock(&v->lock);
}

void carve_drv_vmm_abandon(carve_drv_vmm *v, int stage) {
    carve_mutex_lock(&v->lock);
    if (stage == 0 && v->state == LIVE) {
        v->state = REFUSING;
    } else if (stage == 1 && v->state != FREED) {
        v->state = FREED;
        release_spare(v);
        release_stuck(v);
        (void)unmap_strays(v, 0, UINTPTR_MAX, 1);
        for (drv_range *r = v->ranges; r; r = r->next) {
            carve_ledger_add(v->ledger, CARVE_DRV_UNRESERVE, 1, 0, r->size);
            (void)v->api->MemAddressFree((CUdeviceptr)r->base, r->size);
        }
    }
    carve_mutex_unlock(&v->lock);
}
