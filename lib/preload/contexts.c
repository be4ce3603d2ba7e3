/*
 * contexts.c — one carve arena per CUDA context, and the quarantine that
 * makes a free without a stream safe.
 *
 * cuMemFree / cudaFree name no stream: the driver frees only after all work
 * queued before it, on every stream, has finished (it synchronizes). carve
 * keeps the promise without stalling the device. A freed buffer goes into
 * the current "epoch"; every 128 frees (or 32 MiB) the epoch is closed by
 * recording one event on the legacy default stream — which completes only
 * after the prior work of every blocking stream — and one on each
 * non-blocking stream the context created (those are tracked as they are
 * made and destroyed). When all of an epoch's events have completed, its
 * buffers go back to the arena at once. Allocations look at the oldest
 * closed epoch now and then (an event query); an allocation that would
 * otherwise fail waits for every closed epoch first. So the cost of the
 * guarantee is a few event records per 128 frees, and nothing on the
 * allocation path but a counter. While any stream is being captured into a
 * graph no event is recorded (it would join the capture); frees then wait
 * in the open epoch until the capture ends.
 *
 * Stream-ordered frees (cuMemFreeAsync on a real stream) need no quarantine:
 * on the allocation's stream the buffer is freed at once, on another stream
 * it is first recorded on that stream (carve_record_stream).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "preload/cutypes.h"
#include "preload/preload.h"

#define MAX_CTX 64
#define EPOCH_FREES 128
#define EPOCH_BYTES ((size_t)32 << 20)
#define MAX_EPOCHS 64   /* closed epochs in flight; past this, wait for the oldest */
#define POLL_EVERY 32   /* allocations (and unordered frees) between looks at the oldest closed epoch */

typedef struct epoch {
    uintptr_t *ptr;
    size_t n, cap, bytes;
    CUevent *ev;
    unsigned nev, cap_ev;
} epoch;

/* The pointers waiting in the quarantine, to refuse a second free of one
 * (which would otherwise free it early). Open addressing, backward-shift
 * deletion; a quarter full at most. */
typedef struct qset {
    uintptr_t *slot; /* 0: empty */
    size_t mask, count;
} qset;

static size_t qhash(uintptr_t p, size_t mask) { return (size_t)(((uint64_t)(p >> 8) * 0x9E3779B97F4A7C15ull) >> 20) & mask; }

static int qset_has(const qset *q, uintptr_t p) {
    if (!q->count)
        return 0;
    for (size_t i = qhash(p, q->mask);; i = (i + 1) & q->mask) {
        if (q->slot[i] == p)
            return 1;
        if (!q->slot[i])
            return 0;
    }
}

static void qset_put(qset *q, uintptr_t p) {
    size_t i = qhash(p, q->mask);
    while (q->slot[i])
        i = (i + 1) & q->mask;
    q->slot[i] = p;
    q->count++;
}

static int qset_add(qset *q, uintptr_t p) {
    if ((q->count + 1) * 4 > (q->slot ? q->mask + 1 : 0)) {
        size_t cap = q->slot ? (q->mask + 1) * 2 : 256;
        qset n = {calloc(cap, sizeof(uintptr_t)), cap - 1, 0};
        if (!n.slot)
            return -1;
        for (size_t i = 0; q->slot && i <= q->mask; i++)
            if (q->slot[i])
                qset_put(&n, q->slot[i]);
        free(q->slot);
        *q = n;
    }
    qset_put(q, p);
    return 0;
}

static void qset_del(qset *q, uintptr_t p) {
    size_t i = qhash(p, q->mask);
    while (q->slot[i] != p) {
        if (!q->slot[i])
            return;
        i = (i + 1) & q->mask;
    }
    size_t hole = i;
    for (size_t j = (i + 1) & q->mask; q->slot[j]; j = (j + 1) & q->mask) {
        size_t home = qhash(q->slot[j], q->mask);
        int stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!stays) {
            q->slot[hole] = q->slot[j];
            hole = j;
        }
    }
    q->slot[hole] = 0;
    q->count--;
}

struct carve_ctx {
    CUcontext ctx;            /* NULL once the context is gone */
    int device;
    carve_arena *arena;       /* NULL: could not be made (calls go to the driver) */
    pthread_mutex_t lock;     /* quarantine and streams */
    epoch cur;                /* collecting frees */
    epoch ring[MAX_EPOCHS];   /* closed, oldest at head */
    unsigned head, count;
    size_t quarantined;       /* bytes in cur and ring */
    qset waiting;             /* the pointers in cur and ring */
    size_t nwaiting;          /* atomic copy of waiting.count, read without the lock */
    CUevent *spare;
    unsigned nspare, cap_spare;
    carve_stream *nb;         /* non-blocking streams of the context */
    size_t nnb, cap_nb;
    unsigned tick;
    carve_ctx_counts n;
    char err[512];
};

