/*
 * meter.c — every byte of device memory the program takes, counted per
 * device against the cap (--limit), whoever allocates it: the segments and
 * granules carve reserves for its arenas, and what goes to the driver
 * untouched — physical memory from cuMemCreate, pitched allocations, pool
 * allocations, plain allocations carve does not serve.
 *
 * The one idea: one budget per device, taken before the driver is asked and
 * given back if the driver refuses, under one lock, so that the sum never
 * passes the cap whatever the threads do. carve's own reserves pass through
 * the same budget: the driver table handed to libcarve here
 * (carve_cuda_driver_lookup) has metered cuMemAlloc and cuMemFree in place
 * of the driver's, so an arena that would grow past what the program holds
 * elsewhere finds the device full and does what it does then (gives back
 * cached memory, retries once, or answers out of memory). In
 * virtual-memory mode the table's cuMemCreate, cuMemRelease, cuMemMap,
 * cuMemUnmap and cuMemRetainAllocationHandle are metered the same way (the
 * granules count until they are unmapped). A call of the cudart backend's
 * virtual-memory mode, which reaches cuMemCreate through the interposer's
 * own hooks, is counted as carve's by its return address in libcarve.
 *
 * What was counted is found again by key: a pointer (carve's segments,
 * pitched, pool and passed-through allocations, with their context, whose
 * destruction frees them) or a cuMemCreate handle. Physical memory from
 * cuMemCreate lives while its handle is unreleased or any mapping of it
 * remains — the driver frees it only then, and ggml releases its handles
 * right after mapping them — so mappings are kept by address too, and
 * cuMemUnmap of a range ends every mapping inside it. The tables are
 * open-addressed hash maps in host memory, touched on these rare paths
 * only, never on carve's own allocations and frees of buffers.
 */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "preload/cutypes.h"
#include "preload/preload.h"

#define MAX_DEV 64

typedef struct entry {
    uint64_t key;       /* 0: an empty slot */
    size_t size;
    uint64_t handle;    /* mappings: the handle mapped there */
    void *ctx;          /* pointers: the context they belong to */
    int device, kind;
    unsigned refs, maps; /* handles: references not released, mappings left */
} entry;

typedef struct table {
    entry *e;
    size_t cap, n; /* cap: a power of two, or 0 */
} table;

typedef struct dev_meter {
    int cap_known; /* atomic */
    size_t cap;    /* SIZE_MAX: no cap */
    carve_meter_view v;
} dev_meter;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static table ptrs, handles, maps;
static dev_meter devs[MAX_DEV];
static uintptr_t carve_lo, carve_hi; /* libcarve's code, for carve_meter_from_carve */

static struct {
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemCreate)(CUmemGenericAllocationHandle *, size_t, const void *, unsigned long long);
    CUresult (*MemRelease)(CUmemGenericAllocationHandle);
    CUresult (*MemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*MemUnmap)(CUdeviceptr, size_t);
    CUresult (*MemRetain)(CUmemGenericAllocationHandle *, void *);
    CUresult (*CtxGetCurrent)(CUcontext *);
    CUresult (*CtxGetDevice)(CUdevice *);
    CUresult (*DeviceTotalMem)(size_t *, CUdevice);
} real;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int ready; /* 0 until init ran; 1 driver found; -1 none */

/* ---- hash tables ---------------------------------------------------------- */

static size_t slot_of(const table *t, uint64_t key) {
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & (t->cap - 1);
}

static entry *t_find(const table *t, uint64_t key) {
    if (!t->cap || !key)
        return NULL;
    for (size_t i = slot_of(t, key);; i = (i + 1) & (t->cap - 1)) {
        if (t->e[i].key == key)
            return &t->e[i];
        if (!t->e[i].key)
            return NULL;
    }
}

static int t_grow(table *t) {
    size_t cap = t->cap ? t->cap * 2 : 256;
    entry *e = calloc(cap, sizeof(*e));
    if (!e)
        return -1;
    table bigger = {e, cap, 0};
    for (size_t i = 0; i < t->cap; i++)
        if (t->e[i].key) {
            size_t j = slot_of(&bigger, t->e[i].key);
            while (e[j].key)
                j = (j + 1) & (cap - 1);
            e[j] = t->e[i];
            bigger.n++;
        }
    free(t->e);
    *t = bigger;
    return 0;
}

