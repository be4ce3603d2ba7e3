/*
 * quarantine.c — a context's frees that name no stream (cuMemFree,
 * cudaFree), held until no work queued before them can touch the memory.
 *
 * cuMemFree / cudaFree name no stream: the driver frees only after all work
 * queued before it, on every stream, has finished (it synchronizes). carve
 * keeps the promise without stalling the device. Freed buffers join the
 * open "epoch" (a batch of a thread's frees at a time, contexts.c); once it
 * holds enough frees or bytes, the epoch is closed by recording one event
 * on the legacy default stream — which completes only after the prior work
 * of every blocking stream — and one on each non-blocking stream the
 * context created (tracked as they are made and destroyed). Every buffer of
 * an epoch was freed before its events were recorded; when they have all
 * completed, the buffers go back to the arena. Closed epochs are looked at
 * when another one closes and now and then from allocations (an event
 * query); an allocation that would otherwise fail waits for every epoch.
 * While any stream is being captured into a graph no event is recorded (it
 * would join the capture) and nothing goes back; frees wait in the open
 * epoch until the capture ends.
 *
 * A destroyed stream's queued work runs on, and no later event on another
 * stream waits for it. So destroying a stream the context created (blocking
 * or not) records one more event on it while it still exists, its "tail",
 * and every epoch closed from then on also waits for every tail recorded
 * before it closed (q->tails, numbered; an epoch keeps the count). A tail
 * that could not be recorded (during a capture) is waited for by
 * synchronizing the context. Destroying a stream also gives back what
 * waits here, recording on that stream while it exists, since a buffer
 * allocated on it goes back to carve with that stream's name (contexts.c
 * first adds what threads hold in their batches); and a stream created with
 * the handle of a destroyed one whose tail has not completed waits for it
 * first: carve keeps cached memory per stream handle, and the new stream
 * must not reuse at once what the old one's work may still touch.
 *
 * An epoch closes after EPOCH_FREES frees per event it records (so a
 * context with many non-blocking streams records no more events per free
 * than one with none), at most EPOCH_FREES_MAX, or after EPOCH_BYTES
 * (EPOCH_BYTES_ORDERED while reuse is ordered).
 * Buffers waiting here keep their pending mark (pending.c) until they are
 * given back, so a second free of one is refused.
 *
 * Ordered reuse. The legacy stream's implicit synchronization orders more
 * than its own work: an event recorded there comes after the earlier work
 * of every blocking stream (per-thread default streams included), and all
 * later work on any of them comes after the event. So where every stream
 * that can touch the arena's memory is blocking -- this context has never
 * had a non-blocking stream, no destroyed stream's work may still run
 * (every tail has completed), the process has one context that carve
 * serves, and nothing has made another context or granted a peer access
 * (carve_q_unordered, set by hooks.c) -- recording that event is enough:
 * whatever work used the buffers freed before it, the work of whoever gets
 * them next is queued after it. An epoch then gives its buffers back as it
 * closes, without waiting for its event to complete (and so do the older
 * epochs still in the ring), and the allocation that would have waited
 * closes the open epoch instead (carve_q_make_room). A PyTorch program with
 * its cache off, whose work is all on the legacy stream, then reuses memory
 * as a stream-ordered allocator does. That event is kept, the context's
 * "barrier": when the first non-blocking stream is made, another context
 * appears or a peer access is granted, the reused memory may meet work that
 * does not wait for it, so the barrier is waited for first (for a
 * non-blocking stream, before the driver makes it: carve_q_nonblocking_coming,
 * so that no other thread is handed, while the stream exists, a buffer
 * whose earlier work is still queued; otherwise carve_q_settle_all, with
 * this thread's capture mode relaxed for the
 * wait; every caller of carve_q_mark_unordered returns only once it is
 * over); from then on epochs complete as above.
 *
 * Epochs are numbered; q->done is the number up to which every epoch has
 * completed. A thread may keep the buffers of a batch it joins
 * (carve_q_join_kept: the epoch counts them and their bytes, holds nothing)
 * and reuse them once q->done reaches the number it was given.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "preload/cutypes.h"
#include "preload/pending.h"
#include "preload/preload.h"

#define EPOCH_FREES 128
#define EPOCH_FREES_MAX 4096
#define EPOCH_BYTES ((size_t)32 << 20)
/* Where reuse is ordered (below) an epoch gives its buffers back as it
 * closes, so its bytes are only how long freed memory stays out of the
 * arena's reach: a large buffer closes its epoch at once. (GPT-2 training
 * with PyTorch's cache off, its recording replayed on the mock driver:
 * 8,810 -> 8,768 MB reserved for a live peak of 8,736 MB, with 13,392
 * epochs instead of 7,801; with epochs of 256 KiB the same. Unordered
 * epochs wait for their events, and 2 MiB ones there made ResNet-50 and
 * the C programs' threads hold more on an H100.) */
