/*
 * pool.h — one pool per stream (pool.c): finding a stream's pool, the block
 * bookkeeping inside its spans, and — inline, because they are on every
 * alloc and free and the fast paths need no cross-file inlining — finding
 * the pool, giving a block back to its index merged with its free
 * neighbours, and the per-pool counters. Every inline function here calls
 * only pool.c or files below it.
 */
#ifndef CARVE_ENGINE_POOL_H
#define CARVE_ENGINE_POOL_H

#include "engine/types.h"
#include "engine/vmm.h"

typedef struct carve_pool_cache {
    uint64_t arena_id;
    carve_stream stream;
    carve_pool *pool;
} carve_pool_cache;
extern __thread carve_pool_cache carve_tls_pool __attribute__((tls_model("initial-exec"))) CARVE_INTERNAL;
carve_pool *carve_pool_lookup_slow(carve_arena *a, carve_stream stream) CARVE_INTERNAL;

/* The pool of stream (the graph pool it is routed to, while it is:
 * graph.c), created on first use; NULL when host memory ran out.
 * Lock-free when the pool exists; a thread-local compare when the thread
 * used the same arena and stream last time. */
static inline carve_pool *carve_pool_get(carve_arena *a, carve_stream stream) {
    if (CARVE_LIKELY(carve_tls_pool.arena_id == CARVE_LOAD(&a->cache_id) && carve_tls_pool.stream == stream))
        return carve_tls_pool.pool;
    return carve_pool_lookup_slow(a, stream);
}
void carve_pools_destroy(carve_arena *a) CARVE_INTERNAL;
/* The pool of stream if the arena has one (none is made); lock-free. */
carve_pool *carve_pool_find(const carve_arena *a, carve_stream stream) CARVE_INTERNAL;
/* Pool lock held. Move freed blocks whose events completed from the
 * pending list to the index: POLL, the first CARVE_PENDING_WALK blocks at
 * most, passing over those that wait for a stream found busy; WAIT, all of
 * them, waiting for their events; SYNCED, all of them, the device having
 * been synchronized after they were freed (so even those whose event a
 * capture kept from being recorded: block.h, CARVE_EVENT_LATER). record:
 * see carve_pool_span_emptied; also, p serves the call (only then is its
 * stream asked whether it is captured). */
enum { CARVE_PENDING_POLL = 0, CARVE_PENDING_WAIT, CARVE_PENDING_SYNCED };
void carve_pool_poll_pending(carve_pool *p, int how, int record) CARVE_INTERNAL;
/* Pool lock and heap lock held. Give empty spans back to the heap. An empty
 * span carries the event recorded on its stream when it emptied; without
 * one, it goes back only when the caller acts on that stream (OWN: an event
 * is recorded now) or the device was synchronized (SYNCED: it is clean).
 * Events are never recorded on another stream later: it may be gone. */
enum { CARVE_RETURN_OWN, CARVE_RETURN_OTHER, CARVE_RETURN_SYNCED };
size_t carve_pool_return_empty(carve_pool *p, int mode) CARVE_INTERNAL;
/* Pool lock and heap lock held. Give the heap every run of whole granules
 * of free room inside the pool's spans that hold live blocks (empty spans
 * go back whole, with carve_pool_return_empty): the UNMAPPED blocks
 * (virtual-memory mode: address space with no memory behind it, free for any
 * stream at once), and with free_too the FREE blocks (segments mode, only
 * right after a device synchronization: nothing still uses them). A span is
 * cut at its ends, or in two around room inside it, so that the address
 * space live buffers pin is only the granules they touch. own: the caller
 * acts on the pool's stream (a span left with no live block gets its event
 * recorded: carve_pool_span_emptied). Returns the bytes given. */
