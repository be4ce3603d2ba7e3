/*
 * mock_cuda.c — a stand-in libcuda.so.1 for machines without a GPU, so that
 * carve-run's interposer can be tested where CI runs.
 *
 * The one idea: implement the part of the driver API the interposer and
 * carve's driver backend touch, with host memory as "device" memory and
 * counters of what reached the driver, so a test can tell whether a call
 * was served by carve (the mock saw nothing, or one large segment) or
 * passed through (the mock saw it). Events can be made to report "not
 * ready" for a while (MOCK_EVENT_POLLS), which is how tests watch the
 * quarantine of unordered frees hold memory back. Nothing here runs
 * kernels; "device" buffers are written by the test program directly.
 *
 * The virtual-memory functions (cuMemAddressReserve, cuMemCreate, cuMemMap,
 * ...) and memory pools take from the same device memory: a physical
 * allocation lives until its handle is released and its last mapping is
 * unmapped, as the driver's does; reserved address space is real host
 * address space (PROT_NONE), which cuMemSetAccess opens for writing.
 *
 * Environment: MOCK_CUDA_MEM (bytes of device memory, default 1 GiB),
 * MOCK_EVENT_POLLS (queries before an event completes, default 0).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define EXPORT __attribute__((visibility("default")))

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct mock_ctx *CUcontext;
typedef struct mock_stream *CUstream;
typedef struct mock_event *CUevent;
typedef uint64_t cuuint64_t;

enum { OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, INVALID_CONTEXT = 201, NOT_FOUND = 500, NOT_READY = 600 };

struct mock_ctx {
    int device;
};
struct mock_stream {
    unsigned flags;
    int capturing;
};
struct mock_event {
    int polls_left;
    unsigned long long serial; /* records before and with this one's last */
};

static struct mock_ctx primary = {0};
static int capturing_streams, broken_captures; /* atomic */
static __thread CUcontext current;
static __thread CUcontext stack[16];
static __thread int depth;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* Live "device" allocations. */
typedef struct alloc_rec {
    uintptr_t base;
    size_t size;
} alloc_rec;
static alloc_rec *allocs;
static size_t nallocs, cap_allocs, used;
static unsigned long long stat_allocs, stat_frees, stat_bad_frees, stat_async_allocs;
static unsigned long long stat_calls; /* every call of a driver function */
static unsigned long long stat_event_waits;
static unsigned long long event_records, event_done_max; /* atomic: see mock_cuda_event_serials */
#define COUNTED() __atomic_add_fetch(&stat_calls, 1, __ATOMIC_RELAXED)

/* The environment, read once (getenv on every call would dwarf what the
 * benchmarks measure). */
static size_t env_mem = 0;
static int env_polls = -1;

static size_t mem_total(void) {
    size_t m = __atomic_load_n(&env_mem, __ATOMIC_RELAXED);
    if (!m) {
        const char *v = getenv("MOCK_CUDA_MEM");
        m = v && *v ? (size_t)strtoull(v, NULL, 10) : ((size_t)1 << 30);
        __atomic_store_n(&env_mem, m, __ATOMIC_RELAXED);
    }
    return m;
}

static int event_polls(void) {
    int n = __atomic_load_n(&env_polls, __ATOMIC_RELAXED);
    if (n < 0) {
        const char *v = getenv("MOCK_EVENT_POLLS");
        n = v && *v ? atoi(v) : 0;
        __atomic_store_n(&env_polls, n, __ATOMIC_RELAXED);
    }
    return n;
}

/* ---- what tests ask the mock ------------------------------------------- */

/* Counters of calls that reached the mock driver. */
EXPORT void mock_cuda_stats(unsigned long long *nalloc, unsigned long long *nfree, unsigned long long *bad_frees,
                            size_t *live_bytes) {
    pthread_mutex_lock(&lock);
    *nalloc = stat_allocs;
    *nfree = stat_frees;
    *bad_frees = stat_bad_frees;
    *live_bytes = used;
    pthread_mutex_unlock(&lock);
}

