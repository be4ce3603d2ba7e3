/*
 * alloc.c — carve_alloc, carve_free, carve_record_stream: the hot paths, and
 * the slow path that refills a pool from the heap.
 *
 * The fast path of an allocation is: thread-local pool lookup, one spinlock,
 * two bit scans in the pool's index, a split, a hash insert. A free is: a
 * radix lookup to the span (and so the pool), one spinlock, a hash removal,
 * merging with free neighbours. Neither touches the heap or the backend, and
 * neither writes memory shared with threads on other streams.
 */
#include <string.h>

#include "base/text.h"
#include "engine/error.h"
#include "engine/heap.h"
#include "engine/pool.h"
#include "engine/reclaim.h"
#include "engine/stats.h"

#if CARVE_CHECKS >= 3
#define CHECK_EXPENSIVE(a)                                           \
    do {                                                             \
        if (carve_check(a) != CARVE_OK)                              \
            CARVE_PANIC(carve_last_error(a));                        \
    } while (0)
#else
#define CHECK_EXPENSIVE(a) ((void)0)
#endif

static size_t span_want(unsigned cls, size_t rs) {
    if (cls == CARVE_CLASS_SMALL)
        return CARVE_SMALL_SPAN;
    if (rs < CARVE_MID_MAX)
        return CARVE_MID_SPAN;
    return carve_align_up(rs, CARVE_SEGMENT_GRANULE);
}

static size_t span_need(unsigned cls, size_t rs) {
    return cls == CARVE_CLASS_SMALL ? CARVE_SMALL_SPAN : carve_align_up(rs, CARVE_SEGMENT_GRANULE);
}

static carve_status alloc_oom(carve_arena *a, size_t size, carve_stream s, const char *why) {
    char req[32], al[32], rq[32], rs[32], ca[32], lf[32], li[32];
    carve_stats st;
    CARVE_ADD(&a->nooms, 1);
    carve_stats_collect(a, &st, 1);
    return carve_fail(
        a, CARVE_ERR_OOM,
        "out of memory: carve_alloc of %s (%zu bytes) on stream %p in arena '%s' (%s backend, "
        "device %d) failed: %s. %llu live buffers: %s allocated (%s requested); %s reserved, %s of it "
        "cached; largest free block %s; limit %s.",
        carve_format_bytes(req, sizeof(req), size), size, (void *)s, a->name,
        carve_backend_str(a->be.kind), a->be.device, why && *why ? why : "no free block fits",
        (unsigned long long)st.num_live, carve_format_bytes(al, sizeof(al), st.allocated_bytes),
        carve_format_bytes(rq, sizeof(rq), st.requested_bytes),
        carve_format_bytes(rs, sizeof(rs), st.reserved_bytes),
        carve_format_bytes(ca, sizeof(ca), st.cached_bytes),
        carve_format_bytes(lf, sizeof(lf), st.largest_free_block),
        carve_format_bytes(li, sizeof(li), a->limit));
}

/* Pool lock held: drop it, reclaim (carve_reclaim flags), retake it.
 * The reason of the failure that led here survives for the OOM message. */
static void reclaim_unlocked(carve_arena *a, carve_pool *p, unsigned flags) {
    char why[256];
    snprintf(why, sizeof(why), "%s", carve_note_get());
    carve_spin_unlock(&p->lock);
    carve_reclaim(a, flags);
    carve_spin_lock(&p->lock);
    carve_note("%s", why);
}

/* Pool and heap locks held. Grow one of the pool's spans of class cls into
 * the free range right after it, so the new memory merges with the span's
 * last free block: a stream's spans then behave as one region. Returns the
 * free block that now fits rs, or NULL. */
