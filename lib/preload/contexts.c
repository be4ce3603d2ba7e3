/*
 * contexts.c — one carve arena per CUDA context, and the interposer's
 * allocation and free as carve serves them, with what each thread keeps to
 * itself.
 *
 * What a free that names no stream (cuMemFree, cudaFree) promises, and how
 * it is kept (with quarantine.c and pending.c):
 *  - the buffer is not handed out again while work queued before the free,
 *    on any stream of the context (blocking or non-blocking, any thread),
 *    may still touch it: it goes back to carve only through an epoch whose
 *    events were recorded after the free;
 *  - a second free of a buffer that is waiting is refused
 *    (CUDA_ERROR_INVALID_VALUE), never turned into an early free;
 *  - an allocation that would fail first waits for the waiting memory,
 *    every thread's batch included;
 *  - nothing is recorded while a graph capture is in progress;
 *  - destroying a stream first empties the quarantine, threads' batches
 *    included (an epoch with an event on the stream, waited for);
 *  - a thread's exit, a context's destruction and the report at exit lose no
 *    batch (they take it), and none of them calls the driver at exit.
 *
 * The one idea: the hot path touches nothing another thread writes but
 * carve's own pools. A thread caches its current context's state (keyed by
 * the CUcontext and a generation bumped whenever a context goes away),
 * counts its calls in a record of its own, and collects its unordered frees
 * in a private batch of up to BATCH_FREES buffers that joins the context's
 * open epoch in one step under the quarantine's lock. Before anything else
 * every free sets the buffer's pending mark (one atomic OR), which is how of
 * two frees of one buffer, racing or not, exactly one is accepted, and a
 * second free is refused wherever the first one waits; a stream-ordered
 * free clears it once carve has the buffer back, and says so meanwhile in
 * its thread's slot (releasing[]), so that a free of the same address,
 * handed out again in between, waits for the mark to go instead of being
 * refused. A graph capture that begins waits for every other thread that
 * is inside carve where carve's engine may record an event (its flag in
 * inside[], set around carve_alloc, a stream-ordered free and the periodic
 * look), and such a thread asks carve_capture_may_record right before it
 * records: either the capture waits for the record, or the record sees
 * the capture. Only buffers
 * allocated on the default stream use batches (a buffer of a real stream
 * joins the epoch at once, so that it goes back before its stream can be
 * destroyed). Other threads take what a thread holds under its small lock,
 * which its owner takes alone in practice. With --report, one call in
 * SAMPLE_EVERY is timed and counted SAMPLE_EVERY times.
 *
 * A joined batch stays with its thread (up to KEEP buffers and KEEP_BYTES):
 * the epoch only counts it and says by its number when its events have
 * completed (carve_q_done). From then on the thread's next unordered
 * allocations of the same size take those buffers back directly, still
 * marked live in carve, so the common loop of allocating and freeing the
 * same sizes skips carve_alloc's search and split and carve_free's merge.
 * What is not reused by the thread's next look (POLL_EVERY calls) goes back
 * to carve, and what a thread that has stopped calling holds is taken by
 * another thread's look (take_from_others). Everything a thread holds is handed over to the quarantine
 * (joining its open epoch, which is later and so always safe) when memory
 * is short, at the thread's exit, when it frees into another context, at the
 * report and when a context goes away; destroying a stream takes the
 * batches, which have joined no epoch yet.
 *
 * Stream-ordered frees (cuMemFreeAsync on a real stream) need no quarantine:
 * on the allocation's stream the buffer is freed at once, on another stream
 * it is first recorded on that stream (carve_record_stream).
 *
 * Contexts come and go without bound over a run: each context's state is an
 * allocation of its own, never freed (a thread may still hold a pointer to
 * a gone one, which then only ever finds it gone), and a slot of the table
 * names a live one; a gone context's slot is taken by the next new context.
 * While the driver destroys, resets or releases a context no arena is made
 * for its handle (carve_ctx_going .. carve_ctx_settled), so none made in
 * that moment can outlive the call and serve memory the driver freed.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/lock.h"
#include "preload/cutypes.h"
#include "preload/pending.h"
#include "preload/preload.h"

#define MAX_CTX 1024 /* contexts alive at once (a gone context's slot is reused) */
#define MAX_DYING 64 /* contexts being destroyed, reset or released at once */
#define BATCH_FREES 32
#define BATCH_BYTES ((size_t)8 << 20) /* a batch joins sooner when it holds this much */
#define KEEP 512                       /* buffers a thread holds: batch, joined batches, reusable ones */
#define KEEP_GROUPS (KEEP / BATCH_FREES)
#define KEEP_BYTES ((size_t)16 << 20)  /* past this, a batch that joins is handed over, not kept */
#define REUSE_SCAN 8                   /* reusable buffers looked at for one of the size asked for */
#define POLL_EVERY 64                  /* calls of a thread between looks at the closed epochs */
#define SAMPLE_EVERY 67                /* calls between two timed ones (with --report) */
#define ROOM_SLACK_DIV 64              /* an arena grows past waiting frees up to 1/64 of what it holds */

#define TLS __thread __attribute__((tls_model("initial-exec")))
#define NOINLINE __attribute__((noinline))
#define ALWAYS_INLINE inline __attribute__((always_inline))

struct carve_ctx {
    CUcontext ctx;      /* NULL once the context is gone, or while the driver may be taking it
                           away (atomic) */
    int hidden;         /* NULL only while the driver destroys or resets it (table_lock): its
                           slot stays its own, and it comes back if the driver refuses */
    CUcontext going;    /* while hidden, the handle the driver is taking away (table_lock):
                           the mark carve_ctx_settled finds it by, however many go at once */
    struct carve_ctx *retired_next; /* gone and out of its slot: kept for the report */
    unsigned seq;       /* contexts made before it */
    int device;
    carve_arena *arena; /* NULL: could not be made (calls go to the driver) */
    carve_quarantine *q;
    int batched;        /* some thread has put frees of this context in its batch (atomic) */
    carve_ctx_counts n; /* counts folded in from threads, and the rare ones (atomic) */
    char err[512];
};

/* What a thread keeps: the buffers it freed (guarded by lock) and its
 * counts. The buffers are held in the order they were freed, at indices
 * that run freely (modulo KEEP): [head, ready) may be reused now (their
 * epochs completed), [ready, joined) wait for their epochs (one group per
 * joined batch), [joined, tail) is the batch, which has joined no epoch. */
typedef struct carve_thread {
    carve_spin lock;
    carve_ctx *bc; /* whose frees it holds (written by the owner, under lock) */
    unsigned head, ready, joined, tail;
    size_t bytes;       /* of everything held */
    size_t batch_bytes; /* of the batch */
    unsigned g_head, ngroups;
    struct {
        uint64_t seq;   /* the epoch the group joined */
        unsigned end;   /* where it ends */
    } group[KEEP_GROUPS];
    uintptr_t ptr[KEEP];
    size_t size[KEEP];
    int slot;      /* its entry in releasing[], or -1 */
    carve_ctx *nc; /* whose calls the counts are (changed by the owner under threads_lock) */
    uint64_t count[4]; /* written by the owner only */
    unsigned looks;      /* its looks at the epochs so far (look_around; under lock) */
    unsigned looks_seen; /* looks when another thread's look last saw it (under lock) */
    struct carve_thread *prev, *next;
} carve_thread;
enum { ALLOCS, FREES, ASYNC_ALLOCS, ASYNC_FREES };