/* Event records on the legacy stream while a capture was in progress. */
EXPORT int mock_cuda_broken_captures(void) { return __atomic_load_n(&broken_captures, __ATOMIC_RELAXED); }

/* Stream-ordered allocations that reached the mock. */
EXPORT unsigned long long mock_cuda_async_allocs(void) { return __atomic_load_n(&stat_async_allocs, __ATOMIC_RELAXED); }

/* cuEventSynchronize calls so far (waits for device work). */
EXPORT unsigned long long mock_cuda_event_waits(void) { return __atomic_load_n(&stat_event_waits, __ATOMIC_RELAXED); }

/* Events recorded so far, and the highest number (in record order) of an
 * event seen complete: a buffer freed when *recorded was n may be reused
 * only once *done_max > n (an event recorded after its free completed). */
EXPORT void mock_cuda_event_serials(unsigned long long *recorded, unsigned long long *done_max) {
    *recorded = __atomic_load_n(&event_records, __ATOMIC_ACQUIRE);
    *done_max = __atomic_load_n(&event_done_max, __ATOMIC_ACQUIRE);
}

static void event_done(CUevent e) {
    unsigned long long seen = __atomic_load_n(&event_done_max, __ATOMIC_RELAXED);
    while (e->serial > seen &&
           !__atomic_compare_exchange_n(&event_done_max, &seen, e->serial, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
    }
}

/* Calls of driver functions so far (each costs time in a real driver). */
EXPORT unsigned long long mock_cuda_calls(void) { return __atomic_load_n(&stat_calls, __ATOMIC_RELAXED); }

/* ---- initialization, devices, contexts --------------------------------- */

EXPORT CUresult cuInit(unsigned flags) {
    COUNTED();
    (void)flags;
    return OK;
}
EXPORT CUresult cuDeviceGetCount(int *n) {
    COUNTED();
    *n = 1;
    return OK;
}
EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    COUNTED();
    if (ordinal != 0)
        return 101; /* CUDA_ERROR_INVALID_DEVICE */
    *d = 0;
    return OK;
}
EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
    COUNTED();
    (void)d;
    *bytes = mem_total();
    return OK;
}
EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d) {
    COUNTED();
    (void)d;
    *ctx = &primary;
    return OK;
}
EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
    COUNTED();
    (void)d;
    return OK;
}
EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice d) {
    COUNTED();
    (void)d;
    return OK;
}
EXPORT CUresult cuCtxGetCurrent(CUcontext *ctx) {
    COUNTED();
    *ctx = current;
    return OK;
}
EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
    COUNTED();
    current = ctx;
    return OK;
}
EXPORT CUresult cuCtxGetDevice(CUdevice *d) {
    COUNTED();
    if (!current)
        return INVALID_CONTEXT;
    *d = current->device;
    return OK;
}
EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
    COUNTED();
    if (depth == 16)
        return INVALID_VALUE;
    stack[depth++] = current;
    current = ctx;
    return OK;
}
EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *ctx) {
    COUNTED();
    if (!depth)
        return INVALID_CONTEXT;
    if (ctx)
        *ctx = current;
    current = stack[--depth];
    return OK;
}
EXPORT CUresult cuCtxSynchronize(void) { COUNTED(); return current ? OK : INVALID_CONTEXT; }
EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
    COUNTED();
    (void)ctx;
    return OK;
}
EXPORT CUresult cuGetErrorName(CUresult r, const char **name) {
    COUNTED();
    switch (r) {
    case OK: *name = "CUDA_SUCCESS"; break;
    case OUT_OF_MEMORY: *name = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; break;
    case NOT_READY: *name = "CUDA_ERROR_NOT_READY"; break;
    default: *name = "CUDA_ERROR_UNKNOWN"; break;
    }
    return OK;
}