static carve_block *pool_extend(carve_arena *a, carve_pool *p, unsigned cls, size_t rs, size_t want) {
    for (carve_block *span = p->spans; span; span = span->fnext) {
        if (span->cls != cls)
            continue;
        carve_block *last = span->u.r.last;
        size_t tail = last->state == CARVE_B_FREE ? last->size : 0;
        if (tail >= rs)
            continue;
        size_t need = carve_align_up(rs - tail, CARVE_SEGMENT_GRANULE);
        size_t added = carve_heap_extend(a, span, need, want > need ? want : need);
        if (added) {
            carve_pool_extend_span(p, span, added, carve_slab_get(&p->slab));
            return span->u.r.last;
        }
    }
    return NULL;
}

/* Pool lock held; the pool's index has no block for rs. Bring a span in:
 * by extending a span of the pool, from the heap (after giving the heap this
 * pool's empty spans, so they can merge), by growing — but before growing
 * past the largest footprint so far, other streams are asked for their empty
 * spans first — and once more after reclaiming every stream's cached memory
 * and waiting for it. Returns a free indexed block of at least rs bytes, or
 * NULL with *st set. The pool lock is dropped and retaken around reclaims. */
static carve_block *pool_refill(carve_arena *a, carve_pool *p, unsigned cls, size_t rs,
                                carve_status *st) {
    size_t want = span_want(cls, rs), need = span_need(cls, rs);
    int asked_others = 0;
    carve_note("%s", "");
    for (int attempt = 0;; attempt++) {
        if (carve_slab_reserve(&p->slab, 1) != 0) {
            carve_note("host memory exhausted for carve's metadata");
            *st = CARVE_ERR_OOM;
            return NULL;
        }
        carve_mutex_lock(&a->heap.lock);
        carve_block *ext = pool_extend(a, p, cls, rs, want);
        if (ext) {
            carve_mutex_unlock(&a->heap.lock);
            *st = CARVE_OK;
            return ext;
        }
        carve_block *span = carve_heap_take(a, p, cls, want, need, st);
        if (!span && *st == CARVE_OK && carve_pool_return_empty(p, CARVE_RETURN_OWN) > 0)
            span = carve_heap_take(a, p, cls, want, need, st);
        int ask_others = !span && *st == CARVE_OK && !asked_others && !a->vmm && CARVE_LOAD(&a->multi) &&
                         a->heap.reserved + want > a->heap.reserved_peak;
        if (!span && *st == CARVE_OK && !ask_others) {
            *st = carve_heap_grow(a, want, need);
            if (*st == CARVE_OK)
                span = carve_heap_take(a, p, cls, want, need, st);
        }
        carve_mutex_unlock(&a->heap.lock);
        if (ask_others) { /* without waiting: ranges whose events are done become usable */
            asked_others = 1;
            attempt--;
            reclaim_unlocked(a, p, 0);
            carve_block *b = carve_index_find(&p->index[cls], rs);
            if (b)
                return b;
            continue;
        }
        if (span) {
            carve_block *blk = carve_slab_get(&p->slab);
            carve_pool_install_span(p, span, blk);
            *st = CARVE_OK;
            return blk;
        }
        if (*st == CARVE_OK)
            *st = CARVE_ERR_OOM;
        /* Out of room for a new small span: a free block in a large span
         * will do rather than fail (the segregation is a preference). */
        carve_block *b;
        if (*st == CARVE_ERR_OOM && cls == CARVE_CLASS_SMALL &&
            (b = carve_index_find(&p->index[CARVE_CLASS_LARGE], rs)))
            return b;
        if (*st != CARVE_ERR_OOM || attempt == 1)
            return NULL;
        /* Release cached memory everywhere and retry once. */
        reclaim_unlocked(a, p, CARVE_RECLAIM_WAIT | (a->growth ? CARVE_RECLAIM_RELEASE : 0));
        if ((b = carve_index_find(&p->index[cls], rs)))
            return b;
    }
}

static inline __attribute__((always_inline)) carve_block *block_split(carve_pool *p, carve_block *b, size_t rs);