/* The entry of key, made (zeroed) if new; NULL when host memory is short. */
static entry *t_put(table *t, uint64_t key) {
    entry *found = t_find(t, key);
    if (found)
        return found;
    if ((t->n + 1) * 2 > t->cap && t_grow(t) != 0)
        return NULL;
    size_t i = slot_of(t, key);
    while (t->e[i].key)
        i = (i + 1) & (t->cap - 1);
    memset(&t->e[i], 0, sizeof(t->e[i]));
    t->e[i].key = key;
    t->n++;
    return &t->e[i];
}

/* Remove *x, shifting back the entries that probed past it (no tombstones). */
static void t_del(table *t, entry *x) {
    size_t i = (size_t)(x - t->e), mask = t->cap - 1;
    for (size_t j = (i + 1) & mask; t->e[j].key; j = (j + 1) & mask) {
        size_t home = slot_of(t, t->e[j].key);
        /* e[j] may move to i when i lies cyclically in [home, j) */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            t->e[i] = t->e[j];
            i = j;
        }
    }
    t->e[i].key = 0;
    t->n--;
}

/* ---- the budget ----------------------------------------------------------- */

static void add(int dev, int kind, size_t bytes) {
    carve_meter_view *v = &devs[dev].v;
    v->seen = 1;
    v->bytes += bytes;
    if (v->bytes > v->peak)
        v->peak = v->bytes;
    v->kind[kind].bytes += bytes;
    if (v->kind[kind].bytes > v->kind[kind].peak)
        v->kind[kind].peak = v->kind[kind].bytes;
}

static void sub(int dev, int kind, size_t bytes) {
    carve_meter_view *v = &devs[dev].v;
    v->bytes -= bytes < v->bytes ? bytes : v->bytes;
    v->kind[kind].bytes -= bytes < v->kind[kind].bytes ? bytes : v->kind[kind].bytes;
}