/* Every context's state is its own allocation, never freed (a thread may
 * still hold a pointer to a gone one): a slot of the table names the
 * current one, and a gone context's slot is taken by the next new context,
 * the gone one joining the retired list, which only the report reads. */
static carve_ctx *slots[MAX_CTX];
static unsigned nctx;       /* atomic: slots published so far */
static carve_ctx *retired;  /* atomic: gone contexts out of their slots */
/* Contexts the driver is destroying, resetting or releasing right now (a
 * handle once per call, under table_lock): no arena is made for them. A
 * context carve serves is marked itself (carve_ctx.going), whatever the
 * number: this list is for handles carve has no arena for yet, and past
 * MAX_DYING of those at once, one made meanwhile is forgotten when the
 * call succeeds. */
static CUcontext dying[MAX_DYING];
static unsigned ndying;
static unsigned nmade; /* contexts made so far (table_lock) */
static int forked;          /* a child of a process that used CUDA: serve nothing */
static unsigned generation; /* atomic: bumped when a context goes away */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static carve_thread *threads; /* every thread's record */
static unsigned nthreads;     /* records in threads (changed under threads_lock; read atomically) */
static pthread_mutex_t threads_lock = PTHREAD_MUTEX_INITIALIZER;

/* The buffer each thread's stream-ordered free is giving back right now (0:
 * none), one slot per thread (taken and given back under threads_lock). */
#define MAX_SLOTS 1024
static uintptr_t releasing[MAX_SLOTS];
/* 1 while the thread of that slot is inside carve where carve's engine may
 * record events outside a quarantine's lock (carve_ctx_capture_fence). */
static int inside[MAX_SLOTS];
static unsigned char slot_taken[MAX_SLOTS];
static unsigned nslots; /* atomic: slots ever taken (how far to look) */
static pthread_key_t exit_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static int key_ok;

static TLS struct {
    CUcontext ctx; /* the current context, as last seen, and its state */
    carve_ctx *c;
    unsigned gen;
    carve_ctx *hint; /* the context that owned this thread's last freed buffer */
    unsigned hint_gen;
    carve_thread *t;
    unsigned tick, sample;
    unsigned batched, batched_seen; /* frees put in the batch, in all and at the last look */
    unsigned reused, reused_seen;   /* allocations served from the thread's own frees, likewise */
    int making;                     /* this thread is making an arena (table_lock held) */
} me;

/* The driver functions this file calls, found through real.c. */
static struct {
    CUresult (*CtxGetCurrent)(CUcontext *);
    CUresult (*CtxGetDevice)(CUdevice *);
    CUresult (*MemGetInfo)(size_t *, size_t *);
} real;
static pthread_once_t real_once = PTHREAD_ONCE_INIT;
static int real_ok; /* atomic */

static void find_real(void) {
    if (carve_meter_init() != 0) /* the driver, and libcarve's metered table, before any arena */
        return;
#define R(field, name) CARVE_SET_FN(real.field, carve_real_driver(name))
    R(CtxGetCurrent, "cuCtxGetCurrent");
    R(CtxGetDevice, "cuCtxGetDevice");
    R(MemGetInfo, "cuMemGetInfo_v2");
#undef R
    __atomic_store_n(&real_ok, real.CtxGetCurrent && real.CtxGetDevice && real.MemGetInfo, __ATOMIC_RELEASE);
}

/* ---- threads ------------------------------------------------------------ */

enum { TAKE_BATCH, TAKE_ALL };
static void take_batch(carve_thread *t, const carve_ctx *only, int what, int may_record);
static void fold_counts(carve_thread *t);

/* A thread ends: its batch joins its context's epoch (no driver call: this
 * may run while the process exits), its counts go to the context. */
static void thread_gone(void *arg) {
    carve_thread *t = arg;
    if (forked)
        return; /* a child's: what it holds is the parent's */
    pthread_mutex_lock(&threads_lock);
    take_batch(t, NULL, TAKE_ALL, 0);
    fold_counts(t);
    if (t->prev)
        t->prev->next = t->next;
    else
        threads = t->next;
    if (t->next)
        t->next->prev = t->prev;
    __atomic_store_n(&nthreads, nthreads - 1, __ATOMIC_RELAXED);
    if (t->slot >= 0)
        slot_taken[t->slot] = 0;
    pthread_mutex_unlock(&threads_lock);
    if (me.t == t)
        me.t = NULL;
    free(t);
}

static void make_key(void) { key_ok = pthread_key_create(&exit_key, thread_gone) == 0; }

static NOINLINE carve_thread *thread_new(void) {
    pthread_once(&key_once, make_key);
    carve_thread *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    pthread_mutex_lock(&threads_lock);
    t->next = threads;
    if (threads)
        threads->prev = t;
    threads = t;
    __atomic_store_n(&nthreads, nthreads + 1, __ATOMIC_RELAXED);
    t->slot = -1;
    for (int i = 0; i < MAX_SLOTS && t->slot < 0; i++)
        if (!slot_taken[i]) {
            slot_taken[i] = 1;
            t->slot = i;
            if ((unsigned)i >= nslots)
                __atomic_store_n(&nslots, (unsigned)i + 1, __ATOMIC_RELEASE);
        }
    pthread_mutex_unlock(&threads_lock);
    if (key_ok)
        pthread_setspecific(exit_key, t);
    me.t = t;
    return t;
}

static inline carve_thread *thread_self(void) { return CARVE_LIKELY(me.t != NULL) ? me.t : thread_new(); }

/* Move t's counts to the context they count (by t's owner, threads_lock
 * held). */
static void fold_counts(carve_thread *t) {
    for (int k = 0; k < 4; k++) {
        uint64_t v = __atomic_load_n(&t->count[k], __ATOMIC_RELAXED);
        if (v && t->nc) {
            uint64_t *dst = k == ALLOCS ? &t->nc->n.allocs : k == FREES ? &t->nc->n.frees
                            : k == ASYNC_ALLOCS ? &t->nc->n.async_allocs : &t->nc->n.async_frees;
            __atomic_add_fetch(dst, v, __ATOMIC_RELAXED);
        }
        __atomic_store_n(&t->count[k], 0, __ATOMIC_RELAXED);
    }
}

static NOINLINE void count_slow(carve_thread *t, carve_ctx *c, int kind) {
    if (!t) { /* no record of its own: count in the shared one */
        carve_ctx_counts *n = &c->n;
        uint64_t *dst = kind == ALLOCS ? &n->allocs : kind == FREES ? &n->frees
                        : kind == ASYNC_ALLOCS ? &n->async_allocs : &n->async_frees;
        __atomic_add_fetch(dst, 1, __ATOMIC_RELAXED);
        return;
    }
    pthread_mutex_lock(&threads_lock);
    fold_counts(t);
    t->nc = c;
    __atomic_store_n(&t->count[kind], 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&threads_lock);
}

/* One more call of kind for c: a plain increment of the thread's own count
 * (an atomic store only so that the report may read it meanwhile). */