#define EPOCH_BYTES_ORDERED ((size_t)2 << 20)
#define MAX_EPOCHS 64 /* closed epochs in flight; past this, wait for the oldest */

typedef struct epoch {
    uint64_t seq;           /* its number: epochs close and complete in this order */
    uintptr_t *ptr;         /* the buffers it gives back */
    size_t n, cap, bytes;   /* bytes: of all its frees, kept ones included */
    size_t kept, kept_bytes; /* frees whose threads keep the buffers (carve_q_join_kept) */
    CUevent *ev;
    unsigned nev, cap_ev;
    uint64_t tails; /* tails recorded when it closed: it waits for all of them */
} epoch;

/* The last event recorded on a destroyed stream (NULL: none could be). */
typedef struct tail {
    CUevent ev;
    carve_stream s;
    int done;
} tail;

struct carve_quarantine {
    pthread_mutex_t lock;
    carve_arena *arena;
    CUcontext ctx;
    int gone;               /* the context was destroyed: nothing is given back */
    epoch cur;              /* collecting frees */
    epoch ring[MAX_EPOCHS]; /* closed, oldest at head */
    unsigned head, count;
    int busy;               /* count || cur.n, for readers without the lock (atomic) */
    size_t held;            /* bytes of the buffers in cur and ring (not kept ones) */
    size_t held_peak;       /* the most held at once */
    uint64_t done;          /* every epoch up to this number has completed (atomic) */
    unsigned quiet_polls;   /* looks at the epochs since frees last joined */
    CUevent *spare;
    unsigned nspare, cap_spare;
    carve_stream *nb; /* non-blocking streams of the context */
    size_t nnb, cap_nb;
    carve_stream *bl; /* blocking streams of the context (the legacy stream waits for them) */
    size_t nbl, cap_bl;
    tail *tail;       /* tails not yet seen complete, oldest first: numbers [tails_done, tails_total) */
    size_t ntail, cap_tail;
    uint64_t tails_total, tails_done;
    carve_stream *reused; /* handles of new streams whose old streams' tails were still running */
    size_t nreused, cap_reused;
    uint64_t epochs, drains, room_waits;
    int nb_ever;           /* a non-blocking stream was made in the context */
    CUevent barrier;       /* the last ordered epoch's event, not yet waited for */
    uint64_t ordered;      /* epochs given back as they closed */
    carve_quarantine *all_next; /* every quarantine (all_lock) */
};

/* Every quarantine made, and how many of their contexts are not gone. */
static pthread_mutex_t all_lock = PTHREAD_MUTEX_INITIALIZER;
static carve_quarantine *all_head;
static unsigned all_live;
int carve_q_unordered;
/* What ended ordered reuse first, for the report (a string constant). */
static const char *unordered_why;
/* carve_q_mark_unordered: settled once every barrier was waited for (a
 * later caller waits on mark_lock until then); fork_child, in a child of a
 * process with contexts, where the parent's locks may be held for good. */
static pthread_mutex_t mark_lock = PTHREAD_MUTEX_INITIALIZER;
static int settled, fork_child;

/* The driver functions this file calls, found through real.c. */
static struct {
    CUresult (*CtxGetCurrent)(CUcontext *);
    CUresult (*CtxPushCurrent)(CUcontext);
    CUresult (*CtxPopCurrent)(CUcontext *);
    CUresult (*CtxSynchronize)(void);
    CUresult (*EventCreate)(CUevent *, unsigned);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventQuery)(CUevent);
    CUresult (*EventSynchronize)(CUevent);
    CUresult (*EventDestroy)(CUevent);
    CUresult (*ThreadExchangeStreamCaptureMode)(int *);
} drv;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;
static int drv_ok;