static carve_ctx ctxs[MAX_CTX];
static unsigned nctx;         /* atomic: entries published so far */
static unsigned generation;   /* atomic: bumped when a context goes away */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static __thread struct {
    CUcontext ctx;
    carve_ctx *c;
    unsigned generation;
} tls;

/* The driver functions this file calls, found through real.c. */
static struct {
    CUresult (*CtxGetCurrent)(CUcontext *);
    CUresult (*CtxGetDevice)(CUdevice *);
    CUresult (*CtxPushCurrent)(CUcontext);
    CUresult (*CtxPopCurrent)(CUcontext *);
    CUresult (*CtxSynchronize)(void);
    CUresult (*EventCreate)(CUevent *, unsigned);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventQuery)(CUevent);
    CUresult (*EventSynchronize)(CUevent);
    CUresult (*EventDestroy)(CUevent);
    CUresult (*MemGetInfo)(size_t *, size_t *);
} real;
static pthread_once_t real_once = PTHREAD_ONCE_INIT;
static int real_ok;

static void find_real(void) {
    if (carve_real_init() != 0)
        return;
#define R(field, name) CARVE_SET_FN(real.field, carve_real_driver(name))
    R(CtxGetCurrent, "cuCtxGetCurrent");
    R(CtxGetDevice, "cuCtxGetDevice");
    R(CtxPushCurrent, "cuCtxPushCurrent_v2");
    R(CtxPopCurrent, "cuCtxPopCurrent_v2");
    R(CtxSynchronize, "cuCtxSynchronize");
    R(EventCreate, "cuEventCreate");
    R(EventRecord, "cuEventRecord");
    R(EventQuery, "cuEventQuery");
    R(EventSynchronize, "cuEventSynchronize");
    R(EventDestroy, "cuEventDestroy_v2");
    R(MemGetInfo, "cuMemGetInfo_v2");
#undef R
    real_ok = real.CtxGetCurrent && real.CtxGetDevice && real.CtxPushCurrent && real.CtxPopCurrent &&
              real.CtxSynchronize && real.EventCreate && real.EventRecord && real.EventQuery &&
              real.EventSynchronize && real.EventDestroy && real.MemGetInfo;
}

#define drv() (&real)

/* ---- contexts and arenas ------------------------------------------------ */

static carve_ctx *find(CUcontext cur) {
    unsigned n = __atomic_load_n(&nctx, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++)
        if (__atomic_load_n(&ctxs[i].ctx, __ATOMIC_ACQUIRE) == cur)
            return &ctxs[i];
    return NULL;
}

static void make_arena(carve_ctx *c) {
    carve_config cfg;
    if (carve_conf_parse(getenv("CARVE_CONF"), c->device, &cfg) != CARVE_OK) {
        snprintf(c->err, sizeof(c->err), "CARVE_CONF: %s", carve_last_error(NULL));
        return;
    }
    char name[48];
    snprintf(name, sizeof(name), "carve-run device %d", c->device);
    cfg.name = name;
    cfg.device = c->device;
    /* The driver backend allocates in this context with the real cuMemAlloc;
     * virtual-memory mode maps granules with cuMemMap in the primary context. */
    cfg.backend = cfg.vmm == 1 ? CARVE_BACKEND_CUDA : CARVE_BACKEND_CUDA_DRIVER;
    if (carve_arena_create(&cfg, &c->arena) != CARVE_OK) {
        c->arena = NULL;
        snprintf(c->err, sizeof(c->err), "%s", carve_last_error(NULL));
    }
}

