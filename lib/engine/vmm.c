/*
 * vmm.c — virtual-memory mode: address space is reserved once, and physical
 * memory is mapped into it 2 MiB granule by granule as buffers need it.
 *
 * With plain segments (cudaMalloc), free memory stuck between live buffers
 * stays reserved: the arena's footprint is set by fragmentation. Here a
 * granule that no live buffer touches can be unmapped, so what the arena
 * holds is (nearly) the granules its live buffers touch.
 *
 * The one idea that keeps it fast: free space with memory behind it and free
 * space without are different blocks. A pool's FREE blocks (in its index)
 * have every granule they touch mapped, and its UNMAPPED blocks (whole
 * granules, in a list of their own) have none; the two never merge. So the
 * allocation fast path is exactly the plain mode's: whatever the index
 * returns is usable as it is. Only when no FREE block fits does the
 * allocation look at the UNMAPPED blocks (alloc.c), for the place that
 * needs the fewest granules mapped, and this file maps them and turns them
 * into FREE memory (carve_vmm_claim).
 *
 * Mapping costs tens of microseconds a granule (cuMemSetAccess and cuMemUnmap
 * dominate: bench/vmm_costs.cu), so unmapping is lazy: mapped bytes may rise
 * freely up to an allowance, the peak of touched granules plus a slack
 * (carve_vmm_allowance: one stream's own; with several streams, one budget
 * for the arena, the most they all touched at once plus at least a
 * quarter), and only a request that would pass it first unmaps free
 * granules of its own pool, those let go longest ago first, and a little
 * more than it needs so that the next requests map without unmapping.
 * With several streams, only those its fences already show done; what is
 * still missing comes from other streams' free granules (those their own
 * fences show done, then, for the rest, after a device synchronization),
 * and at the limit too. Unmapped granules are cut out of their
 * FREE block as an UNMAPPED one. carve_empty_cache unmaps every free
 * granule, and spans given back to the heap are unmapped as they go, so the
 * heap's free ranges never hold memory.
 *
 * Unmapping is not stream-ordered (the driver unmaps at once), so a granule
 * is unmapped only when the work queued before its free is known to be
 * done: after waiting for the freeing stream, after the span's event
 * completed (spans going back), or after a device synchronization.
 *
 * What a granule's state costs grows with the blocks around it and with the
 * runs of free memory, never with the granules themselves:
 *  - mapped or not: a granule of a span is unmapped exactly when it lies in
 *    an UNMAPPED block (the span counts them); a free heap range holds
 *    nothing mapped.
 *  - touched by live buffers (the pool counts them): the granules strictly
 *    inside a live block are touched by it alone, so only its first and
 *    last granule can be shared, with the live block before or after it
 *    (past at most one FREE block: free neighbours merge, and UNMAPPED
 *    blocks end on granule boundaries). A free finds what it lets go by
 *    looking at two neighbours on each side.
 *  - when it was let go: the granules one free lets go are one run,
 *    stamped one after another with the pool's clock. A FREE block keeps
 *    the runs of its whole granules (exactly those: its edges are shared
 *    with live neighbours) in a ring through its own record, which holds
 *    the first run, and RUN records, in address order. Merging FREE blocks
 *    splices their rings, and the records of the blocks merged away carry
 *    their runs on as RUN records, so a free never needs a new record; an
 *    allocation takes the runs of what it covers from the front of the ring
 *    of the block it is cut from, and they are the granules it touches
 *    that no live block did (granules mapped for it are a run stamped 0,
 *    taken at once); a trim cuts the runs around what it unmaps.
 * Every operation so costs the blocks it looks at and the runs it changes;
 * a trim also reads every run of the pool's FREE blocks, as it once read
 * their granules.
 *
 * Counts, stamps and blocks are written under the owning pool's lock. The
 * heap lock guards only the totals (mapped bytes, their peak, the
 * counters); driver calls are made with it dropped, so streams mapping at
 * the same time wait only for the driver. Every mapping is one granule
 * (CARVE_VMM_PIECE): the backend is told so, and any granule can be
 * unmapped alone.
 */
#include "engine/vmm.h"

#include "base/text.h"
#include "engine/error.h"

#define G CARVE_SEGMENT_GRANULE

size_t carve_vmm_allowance(const carve_arena *a, const carve_pool *p) {
    /* One stream keeps what it touched at its peak, plus its slack. Several
     * streams share one budget: the most they all touched at once (heap.
     * vpeak), plus the asking stream's slack and at least a quarter (the
     * streams' peaks come at different times). Memory a stream let go is
     * then another's to take (alloc.c's vmm_adopt) or to trim, and no
     * stream's share is ever cut back to what it uses at one moment (which
     * made it remap its own granules on its next large request). */
    size_t t = CARVE_LOAD(&a->multi) ? CARVE_LOAD(&a->heap.vpeak)
                                     : __atomic_load_n(&p->touched_peak, __ATOMIC_RELAXED) * G;
    size_t slack = t / 1024 * __atomic_load_n(&p->vslack, __ATOMIC_RELAXED);
    if (CARVE_LOAD(&a->multi) && slack < t / CARVE_VMM_IDLE_DIV)
        slack = t / CARVE_VMM_IDLE_DIV;
    size_t allow = t + (slack > G ? slack : G);
    size_t target = CARVE_LOAD(&a->heap.target);
    return allow > target ? allow : target;
}

/* Pool lock held: the bytes mapped in p's spans. */
static size_t pool_mapped(const carve_pool *p) {
    size_t n = 0;
    for (const carve_block *span = p->spans; span; span = span->fnext)
        n += span->size - span->u.r.unmapped * G;
    return n;
}

/* ---- runs: the rings of FREE blocks ------------------------------------- */

/* The runs of FREE block f below lo stay; those in [lo, hi) go (their
 * records back to the slab); those from hi on move to the ring of to (a
 * FREE block whose ring is set here; NULL where none can lie there). A run
 * across lo or hi is cut there (the part from hi on becomes to's own run,
 * so no record is needed). Walks the runs below hi only. Returns the
 * granules that went. */