/* Pool lock held, virtual-memory mode: free block b would need granules
 * mapped at its front. When a granule-aligned place further into b has rs
 * bytes already mapped, split the part before it off as a free block of its
 * own and return the free block that starts there (indexed); else NULL,
 * nothing changed. Keeps a program's mappings in use instead of mapping
 * fresh granules while mapped ones sit free. */
__attribute__((noinline, cold)) static carve_block *place_on_mapped(carve_pool *p, carve_block *b, size_t rs) {
    uintptr_t x = carve_vmm_find_mapped(b->span->u.r.seg, b->addr, b->addr + b->size, rs);
    if (!x || carve_slab_reserve(&p->slab, 2) != 0 || carve_blockmap_reserve(&p->map) != 0)
        return NULL;
    carve_block *front = block_split(p, b, x - b->addr);
    carve_index_insert(&p->index[front->cls], front);
    return front->next;
}

#define MAPPED_SCAN 16 /* free blocks looked at for one already mapped (more found no more on the recorded traces) */

/* Pool lock held, virtual-memory mode: the best-fitting free block would
 * need granules mapped, and has no mapped place inside. Look through the
 * other free blocks that can hold rs (smallest classes first, at most
 * MAPPED_SCAN of them) for one with rs bytes already mapped, at its front
 * or further in; NULL when there is none. Only done when mapping would
 * pass the allowance (so something would be unmapped to make room): below
 * it, best fit keeps the touched granules compact; and only a place that
 * touches no more granules anew than the best fit would (taking any place
 * that stays within the pool's peak of touched granules spreads a growing
 * program over more granules: LLM decode's footprint went 1.043 -> 1.063). A program whose requests change
 * shape (serving, dynamic batch sizes) then lands on the granules that
 * earlier requests left mapped instead of unmapping those to map others: a
 * scan of host memory instead of driver calls. */
__attribute__((noinline, cold)) static carve_block *find_mapped_block(carve_pool *p, unsigned cls, size_t rs,
                                                                   const carve_block *skip) {
    /* The peak of touched granules sets the allowance: it must not grow
     * by the choice. */
    size_t touch_limit = carve_vmm_untouched(skip->span->u.r.seg, skip->addr, rs);
    carve_index *ix = &p->index[cls];
    unsigned fl, sl, seen = 0;
    carve_index_class(rs, &fl, &sl);
    while (seen < MAPPED_SCAN && carve_index_next_class(ix, &fl, &sl)) {
        for (carve_block *b = ix->heads[fl][sl]; b && seen < MAPPED_SCAN; b = b->fnext, seen++) {
            if (b == skip || b->size < rs)
                continue;
            const carve_segment *seg = b->span->u.r.seg;
            if (b->span->u.r.unmapped == 0 || carve_vmm_unmapped(seg, b->addr, rs) == 0) {
                if (carve_vmm_untouched(seg, b->addr, rs) <= touch_limit)
                    return b;
                continue;
            }
            uintptr_t x = carve_vmm_find_mapped(seg, b->addr, b->addr + b->size, rs);
            if (x && carve_vmm_untouched(seg, x, rs) <= touch_limit) {
                carve_block *m = place_on_mapped(p, b, rs);
                if (m)
                    return m;
            }
        }
        if (++sl == CARVE_SL_COUNT) {
            sl = 0;
            fl++;
        }
    }
    return NULL;
}

/* Pool lock held; the fast path found no block for rs, or (virtual-memory
 * mode) the block it found touches unmapped granules. Find or bring in a
 * block and map it; on running out of room, reclaim cached memory from
 * every stream and retry once. */
