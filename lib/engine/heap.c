/*
 * heap.c — the arena heap: segments from the backend, cut into spans for
 * the pools at 2 MiB granularity.
 *
 * A free range remembers the stream that gave it back and an event recorded
 * on that stream after the last work there that used it ("pending"). Only
 * that stream may take it again before the event completes; any stream may
 * once it has. This is the single place where memory crosses from one
 * stream to another, so it is the single place where stream order is
 * enforced. Pending ranges merge with clean neighbours and with ranges of
 * the same stream (the merged range waits for the event recorded later,
 * which on one stream completes last, or for the only one: conservative,
 * never unsafe); ranges of different streams merge once their events
 * complete.
 *
 * Because a merge can make a range wait where a part of it did not, whether
 * a stream may take a range is asked of the range as it is after merging,
 * never before: range_for is the one place that answers it, for heap_find
 * and carve_heap_extend alike.
 */
#include "engine/heap.h"

#include <string.h>

#include "base/text.h"
#include "engine/error.h"
#include "engine/vmm.h"

static void range_drop_event(carve_arena *a, carve_block *r) {
    if (r->u.r.event) {
        a->be.ops->event_release(&a->be, r->u.r.event);
        r->u.r.event = NULL;
    }
}

static int range_can_merge(const carve_block *x, const carve_block *y) {
    return !x->u.r.event || !y->u.r.event || x->stream == y->stream;
}

/* Merge y (x's next neighbour, both FREE and indexed) into x. */
static void range_absorb(carve_arena *a, carve_block *x, carve_block *y) {
    carve_heap *h = &a->heap;
    carve_index_remove(&h->index, x);
    carve_index_remove(&h->index, y);
    /* The merged range waits for the later event of the two (same stream),
     * or for the only one. */
    if (!x->u.r.event || (y->u.r.event && y->u.r.seq > x->u.r.seq)) {
        range_drop_event(a, x);
        x->u.r.event = y->u.r.event;
        x->u.r.seq = y->u.r.seq;
        x->stream = y->stream;
        y->u.r.event = NULL;
    } else {
        range_drop_event(a, y);
    }
    x->size += y->size;
    x->next = y->next;
    if (y->next)
        y->next->prev = x;
    carve_slab_put(&h->slab, y);
    carve_index_insert(&h->index, x);
}

/* r is FREE and indexed: merge it with its free neighbours where allowed.
 * Returns the surviving record. */
static carve_block *range_coalesce(carve_arena *a, carve_block *r) {
    if (r->prev && r->prev->state == CARVE_B_FREE && range_can_merge(r->prev, r)) {
        carve_block *p = r->prev;
        range_absorb(a, p, r);
        r = p;
    }
    if (r->next && r->next->state == CARVE_B_FREE && range_can_merge(r, r->next))
        range_absorb(a, r, r->next);
    return r;
}

/* Whether stream s may use free range r as it is. */
static int range_open(const carve_block *r, carve_stream s) { return !r->u.r.event || r->stream == s; }

/* Free range r, which waits for an event of another stream than s: NULL
 * while that event has not completed; else the range that holds r, all of
 * which s may use. A completed event is dropped and the range merged with
 * its neighbours, which can make it wait again (it takes a pending
 * neighbour's event), so the question is asked again of the merged range;
 * each round drops an event, so it ends. *merged says whether the heap's
 * lists changed. */
static carve_block *range_for(carve_arena *a, carve_block *r, carve_stream s, int *merged) {
    *merged = 0;
    while (!range_open(r, s)) {
        if (carve_event_query(a, r->u.r.event) == 0)
            return NULL;
        range_drop_event(a, r);
        r = range_coalesce(a, r);
        *merged = 1;
    }
    return r;
}

/* Smallest-class free range of at least size bytes that s may use. */
static carve_block *heap_find(carve_arena *a, carve_stream s, size_t size) {
    carve_heap *h = &a->heap;
restart:;
    unsigned fl, sl;
    carve_index_class(size, &fl, &sl);
    while (carve_index_next_class(&h->index, &fl, &sl)) {
        for (carve_block *r = h->index.heads[fl][sl]; r; r = r->fnext) {
            if (r->size < size)
                continue;
            if (range_open(r, s))
                return r;
            int merged;
            carve_block *m = range_for(a, r, s, &merged);
            if (m && m->size >= size)
                return m;
            if (merged)
                goto restart; /* the lists changed under the iteration */
        }
        if (++sl == CARVE_SL_COUNT) {
            sl = 0;
            fl++;
        }
    }
    return NULL;
}

