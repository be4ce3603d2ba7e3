/*
 * types.h — the engine's structures, which every engine file shares; the
 * functions over them are declared by the header of the file that defines
 * them (heap.h, pool.h, vmm.h, ...).
 *
 * An arena has two levels (diagram in docs/design.md):
 *
 *   heap   (one per arena, a mutex, slow paths only)
 *          segments reserved from the backend, tiled by ranges at 2 MiB
 *          granularity; free ranges in a TLSF index; ranges handed to pools
 *          are "spans".
 *   pools  (one per stream, a spinlock, every alloc and free)
 *          spans tiled by blocks at 256-byte granularity; free blocks in two
 *          TLSF indexes (small requests <= 1 MiB live in 2 MiB spans of their
 *          own, so they never fragment the spans of large ones); live blocks
 *          in an address hash.
 *
 * A thread allocating on stream S touches only S's pool, so threads on
 * different streams never contend; the heap is visited only when a pool
 * needs a new span or gives empty ones back. Stream order comes for free
 * inside a pool (everything in it belongs to S); memory crosses to another
 * stream only through the heap, guarded by an event recorded on S when the
 * span was given back.
 *
 * Lock order: pools_lock (pool creation), then pool locks, then the heap
 * lock. Never two pool locks at once, except carve_check, the snapshot, the
 * peak reset and the waiting reclaim, which hold pools_lock and take all
 * pools in list order first.
 * Backend calls that can be slow (reserve, release) run with the heap lock
 * dropped.
 */
#ifndef CARVE_ENGINE_TYPES_H
#define CARVE_ENGINE_TYPES_H

#include "backend/backend.h"
#include "base/lock.h"
#include "engine/blockmap.h"
#include "engine/index.h"
#include "engine/maps.h"
#include "engine/pagemap.h"
#include "engine/slab.h"
#include "engine/streams.h"

#define CARVE_SMALL_MAX ((size_t)1 << 20)          /* requests up to 1 MiB are small */
#define CARVE_SMALL_SPAN CARVE_SEGMENT_GRANULE      /* small spans: 2 MiB */
#define CARVE_MID_MAX ((size_t)10 << 20)           /* large requests under 10 MiB ... */
#define CARVE_MID_SPAN ((size_t)20 << 20)          /* ... share 20 MiB spans */
#define CARVE_MAX_ALLOC ((size_t)1 << 52)          /* 4 PiB: beyond any device */
#define CARVE_AUTO_GROW_MAX ((size_t)64 << 20)     /* automatic growth step cap */
#define CARVE_VMM_VA_STEP ((size_t)64 << 30)      /* address space reserved at a time, at most (virtual-memory
                                                     mode; more when one request needs more) */
/* Virtual-memory mode: mapped bytes may pass the touched peak by a slack,
 * in 1/1024ths, from 2% up to 25% in steps of 1% where a stream remaps
 * faster than its budget (vmm.c); a trim unmaps 2% more than it must. */
#define CARVE_VMM_SLACK_MIN 20
#define CARVE_VMM_SLACK_MAX 256
#define CARVE_VMM_SLACK_STEP 10
#define CARVE_VMM_HYSTERESIS_DIV 50
#define CARVE_VMM_ADOPT_LOOK 32 /* another stream's free blocks looked at, at most, for one that may move */
#define CARVE_VMM_JOIN_LOOK 8   /* blocks looked at on each side of a joint of two streams' spans */
#define CARVE_VMM_IDLE_DIV 4 /* several streams: the arena's budget is at least 1/4 above their touched peak */
/* A request that had to replace free memory at the arena's peak and comes
 * back with the same size at the same touched peak (a loop's step) is
 * mapped without unmapping (vmm.c, carve_vmm_map): the last this many such
 * requests are remembered, the touched peak may have risen by 1/64 at most
 * since, and what repeats add to the arena stays within 1/8 of the rest of
 * its peak. */
#define CARVE_VMM_REPEATS 8
#define CARVE_VMM_REPEAT_DIV 8
#define CARVE_VMM_REPEAT_RISE_DIV 64
/* The budget: one granule unmapped and mapped again per this many
 * allocations of a stream (about 62 us each on an H100: bench/vmm_costs.cu,
 * so at most some 120 ns per operation), counted over windows of CARVE_VMM_WINDOW
 * allocations. */