static inline void count(carve_thread *t, carve_ctx *c, int kind) {
    if (CARVE_UNLIKELY(!t || t->nc != c)) {
        count_slow(t, c, kind);
        return;
    }
    __atomic_store_n(&t->count[kind], __atomic_load_n(&t->count[kind], __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

static inline void enter_carve(const carve_thread *t) {
    if (t && t->slot >= 0)
        __atomic_store_n(&inside[t->slot], 1, __ATOMIC_RELAXED);
}
static inline void leave_carve(const carve_thread *t) {
    if (t && t->slot >= 0)
        __atomic_store_n(&inside[t->slot], 0, __ATOMIC_RELEASE);
}

#define AT(i) ((i) & (KEEP - 1))

/* What t holds from index from on joins its context's open epoch in the
 * quarantine, which gives it back to carve (t->lock held). Joining a later
 * epoch than the one a buffer waited for is always safe. */
static void hand_over(carve_thread *t, unsigned from, int may_record) {
    uintptr_t ptr[KEEP];
    unsigned n = 0;
    size_t bytes = 0;
    for (unsigned i = from; i != t->tail; i++) {
        ptr[n++] = t->ptr[AT(i)];
        bytes += t->size[AT(i)];
    }
    /* Another thread may do this (under t->lock) while the owner glances at
     * head and tail without it (carve_ctx_alloc): those two are stored
     * atomically. */
    if (from == t->head) {
        t->ready = t->joined = 0;
        __atomic_store_n(&t->head, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&t->tail, 0, __ATOMIC_RELAXED);
        t->g_head = t->ngroups = 0;
    } else {
        __atomic_store_n(&t->tail, from, __ATOMIC_RELAXED);
    }
    t->batch_bytes = 0; /* from is the batch's start or before it */
    t->bytes -= bytes;
    if (n)
        carve_q_join(t->bc->q, ptr, n, bytes, may_record);
}

/* The batch joins its context's open epoch (t->lock held): kept by the
 * thread, to be reused once the epoch completes, or, when the thread holds
 * much already, handed over. */
static void join_batch(carve_thread *t, int may_record) {
    unsigned n = t->tail - t->joined;
    if (!n)
        return;
    if (t->ngroups == KEEP_GROUPS || t->bytes > KEEP_BYTES) {
        hand_over(t, t->joined, may_record);
        return;
    }
    uint64_t seq = carve_q_join_kept(t->bc->q, n, t->batch_bytes, may_record);
    if (seq) {
        unsigned g = (t->g_head + t->ngroups++) % KEEP_GROUPS;
        t->group[g].seq = seq;
        t->group[g].end = t->tail;
        t->joined = t->tail;
    } else { /* the context is gone: its buffers only lose their marks */
        for (unsigned i = t->joined; i != t->tail; i++)
            carve_pending_clear(t->ptr[AT(i)]);
        t->tail = t->joined;
        t->bytes -= t->batch_bytes;
    }
    t->batch_bytes = 0;
}

/* Hand over what t holds (if of only, or of any context for NULL) to its
 * context's quarantine: the batch (TAKE_BATCH) or everything (TAKE_ALL);
 * may_record 0: no driver call, the open epoch just grows. Called by the
 * owner or, under threads_lock, by another thread. */
static void take_batch(carve_thread *t, const carve_ctx *only, int what, int may_record) {
    carve_spin_lock(&t->lock);
    if (t->bc && (!only || t->bc == only))
        hand_over(t, what == TAKE_ALL ? t->head : t->joined, may_record);
    carve_spin_unlock(&t->lock);
}

/* Every thread's batch of c's frees (all contexts' for NULL), or all that
 * threads hold of them, into the quarantines. */
static void take_batches(carve_ctx *c, int what, int may_record) {
    pthread_mutex_lock(&threads_lock);
    for (carve_thread *t = threads; t; t = t->next)
        take_batch(t, c, what, may_record);
    pthread_mutex_unlock(&threads_lock);
}

/* Bytes of c's frees that threads hold. */
static size_t batched_bytes(carve_ctx *c) {
    size_t bytes = 0;
    pthread_mutex_lock(&threads_lock);
    for (carve_thread *t = threads; t; t = t->next) {
        carve_spin_lock(&t->lock);
        if (t->bc == c)
            bytes += t->bytes;
        carve_spin_unlock(&t->lock);
    }
    pthread_mutex_unlock(&threads_lock);
    return bytes;
}

/* ---- contexts and arenas ------------------------------------------------ */

static inline carve_ctx *slot(unsigned i) { return __atomic_load_n(&slots[i], __ATOMIC_ACQUIRE); }

static carve_ctx *find(CUcontext cur) {
    unsigned n = __atomic_load_n(&nctx, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++) {
        carve_ctx *c = slot(i);
        if (__atomic_load_n(&c->ctx, __ATOMIC_ACQUIRE) == cur)
            return c;
    }
    return NULL;
}

/* The context hidden while the driver takes ctx away (table_lock held). */
static carve_ctx *find_going(CUcontext ctx) {
    unsigned n = __atomic_load_n(&nctx, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++) {
        carve_ctx *c = slot(i);
        if (c->hidden && c->going == ctx)
            return c;
    }
    return NULL;
}

/* Whether the driver is taking ctx away right now (table_lock held). */
static int is_dying(CUcontext ctx) {
    for (unsigned i = 0; i < ndying; i++)
        if (dying[i] == ctx)
            return 1;
    return find_going(ctx) != NULL;
}

static void make_arena(carve_ctx *c, CUcontext cur) {
    carve_config cfg;
    if (carve_conf_parse(getenv("CARVE_CONF"), c->device, &cfg) != CARVE_OK) {
        snprintf(c->err, sizeof(c->err), "%s", carve_last_error(NULL)); /* it names CARVE_CONF */
        return;
    }
    char name[48];
    snprintf(name, sizeof(name), "carve-run device %d", c->device);
    cfg.name = name;
    cfg.device = c->device;
    /* The driver backend takes memory in this context through the driver's
     * real entry points (metered against the cap, meter.c): by default in
     * virtual-memory mode, granules of cuMemCreate memory mapped as buffers
     * need them, where the device supports it; segments from cuMemAlloc
     * with vmm=0 (--mode segments), or where it does not. */
    cfg.backend = CARVE_BACKEND_CUDA_DRIVER;
    if (carve_arena_create(&cfg, &c->arena) != CARVE_OK) {
        c->arena = NULL;
        snprintf(c->err, sizeof(c->err), "%s", carve_last_error(NULL));
        return;
    }
    if (!(c->q = carve_q_create(c->arena, cur))) {
        snprintf(c->err, sizeof(c->err), "no memory for the quarantine of unordered frees");
        carve_arena_destroy(c->arena);
        c->arena = NULL;
    }
}

/* Streams made in a context whose state could not be made then (it was
 * going: another thread releasing its retain of a primary context that
 * stays), handed to the quarantine made for it later (table_lock). */
typedef struct orphan {
    CUcontext ctx;
    carve_stream s;
    unsigned flags;
} orphan;
static orphan *orphans;
static size_t norphans, cap_orphans;

/* Give c's quarantine the streams made in its context before it existed
 * (table_lock held). */
static void adopt_orphans(carve_ctx *c, CUcontext cur) {
    for (size_t i = 0; i < norphans;) {
        if (orphans[i].ctx == cur) {
            carve_q_stream_created(c->q, orphans[i].s, (orphans[i].flags & CU_STREAM_NON_BLOCKING) != 0);
            orphans[i] = orphans[--norphans];
        } else {
            i++;
        }
    }
}

/* A new context's state, in the first slot of a gone context or a new
 * one (table_lock held). NULL when MAX_CTX contexts are alive at once or
 * host memory is short. */
static carve_ctx *make(CUcontext cur) {
    unsigned n = nctx, i = 0;
    while (i < n && (__atomic_load_n(&slot(i)->ctx, __ATOMIC_ACQUIRE) || slot(i)->hidden))
        i++;
    carve_ctx *c = i < MAX_CTX ? calloc(1, sizeof(*c)) : NULL;
    if (!c)
        return NULL;
    CUdevice dev = 0;
    real.CtxGetDevice(&dev);
    c->device = (int)dev;
    c->seq = nmade++;
    CUcontext cached = me.ctx;
    me.ctx = NULL; /* every call of this thread meanwhile reaches lookup */
    me.making = 1;
    make_arena(c, cur);
    if (c->q && norphans)
        adopt_orphans(c, cur);
    me.making = 0;
    me.ctx = cached;
    c->ctx = cur;
    if (i < n) { /* the gone context keeps its figures for the report */
        carve_ctx *old = slot(i);
        old->retired_next = retired;
        __atomic_store_n(&retired, old, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&slots[i], c, __ATOMIC_RELEASE);
    if (i == n)
        __atomic_store_n(&nctx, n + 1, __ATOMIC_RELEASE);
    return c;
}

/* The state of context cur, made on first use (not while the driver is
 * taking cur away); cached for the thread. While the thread makes an arena,
 * carve's own backend may reach the hooks (in virtual-memory mode it is the
 * CUDA runtime, whose driver functions came through the interposer's
 * cuGetProcAddress, that asks cuMemGetInfo): those calls are the driver's,
 * never served here, and never wait for table_lock, which this thread
 * holds. */
static NOINLINE carve_ctx *lookup(CUcontext cur) {
    if (CARVE_UNLIKELY(me.making || forked))
        return NULL;
    unsigned gen = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
    carve_ctx *c = find(cur);
    if (!c) {
        pthread_mutex_lock(&table_lock);
        c = find(cur);
        if (!c && !is_dying(cur))
            c = make(cur);
        pthread_mutex_unlock(&table_lock);
        if (!c)
            return NULL;
    }
    me.ctx = cur;
    me.c = c;
    me.gen = gen;
    return c;
}

static inline carve_ctx *current(void) {
    if (CARVE_UNLIKELY(!__atomic_load_n(&real_ok, __ATOMIC_ACQUIRE))) {
        pthread_once(&real_once, find_real);
        if (!__atomic_load_n(&real_ok, __ATOMIC_ACQUIRE))
            return NULL;
    }
    CUcontext cur = NULL;
    if (real.CtxGetCurrent(&cur) != CUDA_SUCCESS || !cur)
        return NULL;
    if (CARVE_LIKELY(me.ctx == cur && me.gen == __atomic_load_n(&generation, __ATOMIC_ACQUIRE)))
        return me.c;
    return lookup(cur);
}

carve_ctx *carve_ctx_current(void) { return current(); }

int carve_ctx_thread_ready(void) {
    return me.ctx && me.gen == __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
}

/* The context whose arena has ptr as a live buffer, with its size and
 * stream: first the one that owned this thread's last freed buffer. */
/* The contexts' walk, when the hint did not own ptr. */
static NOINLINE __attribute__((cold)) carve_ctx *owner_walk(uintptr_t ptr, size_t *size, carve_stream *own) {
    unsigned gen = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
    carve_ctx *hint = me.hint_gen == gen ? me.hint : NULL;
    unsigned n = __atomic_load_n(&nctx, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++) {
        carve_ctx *c = slot(i);
        if (c != hint && c->arena && __atomic_load_n(&c->ctx, __ATOMIC_ACQUIRE) &&
            carve_buffer_info(c->arena, (void *)ptr, size, own) == CARVE_OK) {
            me.hint = c;
            me.hint_gen = gen;
            return c;
        }
    }
    return NULL;
}

static ALWAYS_INLINE carve_ctx *owner(uintptr_t ptr, size_t *size, carve_stream *own) {
    carve_ctx *hint = me.hint;
    if (CARVE_LIKELY(hint && me.hint_gen == __atomic_load_n(&generation, __ATOMIC_ACQUIRE) &&
                     carve_buffer_info(hint->arena, (void *)ptr, size, own) == CARVE_OK))
        return hint;
    return owner_walk(ptr, size, own);
}

carve_ctx *carve_ctx_owner(uintptr_t ptr) { return owner(ptr, NULL, NULL); }

int carve_ctx_contains(uintptr_t ptr) {
    unsigned n = forked ? 0 : __atomic_load_n(&nctx, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++) {
        carve_ctx *c = slot(i);
        if (c->arena && __atomic_load_n(&c->ctx, __ATOMIC_ACQUIRE) && carve_arena_contains(c->arena, (void *)ptr))
            return 1;
    }
    return 0;
}

int carve_ctx_vmm_device(uintptr_t ptr) {
    unsigned n = forked ? 0 : __atomic_load_n(&nctx, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++) {
        carve_ctx *c = slot(i);
        carve_config cfg;
        if (c->arena && __atomic_load_n(&c->ctx, __ATOMIC_ACQUIRE) && carve_arena_contains(c->arena, (void *)ptr) &&
            carve_arena_get_config(c->arena, &cfg) == CARVE_OK && cfg.vmm == 1)
            return c->device;
    }
    return -1;
}

int carve_ctx_device(const carve_ctx *c) { return c->device; }
carve_arena *carve_ctx_arena(const carve_ctx *c) { return c->arena; }
const char *carve_ctx_last_error(const carve_ctx *c) { return c->err; }

/* Nothing is served from c from now on: every thread looks its context up
 * again and finds none (table_lock held). */
static void hide(carve_ctx *c) {
    __atomic_store_n(&c->ctx, NULL, __ATOMIC_RELEASE);
    __atomic_add_fetch(&generation, 1, __ATOMIC_RELEASE);
}

void carve_ctx_count_live(carve_ctx *c, ptrdiff_t bytes) {
    if (bytes < 0) { /* never below 0: a free racing the context's end finds it 0 already */
        size_t cur = __atomic_load_n(&c->n.live, __ATOMIC_RELAXED), less = (size_t)-bytes;
        while (!__atomic_compare_exchange_n(&c->n.live, &cur, cur > less ? cur - less : 0, 1, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED)) {
        }
        return;
    }
    size_t now = __atomic_add_fetch(&c->n.live, (size_t)bytes, __ATOMIC_RELAXED);
    size_t peak = __atomic_load_n(&c->n.live_peak, __ATOMIC_RELAXED);
    while (now > peak &&
           !__atomic_compare_exchange_n(&c->n.live_peak, &peak, now, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

/* c's context is gone (hidden already or not; table_lock held). The driver
 * freed the context's memory itself, but not what belongs to no context:
 * the granules of virtual-memory mode go back now. The arena's records are
 * kept for the report but nothing is handed out from them again, and the
 * buffers waiting to go back to it lose their pending marks (the driver may
 * hand the same addresses to another context). */
static void forget(carve_ctx *c) {
    hide(c);
    c->hidden = 0; /* its slot may be taken */
    c->going = NULL;
    if (c->q) {
        carve_q_gone(c->q);
        take_batches(c, TAKE_ALL, 0); /* joined to a gone quarantine: marks cleared */
    }
    carve_arena_abandon(c->arena);
    __atomic_store_n(&c->n.live, 0, __ATOMIC_RELAXED); /* the driver freed what the program held */
}

/* The driver destroys or resets ctx (hide_now) or may reset it (a primary
 * context's release): no arena is made for the handle until the call is
 * over, and with hide_now nothing is served from its arena meanwhile. What
 * waits for it stays until the call succeeded: a call that fails leaves the
 * context as it was, and carve too. */
void carve_ctx_going(struct CUctx_st *ctx, int hide_now) {
    if (forked || !ctx)
        return;
    pthread_mutex_lock(&table_lock);
    carve_ctx *c = hide_now ? find(ctx) : NULL;
    if (c) { /* marked on itself: found again however many contexts go at once */
        hide(c);
        c->hidden = 1;
        c->going = ctx;
    }
    if (ndying < MAX_DYING)
        dying[ndying++] = ctx;
    pthread_mutex_unlock(&table_lock);
}

void carve_ctx_settled(struct CUctx_st *ctx, int freed) {
    if (forked || !ctx)
        return;
    pthread_mutex_lock(&table_lock);
    for (unsigned i = 0; i < ndying; i++)
        if (dying[i] == ctx) {
            dying[i] = dying[--ndying];
            break;
        }
    carve_ctx *hidden = find_going(ctx);
    if (freed) { /* before an arena can be made for the handle again */
        /* Streams made while it went went with it (the driver destroys a
         * context's streams): a new context behind the same handle must not
         * take them on. */
        for (size_t i = 0; i < norphans;)
            if (orphans[i].ctx == ctx)
                orphans[i] = orphans[--norphans];
            else
                i++;
        if (hidden)
            forget(hidden);
        carve_ctx *c = find(ctx); /* not hidden (a release), or made meanwhile past MAX_DYING */
        if (c)
            forget(c);
        carve_meter_ctx_gone(ctx);
    } else if (hidden) { /* the driver refused: served as before */
        hidden->hidden = 0;
        hidden->going = NULL;
        __atomic_store_n(&hidden->ctx, ctx, __ATOMIC_RELEASE);
        __atomic_add_fetch(&generation, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&table_lock);
}

/* ---- allocation and free ------------------------------------------------ */

int carve_ctx_sample(void) {
    unsigned left = me.sample;
    if (CARVE_UNLIKELY(left == 0)) /* a new thread starts anywhere in the period, so */
        left = 1 + (unsigned)((((uintptr_t)&me >> 4) * 2654435761u) % SAMPLE_EVERY); /* its first call is not always timed */
    if (CARVE_LIKELY(--left != 0)) {
        me.sample = left;
        return 0;
    }
    me.sample = SAMPLE_EVERY;
    return 1;
}

void carve_ctx_add_time(carve_ctx *c, uint64_t ns) {
    __atomic_add_fetch(&c->n.ns_in_carve, ns * SAMPLE_EVERY, __ATOMIC_RELAXED);
}

/* Groups of t's frees whose epochs have completed become reusable (t->lock
 * held). */
static void promote(carve_thread *t) {
    uint64_t done = carve_q_done(t->bc->q);
    while (t->ngroups && t->group[t->g_head].seq <= done) {
        t->ready = t->group[t->g_head].end;
        t->g_head = (t->g_head + 1) % KEEP_GROUPS;
        t->ngroups--;
    }
}

/* Reusable buffers of t's own frees go back to carve (t->lock held). */
static void give_back_ready(carve_thread *t) {
    if (t->head == t->ready || !carve_capture_may_record()) /* a free could record an event */
        return;
    carve_arena *a = t->bc->arena;
    carve_pending_release_begin();
    unsigned h = t->head;
    for (; h != t->ready; h++) {
        uintptr_t p = t->ptr[AT(h)];
        t->bytes -= t->size[AT(h)];
        (void)carve_free(a, (void *)p);
        carve_pending_clear(p);
    }
    /* Another thread may do this (alloc_grow) while the owner glances at
     * head without the lock. */
    __atomic_store_n(&t->head, h, __ATOMIC_RELAXED);
    carve_pending_release_end();
}

/* What threads other than self keep of c's frees: the buffers whose
 * epochs completed go back to carve, the others (waiting for their epochs,
 * or in a batch) join the open epoch, which carve_q_make_room may give back
 * at once. A thread that has stopped calling (a backward pass's thread
 * during the forward pass) otherwise keeps them until its own next call.
 * All of it for an allocation that would grow the arena; with quiet (a
 * look, which never waits for threads_lock), only what threads keep that
 * made no look of their own since another thread's look last saw them
 * (fewer than 2 * POLL_EVERY calls while self made POLL_EVERY): left out
 * of carve until the arena would grow, those buffers made the allocations
 * meanwhile go elsewhere and cut up the free memory. Returns the bytes
 * taken. */
static NOINLINE size_t take_from_others(carve_ctx *c, const carve_thread *self, int quiet) {
    size_t taken = 0;
    if (quiet ? pthread_mutex_trylock(&threads_lock) != 0 : pthread_mutex_lock(&threads_lock) != 0)
        return 0;
    for (carve_thread *t = threads; t; t = t->next) {
        if (t == self)
            continue;
        carve_spin_lock(&t->lock);
        if (t->bc == c && t->head != t->tail && (!quiet || t->looks == t->looks_seen)) {
            size_t had = t->bytes;
            if (t->ngroups)
                promote(t);
            give_back_ready(t);
            hand_over(t, t->head, 1);
            taken += had - t->bytes;
        }
        if (quiet)
            t->looks_seen = t->looks;
        carve_spin_unlock(&t->lock);
    }
    pthread_mutex_unlock(&threads_lock);
    return taken;
}

/* Every POLL_EVERY calls of a thread: take what other threads that have
 * stopped calling keep of c's frees (take_from_others), give back what has
 * completed, join the thread's batch to the epoch if no free joined it
 * since the last time (a thread that stopped freeing does not keep its
 * frees out of epochs), and give back to carve its reusable buffers if
 * none was reused since the last time. */
static NOINLINE void look_around(carve_ctx *c) {
    carve_thread *t = me.t;
    enter_carve(t);
    if (__atomic_load_n(&nthreads, __ATOMIC_RELAXED) > 1 && __atomic_load_n(&c->batched, __ATOMIC_RELAXED))
        (void)take_from_others(c, t, 1);
    if (t && t->bc) {
        carve_spin_lock(&t->lock);
        t->looks++;
        if (me.reused == me.reused_seen)
            give_back_ready(t);
        if (me.batched == me.batched_seen)
            join_batch(t, 1);
        if (t->ngroups)
            promote(t);
        carve_spin_unlock(&t->lock);
    }
    me.batched_seen = me.batched;
    me.reused_seen = me.reused;
    carve_q_poll(c->q);
    leave_carve(t);
}

static inline void poll_now_and_then(carve_ctx *c) {
    if (CARVE_UNLIKELY((++me.tick & (POLL_EVERY - 1)) == 0))
        look_around(c);
}

/* Take a reusable buffer of size bytes from t (t->lock held), or 0: the
 * first REUSE_SCAN ones are looked at, then, if none fits, those of groups
 * whose epochs have completed since. */
static NOINLINE uintptr_t reuse_search(carve_thread *t, size_t size) {
    for (int pass = 0; pass < 2; pass++) {
        if (pass && (!t->ngroups || (promote(t), t->head == t->ready)))
            break;
        unsigned end = t->ready - t->head > REUSE_SCAN ? t->head + REUSE_SCAN : t->ready;
        for (unsigned i = t->head; i != end; i++)
            if (t->size[AT(i)] == size) {
                uintptr_t p = t->ptr[AT(i)];
                t->ptr[AT(i)] = t->ptr[AT(t->head)];
                t->size[AT(i)] = t->size[AT(t->head)];
                t->head++;
                t->bytes -= size;
                return p;
            }
    }
    return 0;
}

/* A buffer of size bytes from t's own frees whose epochs completed (c's,
 * allocated on the default stream), or 0. The next one in line is the
 * one asked for when a program allocates and frees the same sizes. */
static inline uintptr_t reuse(carve_thread *t, size_t size) {
    uintptr_t p;
    carve_spin_lock(&t->lock);
    unsigned h = AT(t->head);
    if (CARVE_LIKELY(t->head != t->ready && t->size[h] == size)) {
        p = t->ptr[h];
        t->head++;
        t->bytes -= size;
    } else {
        p = reuse_search(t, size);
    }
    carve_spin_unlock(&t->lock);
    if (p) {
        carve_pending_clear(p); /* live again */
        me.reused++;
    }
    return p;
}

/* carve_alloc failed with st: unless try_only, wait for the memory that
 * waits for the device and try once more. */
static NOINLINE int alloc_failed(carve_ctx *c, carve_thread *t, carve_status st, size_t size, carve_stream stream,
                                 int try_only, uintptr_t *out) {
    void *p = NULL;
    if (try_only)
        return st == CARVE_ERR_OOM ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_UNKNOWN;
    if (st == CARVE_ERR_OOM && (__atomic_load_n(&c->batched, __ATOMIC_RELAXED) || carve_q_busy(c->q))) {
        /* Memory waiting for the device may be all that is missing. */
        take_batches(c, TAKE_ALL, 1);
        carve_q_drain(c->q);
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
    count(t, c, stream ? ASYNC_ALLOCS : ALLOCS);
    return CUDA_SUCCESS;
}

/* An allocation from what the arena holds failed with st: the arena would
 * have to grow. First what this thread keeps that nobody reused goes back,
 * then the quarantine's epochs the device is done with, then what other
 * threads keep (take_from_others) and the epochs once more,
 * oldest first, waiting for the oldest while the closed epochs hold more
 * than a sliver of the arena (1 / ROOM_SLACK_DIV of what it holds): memory
 * waiting for a GPU that runs behind then never decides the footprint, and
 * the wait is for work queued long ago, with what was queued after it
 * keeping the device busy. Then the arena grows, in virtual-memory mode in
 * place of free granules the device is done with: the buffers the
 * quarantine held made the arena see a peak of live memory higher than the
 * program's, which its allowance of mapped memory would follow. */
static NOINLINE int alloc_grow(carve_ctx *c, carve_thread *t, carve_status st, size_t size, carve_stream stream,
                               int try_only, uintptr_t *out) {
    void *p = NULL;
    if (st == CARVE_ERR_OOM) {
        if (t && t->bc == c) {
            carve_spin_lock(&t->lock);
            if (t->ngroups)
                promote(t);
            unsigned had = t->ready - t->head;
            give_back_ready(t);
            carve_spin_unlock(&t->lock);
            if (had)
                st = carve_alloc_flags(c->arena, size, stream, CARVE_ALLOC_HELD, &p);
        }
        size_t slack = carve_memory_reserved(c->arena) / ROOM_SLACK_DIV;
        while (st == CARVE_ERR_OOM && carve_q_make_room(c->q, slack))
            st = carve_alloc_flags(c->arena, size, stream, CARVE_ALLOC_HELD, &p);
        if (st == CARVE_ERR_OOM && __atomic_load_n(&c->batched, __ATOMIC_RELAXED) && take_from_others(c, t, 0)) {
            st = carve_alloc_flags(c->arena, size, stream, CARVE_ALLOC_HELD, &p);
            while (st == CARVE_ERR_OOM && carve_q_make_room(c->q, slack))
                st = carve_alloc_flags(c->arena, size, stream, CARVE_ALLOC_HELD, &p);
        }
        if (st == CARVE_ERR_OOM)
            st = carve_alloc_flags(c->arena, size, stream, CARVE_ALLOC_REPLACE, &p);
    }
    if (st != CARVE_OK)
        return alloc_failed(c, t, st, size, stream, try_only, out);
    *out = (uintptr_t)p;
    count(t, c, stream ? ASYNC_ALLOCS : ALLOCS);
    return CUDA_SUCCESS;
}

int carve_ctx_alloc(size_t size, carve_stream stream, int try_only, uintptr_t *out, carve_ctx **cp) {
    carve_ctx *c = *cp = current();
    if (CARVE_UNLIKELY(!c || !c->arena))
        return CARVE_CTX_NOT_SERVED;
    carve_thread *t = thread_self();
    poll_now_and_then(c);
    void *p = NULL;
    if (!stream && t && t->bc == c &&
        __atomic_load_n(&t->head, __ATOMIC_RELAXED) != __atomic_load_n(&t->tail, __ATOMIC_RELAXED) &&
        (p = (void *)reuse(t, size))) {
        *out = (uintptr_t)p;
        count(t, c, ALLOCS);
        return CUDA_SUCCESS;
    }
    if (stream && CARVE_UNLIKELY(__atomic_load_n(&carve_q_reused_handles, __ATOMIC_ACQUIRE)) &&
        carve_q_handle_busy(c->q, stream))
        stream = NULL; /* usable on any stream at once, which is more than asked */
    enter_carve(t);
    carve_status st = carve_alloc_flags(c->arena, size, stream, CARVE_ALLOC_HELD, &p);
    if (CARVE_UNLIKELY(st != CARVE_OK)) {
        int r = alloc_grow(c, t, st, size, stream, try_only, out);
        leave_carve(t);
        return r;
    }
    leave_carve(t);
    *out = (uintptr_t)p;
    count(t, c, stream ? ASYNC_ALLOCS : ALLOCS);
    return CUDA_SUCCESS;
}

/* The thread is to hold c's frees from now on; what it holds of another
 * context's joins that context's epoch first. */
static NOINLINE void rebind(carve_thread *t, carve_ctx *c) {
    take_batch(t, NULL, TAKE_ALL, 1);
    if (!__atomic_load_n(&c->batched, __ATOMIC_SEQ_CST))
        __atomic_store_n(&c->batched, 1, __ATOMIC_SEQ_CST);
    carve_spin_lock(&t->lock);
    t->bc = c; /* empty: only its owner adds */
    carve_spin_unlock(&t->lock);
}

/* Put ptr (marked pending, allocated on the default stream) in the thread's
 * batch; a full batch joins the epoch. */
static ALWAYS_INLINE void batch_add(carve_thread *t, carve_ctx *c, uintptr_t ptr, size_t size) {
    if (CARVE_UNLIKELY(t->bc != c))
        rebind(t, c);
    carve_spin_lock(&t->lock);
    if (CARVE_UNLIKELY(t->tail - t->head == KEEP)) /* no room: all of it joins the quarantine */
        hand_over(t, t->head, 1);
    t->ptr[AT(t->tail)] = ptr;
    t->size[AT(t->tail)] = size;
    t->tail++;
    t->bytes += size;
    t->batch_bytes += size;
    me.batched++;
    if (t->tail - t->joined == BATCH_FREES || t->batch_bytes >= BATCH_BYTES)
        join_batch(t, 1);
    carve_spin_unlock(&t->lock);
}

/* Whether a stream-ordered free (of another thread than the one with slot
 * self) is giving the buffer at ptr back right now. */
static int being_released(uintptr_t ptr, const uintptr_t *self) {
    unsigned n = __atomic_load_n(&nslots, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++)
        if (&releasing[i] != self && __atomic_load_n(&releasing[i], __ATOMIC_ACQUIRE) == ptr)
            return 1;
    return 0;
}

/* ptr was found marked: 1 when a free of it waits or is under way, 0 when
 * not (and, with mark, it is marked now). A quarantine gives buffers back
 * under carve_pending_release_begin (carve_pending_settle waits for it); a
 * stream-ordered free gives its buffer back to carve before clearing its
 * mark, and carve may hand the buffer out again meanwhile, so a mark seen
 * while its slot says so is waited out. Refused only when the mark is seen
 * twice with no such free in between. */
static NOINLINE int settle(uintptr_t ptr, int mark, const uintptr_t *self) {
    for (int quiet = 0;;) {
        int r = carve_pending_settle(ptr, mark);
        if (r != 1)
            return r;
        if (being_released(ptr, self)) {
            quiet = 0;
            sched_yield();
        } else if (quiet++) {
            return 1;
        }
    }
}

static inline void unslot(uintptr_t *slot) {
    if (slot)
        __atomic_store_n(slot, 0, __ATOMIC_RELEASE);
}

/* A free that names no stream, or one that must be kept as such, claimed
 * (marked) unless there was no memory for its mark: into the thread's batch
 * or the quarantine. */
static ALWAYS_INLINE int hold(carve_ctx *c, carve_thread *t, uintptr_t ptr, size_t size, carve_stream own, int claimed) {
    if (CARVE_UNLIKELY(!claimed))
        carve_q_free_now(c->q, ptr); /* no memory for its mark: wait for the device, free it now */
    else if (own || !t)
        carve_q_join(c->q, &ptr, 1, size, 1);
    else
        batch_add(t, c, ptr, size);
    poll_now_and_then(c);
    return CUDA_SUCCESS;
}

static NOINLINE int hold_slow(carve_ctx *c, carve_thread *t, uintptr_t ptr, size_t size, carve_stream own, int claimed) {
    return hold(c, t, ptr, size, own, claimed);
}

/* A stream-ordered free. It claims the buffer as any free does, but holds
 * the mark only until carve has the buffer back, and says so in its
 * thread's slot first: whoever sees the mark sees the slot. */
static NOINLINE int free_ordered(uintptr_t ptr, carve_stream stream, void (*saw)(carve_ctx *, uintptr_t, size_t),
                                 carve_ctx **out) {
    carve_thread *t = thread_self();
    uintptr_t *slot = t && t->slot >= 0 ? &releasing[t->slot] : NULL;
    if (slot)
        __atomic_store_n(slot, ptr, __ATOMIC_RELAXED);
    int m = carve_pending_mark(ptr);
    if (CARVE_UNLIKELY(m == 1) && (m = settle(ptr, 1, slot)) == 1) {
        unslot(slot);
        return CUDA_ERROR_INVALID_VALUE; /* freed already (waiting), or being freed by another call */
    }
    size_t size = 0;
    carve_stream own = NULL;
    carve_ctx *c = owner(ptr, &size, &own);
    if (!c) {
        if (m == 0)
            carve_pending_clear(ptr);
        unslot(slot);
        return CARVE_CTX_NOT_OURS;
    }
    *out = c;
    if (saw)
        saw(c, ptr, size);
    count(t, c, ASYNC_FREES);
    /* On another stream, carve records an event on that stream at the
     * free, which cannot be done while any capture is in progress; the
     * quarantine keeps it then, as a free that names no stream (its epoch
     * waits for every stream), as it does when there is no memory for the
     * record or the record fails. */
    enter_carve(t);
    if (CARVE_LIKELY(stream == own) ||
        (carve_capture_may_record() && carve_record_stream(c->arena, (void *)ptr, stream) == CARVE_OK)) {
        if (!slot) /* no slot to say so: a settle waits on the lock instead */
            carve_pending_release_begin();
        carve_status st = carve_free(c->arena, (void *)ptr);
        if (m == 0 && st == CARVE_OK)
            carve_pending_clear(ptr);
        if (!slot)
            carve_pending_release_end();
        if (CARVE_LIKELY(st == CARVE_OK)) {
            leave_carve(t);
            unslot(slot);
            return CUDA_SUCCESS;
        }
    }
    leave_carve(t);
    unslot(slot); /* from here the mark says: waiting */
    return hold_slow(c, t, ptr, size, own, m == 0);
}

int carve_ctx_free(uintptr_t ptr, int ordered, carve_stream stream, void (*saw)(carve_ctx *, uintptr_t, size_t),
                   carve_ctx **out) {
    *out = NULL;
    if (ptr & (CARVE_ALIGNMENT - 1))
        return CARVE_CTX_NOT_OURS; /* no buffer of carve begins there */
    if (ordered)
        return free_ordered(ptr, stream, saw, out);
    /* Mark it waiting before anything else: of two frees of one buffer,
     * racing or not, stream-ordered or not, exactly one gets the mark. */
    int m = carve_pending_mark(ptr);
    if (CARVE_UNLIKELY(m == 1) && (m = settle(ptr, 1, NULL)) == 1)
        return CUDA_ERROR_INVALID_VALUE; /* freed already (waiting), or being freed by another call */
    size_t size = 0;
    carve_stream own = NULL;
    carve_ctx *c = owner(ptr, &size, &own);
    if (!c) {
        if (m == 0)
            carve_pending_clear(ptr);
        return CARVE_CTX_NOT_OURS;
    }
    *out = c;
    carve_thread *t = thread_self();
    if (saw)
        saw(c, ptr, size);
    count(t, c, FREES);
    return hold(c, t, ptr, size, own, m == 0);
}

int carve_ctx_mem_info(carve_ctx *c, int device, size_t *free_bytes, size_t *total_bytes) {
    if (CARVE_UNLIKELY(!__atomic_load_n(&real_ok, __ATOMIC_ACQUIRE))) {
        pthread_once(&real_once, find_real);
        if (!__atomic_load_n(&real_ok, __ATOMIC_ACQUIRE))
            return CUDA_ERROR_NOT_INITIALIZED;
    }
    size_t f = 0, t = 0;
    CUresult r = real.MemGetInfo(&f, &t);
    if (r != CUDA_SUCCESS)
        return r;
    size_t cap = carve_meter_cap(device);
    size_t total = cap < t ? cap : t;
    /* Held on the device: every context's arenas and everything passed to
     * the driver (the meter's count); what this context's arena holds
     * cached or waiting is the program's to have again. */
    carve_meter_view v;
    carve_meter_get(device, &v);
    size_t can_grow = total > v.bytes ? total - v.bytes : 0;
    if (can_grow > f)
        can_grow = f;
    size_t own = 0;
    if (c && c->arena) {
        carve_stats s;
        carve_get_stats(c->arena, &s);
        own = (s.reserved_bytes > s.allocated_bytes ? s.reserved_bytes - s.allocated_bytes : 0) +
              carve_q_held(c->q) + batched_bytes(c);
    }
    size_t free_now = can_grow + own;
    *free_bytes = free_now < total ? free_now : total;
    *total_bytes = total;
    return CUDA_SUCCESS;
}

/* ---- streams ------------------------------------------------------------ */

void carve_ctx_stream_creating(unsigned flags) {
    if (!(flags & CU_STREAM_NON_BLOCKING) || forked || me.making)
        return;
    carve_ctx *c = carve_ctx_current();
    if (c && c->q)
        carve_q_nonblocking_coming(c->q);
}

void carve_ctx_stream_created(carve_stream s, unsigned flags) {
    if (!s || forked || me.making) /* making: carve's own backend's calls */
        return;
    carve_ctx *c = carve_ctx_current();
    if (c) {
        if (c->q)
            carve_q_stream_created(c->q, s, (flags & CU_STREAM_NON_BLOCKING) != 0);
        return; /* no quarantine: carve serves nothing in this context */
    }
    CUcontext cur = NULL;
    if (!__atomic_load_n(&real_ok, __ATOMIC_ACQUIRE) || real.CtxGetCurrent(&cur) != CUDA_SUCCESS || !cur)
        return;
    pthread_mutex_lock(&table_lock);
    c = find(cur); /* made meanwhile */
    if (!c)
        c = find_going(cur); /* hidden while the driver destroys it: served again if it refuses */
    if (c && c->q) {
        carve_q_stream_created(c->q, s, (flags & CU_STREAM_NON_BLOCKING) != 0);
    } else if (!c) {
        if (norphans == cap_orphans) {
            size_t cap = cap_orphans ? cap_orphans * 2 : 16;
            orphan *o = realloc(orphans, cap * sizeof(*o));
            if (o) {
                orphans = o;
                cap_orphans = cap;
            }
        }
        if (norphans == cap_orphans) { /* no memory to remember it: ordered reuse cannot count on it */
            pthread_mutex_unlock(&table_lock);
            carve_q_mark_unordered("a stream with no room left to track it");
            return;
        }
        orphans[norphans++] = (orphan){cur, s, flags};
    }
    pthread_mutex_unlock(&table_lock);
}

void carve_ctx_stream_destroyed(carve_stream s) {
    if (!forked && !me.making) { /* streams are seldom destroyed */
        pthread_mutex_lock(&table_lock);
        for (size_t i = 0; i < norphans;)
            if (orphans[i].s == s)
                orphans[i] = orphans[--norphans];
            else
                i++;
        pthread_mutex_unlock(&table_lock);
    }
    unsigned n = forked ? 0 : __atomic_load_n(&nctx, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++) {
        carve_ctx *c = slot(i);
        if (!c->q)
            continue;
        /* Buffers in threads' batches were freed before now and may be used
         * by work on s: they join the quarantine first, whose epoch then
         * gets its event on s while s still exists. */
        if (__atomic_load_n(&c->batched, __ATOMIC_SEQ_CST))
            take_batches(c, TAKE_BATCH, 1);
        carve_q_stream_destroyed(c->q, s);
    }
}

void carve_ctx_capture_fence(void) {
    if (forked) /* the flags and locks are the parent's threads' */
        return;
    /* Pairs with the fence in carve_capture_may_record: a thread that set
     * its flag and then found no capture is waited for here. */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    int self = me.t ? me.t->slot : -1;
    unsigned nt = __atomic_load_n(&nslots, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < nt; i++)
        while ((int)i != self && __atomic_load_n(&inside[i], __ATOMIC_ACQUIRE))
            sched_yield();
    unsigned n = __atomic_load_n(&nctx, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++)
        if (slot(i)->q)
            carve_q_fence(slot(i)->q);
}

/* ---- fork ---------------------------------------------------------------- */

/* Around fork: the interposer's process-wide locks are taken before (in the
 * order the rest of this file takes them) and given back after, so that no
 * lock a thread of the parent held is left taken in the child. A child of
 * a process with contexts cannot use them (CUDA's state belongs to the
 * parent) and may not touch what other threads held there (a thread's
 * batch, a quarantine, carve's pools, all behind locks that may be taken
 * for good): it serves nothing, every call goes to the driver, which
 * answers as it does without carve-run. A child of a process that had no
 * context yet is served as usual. */
int carve_ctx_fork(int stage) {
    if (stage == 0) {
        pthread_mutex_lock(&table_lock);
        pthread_mutex_lock(&threads_lock);
        carve_pending_release_begin();
        return 0;
    }
    carve_pending_release_end();
    pthread_mutex_unlock(&threads_lock);
    pthread_mutex_unlock(&table_lock);
    if (stage == 2 && __atomic_load_n(&nctx, __ATOMIC_ACQUIRE)) {
        forked = 1;
        carve_q_forked();
        __atomic_add_fetch(&generation, 1, __ATOMIC_RELEASE); /* every cached context is looked up again */
        return 1;
    }
    return 0;
}

/* ---- report ------------------------------------------------------------- */

static int by_seq(const void *a, const void *b) {
    unsigned x = (*(carve_ctx *const *)a)->seq, y = (*(carve_ctx *const *)b)->seq;
    return x < y ? -1 : x > y;
}

void carve_ctx_each(void (*fn)(carve_arena *arena, int device, const carve_ctx_counts *n, void *arg), void *arg) {
    /* What threads hold: batches join their epochs (no driver call: this
     * runs at exit), and the counts they have not handed over yet are added
     * in (read, not moved: their owners may still be counting). */
    take_batches(NULL, TAKE_ALL, 0);
    /* Every context, gone ones included, in the order they were made (read
     * without table_lock, which a thread making an arena may hold at exit:
     * entries are published whole and never change but for their ctx). */
    carve_ctx *gone = __atomic_load_n(&retired, __ATOMIC_ACQUIRE);
    size_t n = __atomic_load_n(&nctx, __ATOMIC_ACQUIRE), all = n;
    for (carve_ctx *c = gone; c; c = c->retired_next)
        all++;
    carve_ctx **list = malloc((all ? all : 1) * sizeof(*list));
    if (list) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            list[k++] = slot((unsigned)i);
        for (carve_ctx *c = gone; c && k < all; c = c->retired_next)
            list[k++] = c;
        all = k;
        qsort(list, all, sizeof(*list), by_seq);
    }
    for (size_t i = 0; list && i < all; i++) {
        carve_ctx *c = list[i];
        if (!c->arena)
            continue;
        uint64_t k[4] = {0, 0, 0, 0};
        pthread_mutex_lock(&threads_lock);
        for (carve_thread *t = threads; t; t = t->next)
            for (int j = 0; t->nc == c && j < 4; j++)
                k[j] += __atomic_load_n(&t->count[j], __ATOMIC_RELAXED);
        pthread_mutex_unlock(&threads_lock);
        carve_ctx_counts counts;
        counts.allocs = __atomic_load_n(&c->n.allocs, __ATOMIC_RELAXED) + k[ALLOCS];
        counts.frees = __atomic_load_n(&c->n.frees, __ATOMIC_RELAXED) + k[FREES];
        counts.async_allocs = __atomic_load_n(&c->n.async_allocs, __ATOMIC_RELAXED) + k[ASYNC_ALLOCS];
        counts.async_frees = __atomic_load_n(&c->n.async_frees, __ATOMIC_RELAXED) + k[ASYNC_FREES];
        counts.ooms = __atomic_load_n(&c->n.ooms, __ATOMIC_RELAXED);
        counts.passthrough = __atomic_load_n(&c->n.passthrough, __ATOMIC_RELAXED);
        counts.ns_in_carve = __atomic_load_n(&c->n.ns_in_carve, __ATOMIC_RELAXED);
        carve_q_counts(c->q, &counts.epochs, &counts.ordered, &counts.drains, &counts.room_waits, &counts.held_peak);
        counts.unordered_why = carve_q_unordered_why(c->q);
        counts.live = __atomic_load_n(&c->n.live, __ATOMIC_RELAXED);
        counts.live_peak = __atomic_load_n(&c->n.live_peak, __ATOMIC_RELAXED);
        fn(c->arena, c->device, &counts, arg);
    }
    free(list);
}

void carve_ctx_passthrough(carve_ctx *c) {
    if (c)
        __atomic_add_fetch(&c->n.passthrough, 1, __ATOMIC_RELAXED);
}

int carve_ctx_make_room(carve_ctx *c) {
    if (!c || !c->arena || !c->q || carve_capture_active())
        return 0;
    size_t waiting = carve_q_held(c->q) + batched_bytes(c);
    if (!waiting && carve_memory_reserved(c->arena) <= carve_memory_allocated(c->arena))
        return 0; /* nothing cached, nothing waiting: no wait for nothing */
    take_batches(c, TAKE_ALL, 1);
    carve_q_drain(c->q);
    (void)carve_empty_cache(c->arena);
    return 1;
}