size_t carve_pool_give_room(carve_pool *p, int free_too, int own) CARVE_INTERNAL;
/* Pool q's lock, pool to's lock and the heap lock held, virtual-memory
 * mode: the whole granules [lo, hi) of q's FREE block f (mapped, and done
 * with by the device: a completed fence of q covers them) leave q as a new
 * span of pool to, still mapped (carve_heap_move), whose blocks to must
 * install. f's span must keep some of its range. NULL when host memory ran
 * out (nothing changed). */
carve_block *carve_pool_give_mapped(carve_pool *q, carve_block *f, uintptr_t lo, uintptr_t hi,
                                    carve_pool *to) CARVE_INTERNAL;
/* Pool and heap locks held, virtual-memory mode: UNMAPPED block u starts
 * its span, which goes on past hi (a granule boundary inside or at the end
 * of u): [u->addr, hi) goes back to the heap as a free range (it holds no
 * memory, so any stream may take it at once), the span starting at hi.
 * 0 on success; -1 when host memory ran out for the records (nothing
 * changed). */
int carve_pool_give_front(carve_pool *q, carve_block *u, uintptr_t hi) CARVE_INTERNAL;
/* Pool q's lock, pool to's lock and the heap lock held, virtual-memory
 * mode: the granules [lo, hi) of q's UNMAPPED block u, at the front or the
 * back of its span (which keeps some of its range), leave q as a new span
 * of pool to holding no memory (one UNMAPPED block once to installs it:
 * carve_pool_install_span). No fence is needed: nothing is mapped there.
 * NULL when host memory ran out (nothing changed). */
carve_block *carve_pool_give_unmapped(carve_pool *q, carve_block *u, uintptr_t lo, uintptr_t hi,
                                      carve_pool *to) CARVE_INTERNAL;
/* Pool and heap locks held, virtual-memory mode: spans keep and gone of p
 * are neighbours in address order (either side), and gone holds no live
 * block: they become one span, keep's record, so that p's region is one
 * range across them (its FREE or UNMAPPED blocks at the joint merge).
 * gone's record goes back to the heap; no live buffer can be looked up
 * through it (none lies in it, and p's lock is held). Returns keep. */
carve_block *carve_pool_join(carve_pool *p, carve_block *keep, carve_block *gone) CARVE_INTERNAL;
/* Pool lock held. The span grew by added bytes at its end: merge them into
 * its last block if free (UNMAPPED in virtual-memory mode, where what the
 * heap adds holds no memory yet), else append blk (a spare record, consumed
 * or returned to the slab). */
void carve_pool_extend_span(carve_pool *p, carve_block *span, size_t added, carve_block *blk) CARVE_INTERNAL;
/* Pool lock held. Release the hot block, if any, into the index. */
void carve_pool_flush_hot(carve_pool *p, int record) CARVE_INTERNAL;

/* Lock held, the arena abandoned (carve_arena_abandon): the hot block is
 * released and every live block marked CARVE_BF_GONE, so that nothing freed
 * from now on is parked where carve_alloc's hot path would hand it out. */
void carve_pool_abandon(carve_pool *p) CARVE_INTERNAL;

/* Lock held: a CARVE_BF_GONE block freed (accounted by the caller): its
 * uses dropped, it goes to the index (which an abandoned arena no longer
 * serves from). */
void carve_pool_release_gone(carve_pool *p, carve_block *b) CARVE_INTERNAL;
/* Pool lock held. Install a span from the heap: one block covering it, FREE
 * (segments) or UNMAPPED (virtual-memory mode: the heap's ranges hold no
 * memory). */
void carve_pool_install_span(carve_pool *p, carve_block *span, carve_block *blk) CARVE_INTERNAL;

/* 1 when the stream p serves is being captured into a CUDA graph now (a
 * backend call: slow paths only). A graph pool serves the stream routed to
 * it; a per-thread pool the calling thread's per-thread stream. */
static inline int carve_pool_capturing(const carve_pool *p) {
    carve_arena *a = p->arena;
    if (!a->be.ops->capturing)
        return 0;
    carve_stream s = p->stream;
    if (CARVE_LOAD(&p->graph)) {
        if (!CARVE_LOAD(&p->routed))
            return 0;
        s = CARVE_LOAD(&p->route);
    }
    return a->be.ops->capturing(&a->be, carve_stream_public(s)) > 0;
}