size_t carve_meter_cap(int dev) {
    if (dev < 0 || dev >= MAX_DEV)
        return SIZE_MAX;
    dev_meter *d = &devs[dev];
    if (__atomic_load_n(&d->cap_known, __ATOMIC_ACQUIRE))
        return d->cap;
    size_t cap = SIZE_MAX, total = 0;
    carve_config cfg;
    if (carve_conf_parse(getenv("CARVE_CONF"), dev, &cfg) == CARVE_OK) {
        if (cfg.limit_fraction > 0 && real.DeviceTotalMem && real.DeviceTotalMem(&total, (CUdevice)dev) == CUDA_SUCCESS)
            cap = (size_t)((double)total * cfg.limit_fraction);
        else if (cfg.limit_fraction <= 0 && cfg.limit_bytes)
            cap = cfg.limit_bytes;
        if (cap != SIZE_MAX)
            cap = cap / CARVE_SEGMENT_GRANULE * CARVE_SEGMENT_GRANULE;
    }
    pthread_mutex_lock(&lock);
    if (!d->cap_known) {
        d->cap = cap;
        d->v.cap = cap;
        __atomic_store_n(&d->cap_known, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&lock);
    return d->cap;
}

int carve_meter_take(int dev, size_t bytes, int kind, int last_try) {
    if (dev < 0 || dev >= MAX_DEV || kind < 0 || kind >= CARVE_METER_KINDS)
        return 0;
    size_t cap = carve_meter_cap(dev);
    int ok;
    pthread_mutex_lock(&lock);
    carve_meter_view *v = &devs[dev].v;
    ok = bytes <= cap && v->bytes <= cap - bytes;
    if (ok) {
        add(dev, kind, bytes);
        v->kind[kind].calls++;
    } else if (last_try) {
        v->seen = 1;
        v->kind[kind].refused++;
    }
    pthread_mutex_unlock(&lock);
    return ok ? 0 : -1;
}

void carve_meter_untake(int dev, size_t bytes, int kind) {
    if (dev < 0 || dev >= MAX_DEV || kind < 0 || kind >= CARVE_METER_KINDS)
        return;
    pthread_mutex_lock(&lock);
    sub(dev, kind, bytes);
    devs[dev].v.kind[kind].calls--; /* the driver refused: nothing was taken */
    pthread_mutex_unlock(&lock);
}

/* ---- what was counted, by key --------------------------------------------- */

void carve_meter_add_ptr(uintptr_t p, size_t taken, size_t size, int dev, int kind, void *ctx) {
    if (dev < 0 || dev >= MAX_DEV || kind < 0 || kind >= CARVE_METER_KINDS)
        return;
    pthread_mutex_lock(&lock);
    entry *old = t_find(&ptrs, p);
    if (old) /* freed behind the interposer's back, and handed out again */
        sub(old->device, old->kind, old->size);
    entry *e = t_put(&ptrs, p);
    if (e) {
        e->size = size;
        e->device = dev;
        e->kind = kind;
        e->ctx = ctx;
        if (size > taken)
            add(dev, kind, size - taken);
        else
            sub(dev, kind, taken - size);
    } else {
        sub(dev, kind, taken); /* no host memory to remember it: not counted */
    }
    pthread_mutex_unlock(&lock);
}

int carve_meter_forget_ptr(uintptr_t p) {
    int found = 0;
    pthread_mutex_lock(&lock);
    entry *e = t_find(&ptrs, p);
    if (e) {
        sub(e->device, e->kind, e->size);
        t_del(&ptrs, e);
        found = 1;
    }
    pthread_mutex_unlock(&lock);
    return found;
}

void carve_meter_ctx_gone(void *ctx) {
    if (!ctx)
        return;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < ptrs.cap;) {
        entry *e = &ptrs.e[i];
        if (e->key && e->ctx == ctx) {
            sub(e->device, e->kind, e->size);
            t_del(&ptrs, e); /* another entry may have moved into slot i */
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&lock);
}

void carve_meter_add_handle(uint64_t h, size_t size, int dev, int kind) {
    if (dev < 0 || dev >= MAX_DEV || kind < 0 || kind >= CARVE_METER_KINDS)
        return;
    pthread_mutex_lock(&lock);
    entry *old = t_find(&handles, h);
    if (old)
        sub(old->device, old->kind, old->size);
    entry *e = t_put(&handles, h);
    if (e) {
        e->size = size;
        e->device = dev;
        e->kind = kind;
        e->refs = 1;
        e->maps = 0;
    } else {
        sub(dev, kind, size);
    }
    pthread_mutex_unlock(&lock);
}

/* The handle's memory is gone once nothing refers to it (lock held). */
static void handle_check(entry *e) {
    if (!e->refs && !e->maps) {
        sub(e->device, e->kind, e->size);
        t_del(&handles, e);
    }
}

void carve_meter_release_handle(uint64_t h) {
    pthread_mutex_lock(&lock);
    entry *e = t_find(&handles, h);
    if (e && e->refs) {
        e->refs--;
        handle_check(e);
    }
    pthread_mutex_unlock(&lock);
}

void carve_meter_retain_handle(uint64_t h) {
    pthread_mutex_lock(&lock);
    entry *e = t_find(&handles, h);
    if (e)
        e->refs++;
    pthread_mutex_unlock(&lock);
}

void carve_meter_mapped(uintptr_t va, size_t size, uint64_t h) {
    pthread_mutex_lock(&lock);
    entry *m = t_put(&maps, va);
    if (m) {
        if (m->handle) { /* a mapping the interposer missed the end of */
            entry *old = t_find(&handles, m->handle);
            if (old && old->maps) {
                old->maps--;
                handle_check(old);
            }
        }
        m->size = size;
        m->handle = h;
        entry *e = t_find(&handles, h);
        if (e)
            e->maps++;
    }
    pthread_mutex_unlock(&lock);
}

/* The mapping *m ends (lock held). */
static void unmap_one(entry *m) {
    entry *e = t_find(&handles, m->handle);
    t_del(&maps, m);
    if (e && e->maps) {
        e->maps--;
        handle_check(e);
    }
}

void carve_meter_unmapped(uintptr_t va, size_t size) {
    pthread_mutex_lock(&lock);
    uintptr_t at = va, end = va + size;
    entry *m;
    /* The mappings of the range follow each other; a gap makes a full scan. */
    while (at < end && (m = t_find(&maps, at)) && m->size) {
        at += m->size;
        unmap_one(m);
    }
    if (at < end)
        for (size_t i = 0; i < maps.cap;) {
            m = &maps.e[i];
            if (m->key && m->key >= va && m->key < end)
                unmap_one(m);
            else
                i++;
        }
    pthread_mutex_unlock(&lock);
}

/* ---- questions -------------------------------------------------------------- */

int carve_meter_get(int dev, carve_meter_view *out) {
    memset(out, 0, sizeof(*out));
    if (dev < 0 || dev >= MAX_DEV)
        return 0;
    pthread_mutex_lock(&lock);
    *out = devs[dev].v;
    pthread_mutex_unlock(&lock);
    if (!out->seen)
        return 0;
    if (!__atomic_load_n(&devs[dev].cap_known, __ATOMIC_ACQUIRE))
        out->cap = SIZE_MAX;
    return 1;
}

const char *carve_meter_kind_name(int kind) {
    static const char *const names[CARVE_METER_KINDS] = {"carve", "cuMemCreate", "pitched", "pools", "driver"};
    return kind >= 0 && kind < CARVE_METER_KINDS ? names[kind] : "?";
}

int carve_meter_where(int *dev, void **ctx) {
    *dev = -1;
    *ctx = NULL;
    CUcontext c = NULL;
    CUdevice d = 0;
    if (carve_meter_init() != 0 || !real.CtxGetCurrent || real.CtxGetCurrent(&c) != CUDA_SUCCESS || !c ||
        real.CtxGetDevice(&d) != CUDA_SUCCESS)
        return -1;
    *dev = (int)d;
    *ctx = c;
    return 0;
}

int carve_meter_from_carve(const void *ret) {
    uintptr_t a = (uintptr_t)ret;
    return a >= carve_lo && a < carve_hi;
}

/* Taken last before fork (whoever holds it takes no other lock), so that a
 * thread of the parent that was counting cannot leave it taken in the
 * child. */
void carve_meter_fork(int stage) {
    if (stage == 0)
        pthread_mutex_lock(&lock);
    else
        pthread_mutex_unlock(&lock);
}

/* ---- carve's own driver table ---------------------------------------------- */

/* carve's backend reserves a segment (in the current context, which it pushed). */
static CUresult metered_alloc(CUdeviceptr *p, size_t size) {
    int dev;
    void *ctx;
    carve_meter_where(&dev, &ctx);
    if (dev >= 0 && carve_meter_take(dev, size, CARVE_METER_CARVE, 1) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY; /* the device is full, as far as the cap goes */
    CUresult r = real.MemAlloc(p, size);
    if (dev >= 0) {
        if (r != CUDA_SUCCESS)
            carve_meter_untake(dev, size, CARVE_METER_CARVE);
        else
            carve_meter_add_ptr((uintptr_t)*p, size, size, dev, CARVE_METER_CARVE, ctx);
    }
    return r;
}

static CUresult metered_free(CUdeviceptr p) {
    CUresult r = real.MemFree(p);
    if (r == CUDA_SUCCESS)
        carve_meter_forget_ptr((uintptr_t)p);
    return r;
}

/* Virtual-memory mode: a granule's memory is taken from the budget when it
 * is created and given back once its handle is released and its mapping
 * gone, as for the program's own cuMemCreate (counted.c). */
static CUresult metered_create(CUmemGenericAllocationHandle *h, size_t size, const void *prop,
                               unsigned long long flags) {
    const CUmemAllocationProp_head *p = prop;
    int dev = h && size && p && p->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? p->location.id : -1;
    if (dev >= 0 && carve_meter_take(dev, size, CARVE_METER_CARVE, 1) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real.MemCreate(h, size, prop, flags);
    if (dev >= 0) {
        if (r != CUDA_SUCCESS)
            carve_meter_untake(dev, size, CARVE_METER_CARVE);
        else
            carve_meter_add_handle(*h, size, dev, CARVE_METER_CARVE);
    }
    return r;
}

static CUresult metered_release(CUmemGenericAllocationHandle h) {
    CUresult r = real.MemRelease(h);
    if (r == CUDA_SUCCESS)
        carve_meter_release_handle(h);
    return r;
}

static CUresult metered_retain(CUmemGenericAllocationHandle *h, void *addr) {
    CUresult r = real.MemRetain(h, addr);
    if (r == CUDA_SUCCESS && h)
        carve_meter_retain_handle(*h);
    return r;
}

static CUresult metered_map(CUdeviceptr va, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                            unsigned long long flags) {
    CUresult r = real.MemMap(va, size, offset, h, flags);
    if (r == CUDA_SUCCESS)
        carve_meter_mapped((uintptr_t)va, size, h);
    return r;
}

static CUresult metered_unmap(CUdeviceptr va, size_t size) {
    CUresult r = real.MemUnmap(va, size);
    if (r == CUDA_SUCCESS)
        carve_meter_unmapped((uintptr_t)va, size);
    return r;
}

static int capture_active(void) { return !carve_capture_may_record(); }

static void *fn_ptr(void (*f)(void)) {
    void *p;
    memcpy(&p, &f, sizeof(p));
    return p;
}

/* The driver's functions for libcarve, metered where they take memory. */
static void *lookup_for_carve(const char *name, void *arg) {
    (void)arg;
    if (strcmp(name, "cuMemAlloc_v2") == 0)
        return fn_ptr((void (*)(void))metered_alloc);
    if (strcmp(name, "cuMemFree_v2") == 0)
        return fn_ptr((void (*)(void))metered_free);
    if (strcmp(name, "carve_capture_active") == 0)
        return fn_ptr((void (*)(void))capture_active);
    /* Virtual-memory mode needs all five metered, or none offered. */
    int vmm = real.MemCreate && real.MemRelease && real.MemMap && real.MemUnmap && real.MemRetain;
    if (strcmp(name, "cuMemCreate") == 0)
        return vmm ? fn_ptr((void (*)(void))metered_create) : NULL;
    if (strcmp(name, "cuMemRelease") == 0)
        return vmm ? fn_ptr((void (*)(void))metered_release) : NULL;
    if (strcmp(name, "cuMemRetainAllocationHandle") == 0)
        return vmm ? fn_ptr((void (*)(void))metered_retain) : NULL;
    if (strcmp(name, "cuMemMap") == 0)
        return vmm ? fn_ptr((void (*)(void))metered_map) : NULL;
    if (strcmp(name, "cuMemUnmap") == 0)
        return vmm ? fn_ptr((void (*)(void))metered_unmap) : NULL;
    return carve_real_driver(name);
}

/* The loaded object holding libcarve's code: [lo, hi) of its executable
 * segment. */
static int find_carve(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    uintptr_t a = (uintptr_t)arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && a >= lo && a < hi) {
            carve_lo = lo;
            carve_hi = hi;
            return 1;
        }
    }
    return 0;
}

static void init_once(void) {
    dl_iterate_phdr(find_carve, fn_ptr((void (*)(void))carve_alloc));
    if (carve_real_init() != 0) {
        __atomic_store_n(&ready, -1, __ATOMIC_RELEASE);
        return;
    }
#define R(field, name) CARVE_SET_FN(real.field, carve_real_driver(name))
    R(MemAlloc, "cuMemAlloc_v2");
    R(MemFree, "cuMemFree_v2");
    R(CtxGetCurrent, "cuCtxGetCurrent");
    R(CtxGetDevice, "cuCtxGetDevice");
    R(DeviceTotalMem, "cuDeviceTotalMem_v2");
    R(MemCreate, "cuMemCreate");
    R(MemRelease, "cuMemRelease");
    R(MemMap, "cuMemMap");
    R(MemUnmap, "cuMemUnmap");
    R(MemRetain, "cuMemRetainAllocationHandle");
#undef R
    int ok = real.MemAlloc && real.MemFree && real.CtxGetCurrent && real.CtxGetDevice &&
             carve_cuda_driver_lookup(lookup_for_carve, NULL) == CARVE_OK;
    __atomic_store_n(&ready, ok ? 1 : -1, __ATOMIC_RELEASE);
}

int carve_meter_init(void) {
    if (CARVE_UNLIKELY(!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)))
        pthread_once(&once, init_once);
    return __atomic_load_n(&ready, __ATOMIC_ACQUIRE) == 1 ? 0 : -1;
}