static carve_block *pool_take(carve_arena *a, carve_pool *p, unsigned cls, size_t rs, carve_status *st) {
    carve_pool_flush_hot(p, 1); /* merged, it may fit */
    for (int attempt = 0;; attempt++) {
        carve_block *b = carve_index_find(&p->index[cls], rs);
        if (!b && !(b = pool_refill(a, p, cls, rs, st)))
            return NULL;
        size_t need;
        if (!a->vmm || b->span->u.r.unmapped == 0 || (need = carve_vmm_unmapped(b->span->u.r.seg, b->addr, rs)) == 0)
            return b;
        carve_block *m = place_on_mapped(p, b, rs);
        if (!m && CARVE_LOAD(&a->heap.reserved) + need * CARVE_SEGMENT_GRANULE > carve_vmm_allowance(a))
            m = find_mapped_block(p, cls, rs, b);
        if (m)
            return m;
        *st = carve_vmm_map(a, p, b->span, b->addr, rs);
        if (*st == CARVE_OK)
            return b;
        if (*st != CARVE_ERR_OOM || attempt == 1)
            return NULL;
        reclaim_unlocked(a, p, CARVE_RECLAIM_WAIT);
    }
}

/* Take rs bytes off the front of free block b, leaving the rest indexed
 * (in b's list position when it stays in b's size class). */
static inline __attribute__((always_inline)) carve_block *block_split(carve_pool *p, carve_block *b, size_t rs) {
    carve_index *ix = &p->index[b->cls];
    if (b->size == rs) {
        carve_index_remove(ix, b);
        return b;
    }
    carve_block *rest = carve_slab_get(&p->slab);
    rest->addr = b->addr + rs;
    rest->size = b->size - rs;
    rest->state = CARVE_B_FREE;
    rest->cls = b->cls;
    rest->flags = 0;
    rest->span = b->span;
    rest->prev = b;
    rest->next = b->next;
    if (b->next)
        b->next->prev = rest;
    else
        b->span->u.r.last = rest;
    b->next = rest;
    if (carve_index_in_class(b, rest->size)) {
        carve_index_swap(ix, b, rest);
    } else {
        carve_index_remove(ix, b);
        carve_index_insert(ix, rest);
    }
    b->size = rs;
    return b;
}

carve_status carve_alloc(carve_arena *a, size_t size, carve_stream s, void **out) {
    if (CARVE_UNLIKELY(!out))
        return carve_fail(a, CARVE_ERR_INVALID, "carve_alloc: out is NULL");
    *out = NULL;
    if (CARVE_UNLIKELY(!a))
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_alloc: arena is NULL");
    if (CARVE_UNLIKELY(size == 0))
        return CARVE_OK;
    if (CARVE_UNLIKELY(s == CARVE_STREAM_PER_THREAD))
        return carve_fail(a, CARVE_ERR_INVALID, "carve_alloc: cudaStreamPerThread names a different stream on every "
                          "thread; pass the thread's concrete stream handle");
    if (CARVE_UNLIKELY(size > CARVE_MAX_ALLOC || size > a->limit))
        return alloc_oom(a, size, s, "the request is larger than the arena's limit");
    size_t rs = carve_align_up(size, CARVE_ALIGNMENT);
    unsigned cls = rs <= CARVE_SMALL_MAX ? CARVE_CLASS_SMALL : CARVE_CLASS_LARGE;
    carve_pool *p = carve_pool_get(a, s);
    if (CARVE_UNLIKELY(!p))
        return alloc_oom(a, size, s, "host memory exhausted for carve's metadata");

    carve_spin_lock(&p->lock);
    if (CARVE_UNLIKELY(p->pending_head != NULL))
        carve_pool_poll_pending(p, 0, 1);
    carve_block *b = p->hot;
    if (b && b->size == rs && CARVE_LIKELY(carve_blockmap_reserve(&p->map) == 0)) {
        p->hot = NULL; /* the same size again: no search, no split */
        b->state = CARVE_B_USED;
        b->slack = (uint8_t)(rs - size);
        goto found;
    }
    b = carve_index_find(&p->index[cls], rs);
    carve_status st = CARVE_OK;
    if (CARVE_UNLIKELY(!b || (a->vmm && b->span->u.r.unmapped)))
        b = pool_take(a, p, cls, rs, &st);
    if (CARVE_LIKELY(b) && CARVE_UNLIKELY(carve_slab_reserve(&p->slab, 1) != 0 ||
                                           carve_blockmap_reserve(&p->map) != 0)) {
        carve_note("host memory exhausted for carve's metadata");
        b = NULL;
        st = CARVE_ERR_OOM;
    }
    if (CARVE_UNLIKELY(!b)) {
        carve_spin_unlock(&p->lock);
        if (st == CARVE_ERR_OOM)
            return alloc_oom(a, size, s, carve_note_get());
        return carve_fail(a, st, "carve_alloc of %zu bytes: %s", size, carve_note_get());
    }
    b = block_split(p, b, rs);
    b->state = CARVE_B_USED;
    b->slack = (uint8_t)(rs - size);
    b->flags = 0;
    if (CARVE_UNLIKELY(b->span->u.r.nlive++ == 0))
        carve_pool_span_refilled(p, b->span);
    if (CARVE_UNLIKELY(a->vmm))
        carve_vmm_ref(p, b->span, b->addr, b->size, 1);
found:
    carve_blockmap_put(&p->map, b);
    CARVE_STORE(&p->nallocs, p->nallocs + 1);
    carve_pool_account(p, (ptrdiff_t)rs, (ptrdiff_t)size);
    carve_spin_unlock(&p->lock);
    CHECK_EXPENSIVE(a);
    *out = (void *)b->addr;
    return CARVE_OK;
}

