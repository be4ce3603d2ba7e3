/*
 * mock_cuda.c — a stand-in libcuda.so.1 for machines without a GPU: a small
 * model of a device, so that carve-run's interposer can be tested, and its
 * promises checked, where CI runs.
 *
 * The one idea: model what decides whether memory is safe to hand out — the
 * work queued on streams — and let the test decide when that work
 * completes. "Device" memory is host memory (test programs write patterns
 * into it); a test queues work that uses a range on a stream
 * (mock_cuda_launch, a kernel as far as memory is concerned), and the work
 * stays queued until the test completes it (mock_cuda_complete_one, _all)
 * or the program waits for it (cuEventSynchronize, cuStreamSynchronize,
 * cuCtxSynchronize, and cuMemFree, which synchronizes as the real one
 * does). Streams order their own work; the legacy default stream and the
 * blocking streams (per-thread default streams among them) wait for each
 * other's earlier work; non-blocking streams wait for nothing but
 * themselves and the events they are told to wait for. An event completes
 * once everything its record waited for has completed. A destroyed
 * stream's queued work runs on (and nothing waits for it implicitly), and
 * its handle is reused by the next stream created, as a real driver may.
 *
 * The oracle: a program hands every allocation it gets to mock_cuda_own
 * (and takes it back with mock_cuda_disown before freeing it). The range
 * must lie in memory the driver allocated in the current context, and
 * still has (a context reset or destruction frees it); no other owned
 * range may overlap it; and no queued work may still use it, unless the
 * allocation is stream-ordered and that work is ordered before anything
 * later on its stream. Every breach is counted with a description
 * (mock_cuda_violations).
 *
 * Also modelled: graph capture on every stream kind (the legacy stream is
 * refused, as by the driver; per-thread streams, named by their handle or
 * by NULL in the _ptsz functions, are captured), with work, allocations and
 * frees on a capturing stream becoming graph nodes and graphs launched
 * later; the capture modes, as
 * cuThreadExchangeStreamCaptureMode's documentation states them: a thread in global mode (every thread's mode
 * until it exchanges it) may not make a potentially unsafe call while it
 * captures itself (a capture not begun in relaxed mode) or while another
 * thread captures in global mode, a thread in thread-local mode only while
 * it captures itself, a thread in relaxed mode always may; a refused call
 * answers CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the
 * captures it conflicts with. The calls modelled as potentially unsafe are
 * the allocations and frees (cuMemAlloc, cuMemFree, cuMemAllocPitch), the
 * virtual-memory calls (cuMemAddressReserve/Free, cuMemCreate/Release,
 * cuMemMap/Unmap, cuMemSetAccess) and the host's waits and queries
 * (cuEventQuery, cuEventSynchronize, cuStreamQuery, cuStreamSynchronize);
 * cuCtxSynchronize while a stream of the context is captured conflicts in
 * every mode (it would wait for work that is not queued), and
 * cuStreamIsCapturing on the legacy stream while a blocking stream of the
 * context is captured answers CUDA_ERROR_STREAM_CAPTURE_IMPLICIT (on
 * unless MOCK_CAPTURE_MODES=0, so every test program keeps the rules a
 * driver keeps); primary contexts retained, released (the last release resets the
 * context: its memory is freed) and reset, and contexts created and
 * destroyed; and fork: in the child of a process that called cuInit every
 * driver call answers CUDA_ERROR_NOT_INITIALIZED, as the real driver does.
 *
 * Counters say what reached the driver (allocations, frees, calls, waits,
 * stream-ordered allocations), so a test can tell a call served by carve
 * from one passed through. Events can be made to report "not ready" for a
 * number of queries even when their work is done (MOCK_EVENT_POLLS).
 *
 * The virtual-memory functions (cuMemAddressReserve, cuMemCreate, cuMemMap,
 * ...) and memory pools take from the same device memory: a physical
 * allocation lives until its handle is released and its last mapping is
 * unmapped, as the driver's does; reserved address space is real host
 * address space (PROT_NONE), which cuMemSetAccess opens for writing.
 *
 * Environment: MOCK_CUDA_MEM (bytes of device memory, default 1 GiB),
 * MOCK_EVENT_POLLS (queries before an event completes, default 0),
 * MOCK_CAPTURE_DELAY_US (a capture that begins returns that much later,
 * which widens the moment when it has begun but its caller does not know),
 * MOCK_CAPTURE_MODES=0 (the capture modes, above, not modelled),
 * MOCK_REENTER=1 (cuDeviceTotalMem calls the cuMemGetInfo_v2 first in the
 * process's lookup order, as a CUDA runtime that resolved its driver
 * functions through an interposer does from inside carve's own backend),
 * MOCK_DEVICES (devices cuDeviceGetCount reports, default 1; every one can
 * access every other's memory unless MOCK_NO_PEERS=1; all but device 0 exist
 * only to be counted and named), MOCK_ACCESS_LOG (a file to which every
 * cuMemSetAccess appends one line: "access SIZE dev dev ...", the devices
 * its descriptors grant).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct mock_ctx *CUcontext;
typedef struct mock_stream *CUstream;
typedef struct mock_event *CUevent;
typedef struct mock_graph *CUgraph;
typedef struct mock_graph *CUgraphExec;
typedef uint64_t cuuint64_t;

enum {
    OK = 0,
    INVALID_VALUE = 1,
    OUT_OF_MEMORY = 2,
    NOT_INITIALIZED = 3,
    INVALID_CONTEXT = 201,
    INVALID_HANDLE = 400,
    ILLEGAL_STATE = 401,
    NOT_FOUND = 500,
    NOT_READY = 600,
    CAPTURE_UNSUPPORTED = 900,
    CAPTURE_INVALIDATED = 901,
    CAPTURE_IMPLICIT = 906,
};

enum kind { LEGACY, BLOCKING, NONBLOCKING, PER_THREAD };
static const char *const kind_name[] = {"legacy", "blocking", "non-blocking", "per-thread"};

struct mock_graph;
struct mock_stream {
    enum kind kind;
    unsigned flags;
    struct mock_ctx *ctx;
    int live;                   /* 0 once destroyed (the struct is kept: handles stay comparable) */
    unsigned gen;               /* bumped when the handle is reused for a new stream */
    uint64_t last;              /* the latest item queued on it (0: none) */
    struct mock_graph *capture; /* the graph being captured into, or NULL */
    struct mock_stream *next;   /* the context's live streams, or the free list */
};

struct mock_ctx {
    int device;
    int primary;
    int refs;        /* primary: retains outstanding */
    int active;      /* usable: primary retained (or reset while retained), or a created context */
    unsigned incarnation;
    unsigned long long nalloc; /* allocations made in it (cuMemAlloc, pitched, managed, pools, stream-ordered) */
    struct mock_stream legacy;
    struct mock_stream *streams; /* live created and per-thread streams */
};

struct mock_event {
    uint64_t marker;           /* the item recorded last (0: never recorded) */
    int polls_left;
    unsigned long long serial; /* records before and with this one's last */
};

typedef struct node {
    int kind; /* 0 work, 1 allocation, 2 free */
    uintptr_t lo, hi;
} node;
struct mock_graph {
    node *nodes;
    size_t n, cap;
    int invalid;
    /* While it is being captured: */
    int mode;               /* the capture's mode: 0 global, 1 thread-local, 2 relaxed */
    pthread_t owner;        /* the thread that began it */
    struct mock_ctx *ctx;
};

/* Queued work: a range used (lo < hi) or a marker (an event record, a
 * stream waiting for an event), which completes as soon as what it waits
 * for has. Pending items are kept in order of id; an item depends only on
 * items with smaller ids. */
typedef struct item {
    uint64_t id;
    struct mock_stream *s;
    unsigned sgen; /* the stream's generation when queued */
    struct mock_ctx *ctx;
    uintptr_t lo, hi;
    int marker, mark;
    uint64_t *deps;
    unsigned ndeps;
} item;

/* "Device" allocations: live ones, and those freed with their context (kept
 * mapped, so a faulty program writes into dead memory rather than the heap). */
typedef struct alloc_rec {
    uintptr_t base;
    size_t size;
    struct mock_ctx *ctx;
    unsigned incarnation;
    int ctxless; /* stream-ordered or from a pool: outlives its context, as the driver's does */
    int graph;   /* a graph's allocation: its host memory is the graph's until the graph is destroyed */
} alloc_rec;

/* Ranges the program says it owns (the oracle). */
typedef struct owned {
    uintptr_t lo, hi;
    uint64_t since; /* queued work numbered below this was queued before the range was handed out */
} owned;

static struct mock_ctx primary = {.device = 0, .primary = 1, .legacy = {.kind = LEGACY, .ctx = &primary, .live = 1}};
static __thread CUcontext current;
static __thread CUcontext stack[16];
static __thread int depth;
static __thread struct {
    struct mock_ctx *ctx;
    unsigned incarnation;
    struct mock_stream *s;
} per_thread_streams[4];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int initialized; /* cuInit was called */
static int forked;      /* set in a child after fork, when the parent had called cuInit */

static alloc_rec *allocs, *dead;
static size_t nallocs, cap_allocs, ndead, cap_dead, used, used_peak;
static item *items;
static size_t nitems, cap_items;
static uint64_t next_id = 1;
static owned *owns;
static size_t nowns, cap_owns;
static struct mock_stream *free_streams;
static int capturing; /* captures in progress */
static struct mock_graph *captures_now[256]; /* their graphs (the first 256) */
static int nactive;
static __thread int thread_mode; /* the thread's capture mode (cuThreadExchangeStreamCaptureMode): 0 global */
static int broken_captures, stale_stream_uses;
static unsigned long long stat_allocs, stat_frees, stat_bad_frees, stat_async_allocs;
static unsigned long long stat_calls; /* every call of a driver function */
static unsigned long long stat_exchanges; /* of them, cuThreadExchangeStreamCaptureMode */
static unsigned long long stat_event_waits;
static unsigned long long stat_syncs; /* cuCtxSynchronize and cuStreamSynchronize calls */
static unsigned long long stat_maps, stat_unmaps; /* cuMemMap and cuMemUnmap calls that mapped or unmapped */
static unsigned long long event_records, event_done_max; /* atomic: see mock_cuda_event_serials */
static unsigned long long violations;
static char violation_text[2048];

