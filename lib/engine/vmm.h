/*
 * vmm.h — virtual-memory mode (vmm.c): the pools' UNMAPPED blocks, the
 * granules live buffers touch and the runs of free ones with when they
 * were let go (kept by the blocks, never per granule), mapping on use and
 * lazy unmapping.
 */
#ifndef CARVE_ENGINE_VMM_H
#define CARVE_ENGINE_VMM_H

#include "engine/types.h"

/* Mapped bytes before free granules are unmapped first: pool p alone, its
 * own (its peak of touched granules plus its slack); several pools, all
 * that is mapped (the most they all touched at once plus p's slack, at
 * least a quarter). Never below the heap's target. */
size_t carve_vmm_allowance(const carve_arena *a, const carve_pool *p) CARVE_INTERNAL;

/* Two address ranges [lo[i], hi[i]) whose granules a trim leaves mapped. */
typedef struct carve_keep {
    uintptr_t lo[2], hi[2];
} carve_keep;

/* Pool lock held, heap lock not. Map every granule of [addr, addr+size)
 * (whole granules of one UNMAPPED block of span) for the request that will
 * lie at [rlo, rhi) (what it covers whole as mappings of at most the
 * stream's touched peak / CARVE_VMM_MAP_DIV where that is room at the
 * span's end and one stream exists, else a mapping a granule: vmm.c's
 * map_pieces), first unmapping free
 * granules of this pool (longest unused first; none in keep, which may be
 * NULL) where its mapped bytes would pass its allowance, and other streams'
 * where the arena's would pass the limit. With replace, where the arena's
 * mapped bytes would pass their peak, the allowance is what the pool's live
 * blocks (with several streams, every pool's) touch now and one granule, if lower,
 * and the memory comes in granule by granule (no larger mapping, which could
 * only go whole, keeps free granules mapped). Driver calls run with the heap lock dropped.
 * CARVE_ERR_OOM past the limit; the blocks are unchanged then. *kept is
 * the bytes, at *kept_at, that a failed map left mapped (the backend
 * refused to unmap them again: counted in reserved and as a refused unmap,
 * recorded in maps.h); the caller claims them as free memory (0: none). */
carve_status carve_vmm_map(carve_arena *a, carve_pool *p, carve_block *span, uintptr_t addr, size_t size,
                           uintptr_t rlo, uintptr_t rhi, const carve_keep *keep, uintptr_t *kept_at,
                           size_t *kept, int replace) CARVE_INTERNAL;
/* Pool lock held, several streams: whether mapping need bytes more for p
 * would first unmap free granules (all that is mapped past the arena's
 * budget, carve_vmm_allowance, or the limit), as carve_vmm_map decides. */
int carve_vmm_would_unmap(carve_arena *a, const carve_pool *p, size_t need) CARVE_INTERNAL;
/* Pool lock held: [lo, hi), just mapped, is the front or the back (or all)
 * of UNMAPPED block u, or lies inside it: make it FREE, merged with a FREE
 * neighbour, and indexed. Returns the FREE block that holds [lo, hi). Needs
 * one spare slab record (two inside u, which keeps the front, the back
 * becoming an UNMAPPED block of its own). The granules of [lo, hi) are a run stamped 0 (never let
 * go): the caller allocates over them at once (carve_vmm_take). */
carve_block *carve_vmm_claim(carve_pool *p, carve_block *u, uintptr_t lo, uintptr_t hi) CARVE_INTERNAL;
/* Pool lock held, heap lock not: unmap free mapped granules of p, up to want
 * bytes (SIZE_MAX: all of them), those let go longest ago first, none in
 * keep (may be NULL), and only those stamped at or before done: the caller
 * knows the work queued before those frees is done (p->vdone, or p->vclock
 * after a device synchronization). Whole mappings only (maps.h): a mapping
 * of many granules goes once every granule of it may go, and then whole,
 * which may pass want. FREE blocks are cut around what is unmapped. Returns
 * the bytes unmapped. */