#define CARVE_VMM_OPS_PER_REMAP 256
#define CARVE_VMM_WINDOW 16384
/* Events a stream keeps recorded to learn, without waiting, which of its
 * free granules the device is done with (vmm.c). */
#define CARVE_VMM_FENCES 8
/* A free records a fence once this many granules were let go and this many
 * frees made since the last one: later trims then find granules known done
 * without waiting (an event costs a microsecond or two). */
#define CARVE_VMM_FENCE_GRANULES 16
/* What one mapping covers where memory comes back into address space used
 * before (holes a trim left): one granule, so that any granule can be
 * unmapped alone. Untouched room at a span's end is mapped in larger
 * pieces instead (vmm.c, maps.h). */
#define CARVE_VMM_PIECE CARVE_SEGMENT_GRANULE
/* Those pieces are at most the stream's touched peak / CARVE_VMM_MAP_DIV
 * (whole granules, at least two): a buffer that later lives in part of a
 * freed mapping keeps at most about 1/128 of the peak mapped that could
 * otherwise go back (the footprint), while a growing training step still
 * maps its large buffers in few calls (vmm.c, map_pieces). */
#define CARVE_VMM_MAP_DIV 128
#define CARVE_VMM_FENCE_FREES 64
/* An allocation polls its pool's pending blocks (freed, waiting for events
 * on the other streams that used them) in free order: past blocks whose
 * streams are busy, up to this many busy streams and this many blocks. */
#define CARVE_PENDING_BUSY 4
#define CARVE_PENDING_WALK 32
#ifndef CARVE_STATS_BATCH /* (a build may set it, to measure its effect) */
#define CARVE_STATS_BATCH ((ptrdiff_t)16 << 20)    /* per-pool counter batching */
#endif

typedef struct carve_segment {
    uintptr_t base;           /* usable range, granule-aligned */
    size_t size;
    uintptr_t raw_base;       /* as the backend returned it */
    size_t raw_size;
    struct carve_segment *prev, *next;
    carve_block *first;       /* first heap range */
    uint64_t serial;
    /* (Virtual-memory mode keeps nothing per granule: what is mapped,
     * touched and let go when is in the pools' blocks, vmm.c.) */
} carve_segment;

typedef struct carve_heap {
    carve_mutex lock;
    carve_index index;        /* free ranges */
    carve_slab slab;          /* heap range records (spans included) */
    carve_segment *segs;
    size_t nsegs;
    size_t reserved;          /* bytes held from the backend (mapped bytes in
                                 virtual-memory mode); every access atomic: vmm.c changes it
                                 without the lock */
    size_t reserved_peak;
    size_t target;            /* virtual-memory mode: mapped bytes always allowed
                                 (the initial amount, or what was mapped after a release) */
    size_t inflight;          /* bytes being reserved, mapped or released with the lock dropped */
    uint64_t nreserve, nrelease;
    uint64_t nmoved;          /* virtual-memory mode: mapped granules moved from one stream to
                                 another without the driver (atomic) */
    uint64_t nwindows;        /* of those moves, windows (alloc.c's vmm_adopt_window; atomic) */
    uint64_t njoins;          /* joins: another stream's free edge or unmapped room taken into the
                                 span next to it (alloc.c's vmm_join; atomic; a join of room
                                 alone moves no mapped granule) */
    uint64_t span_events;     /* empty-span events recorded so far (atomic): each one's number, in
                                 the order they were recorded, is its span's u.r.seq (block.h) */
    size_t vpeak;             /* virtual-memory mode: the most bytes all pools touched at once, as seen
                                 at map time (from the first pool's peak on), the several streams'
                                 budget (vmm.c; atomic; reset by a release) */
    uint64_t nunmap_failed;   /* virtual-memory mode: unmaps the backend refused (atomic, as are
                                 reserved, inflight and the two counts in vmm.c) */
    uint64_t nunmap_nohost;   /* virtual-memory mode: unmaps given up because host memory for
                                 block records ran out (atomic) */
    uint64_t nwaits;          /* host waits for the device: event and device synchronizations (atomic) */
    uint64_t nrecords;        /* events recorded (atomic) */
    uint64_t nqueries;        /* events asked whether they completed (atomic) */
} carve_heap;

