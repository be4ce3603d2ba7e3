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
    size_t touched;      /* ... granules live blocks touch */
    size_t nblocks, nruns; /* block records in spans, RUN records */
    struct stamps {      /* ... the stamps of every run, for their disjointness */
        uint64_t first, n;
    } *stamps;
    size_t nstamps, capstamps;
} tally;

static int stamps_add(tally *t, uint64_t first, uint64_t n) {
    if (t->nstamps == t->capstamps) {
        size_t cap = t->capstamps ? 2 * t->capstamps : 64;
        struct stamps *v = realloc(t->stamps, cap * sizeof(*v));
        if (!v)
            return -1;
        t->stamps = v;
        t->capstamps = cap;
    }
    t->stamps[t->nstamps++] = (struct stamps){first, n};
    return 0;
}

static int stamp_order(const void *x, const void *y) {
    const struct stamps *a = x, *b = y;
    return a->first < b->first ? -1 : a->first > b->first;
}

/* Virtual-memory mode: FREE block f's ring of runs is exactly its whole
 * granules, in address order, each run stamped after 0 and at most its
 * pool's clock. NULL when it is, else what is wrong. */
static const char *check_ring(const carve_block *f, tally *t) {
    const size_t G = CARVE_SEGMENT_GRANULE;
    uintptr_t lo = carve_align_up(f->addr, G), hi = carve_align_down(f->addr + f->size, G);
    uintptr_t expect = lo;
    size_t guard = hi > lo ? (hi - lo) / G + 1 : 1;
    const carve_block *x = f;
    do {
        if (x->u.v.rnext->u.v.rprev != x)
            return "a ring of runs is badly linked";
        if (x != f && (x->state != CARVE_B_RUN || x->u.v.n == 0))
            return "a ring of runs holds something that is not a run";
        if (x->u.v.n) {
            if (x->u.v.at != expect || x->u.v.n > (hi - expect) / G)
                return "the runs of a free block are not its whole granules in address order";
            if (x->u.v.stamp == 0 || x->u.v.n > t->pool->vclock || x->u.v.stamp > t->pool->vclock - x->u.v.n + 1)
                return "a run is stamped after its pool's clock";
            if (stamps_add(t, x->u.v.stamp, x->u.v.n) != 0)
                return "no memory for the stamp recount";
            expect += x->u.v.n * G;
            t->nruns += x != f;
        }
        x = x->u.v.rnext;
        if (!guard--)
            return "a ring of runs does not close";
    } while (x != f);
    if (hi > lo && expect != hi)
        return "the runs of a free block leave some of its whole granules out";
    return NULL;
}

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
        return carve_fail_host(a, CARVE_ERR_OOM, 1, "carve_check: host memory exhausted");
    }
    size_t np = 0;
    for (carve_pool *p = first; p && np < npools; p = p->next_all) {
        carve_spin_lock(&p->lock);
        t[np++].pool = p;
    }
    carve_mutex_lock(&a->heap.lock);
    carve_mutex_lock(&a->maps.lock);
    const carve_maps *mp = &a->maps;
    size_t nmaps_seen = 0;

    size_t reserved = 0, nsegs = 0, nfree = 0, free_bytes = 0;
    const char *why;
    for (const carve_segment *s = h->segs; s; s = s->next) {
        nsegs++;
        if (!a->vmm) /* (virtual-memory mode: the mapped granules of each span, below) */
            reserved += s->raw_size;
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
                /* (Virtual-memory mode: a free range holds nothing mapped by
                 * construction, as only pool blocks say what is; that no
                 * mapped byte went with a span is the recount of reserved.) */
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
            /* The mappings of more than a granule that start in this span
             * (maps.h) end in it, and no UNMAPPED block meets them (below). */
            size_t mfirst, mn = carve_maps_within(mp, r->addr, r->addr + r->size, &mfirst), mk = mfirst;
            for (size_t k = mfirst; k < mfirst + mn; k++)
                if (mp->v[k].addr + mp->v[k].size > r->addr + r->size)
                    FAIL("mapping %#lx of %zu bytes runs past its span %#lx", (unsigned long)mp->v[k].addr,
                         mp->v[k].size, (unsigned long)r->addr);
            nmaps_seen += mn;
            uintptr_t bat = r->addr, touched_to = r->addr;
            size_t live = 0, unmapped = 0;
            const carve_block *prev = NULL;
            for (const carve_block *b = r->u.r.first; b; prev = b, b = b->next) {
                if (b->addr != bat || b->prev != prev || b->span != r || b->cls != r->cls ||
                    b->size == 0 || b->size % CARVE_ALIGNMENT)
                    FAIL("block %#lx in span %#lx is malformed or misplaced", (unsigned long)b->addr,
                         (unsigned long)r->addr);
                bat += b->size;
                if (bat > r->addr + r->size)
                    FAIL("block %#lx runs past its span", (unsigned long)b->addr);
                pt->nblocks++;
                switch (b->state) {
                case CARVE_B_FREE:
                    if (b->next && b->next->state == CARVE_B_FREE)
                        FAIL("free blocks %#lx and %#lx are not merged", (unsigned long)b->addr,
                             (unsigned long)b->next->addr);
                    /* (Its granules are mapped: UNMAPPED blocks are whole granules, so
                     * none of them is a FREE block's.) */
                    if (a->vmm && (why = check_ring(b, pt)))
                        FAIL("free block %#lx: %s", (unsigned long)b->addr, why);
                    pt->nfree[r->cls]++;
                    pt->free_bytes[r->cls] += b->size;
                    break;
                case CARVE_B_UNMAPPED:
                    if (!a->vmm || b->addr % CARVE_SEGMENT_GRANULE || b->size % CARVE_SEGMENT_GRANULE)
                        FAIL("unmapped block %#lx is not whole granules", (unsigned long)b->addr);
                    unmapped += b->size / CARVE_SEGMENT_GRANULE;
                    while (mk < mfirst + mn && mp->v[mk].addr + mp->v[mk].size <= b->addr)
                        mk++;
                    if (mk < mfirst + mn && mp->v[mk].addr < b->addr + b->size)
                        FAIL("unmapped block %#lx lies in mapping %#lx of %zu bytes", (unsigned long)b->addr,
                             (unsigned long)mp->v[mk].addr, mp->v[mk].size);
                    if (b->next && b->next->state == CARVE_B_UNMAPPED)
                        FAIL("unmapped blocks %#lx and %#lx are not merged", (unsigned long)b->addr,
                             (unsigned long)b->next->addr);
                    pt->nunmapped[r->cls]++;
                    break;
                case CARVE_B_USED:
                case CARVE_B_PENDING:
                case CARVE_B_HOT:
                    if (a->vmm) { /* the granules it touches that no live block before it did */
                        uintptr_t ga = carve_align_down(b->addr, CARVE_SEGMENT_GRANULE),
                                  gb = carve_align_up(b->addr + b->size, CARVE_SEGMENT_GRANULE);
                        if (ga < touched_to)
                            ga = touched_to;
                        if (gb > ga) {
                            pt->touched += (gb - ga) / CARVE_SEGMENT_GRANULE;
                            touched_to = gb;
                        }
                    }
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
            if (a->vmm && unmapped != r->u.r.unmapped)
                FAIL("span %#lx counts %zu unmapped granules, has %zu", (unsigned long)r->addr, r->u.r.unmapped,
                     unmapped);
            if (a->vmm)
                reserved += r->size - unmapped * CARVE_SEGMENT_GRANULE;
        }
        if (at != s->base + s->size)
            FAIL("ranges of segment %#lx do not cover it", (unsigned long)s->base);
    }
    for (size_t k = 0; k < mp->n; k++)
        if (mp->v[k].size <= CARVE_SEGMENT_GRANULE || mp->v[k].addr % CARVE_SEGMENT_GRANULE ||
            mp->v[k].size % CARVE_SEGMENT_GRANULE || (k && mp->v[k - 1].addr + mp->v[k - 1].size > mp->v[k].addr))
            FAIL("mapping record %zu (%#lx, %zu bytes) is not a granule-aligned mapping of several granules "
                 "after the one before it",
                 k, (unsigned long)mp->v[k].addr, mp->v[k].size);
    if (nmaps_seen != mp->n || (!a->vmm && mp->n))
        FAIL("%zu mappings of several granules are recorded, %zu of them in spans", mp->n, nmaps_seen);
    if (nsegs != h->nsegs || reserved != h->reserved)
        FAIL("segments recount to %zu (%zu bytes), heap says %zu (%zu bytes)", nsegs, reserved, h->nsegs,
             h->reserved);
    if (h->reserved > a->limit && h->reserved > a->limit_over)
        FAIL("reserved %zu bytes, over the limit of %zu (and over the %zu bytes held when it was lowered)",
             h->reserved, a->limit, a->limit_over);
    for (size_t i = 0; a->vmm && i < np; i++) {
        const carve_pool *q = t[i].pool;
        if (q->touched != t[i].touched)
            FAIL("pool of stream %p counts %zu touched granules, its blocks touch %zu", (void *)q->stream, q->touched,
                 t[i].touched);
        if (q->touched_peak < q->touched)
            FAIL("a pool touches %zu granules, above its peak of %zu", q->touched, q->touched_peak);
        /* Stamps are the pool's clock, one granule each: no two runs share one. */
        if (t[i].nstamps > 1)
            qsort(t[i].stamps, t[i].nstamps, sizeof(*t[i].stamps), stamp_order);
        for (size_t k = 1; k < t[i].nstamps; k++)
            if (t[i].stamps[k - 1].first + t[i].stamps[k - 1].n > t[i].stamps[k].first)
                FAIL("pool of stream %p: two runs share a stamp", (void *)q->stream);
        if (q->vdone > q->vclock)
            FAIL("pool of stream %p: done up to %llu, after its clock %llu", (void *)q->stream,
                 (unsigned long long)q->vdone, (unsigned long long)q->vclock);
        for (unsigned k = 0; k < q->vfence_n; k++)
            if (q->vfence[(q->vfence_head + k) % CARVE_VMM_FENCES].clock > q->vclock ||
                (k && q->vfence[(q->vfence_head + k) % CARVE_VMM_FENCES].clock <
                          q->vfence[(q->vfence_head + k - 1) % CARVE_VMM_FENCES].clock))
                FAIL("pool of stream %p: its fences are out of order", (void *)q->stream);
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
        if (p->hot && p->index[p->hot->cls].ordered && p->hot_low == p->hot->addr &&
            p->hot_low_gen == p->index[p->hot->cls].gen) { /* the kept answer of carve_alloc's hot path */
            const carve_block *c = carve_index_find_low(&p->index[p->hot->cls], p->hot->size);
            if (c && c->addr < p->hot->addr)
                FAIL("pool of stream %p: hot block %#lx is kept as the lowest place for its size, but free "
                     "block %#lx is lower", (void *)p->stream, (unsigned long)p->hot->addr, (unsigned long)c->addr);
        }
        if (t[i].used_bytes != p->allocated || t[i].req_bytes != p->requested)
            FAIL("pool of stream %p: allocated/requested counters (%zu/%zu) differ from the recount (%zu/%zu)",
                 (void *)p->stream, p->allocated, p->requested, t[i].used_bytes, t[i].req_bytes);
        if (p->allocated_peak < p->allocated || p->requested_peak < p->requested)
            FAIL("pool of stream %p: a peak is below its current value", (void *)p->stream);
        /* Every record of the pool's slab is free, a block of a span, a run
         * (virtual-memory mode), or taken out by a test: none is lost. */
        if (p->slab.nchunks * CARVE_SLAB_CHUNK != p->slab.nfree + t[i].nblocks + t[i].nruns + p->slab.held)
            FAIL("pool of stream %p: %zu block records, %zu free, %zu in spans, %zu runs: some are lost",
                 (void *)p->stream, p->slab.nchunks * CARVE_SLAB_CHUNK, p->slab.nfree, t[i].nblocks, t[i].nruns);
    }
out:
    for (size_t i = 0; i < np; i++)
        free(t[i].stamps);
    carve_mutex_unlock(&a->maps.lock);
    carve_mutex_unlock(&a->heap.lock);
    while (np-- > 0)
        carve_spin_unlock((carve_spin *)&t[np].pool->lock);
    carve_mutex_unlock(&a->pools_lock);
    free(t);
    return st;
}