#define COUNTED() __atomic_add_fetch(&stat_calls, 1, __ATOMIC_RELAXED)
/* Every driver function begins here: counted, and refused in a forked child. */
#define ENTER()                                              \
    do {                                                     \
        COUNTED();                                           \
        if (__atomic_load_n(&forked, __ATOMIC_RELAXED))      \
            return NOT_INITIALIZED;                          \
    } while (0)

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

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap * 2 : 64;
    while (n < need)
        n *= 2;
    void *bigger = realloc(*p, n * elem);
    if (!bigger)
        return -1;
    *p = bigger;
    *cap = n;
    return 0;
}

/* Device memory taken (lock held): its peak is kept. */
static void use(size_t n) {
    used += n;
    if (used > used_peak)
        used_peak = used;
}

/* A breach of what the device guarantees (lock held). */
static void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void violation(const char *fmt, ...) {
    violations++;
    size_t len = strlen(violation_text);
    if (len + 200 >= sizeof(violation_text))
        return; /* the first ones say enough */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(violation_text + len, sizeof(violation_text) - len - 1, fmt, ap);
    va_end(ap);
    len = strlen(violation_text);
    violation_text[len] = '\n';
    violation_text[len + 1] = 0;
}

/* ---- fork ---------------------------------------------------------------- */