/* ---- memory ------------------------------------------------------------ */

static CUresult do_alloc(CUdeviceptr *dptr, size_t size) {
    if (!current)
        return INVALID_CONTEXT;
    if (!dptr || !size)
        return INVALID_VALUE;
    pthread_mutex_lock(&lock);
    CUresult r = OK;
    void *p = NULL;
    if (used + size > mem_total() || size > mem_total()) {
        r = OUT_OF_MEMORY;
    } else if (nallocs == cap_allocs &&
               !(allocs = realloc(allocs, (cap_allocs = cap_allocs ? cap_allocs * 2 : 64) * sizeof(*allocs)))) {
        r = OUT_OF_MEMORY;
    } else if (posix_memalign(&p, 512, size) != 0) {
        r = OUT_OF_MEMORY;
    } else {
        allocs[nallocs++] = (alloc_rec){(uintptr_t)p, size};
        used += size;
        stat_allocs++;
        *dptr = (CUdeviceptr)(uintptr_t)p;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

static CUresult do_free(CUdeviceptr d) {
    if (!d)
        return OK;
    pthread_mutex_lock(&lock);
    CUresult r = INVALID_VALUE;
    for (size_t i = 0; i < nallocs; i++)
        if (allocs[i].base == (uintptr_t)d) {
            used -= allocs[i].size;
            free((void *)allocs[i].base);
            allocs[i] = allocs[--nallocs];
            stat_frees++;
            r = OK;
            break;
        }
    if (r != OK)
        stat_bad_frees++;
    pthread_mutex_unlock(&lock);
    return r;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size) { COUNTED(); return do_alloc(dptr, size); }
EXPORT CUresult cuMemFree_v2(CUdeviceptr d) { COUNTED(); return do_free(d); }
EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t size, CUstream s) {
    COUNTED();
    (void)s;
    __atomic_add_fetch(&stat_async_allocs, 1, __ATOMIC_RELAXED);
    return do_alloc(dptr, size);
}
EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream s) {
    COUNTED();
    (void)s;
    __atomic_add_fetch(&stat_async_allocs, 1, __ATOMIC_RELAXED);
    return do_alloc(dptr, size);
}
EXPORT CUresult cuMemFreeAsync(CUdeviceptr d, CUstream s) {
    COUNTED();
    (void)s;
    return do_free(d);
}
EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr d, CUstream s) {
    COUNTED();
    (void)s;
    return do_free(d);
}
EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height, unsigned elem) {
    COUNTED();
    (void)elem;
    *pitch = (width + 511) / 512 * 512;
    return do_alloc(dptr, *pitch * height);
}
EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t size, unsigned flags) {
    COUNTED();
    (void)flags;
    return do_alloc(dptr, size);
}
EXPORT CUresult cuMemGetInfo_v2(size_t *f, size_t *t) {
    COUNTED();
    pthread_mutex_lock(&lock);
    *t = mem_total();
    *f = *t - used;
    pthread_mutex_unlock(&lock);
    return OK;
}
EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr d) {
    COUNTED();
    pthread_mutex_lock(&lock);
    CUresult r = NOT_FOUND;
    for (size_t i = 0; i < nallocs; i++)
        if ((uintptr_t)d >= allocs[i].base && (uintptr_t)d < allocs[i].base + allocs[i].size) {
            if (base)
                *base = allocs[i].base;
            if (size)
                *size = allocs[i].size;
            r = OK;
            break;
        }
    pthread_mutex_unlock(&lock);
    return r;
}

/* ---- streams, captures, events ----------------------------------------- */