static void find_drv(void) {
#define R(field, name) CARVE_SET_FN(drv.field, carve_real_driver(name))
    R(CtxGetCurrent, "cuCtxGetCurrent");
    R(CtxPushCurrent, "cuCtxPushCurrent_v2");
    R(CtxPopCurrent, "cuCtxPopCurrent_v2");
    R(CtxSynchronize, "cuCtxSynchronize");
    R(EventCreate, "cuEventCreate");
    R(EventRecord, "cuEventRecord");
    R(EventQuery, "cuEventQuery");
    R(EventSynchronize, "cuEventSynchronize");
    R(EventDestroy, "cuEventDestroy_v2");
    R(ThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode");
#undef R
    drv_ok = drv.CtxGetCurrent && drv.CtxPushCurrent && drv.CtxPopCurrent && drv.CtxSynchronize &&
             drv.EventCreate && drv.EventRecord && drv.EventQuery && drv.EventSynchronize && drv.EventDestroy;
}

carve_quarantine *carve_q_create(carve_arena *arena, struct CUctx_st *ctx) {
    pthread_once(&drv_once, find_drv);
    if (!drv_ok)
        return NULL;
    carve_quarantine *q = calloc(1, sizeof(*q));
    if (!q)
        return NULL;
    pthread_mutex_init(&q->lock, NULL);
    q->arena = arena;
    q->ctx = ctx;
    q->cur.seq = 1;
    /* A second context: memory the first reused in order may meet its work. */
    pthread_mutex_lock(&all_lock);
    q->all_next = all_head;
    all_head = q;
    const char *ordered = getenv("CARVE_RUN_ORDERED"); /* carve-run --no-ordered-reuse: "0" */
    if (ordered && !strcmp(ordered, "0")) {
        const char *none = NULL;
        __atomic_compare_exchange_n(&unordered_why, &none, "--no-ordered-reuse", 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE);
        __atomic_store_n(&carve_q_unordered, 1, __ATOMIC_RELEASE);
    }
    unsigned live = __atomic_add_fetch(&all_live, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_unlock(&all_lock);
    if (live > 1)
        carve_q_mark_unordered("a second context");
    return q;
}

/* ---- driver helpers ----------------------------------------------------- */

/* Make q's context current if it is not; returns 1 if it was pushed. */
static int enter(carve_quarantine *q) {
    CUcontext cur = NULL;
    if (drv.CtxGetCurrent(&cur) == CUDA_SUCCESS && cur == q->ctx)
        return 0;
    return drv.CtxPushCurrent(q->ctx) == CUDA_SUCCESS;
}

static void leave(int pushed) {
    CUcontext popped;
    if (pushed)
        drv.CtxPopCurrent(&popped);
}

/* Wait for everything queued in q's context: 0, or -1 when the driver
 * refused (a capture carve cannot see, a context lost), after which
 * nothing may be counted as done. */
static int synchronize(carve_quarantine *q) {
    int pushed = enter(q);
    CUresult r = drv.CtxSynchronize();
    leave(pushed);
    return r == CUDA_SUCCESS ? 0 : -1;
}

static CUevent take_event(carve_quarantine *q) {
    if (q->nspare)
        return q->spare[--q->nspare];
    CUevent ev = NULL;
    return drv.EventCreate(&ev, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS ? ev : NULL;
}

static void give_event(carve_quarantine *q, CUevent ev) {
    if (q->nspare == q->cap_spare) {
        unsigned cap = q->cap_spare ? q->cap_spare * 2 : 16;
        CUevent *s = realloc(q->spare, cap * sizeof(*s));
        if (!s) {
            drv.EventDestroy(ev);
            return;
        }
        q->spare = s;
        q->cap_spare = cap;
    }
    q->spare[q->nspare++] = ev;
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

/* ---- epochs (lock held) ------------------------------------------------- */

/* Every epoch up to seq has completed: threads may reuse the buffers they
 * kept from those epochs. */
static void completed(carve_quarantine *q, uint64_t seq) {
    if (seq > q->done)
        __atomic_store_n(&q->done, seq, __ATOMIC_RELEASE);
}

/* Give an epoch's buffers back to carve, then drop their pending marks; its
 * kept buffers may be reused by their threads from now on. */
static void release_epoch(carve_quarantine *q, epoch *e) {
    carve_pending_release_begin();
    for (size_t i = 0; i < e->n; i++) {
        (void)carve_free(q->arena, (void *)e->ptr[i]);
        carve_pending_clear(e->ptr[i]);
    }
    carve_pending_release_end();
    for (unsigned i = 0; i < e->nev; i++)
        give_event(q, e->ev[i]);
    q->held -= e->bytes - e->kept_bytes;
    completed(q, e->seq);
    e->n = e->bytes = e->kept = e->kept_bytes = 0;
    e->nev = 0;
}

static int epoch_empty(const epoch *e) { return !e->n && !e->kept; }

/* ---- tails: the last events of destroyed streams (lock held) -------------- */

/* The context was synchronized: every tail has completed. */
static void all_tails_done(carve_quarantine *q) {
    for (size_t i = 0; i < q->ntail; i++)
        q->tail[i].done = 1;
}

/* Forget the completed tails at the front, giving their events back. */
static void drop_done_tails(carve_quarantine *q) {
    size_t k = 0;
    while (k < q->ntail && q->tail[k].done) {
        if (q->tail[k].ev)
            give_event(q, q->tail[k].ev);
        k++;
    }
    if (!k)
        return;
    memmove(q->tail, q->tail + k, (q->ntail - k) * sizeof(tail));
    q->ntail -= k;
    q->tails_done += k;
}

/* Whether every tail numbered below upto has completed (with wait: wait
 * for them). A tail that was never recorded, or whose event fails, is
 * waited for by synchronizing the context. */
static int tails_complete(carve_quarantine *q, uint64_t upto, int wait) {
    for (size_t i = 0; i < q->ntail && q->tails_done + i < upto; i++) {
        tail *t = &q->tail[i];
        if (t->done)
            continue;
        CUresult r = !t->ev ? CUDA_ERROR_UNKNOWN : wait ? drv.EventSynchronize(t->ev) : drv.EventQuery(t->ev);
        if (r == CUDA_ERROR_NOT_READY)
            return 0;
        if (r != CUDA_SUCCESS) {
            if (synchronize(q) != 0)
                return 0;
            all_tails_done(q);
            break;
        }
        t->done = 1;
    }
    drop_done_tails(q);
    return 1;
}

/* Forget the tails that have completed, in order, without waiting. */
static void prune_tails(carve_quarantine *q) {
    for (size_t i = 0; i < q->ntail; i++) {
        tail *t = &q->tail[i];
        if (!t->done && (!t->ev || drv.EventQuery(t->ev) != CUDA_SUCCESS))
            break;
        t->done = 1;
    }
    drop_done_tails(q);
}

/* s is being destroyed: record its tail while it exists. During a capture
 * none can be recorded; later epochs then synchronize the context. */
static void record_tail(carve_quarantine *q, carve_stream s) {
    if (grow((void **)&q->tail, &q->cap_tail, q->ntail + 1, sizeof(tail)) != 0) {
        if (carve_capture_may_record()) /* no room to remember it: wait for the device now */
            synchronize(q);
        return;
    }
    CUevent ev = NULL;
    if (carve_capture_may_record()) {
        int pushed = enter(q);
        if ((ev = take_event(q)) && drv.EventRecord(ev, (CUstream)s) != CUDA_SUCCESS) {
            give_event(q, ev);
            ev = NULL;
        }
        leave(pushed);
    }
    q->tail[q->ntail++] = (tail){ev, s, 0};
    q->tails_total++;
}

/* ---- epochs (lock held), continued ------------------------------------------ */

/* Release the closed epochs whose events (and the tails before them) have
 * completed, oldest first, most of them at most; with wait, waiting for
 * them. Returns how many went back. */
static unsigned release_epochs(carve_quarantine *q, int wait, unsigned most) {
    /* During a capture nothing goes back: a free could make carve record an
     * event on the legacy stream, which would join the capture. */
    if (!carve_capture_may_record())
        return 0;
    unsigned n = 0;
    for (; q->count && n < most; n++) {
        epoch *e = &q->ring[q->head];
        int synced = 0;
        for (unsigned i = 0; i < e->nev; i++) {
            CUresult r = wait ? drv.EventSynchronize(e->ev[i]) : drv.EventQuery(e->ev[i]);
            if (r == CUDA_ERROR_NOT_READY)
                return n;
            if (r != CUDA_SUCCESS) { /* cannot tell: wait for everything instead */
                if (synchronize(q) != 0)
                    return n; /* nor that: it stays */
                all_tails_done(q);
                synced = 1;
                break;
            }
        }
        if (!synced && !tails_complete(q, e->tails, wait))
            return n;
        release_epoch(q, e);
        q->head = (q->head + 1) % MAX_EPOCHS;
        q->count--;
    }
    return n;
}

/* Release the closed epochs that have completed; with wait, all of them. */
static void poll_epochs(carve_quarantine *q, int wait) { (void)release_epochs(q, wait, ~0u); }

/* ---- ordered reuse (lock held) ----------------------------------------- */

/* Whether every stream that can touch the context's memory is blocking, so
 * that an event on the legacy stream orders the work of whoever reuses a
 * buffer after every use before its free. */
static int ordered_now(carve_quarantine *q) {
    if (q->nb_ever || __atomic_load_n(&carve_q_unordered, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&all_live, __ATOMIC_ACQUIRE) != 1)
        return 0;
    if (q->ntail)
        prune_tails(q);
    return q->ntail == 0;
}

/* Close the open epoch with one event on the legacy stream and give back
 * at once its buffers and those of every closed epoch (all freed before the
 * event); the event becomes the barrier. -1 when no event could be
 * recorded (the epoch stays open). Asked only when ordered_now. */
static int close_ordered(carve_quarantine *q) {
    int pushed = enter(q);
    CUevent ev = take_event(q);
    int ok = ev && drv.EventRecord(ev, CU_STREAM_LEGACY) == CUDA_SUCCESS;
    leave(pushed);
    if (!ok) {
        if (ev)
            give_event(q, ev);
        return -1;
    }
    if (q->barrier)
        give_event(q, q->barrier); /* the new one comes after it on the legacy stream */
    q->barrier = ev;
    for (; q->count; q->count--) {
        release_epoch(q, &q->ring[q->head]);
        q->head = (q->head + 1) % MAX_EPOCHS;
    }
    epoch *cur = &q->cur;
    release_epoch(q, cur);
    cur->seq++;
    q->epochs++;
    q->ordered++;
    return 0;
}

/* Wait for the barrier: what was reused in order may meet work that does
 * not wait for the legacy stream from now on. The calling thread's capture
 * mode is relaxed for the wait, so that a capture elsewhere neither forbids
 * nor breaks it. */
static void settle_barrier(carve_quarantine *q) {
    if (!q->barrier || q->gone)
        return;
    int mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    int exchanged = drv.ThreadExchangeStreamCaptureMode && drv.ThreadExchangeStreamCaptureMode(&mode) == CUDA_SUCCESS;
    int pushed = enter(q);
    if (drv.EventSynchronize(q->barrier) != CUDA_SUCCESS)
        drv.CtxSynchronize();
    leave(pushed);
    if (exchanged)
        drv.ThreadExchangeStreamCaptureMode(&mode);
    give_event(q, q->barrier);
    q->barrier = NULL;
    q->drains++;
}

void carve_q_settle_all(void) {
    if (__atomic_load_n(&fork_child, __ATOMIC_ACQUIRE))
        return; /* nothing is served here (contexts.c) */
    pthread_mutex_lock(&all_lock);
    for (carve_quarantine *q = all_head; q; q = q->all_next) {
        pthread_mutex_lock(&q->lock);
        settle_barrier(q);
        pthread_mutex_unlock(&q->lock);
    }
    pthread_mutex_unlock(&all_lock);
}

void carve_q_mark_unordered(const char *why) {
    if (__atomic_load_n(&settled, __ATOMIC_ACQUIRE) || __atomic_load_n(&fork_child, __ATOMIC_ACQUIRE))
        return;
    /* Every caller returns only once the barriers were waited for, not only
     * the first: a second thread's call must not let its work go first. The
     * flag comes first, so that no epoch closes in order after its wait. */
    pthread_mutex_lock(&mark_lock);
    if (!settled) {
        if (!__atomic_load_n(&unordered_why, __ATOMIC_ACQUIRE))
            __atomic_store_n(&unordered_why, why, __ATOMIC_RELEASE);
        __atomic_store_n(&carve_q_unordered, 1, __ATOMIC_RELEASE);
        carve_q_settle_all();
        __atomic_store_n(&settled, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&mark_lock);
}

void carve_q_forked(void) { __atomic_store_n(&fork_child, 1, __ATOMIC_RELEASE); }

/* Close the open epoch: one event on the legacy stream and one on each
 * non-blocking stream. 0 when closed (or empty), -1 when it must stay open
 * (a graph capture is in progress). */
static int close_epoch(carve_quarantine *q) {
    epoch *cur = &q->cur;
    if (epoch_empty(cur))
        return 0;
    if (!carve_capture_may_record())
        return -1;
    if (ordered_now(q) && close_ordered(q) == 0)
        return 0;
    if (q->count == MAX_EPOCHS) { /* too much in flight: wait for the oldest */
        epoch *e = &q->ring[q->head];
        for (unsigned i = 0; i < e->nev; i++)
            drv.EventSynchronize(e->ev[i]);
        poll_epochs(q, 0);
    }
    int pushed = enter(q);
    size_t cap_ev = cur->cap_ev;
    int ok = grow((void **)&cur->ev, &cap_ev, q->nnb + 1, sizeof(CUevent)) == 0;
    cur->cap_ev = (unsigned)cap_ev;
    for (size_t i = 0; ok && i <= q->nnb; i++) {
        CUevent ev = take_event(q);
        if (!ev || drv.EventRecord(ev, i == 0 ? CU_STREAM_LEGACY : (CUstream)q->nb[i - 1]) != CUDA_SUCCESS) {
            if (ev)
                give_event(q, ev);
            ok = 0;
            break;
        }
        cur->ev[cur->nev++] = ev;
    }
    if (!ok) { /* no events: wait for the device, then everything is safe now */
        CUresult r = drv.CtxSynchronize();
        leave(pushed);
        if (r != CUDA_SUCCESS) { /* nor that (a capture carve cannot see): the epoch stays open */
            for (unsigned i = 0; i < cur->nev; i++)
                give_event(q, cur->ev[i]);
            cur->nev = 0;
            return -1;
        }
        all_tails_done(q);
        drop_done_tails(q);
        release_epoch(q, cur);
        cur->seq++; /* what joins from now on waits for what comes next */
        q->drains++;
        return 0;
    }
    leave(pushed);
    cur->tails = q->tails_total;
    /* Move cur into the ring, taking the slot's arrays for the next epoch. */
    unsigned slot = (q->head + q->count) % MAX_EPOCHS;
    epoch spare = q->ring[slot];
    q->ring[slot] = *cur;
    uint64_t seq = cur->seq;
    *cur = spare;
    cur->seq = seq + 1;
    cur->n = cur->bytes = cur->kept = cur->kept_bytes = 0;
    cur->nev = 0;
    q->count++;
    q->epochs++;
    return 0;
}

static int epoch_full(const carve_quarantine *q) {
    size_t frees = EPOCH_FREES * (q->nnb + 1);
    size_t bytes = q->nb_ever || __atomic_load_n(&carve_q_unordered, __ATOMIC_RELAXED) ? EPOCH_BYTES
                                                                                     : EPOCH_BYTES_ORDERED;
    return q->cur.n + q->cur.kept >= (frees < EPOCH_FREES_MAX ? frees : EPOCH_FREES_MAX) || q->cur.bytes >= bytes;
}

/* Buffers of a destroyed context: the driver freed their memory with it,
 * so they only lose their marks. */
static void forget(const uintptr_t *ptr, size_t n) {
    for (size_t i = 0; i < n; i++)
        carve_pending_clear(ptr[i]);
}

/* Say whether anything waits, for carve_q_busy; then unlock. */
static void unlock(carve_quarantine *q) {
    __atomic_store_n(&q->busy, q->count || !epoch_empty(&q->cur), __ATOMIC_RELAXED);
    pthread_mutex_unlock(&q->lock);
}

/* ---- what contexts.c calls ---------------------------------------------- */

void carve_q_join(carve_quarantine *q, const uintptr_t *ptr, size_t n, size_t bytes, int may_record) {
    pthread_mutex_lock(&q->lock);
    epoch *cur = &q->cur;
    if (q->gone) {
        forget(ptr, n);
    } else if (grow((void **)&cur->ptr, &cur->cap, cur->n + n, sizeof(uintptr_t)) != 0) {
        /* No room to remember them: make them safe the slow way. Without
         * driver calls (a thread's exit), keep them forever instead: never
         * handed out again is safe too. */
        if (may_record && synchronize(q) == 0) {
            carve_pending_release_begin();
            for (size_t i = 0; i < n; i++) {
                (void)carve_free(q->arena, (void *)ptr[i]);
                carve_pending_clear(ptr[i]);
            }
            carve_pending_release_end();
            q->drains++;
        }
    } else {
        memcpy(cur->ptr + cur->n, ptr, n * sizeof(uintptr_t));
        cur->n += n;
        cur->bytes += bytes;
        q->held += bytes;
        if (q->held > q->held_peak)
            q->held_peak = q->held;
        q->quiet_polls = 0;
        if (may_record && epoch_full(q) && close_epoch(q) == 0)
            poll_epochs(q, 0); /* the older epochs are likely done by now */
    }
    unlock(q);
}

uint64_t carve_q_join_kept(carve_quarantine *q, size_t n, size_t bytes, int may_record) {
    pthread_mutex_lock(&q->lock);
    uint64_t seq = 0;
    if (!q->gone) {
        seq = q->cur.seq;
        q->cur.kept += n;
        q->cur.kept_bytes += bytes;
        q->cur.bytes += bytes;
        q->quiet_polls = 0;
        if (may_record && epoch_full(q) && close_epoch(q) == 0)
            poll_epochs(q, 0);
    }
    unlock(q);
    return seq;
}

uint64_t carve_q_done(const carve_quarantine *q) { return __atomic_load_n(&q->done, __ATOMIC_ACQUIRE); }

void carve_q_free_now(carve_quarantine *q, uintptr_t ptr) {
    pthread_mutex_lock(&q->lock);
    if (synchronize(q) == 0) /* else never handed out again: safe too */
        (void)carve_free(q->arena, (void *)ptr);
    q->drains++;
    pthread_mutex_unlock(&q->lock);
}

int carve_q_busy(const carve_quarantine *q) { return __atomic_load_n(&q->busy, __ATOMIC_RELAXED); }

void carve_q_poll(carve_quarantine *q) {
    if (!carve_q_busy(q) || pthread_mutex_trylock(&q->lock) != 0)
        return;
    if (!q->gone) {
        poll_epochs(q, 0);
        /* Frees that stopped coming (none joined since the last look): close
         * their epoch now rather than when it is full. */
        if (!q->count && !epoch_empty(&q->cur) && q->quiet_polls++)
            close_epoch(q);
    }
    unlock(q);
}

void carve_q_drain(carve_quarantine *q) {
    pthread_mutex_lock(&q->lock);
    if (!q->gone && (!epoch_empty(&q->cur) || q->count)) {
        close_epoch(q);
        poll_epochs(q, 1);
        q->drains++;
    }
    unlock(q);
}

int carve_q_make_room(carve_quarantine *q, size_t slack) {
    pthread_mutex_lock(&q->lock);
    unsigned n = 0;
    if (!q->gone && (q->cur.n || q->count) && carve_capture_may_record() && ordered_now(q) &&
        close_ordered(q) == 0) {
        n = 1; /* the open epoch and the closed ones are back at once */
    } else if (!q->gone) {
        n = release_epochs(q, 0, ~0u);
        /* The bytes of the closed epochs: waiting for the oldest gives
         * back memory the device finished with long ago, while the work
         * queued after it keeps the device busy. */
        if (!n && q->held - (q->cur.bytes - q->cur.kept_bytes) > slack && (n = release_epochs(q, 1, 1)))
            q->room_waits++;
    }
    unlock(q);
    return n > 0;
}

size_t carve_q_held(carve_quarantine *q) {
    pthread_mutex_lock(&q->lock);
    size_t held = q->held;
    pthread_mutex_unlock(&q->lock);
    return held;
}

const char *carve_q_unordered_why(carve_quarantine *q) {
    pthread_mutex_lock(&q->lock);
    int nb = q->nb_ever;
    pthread_mutex_unlock(&q->lock);
    const char *why = __atomic_load_n(&unordered_why, __ATOMIC_ACQUIRE);
    if (why)
        return why;
    if (nb)
        return "a non-blocking stream";
    return __atomic_load_n(&carve_q_unordered, __ATOMIC_ACQUIRE) ? "another context" : NULL;
}

void carve_q_counts(carve_quarantine *q, uint64_t *epochs, uint64_t *ordered, uint64_t *drains,
                    uint64_t *room_waits, size_t *held_peak) {
    pthread_mutex_lock(&q->lock);
    *epochs = q->epochs;
    *ordered = q->ordered;
    *drains = q->drains;
    *room_waits = q->room_waits;
    *held_peak = q->held_peak;
    pthread_mutex_unlock(&q->lock);
}

/* Wait for the tails recorded on the handle s (lock held); 1 when one is
 * still running and could not be waited for (during a capture, when no
 * wait is allowed). */
static int settle_handle(carve_quarantine *q, carve_stream s) {
    int pending = 0;
    for (size_t i = 0; !q->gone && i < q->ntail; i++) {
        tail *t = &q->tail[i];
        if (t->s != s || t->done)
            continue;
        if (!carve_capture_may_record()) {
            pending = 1;
            break;
        }
        if (!t->ev || drv.EventSynchronize(t->ev) != CUDA_SUCCESS) {
            if (synchronize(q) != 0) {
                pending = 1;
                break;
            }
            all_tails_done(q);
        }
        t->done = 1;
        q->drains++;
    }
    drop_done_tails(q);
    return pending;
}

void carve_q_nonblocking_coming(carve_quarantine *q) {
    pthread_mutex_lock(&q->lock);
    if (!q->nb_ever) {
        q->nb_ever = 1;
        settle_barrier(q);
    }
    pthread_mutex_unlock(&q->lock);
}

void carve_q_stream_created(carve_quarantine *q, carve_stream s, int nonblocking) {
    pthread_mutex_lock(&q->lock);
    if (nonblocking && !q->nb_ever) { /* its work waits for no legacy-stream event */
        q->nb_ever = 1;
        settle_barrier(q);
    }
    /* A handle reused while the work of the stream it named may still run:
     * wait for that stream's tail first, or, during a capture, say so until
     * it can be waited for (carve_q_handle_busy). */
    if (settle_handle(q, s) && grow((void **)&q->reused, &q->cap_reused, q->nreused + 1, sizeof(carve_stream)) == 0) {
        q->reused[q->nreused++] = s;
        __atomic_add_fetch(&carve_q_reused_handles, 1, __ATOMIC_RELEASE);
    }
    carve_stream **list = nonblocking ? &q->nb : &q->bl;
    size_t *n = nonblocking ? &q->nnb : &q->nbl, *cap = nonblocking ? &q->cap_nb : &q->cap_bl;
    if (grow((void **)list, cap, *n + 1, sizeof(carve_stream)) == 0)
        (*list)[(*n)++] = s;
    pthread_mutex_unlock(&q->lock);
}

int carve_q_reused_handles;

int carve_q_handle_busy(carve_quarantine *q, carve_stream s) {
    pthread_mutex_lock(&q->lock);
    int busy = 0;
    for (size_t k = 0; k < q->nreused; k++)
        if (q->reused[k] == s) {
            if (!(busy = settle_handle(q, s))) {
                q->reused[k] = q->reused[--q->nreused];
                __atomic_sub_fetch(&carve_q_reused_handles, 1, __ATOMIC_RELEASE);
            }
            break;
        }
    pthread_mutex_unlock(&q->lock);
    return busy;
}

/* Take s out of list; whether it was there. */
static int forget_stream(carve_stream *list, size_t *n, carve_stream s) {
    for (size_t k = 0; k < *n; k++)
        if (list[k] == s) {
            list[k] = list[--*n];
            return 1;
        }
    return 0;
}

void carve_q_stream_destroyed(carve_quarantine *q, carve_stream s) {
    pthread_mutex_lock(&q->lock);
    if (!forget_stream(q->nb, &q->nnb, s) && !forget_stream(q->bl, &q->nbl, s)) {
        pthread_mutex_unlock(&q->lock); /* another context's stream */
        return;
    }
    if (!q->gone) {
        /* Its work runs on after this: every later epoch waits for it. */
        record_tail(q, s);
        /* A buffer in the quarantine may have been allocated on s, and
         * carve_free records on a buffer's own stream: give back everything
         * in the quarantine while s still exists (a wait, only when frees
         * are pending; streams are seldom destroyed). */
        if ((!epoch_empty(&q->cur) || q->count) && close_epoch(q) == 0) {
            poll_epochs(q, 1);
            q->drains++;
        } else {
            prune_tails(q);
        }
    }
    unlock(q);
}

void carve_q_fence(carve_quarantine *q) {
    pthread_mutex_lock(&q->lock);
    pthread_mutex_unlock(&q->lock);
}

void carve_q_gone(carve_quarantine *q) {
    pthread_mutex_lock(&all_lock);
    pthread_mutex_lock(&q->lock);
    if (!q->gone)
        __atomic_sub_fetch(&all_live, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_unlock(&all_lock);
    q->gone = 1;
    q->barrier = NULL; /* the driver destroys the events with the context */
    forget(q->cur.ptr, q->cur.n);
    q->cur.n = q->cur.bytes = q->cur.kept = q->cur.kept_bytes = 0;
    for (unsigned i = 0; i < q->count; i++) {
        epoch *e = &q->ring[(q->head + i) % MAX_EPOCHS];
        forget(e->ptr, e->n);
        e->n = e->bytes = e->kept = e->kept_bytes = 0;
        e->nev = 0; /* the driver destroys the events with the context */
    }
    q->count = 0;
    q->nspare = 0;
    q->held = 0;
    q->tails_done = q->tails_total; /* the driver destroys the events with the context */
    q->ntail = 0;
    __atomic_sub_fetch(&carve_q_reused_handles, (int)q->nreused, __ATOMIC_RELEASE);
    q->nreused = 0;
    unlock(q);
}