size_t carve_vmm_trim_pool(carve_arena *a, carve_pool *p, size_t want, const carve_keep *keep,
                           uint64_t done) CARVE_INTERNAL;
/* The same; with count_only, nothing is unmapped and the bytes that could
 * be (want aside) are returned. */
size_t carve_vmm_trim(carve_arena *a, carve_pool *p, size_t want, const carve_keep *keep, uint64_t done,
                      int count_only) CARVE_INTERNAL;
/* Pool lock held, acting on p's stream (so it exists): record an event
 * that shows, once complete, that the device is done with every granule p
 * has let go so far (none when the newest one shows that already). */
void carve_vmm_fence(carve_arena *a, carve_pool *p) CARVE_INTERNAL __attribute__((cold, noinline));
/* Pool lock held (any thread): learn, without waiting, which of p's fences
 * have completed (p->vdone moves on). */
void carve_vmm_fences_poll(carve_arena *a, carve_pool *p) CARVE_INTERNAL;
/* Whether every granule of FREE block f's runs in [lo, hi) is stamped at or
 * before done. */
int carve_vmm_runs_done(const carve_block *f, uintptr_t lo, uintptr_t hi, uint64_t done) CARVE_INTERNAL;
/* Pool lock held: the whole granules [lo, hi) of FREE block f (indexed)
 * leave p (carve_pool_give_mapped): what follows hi in f becomes a FREE
 * block of its own with its runs, and the runs in [lo, hi) go, so that f
 * ends at hi and holds the runs below lo only. Needs one spare slab record. */
void carve_vmm_cut_runs(carve_pool *p, carve_block *f, uintptr_t lo, uintptr_t hi) CARVE_INTERNAL;
/* Pool lock held: FREE block f holds granules just mapped for a request
 * that may not take them all (carve_alloc_aligned maps for its size plus
 * the alignment's pad and takes the aligned part): its runs stamped 0 are
 * stamped as let go now, as carve_vmm_adopted does, so that what the
 * request leaves of them is free memory like any other (a trim unmaps it
 * once a fence covers it); what it takes it counts as touched as before. */
void carve_vmm_unclaimed(carve_pool *p, carve_block *f) CARVE_INTERNAL;
/* Pool lock held: FREE block f, whole granules, all mapped, just came from
 * another stream: its granules are one run, stamped as let go now by p. */
void carve_vmm_adopted(carve_pool *p, carve_block *f) CARVE_INTERNAL;
/* Pool lock held, after a device synchronization: every granule p let go
 * is done with; its fences are dropped. */
void carve_vmm_fences_synced(carve_arena *a, carve_pool *p) CARVE_INTERNAL;
/* Pool and heap locks held, span empty: unmap all of it before it goes
 * back to the heap. 0 on success; -1 if the backend refused or host memory
 * for the block records ran out (the span stays, its blocks cut around what
 * is still mapped). */
int carve_vmm_unmap_span(carve_arena *a, carve_pool *p, carve_block *span) CARVE_INTERNAL;
/* The arena is being destroyed: unmap whatever is mapped in span, keeping
 * no books. */
void carve_vmm_span_destroy(carve_arena *a, const carve_block *span) CARVE_INTERNAL;
/* The arena's context is gone (carve_arena_abandon): unmap, through ops,
 * every run of granules the spans of every pool hold mapped (each pool
 * locked in turn), leaving the records as they are. Costs the blocks, not
 * the address space. */
void carve_vmm_abandon(carve_arena *a, const carve_backend_ops *ops) CARVE_INTERNAL;

/* Pool lock held: link / unlink an UNMAPPED block in its pool's list. */
static inline void carve_vmm_list_add(carve_pool *p, carve_block *b) {
    carve_block **head = &p->unmapped[b->cls];
    b->state = CARVE_B_UNMAPPED;
    b->fprev = NULL;
    b->fnext = *head;
    if (*head)
        (*head)->fprev = b;
    *head = b;
}