static size_t ring_cut(carve_pool *p, carve_block *f, uintptr_t lo, uintptr_t hi, carve_block *to) {
    size_t gone = 0;
    if (to) {
        to->u.v.n = 0;
        carve_vmm_ring_init(to);
    }
    carve_block *x = f;
    do {
        carve_block *next = x->u.v.rnext;
        uintptr_t a = x->u.v.at, e = a + x->u.v.n * G;
        if (x->u.v.n == 0 || e <= lo) { /* stays */
            x = next;
            continue;
        }
        if (a >= hi) {
            if (x != f)
                break; /* x and the runs after it move */
            CARVE_ASSERT_INTERNAL(to && to->u.v.n == 0);
            carve_vmm_run_set(to, a, x->u.v.n, x->u.v.stamp); /* f's own run moves */
            f->u.v.n = 0;
            x = next;
            continue;
        }
        uintptr_t ml = a > lo ? a : lo, mh = e < hi ? e : hi;
        gone += (mh - ml) / G;
        if (e > hi) {
            CARVE_ASSERT_INTERNAL(to && to->u.v.n == 0);
            carve_vmm_run_set(to, hi, (e - hi) / G, x->u.v.stamp + (hi - a) / G);
        }
        if (a < lo) {
            x->u.v.n = (lo - a) / G;
        } else if (x == f) {
            f->u.v.n = 0;
        } else {
            x->u.v.rprev->u.v.rnext = next;
            next->u.v.rprev = x->u.v.rprev;
            carve_slab_put(&p->slab, x);
        }
        x = next;
    } while (x != f);
    if (x != f) { /* x .. the last run, all from hi on */
        CARVE_ASSERT_INTERNAL(to != NULL);
        carve_block *last = f->u.v.rprev, *before = x->u.v.rprev;
        before->u.v.rnext = f;
        f->u.v.rprev = before;
        carve_vmm_ring_append(to, x, last);
    }
    return gone;
}

/* The runs of FREE block f from granule g on move to the ring of to (a FREE
 * block whose ring is set here); a run across g is cut there. Walks the
 * runs that move only. */
static void ring_move_back(carve_block *f, uintptr_t g, carve_block *to) {
    to->u.v.n = 0;
    carve_vmm_ring_init(to);
    carve_block *x = f->u.v.rprev;
    while (x != f && x->u.v.at >= g)
        x = x->u.v.rprev;
    carve_block *first = x->u.v.rnext, *last = f->u.v.rprev; /* the records that move whole */
    uintptr_t a = x->u.v.at, e = a + x->u.v.n * G;
    if (x->u.v.n && e > g) {
        if (a >= g) { /* (x is f) f's own run moves */
            carve_vmm_run_set(to, a, x->u.v.n, x->u.v.stamp);
            x->u.v.n = 0;
        } else {
            carve_vmm_run_set(to, g, (e - g) / G, x->u.v.stamp + (g - a) / G);
            x->u.v.n = (g - a) / G;
        }
    }
    if (first != f) {
        x->u.v.rnext = f;
        f->u.v.rprev = x;
        carve_vmm_ring_append(to, first, last);
    }
}

size_t carve_vmm_take_runs(carve_pool *p, carve_block *b, carve_block *rest) {
    return ring_cut(p, b, 0, carve_align_up(b->addr + b->size, G), rest);
}

void carve_vmm_split(carve_block *f) { ring_move_back(f, carve_align_down(f->next->addr, G), f->next); }

/* ---- blocks: FREE and UNMAPPED pieces of a span -------------------------- */

/* A new pool block [addr, addr+size) of span, linked after prev (NULL: first). */
static carve_block *block_new(carve_pool *p, carve_block *span, carve_block *prev, uintptr_t addr, size_t size) {
    carve_block *b = carve_slab_get(&p->slab);
    carve_block_link(b, span, prev, addr, size);
    return b;
}

/* Take b out of its span's chain of blocks (its record is the caller's). */
static void block_detach(carve_block *b) {
    carve_block *span = b->span;
    if (b->prev)
        b->prev->next = b->next;
    else
        span->u.r.first = b->next;
    if (b->next)
        b->next->prev = b->prev;
    else
        span->u.r.last = b->prev;
}

/* u is UNMAPPED and listed: absorb UNMAPPED neighbours into it. */
static void unmapped_coalesce(carve_pool *p, carve_block *u) {
    carve_block *n = u->next;
    if (n && n->state == CARVE_B_UNMAPPED) {
        u->size += n->size;
        carve_vmm_list_remove(p, n);
        block_detach(n);
        carve_slab_put(&p->slab, n);
    }
    carve_block *v = u->prev;
    if (v && v->state == CARVE_B_UNMAPPED) {
        u->addr = v->addr;
        u->size += v->size;
        carve_vmm_list_remove(p, v);
        block_detach(v);
        carve_slab_put(&p->slab, v);
    }
}

/* f is FREE and indexed; [ua, ub) inside it, whole granules that are f's
 * runs, is no longer mapped. Cut it out as an UNMAPPED block (merged with
 * UNMAPPED neighbours: *mid); what is left of f on either side stays FREE
 * with its runs. Returns the FREE piece after [ua, ub), or NULL. Needs two
 * spare slab records. */
static carve_block *cut_unmapped(carve_pool *p, carve_block *f, uintptr_t ua, uintptr_t ub, carve_block **mid) {
    carve_index *ix = &p->index[f->cls];
    uintptr_t fa = f->addr, fb = f->addr + f->size;
    carve_index_remove(ix, f);
    carve_block *right = NULL, *m;
    if (ub < fb) {
        right = block_new(p, f->span, f, ub, fb - ub);
        right->state = CARVE_B_FREE;
    }
    size_t gone = ring_cut(p, f, ua, ub, right);
    CARVE_ASSERT_INTERNAL(gone == (ub - ua) / G);
    (void)gone;
    if (right)
        carve_index_insert(ix, right);
    if (ua > fa) {
        f->size = ua - fa;
        carve_index_insert(ix, f);
        m = block_new(p, f->span, f, ua, ub - ua);
    } else {
        CARVE_ASSERT_INTERNAL(f->u.v.n == 0 && f->u.v.rnext == f);
        m = f; /* f itself becomes the unmapped piece */
        m->size = ub - ua;
    }
    carve_vmm_list_add(p, m);
    unmapped_coalesce(p, m);
    m->span->u.r.unmapped += (ub - ua) / G;
    if (mid)
        *mid = m;
    return right;
}

carve_block *carve_vmm_claim(carve_pool *p, carve_block *u, uintptr_t lo, uintptr_t hi) {
    carve_index *ix = &p->index[u->cls];
    uintptr_t ua = u->addr, ub = u->addr + u->size;
    CARVE_ASSERT_INTERNAL(u->state == CARVE_B_UNMAPPED && lo >= ua && hi <= ub && lo < hi);
    u->span->u.r.unmapped -= (hi - lo) / G;
    carve_block *m;
    if (lo > ua && hi < ub) { /* the middle: u keeps the front, a new UNMAPPED block the back */
        carve_block *t = block_new(p, u->span, u, hi, ub - hi);
        t->state = CARVE_B_UNMAPPED;
        carve_vmm_list_add(p, t);
        m = block_new(p, u->span, u, lo, hi - lo);
        u->size = lo - ua;
    } else if (lo == ua && hi == ub) {
        carve_vmm_list_remove(p, u);
        m = u;
    } else if (lo == ua) { /* the front: u keeps the back */
        m = block_new(p, u->span, u->prev, lo, hi - lo);
        u->addr = hi;
        u->size = ub - hi;
    } else { /* the back */
        m = block_new(p, u->span, u, lo, hi - lo);
        u->size = lo - ua;
    }
    /* The granules just mapped are one run, stamped 0 (never let go): the
     * request takes them at once (carve_vmm_take), so no trim sees it. */
    m->state = CARVE_B_FREE;
    carve_vmm_run_set(m, lo, (hi - lo) / G, 0);
    carve_vmm_ring_init(m);
    carve_block *v = m->prev, *n = m->next;
    if (v && v->state == CARVE_B_FREE) { /* v absorbs m (its run goes on as a RUN record) */
        carve_index_remove(ix, v);
        v->size += m->size;
        block_detach(m);
        carve_vmm_ring_absorb(p, v, m);
        m = v;
    }
    if (n && n->state == CARVE_B_FREE) { /* m absorbs n */
        carve_index_remove(ix, n);
        m->size += n->size;
        block_detach(n);
        carve_vmm_ring_absorb(p, m, n);
    }
    carve_index_insert(ix, m);
    return m;
}