/* The pool that owns the span holding addr, locked; NULL when addr is in no
 * span. The caller still has to find addr among the pool's live blocks. */
static carve_pool *owner_locked(carve_arena *a, uintptr_t addr) {
    if (addr & (CARVE_ALIGNMENT - 1))
        return NULL;
    carve_block *span = carve_pagemap_get(&a->pmap, addr);
    if (!span)
        return NULL;
    carve_pool *p = CARVE_LOAD_ACQ(&span->u.r.pool);
    if (!p)
        return NULL;
    carve_spin_lock(&p->lock);
    return p;
}

static carve_status bad_pointer(carve_arena *a, const char *fn, void *ptr) {
    return carve_fail(a, CARVE_ERR_BAD_POINTER,
                      "%s: %p is not the start of a live buffer of arena '%s' (foreign, interior, "
                      "misaligned or already freed)",
                      fn, ptr, a->name);
}

/* Record one event per extra stream; all or nothing. */
static carve_status uses_record(carve_arena *a, carve_uses *u) {
    for (unsigned i = 0; i < u->n; i++) {
        carve_status st = a->be.ops->event_record(&a->be, u->streams[i], &u->events[i]);
        if (st != CARVE_OK) {
            while (i-- > 0) {
                a->be.ops->event_release(&a->be, u->events[i]);
                u->events[i] = NULL;
            }
            return st;
        }
    }
    return CARVE_OK;
}