typedef struct carve_pool {
    carve_spin lock;
    carve_stream stream;
    struct carve_arena *arena;
    struct carve_pool *next_all;  /* arena's list of pools, append-only */
    carve_index index[2];         /* CARVE_CLASS_SMALL, CARVE_CLASS_LARGE */
    carve_blockmap map;           /* live blocks by address */
    carve_slab slab;              /* block records */
    carve_block *spans;           /* this pool's spans, linked by fprev/fnext */
    size_t nspans;
    carve_block *pending_head, *pending_tail; /* freed, waiting on other streams */
    carve_block *unmapped[2];     /* virtual-memory mode: UNMAPPED blocks per class, unordered */
    size_t npending;
    /* Counters: written under the lock, read relaxed by stats. */
    size_t allocated, requested, allocated_peak, requested_peak;
    ptrdiff_t unflushed_alloc, unflushed_req;
    uint64_t nallocs, nfrees;
    /* The last block freed, not merged yet: an allocation of exactly its
     * size takes it back without touching the index (the loop pattern of
     * inference), and the next free releases it properly. */
    carve_block *hot;
    /* Ordered index (virtual-memory mode): the address of the last hot block
     * found to be the lowest free place for its size, and the index's gen
     * then. While both still match, carve_alloc hands hot out without
     * looking again (an alloc+free loop changes neither). */
    uintptr_t hot_low;
    uint64_t hot_low_gen;
    /* The span that emptied last and has no event yet: the event is
     * recorded only when another span empties, or the span leaves the pool,
     * since the next allocation usually takes the span right back. */
    carve_block *unrecorded;
    uint64_t vclock;              /* virtual-memory mode: granules let go so far */
    /* Virtual-memory mode: events recorded on the stream (oldest first, a
     * ring), each with the clock when it was recorded; vdone: every granule
     * stamped at or before it was let go before work the device has done. */
    struct carve_vfence {
        void *ev;
        uint64_t clock;
    } vfence[CARVE_VMM_FENCES];
    unsigned vfence_head, vfence_n;
    uint64_t vdone;
    uint64_t vfence_clock, vfence_frees; /* the clock and free count when a fence was last recorded */
    unsigned vslack;              /* virtual-memory mode: this pool's slack, in 1/1024ths of its
                                     touched peak (pool lock; read atomically) */
    uint64_t vremapped;           /* ... granules it unmapped to map others in this window */
    uint64_t vwindow_at;          /* ... its allocation count when the window began */
    /* Virtual-memory mode, maps asked to replace free memory (carve_vmm_map;
     * pool lock; cleared where touched_peak is reset with the pools locked):
     * the last CARVE_VMM_REPEATS requests whose map had to unmap free
     * granules (a ring), each its size in granules and the pool's touched
     * peak then, and the bytes that such requests coming back added above
     * the arena's peak. */
    struct carve_vrepeat {
        size_t granules, touched_peak;
    } vrepeat[CARVE_VMM_REPEATS];
    unsigned vrepeat_next;
    size_t vrepeat_added;
    size_t touched;               /* virtual-memory mode: granules of this pool's spans that live or
                                     pending blocks touch (pool lock; read atomically) */
    size_t touched_peak;          /* its peak since creation or the last release: its allowance while
                                     it is the only pool (pool lock; read atomically) */
    /* A graph pool (graph.c): private to the graphs captured into it until
     * released. Its memory never leaves it meanwhile: no span goes back to
     * the heap, nothing is unmapped, and no event is recorded for it. */
    int graph;                    /* 1 from carve_graph_pool_create to its release (atomic) */
    int routed;                   /* allocations on `route` come here now (pools_lock; read atomically) */
    carve_stream route;           /* the program's stream routed here (now or last) */
} carve_pool;

#define CARVE_MAX_ROUTES 16 /* streams routed to graph pools at once, per arena */

typedef struct carve_pool_table carve_pool_table;

