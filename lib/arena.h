/*
 * arena.h — the engine's internal structures and the contracts between its
 * files.
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
 * lock. Never two pool locks at once, except carve_check, the snapshot and
 * the waiting reclaim, which hold pools_lock and take all pools in list
 * order first.
 * Backend calls that can be slow (reserve, release) run with the heap lock
 * dropped.
 */
#ifndef CARVE_ARENA_H
#define CARVE_ARENA_H

#include "backend.h"
#include "blockmap.h"
#include "index.h"
#include "lock.h"
#include "pagemap.h"

#define CARVE_SMALL_MAX ((size_t)1 << 20)          /* requests up to 1 MiB are small */
#define CARVE_SMALL_SPAN CARVE_SEGMENT_GRANULE      /* small spans: 2 MiB */
#define CARVE_MID_MAX ((size_t)10 << 20)           /* large requests under 10 MiB ... */
#define CARVE_MID_SPAN ((size_t)20 << 20)          /* ... share 20 MiB spans */
#define CARVE_MAX_ALLOC ((size_t)1 << 52)          /* 4 PiB: beyond any device */
#define CARVE_AUTO_GROW_MAX ((size_t)64 << 20)     /* automatic growth step cap */
#define CARVE_VMM_DEFAULT_VA ((size_t)1 << 42)    /* address space when unlimited: 4 TiB */
#define CARVE_STREAM_PER_THREAD ((carve_stream)(uintptr_t)0x2) /* cudaStreamPerThread */
#define CARVE_STATS_BATCH ((ptrdiff_t)16 << 20)    /* per-pool counter batching */

typedef struct carve_segment {
    uintptr_t base;           /* usable range, granule-aligned */
    size_t size;
    uintptr_t raw_base;       /* as the backend returned it */
    size_t raw_size;
    struct carve_segment *prev, *next;
    carve_block *first;       /* first heap range */
    uint64_t serial;
    /* Virtual-memory mode: per 2 MiB granule, the used or pending blocks
     * touching it and whether physical memory is mapped there. */
    size_t ngran;
    uint32_t *gref;
    uint8_t *gmapped;
} carve_segment;

typedef struct carve_heap {
    carve_mutex lock;
    carve_index index;        /* free ranges */
    carve_slab slab;          /* heap range records (spans included) */
    carve_segment *segs;
    size_t nsegs;
    size_t reserved;          /* bytes held from the backend (mapped bytes in
                                 virtual-memory mode); written under lock, read relaxed */
    size_t reserved_peak;
    size_t target;            /* virtual-memory mode: mapped bytes allowed before
                                 free granules must be unmapped first */
    size_t inflight;          /* bytes being reserved or released with the lock dropped */
    uint64_t nreserve, nrelease, serial;
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
    size_t npending;
    /* Counters: written under the lock, read relaxed by stats. */
    size_t allocated, requested, allocated_peak, requested_peak;
    ptrdiff_t unflushed_alloc, unflushed_req;
    uint64_t nallocs, nfrees;
    /* The last block freed, not merged yet: an allocation of exactly its
     * size takes it back without touching the index (the loop pattern of
     * inference), and the next free releases it properly. */
    carve_block *hot;
    /* The span that emptied last and has no event yet: the event is
     * recorded only when another span empties, or the span leaves the pool,
     * since the next allocation usually takes the span right back. */
    carve_block *unrecorded;
} carve_pool;

typedef struct carve_pool_table carve_pool_table;

struct carve_arena {
    uint64_t id;                 /* unique per arena ever created (never 0) */
    carve_config cfg;            /* as given, name pointing at name[] */
    char name[64];
    size_t limit;                /* resolved; SIZE_MAX when unlimited */
    size_t initial;              /* resolved, granule-aligned */
    size_t min_grow;
    int growth;
    int vmm;                     /* virtual-memory mode */
    size_t va_size;              /* virtual-memory mode: address space to reserve */
    carve_be be;
    carve_heap heap;
    /* Pools by stream: lock-free lookup, creation under pools_lock. */
    carve_mutex pools_lock;
    carve_pool_table *table;     /* atomic */
    carve_pool_table *retired;   /* outgrown tables, freed with the arena */
    carve_pool *null_pool;       /* the default stream's pool (atomic) */
    carve_pool *pools;           /* list head (atomic) */
    size_t npools;               /* atomic */
    int multi;                   /* atomic: more than one pool exists */
    /* Arena-wide counters merged from pools in batches (only once multi). */
    size_t g_alloc, g_req, g_alloc_peak, g_req_peak;
    uint64_t nooms;
    carve_pagemap pmap;
};