EXPORT CUresult cuStreamCreate(CUstream *s, unsigned flags) {
    COUNTED();
    *s = calloc(1, sizeof(**s));
    (*s)->flags = flags;
    return OK;
}
EXPORT CUresult cuStreamCreateWithPriority(CUstream *s, unsigned flags, int prio) {
    COUNTED();
    (void)prio;
    return cuStreamCreate(s, flags);
}
EXPORT CUresult cuStreamDestroy_v2(CUstream s) {
    COUNTED();
    free(s);
    return OK;
}
EXPORT CUresult cuStreamSynchronize(CUstream s) {
    COUNTED();
    (void)s;
    return OK;
}
EXPORT CUresult cuStreamBeginCapture_v2(CUstream s, int mode) {
    COUNTED();
    (void)mode;
    if ((uintptr_t)s <= 2)
        return INVALID_VALUE;
    s->capturing = 1;
    __atomic_add_fetch(&capturing_streams, 1, __ATOMIC_RELAXED);
    return OK;
}
EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, int mode) { COUNTED(); return cuStreamBeginCapture_v2(s, mode); }
EXPORT CUresult cuStreamEndCapture(CUstream s, void **graph) {
    COUNTED();
    if ((uintptr_t)s <= 2)
        return INVALID_VALUE;
    if (s->capturing)
        __atomic_sub_fetch(&capturing_streams, 1, __ATOMIC_RELAXED);
    s->capturing = 0;
    if (graph)
        *graph = NULL;
    return OK;
}
EXPORT CUresult cuStreamEndCapture_ptsz(CUstream s, void **graph) { COUNTED(); return cuStreamEndCapture(s, graph); }
EXPORT CUresult cuStreamIsCapturing(CUstream s, int *status) {
    COUNTED();
    *status = (uintptr_t)s > 2 && s->capturing;
    return OK;
}
EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream s, int *status) { COUNTED(); return cuStreamIsCapturing(s, status); }

EXPORT CUresult cuEventCreate(CUevent *e, unsigned flags) {
    COUNTED();
    (void)flags;
    *e = calloc(1, sizeof(**e));
    return *e ? OK : OUT_OF_MEMORY;
}
EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
    COUNTED();
    if ((uintptr_t)s > 2 && s->capturing)
        return 900; /* CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: recording would have joined the capture */
    if ((uintptr_t)s <= 1 && __atomic_load_n(&capturing_streams, __ATOMIC_RELAXED)) {
        /* Legacy-stream work during a capture of a blocking stream: the
         * driver answers CUDA_ERROR_STREAM_CAPTURE_IMPLICIT and the capture
         * is broken. */
        __atomic_add_fetch(&broken_captures, 1, __ATOMIC_RELAXED);
        return 906;
    }
    e->polls_left = event_polls();
    e->serial = __atomic_add_fetch(&event_records, 1, __ATOMIC_ACQ_REL);
    return OK;
}
EXPORT CUresult cuEventQuery(CUevent e) {
    COUNTED();
    if (e->polls_left > 0) {
        e->polls_left--;
        return NOT_READY;
    }
    event_done(e);
    return OK;
}
EXPORT CUresult cuEventSynchronize(CUevent e) {
    COUNTED();
    __atomic_add_fetch(&stat_event_waits, 1, __ATOMIC_RELAXED);
    e->polls_left = 0;
    event_done(e);
    return OK;
}
EXPORT CUresult cuEventDestroy_v2(CUevent e) {
    COUNTED();
    free(e);
    return OK;
}

/* ---- virtual memory and pools ------------------------------------------- */

typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct mock_pool *CUmemoryPool;
struct mock_pool {
    int device;
};
typedef struct mock_phys {
    size_t size;
    unsigned refs, maps; /* unreleased references, mappings */
} mock_phys;
typedef struct mock_range {
    uintptr_t base;
    size_t size;
    mock_phys *phys; /* NULL: a reservation; else a mapping */
} mock_range;
static mock_range *ranges;
static size_t nranges, cap_ranges;
static unsigned long long stat_creates, stat_pool_allocs;