/* ---- moving free mapped memory to another stream ------------------------ */

int carve_vmm_runs_done(const carve_block *f, uintptr_t lo, uintptr_t hi, uint64_t done) {
    const carve_block *x = f;
    do {
        uintptr_t a = x->u.v.at, e = a + x->u.v.n * G;
        if (x->u.v.n && a < hi && e > lo) {
            uintptr_t last = (e < hi ? e : hi) - G; /* the last granule of the overlap: stamped latest */
            if (x->u.v.stamp + (last - a) / G > done)
                return 0;
        }
        x = x->u.v.rnext;
    } while (x != f);
    return 1;
}

void carve_vmm_cut_runs(carve_pool *p, carve_block *f, uintptr_t lo, uintptr_t hi) {
    carve_index *ix = &p->index[f->cls];
    uintptr_t fe = f->addr + f->size;
    CARVE_ASSERT_INTERNAL(f->state == CARVE_B_FREE && lo % G == 0 && hi % G == 0 && lo >= f->addr && hi <= fe &&
                          lo < hi);
    if (hi < fe) { /* the part after hi stays a FREE block of its own, with its runs */
        carve_index_remove(ix, f);
        carve_block *g = block_new(p, f->span, f, hi, fe - hi);
        g->state = CARVE_B_FREE;
        f->size = hi - f->addr;
        ring_move_back(f, hi, g);
        carve_index_insert(ix, g);
        carve_index_insert(ix, f);
    }
    size_t gone = ring_cut(p, f, lo, hi, NULL);
    CARVE_ASSERT_INTERNAL(gone == (hi - lo) / G);
    (void)gone;
}

void carve_vmm_unclaimed(carve_pool *p, carve_block *f) {
    carve_block *x = f;
    CARVE_ASSERT_INTERNAL(f->state == CARVE_B_FREE);
    do {
        if (x->u.v.n && x->u.v.stamp == 0) {
            x->u.v.stamp = p->vclock + 1;
            p->vclock += x->u.v.n;
        }
        x = x->u.v.rnext;
    } while (x != f);
}

void carve_vmm_adopted(carve_pool *p, carve_block *f) {
    size_t n = f->size / G;
    CARVE_ASSERT_INTERNAL(f->state == CARVE_B_FREE && f->addr % G == 0 && f->size % G == 0);
    carve_vmm_run_set(f, f->addr, n, p->vclock + 1);
    carve_vmm_ring_init(f);
    p->vclock += n;
}

/* ---- unmapping ----------------------------------------------------------- */

/* Unmap the whole mappings [addr, addr+size) (mapped, no live block on
 * them): the granules no record of maps.h holds, one mapping each, and each
 * recorded mapping whole (its record goes). Returns the bytes unmapped: all
 * of size, or those before the mapping the backend refused (it and those
 * after it stay mapped and usable); *refused gets the refused mapping's
 * bytes (0: none). Through ops: the arena's backend, or the one behind
 * the fault layer when the arena is abandoned. Counters are the caller's. */
static size_t unmap_run(carve_arena *a, const carve_backend_ops *ops, uintptr_t addr, size_t size, size_t *refused) {
    size_t done = 0;
    uintptr_t end = addr + size;
    *refused = 0;
    while (addr < end) {
        uintptr_t lo, hi, next;
        size_t piece = CARVE_VMM_PIECE, len, d = 0;
        int rec = carve_maps_find(&a->maps, addr, &lo, &hi, &next);
        if (rec) { /* one mapping of many granules: whole, or not at all */
            CARVE_ASSERT_INTERNAL(lo == addr && hi <= end);
            piece = len = hi - lo;
        } else { /* granule mappings, up to the next record */
            len = (next < end ? next : end) - addr;
        }
        if (ops->decommit(&a->be, addr, len, piece, &d) != CARVE_OK) {
            *refused = piece;
            carve_note_host(carve_backend_host(), "the %s backend refused to unmap memory: %s",
                            carve_backend_str(a->be.kind), carve_backend_msg());
            return done + d;
        }
        if (rec)
            carve_maps_remove(&a->maps, lo);
        done += len;
        addr += len;
    }
    return done;
}

/* n granules were unmapped, failed of them refused. Atomic, so that
 * streams mapping and unmapping at once do not queue on the heap lock. */
static void count_unmapped(carve_arena *a, size_t n, size_t failed) {
    carve_heap *h = &a->heap;
    if (n) {
        __atomic_add_fetch(&h->nrelease, (uint64_t)n, __ATOMIC_RELAXED);
        __atomic_sub_fetch(&h->reserved, n * G, __ATOMIC_RELAXED);
    }
    if (failed)
        __atomic_add_fetch(&h->nunmap_failed, (uint64_t)failed, __ATOMIC_RELAXED);
}

/* Free granules stay mapped: host memory ran out for the records that
 * describe what is unmapped (or for the trim's list of runs). Counted, so
 * that carve_empty_cache can say so (a span that could not be unmapped as
 * it went back stays in its pool, where the trim that follows counts what
 * it cannot unmap). */
static void nohost(carve_arena *a) {
    carve_note_host(1, "host memory exhausted for carve's metadata");
    __atomic_add_fetch(&a->heap.nunmap_nohost, 1, __ATOMIC_RELAXED);
}

/* Free mapped granules that may be unmapped: a piece of a run (past the
 * stamps the device may still be using, and outside the kept ranges), with
 * the FREE block that holds it. */
typedef struct trim_piece {
    carve_block *blk;
    uintptr_t at;
    size_t n;
    uint64_t stamp; /* of its first granule; the others follow */
} trim_piece;

typedef struct trim_list {
    trim_piece *v;
    size_t n, cap;
    int failed; /* host memory ran out */
} trim_list;