carve_ctx *carve_ctx_current(void) {
    pthread_once(&real_once, find_real);
    if (!real_ok)
        return NULL;
    CUcontext cur = NULL;
    if (drv()->CtxGetCurrent(&cur) != CUDA_SUCCESS || !cur)
        return NULL;
    unsigned gen = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
    if (CARVE_LIKELY(tls.ctx == cur && tls.generation == gen))
        return tls.c;
    carve_ctx *c = find(cur);
    if (!c) {
        pthread_mutex_lock(&table_lock);
        c = find(cur);
        if (!c && nctx < MAX_CTX) {
            c = &ctxs[nctx];
            memset(c, 0, sizeof(*c));
            pthread_mutex_init(&c->lock, NULL);
            CUdevice dev = 0;
            drv()->CtxGetDevice(&dev);
            c->device = (int)dev;
            make_arena(c);
            __atomic_store_n(&c->ctx, cur, __ATOMIC_RELEASE);
            __atomic_store_n(&nctx, nctx + 1, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&table_lock);
        if (!c)
            return NULL;
    }
    tls.ctx = cur;
    tls.c = c;
    tls.generation = gen;
    return c;
}

carve_ctx *carve_ctx_owner(uintptr_t ptr) {
    unsigned n = __atomic_load_n(&nctx, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++) {
        carve_ctx *c = &ctxs[i];
        if (c->arena && __atomic_load_n(&c->ctx, __ATOMIC_ACQUIRE) &&
            carve_buffer_info(c->arena, (void *)ptr, NULL, NULL) == CARVE_OK)
            return c;
    }
    return NULL;
}

int carve_ctx_device(const carve_ctx *c) { return c->device; }
carve_arena *carve_ctx_arena(const carve_ctx *c) { return c->arena; }
const char *carve_ctx_last_error(const carve_ctx *c) { return c->err; }

void carve_ctx_gone(struct CUctx_st *ctx) {
    carve_ctx *c = find(ctx);
    if (!c)
        return;
    /* The driver frees the context's memory itself; the arena's records are
     * kept for the report but nothing is handed out from them again. */
    __atomic_store_n(&c->ctx, NULL, __ATOMIC_RELEASE);
    __atomic_add_fetch(&generation, 1, __ATOMIC_RELEASE);
}

/* ---- driver helpers ----------------------------------------------------- */

/* Make c's context current if it is not; returns 1 if it was pushed. */
static int enter(carve_ctx *c) {
    CUcontext cur = NULL;
    if (drv()->CtxGetCurrent(&cur) == CUDA_SUCCESS && cur == c->ctx)
        return 0;
    return drv()->CtxPushCurrent(c->ctx) == CUDA_SUCCESS;
}

static void leave(int pushed) {
    CUcontext popped;
    if (pushed)
        drv()->CtxPopCurrent(&popped);
}

static CUevent take_event(carve_ctx *c) {
    if (c->nspare)
        return c->spare[--c->nspare];
    CUevent ev = NULL;
    return drv()->EventCreate(&ev, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS ? ev : NULL;
}

static void give_event(carve_ctx *c, CUevent ev) {
    if (c->nspare == c->cap_spare) {
        unsigned cap = c->cap_spare ? c->cap_spare * 2 : 16;
        CUevent *s = realloc(c->spare, cap * sizeof(*s));
        if (!s) {
            drv()->EventDestroy(ev);
            return;
        }
        c->spare = s;
        c->cap_spare = cap;
    }
    c->spare[c->nspare++] = ev;
}

/* ---- the quarantine (lock held) ----------------------------------------- */

static void release_epoch(carve_ctx *c, epoch *e) {
    for (size_t i = 0; i < e->n; i++) {
        qset_del(&c->waiting, e->ptr[i]);
        (void)carve_free(c->arena, (void *)e->ptr[i]);
    }
    __atomic_store_n(&c->nwaiting, c->waiting.count, __ATOMIC_RELAXED);
    for (unsigned i = 0; i < e->nev; i++)
        give_event(c, e->ev[i]);
    c->quarantined -= e->bytes;
    e->n = e->bytes = 0;
    e->nev = 0;
}

/* Release the closed epochs whose events have completed, oldest first;
 * with wait, all of them. */
static void poll_epochs(carve_ctx *c, int wait) {
    /* During a capture nothing goes back: a free could make carve record an
     * event on the legacy stream, which would join the capture. */
    if (carve_capture_active())
        return;
    while (c->count) {
        epoch *e = &c->ring[c->head];
        for (unsigned i = 0; i < e->nev; i++) {
            CUresult r = wait ? drv()->EventSynchronize(e->ev[i]) : drv()->EventQuery(e->ev[i]);
            if (r == CUDA_ERROR_NOT_READY)
                return;
            if (r != CUDA_SUCCESS) { /* cannot tell: wait for everything instead */
                int pushed = enter(c);
                drv()->CtxSynchronize();
                leave(pushed);
                break;
            }
        }
        release_epoch(c, e);
        c->head = (c->head + 1) % MAX_EPOCHS;
        c->count--;
    }
}

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap * 2 : 64;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

/* Close the current epoch: one event on the legacy stream and one on each
 * non-blocking stream. 0 when closed (or empty), -1 when it must stay open
 * (a graph capture is in progress). */
static int close_epoch(carve_ctx *c) {
    epoch *cur = &c->cur;
    if (!cur->n)
        return 0;
    if (carve_capture_active())
        return -1;
    if (c->count == MAX_EPOCHS) { /* too much in flight: wait for the oldest */
        epoch *e = &c->ring[c->head];
        for (unsigned i = 0; i < e->nev; i++)
            drv()->EventSynchronize(e->ev[i]);
        poll_epochs(c, 0);
    }
    int pushed = enter(c);
    size_t cap_ev = cur->cap_ev;
    int ok = grow((void **)&cur->ev, &cap_ev, c->nnb + 1, sizeof(CUevent)) == 0;
    cur->cap_ev = (unsigned)cap_ev;
    for (size_t i = 0; ok && i <= c->nnb; i++) {
        CUevent ev = take_event(c);
        if (!ev || drv()->EventRecord(ev, i == 0 ? (CUstream)0x1 /* legacy */ : (CUstream)c->nb[i - 1]) !=
                       CUDA_SUCCESS) {
            if (ev)
                give_event(c, ev);
            ok = 0;
            break;
        }
        cur->ev[cur->nev++] = ev;
    }
    if (!ok) { /* no events: wait for the device, then everything is safe now */
        drv()->CtxSynchronize();
        leave(pushed);
        release_epoch(c, cur);
        c->n.drains++;
        return 0;
    }
    leave(pushed);
    /* Move cur into the ring, taking the slot's arrays for the next epoch. */
    unsigned slot = (c->head + c->count) % MAX_EPOCHS;
    epoch spare = c->ring[slot];
    c->ring[slot] = *cur;
    *cur = spare;
    cur->n = cur->bytes = 0;
    cur->nev = 0;
    c->count++;
    c->n.epochs++;
    return 0;
}

/* ---- allocation and free ------------------------------------------------ */

int carve_ctx_alloc(carve_ctx *c, size_t size, carve_stream stream, uintptr_t *out) {
    *out = 0;
    if (c->count && (__atomic_add_fetch(&c->tick, 1, __ATOMIC_RELAXED) % POLL_EVERY) == 0 &&
        pthread_mutex_trylock(&c->lock) == 0) {
        poll_epochs(c, 0);
        if (!c->count && c->cur.n)
            close_epoch(c);
        pthread_mutex_unlock(&c->lock);
    }
    void *p = NULL;
    carve_status st = carve_alloc(c->arena, size, stream, &p);
    if (st == CARVE_ERR_OOM && c->quarantined) {
        /* Memory waiting for the device may be all that is missing. */
        pthread_mutex_lock(&c->lock);
        close_epoch(c);
        poll_epochs(c, 1);
        c->n.drains++;
        pthread_mutex_unlock(&c->lock);
        st = carve_alloc(c->arena, size, stream, &p);
    }
    if (st != CARVE_OK) {
        snprintf(c->err, sizeof(c->err), "%s", carve_last_error(c->arena));
        if (st == CARVE_ERR_OOM) {
            __atomic_add_fetch(&c->n.ooms, 1, __ATOMIC_RELAXED);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        return st == CARVE_ERR_INVALID ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_UNKNOWN;
    }
    *out = (uintptr_t)p;
    __atomic_add_fetch(stream ? &c->n.async_allocs : &c->n.allocs, 1, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

/* Whether ptr waits in the quarantine (freed already). */
static int waiting(carve_ctx *c, uintptr_t ptr) {
    if (!__atomic_load_n(&c->nwaiting, __ATOMIC_RELAXED))
        return 0;
    pthread_mutex_lock(&c->lock);
    int w = qset_has(&c->waiting, ptr);
    pthread_mutex_unlock(&c->lock);
    return w;
}

int carve_ctx_free(carve_ctx *c, uintptr_t ptr, int ordered, carve_stream stream) {
    size_t size = 0;
    carve_stream own = NULL;
    if (carve_buffer_info(c->arena, (void *)ptr, &size, &own) != CARVE_OK)
        return CUDA_ERROR_INVALID_VALUE; /* not a live buffer */
    if (ordered) {
        if (waiting(c, ptr))
            return CUDA_ERROR_INVALID_VALUE; /* freed already, waiting in the quarantine */
        __atomic_add_fetch(&c->n.async_frees, 1, __ATOMIC_RELAXED);
        if (stream != own && carve_record_stream(c->arena, (void *)ptr, stream) != CARVE_OK)
            ordered = 0; /* no memory for the record: fall back to the quarantine */
        else
            return carve_free(c->arena, (void *)ptr) == CARVE_OK ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    }
    __atomic_add_fetch(&c->n.frees, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&c->lock);
    epoch *cur = &c->cur;
    if (qset_has(&c->waiting, ptr)) { /* freed already (or a second free raced with the first) */
        pthread_mutex_unlock(&c->lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (grow((void **)&cur->ptr, &cur->cap, cur->n + 1, sizeof(uintptr_t)) != 0 ||
        qset_add(&c->waiting, ptr) != 0) {
        /* No room to remember it: make it safe the slow way. */
        int pushed = enter(c);
        drv()->CtxSynchronize();
        leave(pushed);
        (void)carve_free(c->arena, (void *)ptr);
        pthread_mutex_unlock(&c->lock);
        return CUDA_SUCCESS;
    }
    __atomic_store_n(&c->nwaiting, c->waiting.count, __ATOMIC_RELAXED);
    cur->ptr[cur->n++] = ptr;
    cur->bytes += size;
    c->quarantined += size;
    if (cur->n >= EPOCH_FREES || cur->bytes >= EPOCH_BYTES)
        close_epoch(c);
    /* Looking at the oldest epoch's events is a driver call: once every
     * POLL_EVERY frees, as allocations do. */
    if (c->count && (__atomic_add_fetch(&c->tick, 1, __ATOMIC_RELAXED) % POLL_EVERY) == 0)
        poll_epochs(c, 0);
    pthread_mutex_unlock(&c->lock);
    return CUDA_SUCCESS;
}

int carve_ctx_mem_info(carve_ctx *c, size_t *free_bytes, size_t *total_bytes) {
    size_t f = 0, t = 0;
    CUresult r = drv()->MemGetInfo(&f, &t);
    if (r != CUDA_SUCCESS)
        return r;
    carve_stats s;
    carve_get_stats(c->arena, &s);
    pthread_mutex_lock(&c->lock);
    size_t quarantined = c->quarantined;
    pthread_mutex_unlock(&c->lock);
    size_t total = s.limit_bytes < t ? s.limit_bytes : t;
    size_t can_grow = s.limit_bytes > s.reserved_bytes ? s.limit_bytes - s.reserved_bytes : 0;
    if (can_grow > f)
        can_grow = f;
    size_t cached = s.reserved_bytes > s.allocated_bytes ? s.reserved_bytes - s.allocated_bytes : 0;
    size_t free_now = can_grow + cached + quarantined;
    *free_bytes = free_now < total ? free_now : total;
    *total_bytes = total;
    return CUDA_SUCCESS;
}

/* ---- streams and captures ----------------------------------------------- */

void carve_ctx_stream_created(carve_stream s, unsigned flags) {
    if (!(flags & CU_STREAM_NON_BLOCKING) || !s)
        return;
    carve_ctx *c = carve_ctx_current();
    if (!c)
        return;
    pthread_mutex_lock(&c->lock);
    if (grow((void **)&c->nb, &c->cap_nb, c->nnb + 1, sizeof(carve_stream)) == 0)
        c->nb[c->nnb++] = s;
    pthread_mutex_unlock(&c->lock);
}

void carve_ctx_stream_destroyed(carve_stream s) {
    unsigned n = __atomic_load_n(&nctx, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++) {
        carve_ctx *c = &ctxs[i];
        pthread_mutex_lock(&c->lock);
        for (size_t k = 0; k < c->nnb; k++)
            if (c->nb[k] == s) {
                /* Frees before now may have been used on s: close their epoch
                 * while s still exists. */
                close_epoch(c);
                c->nb[k] = c->nb[--c->nnb];
                break;
            }
        /* A buffer in the quarantine may have been allocated on s, and
         * carve_free records on a buffer's own stream: give back everything
         * in the quarantine while s still exists (a wait, only when frees
         * are pending; streams are seldom destroyed). */
        if (c->arena && (c->cur.n || c->count) && close_epoch(c) == 0) {
            poll_epochs(c, 1);
            c->n.drains++;
        }
        pthread_mutex_unlock(&c->lock);
    }
}


/* ---- report ------------------------------------------------------------- */

void carve_ctx_each(void (*fn)(carve_arena *arena, int device, const carve_ctx_counts *n, void *arg), void *arg) {
    unsigned n = __atomic_load_n(&nctx, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++)
        if (ctxs[i].arena)
            fn(ctxs[i].arena, ctxs[i].device, &ctxs[i].n, arg);
}

void carve_ctx_add_time(carve_ctx *c, uint64_t ns) { __atomic_add_fetch(&c->n.ns_in_carve, ns, __ATOMIC_RELAXED); }
void carve_ctx_passthrough(carve_ctx *c) {
    if (c)
        __atomic_add_fetch(&c->n.passthrough, 1, __ATOMIC_RELAXED);
}