static int add_range(uintptr_t base, size_t size, mock_phys *phys) {
    if (nranges == cap_ranges) {
        size_t cap = cap_ranges ? cap_ranges * 2 : 64;
        mock_range *r = realloc(ranges, cap * sizeof(*r));
        if (!r)
            return -1;
        ranges = r;
        cap_ranges = cap;
    }
    ranges[nranges++] = (mock_range){base, size, phys};
    return 0;
}

static int reserved(uintptr_t base, size_t size) {
    for (size_t i = 0; i < nranges; i++)
        if (!ranges[i].phys && base >= ranges[i].base && base + size <= ranges[i].base + ranges[i].size)
            return 1;
    return 0;
}

static void phys_check(mock_phys *p) {
    if (!p->refs && !p->maps) {
        used -= p->size;
        free(p);
    }
}

/* Physical allocations made and pool allocations so far; live bytes are
 * in mock_cuda_stats. */
EXPORT void mock_cuda_memory_calls(unsigned long long *creates, unsigned long long *pool_allocs) {
    *creates = __atomic_load_n(&stat_creates, __ATOMIC_RELAXED);
    *pool_allocs = __atomic_load_n(&stat_pool_allocs, __ATOMIC_RELAXED);
}

EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr,
                                    unsigned long long flags) {
    COUNTED();
    (void)align;
    (void)addr;
    (void)flags;
    if (!ptr || !size)
        return INVALID_VALUE;
    void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return OUT_OF_MEMORY;
    pthread_mutex_lock(&lock);
    int ok = add_range((uintptr_t)p, size, NULL) == 0;
    pthread_mutex_unlock(&lock);
    if (!ok) {
        munmap(p, size);
        return OUT_OF_MEMORY;
    }
    *ptr = (CUdeviceptr)(uintptr_t)p;
    return OK;
}

EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    COUNTED();
    pthread_mutex_lock(&lock);
    CUresult r = INVALID_VALUE;
    for (size_t i = 0; i < nranges; i++)
        if (!ranges[i].phys && ranges[i].base == (uintptr_t)ptr && ranges[i].size == size) {
            ranges[i] = ranges[--nranges];
            munmap((void *)(uintptr_t)ptr, size);
            r = OK;
            break;
        }
    pthread_mutex_unlock(&lock);
    return r;
}

EXPORT CUresult cuMemGetAllocationGranularity(size_t *g, const void *prop, int option) {
    COUNTED();
    (void)prop;
    (void)option;
    *g = (size_t)2 << 20;
    return OK;
}