carve_status carve_heap_init(carve_arena *a) {
    memset(&a->heap, 0, sizeof(a->heap));
    carve_pagemap_init(&a->pmap); /* the heap's lock guards its writers */
    if (carve_mutex_init(&a->heap.lock) != 0)
        return CARVE_ERR_OOM;
    return CARVE_OK;
}

carve_block *carve_heap_take(carve_arena *a, carve_pool *p, unsigned cls, size_t want, size_t need,
                             carve_status *st) {
    carve_heap *h = &a->heap;
    *st = CARVE_OK;
    carve_block *r = heap_find(a, p->stream, want);
    if (!r && need < want)
        r = heap_find(a, p->stream, need);
    if (!r)
        return NULL;
    size_t take = r->size >= want ? want : need;
    int from_end = cls == CARVE_CLASS_SMALL && r->size > take;
    uintptr_t at = from_end ? r->addr + r->size - take : r->addr;
    if (carve_pagemap_prepare(&a->pmap, at, take) != 0 || carve_slab_reserve(&h->slab, 1) != 0) {
        carve_note_host(1, "host memory exhausted for carve's metadata");
        *st = CARVE_ERR_OOM;
        return NULL;
    }
    carve_index_remove(&h->index, r);
    if (r->size > take) {
        /* Split: the part left free keeps waiting on r's event, if any. */
        carve_block *rest = carve_slab_get_clear(&h->slab);
        rest->size = r->size - take;
        rest->state = CARVE_B_FREE;
        rest->stream = r->stream;
        rest->u.r.seg = r->u.r.seg;
        rest->u.r.event = r->u.r.event;
        rest->u.r.seq = r->u.r.seq;
        r->u.r.event = NULL;
        if (from_end) { /* rest takes the low part, before r */
            rest->addr = r->addr;
            rest->prev = r->prev;
            rest->next = r;
            if (r->prev)
                r->prev->next = rest;
            else
                r->u.r.seg->first = rest;
            r->prev = rest;
            r->addr = at;
        } else {
            rest->addr = r->addr + take;
            rest->prev = r;
            rest->next = r->next;
            if (r->next)
                r->next->prev = rest;
            r->next = rest;
        }
        r->size = take;
        carve_index_insert(&h->index, rest);
    } else {
        range_drop_event(a, r);
    }
    r->state = CARVE_B_SPAN;
    r->cls = cls;
    r->stream = p->stream;
    r->u.r.first = r->u.r.last = NULL;
    r->u.r.nlive = 0;
    r->u.r.unmapped = a->vmm ? r->size / CARVE_SEGMENT_GRANULE : 0; /* a free range holds nothing mapped */
    CARVE_STORE_REL(&r->u.r.pool, p);
    carve_pagemap_set(&a->pmap, r->addr, r->size, r, 0);
    return r;
}

size_t carve_heap_extend(carve_arena *a, carve_block *span, size_t need, size_t want) {
    carve_heap *h = &a->heap;
    carve_block *n = span->next;
    int merged;
    if (!n || n->state != CARVE_B_FREE || n->size < need)
        return 0;
    /* (A merge never reaches back into span, so n stays span's neighbour.) */
    if (!range_open(n, span->stream) && (!(n = range_for(a, n, span->stream, &merged)) || n->size < need))
        return 0;
    CARVE_ASSERT_INTERNAL(n == span->next);
    size_t take = n->size < want ? n->size : want;
    if (carve_pagemap_prepare(&a->pmap, n->addr, take) != 0)
        return 0;
    carve_index_remove(&h->index, n);
    uintptr_t at = n->addr;
    if (n->size > take) {
        n->addr += take;
        n->size -= take;
        carve_index_insert(&h->index, n);
    } else {
        range_drop_event(a, n);
        span->next = n->next;
        if (n->next)
            n->next->prev = span;
        carve_slab_put(&h->slab, n);
    }
    span->size += take;
    if (a->vmm)
        span->u.r.unmapped += take / CARVE_SEGMENT_GRANULE;
    carve_pagemap_set(&a->pmap, at, take, span, 0);
    return take;
}