/* ---- error.c ---- */
/* Record msg as the calling thread's last error for arena a (NULL for
 * arena-less calls) and return st. */
carve_status carve_fail(const carve_arena *a, carve_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4))) CARVE_INTERNAL;
/* Per-thread note of why the heap could not grow, for OOM explanations. */
void carve_note(const char *fmt, ...) __attribute__((format(printf, 1, 2))) CARVE_INTERNAL;
const char *carve_note_get(void) CARVE_INTERNAL;

/* ---- heap.c (heap lock held unless said otherwise) ---- */
carve_status carve_heap_init(carve_arena *a) CARVE_INTERNAL;
/* Release every segment (no lock: the arena is being destroyed). */
void carve_heap_destroy(carve_arena *a) CARVE_INTERNAL;
/* Take a span of class cls of at least need bytes (want if a free range
 * has it) for pool p from a range p may use now. Large spans come from the
 * low end of a range, small ones from the high end, so a stream's large
 * spans stay contiguous and can grow with carve_heap_extend. NULL when
 * none; *st says CARVE_OK (nothing eligible) or CARVE_ERR_OOM (host
 * metadata). */
carve_block *carve_heap_take(carve_arena *a, carve_pool *p, unsigned cls, size_t want, size_t need,
                             carve_status *st) CARVE_INTERNAL;
/* Grow span into the free range right after it, if its stream may use that
 * range and it has at least need bytes (want preferred). Returns the bytes
 * added (0: none). */
size_t carve_heap_extend(carve_arena *a, carve_block *span, size_t need, size_t want) CARVE_INTERNAL;
/* Give an empty span back; ev (owned by the heap from now on) completes when
 * work queued on the span's stream before the return has completed. */
void carve_heap_give(carve_arena *a, carve_block *span, void *ev) CARVE_INTERNAL;
/* Reserve a new segment to fit need bytes (want preferred). Drops and
 * retakes the heap lock around the backend call. */
carve_status carve_heap_grow(carve_arena *a, size_t want, size_t need) CARVE_INTERNAL;
/* Wait for every pending free range's event; the ranges become usable by
 * every stream and merge with their neighbours. */
void carve_heap_sync(carve_arena *a) CARVE_INTERNAL;
/* Give fully free segments back to the backend; drops the heap lock around
 * backend calls. CARVE_ERR_BACKEND if one release failed (that segment is
 * kept). */
carve_status carve_heap_release_free(carve_arena *a) CARVE_INTERNAL;
size_t carve_heap_largest_free(const carve_arena *a) CARVE_INTERNAL;

/* ---- pool.c ---- */
typedef struct carve_pool_cache {
    uint64_t arena_id;
    carve_stream stream;
    carve_pool *pool;
} carve_pool_cache;
extern __thread carve_pool_cache carve_tls_pool __attribute__((tls_model("initial-exec"))) CARVE_INTERNAL;
carve_pool *carve_pool_lookup_slow(carve_arena *a, carve_stream stream) CARVE_INTERNAL;

/* The pool of stream, created on first use; NULL when host memory ran out.
 * Lock-free when the pool exists; a thread-local compare when the thread
 * used the same arena and stream last time. */
static inline carve_pool *carve_pool_get(carve_arena *a, carve_stream stream) {
    if (CARVE_LIKELY(carve_tls_pool.arena_id == a->id && carve_tls_pool.stream == stream))
        return carve_tls_pool.pool;
    return carve_pool_lookup_slow(a, stream);
}
void carve_pools_destroy(carve_arena *a) CARVE_INTERNAL;
/* Pool lock held. Move freed blocks whose events completed (all of them,
 * waiting, if wait) from the pending list to the index; record: see
 * carve_pool_span_emptied. */
