/*
 * check.c — carve_check: walk every invariant of an arena.
 *
 * The walk tiles each segment with its ranges and each span with its
 * blocks, recounting everything, then compares the recount with the indexes,
 * hash tables and counters. Index membership is proved without searching:
 * every list node must be a free block of the right owner and class, lists
 * must be well linked, and the list total must equal the number of free
 * blocks the walk found; a set of distinct members of the right size is the
 * whole set.
 */
#include <string.h>

#include "engine/error.h"
#include "engine/pool.h"
#include "engine/vmm.h"

typedef struct tally {
    const carve_pool *pool;
    size_t nfree[2], free_bytes[2];
    size_t nused, used_bytes, req_bytes, npending, nspans, nhot;
    size_t nunmapped[2]; /* virtual-memory mode: UNMAPPED blocks */
} tally;

#define FAIL(...)                                                   \
    do {                                                            \
        st = carve_fail(a, CARVE_ERR_INVALID, "carve_check: " __VA_ARGS__); \
        goto out;                                                   \
    } while (0)

/* Structure of one index: bitmaps match lists, nodes sit in their class,
 * links are consistent, and owner(node, arg) holds for every node. */
static const char *check_index(const carve_index *ix, int (*owner)(const carve_block *, const void *),
                               const void *arg) {
    size_t n = 0, bytes = 0;
    for (unsigned fl = 0; fl < CARVE_FL_COUNT; fl++) {
        if (!!(ix->fl_map & ((uint64_t)1 << fl)) != !!ix->sl_map[fl])
            return "first-level bitmap disagrees with second level";
        for (unsigned sl = 0; sl < CARVE_SL_COUNT; sl++) {
            const carve_block *h = ix->heads[fl][sl];
            if (!!(ix->sl_map[fl] & (1u << sl)) != !!h)
                return "second-level bitmap disagrees with a list";
            const carve_block *prev = NULL;
            for (const carve_block *b = h; b; prev = b, b = b->fnext) {
                unsigned f, s;
                carve_index_class(b->size, &f, &s);
                if (f != fl || s != sl || b->fl != fl || b->sl != sl)
                    return "a free block sits in the wrong size class";
                if (b->fprev != prev)
                    return "a free list is badly linked";
                if (b->state != CARVE_B_FREE || !owner(b, arg))
                    return "an index holds a block that is not one of its free blocks";
                if (++n > ix->count)
                    return "an index holds more blocks than it counts";
                bytes += b->size;
            }
        }
    }
    if (n != ix->count || bytes != ix->bytes)
        return "an index's count or byte total is wrong";
    return NULL;
}

static int heap_owner(const carve_block *b, const void *arg) {
    (void)arg;
    return b->u.r.seg != NULL;
}

typedef struct pool_owner {
    const carve_pool *p;
    unsigned cls;
} pool_owner;

static int pool_owns(const carve_block *b, const void *arg) {
    const pool_owner *o = arg;
    const carve_block *span = b->span;
    return span && span->state == CARVE_B_SPAN && span->u.r.pool == o->p && b->cls == o->cls;
}

/* An entry of the address map names span for [addr, addr+size): a span
 * that holds all of it. */
static int map_entry_ok(const carve_block *span, uintptr_t addr, size_t size, void *arg) {
    (void)arg;
    return span->state != CARVE_B_SPAN || addr < span->addr || size > span->size ||
           addr - span->addr > span->size - size;
}