static inline void carve_vmm_list_remove(carve_pool *p, carve_block *b) {
    if (b->fprev)
        b->fprev->fnext = b->fnext;
    else
        p->unmapped[b->cls] = b->fnext;
    if (b->fnext)
        b->fnext->fprev = b->fprev;
    b->fprev = b->fnext = NULL;
}

/* ---- runs: the rings of FREE blocks (vmm.c says what they are) ---------- */

static inline void carve_vmm_run_set(carve_block *x, uintptr_t at, size_t n, uint64_t stamp) {
    x->u.v.at = at;
    x->u.v.n = n;
    x->u.v.stamp = stamp;
}

/* f's ring holds f alone (its own run, n, is the caller's). */
static inline void carve_vmm_ring_init(carve_block *f) { f->u.v.rnext = f->u.v.rprev = f; }

/* The chain first..last (linked by rnext) goes to the end of f's ring. */
static inline void carve_vmm_ring_append(carve_block *f, carve_block *first, carve_block *last) {
    carve_block *tail = f->u.v.rprev;
    tail->u.v.rnext = first;
    first->u.v.rprev = tail;
    last->u.v.rnext = f;
    f->u.v.rprev = last;
}

/* g, a FREE block merged away into f (the block before it), hands f its
 * runs, which follow f's: g's record carries its own run on as a RUN
 * record, or goes back to the slab. */
static inline void carve_vmm_ring_absorb(carve_pool *p, carve_block *f, carve_block *g) {
    carve_block *first = g->u.v.rnext, *last = g->u.v.rprev;
    if (g->u.v.n) {
        g->state = CARVE_B_RUN;
        first = g;
    } else {
        carve_slab_put(&p->slab, g);
        if (first == g)
            return; /* no run at all */
    }
    carve_vmm_ring_append(f, first, last);
}

/* Pool lock held: b's runs (it was FREE) below the end of its last granule
 * are its now, the others go to rest's ring (rest may be NULL where none
 * can be there). Returns the granules taken. */
size_t carve_vmm_take_runs(carve_pool *p, carve_block *b, carve_block *rest) CARVE_INTERNAL;

/* Pool lock held: b was just allocated (USED) from the front of a FREE
 * block whose runs b's record still holds, and the rest of that block, if
 * any, is b->next (FREE, new). The runs b covers are its now, and the
 * granules they hold are those it touches that no other live block did
 * (those shared with a live neighbour are no run's; granules just mapped
 * for it are a run stamped 0): p counts them, and their peak (written under
 * its lock: nothing shared with other streams). The other runs go to the
 * rest. */
static inline void carve_vmm_take(carve_pool *p, carve_block *b) {
    carve_block *rest = b->next && b->next->state == CARVE_B_FREE ? b->next : NULL;
    if (CARVE_UNLIKELY(b->u.v.n || b->u.v.rnext != b)) {
        size_t t = p->touched + carve_vmm_take_runs(p, b, rest);
        __atomic_store_n(&p->touched, t, __ATOMIC_RELAXED);
        if (t > __atomic_load_n(&p->touched_peak, __ATOMIC_RELAXED)) /* reset under the heap lock */
            __atomic_store_n(&p->touched_peak, t, __ATOMIC_RELAXED);
    } else if (rest) { /* no run: every granule it touches was touched */
        rest->u.v.n = 0;
        carve_vmm_ring_init(rest);
    }
}

/* Pool lock held: FREE block f was just cut at f->next->addr, f->next being
 * the new FREE piece after it, which the caller allocates whole at once:
 * the runs from the granule that holds the cut on go to f->next. */
void carve_vmm_split(carve_block *f) CARVE_INTERNAL;