/* prop: a CUmemAllocationProp, whose location (device 0) is not checked. */
EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const void *prop, unsigned long long flags) {
    COUNTED();
    (void)prop;
    (void)flags;
    if (!h || !size || size % ((size_t)2 << 20))
        return INVALID_VALUE;
    pthread_mutex_lock(&lock);
    CUresult r = OK;
    mock_phys *p = NULL;
    if (used + size > mem_total() || !(p = calloc(1, sizeof(*p)))) {
        r = OUT_OF_MEMORY;
    } else {
        p->size = size;
        p->refs = 1;
        used += size;
        stat_creates++;
        *h = (CUmemGenericAllocationHandle)(uintptr_t)p;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle h) {
    COUNTED();
    mock_phys *p = (mock_phys *)(uintptr_t)h;
    if (!p)
        return INVALID_VALUE;
    pthread_mutex_lock(&lock);
    CUresult r = p->refs ? OK : INVALID_VALUE;
    if (p->refs) {
        p->refs--;
        phys_check(p);
    }
    pthread_mutex_unlock(&lock);
    return r;
}

EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                         unsigned long long flags) {
    COUNTED();
    (void)flags;
    mock_phys *p = (mock_phys *)(uintptr_t)h;
    if (!p || offset || size != p->size)
        return INVALID_VALUE;
    pthread_mutex_lock(&lock);
    CUresult r = INVALID_VALUE;
    if (reserved((uintptr_t)ptr, size) && add_range((uintptr_t)ptr, size, p) == 0) {
        p->maps++;
        r = OK;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* Unmaps every mapping in [ptr, ptr + size), as the driver does for a range
 * made of whole mappings. */
EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    COUNTED();
    uintptr_t lo = (uintptr_t)ptr, hi = lo + size;
    pthread_mutex_lock(&lock);
    CUresult r = INVALID_VALUE;
    for (size_t i = 0; i < nranges;) {
        mock_range *m = &ranges[i];
        if (m->phys && m->base >= lo && m->base + m->size <= hi) {
            mprotect((void *)m->base, m->size, PROT_NONE);
            madvise((void *)m->base, m->size, MADV_DONTNEED);
            mock_phys *p = m->phys;
            *m = ranges[--nranges];
            p->maps--;
            phys_check(p);
            r = OK;
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}

EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const void *desc, size_t count) {
    COUNTED();
    (void)desc;
    (void)count;
    return mprotect((void *)(uintptr_t)ptr, size, PROT_READ | PROT_WRITE) == 0 ? OK : INVALID_VALUE;
}

EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *h, void *addr) {
    COUNTED();
    pthread_mutex_lock(&lock);
    CUresult r = INVALID_VALUE;
    for (size_t i = 0; i < nranges; i++)
        if (ranges[i].phys && (uintptr_t)addr >= ranges[i].base && (uintptr_t)addr < ranges[i].base + ranges[i].size) {
            ranges[i].phys->refs++;
            *h = (CUmemGenericAllocationHandle)(uintptr_t)ranges[i].phys;
            r = OK;
            break;
        }
    pthread_mutex_unlock(&lock);
    return r;
}

EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const void *props) {
    COUNTED();
    (void)props;
    *pool = calloc(1, sizeof(**pool));
    return *pool ? OK : OUT_OF_MEMORY;
}

EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
    COUNTED();
    free(pool);
    return OK;
}

static CUresult pool_alloc(CUdeviceptr *dptr, size_t size, CUmemoryPool pool) {
    if (!pool)
        return INVALID_VALUE;
    __atomic_add_fetch(&stat_pool_allocs, 1, __ATOMIC_RELAXED);
    return do_alloc(dptr, size);
}

/* (Each calls the shared part directly: an exported function calling
 * another would reach an interposer's hook of it.) */
EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream s) {
    COUNTED();
    (void)s;
    return pool_alloc(dptr, size, pool);
}

EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream s) {
    COUNTED();
    (void)s;
    return pool_alloc(dptr, size, pool);
}

/* The functions above, for cuGetProcAddress. */
#define E(f) {#f, (void (*)(void))f}
static const struct {
    const char *name;
    void (*fn)(void);
} memory_exports[] = {
    E(cuMemAddressReserve), E(cuMemAddressFree), E(cuMemGetAllocationGranularity), E(cuMemCreate), E(cuMemRelease),
    E(cuMemMap), E(cuMemUnmap), E(cuMemSetAccess), E(cuMemRetainAllocationHandle), E(cuMemPoolCreate),
    E(cuMemPoolDestroy), E(cuMemAllocFromPoolAsync), E(cuMemAllocFromPoolAsync_ptsz),
};
#undef E

/* ---- lookup ------------------------------------------------------------ */

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);
EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags, int *status);

/* What the real driver does: the base name asked for, "_v2" for the
 * functions that have one at this version, "_ptsz" with the per-thread
 * flag; then the exported function of that name. */