struct carve_arena {
    uint64_t id;                 /* unique per arena ever created (never 0) */
    uint64_t cache_id;           /* what threads' pool caches name the arena by (pool.h): its id, and a
                                    new value whenever a stream's routing changes (graph.c), so that
                                    no thread keeps a stream's old pool (atomic) */
    carve_config cfg;            /* as given, name pointing at name[] */
    char name[64];
    size_t limit;                /* resolved; SIZE_MAX when unlimited (written under the heap lock by
                                    carve_set_limit; read atomically where that lock is not held) */
    size_t limit_over;           /* what was reserved when carve_set_limit lowered the limit below it
                                    (live buffers held it): reserved stays at or below the larger of
                                    the two (carve_check); 0 otherwise */
    size_t initial;              /* resolved, granule-aligned */
    size_t min_grow;
    int growth;
    int vmm;                     /* virtual-memory mode */
    int abandoned;               /* atomic: carve_arena_abandon was called */
    size_t small_max;            /* requests up to this are small: CARVE_SMALL_MAX, or 0 in
                                    virtual-memory mode, where one address-ordered region per
                                    stream packs buffers of every size (unused granules are
                                    unmapped, so small ones need no spans of their own) */
    size_t va_size;              /* virtual-memory mode: address space reserved first ... */
    size_t va_step;              /* ... and at a time later, when no free range is large enough */
    int multi;                   /* atomic: more than one pool exists (written once) */
    carve_be be;
    /* What is written (the heap, pool creation, the merged counters) sits on
     * cache lines of its own, apart from what every allocation and free
     * reads (the fields above, multi, pmap): threads on other streams must
     * not lose those lines each time one of them flushes its counters. */
    carve_heap heap __attribute__((aligned(64)));
    /* Pools by stream: lock-free lookup, creation under pools_lock. */
    carve_mutex pools_lock __attribute__((aligned(64)));
    carve_pool_table *table;     /* atomic */
    carve_pool_table *retired;   /* outgrown tables, freed with the arena */
    carve_pool *null_pool;       /* the default stream's pool (atomic) */
    carve_pool *pools;           /* list head (atomic) */
    size_t npools;               /* atomic */
    /* Streams routed to graph pools (graph.c), under pools_lock; nroutes
     * is read atomically by pool lookups, which consult the table only
     * when it is not 0. */
    struct carve_route {
        carve_stream stream;
        carve_pool *pool;
    } routes[CARVE_MAX_ROUTES];
    unsigned nroutes;
    /* Arena-wide counters merged from pools in batches (only once multi). */
    size_t g_alloc __attribute__((aligned(64)));
    size_t g_req, g_alloc_peak, g_req_peak;
    uint64_t nooms;
    uint64_t nretries;           /* allocations retried at the out-of-memory callback's answer */
    /* The out-of-memory callback and its argument (carve_set_oom_callback),
     * written and read together under oom_lock, as are: how many times it
     * was set (each call of it knows which setting it called), the calls in
     * progress on any thread, and how many threads wait in
     * carve_set_oom_callback for older calls to return (oom_done). */
    carve_mutex oom_lock;
    carve_cond oom_done;
    carve_oom_fn oom_fn;
    void *oom_user;
    uint64_t oom_gen;
    struct carve_oom_call *oom_calls;
    unsigned oom_waiters;
    carve_pagemap pmap __attribute__((aligned(64)));
    carve_maps maps;             /* virtual-memory mode: mappings larger than a granule (maps.h) */
};

/* Why no event may be recorded on s while a stream capture is underway
 * (carve_event_record_why): the record would join the graph (s itself is
 * being captured), or the legacy stream while a blocking stream of the
 * context is captured (the record would join that capture implicitly,
 * which breaks it). */
enum { CARVE_REC_CAPTURED = 1, CARVE_REC_LEGACY = 2 };

/* Events recorded and asked about, and the host's waits for the device:
 * every one goes through one of these, so that carve_stats counts them
 * (num_event_records, num_event_queries, num_syncs). carve_event_record_why
 * also says, in *capture (0 otherwise), when the record was refused because
 * of a capture (CARVE_REC_*), which a free may then defer (alloc.c). */