void carve_heap_give(carve_arena *a, carve_block *span, void *ev) {
    carve_heap *h = &a->heap;
    carve_pagemap_set(&a->pmap, span->addr, span->size, NULL, 0);
    CARVE_STORE_REL(&span->u.r.pool, (carve_pool *)NULL);
    span->state = CARVE_B_FREE;
    span->u.r.first = NULL;
    span->u.r.nlive = 0;
    span->u.r.event = ev; /* numbered when it was recorded (u.r.seq) */
    carve_index_insert(&h->index, span);
    range_coalesce(a, span);
}

/* carve_heap_cut and carve_heap_move: [lo, hi) leaves span as a free range
 * (to NULL) or as a new span of pool to (its memory mapped, as it was). */
static int cut_out(carve_arena *a, carve_block *span, uintptr_t lo, uintptr_t hi, carve_block **right,
                   carve_pool *to, carve_block **moved) {
    carve_heap *h = &a->heap;
    carve_segment *seg = span->u.r.seg;
    uintptr_t end = span->addr + span->size;
    *right = NULL;
    CARVE_ASSERT_INTERNAL(span->state == CARVE_B_SPAN && lo % CARVE_SEGMENT_GRANULE == 0 &&
                          hi % CARVE_SEGMENT_GRANULE == 0 && lo >= span->addr && hi <= end && lo < hi &&
                          (lo > span->addr || hi < end));
    /* The map gets two new ends, lo and hi, inside the span's range. */
    if (carve_slab_reserve(&h->slab, 2) != 0 || carve_pagemap_prepare(&a->pmap, lo, hi - lo) != 0 ||
        carve_pagemap_prepare(&a->pmap, hi, end - hi) != 0)
        return -1;
    carve_block *f = carve_slab_get_clear(&h->slab);
    f->addr = lo;
    f->size = hi - lo;
    f->state = CARVE_B_FREE;
    f->stream = span->stream;
    f->u.r.seg = seg;
    if (lo > span->addr && hi < end) { /* inside: span, then f, then a new span r */
        carve_block *r = carve_slab_get_clear(&h->slab);
        r->addr = hi;
        r->size = end - hi;
        r->state = CARVE_B_SPAN;
        r->cls = span->cls;
        r->stream = span->stream;
        r->u.r.seg = seg;
        r->prev = f;
        r->next = span->next;
        if (r->next)
            r->next->prev = r;
        f->prev = span;
        f->next = r;
        span->next = f;
        span->size = lo - span->addr;
        CARVE_STORE_REL(&r->u.r.pool, span->u.r.pool);
        carve_pagemap_set(&a->pmap, hi, end - hi, r, 1); /* its live buffers may be freed meanwhile */
        *right = r;
    } else if (lo == span->addr) { /* the front: f before span */
        f->prev = span->prev;
        f->next = span;
        if (span->prev)
            span->prev->next = f;
        else
            seg->first = f;
        span->prev = f;
        span->addr = hi;
        span->size = end - hi;
    } else { /* the back: f after span */
        f->prev = span;
        f->next = span->next;
        if (f->next)
            f->next->prev = f;
        span->next = f;
        span->size = lo - span->addr;
    }
    if (to) { /* mapped memory that moves to another stream's pool as it is */
        f->state = CARVE_B_SPAN;
        f->cls = span->cls;
        f->stream = to->stream;
        f->u.r.first = f->u.r.last = NULL;
        f->u.r.nlive = 0;
        f->u.r.unmapped = 0;
        CARVE_STORE_REL(&f->u.r.pool, to);
        carve_pagemap_set(&a->pmap, lo, hi - lo, f, 0);
        *moved = f;
        return 0;
    }
    carve_pagemap_set(&a->pmap, lo, hi - lo, NULL, 0);
    if (a->vmm) /* [lo, hi) is unmapped room; what right takes of the rest, the pool counts (pool.c) */
        span->u.r.unmapped -= (hi - lo) / CARVE_SEGMENT_GRANULE;
    carve_index_insert(&h->index, f);
    range_coalesce(a, f);
    return 0;
}

int carve_heap_cut(carve_arena *a, carve_block *span, uintptr_t lo, uintptr_t hi, carve_block **right) {
    return cut_out(a, span, lo, hi, right, NULL, NULL);
}

carve_block *carve_heap_move(carve_arena *a, carve_block *span, uintptr_t lo, uintptr_t hi, carve_pool *to,
                             carve_block **right) {
    carve_block *moved = NULL;
    if (cut_out(a, span, lo, hi, right, to, &moved) != 0)
        return NULL;
    return moved;
}