static inline carve_pool *carve_pools_first(const carve_arena *a) { return CARVE_LOAD_ACQ(&a->pools); }

/* Merge a pool's unflushed counter deltas into the arena-wide counters. */
void carve_pool_flush(carve_arena *a, carve_pool *p) CARVE_INTERNAL;

/* Pool lock held: span just lost its last live block. With record (the
 * caller acts on the pool's stream, so it is alive), an event will be
 * recorded on that stream — deferred until another span empties or the
 * span leaves the pool, as the next allocation often takes it back — and
 * other streams may take the span once the event completes. Without, the
 * span moves to another stream only after a device sync. */
void carve_pool_span_emptied(carve_pool *p, carve_block *span, int record) CARVE_INTERNAL;
/* Pool lock held: span gets a live block again; its empty-event goes. */
void carve_pool_span_refilled(carve_pool *p, carve_block *span) CARVE_INTERNAL;

/* Pool lock held. Mark b free, merge it with free neighbours, index it.
 * record: see carve_pool_span_emptied. */
static inline __attribute__((always_inline)) void carve_pool_release_block(carve_pool *p, carve_block *b, int record) {
    carve_block *span = b->span;
    if (--span->u.r.nlive == 0)
        carve_pool_span_emptied(p, span, record);
    if (CARVE_UNLIKELY(p->arena->vmm)) { /* the same, with the granules b lets go (vmm.c) */
        carve_vmm_release(p, b);
        if (record && p->vclock - p->vfence_clock >= CARVE_VMM_FENCE_GRANULES &&
            p->nfrees - p->vfence_frees >= CARVE_VMM_FENCE_FREES)
            carve_vmm_fence(p->arena, p);
        return;
    }
    carve_index *ix = &p->index[span->cls];
    carve_block *prev = b->prev, *next = b->next;
    int pf = prev && prev->state == CARVE_B_FREE, nf = next && next->state == CARVE_B_FREE;
    b->state = CARVE_B_FREE;
    b->slack = 0;
    b->flags = 0;
    if (pf) { /* prev absorbs b (and next) */
        size_t size = prev->size + b->size;
        carve_block *after = b->next;
        if (nf) {
            carve_index_remove(ix, next);
            size += next->size;
            after = next->next;
            carve_slab_put(&p->slab, next);
        }
        prev->next = after;
        if (after)
            after->prev = prev;
        else
            span->u.r.last = prev;
        carve_slab_put(&p->slab, b);
        carve_index_resize(ix, prev, size);
    } else if (nf) { /* b absorbs next and takes its place in the index */
        carve_index_absorb_next(ix, span, b, next);
        carve_slab_put(&p->slab, next);
    } else {
        carve_index_insert(ix, b);
    }
}

/* Pool lock held. Add (positive) or remove (negative) bytes from the
 * counters, merging into the arena-wide ones in batches once several streams
 * exist. */
static inline void carve_pool_account(carve_pool *p, ptrdiff_t dalloc, ptrdiff_t dreq) {
    size_t al = p->allocated + (size_t)dalloc, rq = p->requested + (size_t)dreq;
    CARVE_STORE(&p->allocated, al);
    CARVE_STORE(&p->requested, rq);
    if (al > p->allocated_peak)
        CARVE_STORE(&p->allocated_peak, al);
    if (rq > p->requested_peak)
        CARVE_STORE(&p->requested_peak, rq);
    carve_arena *a = p->arena;
    if (CARVE_LOAD(&a->multi)) {
        p->unflushed_alloc += dalloc;
        p->unflushed_req += dreq;
        if (p->unflushed_alloc >= CARVE_STATS_BATCH || p->unflushed_alloc <= -CARVE_STATS_BATCH)
            carve_pool_flush(a, p);
    }
}

#endif