void carve_pool_poll_pending(carve_pool *p, int wait, int record) CARVE_INTERNAL;
/* Pool lock and heap lock held. Give empty spans back to the heap. An empty
 * span carries the event recorded on its stream when it emptied; without
 * one, it goes back only when the caller acts on that stream (OWN: an event
 * is recorded now) or the device was synchronized (SYNCED: it is clean).
 * Events are never recorded on another stream later: it may be gone. */
enum { CARVE_RETURN_OWN, CARVE_RETURN_OTHER, CARVE_RETURN_SYNCED };
size_t carve_pool_return_empty(carve_pool *p, int mode) CARVE_INTERNAL;
/* Pool lock held. The span grew by added bytes at its end: merge them into
 * its last block if free, else append blk (a spare record, consumed or
 * returned to the slab). */
void carve_pool_extend_span(carve_pool *p, carve_block *span, size_t added, carve_block *blk) CARVE_INTERNAL;
/* Pool lock held. Release the hot block, if any, into the index. */
void carve_pool_flush_hot(carve_pool *p, int record) CARVE_INTERNAL;
/* Pool lock held. Install a span from the heap: one free block covering it. */
void carve_pool_install_span(carve_pool *p, carve_block *span, carve_block *blk) CARVE_INTERNAL;

static inline carve_pool *carve_pools_first(const carve_arena *a) { return CARVE_LOAD_ACQ(&a->pools); }

/* ---- arena.c ---- */
/* Every pool gives its empty spans back to the heap (unmapping free
 * granules in virtual-memory mode). With CARVE_RECLAIM_WAIT, all pools are
 * locked and the device synchronized first, so every stream's cached memory
 * can move; with CARVE_RECLAIM_RELEASE, fully free segments then go back to
 * the backend. No lock held on entry. */
enum { CARVE_RECLAIM_WAIT = 1, CARVE_RECLAIM_RELEASE = 2 };
carve_status carve_arena_reclaim(carve_arena *a, unsigned flags) CARVE_INTERNAL;

/* ---- vmm.c (virtual-memory mode) ---- */
int carve_vmm_segment_init(carve_segment *s) CARVE_INTERNAL;
void carve_vmm_segment_free(carve_segment *s) CARVE_INTERNAL;
/* Granules of [addr, addr+size) not mapped. */
size_t carve_vmm_unmapped(const carve_segment *s, uintptr_t addr, size_t size) CARVE_INTERNAL;
/* Pool lock held; takes the heap lock. Map every granule of [addr,
 * addr+size) in span, unmapping free granules first where the mapped total
 * would pass its target. CARVE_ERR_OOM past the limit. */
carve_status carve_vmm_map(carve_arena *a, carve_pool *p, carve_block *span, uintptr_t addr, size_t size) CARVE_INTERNAL;
/* Heap lock held (and p's lock): unmap free mapped granules, up to want
 * bytes, of p's spans outside [keep_lo, keep_hi). */
size_t carve_vmm_trim_pool(carve_arena *a, carve_pool *p, size_t want, uintptr_t keep_lo, uintptr_t keep_hi) CARVE_INTERNAL;
/* Heap lock held, span empty: unmap all of it before it goes back to the
 * heap. 0 on success, -1 if the backend refused (the span stays). */
int carve_vmm_unmap_span(carve_arena *a, carve_block *span) CARVE_INTERNAL;
/* Heap lock held: unmap every mapped granule of a free segment. */
carve_status carve_vmm_release_segment(carve_arena *a, carve_segment *s) CARVE_INTERNAL;

/* Pool lock held: the used or pending block [addr, addr+size) of span
 * starts (delta 1) or stops (-1) touching its granules. */
static inline void carve_vmm_ref(const carve_block *span, uintptr_t addr, size_t size, int delta) {
    const carve_segment *s = span->u.r.seg;
    size_t g = (addr - s->base) >> CARVE_PM_SHIFT, e = (addr + size - 1 - s->base) >> CARVE_PM_SHIFT;
    for (; g <= e; g++)
        s->gref[g] += (uint32_t)delta;
}

/* ---- stats.c ---- */
void carve_stats_collect(const carve_arena *a, carve_stats *s, int with_largest) CARVE_INTERNAL;

#endif