/* The preferred growth step: a fixed min_grow when configured, else an
 * eighth of what is reserved (at least a granule, at most 64 MiB). Larger
 * segments let a stream's spans grow in place and merge; the cap bounds how
 * far the last step can overshoot the need. */
static size_t grow_step(const carve_arena *a) {
    if (a->min_grow)
        return a->min_grow;
    size_t g = carve_align_up(CARVE_LOAD(&a->heap.reserved) / 8, CARVE_SEGMENT_GRANULE);
    if (g < CARVE_SEGMENT_GRANULE)
        g = CARVE_SEGMENT_GRANULE;
    return g < CARVE_AUTO_GROW_MAX ? g : CARVE_AUTO_GROW_MAX;
}

/* Pick a segment size under the limit: the preferred size, else the least
 * that fits the request. 0 when nothing fits. */
static size_t grow_size(carve_arena *a, size_t want, size_t need) {
    carve_heap *h = &a->heap;
    size_t used = CARVE_LOAD(&h->reserved) + CARVE_LOAD(&h->inflight);
    size_t limit = CARVE_LOAD(&a->limit), room = limit > used ? limit - used : 0;
    size_t step = grow_step(a);
    size_t pref = want > step ? want : step;
    size_t least = need > a->min_grow ? need : a->min_grow;
    if (pref <= room)
        return pref;
    if (least <= room)
        return least;
    if (need <= room)
        return need;
    return 0;
}

static carve_status heap_add_segment(carve_arena *a, uintptr_t base, size_t size, size_t need) {
    carve_heap *h = &a->heap;
    uintptr_t ub = carve_align_up(base, CARVE_SEGMENT_GRANULE);
    uintptr_t ue = carve_align_down(base + size, CARVE_SEGMENT_GRANULE);
    carve_segment *seg = NULL;
    carve_status st = CARVE_OK;
    if (ue <= ub || ue - ub < need) {
        carve_note("the backend returned a block not aligned to %zu bytes", (size_t)CARVE_SEGMENT_GRANULE);
        st = CARVE_ERR_BACKEND;
    } else if (!(seg = calloc(1, sizeof(*seg))) || carve_slab_reserve(&h->slab, 1) != 0) {
        /* (A segment costs this record and one range, whatever its size.) */
        carve_note_host(1, "host memory exhausted for carve's metadata");
        st = CARVE_ERR_OOM;
    }
    if (st != CARVE_OK) {
        free(seg);
        a->be.ops->release(&a->be, base, size);
        return st;
    }
    carve_block *r = carve_slab_get_clear(&h->slab);
    r->addr = ub;
    r->size = ue - ub;
    r->state = CARVE_B_FREE;
    r->u.r.seg = seg;
    seg->base = ub;
    seg->size = ue - ub;
    seg->raw_base = base;
    seg->raw_size = size;
    seg->first = r;
    seg->serial = __atomic_add_fetch(&h->nreserve, 1, __ATOMIC_RELAXED); /* atomic: granule maps count here too */
    seg->next = h->segs;
    if (h->segs)
        h->segs->prev = seg;
    h->segs = seg;
    h->nsegs++;
    if (!a->vmm) { /* in virtual-memory mode only mapped granules count */
        carve_atomic_max(&h->reserved_peak, __atomic_add_fetch(&h->reserved, size, __ATOMIC_RELAXED));
    }
    carve_index_insert(&h->index, r);
    return CARVE_OK;
}