/* USED, PENDING or HOT: what a span's chain holds besides FREE and UNMAPPED. */
static inline int carve_vmm_live(const carve_block *x) {
    return ((1u << CARVE_B_USED | 1u << CARVE_B_PENDING | 1u << CARVE_B_HOT) >> x->state) & 1;
}

/* The granules b touches that no other live block does: [*ga, *gb). Its
 * first granule is shared only if b starts inside it (so b has a block
 * before it: spans start on a granule) and the live block before it ends
 * inside it: b's neighbour, or the one before a FREE neighbour that starts
 * inside it (free neighbours merge, and UNMAPPED blocks start and end on
 * granules). Its last granule likewise. */
static inline __attribute__((always_inline)) void carve_vmm_own(const carve_block *b, uintptr_t *ga, uintptr_t *gb) {
    const size_t G = CARVE_SEGMENT_GRANULE;
    uintptr_t end = b->addr + b->size, lo = carve_align_down(b->addr, G), hi = carve_align_up(end, G);
    if (b->addr != lo) {
        const carve_block *x = b->prev;
        CARVE_ASSERT_INTERNAL(x && (carve_vmm_live(x) || x->addr <= lo || x->prev));
        if (carve_vmm_live(x) || (x->addr > lo && carve_vmm_live(x->prev)))
            lo += G;
    }
    if (end != hi && hi > lo) {
        const carve_block *x = b->next;
        CARVE_ASSERT_INTERNAL(x && (carve_vmm_live(x) || x->addr + x->size >= hi || x->next));
        if (carve_vmm_live(x) || (x->addr + x->size < hi && carve_vmm_live(x->next)))
            hi -= G;
    }
    *ga = lo;
    *gb = hi;
}

/* Pool lock held: live block b (its span's live count already lowered) is
 * released: the granules only it touched are let go, stamped one after
 * another with p's clock, as one run; b becomes FREE, merged with its FREE
 * neighbours (their runs spliced: the record of a block merged away carries
 * its run on, so no record is needed), and indexed. */
static inline __attribute__((always_inline)) void carve_vmm_release(carve_pool *p, carve_block *b) {
    const size_t G = CARVE_SEGMENT_GRANULE;
    carve_block *span = b->span, *prev = b->prev, *next = b->next;
    carve_index *ix = &p->index[span->cls];
    int pf = prev && prev->state == CARVE_B_FREE, nf = next && next->state == CARVE_B_FREE;
    uintptr_t ga, gb;
    carve_vmm_own(b, &ga, &gb);
    size_t k = (gb - ga) / G;
    uint64_t stamp = p->vclock + 1;
    if (k) {
        p->vclock += k;
        __atomic_store_n(&p->touched, p->touched - k, __ATOMIC_RELAXED);
    }
    b->state = CARVE_B_FREE;
    b->slack = 0;
    b->flags = 0;
    if (pf) { /* prev absorbs b (and next); b's record carries the new run on */
        size_t size = prev->size + b->size;
        carve_block *after = next;
        if (k) {
            carve_vmm_run_set(b, ga, k, stamp);
            b->state = CARVE_B_RUN;
            carve_vmm_ring_append(prev, b, b);
        }
        if (nf) {
            carve_index_remove(ix, next);
            size += next->size;
            after = next->next;
            carve_vmm_ring_absorb(p, prev, next);
        }
        prev->next = after;
        if (after)
            after->prev = prev;
        else
            span->u.r.last = prev;
        if (!k)
            carve_slab_put(&p->slab, b);
        carve_index_resize(ix, prev, size);
        return;
    }
    carve_vmm_run_set(b, ga, k, stamp);
    carve_vmm_ring_init(b);
    if (nf) { /* b absorbs next and takes its place in the index */
        carve_index_absorb_next(ix, span, b, next);
        carve_vmm_ring_absorb(p, b, next);
    } else {
        carve_index_insert(ix, b);
    }
}

#endif