static void piece_add(trim_list *l, carve_block *blk, uintptr_t at, size_t n, uint64_t stamp) {
    if (l->failed || n == 0)
        return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        trim_piece *v = realloc(l->v, cap * sizeof(*v));
        if (!v) {
            l->failed = 1;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = (trim_piece){blk, at, n, stamp};
}

/* The granules of run x (in FREE block f) let go at or before done (a
 * prefix: stamps rise with the address), less those whose granule meets a
 * kept range, as pieces. */
static void run_pieces(trim_list *l, carve_block *f, const carve_block *x, const carve_keep *keep, uint64_t done) {
    if (x->u.v.stamp > done)
        return;
    uint64_t m = done - x->u.v.stamp + 1;
    uintptr_t s = x->u.v.at, e = s + (m < x->u.v.n ? m : x->u.v.n) * G;
    /* A granule at g meets [lo, hi) when g < hi and g + G > lo: g in
     * [align_down(lo), hi). Cut those out (the two in address order). */
    uintptr_t cut[2][2] = {{0, 0}, {0, 0}};
    unsigned nc = 0;
    for (unsigned i = 0; keep && i < 2; i++) {
        uintptr_t lo = carve_align_down(keep->lo[i], G), hi = keep->hi[i];
        if (lo < hi) {
            cut[nc][0] = lo;
            cut[nc][1] = hi;
            nc++;
        }
    }
    if (nc == 2 && cut[1][0] < cut[0][0]) {
        uintptr_t t0 = cut[0][0], t1 = cut[0][1];
        cut[0][0] = cut[1][0];
        cut[0][1] = cut[1][1];
        cut[1][0] = t0;
        cut[1][1] = t1;
    }
    uintptr_t at = s;
    for (unsigned i = 0; i <= nc && at < e; i++) {
        uintptr_t stop = i < nc ? (cut[i][0] > at ? carve_align_up(cut[i][0], G) : at) : e;
        if (stop > e)
            stop = e;
        piece_add(l, f, at, (stop - at) / G, x->u.v.stamp + (at - s) / G);
        if (i < nc && carve_align_up(cut[i][1], G) > at)
            at = carve_align_up(cut[i][1], G);
    }
}

static int older_first(const void *x, const void *y) {
    const trim_piece *a = *(trim_piece *const *)x, *b = *(trim_piece *const *)y;
    return a->stamp < b->stamp ? -1 : a->stamp > b->stamp;
}

/* The pieces of one FREE block, l->v[i] to l->v[j-1] (address order), that
 * touch each other make stretches of granules that may be unmapped; the
 * driver unmaps whole mappings only, so each stretch loses the ends that
 * fall inside a recorded mapping reaching past it (maps.h): pieces are cut
 * to what is left. Afterwards every recorded mapping that meets a piece
 * lies whole inside the pieces around it. */
static void pieces_whole(carve_arena *a, trim_list *l, size_t i, size_t j) {
    for (size_t s = i; s < j;) {
        size_t t = s + 1;
        while (t < j && l->v[t - 1].at + l->v[t - 1].n * G == l->v[t].at)
            t++;
        uintptr_t elo = l->v[s].at, ehi = l->v[t - 1].at + l->v[t - 1].n * G, lo, hi, mlo, mhi;
        lo = carve_maps_find(&a->maps, elo, &mlo, &mhi, NULL) && mlo < elo ? mhi : elo;
        hi = carve_maps_find(&a->maps, ehi - G, &mlo, &mhi, NULL) && mhi > ehi ? mlo : ehi;
        for (size_t k = s; k < t; k++) {
            trim_piece *c = &l->v[k];
            uintptr_t x = c->at > lo ? c->at : lo, y = c->at + c->n * G < hi ? c->at + c->n * G : hi;
            if (x >= y) {
                c->n = 0;
                continue;
            }
            c->stamp += (x - c->at) / G;
            c->at = x;
            c->n = (y - x) / G;
        }
        s = t;
    }
}

size_t carve_vmm_trim_pool(carve_arena *a, carve_pool *p, size_t want, const carve_keep *keep, uint64_t done) {
    return carve_vmm_trim(a, p, want, keep, done, 0);
}

size_t carve_vmm_trim(carve_arena *a, carve_pool *p, size_t want, const carve_keep *keep, uint64_t done,
                      int count_only) {
    if (CARVE_LOAD(&p->graph)) /* a graph's replays use what it freed: nothing is unmapped */
        return 0;
    if (want == 0)
        return 0;
    /* Every run of every FREE block, grouped by block, in address order. */
    trim_list l = {0};
    size_t total = 0;
    for (unsigned cls = 0; cls < 2; cls++) {
        const carve_index *ix = &p->index[cls];
        for (unsigned fl = 0; fl < CARVE_FL_COUNT; fl++) {
            if (!(ix->fl_map & ((uint64_t)1 << fl)))
                continue;
            for (unsigned sl = 0; sl < CARVE_SL_COUNT; sl++) {
                for (carve_block *f = ix->heads[fl][sl]; f; f = f->fnext) {
                    const carve_block *x = f;
                    size_t first = l.n;
                    do {
                        if (x->u.v.n)
                            run_pieces(&l, f, x, keep, done);
                        x = x->u.v.rnext;
                    } while (x != f);
                    if (!l.failed && carve_maps_any(&a->maps))
                        pieces_whole(a, &l, first, l.n); /* whole mappings only */
                }
            }
        }
    }
    for (size_t i = 0; i < l.n; i++)
        total += l.v[i].n;
    if (l.failed)
        nohost(a);
    if (l.failed || total == 0 || count_only) {
        free(l.v);
        return l.failed ? 0 : total * G;
    }
    size_t take = want == SIZE_MAX ? total : want / G + (want % G != 0);
    if (take > total)
        take = total;
    /* The longest unused: stamps at or below a threshold (stamps are
     * unique in a pool), all of them if there is no memory to sort. */
    uint64_t threshold = UINT64_MAX;
    trim_piece **order;
    if (take < total && (order = malloc(l.n * sizeof(*order)))) {
        size_t k = 0;
        for (size_t i = 0; i < l.n; i++)
            if (l.v[i].n)
                order[k++] = &l.v[i];
        qsort(order, k, sizeof(*order), older_first);
        size_t got = 0;
        for (size_t i = 0; i < k; i++) {
            if (got + order[i]->n >= take) {
                threshold = order[i]->stamp + (take - got) - 1;
                break;
            }
            got += order[i]->n;
        }
        free(order);
    }
    /* The chosen granules of each piece are its front (its oldest); those
     * next to each other in one block are unmapped and cut out together. */
    size_t ncuts = 0;
    for (size_t i = 0; i < l.n; i++) {
        trim_piece *c = &l.v[i];
        c->n = c->stamp > threshold ? 0 : threshold - c->stamp + 1 < c->n ? threshold - c->stamp + 1 : c->n;
        ncuts += c->n && !(i && l.v[i - 1].blk == c->blk && l.v[i - 1].n &&
                           l.v[i - 1].at + l.v[i - 1].n * G == c->at);
    }
    size_t nun = 0, failed = 0;
    if (carve_slab_reserve(&p->slab, 2 * ncuts + 3) == 0) { /* and three for the caller's claim and splits */
        for (size_t i = 0; i < l.n;) {
            carve_block *f = l.v[i].blk; /* the piece of that block after the last cut */
            uintptr_t past = 0;           /* where the last unmapping of the block ended */
            size_t j = i;
            while (j < l.n && l.v[j].blk == l.v[i].blk) {
                if (!l.v[j].n) {
                    j++;
                    continue;
                }
                uintptr_t x = l.v[j].at, y = x + l.v[j].n * G, lo, hi;
                for (j++; j < l.n && l.v[j].blk == l.v[i].blk && l.v[j].n && l.v[j].at == y; j++)
                    y += l.v[j].n * G;
                /* A recorded mapping across either end is whole inside the
                 * pieces (pieces_whole): it goes whole. */
                if (carve_maps_any(&a->maps)) {
                    if (carve_maps_find(&a->maps, x, &lo, &hi, NULL))
                        x = lo;
                    if (carve_maps_find(&a->maps, y - G, &lo, &hi, NULL))
                        y = hi;
                    if (x < past)
                        x = past;
                }
                if (!f || x >= y)
                    continue;
                size_t refused;
                size_t d = unmap_run(a, a->be.ops, x, y - x, &refused);
                failed += refused != 0; /* after a refusal, the rest of the run stays */
                past = y;
                if (d) {
                    f = cut_unmapped(p, f, x, x + d, NULL);
                    nun += d / G;
                }
            }
            i = j;
        }
    } else { /* no records for the cuts: unmap nothing */
        nohost(a);
    }
    free(l.v);
    count_unmapped(a, nun, failed);
    return nun * G;
}

/* Unmap every mapped granule of an empty span (its FREE blocks), each block
 * cut around what the backend refuses. 0 on success; -1 on a refusal or
 * when host memory ran out for the records of a cut (then what is not
 * unmapped yet stays, described as it is). */
int carve_vmm_unmap_span(carve_arena *a, carve_pool *p, carve_block *span) {
    if (span->u.r.unmapped == span->size / G)
        return 0;
    size_t nun = 0, failed = 0;
    int short_of_records = 0;
    for (carve_block *b = span->u.r.first; b && !short_of_records;) {
        if (b->state != CARVE_B_FREE) {
            b = b->next;
            continue;
        }
        /* An empty span's FREE blocks are whole granules, all of them runs. */
        uintptr_t x = b->addr, end = b->addr + b->size;
        carve_block *f = b, *tail = b; /* the FREE piece left of b; the block that ends at end */
        while (x < end) {
            if (carve_slab_reserve(&p->slab, 2) != 0) {
                carve_note_host(1, "host memory exhausted for carve's metadata");
                short_of_records = 1;
                break;
            }
            size_t refused;
            size_t d = unmap_run(a, a->be.ops, x, end - x, &refused);
            if (d) {
                carve_block *mid;
                f = cut_unmapped(p, f, x, x + d, &mid);
                tail = f ? f : mid;
                nun += d / G;
                x += d;
            }
            if (refused) { /* that mapping stays mapped; the rest is tried */
                failed++;
                x += refused;
            }
        }
        b = tail->next;
    }
    count_unmapped(a, nun, failed);
    return failed || short_of_records ? -1 : 0;
}

/* Unmap every mapped run of span through ops, whole mappings only; a
 * mapping the backend refuses is asked once more, then passed over. The
 * blocks are left as they are. */
static void span_unmap_all(carve_arena *a, const carve_backend_ops *ops, const carve_block *span) {
    for (const carve_block *b = span->u.r.first; b;) {
        if (b->state == CARVE_B_UNMAPPED) {
            b = b->next;
            continue;
        }
        uintptr_t x = b->addr; /* a mapped run: blocks up to the next UNMAPPED one, whole granules */
        while (b && b->state != CARVE_B_UNMAPPED)
            b = b->next;
        uintptr_t y = b ? b->addr : span->addr + span->size;
        while (x < y) { /* past a refusal asked twice, the mappings after it */
            size_t refused, d = unmap_run(a, ops, x, y - x, &refused);
            x += d;
            if (!refused)
                break;
            d = unmap_run(a, ops, x, refused, &refused);
            x += refused ? refused : d; /* refused twice: it stays */
        }
    }
}

void carve_vmm_span_destroy(carve_arena *a, const carve_block *span) { span_unmap_all(a, a->be.ops, span); }

void carve_vmm_abandon(carve_arena *a, const carve_backend_ops *ops) {
    for (carve_pool *p = CARVE_LOAD_ACQ(&a->pools); p; p = p->next_all) {
        carve_spin_lock(&p->lock);
        for (const carve_block *span = p->spans; span; span = span->fnext)
            span_unmap_all(a, ops, span);
        carve_spin_unlock(&p->lock);
    }
}

/* ---- fences: which free granules the device is done with ---------------- */

/* Pool lock held: drop the fence at ring position i (and every older one),
 * whose event has completed: what it covers is done. */
static void fences_done_to(carve_arena *a, carve_pool *p, unsigned k) {
    for (unsigned i = 0; i <= k; i++) {
        struct carve_vfence *f = &p->vfence[(p->vfence_head + i) % CARVE_VMM_FENCES];
        a->be.ops->event_release(&a->be, f->ev);
        p->vdone = f->clock;
    }
    p->vfence_head = (p->vfence_head + k + 1) % CARVE_VMM_FENCES;
    p->vfence_n -= k + 1;
}

/* Pool lock held: learn, without waiting, which fences have completed. */
void carve_vmm_fences_poll(carve_arena *a, carve_pool *p) {
    unsigned k = 0;
    while (k < p->vfence_n &&
           carve_event_query(a, p->vfence[(p->vfence_head + k) % CARVE_VMM_FENCES].ev) != 0)
        k++;
    if (k)
        fences_done_to(a, p, k - 1);
}

/* With the ring full, the newest fence is replaced (older ones are the
 * likeliest to be done). */
void carve_vmm_fence(carve_arena *a, carve_pool *p) {
    p->vfence_clock = p->vclock;
    p->vfence_frees = p->nfrees;
    if (p->vclock == p->vdone ||
        (p->vfence_n && p->vfence[(p->vfence_head + p->vfence_n - 1) % CARVE_VMM_FENCES].clock == p->vclock))
        return;
    void *ev = NULL;
    if (carve_event_record(a, p->stream, &ev) != CARVE_OK)
        return; /* no fence: those granules stay until one can be recorded */
    if (p->vfence_n == CARVE_VMM_FENCES) {
        carve_vmm_fences_poll(a, p);
        if (p->vfence_n == CARVE_VMM_FENCES)
            a->be.ops->event_release(&a->be, p->vfence[(p->vfence_head + --p->vfence_n) % CARVE_VMM_FENCES].ev);
    }
    p->vfence[(p->vfence_head + p->vfence_n++) % CARVE_VMM_FENCES] = (struct carve_vfence){ev, p->vclock};
}

void carve_vmm_fences_synced(carve_arena *a, carve_pool *p) {
    if (p->vfence_n)
        fences_done_to(a, p, p->vfence_n - 1);
    p->vdone = p->vclock;
}

/* Pool lock held, on p's own stream: unmap up to want bytes of p's free
 * granules, at least must where there are that many. Unmapping is not
 * stream-ordered, so a granule goes only once the work queued before its
 * free is known to be done: a completed fence covers its stamp. Waiting
 * for the stream would drain the queue the program keeps full (measured on
 * ResNet-50 inference: a wait per trim cost 14% of its speed), so first
 * the granules fences already show done (frees record one now and then,
 * and so does every map), then those a fresh fence shows done at once (the
 * device is often idle or nearly), and only then the wait, fence by fence,
 * oldest first, for no more than is needed. Returns the bytes unmapped. */
#define LEFT(want, got) ((want) > (got) ? (want) - (got) : 0)

static size_t make_room(carve_arena *a, carve_pool *p, size_t must, size_t want, const carve_keep *keep) {
    carve_vmm_fences_poll(a, p);
    size_t got = carve_vmm_trim_pool(a, p, want, keep, p->vdone);
    if (got >= must)
        return got;
    uint64_t before = p->vdone;
    carve_vmm_fence(a, p);
    carve_vmm_fences_poll(a, p);
    if (p->vdone != before && (got += carve_vmm_trim_pool(a, p, LEFT(want, got), keep, p->vdone)) >= must)
        return got;
    /* No wait where all of them done would free nothing that can be
     * unmapped (what is free lies in mappings live buffers still touch). */
    if (p->vfence_n && carve_vmm_trim(a, p, SIZE_MAX, keep, p->vclock, 1) == 0)
        return got;
    while (got < must && p->vfence_n) {
        if (carve_wait_event(a, p->vfence[p->vfence_head].ev) != CARVE_OK)
            break;
        fences_done_to(a, p, 0);
        got += carve_vmm_trim_pool(a, p, LEFT(want, got), keep, p->vdone);
    }
    return got;
}

/* Pool p's lock held, heap lock not: unmap up to want bytes of free
 * granules of other streams' pools: first those their own fences already
 * show done (an event query each, no wait), then, for what is still
 * missing, once all work on the device is done. (Their streams may have
 * been destroyed since their buffers were freed, so nothing new is
 * recorded on them: one device synchronization, like the one cudaFree
 * makes, covers every stream. This happens only when the requesting
 * stream's own pool cannot make room.) The pools are locked
 * before the synchronization, as carve_reclaim's waiting path does: a
 * granule freed after the device was synchronized may still be used by
 * work queued after it, and with the pool locked nothing is freed until
 * the trim is over, so everything its clock counts was let go before the
 * wait. A pool whose lock is busy is passed over (waiting for it while
 * holding p's could deadlock with its holder doing the same). The same
 * synchronization shows p's own granules done (p's lock was held all
 * along): where the others fall short, p's go too (none in keep), those
 * its fences did not yet show done included. (Memory a stream took from
 * others is stamped as let go by it when it came, so no fence of its own
 * covers it at first: without this, what others gave it could be unmapped
 * by no one, and mapping went past the budget; CNN serving with joined
 * room held 1.57 times its peak.) */
static void trim_others(carve_arena *a, carve_pool *p, size_t want, const carve_keep *keep) {
    size_t n = CARVE_LOAD(&a->npools), k = 0;
    carve_pool **held = malloc(n * sizeof(*held));
    if (!held)
        return; /* nothing is trimmed: the caller's mapping may pass the limit and fail */
    for (carve_pool *q = CARVE_LOAD_ACQ(&a->pools); q && k < n; q = q->next_all)
        if (q != p && carve_spin_trylock(&q->lock))
            held[k++] = q;
    /* First what the other pools' own fences already show done: an event
     * query each, no wait (a fence is an event recorded on its pool's stream
     * while the stream existed; asking it stays valid after the stream is
     * destroyed). The device is synchronized only for what is still missing. */
    size_t done = 0;
    for (size_t i = 0; i < k && done < want; i++) {
        carve_pool *q = held[i];
        carve_vmm_fences_poll(a, q);
        done += carve_vmm_trim_pool(a, q, want - done, NULL, q->vdone);
    }
    int own = p->vdone != p->vclock; /* p let go granules no fence shows done yet */
    if (done < want && (k > 0 || own) && carve_wait_device(a, p->stream) == CARVE_OK) {
        for (size_t i = 0; i < k && done < want; i++) {
            carve_pool *q = held[i];
            carve_vmm_fences_synced(a, q);
            done += carve_vmm_trim_pool(a, q, want - done, NULL, q->vdone);
        }
        if (own && done < want) {
            carve_vmm_fences_synced(a, p);
            done += carve_vmm_trim_pool(a, p, want - done, keep, p->vdone);
        }
    }
    for (size_t i = 0; i < k; i++)
        carve_spin_unlock(&held[i]->lock);
    free(held);
}

/* Pool lock held: the pool just unmapped `remapped` granules of its own to
 * map others. Each such granule costs driver calls of tens of microseconds,
 * so a stream may remap one per CARVE_VMM_OPS_PER_REMAP allocations, counted
 * over windows of CARVE_VMM_WINDOW allocations. A stream whose buffers change
 * shape faster than that gets more slack (it keeps more free memory mapped
 * and remaps less), a step per multiple of its budget it used, up to four
 * (a ResNet-50 serving trace then stops remapping within a few passes
 * instead of tens); one that stays well within the budget for a window
 * gives a step back. Speed is bounded first; the footprint is as low as that
 * bound allows. */
static void pace(carve_pool *p, size_t remapped) {
    const uint64_t budget = CARVE_VMM_WINDOW / CARVE_VMM_OPS_PER_REMAP;
    p->vremapped += remapped;
    uint64_t ops = p->nallocs - p->vwindow_at;
    unsigned s = p->vslack;
    if (ops >= CARVE_VMM_WINDOW || p->vremapped > 4 * budget) { /* a window ends, or is far over */
        uint64_t allowed = budget * (ops > CARVE_VMM_WINDOW ? ops : CARVE_VMM_WINDOW) / CARVE_VMM_WINDOW;
        /* one step per multiple of the budget its allocations earned, up to 4 */
        uint64_t k = p->vremapped / (ops / CARVE_VMM_OPS_PER_REMAP + 1);
        unsigned step = CARVE_VMM_SLACK_STEP * (k < 1 ? 1 : k > 4 ? 4 : (unsigned)k);
        if (p->vremapped > allowed)
            s = s + step < CARVE_VMM_SLACK_MAX ? s + step : CARVE_VMM_SLACK_MAX;
        else if (p->vremapped * 4 < allowed && s > CARVE_VMM_SLACK_MIN)
            s = s - CARVE_VMM_SLACK_STEP > CARVE_VMM_SLACK_MIN ? s - CARVE_VMM_SLACK_STEP : CARVE_VMM_SLACK_MIN;
        p->vremapped = 0;
        p->vwindow_at = p->nallocs;
    }
    __atomic_store_n(&p->vslack, s, __ATOMIC_RELAXED);
}

int carve_vmm_would_unmap(carve_arena *a, const carve_pool *p, size_t need) {
    size_t total = CARVE_LOAD(&a->heap.reserved) + CARVE_LOAD(&a->heap.inflight) + need;
    return total > carve_vmm_allowance(a, p) || total > CARVE_LOAD(&a->limit);
}

/* Granules every stream's live blocks touch now (no counter on the fast paths). */
static size_t arena_touched(carve_arena *a) {
    size_t now = 0;
    for (const carve_pool *q = CARVE_LOAD_ACQ(&a->pools); q; q = q->next_all)
        now += __atomic_load_n(&q->touched, __ATOMIC_RELAXED);
    return now;
}

/* Several streams: the most bytes they all touched at once, as seen now
 * that need more are about to be touched. */
static void arena_peak(carve_arena *a, size_t need) { carve_atomic_max(&a->heap.vpeak, arena_touched(a) * G + need); }


/* Commit [addr, addr+size), whole granules of span, for the request that
 * will lie at [rlo, rhi). Room at the span's end, past everything mapped
 * in it, comes in as mappings larger than a granule for the granules the
 * request covers whole (the driver's cost is per mapping, whatever its
 * size: bench/vmm_costs.cu) and one for the last granule where it covers
 * that in part, since the next buffer will share it: so freeing the
 * request frees its mappings whole, whatever lives after it. (There the
 * request starts at or before addr: the room before it is mapped, or it
 * starts the room.) Those mappings are pieces of at most the stream's
 * touched peak (the request counted in) / CARVE_VMM_MAP_DIV, two granules
 * at least, and what is left of the run as one more: a later, smaller
 * buffer that lives in part of a freed request keeps only its pieces
 * mapped, so the footprint stays near granule by granule's (one mapping
 * per request kept up to all of it: docs/design.md, "Mappings"). With
 * granules (a map asked to replace free memory where it raises the
 * arena's peak: carve_vmm_map), everything comes in granule by granule, so
 * that each can go alone again and the footprint follows live memory. A hole
 * between mapped memory, which trims made, comes in granule by granule, so
 * that any granule of it can go alone again. So does everything once
 * several streams exist: memory moves between them in whole granules at the
 * edges of free blocks (alloc.c's vmm_adopt, the budget's trims of other
 * streams), and a large mapping that a stream's live buffers still touch in
 * part could go to no one. All or nothing: one backend call, or two where
 * a piece is left over (the pieces, then it and the last granule; the
 * pieces are unmapped again when the second fails); the records of the
 * larger mappings are made room for first, so that nothing can fail once
 * the memory is mapped. Where the backend refuses to unmap the pieces
 * again, those still mapped, [*kept_at, *kept_at + *kept), stay mapped and
 * recorded (the request fails all the same; *kept is 0 otherwise). */
static carve_status map_pieces(carve_arena *a, const carve_pool *p, carve_block *span, uintptr_t addr, size_t size,
                               uintptr_t rlo, uintptr_t rhi, uintptr_t *kept_at, size_t *kept, int granules) {
    const carve_block *last = span->u.r.last;
    *kept = 0;
    size_t whole = rhi < addr + size ? size - G : size;
    if (whole <= G)
        return a->be.ops->commit(&a->be, addr, size, CARVE_VMM_PIECE);
    size_t peak = CARVE_LOAD(&p->touched) + whole / G; /* the touched peak, with the request */
    if (peak < CARVE_LOAD(&p->touched_peak))
        peak = CARVE_LOAD(&p->touched_peak);
    size_t cap = peak / CARVE_VMM_MAP_DIV * G;
    size_t piece = whole < cap ? whole : cap > 2 * G ? cap : 2 * G;
    size_t body = whole / piece * piece, r = whole - body; /* pieces, then r (less than a piece) */
    if (granules || rlo > addr || last->state != CARVE_B_UNMAPPED || addr < last->addr ||
        CARVE_LOAD(&a->multi) || carve_maps_reserve(&a->maps, body / piece + (r > G)) != 0)
        return a->be.ops->commit(&a->be, addr, size, CARVE_VMM_PIECE);
    carve_status st;
    if (r == 0) { /* the pieces, then the last granule if it is apart */
        st = a->be.ops->commit(&a->be, addr, size, piece);
    } else if ((st = a->be.ops->commit(&a->be, addr, body, piece)) == CARVE_OK &&
               (st = a->be.ops->commit(&a->be, addr + body, size - body, r)) != CARVE_OK) {
        /* r and the last granule could not come: the pieces go too (all or
         * nothing); an unmap refused is tried again from where it stopped. */
        size_t off = 0;
        for (int idle = 0; off < body && idle < 4;) {
            size_t d = 0;
            a->be.ops->decommit(&a->be, addr + off, body - off, piece, &d);
            off += d;
            idle = d ? 0 : idle + 1;
        }
        /* Refused to the end: the pieces from off on stay mapped, recorded
         * as the mappings they are (room was made for their records). */
        CARVE_ASSERT_INTERNAL(off % piece == 0);
        for (uintptr_t x = addr + off; x < addr + body; x += piece)
            carve_maps_add(&a->maps, x, piece);
        *kept_at = addr + off;
        *kept = body - off;
    }
    if (st == CARVE_OK) {
        for (uintptr_t x = addr; x < addr + body; x += piece)
            carve_maps_add(&a->maps, x, piece);
        if (r > G)
            carve_maps_add(&a->maps, addr + body, r);
    }
    return st;
}

carve_status carve_vmm_map(carve_arena *a, carve_pool *p, carve_block *span, uintptr_t addr, size_t size,
                           uintptr_t rlo, uintptr_t rhi, const carve_keep *keep, uintptr_t *kept_at, size_t *kept, int replace) {
    carve_heap *h = &a->heap;
    *kept = 0;
    char b1[32], b2[32], b3[32];
    size_t need = size;
    CARVE_ASSERT_INTERNAL(addr % G == 0 && size % G == 0 && addr >= span->addr && addr - span->addr <= span->size - size);
    int multi = CARVE_LOAD(&a->multi);
    if (multi)
        arena_peak(a, 0);
    /* One stream: its own mapped bytes against its allowance. Several: all
     * that is mapped against the arena's one budget. */
    size_t allow = carve_vmm_allowance(a, p);
    size_t mapped = multi ? CARVE_LOAD(&h->reserved) + CARVE_LOAD(&h->inflight) : pool_mapped(p);
    /* Asked to replace, where mapping would raise the arena's peak: the
     * caller held freed buffers back as live, so the peak of live memory
     * the allowance follows was too high, and this map is what decides the
     * footprint: it allows for what is live now (the stream's, or with
     * several streams all of theirs) and one granule. (Below the peak the
     * footprint does not grow, and the allowance keeps granules from being
     * unmapped and mapped again for nothing.) But a program that repeats
     * itself (a training step) comes back to the peak with its free memory
     * cut up the same way each time, and the same request then unmaps
     * granules that the same step maps again: hundreds of driver calls a
     * step at the same footprint (on GPT-2 training the step's largest
     * buffer crept up the address space by a third of itself a step, its
     * new top mapped and its old bottom unmapped). So a request of the
     * size of one that had to unmap before (one of the last
     * CARVE_VMM_REPEATS), with the stream's peak of touched memory where it
     * was then (risen by 1 / CARVE_VMM_REPEAT_RISE_DIV at most: the program
     * came back to where it was, as a loop does, rather than growing), may
     * raise the arena's peak instead, so that after a step or two nothing
     * is mapped or unmapped. (While the arena first grows, the touched peak
     * rises by more between repeats of a size, 11% and more on GPT-2, and
     * replacing stays as it was.) What repeats added in all stays within
     * 1 / CARVE_VMM_REPEAT_DIV of the rest of the peak, so that a program
     * whose shapes change and recur (serving) does not grow without end,
     * and never passes the allowance (the peak of what was touched, which
     * counts what the caller held back, plus the stream's slack). */
    int replacing = replace && CARVE_LOAD(&h->reserved) + need > CARVE_LOAD(&h->reserved_peak);
    size_t req = carve_align_up(rhi - rlo, G) / G;
    if (replacing) {
        size_t now = (multi ? arena_touched(a) : p->touched) * G + G;
        size_t tpeak = __atomic_load_n(&p->touched_peak, __ATOMIC_RELAXED);
        int repeat = 0; /* the same size, the touched peak (nearly) where it was: a loop came back */
        for (unsigned i = 0; i < CARVE_VMM_REPEATS && !repeat; i++)
            repeat = p->vrepeat[i].granules == req && tpeak >= p->vrepeat[i].touched_peak &&
                     tpeak - p->vrepeat[i].touched_peak <= p->vrepeat[i].touched_peak / CARVE_VMM_REPEAT_RISE_DIV;
        size_t rpeak = CARVE_LOAD(&h->reserved_peak), over = mapped + need > rpeak ? mapped + need - rpeak : 0;
        if (repeat && mapped + need > now && rpeak >= p->vrepeat_added &&
            p->vrepeat_added + over <= (rpeak - p->vrepeat_added) / CARVE_VMM_REPEAT_DIV) {
            now = mapped + need;
            p->vrepeat_added += over;
        }
        allow = now < allow ? now : allow;
    }
    int recycle = 0;
    if (mapped + need > allow) {
        /* What is unmapped now is mostly mapped again below: let the
         * backend keep its physical memory for that (closed at the end). */
        if ((recycle = a->be.ops->recycle != NULL))
            a->be.ops->recycle(&a->be, 1);
        /* Stay within the allowance: unmap free granules of this stream
         * first (the pool lock keeps the blocks as they are), and a little
         * more, so that the next requests need not; with several streams,
         * only those its fences show done (no wait), then other streams'
         * (one device synchronization). */
        size_t must = mapped + need - allow;
        size_t got = make_room(a, p, multi ? 0 : must, must + allow / CARVE_VMM_HYSTERESIS_DIV, keep);
        if (got)
            pace(p, got / G);
        if (replacing && got) { /* remembered: if it comes back, it is a loop's */
            struct carve_vrepeat *r = NULL;
            for (unsigned i = 0; i < CARVE_VMM_REPEATS && !r; i++)
                r = p->vrepeat[i].granules == req ? &p->vrepeat[i] : NULL;
            if (!r)
                r = &p->vrepeat[p->vrepeat_next++ % CARVE_VMM_REPEATS];
            *r = (struct carve_vrepeat){req, __atomic_load_n(&p->touched_peak, __ATOMIC_RELAXED)};
        }
        if (multi && got < must)
            trim_others(a, p, must - got, keep);
    }
    /* Counted against the limit while the driver maps (atomically: mapping
     * streams do not queue on the heap lock; two at the limit may both be
     * refused where one would have fitted). Against carve_set_limit, which
     * stores the limit and then reads inflight and reserved (sequentially
     * consistent, as are the adds here and the load of the limit): either
     * this load sees its new limit, or its read of inflight comes after
     * the add below, or of reserved after the add further on (made before
     * inflight drops), so the bytes are in what it lets stay over the limit
     * (limit_over) either way. */
    size_t used = __atomic_add_fetch(&h->inflight, need, __ATOMIC_SEQ_CST) + CARVE_LOAD(&h->reserved);
    size_t limit = __atomic_load_n(&a->limit, __ATOMIC_SEQ_CST);
    if (used > limit && CARVE_LOAD(&a->multi)) { /* at the limit: other streams' free granules too */
        trim_others(a, p, used - limit, keep);
        used = CARVE_LOAD(&h->inflight) + CARVE_LOAD(&h->reserved);
    }
    if (used > limit) {
        __atomic_sub_fetch(&h->inflight, need, __ATOMIC_RELAXED);
        carve_note("mapping %s more would pass the limit of %s (%s mapped)", carve_format_bytes(b1, sizeof(b1), need),
                   carve_format_bytes(b2, sizeof(b2), limit),
                   carve_format_bytes(b3, sizeof(b3), CARVE_LOAD(&h->reserved)));
        if (recycle)
            a->be.ops->recycle(&a->be, 0);
        return CARVE_ERR_OOM;
    }
    /* Room at the span's end, past everything mapped in it, comes in as one
     * mapping (the driver's cost is per mapping, whatever its size); a hole
     * between mapped memory, which trims made, granule by granule, so that
     * any granule of it can go alone again. The record is made room for
     * first, so that nothing can fail once the memory is mapped. */
    carve_status st = map_pieces(a, p, span, addr, size, rlo, rhi, kept_at, kept, replacing);
    if (st != CARVE_OK && !*kept)
        carve_note_host(carve_backend_host(), "the %s backend could not map %s: %s", carve_backend_str(a->be.kind),
                        carve_format_bytes(b1, sizeof(b1), size), carve_backend_msg());
    if (*kept) { /* what it refused to unmap again stays mapped, counted as a refused unmap */
        carve_note_host(carve_backend_host(), "the %s backend could not map %s, then refused to unmap %s of it: %s",
                        carve_backend_str(a->be.kind), carve_format_bytes(b1, sizeof(b1), size),
                        carve_format_bytes(b2, sizeof(b2), *kept), carve_backend_msg());
        __atomic_add_fetch(&h->nunmap_failed, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&h->nreserve, (uint64_t)(*kept / G), __ATOMIC_RELAXED);
        carve_atomic_max(&h->reserved_peak, __atomic_add_fetch(&h->reserved, *kept, __ATOMIC_SEQ_CST));
    }
    if (recycle)
        a->be.ops->recycle(&a->be, 0);
    if (st == CARVE_OK) {
        /* Granules let go until now get a fence for the next trim to find done. */
        carve_vmm_fence(a, p);
        __atomic_add_fetch(&h->nreserve, (uint64_t)(size / G), __ATOMIC_RELAXED);
        carve_atomic_max(&h->reserved_peak, __atomic_add_fetch(&h->reserved, size, __ATOMIC_SEQ_CST));
    }
    __atomic_sub_fetch(&h->inflight, need, __ATOMIC_SEQ_CST);
    return st;
}