carve_status carve_heap_grow(carve_arena *a, size_t want, size_t need, carve_stream served) {
    carve_heap *h = &a->heap;
    char b1[32], b2[32], b3[32], b4[32];
    size_t size;
    if (a->vmm) {
        /* Address space: twice the limit at first (64 GiB when unlimited),
         * and another piece whenever no free range is large enough. Live
         * buffers can leave any fixed amount without a free range of the
         * size a request needs, and a reservation holds no memory, so the
         * limit on mapped bytes is the only limit there is. */
        size = h->nsegs == 0 ? a->va_size : a->va_step;
        if (size < need)
            size = carve_align_up(need, CARVE_SEGMENT_GRANULE);
    } else if (!a->growth) {
        if (h->nsegs > 0 || CARVE_LOAD(&h->inflight) > 0) {
            const carve_segment *s = h->segs;
            if (s && s->size < s->raw_size) /* the backend did not align it (below) */
                carve_note("growth is off and the arena's one block of %s (%s of it usable: the backend did not "
                           "align it to the granule) has no free range that fits",
                           carve_format_bytes(b1, sizeof(b1), s->raw_size), carve_format_bytes(b2, sizeof(b2), s->size));
            else
                carve_note("growth is off and the arena's one block of %s has no free range that fits",
                           carve_format_bytes(b1, sizeof(b1), a->initial));
            return CARVE_ERR_OOM;
        }
        size = a->initial; /* the block was given back by empty_cache: take it again */
        if (size < need) {
            carve_note("growth is off and the request needs more than the arena's block of %s",
                       carve_format_bytes(b1, sizeof(b1), a->initial));
            return CARVE_ERR_OOM;
        }
        /* The arena's one block, however much of it a backend that does not
         * align it leaves usable (below): a request it cannot hold then
         * finds no room in it. */
        need = CARVE_SEGMENT_GRANULE;
    } else {
        /* Rather than raise the reserved peak, give fully free segments back
         * first: the new segment then replaces them instead of adding to them.
         * Not while a stream capture is underway: giving memory back may
         * wait for the device, which would break the capture. */
        if (CARVE_LOAD(&h->reserved) + (want > need ? want : need) > CARVE_LOAD(&h->reserved_peak) &&
            !carve_capture_underway(a, served))
            carve_heap_release_free(a);
        if (!(size = grow_size(a, want, need))) {
            carve_note("growing by %s would pass the limit of %s (%s reserved)",
                       carve_format_bytes(b1, sizeof(b1), need), carve_format_bytes(b2, sizeof(b2), a->limit),
                       carve_format_bytes(b3, sizeof(b3), CARVE_LOAD(&h->reserved) + CARVE_LOAD(&h->inflight)));
            return CARVE_ERR_OOM;
        }
    }
    /* In flight against the limit; address space (virtual-memory mode)
     * holds no memory. */
    size_t held = a->vmm ? 0 : size;
    __atomic_add_fetch(&h->inflight, held, __ATOMIC_RELAXED);
    carve_mutex_unlock(&h->lock);
    uintptr_t base = 0;
    carve_status st = a->be.ops->reserve(&a->be, size, &base);
    if (st == CARVE_OK && base % CARVE_SEGMENT_GRANULE && !a->vmm) {
        /* The driver promises 256-byte alignment only, and the aligned part
         * of such a block is a granule short. The limit caps what the
         * backend holds (the block as it came): one granule more is asked
         * for only where it fits under the limit; else the block stays if
         * its aligned part still holds need, and heap_add_segment uses that
         * part. */
        const size_t G = CARVE_SEGMENT_GRANULE;
        /* In flight first, then the limit (sequentially consistent, as
         * carve_set_limit stores the limit and then reads inflight; the
         * heap lock is not held): a limit lowered meanwhile is seen here,
         * or the granule is in what it lets stay over the limit. */
        size_t used = __atomic_add_fetch(&h->inflight, G, __ATOMIC_SEQ_CST) + CARVE_LOAD(&h->reserved);
        int fits = used <= __atomic_load_n(&a->limit, __ATOMIC_SEQ_CST);
        if (!fits)
            __atomic_sub_fetch(&h->inflight, G, __ATOMIC_RELAXED);
        if (fits) {
            a->be.ops->release(&a->be, base, size);
            held = size = size + G;
            st = a->be.ops->reserve(&a->be, size, &base);
        } else if (size - G < need) {
            a->be.ops->release(&a->be, base, size);
            st = CARVE_ERR_OOM;
            carve_backend_fail("it returned a block not aligned to %s, whose aligned part (%s) is less than the %s "
                               "needed, and one granule more would pass the limit of %s",
                               carve_format_bytes(b1, sizeof(b1), G), carve_format_bytes(b2, sizeof(b2), size - G),
                               carve_format_bytes(b3, sizeof(b3), need),
                               carve_format_bytes(b4, sizeof(b4), CARVE_LOAD(&a->limit)));
        }
    }
    carve_mutex_lock(&h->lock);
    __atomic_sub_fetch(&h->inflight, held, __ATOMIC_RELAXED);
    if (st != CARVE_OK) {
        carve_note_host(carve_backend_host(), "the %s backend could not reserve %s: %s", carve_backend_str(a->be.kind),
                        carve_format_bytes(b1, sizeof(b1), size), carve_backend_msg());
        return st;
    }
    return heap_add_segment(a, base, size, need);
}