static void before_fork(void) { pthread_mutex_lock(&lock); }
static void after_fork_parent(void) { pthread_mutex_unlock(&lock); }
static void after_fork_child(void) {
    pthread_mutex_unlock(&lock);
    if (__atomic_load_n(&initialized, __ATOMIC_RELAXED))
        __atomic_store_n(&forked, 1, __ATOMIC_RELAXED);
}
__attribute__((constructor)) static void mock_start(void) {
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

/* ---- queued work (lock held) ---------------------------------------------- */

static ssize_t item_index(uint64_t id) {
    size_t lo = 0, hi = nitems;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (items[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < nitems && items[lo].id == id ? (ssize_t)lo : -1;
}

static int pending(uint64_t id) { return id && item_index(id) >= 0; }

/* What a new item on s waits for: s's latest item, and the implicit
 * synchronization of the legacy stream with the blocking streams. At most
 * cap ids into deps. */
static unsigned deps_of_next(struct mock_stream *s, uint64_t *deps, unsigned cap) {
    unsigned n = 0;
    if (pending(s->last) && n < cap)
        deps[n++] = s->last;
    if (s->kind == LEGACY) {
        for (struct mock_stream *x = s->ctx->streams; x; x = x->next)
            if ((x->kind == BLOCKING || x->kind == PER_THREAD) && pending(x->last) && n < cap)
                deps[n++] = x->last;
    } else if (s->kind != NONBLOCKING && pending(s->ctx->legacy.last) && n < cap) {
        deps[n++] = s->ctx->legacy.last;
    }
    return n;
}

static unsigned count_streams(struct mock_ctx *c) {
    unsigned n = 2;
    for (struct mock_stream *x = c->streams; x; x = x->next)
        n++;
    return n;
}

static void sweep(void);

/* Queue an item on s; returns its id (0: no memory). */
static uint64_t enqueue(struct mock_stream *s, uintptr_t lo, uintptr_t hi, int marker, uint64_t also) {
    if (grow((void **)&items, &cap_items, nitems + 1, sizeof(item)) != 0)
        return 0;
    unsigned cap = count_streams(s->ctx) + 1;
    uint64_t *deps = malloc(cap * sizeof(uint64_t));
    if (!deps)
        return 0;
    unsigned n = deps_of_next(s, deps, cap);
    if (pending(also))
        deps[n++] = also;
    item *it = &items[nitems++];
    memset(it, 0, sizeof(*it));
    it->id = next_id++;
    it->s = s;
    it->sgen = s->gen;
    it->ctx = s->ctx;
    it->lo = lo;
    it->hi = hi;
    it->marker = marker;
    it->deps = deps;
    it->ndeps = n;
    s->last = it->id;
    if (marker)
        sweep();
    return it->id;
}

static int ready(const item *it) {
    for (unsigned d = 0; d < it->ndeps; d++)
        if (pending(it->deps[d]))
            return 0;
    return 1;
}

static void remove_at(size_t k) {
    free(items[k].deps);
    memmove(&items[k], &items[k + 1], (nitems - k - 1) * sizeof(item));
    nitems--;
}

/* Markers whose waits are over complete (in one pass: deps come first). */
static void sweep(void) {
    size_t k = 0;
    while (k < nitems) {
        if (items[k].marker && ready(&items[k]))
            remove_at(k);
        else
            k++;
    }
}

/* Mark id and everything it waits for, transitively (mark fields). */
static void mark_ancestors(uint64_t id) {
    ssize_t top = item_index(id);
    if (top < 0)
        return;
    items[top].mark = 1;
    for (ssize_t k = top; k >= 0; k--)
        if (items[k].mark)
            for (unsigned d = 0; d < items[k].ndeps; d++) {
                ssize_t j = item_index(items[k].deps[d]);
                if (j >= 0)
                    items[j].mark = 1;
            }
}

static void remove_marked(void) {
    size_t k = 0;
    while (k < nitems) {
        if (items[k].mark)
            remove_at(k);
        else
            k++;
    }
    sweep();
}

/* The device runs until id and all it waits for have completed (a host wait). */
static void run_until(uint64_t id) {
    mark_ancestors(id);
    remove_marked();
}

/* Everything queued in context c completes (destroyed streams' work too). */
static void run_context(struct mock_ctx *c) {
    for (size_t k = 0; k < nitems; k++)
        items[k].mark = items[k].ctx == c;
    remove_marked();
}

/* Whether queued work id comes before anything queued on s from now on. */
static int ordered_before_next(struct mock_stream *s, uint64_t id) {
    uint64_t deps[1024];
    unsigned n = deps_of_next(s, deps, 1024);
    for (size_t k = 0; k < nitems; k++)
        items[k].mark = 0;
    for (unsigned d = 0; d < n; d++)
        mark_ancestors(deps[d]);
    ssize_t k = item_index(id);
    int before = k >= 0 && items[k].mark;
    for (size_t j = 0; j < nitems; j++)
        items[j].mark = 0;
    return before;
}

/* ---- contexts and streams (lock held) -------------------------------------- */

static struct mock_ctx *ctx_now(void) { return current && current->active ? current : NULL; }

static void add_stream(struct mock_ctx *c, struct mock_stream *s) {
    s->next = c->streams;
    c->streams = s;
}

static void drop_stream(struct mock_ctx *c, struct mock_stream *s) {
    for (struct mock_stream **p = &c->streams; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            break;
        }
}

static struct mock_stream *new_stream(struct mock_ctx *c, enum kind k, unsigned flags) {
    struct mock_stream *s = free_streams; /* the handle destroyed last is reused first */
    unsigned gen = 0;
    if (s) {
        free_streams = s->next;
        gen = s->gen + 1;
    } else if (!(s = calloc(1, sizeof(*s)))) {
        return NULL;
    }
    memset(s, 0, sizeof(*s));
    s->gen = gen;
    s->kind = k;
    s->flags = flags;
    s->ctx = c;
    s->live = 1;
    add_stream(c, s);
    return s;
}

static void end_capture(struct mock_stream *s) {
    if (s->capture) {
        for (int i = 0; i < nactive; i++)
            if (captures_now[i] == s->capture) {
                captures_now[i] = captures_now[--nactive];
                break;
            }
        s->capture = NULL;
        capturing--;
    }
}

/* The capture modes are modelled unless MOCK_CAPTURE_MODES=0. */
static int modes_on(void) {
    static int on = -1;
    int v = __atomic_load_n(&on, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *e = getenv("MOCK_CAPTURE_MODES");
        v = !e || strcmp(e, "0") != 0;
        __atomic_store_n(&on, v, __ATOMIC_RELAXED);
    }
    return v;
}

/* A potentially unsafe call from this thread (lock not held): 1, and the
 * captures it conflicts with invalidated, when the thread's mode forbids it
 * now. */
static int unsafe_refused(void) {
    if (thread_mode == 2 || !__atomic_load_n(&capturing, __ATOMIC_RELAXED) || !modes_on())
        return 0;
    int hit = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nactive; i++) {
        struct mock_graph *g = captures_now[i];
        int mine = pthread_equal(g->owner, pthread_self());
        if (g->mode != 2 && (mine || (thread_mode == 0 && g->mode == 0))) {
            g->invalid = 1;
            hit = 1;
        }
    }
    broken_captures += hit;
    pthread_mutex_unlock(&lock);
    return hit;
}
#define UNSAFE()                     \
    do {                             \
        if (unsafe_refused())        \
            return CAPTURE_UNSUPPORTED; \
    } while (0)

/* Lock held: 1, and every capture of c invalidated, when a stream of c is
 * being captured (a wait for all of c's work would wait for work that is not
 * queued: it conflicts with the capture in every mode). */
static int context_captured(struct mock_ctx *c) {
    int hit = 0;
    if (!modes_on())
        return 0;
    for (int i = 0; i < nactive; i++)
        if (captures_now[i]->ctx == c) {
            captures_now[i]->invalid = 1;
            hit = 1;
        }
    broken_captures += hit;
    return hit;
}

static void destroy_stream(struct mock_stream *s) {
    end_capture(s);
    drop_stream(s->ctx, s);
    s->live = 0;
    if (s->kind != PER_THREAD) {
        s->next = free_streams;
        free_streams = s;
    }
}

/* The calling thread's per-thread default stream in c. */
static struct mock_stream *per_thread(struct mock_ctx *c) {
    for (int i = 0; i < 4; i++)
        if (per_thread_streams[i].ctx == c && per_thread_streams[i].incarnation == c->incarnation &&
            per_thread_streams[i].s->live)
            return per_thread_streams[i].s;
    struct mock_stream *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->kind = PER_THREAD;
    s->ctx = c;
    s->live = 1;
    add_stream(c, s);
    int slot = 0;
    for (int i = 1; i < 4; i++)
        if (per_thread_streams[i].ctx == c || !per_thread_streams[i].ctx)
            slot = i;
    per_thread_streams[slot].ctx = c;
    per_thread_streams[slot].incarnation = c->incarnation;
    per_thread_streams[slot].s = s;
    return s;
}

/* The stream a handle names for the calling thread (NULL: legacy, or
 * per-thread in a _ptsz function); NULL with *err set when there is none. */
static struct mock_stream *resolve(CUstream h, int ptsz, CUresult *err) {
    struct mock_ctx *c = ctx_now();
    *err = OK;
    if (!c) {
        *err = INVALID_CONTEXT;
        return NULL;
    }
    if ((uintptr_t)h == 1 || (!h && !ptsz))
        return &c->legacy;
    if ((uintptr_t)h == 2 || !h) {
        struct mock_stream *s = per_thread(c);
        if (!s)
            *err = OUT_OF_MEMORY;
        return s;
    }
    if (!h->live || h->ctx != c) {
        stale_stream_uses++;
        *err = INVALID_HANDLE;
        return NULL;
    }
    return h;
}

/* Work on the legacy stream while a blocking stream is being captured
 * joins the capture implicitly, which the driver refuses. */
static int legacy_during_capture(struct mock_stream *s) {
    if (s->kind != LEGACY || !capturing)
        return 0;
    broken_captures++;
    for (struct mock_stream *x = s->ctx->streams; x; x = x->next)
        if (x->capture && x->kind != NONBLOCKING)
            x->capture->invalid = 1;
    return 1;
}

static int add_node(struct mock_graph *g, int kind, uintptr_t lo, uintptr_t hi) {
    if (grow((void **)&g->nodes, &g->cap, g->n + 1, sizeof(node)) != 0)
        return -1;
    g->nodes[g->n++] = (node){kind, lo, hi};
    return 0;
}

/* Free everything context c has (its work completes first, as a reset
 * waits for the device) and make its handles stale. */
static void kill_context(struct mock_ctx *c) {
    run_context(c);
    for (size_t i = 0; i < nallocs;)
        if (allocs[i].ctx == c && !allocs[i].ctxless) {
            if (grow((void **)&dead, &cap_dead, ndead + 1, sizeof(alloc_rec)) == 0)
                dead[ndead++] = allocs[i];
            used -= allocs[i].size;
            allocs[i] = allocs[--nallocs];
        } else {
            i++;
        }
    while (c->streams) {
        struct mock_stream *s = c->streams;
        destroy_stream(s);
    }
    end_capture(&c->legacy);
    c->legacy.last = 0;
    c->incarnation++;
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

/* Work or event records on the legacy stream, or event records on a
 * capturing stream, while a capture was in progress. */
EXPORT int mock_cuda_broken_captures(void) { return __atomic_load_n(&broken_captures, __ATOMIC_RELAXED); }

/* Uses of a stream handle after its stream was destroyed (or from another context). */
EXPORT int mock_cuda_stale_stream_uses(void) { return __atomic_load_n(&stale_stream_uses, __ATOMIC_RELAXED); }

/* Stream-ordered allocations that reached the mock. */
EXPORT unsigned long long mock_cuda_async_allocs(void) { return __atomic_load_n(&stat_async_allocs, __ATOMIC_RELAXED); }

/* cuEventSynchronize calls so far (waits for device work). */
EXPORT unsigned long long mock_cuda_event_waits(void) { return __atomic_load_n(&stat_event_waits, __ATOMIC_RELAXED); }

/* What a policy's churn costs on a device: cuMemMap and cuMemUnmap calls
 * that changed a mapping, and waits for the device (cuCtxSynchronize,
 * cuStreamSynchronize, cuEventSynchronize), so far. */
EXPORT void mock_cuda_churn(unsigned long long *maps, unsigned long long *unmaps, unsigned long long *waits) {
    *maps = __atomic_load_n(&stat_maps, __ATOMIC_RELAXED);
    *unmaps = __atomic_load_n(&stat_unmaps, __ATOMIC_RELAXED);
    *waits = __atomic_load_n(&stat_syncs, __ATOMIC_RELAXED) + __atomic_load_n(&stat_event_waits, __ATOMIC_RELAXED);
}

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

/* Allocations that reached the driver in context ctx so far. */
EXPORT unsigned long long mock_cuda_ctx_allocs(CUcontext ctx) {
    pthread_mutex_lock(&lock);
    unsigned long long n = ctx ? ctx->nalloc : 0;
    pthread_mutex_unlock(&lock);
    return n;
}

/* Calls of driver functions so far (each costs time in a real driver). */
EXPORT unsigned long long mock_cuda_calls(void) { return __atomic_load_n(&stat_calls, __ATOMIC_RELAXED); }
EXPORT unsigned long long mock_cuda_mode_exchanges(void) { return __atomic_load_n(&stat_exchanges, __ATOMIC_RELAXED); }

/* The oracle at the other end: work about to be queued on s uses [lo, hi)
 * of an owned range; work queued before that range was handed out (for its
 * previous owner) that still runs and overlaps it must come before the new
 * work, or the two race on the memory. */
static void check_previous_owner(struct mock_stream *s, uintptr_t lo, uintptr_t hi) {
    size_t at = 0, top = nowns;
    while (at < top) {
        size_t mid = (at + top) / 2;
        if (owns[mid].hi <= lo)
            at = mid + 1;
        else
            top = mid;
    }
    for (; at < nowns && owns[at].lo < hi; at++) { /* every owned range the work touches */
        uintptr_t olo = owns[at].lo > lo ? owns[at].lo : lo, ohi = owns[at].hi < hi ? owns[at].hi : hi;
        uint64_t since = owns[at].since;
        for (size_t k = 0; k < nitems; k++) {
            item *it = &items[k];
            if (it->marker || it->id >= since || it->hi <= olo || it->lo >= ohi)
                continue;
            if (ordered_before_next(s, it->id))
                continue;
            violation("work queued on a %s stream uses 0x%lx+%zu while work queued on a %s%s stream before the "
                      "memory was handed out, which it does not wait for, still uses 0x%lx+%zu",
                      kind_name[s->kind], (unsigned long)lo, (size_t)(hi - lo),
                      it->s->live && it->s->gen == it->sgen ? "" : "destroyed ", kind_name[it->s->kind],
                      (unsigned long)it->lo, (size_t)(it->hi - it->lo));
            return;
        }
    }
}

/* Queue work that uses [p, p+n) on stream s (NULL: the legacy stream; a
 * capturing stream: a node of its graph). CUresult. */
EXPORT CUresult mock_cuda_launch(CUstream h, CUdeviceptr p, size_t n) {
    pthread_mutex_lock(&lock);
    CUresult r;
    struct mock_stream *s = resolve(h, 0, &r);
    if (s && s->capture)
        r = add_node(s->capture, 0, (uintptr_t)p, (uintptr_t)p + n) == 0 ? OK : OUT_OF_MEMORY;
    else if (s && legacy_during_capture(s))
        r = CAPTURE_IMPLICIT;
    else if (s) {
        check_previous_owner(s, (uintptr_t)p, (uintptr_t)p + n);
        r = enqueue(s, (uintptr_t)p, (uintptr_t)p + n, 0, 0) ? OK : OUT_OF_MEMORY;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* Queued work (not counting markers). */
EXPORT size_t mock_cuda_pending(void) {
    pthread_mutex_lock(&lock);
    size_t n = 0;
    for (size_t k = 0; k < nitems; k++)
        n += !items[k].marker;
    pthread_mutex_unlock(&lock);
    return n;
}

/* The device completes one piece of queued work that is ready to run,
 * chosen by r among them: 1, or 0 when nothing is queued. */
EXPORT int mock_cuda_complete_one(unsigned long long r) {
    pthread_mutex_lock(&lock);
    size_t nready = 0;
    for (size_t k = 0; k < nitems; k++)
        nready += !items[k].marker && ready(&items[k]);
    int done = 0;
    if (nready) {
        size_t pick = (size_t)(r % nready);
        for (size_t k = 0; k < nitems; k++)
            if (!items[k].marker && ready(&items[k]) && pick-- == 0) {
                remove_at(k);
                sweep();
                done = 1;
                break;
            }
    }
    pthread_mutex_unlock(&lock);
    return done;
}

/* The device completes everything queued. */
EXPORT void mock_cuda_complete_all(void) {
    pthread_mutex_lock(&lock);
    while (nitems)
        remove_at(nitems - 1);
    pthread_mutex_unlock(&lock);
}

/* The oracle: the program got [p, p+n) from an allocation (ordered: on
 * stream s, stream-ordered). 0 when the range may be used as promised;
 * otherwise 1, and the breach is counted and described. The range is owned
 * from now on, until mock_cuda_disown(p). */
static int mapped_cover(uintptr_t lo, uintptr_t hi);

/* Whether queued work id comes before all work queued in c from now on
 * that may use memory handed out now: c has no non-blocking stream, and id
 * is the legacy stream's last item or waits before it, which every later
 * item of a blocking stream (and of the legacy stream) waits for. A
 * non-blocking stream made later waits for nothing: work on it that
 * overlaps id is caught when it is queued (mock_cuda_launch). */
static int before_every_later_blocking(struct mock_ctx *c, uint64_t id) {
    for (struct mock_stream *x = c->streams; x; x = x->next)
        if (x->live && x->kind == NONBLOCKING)
            return 0;
    if (!pending(c->legacy.last))
        return 0;
    for (size_t k = 0; k < nitems; k++)
        items[k].mark = 0;
    mark_ancestors(c->legacy.last);
    ssize_t k = item_index(id);
    int before = k >= 0 && items[k].mark;
    for (size_t j = 0; j < nitems; j++)
        items[j].mark = 0;
    return before;
}

EXPORT int mock_cuda_own(CUdeviceptr p, size_t n, CUstream h, int ordered) {
    uintptr_t lo = (uintptr_t)p, hi = lo + n;
    pthread_mutex_lock(&lock);
    unsigned long long before = violations;
    struct mock_ctx *c = ctx_now();
    int inside = 0;
    for (size_t i = 0; c && i < nallocs && !inside; i++)
        inside = (allocs[i].ctxless || (allocs[i].ctx == c && allocs[i].incarnation == c->incarnation)) &&
                 lo >= allocs[i].base &&
                 hi <= allocs[i].base + allocs[i].size;
    if (!inside && c)
        inside = mapped_cover(lo, hi); /* virtual-memory mappings belong to no context */
    if (!inside) {
        int was_dead = 0;
        for (size_t i = 0; i < ndead && !was_dead; i++)
            was_dead = lo < dead[i].base + dead[i].size && hi > dead[i].base;
        violation("0x%lx+%zu handed out %s", (unsigned long)lo, n,
                  was_dead ? "from memory the driver freed with its context"
                           : "outside the current context's live driver memory and mapped memory");
    }
    CUresult err;
    struct mock_stream *s = ordered ? resolve(h, 0, &err) : NULL;
    for (size_t k = 0; k < nitems; k++) {
        item *it = &items[k];
        if (it->marker || it->hi <= lo || it->lo >= hi)
            continue;
        if (s && ordered_before_next(s, it->id))
            continue;
        if (!s && c && before_every_later_blocking(c, it->id))
            continue;
        violation("0x%lx+%zu handed out (%s) while work queued on a %s%s stream%s still uses 0x%lx+%zu",
                  (unsigned long)lo, n, s ? "stream-ordered" : "usable on any stream",
                  it->s->live && it->s->gen == it->sgen ? "" : "destroyed ", kind_name[it->s->kind],
                  s && s == it->s ? " (the handle of the one it is handed out on)" : "", (unsigned long)it->lo,
                  (size_t)(it->hi - it->lo));
        break;
    }
    size_t at = 0, top = nowns;
    while (at < top) {
        size_t mid = (at + top) / 2;
        if (owns[mid].lo < lo)
            at = mid + 1;
        else
            top = mid;
    }
    if ((at < nowns && owns[at].lo < hi) || (at > 0 && owns[at - 1].hi > lo))
        violation("0x%lx+%zu handed out while another allocation still owns 0x%lx+%zu", (unsigned long)lo, n,
                  (unsigned long)(at < nowns && owns[at].lo < hi ? owns[at].lo : owns[at - 1].lo),
                  (size_t)(at < nowns && owns[at].lo < hi ? owns[at].hi - owns[at].lo
                                                          : owns[at - 1].hi - owns[at - 1].lo));
    else if (grow((void **)&owns, &cap_owns, nowns + 1, sizeof(owned)) == 0) {
        memmove(&owns[at + 1], &owns[at], (nowns - at) * sizeof(owned));
        owns[at] = (owned){lo, hi, next_id};
        nowns++;
    }
    int bad = violations != before;
    pthread_mutex_unlock(&lock);
    return bad;
}

/* The program gives up the range that begins at p (before freeing it). */
EXPORT void mock_cuda_disown(CUdeviceptr p) {
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nowns; i++)
        if (owns[i].lo == (uintptr_t)p) {
            memmove(&owns[i], &owns[i + 1], (nowns - i - 1) * sizeof(owned));
            nowns--;
            break;
        }
    pthread_mutex_unlock(&lock);
}

/* Every owned range is given up (the memory went away with its context). */
EXPORT void mock_cuda_disown_all(void) {
    pthread_mutex_lock(&lock);
    nowns = 0;
    pthread_mutex_unlock(&lock);
}

/* Breaches seen so far; text (may be NULL) gets the first ones described. */
EXPORT unsigned long long mock_cuda_violations(char *text, size_t len) {
    pthread_mutex_lock(&lock);
    unsigned long long n = violations;
    if (text && len)
        snprintf(text, len, "%s", violation_text);
    pthread_mutex_unlock(&lock);
    return n;
}

/* ---- initialization, devices, contexts --------------------------------- */

EXPORT CUresult cuInit(unsigned flags) {
    ENTER();
    (void)flags;
    __atomic_store_n(&initialized, 1, __ATOMIC_RELAXED);
    return OK;
}
EXPORT CUresult cuDriverGetVersion(int *v) {
    ENTER();
    *v = 12080;
    return OK;
}
static int devices(void) {
    const char *v = getenv("MOCK_DEVICES");
    int n = v && *v ? atoi(v) : 1;
    return n < 1 ? 1 : n;
}
EXPORT CUresult cuDeviceGetCount(int *n) {
    ENTER();
    *n = devices();
    return OK;
}
EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    ENTER();
    if (ordinal < 0 || ordinal >= devices())
        return 101; /* CUDA_ERROR_INVALID_DEVICE */
    *d = ordinal;
    return OK;
}
EXPORT CUresult cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer) {
    ENTER();
    if (!can || dev < 0 || dev >= devices() || peer < 0 || peer >= devices())
        return 101; /* CUDA_ERROR_INVALID_DEVICE */
    const char *no = getenv("MOCK_NO_PEERS");
    *can = dev != peer && !(no && *no == '1');
    return OK;
}
EXPORT CUresult cuMemGetInfo_v2(size_t *f, size_t *t);
EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
    ENTER();
    (void)d;
    const char *re = getenv("MOCK_REENTER");
    if (re && *re == '1') {
        /* As a runtime whose driver functions came through an interposer. */
        CUresult (*info)(size_t *, size_t *) = NULL;
        void *fn = dlsym(RTLD_DEFAULT, "cuMemGetInfo_v2");
        memcpy(&info, &fn, sizeof(fn));
        size_t f, t;
        if (info)
            info(&f, &t);
    }
    *bytes = mem_total();
    return OK;
}
EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d) {
    ENTER();
    if (d != 0)
        return 101;
    pthread_mutex_lock(&lock);
    if (primary.refs++ == 0 && !primary.active) {
        primary.active = 1;
        primary.incarnation++;
    }
    *ctx = &primary;
    pthread_mutex_unlock(&lock);
    return OK;
}
/* A reset, a release or a destroy sleeps MOCK_CONTEXT_DELAY_US before it
 * does anything: the moment when the program has called it but the context
 * is not gone yet grows wide. */
