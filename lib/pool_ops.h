/*
 * pool_ops.h — the two pool operations on every free (and alloc), inline so
 * that the fast paths need no cross-file inlining: giving a block back to
 * its pool's index, merged with its free neighbours, and the per-pool
 * counters.
 */
#ifndef CARVE_POOL_OPS_H
#define CARVE_POOL_OPS_H

#include "arena.h"

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
static inline void carve_pool_release_block(carve_pool *p, carve_block *b, int record) {
    carve_block *span = b->span;
    carve_index *ix = &p->index[span->cls];
    carve_block *prev = b->prev, *next = b->next;
    int pf = prev && prev->state == CARVE_B_FREE, nf = next && next->state == CARVE_B_FREE;
    if (--span->u.r.nlive == 0)
        carve_pool_span_emptied(p, span, record);
    if (CARVE_UNLIKELY(p->arena->vmm))
        carve_vmm_ref(span, b->addr, b->size, -1);
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
        b->next = next->next;
        if (next->next)
            next->next->prev = b;
        else
            span->u.r.last = b;
        b->size += next->size;
        if (carve_index_in_class(next, b->size)) {
            carve_index_swap(ix, next, b);
        } else {
            carve_index_remove(ix, next);
            carve_index_insert(ix, b);
        }
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