static void *lookup(const char *symbol, int version, cuuint64_t flags) {
    static const struct {
        const char *base;
        int v2_from, ptsz;
    } names[] = {
        {"cuMemAlloc", 3020, 0}, {"cuMemFree", 3020, 0}, {"cuMemGetInfo", 3020, 0}, {"cuMemAllocAsync", 0, 1},
        {"cuMemFreeAsync", 0, 1}, {"cuStreamDestroy", 4000, 0}, {"cuStreamBeginCapture", 10010, 1},
        {"cuStreamEndCapture", 0, 1}, {"cuStreamIsCapturing", 0, 1}, {"cuCtxDestroy", 4000, 0},
        {"cuCtxPushCurrent", 4000, 0}, {"cuCtxPopCurrent", 4000, 0}, {"cuEventDestroy", 4000, 0},
        {"cuDeviceTotalMem", 3020, 0}, {"cuMemGetAddressRange", 3020, 0}, {"cuMemAllocPitch", 3020, 0},
        {"cuDevicePrimaryCtxRelease", 11000, 0}, {"cuDevicePrimaryCtxReset", 11000, 0},
        {"cuGetProcAddress", 12000, 0}, {"cuMemAllocFromPoolAsync", 0, 1},
    };
    char full[128];
    snprintf(full, sizeof(full), "%s", symbol);
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(symbol, names[i].base) == 0)
            snprintf(full, sizeof(full), "%s%s%s", symbol, names[i].v2_from && version >= names[i].v2_from ? "_v2" : "",
                     names[i].ptsz && (flags & 2) ? "_ptsz" : "");
    /* The mock's own functions, never an interposer's: a table, not dlsym. */
#define E(f) {#f, (void (*)(void))f}
    static const struct {
        const char *name;
        void (*fn)(void);
    } exports[] = {
        E(cuInit), E(cuDeviceGetCount), E(cuDeviceGet), E(cuDeviceTotalMem_v2), E(cuDevicePrimaryCtxRetain),
        E(cuDevicePrimaryCtxRelease_v2), E(cuDevicePrimaryCtxReset_v2), E(cuCtxGetCurrent), E(cuCtxSetCurrent),
        E(cuCtxGetDevice), E(cuCtxPushCurrent_v2), E(cuCtxPopCurrent_v2), E(cuCtxSynchronize), E(cuCtxDestroy_v2),
        E(cuGetErrorName), E(cuMemAlloc_v2), E(cuMemFree_v2), E(cuMemAllocAsync), E(cuMemAllocAsync_ptsz),
        E(cuMemFreeAsync), E(cuMemFreeAsync_ptsz), E(cuMemAllocPitch_v2), E(cuMemAllocManaged), E(cuMemGetInfo_v2),
        E(cuMemGetAddressRange_v2), E(cuStreamCreate), E(cuStreamCreateWithPriority), E(cuStreamDestroy_v2), E(cuStreamSynchronize),
        E(cuStreamBeginCapture_v2), E(cuStreamBeginCapture_v2_ptsz), E(cuStreamEndCapture), E(cuStreamEndCapture_ptsz),
        E(cuStreamIsCapturing), E(cuStreamIsCapturing_ptsz), E(cuEventCreate), E(cuEventRecord), E(cuEventQuery),
        E(cuEventSynchronize), E(cuEventDestroy_v2), E(cuGetProcAddress), E(cuGetProcAddress_v2),
    };
#undef E
    for (size_t i = 0; i < sizeof(exports) / sizeof(exports[0]); i++)
        if (strcmp(full, exports[i].name) == 0) {
            void *p;
            memcpy(&p, &exports[i].fn, sizeof(p));
            return p;
        }
    for (size_t i = 0; i < sizeof(memory_exports) / sizeof(memory_exports[0]); i++)
        if (strcmp(full, memory_exports[i].name) == 0) {
            void *p;
            memcpy(&p, &memory_exports[i].fn, sizeof(p));
            return p;
        }
    return NULL;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags) {
    COUNTED();
    *pfn = lookup(symbol, version, flags);
    return *pfn ? OK : NOT_FOUND;
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags, int *status) {
    COUNTED();
    *pfn = lookup(symbol, version, flags);
    if (status)
        *status = *pfn ? 0 : 1; /* CU_GET_PROC_ADDRESS_SUCCESS / _SYMBOL_NOT_FOUND */
    return *pfn ? OK : NOT_FOUND;
}