static void context_call_delay(void) {
    static int delay_us = -1;
    if (__atomic_load_n(&delay_us, __ATOMIC_RELAXED) < 0) {
        const char *v = getenv("MOCK_CONTEXT_DELAY_US");
        __atomic_store_n(&delay_us, v && *v ? atoi(v) : 0, __ATOMIC_RELAXED);
    }
    int us = __atomic_load_n(&delay_us, __ATOMIC_RELAXED);
    if (us > 0)
        usleep((useconds_t)us);
}

/* cuEventSynchronize sleeps MOCK_SYNC_DELAY_US before the work it waits
 * for completes, as a device's wait takes as long as the work: a thread
 * that does not wait but should shows its race meanwhile. */
static void sync_delay(void) {
    static int delay_us = -1;
    if (__atomic_load_n(&delay_us, __ATOMIC_RELAXED) < 0) {
        const char *v = getenv("MOCK_SYNC_DELAY_US");
        __atomic_store_n(&delay_us, v && *v ? atoi(v) : 0, __ATOMIC_RELAXED);
    }
    int us = __atomic_load_n(&delay_us, __ATOMIC_RELAXED);
    if (us > 0)
        usleep((useconds_t)us);
}

/* The last release resets the primary context: its memory is freed. */
EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
    ENTER();
    if (d != 0)
        return 101;
    context_call_delay();
    pthread_mutex_lock(&lock);
    CUresult r = OK;
    if (primary.refs <= 0) {
        r = INVALID_CONTEXT;
    } else if (--primary.refs == 0) {
        kill_context(&primary);
        primary.active = 0;
    }
    pthread_mutex_unlock(&lock);
    return r;
}
EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice d) { return cuDevicePrimaryCtxRelease_v2(d); }
/* Frees all the primary context's memory; retains stay, and it stays usable. */
static CUresult primary_reset(CUdevice d) {
    ENTER();
    if (d != 0)
        return 101;
    context_call_delay();
    pthread_mutex_lock(&lock);
    kill_context(&primary);
    primary.active = primary.refs > 0;
    pthread_mutex_unlock(&lock);
    return OK;
}
EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice d) { return primary_reset(d); }
EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice d, unsigned *flags, int *active) {
    ENTER();
    if (d != 0)
        return 101;
    pthread_mutex_lock(&lock);
    *flags = 0;
    *active = primary.active;
    pthread_mutex_unlock(&lock);
    return OK;
}
static CUresult ctx_create(CUcontext *ctx, unsigned flags, CUdevice d) {
    ENTER();
    (void)flags;
    if (d != 0)
        return 101;
    struct mock_ctx *c = calloc(1, sizeof(*c));
    if (!c)
        return OUT_OF_MEMORY;
    c->active = 1;
    c->incarnation = 1;
    c->legacy.kind = LEGACY;
    c->legacy.ctx = c;
    c->legacy.live = 1;
    if (depth == 16) {
        free(c);
        return INVALID_VALUE;
    }
    stack[depth++] = current;
    current = c;
    *ctx = c;
    return OK;
}
EXPORT CUresult cuCtxCreate_v2(CUcontext *ctx, unsigned flags, CUdevice d) { return ctx_create(ctx, flags, d); }