carve_status carve_check(const carve_arena *ca) {
    if (!ca)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_check: arena is NULL");
    carve_arena *a = (carve_arena *)ca;
    carve_status st = CARVE_OK;
    const carve_heap *h = &a->heap;
    /* No pool may appear while the walk runs: a new pool could own a span. */
    carve_mutex_lock(&a->pools_lock);
    carve_pool *first = carve_pools_first(a);
    size_t npools = 0;
    for (carve_pool *p = first; p; p = p->next_all)
        npools++;
    tally *t = calloc(npools ? npools : 1, sizeof(*t));
    if (!t) {
        carve_mutex_unlock(&a->pools_lock);
        return carve_fail(a, CARVE_ERR_OOM, "carve_check: host memory exhausted");
    }
    size_t np = 0;
    for (carve_pool *p = first; p && np < npools; p = p->next_all) {
        carve_spin_lock(&p->lock);
        t[np++].pool = p;
    }
    carve_mutex_lock(&a->heap.lock);

    size_t reserved = 0, nsegs = 0, nfree = 0, free_bytes = 0, touched = 0;
    const char *why;
    uint32_t *refs = NULL; /* virtual-memory mode: recounted granule references */
    for (const carve_segment *s = h->segs; s; s = s->next) {
        nsegs++;
        if (a->vmm) {
            free(refs);
            refs = calloc(s->ngran ? s->ngran : 1, sizeof(*refs));
            if (!refs || s->ngran != s->size / CARVE_SEGMENT_GRANULE)
                FAIL("segment %#lx: no memory for the granule recount, or a wrong granule count",
                     (unsigned long)s->base);
            for (size_t g = 0; g < s->ngran; g++)
                reserved += s->gmapped[g] ? CARVE_SEGMENT_GRANULE : 0;
        } else {
            reserved += s->raw_size;
        }
        if (s->base % CARVE_SEGMENT_GRANULE || s->size % CARVE_SEGMENT_GRANULE || s->base < s->raw_base ||
            s->base + s->size > s->raw_base + s->raw_size)
            FAIL("segment %#lx is misaligned or outside its reservation", (unsigned long)s->base);
        if (!s->first || s->first->prev)
            FAIL("segment %#lx has no proper first range", (unsigned long)s->base);
        uintptr_t at = s->base;
        for (const carve_block *r = s->first; r; r = r->next) {
            if (r->addr != at)
                FAIL("ranges of segment %#lx leave a gap or overlap at %#lx", (unsigned long)s->base,
                     (unsigned long)at);
            if (r->size == 0 || r->size % CARVE_SEGMENT_GRANULE || r->u.r.seg != s ||
                (r->next && r->next->prev != r))
                FAIL("range %#lx is malformed", (unsigned long)r->addr);
            at += r->size;
            if (r->state == CARVE_B_FREE) {
                if (a->vmm && carve_vmm_unmapped(s, r->addr, r->size) != r->size / CARVE_SEGMENT_GRANULE)
                    FAIL("free range %#lx holds mapped granules", (unsigned long)r->addr);
                nfree++;
                free_bytes += r->size;
                if (!carve_pagemap_covers(&a->pmap, r->addr, r->size, NULL))
                    FAIL("free range %#lx is still mapped to a span", (unsigned long)r->addr);
                const carve_block *n = r->next;
                if (n && n->state == CARVE_B_FREE &&
                    (!r->u.r.event || !n->u.r.event || r->stream == n->stream))
                    FAIL("free ranges %#lx and %#lx are not merged", (unsigned long)r->addr,
                         (unsigned long)n->addr);
                continue;
            }
            if (r->state != CARVE_B_SPAN)
                FAIL("range %#lx has state %u", (unsigned long)r->addr, r->state);
            tally *pt = NULL;
            for (size_t i = 0; i < np; i++)
                if (t[i].pool == r->u.r.pool)
                    pt = &t[i];
            if (!pt || r->cls > CARVE_CLASS_LARGE)
                FAIL("span %#lx has no valid pool or class", (unsigned long)r->addr);
            if (!carve_pagemap_covers(&a->pmap, r->addr, r->size, r))
                FAIL("span %#lx is not mapped to itself", (unsigned long)r->addr);
            pt->nspans++;
            uintptr_t bat = r->addr;
            size_t live = 0;
            const carve_block *prev = NULL;
            for (const carve_block *b = r->u.r.first; b; prev = b, b = b->next) {
                if (b->addr != bat || b->prev != prev || b->span != r || b->cls != r->cls ||
                    b->size == 0 || b->size % CARVE_ALIGNMENT)
                    FAIL("block %#lx in span %#lx is malformed or misplaced", (unsigned long)b->addr,
                         (unsigned long)r->addr);
                bat += b->size;
                if (bat > r->addr + r->size)
                    FAIL("block %#lx runs past its span", (unsigned long)b->addr);
                switch (b->state) {
                case CARVE_B_FREE:
                    if (b->next && b->next->state == CARVE_B_FREE)
                        FAIL("free blocks %#lx and %#lx are not merged", (unsigned long)b->addr,
                             (unsigned long)b->next->addr);
                    if (a->vmm && carve_vmm_unmapped(s, b->addr, b->size))
                        FAIL("free block %#lx touches unmapped granules", (unsigned long)b->addr);
                    pt->nfree[r->cls]++;
                    pt->free_bytes[r->cls] += b->size;
                    break;
                case CARVE_B_UNMAPPED:
                    if (!a->vmm || b->addr % CARVE_SEGMENT_GRANULE || b->size % CARVE_SEGMENT_GRANULE ||
                        carve_vmm_unmapped(s, b->addr, b->size) != b->size / CARVE_SEGMENT_GRANULE)
                        FAIL("unmapped block %#lx is not whole unmapped granules", (unsigned long)b->addr);
                    if (b->next && b->next->state == CARVE_B_UNMAPPED)
                        FAIL("unmapped blocks %#lx and %#lx are not merged", (unsigned long)b->addr,
                             (unsigned long)b->next->addr);
                    pt->nunmapped[r->cls]++;
                    break;
                case CARVE_B_USED:
                case CARVE_B_PENDING:
                case CARVE_B_HOT:
                    if (refs)
                        for (size_t g = (b->addr - s->base) / CARVE_SEGMENT_GRANULE,
                                    e = (b->addr + b->size - 1 - s->base) / CARVE_SEGMENT_GRANULE;
                             g <= e; g++)
                            refs[g]++;
                    if (b->state == CARVE_B_HOT) {
                        if (pt->pool->hot != b || (b->flags & CARVE_BF_USES))
                            FAIL("hot block %#lx is not its pool's hot block", (unsigned long)b->addr);
                        pt->nhot++;
                        live++;
                        break;
                    }
                    if (b->state == CARVE_B_PENDING) {
                        if (!(b->flags & CARVE_BF_USES) || !b->u.b.uses)
                            FAIL("pending block %#lx has no events", (unsigned long)b->addr);
                        pt->npending++;
                        live++;
                        break;
                    }
                    if (carve_blockmap_get(&pt->pool->map, b->addr) != b)
                        FAIL("live block %#lx is missing from its pool's table", (unsigned long)b->addr);
                    if (carve_block_requested(b) == 0 ||
                        carve_align_up(carve_block_requested(b), CARVE_ALIGNMENT) != b->size)
                        FAIL("live block %#lx has size %zu for a request of %zu", (unsigned long)b->addr,
                             b->size, carve_block_requested(b));
                    pt->nused++;
                    pt->used_bytes += b->size;
                    pt->req_bytes += carve_block_requested(b);
                    live++;
                    break;
                default:
                    FAIL("block %#lx has state %u", (unsigned long)b->addr, b->state);
                }
            }
            if (bat != r->addr + r->size)
                FAIL("blocks of span %#lx do not cover it", (unsigned long)r->addr);
            if (prev != r->u.r.last)
                FAIL("span %#lx does not know its last block", (unsigned long)r->addr);
            if (live != r->u.r.nlive)
                FAIL("span %#lx counts %zu live blocks, has %zu", (unsigned long)r->addr, r->u.r.nlive, live);
            if (live && r->u.r.event)
                FAIL("span %#lx holds live blocks and an empty-span event", (unsigned long)r->addr);
            if (a->vmm && carve_vmm_unmapped(s, r->addr, r->size) != r->u.r.unmapped)
                FAIL("span %#lx counts %zu unmapped granules, has %zu", (unsigned long)r->addr, r->u.r.unmapped,
                     carve_vmm_unmapped(s, r->addr, r->size));
        }
        if (at != s->base + s->size)
            FAIL("ranges of segment %#lx do not cover it", (unsigned long)s->base);
        for (size_t g = 0; refs && g < s->ngran; g++) {
            if (refs[g] != s->gref[g])
                FAIL("granule %zu of segment %#lx counts %u references, has %u", g, (unsigned long)s->base,
                     s->gref[g], refs[g]);
            if (refs[g] && !s->gmapped[g])
                FAIL("granule %zu of segment %#lx holds live blocks but is not mapped", g, (unsigned long)s->base);
            touched += refs[g] != 0;
        }
    }
    if (nsegs != h->nsegs || reserved != h->reserved)
        FAIL("segments recount to %zu (%zu bytes), heap says %zu (%zu bytes)", nsegs, reserved, h->nsegs,
             h->reserved);
    if (h->reserved > a->limit)
        FAIL("reserved %zu bytes, over the limit of %zu", h->reserved, a->limit);
    if (a->vmm) {
        size_t by_pools = 0;
        for (const carve_pool *q = CARVE_LOAD_ACQ(&a->pools); q; q = q->next_all) {
            by_pools += q->touched;
            if (q->touched_peak < q->touched)
                FAIL("a pool touches %zu granules, above its peak of %zu", q->touched, q->touched_peak);
        }
        if (by_pools != touched)
            FAIL("the pools count %zu touched granules, the segments %zu", by_pools, touched);
    }
    if (h->reserved_peak < h->reserved)
        FAIL("reserved peak below reserved");
    /* Each range maps to itself (or nothing) above; here nothing else maps
     * anywhere, and every node is in the tree or on a spare list. */
    size_t reached[2], spares[2];
    if (carve_pagemap_walk(&a->pmap, map_entry_ok, NULL, reached, spares))
        FAIL("the address map names a span outside its range");
    for (unsigned l = 0; l < 2; l++)
        if (reached[l] + spares[l] != a->pmap.nodes[l])
            FAIL("the address map holds %zu %s nodes and %zu spares of %zu", reached[l], l ? "leaf" : "middle",
                 spares[l], a->pmap.nodes[l]);
    if (nfree != h->index.count || free_bytes != h->index.bytes)
        FAIL("heap index holds %zu ranges (%zu bytes), the walk found %zu (%zu bytes)", h->index.count,
             h->index.bytes, nfree, free_bytes);
    if ((why = check_index(&h->index, heap_owner, NULL)))
        FAIL("heap index: %s", why);

    for (size_t i = 0; i < np; i++) {
        const carve_pool *p = t[i].pool;
        for (unsigned c = 0; c < 2; c++) {
            pool_owner o = {p, c};
            if ((why = check_index(&p->index[c], pool_owns, &o)))
                FAIL("pool of stream %p: %s", (void *)p->stream, why);
            if (t[i].nfree[c] != p->index[c].count || t[i].free_bytes[c] != p->index[c].bytes)
                FAIL("pool of stream %p: index %u holds %zu blocks, the walk found %zu", (void *)p->stream, c,
                     p->index[c].count, t[i].nfree[c]);
        }
        for (unsigned c = 0; c < 2; c++) {
            size_t n = 0;
            const carve_block *prev = NULL;
            for (const carve_block *b = p->unmapped[c]; b; prev = b, b = b->fnext) {
                if (++n > t[i].nunmapped[c] || b->state != CARVE_B_UNMAPPED || b->fprev != prev || b->cls != c ||
                    !b->span || b->span->u.r.pool != p)
                    FAIL("pool of stream %p: unmapped list %u is wrong", (void *)p->stream, c);
            }
            if (n != t[i].nunmapped[c])
                FAIL("pool of stream %p: unmapped list %u holds %zu blocks, the walk found %zu", (void *)p->stream,
                     c, n, t[i].nunmapped[c]);
        }
        size_t nspans = 0, npend = 0;
        for (const carve_block *sp = p->spans; sp; sp = sp->fnext)
            if (++nspans > p->nspans || sp->u.r.pool != p)
                FAIL("pool of stream %p: span list is wrong", (void *)p->stream);
        for (const carve_block *b = p->pending_head; b; b = b->fnext)
            if (++npend > p->npending || b->state != CARVE_B_PENDING)
                FAIL("pool of stream %p: pending list is wrong", (void *)p->stream);
        if (nspans != p->nspans || nspans != t[i].nspans || npend != p->npending || npend != t[i].npending)
            FAIL("pool of stream %p: span or pending count is wrong", (void *)p->stream);
        if (t[i].nused != p->map.count || t[i].nused != p->nallocs - p->nfrees)
            FAIL("pool of stream %p: %zu live blocks, table holds %zu, counters say %llu", (void *)p->stream,
                 t[i].nused, p->map.count, (unsigned long long)(p->nallocs - p->nfrees));
        if (t[i].nhot != (p->hot != NULL))
            FAIL("pool of stream %p: hot slot and hot blocks disagree", (void *)p->stream);
        if (t[i].used_bytes != p->allocated || t[i].req_bytes != p->requested)
            FAIL("pool of stream %p: allocated/requested counters (%zu/%zu) differ from the recount (%zu/%zu)",
                 (void *)p->stream, p->allocated, p->requested, t[i].used_bytes, t[i].req_bytes);
        if (p->allocated_peak < p->allocated || p->requested_peak < p->requested)
            FAIL("pool of stream %p: a peak is below its current value", (void *)p->stream);
    }
out:
    free(refs);
    carve_mutex_unlock(&a->heap.lock);
    while (np-- > 0)
        carve_spin_unlock((carve_spin *)&t[np].pool->lock);
    carve_mutex_unlock(&a->pools_lock);
    free(t);
    return st;
}