static inline carve_status carve_event_record_why(carve_arena *a, carve_stream s, void **ev, int *capture) {
    *capture = 0;
    if (CARVE_UNLIKELY(carve_stream_made_up(s))) { /* a thread's per-thread stream, a graph pool (streams.h) */
        if (s != carve_thread_stream()) {
            *ev = NULL;
            carve_backend_fail("%s", ((uintptr_t)s & CARVE_KEY_MASK) == CARVE_KEY_GRAPH
                                         ? "no event is recorded for a graph pool"
                                         : "an event on another thread's per-thread default stream cannot "
                                           "be recorded from this thread");
            return CARVE_ERR_BACKEND;
        }
        s = CARVE_STREAM_PER_THREAD;
    }
    if (a->be.ops->capturing && a->be.ops->capturing(&a->be, s) > 0) {
        *ev = NULL;
        *capture = CARVE_REC_CAPTURED;
        carve_backend_fail("no event is recorded on a stream being captured");
        return CARVE_ERR_BACKEND;
    }
    if (carve_stream_legacy(s) && a->be.ops->context_capturing && a->be.ops->context_capturing(&a->be)) {
        *ev = NULL;
        *capture = CARVE_REC_LEGACY;
        carve_backend_fail("no event is recorded on the legacy stream while a stream capture is underway");
        return CARVE_ERR_BACKEND;
    }
    __atomic_add_fetch(&a->heap.nrecords, 1, __ATOMIC_RELAXED);
    return a->be.ops->event_record(&a->be, s, ev);
}

static inline carve_status carve_event_record(carve_arena *a, carve_stream s, void **ev) {
    int capture;
    return carve_event_record_why(a, s, ev, &capture);
}

/* 1 when the work before ev has completed, 0 when not yet. */
static inline int carve_event_query(carve_arena *a, void *ev) {
    __atomic_add_fetch(&a->heap.nqueries, 1, __ATOMIC_RELAXED);
    return a->be.ops->event_query(&a->be, ev);
}

static inline carve_status carve_wait_event(carve_arena *a, void *ev) {
    __atomic_add_fetch(&a->heap.nwaits, 1, __ATOMIC_RELAXED);
    return a->be.ops->event_sync(&a->be, ev);
}

/* 1 when a stream capture is underway, on any thread, that a wait for the
 * whole device (or memory given back to the driver, which may wait for it)
 * would break, as far as carve can ask without naming a stream that may no
 * longer exist: one the backend sees in its context (backend.h,
 * context_capturing), one on a stream routed to a graph pool (alive while
 * routed), on the calling thread's per-thread stream, or on `served`, the
 * stream (pool key) of the call being served (NULL: none; the legacy
 * stream is the context's question). Other pools' streams are not asked
 * about: the program may have destroyed them after freeing their buffers.
 * A backend call per routed pool: slow paths only. */
static inline int carve_capture_underway(carve_arena *a, carve_stream served) {
    const carve_backend_ops *ops = a->be.ops;
    if (ops->context_capturing && ops->context_capturing(&a->be))
        return 1;
    if (!ops->capturing)
        return 0;
    carve_stream mine = carve_thread_stream();
    if (served && served != mine && !carve_stream_made_up(served) && ops->capturing(&a->be, served) > 0)
        return 1;
    for (carve_pool *p = CARVE_LOAD_ACQ(&a->pools); p; p = p->next_all) {
        carve_stream s = p->stream;
        if (CARVE_LOAD(&p->graph)) {
            if (!CARVE_LOAD(&p->routed))
                continue;
            s = CARVE_LOAD(&p->route);
        } else if (s != mine) {
            continue;
        }
        if (carve_stream_made_up(s) && s != mine) /* another thread's per-thread stream: not ours to ask */
            continue;
        if (ops->capturing(&a->be, s == mine ? CARVE_STREAM_PER_THREAD : s) > 0)
            return 1;
    }
    return 0;
}

/* Waits for the whole device, except while a stream capture is underway
 * (carve_capture_underway, served as there): the wait would break it, so
 * none is made and the answer is CARVE_ERR_BACKEND, with a message. */
static inline carve_status carve_wait_device(carve_arena *a, carve_stream served) {
    if (carve_capture_underway(a, served)) {
        carve_backend_fail("the device was not synchronized: a stream capture is underway, which the "
                           "synchronization would break");
        return CARVE_ERR_BACKEND;
    }
    __atomic_add_fetch(&a->heap.nwaits, 1, __ATOMIC_RELAXED);
    return a->be.ops->device_sync(&a->be);
}

#endif