/* The driver's first cuCtxCreate (libcuda exports it beside _v2). */
EXPORT CUresult cuCtxCreate(CUcontext *ctx, unsigned flags, CUdevice d) { return ctx_create(ctx, flags, d); }
static int fail_destroys; /* cuCtxDestroy calls to refuse (mock_cuda_fail_destroys) */

/* The next n cuCtxDestroy calls fail (CUDA_ERROR_INVALID_CONTEXT), changing
 * nothing, as a driver that refuses to destroy a context. */
EXPORT void mock_cuda_fail_destroys(int n) { __atomic_store_n(&fail_destroys, n, __ATOMIC_RELEASE); }

static CUresult ctx_destroy(CUcontext ctx) {
    ENTER();
    if (!ctx || ctx == &primary)
        return INVALID_CONTEXT;
    context_call_delay(); /* a refusal takes its time too */
    for (int n = __atomic_load_n(&fail_destroys, __ATOMIC_ACQUIRE); n > 0;)
        if (__atomic_compare_exchange_n(&fail_destroys, &n, n - 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return INVALID_CONTEXT;
    pthread_mutex_lock(&lock);
    kill_context(ctx);
    ctx->active = 0; /* the struct is kept: a stale handle stays harmless */
    pthread_mutex_unlock(&lock);
    if (current == ctx) /* popped from the thread's stack, as the driver does */
        current = depth ? stack[--depth] : NULL;
    return OK;
}
EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) { return ctx_destroy(ctx); }
EXPORT CUresult cuCtxGetCurrent(CUcontext *ctx) {
    ENTER();
    *ctx = current;
    return OK;
}
EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
    ENTER();
    current = ctx;
    return OK;
}
EXPORT CUresult cuCtxGetDevice(CUdevice *d) {
    ENTER();
    if (!current)
        return INVALID_CONTEXT;
    *d = current->device;
    return OK;
}
EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
    ENTER();
    if (depth == 16)
        return INVALID_VALUE;
    stack[depth++] = current;
    current = ctx;
    return OK;
}
EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *ctx) {
    ENTER();
    if (!depth)
        return INVALID_CONTEXT;
    if (ctx)
        *ctx = current;
    current = stack[--depth];
    return OK;
}
EXPORT CUresult cuCtxSynchronize(void) {
    ENTER();
    UNSAFE();
    pthread_mutex_lock(&lock);
    struct mock_ctx *c = ctx_now();
    CUresult r = !c ? INVALID_CONTEXT : context_captured(c) ? CAPTURE_UNSUPPORTED : OK;
    if (r == OK)
        run_context(c);
    pthread_mutex_unlock(&lock);
    __atomic_add_fetch(&stat_syncs, 1, __ATOMIC_RELAXED);
    return r;
}
EXPORT CUresult cuGetErrorName(CUresult r, const char **name) {
    COUNTED();
    switch (r) {
    case OK: *name = "CUDA_SUCCESS"; break;
    case OUT_OF_MEMORY: *name = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; break;
    case NOT_INITIALIZED: *name = "CUDA_ERROR_NOT_INITIALIZED"; break;
    case INVALID_CONTEXT: *name = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case INVALID_HANDLE: *name = "CUDA_ERROR_INVALID_HANDLE"; break;
    case NOT_READY: *name = "CUDA_ERROR_NOT_READY"; break;
    case CAPTURE_UNSUPPORTED: *name = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"; break;
    case CAPTURE_INVALIDATED: *name = "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"; break;
    case CAPTURE_IMPLICIT: *name = "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT"; break;
    default: *name = "CUDA_ERROR_UNKNOWN"; break;
    }
    return OK;
}

/* ---- memory ------------------------------------------------------------ */

/* Allocations of 2 MiB and more are 2 MiB-aligned, as a real cuMemAlloc's
 * are (a buffer carve hands out at the start of its segment then begins
 * where the driver's allocation does); smaller ones 512-byte-aligned.
 * ctxless: stream-ordered and pool allocations, which the driver does not
 * free with their context (cuCtxDestroy's documentation says so). */
static CUresult do_alloc(CUdeviceptr *dptr, size_t size, int ctxless) {
    if (!dptr || !size)
        return INVALID_VALUE;
    pthread_mutex_lock(&lock);
    CUresult r = OK;
    void *p = NULL;
    struct mock_ctx *c = ctx_now();
    size_t align = size >= ((size_t)2 << 20) ? (size_t)2 << 20 : 512;
    if (!c) {
        r = INVALID_CONTEXT;
    } else if (used + size > mem_total() || size > mem_total()) {
        r = OUT_OF_MEMORY;
    } else if (grow((void **)&allocs, &cap_allocs, nallocs + 1, sizeof(alloc_rec)) != 0) {
        r = OUT_OF_MEMORY;
    } else if (posix_memalign(&p, align, size) != 0) {
        r = OUT_OF_MEMORY;
    } else {
        allocs[nallocs++] = (alloc_rec){(uintptr_t)p, size, c, c->incarnation, ctxless, 0};
        use(size);
        stat_allocs++;
        c->nalloc++;
        *dptr = (CUdeviceptr)(uintptr_t)p;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

static ssize_t alloc_index(uintptr_t base) {
    for (size_t i = 0; i < nallocs; i++)
        if (allocs[i].base == base)
            return (ssize_t)i;
    return -1;
}

/* Lock held. */
static CUresult free_at(uintptr_t d) {
    ssize_t i = alloc_index(d);
    if (i < 0) {
        stat_bad_frees++;
        return INVALID_VALUE;
    }
    used -= allocs[i].size;
    if (!allocs[i].graph)
        free((void *)allocs[i].base);
    allocs[i] = allocs[--nallocs];
    stat_frees++;
    return OK;
}

/* cuMemFree synchronizes: the device is done with everything first. */
static CUresult do_free(CUdeviceptr d) {
    if (!d)
        return OK;
    pthread_mutex_lock(&lock);
    struct mock_ctx *c = ctx_now();
    if (c)
        run_context(c);
    CUresult r = free_at((uintptr_t)d);
    pthread_mutex_unlock(&lock);
    return r;
}

/* On a capturing stream, an allocation node: an address the graph owns,
 * whose memory is taken when the graph runs (until a free node, or a free
 * of the program, gives it back). */
static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUstream h, int ptsz) {
    __atomic_add_fetch(&stat_async_allocs, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&lock);
    CUresult r;
    struct mock_stream *s = resolve(h, ptsz, &r);
    struct mock_graph *g = s ? s->capture : NULL;
    if (g) {
        void *p = NULL;
        r = !dptr || !size ? INVALID_VALUE : posix_memalign(&p, 512, size) != 0 ? OUT_OF_MEMORY : OK;
        if (r == OK && add_node(g, 1, (uintptr_t)p, (uintptr_t)p + size) != 0) {
            free(p);
            r = OUT_OF_MEMORY;
        }
        if (r == OK) {
            stat_allocs++;
            *dptr = (CUdeviceptr)(uintptr_t)p;
        }
    }
    pthread_mutex_unlock(&lock);
    if (!s || g)
        return r;
    return do_alloc(dptr, size, 1);
}

/* Whether d is the address of an allocation node of g (lock held). */
static int graph_allocates(const struct mock_graph *g, uintptr_t d) {
    for (size_t i = 0; i < g->n; i++)
        if (g->nodes[i].kind == 1 && g->nodes[i].lo == d)
            return 1;
    return 0;
}

/* Stream-ordered: freed once the stream's earlier work is done; on a
 * capturing stream, a free node. */
static CUresult free_async(CUdeviceptr d, CUstream h, int ptsz) {
    if (!d)
        return OK;
    pthread_mutex_lock(&lock);
    CUresult r;
    struct mock_stream *s = resolve(h, ptsz, &r);
    if (s && s->capture) {
        r = alloc_index((uintptr_t)d) < 0 && !graph_allocates(s->capture, (uintptr_t)d) ? INVALID_VALUE
            : add_node(s->capture, 2, (uintptr_t)d, (uintptr_t)d) == 0                  ? OK
                                                                                         : OUT_OF_MEMORY;
        if (r != OK)
            stat_bad_frees++;
    } else if (s) {
        run_until(s->last);
        r = free_at((uintptr_t)d);
    }
    pthread_mutex_unlock(&lock);
    return r;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size) { ENTER(); UNSAFE(); return do_alloc(dptr, size, 0); }
EXPORT CUresult cuMemFree_v2(CUdeviceptr d) { ENTER(); UNSAFE(); return do_free(d); }
EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t size, CUstream s) { ENTER(); return alloc_async(dptr, size, s, 0); }
EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream s) { ENTER(); return alloc_async(dptr, size, s, 1); }
EXPORT CUresult cuMemFreeAsync(CUdeviceptr d, CUstream s) { ENTER(); return free_async(d, s, 0); }
EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr d, CUstream s) { ENTER(); return free_async(d, s, 1); }
EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height, unsigned elem) {
    ENTER();
    UNSAFE();
    (void)elem;
    if (!pitch)
        return INVALID_VALUE;
    *pitch = (width + 511) / 512 * 512;
    return do_alloc(dptr, *pitch * height, 0);
}
EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t size, unsigned flags) {
    ENTER();
    (void)flags;
    return do_alloc(dptr, size, 0);
}
EXPORT CUresult cuMemGetInfo_v2(size_t *f, size_t *t) {
    ENTER();
    pthread_mutex_lock(&lock);
    *t = mem_total();
    *f = *t - used;
    pthread_mutex_unlock(&lock);
    return OK;
}
EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr d) {
    ENTER();
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

/* Legacy IPC: a handle for memory from cuMemAlloc (the allocation's base,
 * as the driver's handle names the allocation), an error for anything else,
 * cuMemCreate memory mapped with cuMemMap included. */
typedef struct {
    char reserved[64];
} CUipcMemHandle;
EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr d) {
    ENTER();
    if (!h)
        return INVALID_VALUE;
    pthread_mutex_lock(&lock);
    CUresult r = INVALID_VALUE;
    for (size_t i = 0; i < nallocs; i++)
        if ((uintptr_t)d >= allocs[i].base && (uintptr_t)d < allocs[i].base + allocs[i].size) {
            memset(h, 0, sizeof(*h));
            memcpy(h->reserved, &allocs[i].base, sizeof(allocs[i].base));
            r = OK;
            break;
        }
    pthread_mutex_unlock(&lock);
    return r;
}