carve_status carve_free(carve_arena *a, void *ptr) {
    if (CARVE_UNLIKELY(!a))
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_free: arena is NULL");
    if (CARVE_UNLIKELY(!ptr))
        return CARVE_OK;
    uintptr_t addr = (uintptr_t)ptr;
    carve_pool *p = owner_locked(a, addr);
    if (CARVE_UNLIKELY(!p))
        return bad_pointer(a, "carve_free", ptr);
    carve_block *b = carve_blockmap_take(&p->map, addr);
    if (CARVE_UNLIKELY(!b)) {
        carve_spin_unlock(&p->lock);
        return bad_pointer(a, "carve_free", ptr);
    }
    carve_uses *u = CARVE_UNLIKELY(b->flags & CARVE_BF_USES) ? b->u.b.uses : NULL;
    if (CARVE_UNLIKELY(u != NULL)) {
        carve_status st = uses_record(a, u);
        if (st != CARVE_OK) {
            carve_blockmap_put(&p->map, b); /* a slot was just freed: no growth needed */
            carve_spin_unlock(&p->lock);
            return carve_fail(a, st, "carve_free(%p): recording an event on a stream the buffer "
                              "was used on failed: %s", ptr, carve_backend_msg());
        }
    }
    CARVE_STORE(&p->nfrees, p->nfrees + 1);
    carve_pool_account(p, -(ptrdiff_t)b->size, -(ptrdiff_t)carve_block_requested(b));
    if (CARVE_UNLIKELY(u != NULL)) {
        b->state = CARVE_B_PENDING;
        b->fnext = NULL;
        b->fprev = p->pending_tail;
        if (p->pending_tail)
            p->pending_tail->fnext = b;
        else
            p->pending_head = b;
        p->pending_tail = b;
        p->npending++;
    } else { /* park it; release the one parked before */
        carve_block *old = p->hot;
        b->state = CARVE_B_HOT;
        p->hot = b;
        if (old)
            carve_pool_release_block(p, old, 1);
    }
    carve_spin_unlock(&p->lock);
    CHECK_EXPENSIVE(a);
    return CARVE_OK;
}

carve_status carve_buffer_info(const carve_arena *ca, const void *ptr, size_t *size, carve_stream *stream) {
    if (size)
        *size = 0;
    if (stream)
        *stream = NULL;
    if (!ca)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_buffer_info: arena is NULL");
    carve_arena *a = (carve_arena *)ca; /* the lock is taken; nothing observable changes */
    carve_pool *p = ptr ? owner_locked(a, (uintptr_t)ptr) : NULL;
    if (!p)
        return bad_pointer(a, "carve_buffer_info", (void *)ptr);
    carve_block *b = carve_blockmap_get(&p->map, (uintptr_t)ptr);
    if (b) {
        if (size)
            *size = carve_block_requested(b);
        if (stream)
            *stream = p->stream;
    }
    carve_spin_unlock(&p->lock);
    return b ? CARVE_OK : bad_pointer(a, "carve_buffer_info", (void *)ptr);
}

carve_status carve_record_stream(carve_arena *a, void *ptr, carve_stream s) {
    if (!a)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_record_stream: arena is NULL");
    uintptr_t addr = (uintptr_t)ptr;
    carve_pool *p = ptr ? owner_locked(a, addr) : NULL;
    if (!p)
        return bad_pointer(a, "carve_record_stream", ptr);
    carve_block *b = carve_blockmap_get(&p->map, addr);
    if (!b) {
        carve_spin_unlock(&p->lock);
        return bad_pointer(a, "carve_record_stream", ptr);
    }
    carve_status st = CARVE_OK;
    carve_uses *u = b->flags & CARVE_BF_USES ? b->u.b.uses : NULL;
    int known = s == p->stream;
    for (unsigned i = 0; u && !known && i < u->n; i++)
        known = u->streams[i] == s;
    if (!known) {
        if (!u && !(u = calloc(1, sizeof(*u)))) {
            st = CARVE_ERR_OOM;
        } else {
            b->u.b.uses = u;
            b->flags |= CARVE_BF_USES;
            if (u->n == u->cap) {
                unsigned cap = u->cap ? u->cap * 2 : 2;
                carve_stream *ns = realloc(u->streams, cap * sizeof(*ns));
                if (ns)
                    u->streams = ns;
                void **ne = ns ? realloc(u->events, cap * sizeof(*ne)) : NULL;
                if (ne)
                    u->events = ne;
                if (ns && ne)
                    u->cap = cap;
                else
                    st = CARVE_ERR_OOM;
            }
            if (st == CARVE_OK) {
                u->streams[u->n] = s;
                u->events[u->n] = NULL;
                u->n++;
            }
        }
    }
    carve_spin_unlock(&p->lock);
    if (st != CARVE_OK)
        return carve_fail(a, st, "carve_record_stream: host memory exhausted");
    return CARVE_OK;
}