void carve_heap_sync(carve_arena *a) {
    carve_heap *h = &a->heap;
    for (carve_segment *s = h->segs; s; s = s->next)
        for (carve_block *r = s->first; r; r = r->next)
            if (r->state == CARVE_B_FREE && r->u.r.event && carve_wait_event(a, r->u.r.event) == CARVE_OK)
                range_drop_event(a, r); /* (a wait refused keeps the range's event) */
    for (carve_segment *s = h->segs; s; s = s->next)
        for (carve_block *r = s->first; r; r = r->next)
            if (r->state == CARVE_B_FREE)
                r = range_coalesce(a, r);
}

/* A segment that is one free range whose event (if any) has completed. */
static int segment_free(carve_arena *a, carve_segment *s) {
    carve_block *r = s->first;
    if (r->state != CARVE_B_FREE || r->next)
        return 0;
    if (r->u.r.event && carve_event_query(a, r->u.r.event) != 0)
        range_drop_event(a, r);
    return !r->u.r.event;
}

carve_status carve_heap_release_free(carve_arena *a) {
    carve_heap *h = &a->heap;
    carve_status result = CARVE_OK;
    carve_segment *kept = NULL; /* segments the backend refused to take back */
    for (;;) {
        carve_segment *s = h->segs;
        while (s && !segment_free(a, s))
            s = s->next;
        if (!s)
            break;
        /* (In virtual-memory mode a free range holds nothing mapped: spans
         * are unmapped before they go back, and what is mapped is described
         * by pool blocks only.) Detach; count the bytes as in flight until the backend has them. */
        if (s->prev)
            s->prev->next = s->next;
        else
            h->segs = s->next;
        if (s->next)
            s->next->prev = s->prev;
        size_t held = a->vmm ? 0 : s->raw_size; /* mapped bytes were counted by the unmapping */
        h->nsegs--;
        carve_index_remove(&h->index, s->first);
        __atomic_sub_fetch(&h->reserved, held, __ATOMIC_RELAXED);
        __atomic_add_fetch(&h->inflight, held, __ATOMIC_RELAXED);
        carve_mutex_unlock(&h->lock);
        carve_status st = a->be.ops->release(&a->be, s->raw_base, s->raw_size);
        carve_mutex_lock(&h->lock);
        __atomic_sub_fetch(&h->inflight, held, __ATOMIC_RELAXED);
        if (st == CARVE_OK) {
            __atomic_add_fetch(&h->nrelease, 1, __ATOMIC_RELAXED); /* in virtual-memory mode, the address space */
            carve_slab_put(&h->slab, s->first);
            free(s);
        } else {
            carve_note("the %s backend refused to release a segment: %s",
                       carve_backend_str(a->be.kind), carve_backend_msg());
            result = st;
            s->prev = NULL;
            s->next = kept;
            kept = s;
            __atomic_add_fetch(&h->reserved, held, __ATOMIC_RELAXED);
        }
    }
    while (kept) { /* still reserved and usable */
        carve_segment *s = kept;
        kept = s->next;
        s->next = h->segs;
        if (h->segs)
            h->segs->prev = s;
        h->segs = s;
        h->nsegs++;
        carve_index_insert(&h->index, s->first);
    }
    return result;
}

size_t carve_heap_largest_free(const carve_arena *a) { return carve_index_largest(&a->heap.index); }

void carve_heap_destroy(carve_arena *a) {
    carve_heap *h = &a->heap;
    carve_segment *s = h->segs;
    while (s) {
        carve_segment *n = s->next;
        for (carve_block *r = s->first; r; r = r->next)
            range_drop_event(a, r); /* free ranges and empty spans (nothing is mapped: the pools unmapped it) */
        a->be.ops->release(&a->be, s->raw_base, s->raw_size);
        free(s);
        s = n;
    }
    h->segs = NULL;
    h->nsegs = 0;
    carve_slab_destroy(&h->slab);
    carve_mutex_destroy(&h->lock);
}

int carve_arena_contains(const carve_arena *ca, const void *addr) {
    if (!ca || !addr)
        return 0;
    carve_arena *a = (carve_arena *)ca; /* the lock is taken; nothing observable changes */
    uintptr_t x = (uintptr_t)addr;
    int found = 0;
    carve_mutex_lock(&a->heap.lock);
    for (const carve_segment *s = a->heap.segs; s && !found; s = s->next)
        found = x >= s->raw_base && x - s->raw_base < s->raw_size;
    carve_mutex_unlock(&a->heap.lock);
    return found;
}