/* ---- streams, captures, events, graphs ------------------------------------- */

static void (*on_stream_create)(void); /* mock_cuda_on_stream_create (atomic) */
EXPORT void mock_cuda_on_stream_create(void (*fn)(void)) { __atomic_store_n(&on_stream_create, fn, __ATOMIC_RELEASE); }

EXPORT CUresult cuStreamCreate(CUstream *s, unsigned flags) {
    ENTER();
    pthread_mutex_lock(&lock);
    struct mock_ctx *c = ctx_now();
    CUresult r = !c ? INVALID_CONTEXT : (*s = new_stream(c, flags & 1 ? NONBLOCKING : BLOCKING, flags)) ? OK
                                                                                                     : OUT_OF_MEMORY;
    pthread_mutex_unlock(&lock);
    void (*fn)(void) = __atomic_exchange_n(&on_stream_create, NULL, __ATOMIC_ACQ_REL);
    if (fn && r == OK)
        fn();
    return r;
}
EXPORT CUresult cuStreamCreateWithPriority(CUstream *s, unsigned flags, int prio) {
    (void)prio;
    return cuStreamCreate(s, flags);
}
/* Returns at once; queued work runs on, and nothing waits for it implicitly. */
static CUresult stream_destroy(CUstream h) {
    ENTER();
    pthread_mutex_lock(&lock);
    CUresult r;
    struct mock_stream *s = (uintptr_t)h <= 2 ? NULL : resolve(h, 0, &r);
    if ((uintptr_t)h <= 2)
        r = INVALID_HANDLE;
    if (s)
        destroy_stream(s);
    pthread_mutex_unlock(&lock);
    return r;
}
EXPORT CUresult cuStreamDestroy_v2(CUstream h) { return stream_destroy(h); }
static CUresult stream_sync(CUstream h, int ptsz) {
    UNSAFE();
    pthread_mutex_lock(&lock);
    CUresult r;
    struct mock_stream *s = resolve(h, ptsz, &r);
    if (s)
        run_until(s->last);
    pthread_mutex_unlock(&lock);
    __atomic_add_fetch(&stat_syncs, 1, __ATOMIC_RELAXED);
    return r;
}
EXPORT CUresult cuStreamSynchronize(CUstream h) { ENTER(); return stream_sync(h, 0); }
EXPORT CUresult cuStreamSynchronize_ptsz(CUstream h) { ENTER(); return stream_sync(h, 1); }
EXPORT CUresult cuStreamQuery(CUstream h) {
    ENTER();
    UNSAFE();
    pthread_mutex_lock(&lock);
    CUresult r;
    struct mock_stream *s = resolve(h, 0, &r);
    if (s)
        r = pending(s->last) ? NOT_READY : OK;
    pthread_mutex_unlock(&lock);
    return r;
}

static CUresult begin_capture(CUstream h, int mode, int ptsz) {
    if (mode < 0 || mode > 2)
        return INVALID_VALUE;
    static int delay_us = -1;
    if (delay_us < 0) {
        const char *v = getenv("MOCK_CAPTURE_DELAY_US");
        delay_us = v && *v ? atoi(v) : 0;
    }
    pthread_mutex_lock(&lock);
    CUresult r;
    struct mock_stream *s = resolve(h, ptsz, &r);
    if (s && s->kind == LEGACY) {
        r = CAPTURE_UNSUPPORTED; /* the legacy stream cannot be captured */
    } else if (s && s->capture) {
        r = ILLEGAL_STATE;
    } else if (s) {
        s->capture = calloc(1, sizeof(struct mock_graph));
        r = s->capture ? OK : OUT_OF_MEMORY;
        capturing += s->capture != NULL;
        if (s->capture) {
            s->capture->mode = mode;
            s->capture->owner = pthread_self();
            s->capture->ctx = s->ctx;
            if (nactive < (int)(sizeof(captures_now) / sizeof(captures_now[0])))
                captures_now[nactive++] = s->capture;
        }
    }
    pthread_mutex_unlock(&lock);
    if (r == OK && delay_us)
        usleep((useconds_t)delay_us); /* the capture has begun; the caller hears of it later */
    return r;
}
EXPORT CUresult cuGraphDestroy(CUgraph g);
static CUresult end_capture_call(CUstream h, CUgraph *graph, int ptsz) {
    struct mock_graph *invalid = NULL;
    pthread_mutex_lock(&lock);
    CUresult r;
    struct mock_stream *s = resolve(h, ptsz, &r);
    if (s && !s->capture) {
        r = ILLEGAL_STATE;
    } else if (s) {
        struct mock_graph *g = s->capture;
        end_capture(s);
        r = g->invalid ? CAPTURE_INVALIDATED : OK;
        if (graph)
            *graph = g->invalid ? NULL : g;
        if (g->invalid) /* the program never sees it: the driver destroys it */
            invalid = g;
    }
    pthread_mutex_unlock(&lock);
    if (invalid)
        cuGraphDestroy(invalid);
    return r;
}
static CUresult is_capturing(CUstream h, int *status, int ptsz) {
    pthread_mutex_lock(&lock);
    CUresult r;
    struct mock_stream *s = resolve(h, ptsz, &r);
    int implicit = 0;
    if (s && s->kind == LEGACY && modes_on()) /* a blocking stream of the context captured: the legacy stream is unusable */
        for (struct mock_stream *x = s->ctx->streams; x && !implicit; x = x->next)
            implicit = x->capture && x->kind != NONBLOCKING;
    if (implicit)
        r = CAPTURE_IMPLICIT;
    else if (s)
        *status = !s->capture ? 0 : s->capture->invalid ? 2 : 1;
    pthread_mutex_unlock(&lock);
    return r;
}
/* The calling thread's capture mode: *mode becomes the old one. */
EXPORT CUresult cuThreadExchangeStreamCaptureMode(int *mode) {
    ENTER();
    __atomic_add_fetch(&stat_exchanges, 1, __ATOMIC_RELAXED);
    if (!mode || *mode < 0 || *mode > 2)
        return INVALID_VALUE;
    int old = thread_mode;
    thread_mode = *mode;
    *mode = old;
    return OK;
}
EXPORT CUresult cuStreamBeginCapture_v2(CUstream s, int mode) { ENTER(); return begin_capture(s, mode, 0); }
/* The driver's first entry points, which libcuda exports beside the later
 * ones under their unversioned names: the first cuStreamBeginCapture took
 * no mode (global). */
EXPORT CUresult cuStreamBeginCapture(CUstream s) { ENTER(); return begin_capture(s, 0, 0); }
EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream s) { ENTER(); return begin_capture(s, 0, 1); }
EXPORT CUresult cuStreamDestroy(CUstream h) { return stream_destroy(h); }
EXPORT CUresult cuCtxDestroy(CUcontext ctx) { return ctx_destroy(ctx); }
EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice d) { return primary_reset(d); }
EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, int mode) { ENTER(); return begin_capture(s, mode, 1); }
EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph *graph) { ENTER(); return end_capture_call(s, graph, 0); }
EXPORT CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph *graph) { ENTER(); return end_capture_call(s, graph, 1); }
EXPORT CUresult cuStreamIsCapturing(CUstream s, int *status) { ENTER(); return is_capturing(s, status, 0); }
EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream s, int *status) { ENTER(); return is_capturing(s, status, 1); }

EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph g, unsigned long long flags) {
    ENTER();
    (void)flags;
    *exec = g;
    return g ? OK : INVALID_VALUE;
}
/* The graph's work is queued on s, in the order it was captured. */
EXPORT CUresult cuGraphLaunch(CUgraphExec g, CUstream h) {
    ENTER();
    pthread_mutex_lock(&lock);
    CUresult r;
    struct mock_stream *s = resolve(h, 0, &r);
    for (size_t i = 0; s && g && i < g->n; i++) {
        node *x = &g->nodes[i];
        if (x->kind == 0)
            check_previous_owner(s, x->lo, x->hi);
        if (x->kind == 0 && !enqueue(s, x->lo, x->hi, 0, 0))
            r = OUT_OF_MEMORY;
        if (x->kind == 1 && alloc_index(x->lo) < 0) { /* an allocation node takes its memory when it runs */
            if (grow((void **)&allocs, &cap_allocs, nallocs + 1, sizeof(alloc_rec)) != 0) {
                r = OUT_OF_MEMORY;
                break;
            }
            allocs[nallocs++] = (alloc_rec){x->lo, x->hi - x->lo, s->ctx, s->ctx->incarnation, 1, 1};
            use(x->hi - x->lo);
        }
        if (x->kind == 2 && alloc_index(x->lo) >= 0) { /* a free node frees when it runs */
            run_until(s->last);
            free_at(x->lo);
        }
    }
    pthread_mutex_unlock(&lock);
    return g ? r : INVALID_VALUE;
}
EXPORT CUresult cuGraphExecDestroy(CUgraphExec g) {
    ENTER();
    (void)g;
    return OK;
}
/* The addresses of its allocation nodes go with the graph, but memory one
 * of its runs took and nothing freed stays the program's. */
EXPORT CUresult cuGraphDestroy(CUgraph g) {
    ENTER();
    if (g) {
        pthread_mutex_lock(&lock);
        for (size_t i = 0; i < g->n; i++)
            if (g->nodes[i].kind == 1) {
                ssize_t k = alloc_index(g->nodes[i].lo);
                if (k >= 0)
                    allocs[k].graph = 0;
                else
                    free((void *)g->nodes[i].lo);
            }
        pthread_mutex_unlock(&lock);
        free(g->nodes);
        free(g);
    }
    return OK;
}

EXPORT CUresult cuEventCreate(CUevent *e, unsigned flags) {
    ENTER();
    (void)flags;
    *e = calloc(1, sizeof(**e));
    return *e ? OK : OUT_OF_MEMORY;
}
EXPORT CUresult cuEventRecord(CUevent e, CUstream h) {
    ENTER();
    pthread_mutex_lock(&lock);
    CUresult r;
    struct mock_stream *s = resolve(h, 0, &r);
    if (s && s->capture) {
        broken_captures++; /* recording would have joined the capture */
        r = CAPTURE_UNSUPPORTED;
    } else if (s && s->kind == LEGACY && capturing) {
        /* Recorded on the legacy stream during a capture: the driver
         * answers CUDA_ERROR_STREAM_CAPTURE_IMPLICIT if the captured stream
         * is a blocking one; counted for any. */
        legacy_during_capture(s);
        r = CAPTURE_IMPLICIT;
    } else if (s) {
        e->marker = enqueue(s, 0, 0, 1, 0);
        e->polls_left = event_polls();
        e->serial = __atomic_add_fetch(&event_records, 1, __ATOMIC_ACQ_REL);
        r = e->marker ? OK : OUT_OF_MEMORY;
    }
    pthread_mutex_unlock(&lock);
    return r;
}
EXPORT CUresult cuEventQuery(CUevent e) {
    ENTER();
    UNSAFE();
    pthread_mutex_lock(&lock);
    CUresult r = NOT_READY;
    if (!pending(e->marker)) {
        if (e->polls_left > 0) {
            e->polls_left--;
        } else {
            event_done(e);
            r = OK;
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}
EXPORT CUresult cuEventSynchronize(CUevent e) {
    ENTER();
    UNSAFE();
    __atomic_add_fetch(&stat_event_waits, 1, __ATOMIC_RELAXED);
    sync_delay();
    pthread_mutex_lock(&lock);
    run_until(e->marker);
    e->polls_left = 0;
    event_done(e);
    pthread_mutex_unlock(&lock);
    return OK;
}
EXPORT CUresult cuEventDestroy_v2(CUevent e) {
    ENTER();
    free(e);
    return OK;
}
EXPORT CUresult cuStreamWaitEvent(CUstream h, CUevent e, unsigned flags) {
    ENTER();
    (void)flags;
    pthread_mutex_lock(&lock);
    CUresult r;
    struct mock_stream *s = resolve(h, 0, &r);
    if (s && s->capture)
        r = OK; /* a dependency of the graph: nothing to queue */
    else if (s && !enqueue(s, 0, 0, 1, e->marker))
        r = OUT_OF_MEMORY;
    pthread_mutex_unlock(&lock);
    return r;
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
    int access;      /* a mapping that cuMemSetAccess has opened */
} mock_range;
static mock_range *ranges;
static size_t nranges, cap_ranges;
static size_t reserved_bytes, mapped_bytes;
static unsigned long long stat_creates, stat_pool_allocs, stat_vmm_calls, stat_vmm_faults;

/* Faults on purpose in the virtual-memory functions: MOCK_VMM_FAIL_EVERY=N
 * (every Nth call fails) and MOCK_VMM_FAIL_AT=N[,N...] (the Nth call fails;
 * up to 8 numbers), the
 * calls of the functions named in MOCK_VMM_FAIL (comma-separated; default
 * all eight: cuMemAddressReserve, cuMemAddressFree, cuMemCreate,
 * cuMemRelease, cuMemMap, cuMemUnmap, cuMemSetAccess,
 * cuMemRetainAllocationHandle) numbered together from 1. A failed call does
 * nothing and answers CUDA_ERROR_OUT_OF_MEMORY where the driver can run out
 * (reserve, create, map, access), CUDA_ERROR_UNKNOWN elsewhere. */
static int vmm_fault(const char *name) {
    static unsigned long long every = ~0ull, at[8];
    static unsigned nat;
    static const char *only;
    if (__atomic_load_n(&every, __ATOMIC_ACQUIRE) == ~0ull) {
        const char *e = getenv("MOCK_VMM_FAIL_EVERY"), *a = getenv("MOCK_VMM_FAIL_AT");
        only = getenv("MOCK_VMM_FAIL");
        for (char *end; a && *a && nat < 8; a = *end == ',' ? end + 1 : end) {
            at[nat] = strtoull(a, &end, 10);
            if (end == a)
                break;
            nat++;
        }
        __atomic_store_n(&every, e && *e ? strtoull(e, NULL, 10) : 0, __ATOMIC_RELEASE);
    }
    if (!every && !nat)
        return 0;
    if (only && *only) {
        const char *m = strstr(only, name);
        size_t n = strlen(name);
        if (!m || (m[n] && m[n] != ','))
            return 0;
    }
    unsigned long long k = __atomic_add_fetch(&stat_vmm_calls, 1, __ATOMIC_RELAXED);
    int hit = every && k % every == 0;
    for (unsigned i = 0; i < nat && !hit; i++)
        hit = k == at[i];
    if (hit) {
        __atomic_add_fetch(&stat_vmm_faults, 1, __ATOMIC_RELAXED);
        return 1;
    }
    return 0;
}
#define UNKNOWN 999

static int add_range(uintptr_t base, size_t size, mock_phys *phys) {
    if (grow((void **)&ranges, &cap_ranges, nranges + 1, sizeof(mock_range)) != 0)
        return -1;
    ranges[nranges++] = (mock_range){base, size, phys, 0};
    return 0;
}

static int reserved(uintptr_t base, size_t size) {
    for (size_t i = 0; i < nranges; i++)
        if (!ranges[i].phys && base >= ranges[i].base && base + size <= ranges[i].base + ranges[i].size)
            return 1;
    return 0;
}

/* The mapping that holds address a, or NULL (lock held). */
static mock_range *mapping_at(uintptr_t a) {
    for (size_t i = 0; i < nranges; i++)
        if (ranges[i].phys && a >= ranges[i].base && a < ranges[i].base + ranges[i].size)
            return &ranges[i];
    return NULL;
}

/* Whether [lo, hi) is all mapped memory opened for access (lock held). */
static int mapped_cover(uintptr_t lo, uintptr_t hi) {
    for (uintptr_t at = lo; at < hi;) {
        mock_range *m = mapping_at(at);
        if (!m || !m->access)
            return 0;
        at = m->base + m->size;
    }
    return 1;
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

/* Address space reserved and mapped now, the peak of the device memory
 * taken (every kind), and the virtual-memory faults injected so far. */
EXPORT void mock_cuda_vmm_stats(size_t *reserved_now, size_t *mapped_now, size_t *peak_used,
                                unsigned long long *faults) {
    pthread_mutex_lock(&lock);
    *reserved_now = reserved_bytes;
    *mapped_now = mapped_bytes;
    *peak_used = used_peak;
    *faults = __atomic_load_n(&stat_vmm_faults, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&lock);
}

/* CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED (102): 1, or 0
 * with MOCK_NO_VMM=1 (a device without it); every other attribute 0. */
EXPORT CUresult cuDeviceGetAttribute(int *v, int attrib, CUdevice d) {
    ENTER();
    if (!v || d != 0)
        return INVALID_VALUE;
    const char *no = getenv("MOCK_NO_VMM");
    *v = attrib == 102 && !(no && *no == '1');
    return OK;
}

EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr,
                                    unsigned long long flags) {
    ENTER();
    UNSAFE();
    (void)addr;
    (void)flags;
    const size_t gran = (size_t)2 << 20;
    if (!ptr || !size || size % gran || (align & (align - 1)))
        return INVALID_VALUE;
    if (vmm_fault("cuMemAddressReserve"))
        return OUT_OF_MEMORY;
    /* Aligned as asked (at least to the granularity, as the driver does):
     * map more, then give back the unaligned head and the tail. */
    if (align < gran)
        align = gran;
    char *raw = mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED)
        return OUT_OF_MEMORY;
    char *p = (char *)(((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1));
    if (p > raw)
        munmap(raw, (size_t)(p - raw));
    if (raw + size + align > p + size)
        munmap(p + size, (size_t)(raw + size + align - (p + size)));
    pthread_mutex_lock(&lock);
    int ok = add_range((uintptr_t)p, size, NULL) == 0;
    if (ok)
        reserved_bytes += size;
    pthread_mutex_unlock(&lock);
    if (!ok) {
        munmap(p, size);
        return OUT_OF_MEMORY;
    }
    *ptr = (CUdeviceptr)(uintptr_t)p;
    return OK;
}

/* A reservation is freed whole, with nothing mapped in it any more. */
EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    ENTER();
    UNSAFE();
    if (vmm_fault("cuMemAddressFree"))
        return UNKNOWN;
    uintptr_t lo = (uintptr_t)ptr, hi = lo + size;
    pthread_mutex_lock(&lock);
    CUresult r = INVALID_VALUE;
    size_t found = nranges;
    int still_mapped = 0;
    for (size_t i = 0; i < nranges; i++) {
        if (!ranges[i].phys && ranges[i].base == lo && ranges[i].size == size)
            found = i;
        if (ranges[i].phys && ranges[i].base < hi && ranges[i].base + ranges[i].size > lo)
            still_mapped = 1;
    }
    if (found < nranges && !still_mapped) {
        ranges[found] = ranges[--nranges];
        reserved_bytes -= size;
        munmap((void *)lo, size);
        r = OK;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

EXPORT CUresult cuMemGetAllocationGranularity(size_t *g, const void *prop, int option) {
    ENTER();
    (void)option;
    if (!g || !prop)
        return INVALID_VALUE;
    *g = (size_t)2 << 20;
    return OK;
}

/* prop: a CUmemAllocationProp: pinned memory (type 1) on device 0 (its
 * location, type 1 and id 0). */
EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const void *prop, unsigned long long flags) {
    ENTER();
    UNSAFE();
    (void)flags;
    const int *pr = prop; /* type, requested handle types, location type, location id */
    if (!h || !size || !prop || size % ((size_t)2 << 20) || pr[0] != 1 || pr[2] != 1 || pr[3] != 0)
        return INVALID_VALUE;
    if (vmm_fault("cuMemCreate"))
        return OUT_OF_MEMORY;
    pthread_mutex_lock(&lock);
    CUresult r = OK;
    mock_phys *p = NULL;
    if (used + size > mem_total() || !(p = calloc(1, sizeof(*p)))) {
        r = OUT_OF_MEMORY;
    } else {
        p->size = size;
        p->refs = 1;
        use(size);
        stat_creates++;
        *h = (CUmemGenericAllocationHandle)(uintptr_t)p;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle h) {
    ENTER();
    UNSAFE();
    mock_phys *p = (mock_phys *)(uintptr_t)h;
    if (!p)
        return INVALID_VALUE;
    if (vmm_fault("cuMemRelease"))
        return UNKNOWN;
    pthread_mutex_lock(&lock);
    CUresult r = p->refs ? OK : INVALID_VALUE;
    if (p->refs) {
        p->refs--;
        phys_check(p);
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* Into reserved address space where nothing is mapped yet. */
EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                         unsigned long long flags) {
    ENTER();
    UNSAFE();
    (void)flags;
    mock_phys *p = (mock_phys *)(uintptr_t)h;
    if (!p || offset || size != p->size)
        return INVALID_VALUE;
    if (vmm_fault("cuMemMap"))
        return OUT_OF_MEMORY;
    uintptr_t lo = (uintptr_t)ptr, hi = lo + size;
    pthread_mutex_lock(&lock);
    CUresult r = INVALID_VALUE;
    int overlaps = 0;
    for (size_t i = 0; i < nranges && !overlaps; i++)
        overlaps = ranges[i].phys && ranges[i].base < hi && ranges[i].base + ranges[i].size > lo;
    if (p->refs && !overlaps && reserved(lo, size) && add_range(lo, size, p) == 0) {
        p->maps++;
        mapped_bytes += size;
        stat_maps++;
        r = OK;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* Unmaps every mapping in [ptr, ptr + size), which must be whole mappings
 * (one cut in two is refused, and nothing is unmapped). Unmapping memory
 * that a range the program owns or queued work still uses is a breach: the
 * memory is gone under them. */
EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    ENTER();
    UNSAFE();
    if (vmm_fault("cuMemUnmap"))
        return UNKNOWN;
    uintptr_t lo = (uintptr_t)ptr, hi = lo + size;
    pthread_mutex_lock(&lock);
    CUresult r = INVALID_VALUE;
    int cut = 0;
    for (size_t i = 0; i < nranges && !cut; i++) {
        mock_range *m = &ranges[i];
        cut = m->phys && m->base < hi && m->base + m->size > lo && (m->base < lo || m->base + m->size > hi);
    }
    for (size_t i = 0; !cut && i < nowns; i++)
        if (owns[i].lo < hi && owns[i].hi > lo) {
            violation("0x%lx+%zu unmapped while the program owns 0x%lx+%zu", (unsigned long)lo, size,
                      (unsigned long)owns[i].lo, (size_t)(owns[i].hi - owns[i].lo));
            break;
        }
    for (size_t k = 0; !cut && k < nitems; k++)
        if (!items[k].marker && items[k].lo < hi && items[k].hi > lo) {
            violation("0x%lx+%zu unmapped while work queued on a %s stream still uses 0x%lx+%zu", (unsigned long)lo,
                      size, kind_name[items[k].s->kind], (unsigned long)items[k].lo,
                      (size_t)(items[k].hi - items[k].lo));
            break;
        }
    for (size_t i = 0; !cut && i < nranges;) {
        mock_range *m = &ranges[i];
        if (m->phys && m->base >= lo && m->base + m->size <= hi) {
            mprotect((void *)m->base, m->size, PROT_NONE);
            madvise((void *)m->base, m->size, MADV_DONTNEED);
            mock_phys *p = m->phys;
            mapped_bytes -= m->size;
            *m = ranges[--nranges];
            p->maps--;
            phys_check(p);
            r = OK;
        } else {
            i++;
        }
    }
    if (r == OK)
        stat_unmaps++;
    pthread_mutex_unlock(&lock);
    return r;
}

/* The range must be mapped through and through. */
EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const void *desc, size_t count) {
    ENTER();
    UNSAFE();
    if (!desc || !count)
        return INVALID_VALUE;
    if (vmm_fault("cuMemSetAccess"))
        return OUT_OF_MEMORY;
    const char *logname = getenv("MOCK_ACCESS_LOG");
    if (logname && *logname) {
        FILE *f = fopen(logname, "a");
        if (f) {
            const struct {
                int type, id, flags; /* CUmemAccessDesc: location (type, id), flags */
            } *d = desc;
            fprintf(f, "access %zu", size);
            for (size_t i = 0; i < count; i++)
                fprintf(f, " %d", d[i].id);
            fprintf(f, "\n");
            fclose(f);
        }
    }
    uintptr_t lo = (uintptr_t)ptr, hi = lo + size;
    pthread_mutex_lock(&lock);
    CUresult r = OK;
    for (uintptr_t at = lo; at < hi && r == OK;) {
        mock_range *m = mapping_at(at);
        if (!m)
            r = INVALID_VALUE;
        else
            at = m->base + m->size;
    }
    if (r == OK && mprotect((void *)lo, size, PROT_READ | PROT_WRITE) != 0)
        r = INVALID_VALUE;
    for (uintptr_t at = lo; at < hi && r == OK;) {
        mock_range *m = mapping_at(at);
        m->access = 1;
        at = m->base + m->size;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *h, void *addr) {
    ENTER();
    if (!h)
        return INVALID_VALUE;
    if (vmm_fault("cuMemRetainAllocationHandle"))
        return UNKNOWN;
    pthread_mutex_lock(&lock);
    CUresult r = INVALID_VALUE;
    mock_range *m = mapping_at((uintptr_t)addr);
    if (m) {
        m->phys->refs++;
        *h = (CUmemGenericAllocationHandle)(uintptr_t)m->phys;
        r = OK;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const void *props) {
    ENTER();
    (void)props;
    *pool = calloc(1, sizeof(**pool));
    return *pool ? OK : OUT_OF_MEMORY;
}

EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
    ENTER();
    free(pool);
    return OK;
}

static CUresult pool_alloc(CUdeviceptr *dptr, size_t size, CUmemoryPool pool) {
    if (!pool)
        return INVALID_VALUE;
    __atomic_add_fetch(&stat_pool_allocs, 1, __ATOMIC_RELAXED);
    return do_alloc(dptr, size, 1);
}

/* (Each calls the shared part directly: an exported function calling
 * another would reach an interposer's hook of it.) */
EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream s) {
    ENTER();
    (void)s;
    return pool_alloc(dptr, size, pool);
}

EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream s) {
    ENTER();
    (void)s;
    return pool_alloc(dptr, size, pool);
}

/* The functions above, for cuGetProcAddress. */
#define E(f) {#f, (void (*)(void))f}
static const struct {
    const char *name;
    void (*fn)(void);
} memory_exports[] = {
    E(cuDeviceGetAttribute), E(cuMemAddressReserve), E(cuMemAddressFree), E(cuMemGetAllocationGranularity),
    E(cuMemCreate), E(cuMemRelease),
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
        {"cuStreamEndCapture", 0, 1}, {"cuStreamIsCapturing", 0, 1}, {"cuStreamSynchronize", 0, 1},
        {"cuCtxDestroy", 4000, 0}, {"cuCtxCreate", 3020, 0},
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
        E(cuInit), E(cuDriverGetVersion), E(cuDeviceGetCount), E(cuDeviceGet), E(cuDeviceCanAccessPeer), E(cuDeviceTotalMem_v2),
        E(cuDevicePrimaryCtxRetain), E(cuDevicePrimaryCtxRelease_v2), E(cuDevicePrimaryCtxRelease),
        E(cuDevicePrimaryCtxReset_v2), E(cuDevicePrimaryCtxGetState), E(cuCtxCreate), E(cuCtxCreate_v2), E(cuCtxGetCurrent),
        E(cuCtxSetCurrent), E(cuCtxGetDevice), E(cuCtxPushCurrent_v2), E(cuCtxPopCurrent_v2), E(cuCtxSynchronize),
        E(cuCtxDestroy_v2), E(cuGetErrorName), E(cuMemAlloc_v2), E(cuMemFree_v2), E(cuMemAllocAsync),
        E(cuMemAllocAsync_ptsz), E(cuMemFreeAsync), E(cuMemFreeAsync_ptsz), E(cuMemAllocPitch_v2),
        E(cuMemAllocManaged), E(cuMemGetInfo_v2), E(cuMemGetAddressRange_v2), E(cuIpcGetMemHandle), E(cuStreamCreate),
        E(cuStreamCreateWithPriority), E(cuStreamDestroy_v2), E(cuStreamSynchronize), E(cuStreamSynchronize_ptsz),
        E(cuStreamQuery), E(cuStreamWaitEvent), E(cuStreamBeginCapture_v2), E(cuStreamBeginCapture_v2_ptsz),
        E(cuStreamEndCapture), E(cuStreamEndCapture_ptsz), E(cuStreamIsCapturing), E(cuStreamIsCapturing_ptsz),
        E(cuGraphInstantiateWithFlags), E(cuGraphLaunch), E(cuGraphExecDestroy), E(cuGraphDestroy),
        E(cuEventCreate), E(cuEventRecord), E(cuEventQuery), E(cuEventSynchronize), E(cuEventDestroy_v2),
        E(cuGetProcAddress), E(cuGetProcAddress_v2), E(cuThreadExchangeStreamCaptureMode),
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
