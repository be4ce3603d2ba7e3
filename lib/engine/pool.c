/*
 * pool.c — one pool per stream: finding it, and the block bookkeeping
 * inside its spans.
 *
 * Finding a stream's pool is on every carve_alloc, so it is a thread-local
 * one-entry cache (arena id, stream) in front of a lock-free open-addressing
 * table; tables only grow, and outgrown ones are kept until the arena dies so
 * a reader never follows a freed table. Pools are never freed before the
 * arena either: a pool with no spans costs a few KiB.
 */
#include "engine/pool.h"

#include <string.h>

#include "engine/heap.h"

typedef struct pool_slot {
    carve_stream key;
    carve_pool *pool; /* NULL: empty slot; published after key */
} pool_slot;

struct carve_pool_table {
    size_t mask;
    size_t count;
    carve_pool_table *retired_next;
    pool_slot slots[];
};

__thread carve_pool_cache carve_tls_pool __attribute__((tls_model("initial-exec")));

const char carve_event_later = 0; /* its address marks an event still to record (block.h) */

static size_t stream_hash(carve_stream s, size_t mask) {
    uint64_t h = (uint64_t)(uintptr_t)s * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 32) & mask;
}

static carve_pool *table_lookup(const carve_pool_table *t, carve_stream s) {
    for (size_t i = stream_hash(s, t->mask);; i = (i + 1) & t->mask) {
        carve_pool *p = CARVE_LOAD_ACQ(&t->slots[i].pool);
        if (!p)
            return NULL;
        if (CARVE_LOAD(&t->slots[i].key) == s)
            return p;
    }
}

static carve_pool *lookup(carve_arena *a, carve_stream s) {
    if (!s)
        return CARVE_LOAD_ACQ(&a->null_pool);
    carve_pool_table *t = CARVE_LOAD_ACQ(&a->table);
    return t ? table_lookup(t, s) : NULL;
}

static void table_put(carve_pool_table *t, carve_stream s, carve_pool *p) {
    size_t i = stream_hash(s, t->mask);
    while (t->slots[i].pool)
        i = (i + 1) & t->mask;
    CARVE_STORE(&t->slots[i].key, s);
    CARVE_STORE_REL(&t->slots[i].pool, p);
    t->count++;
}

static carve_pool_table *table_new(size_t cap) {
    carve_pool_table *t = calloc(1, sizeof(*t) + cap * sizeof(pool_slot));
    if (t)
        t->mask = cap - 1;
    return t;
}

/* pools_lock held. Insert, growing the table first when half full. */
static int table_insert(carve_arena *a, carve_stream s, carve_pool *p) {
    carve_pool_table *t = a->table;
    if (!t || (t->count + 1) * 2 > t->mask + 1) {
        carve_pool_table *nt = table_new(t ? (t->mask + 1) * 2 : 16);
        if (!nt)
            return -1;
        if (t) {
            for (size_t i = 0; i <= t->mask; i++)
                if (t->slots[i].pool)
                    table_put(nt, t->slots[i].key, t->slots[i].pool);
            t->retired_next = a->retired;
            a->retired = t;
        }
        CARVE_STORE_REL(&a->table, nt);
        t = nt;
    }
    table_put(t, s, p);
    return 0;
}

/* pools_lock held, one pool exists and a second is being added: from now
 * on pools merge their counters into the arena-wide ones. Seed those with
 * the first pool's values under its lock so nothing is counted twice. */
static void go_multi(carve_arena *a) {
    carve_pool *first = a->pools;
    carve_spin_lock(&first->lock);
    CARVE_STORE(&a->g_alloc, first->allocated);
    CARVE_STORE(&a->g_req, first->requested);
    CARVE_STORE(&a->g_alloc_peak, first->allocated_peak);
    CARVE_STORE(&a->g_req_peak, first->requested_peak);
    if (a->vmm) /* the arena's touched peak (vmm.c) starts from the first pool's */
        carve_atomic_max(&a->heap.vpeak, first->touched_peak * CARVE_SEGMENT_GRANULE);
    first->unflushed_alloc = first->unflushed_req = 0;
    CARVE_STORE_REL(&a->multi, 1);
    carve_spin_unlock(&first->lock);
}

static carve_pool *pool_create(carve_arena *a, carve_stream s) {
    carve_mutex_lock(&a->pools_lock);
    carve_pool *p = lookup(a, s);
    if (p) {
        carve_mutex_unlock(&a->pools_lock);
        return p;
    }
    void *mem = NULL;
    if (posix_memalign(&mem, 64, sizeof(carve_pool)) != 0) {
        carve_mutex_unlock(&a->pools_lock);
        return NULL;
    }
    p = memset(mem, 0, sizeof(*p));
    p->stream = s;
    p->arena = a;
    /* Virtual-memory mode: free blocks are taken lowest address first, so
     * live buffers stay packed and touch few granules (fewer to map). */
    p->index[CARVE_CLASS_SMALL].ordered = p->index[CARVE_CLASS_LARGE].ordered = a->vmm;
    p->index[CARVE_CLASS_SMALL].gen = (uint64_t)1 << 63; /* the two never share a gen (hot_low_gen) */
    p->vslack = CARVE_VMM_SLACK_MIN;
    if (carve_blockmap_init(&p->map) != 0 || (s && table_insert(a, s, p) != 0)) {
        carve_blockmap_destroy(&p->map);
        free(p);
        carve_mutex_unlock(&a->pools_lock);
        return NULL;
    }
    if (!s)
        CARVE_STORE_REL(&a->null_pool, p);
    if (a->pools && !a->multi)
        go_multi(a);
    p->next_all = a->pools;
    CARVE_STORE_REL(&a->pools, p);
    CARVE_STORE(&a->npools, a->npools + 1);
    carve_mutex_unlock(&a->pools_lock);
    return p;
}

carve_pool *carve_pool_find(const carve_arena *a, carve_stream s) { return lookup((carve_arena *)a, s); }

/* The graph pool s is routed to, or NULL. */
static carve_pool *routed(carve_arena *a, carve_stream s) {
    carve_pool *p = NULL;
    carve_mutex_lock(&a->pools_lock);
    for (unsigned i = 0; i < a->nroutes && !p; i++)
        if (a->routes[i].stream == s)
            p = a->routes[i].pool;
    carve_mutex_unlock(&a->pools_lock);
    return p;
}

carve_pool *carve_pool_lookup_slow(carve_arena *a, carve_stream s) {
    /* The cache's name for the arena is read first: a routing that
     * changes after this read changes it too, so what is cached below is
     * never taken for the new routing's. */
    uint64_t cache_id = CARVE_LOAD_ACQ(&a->cache_id);
    carve_pool *p = CARVE_LOAD_ACQ(&a->nroutes) ? routed(a, s) : NULL;
    if (!p)
        p = lookup(a, s);
    if (!p)
        p = pool_create(a, s);
    if (p) {
        carve_tls_pool.arena_id = cache_id;
        carve_tls_pool.stream = s;
        carve_tls_pool.pool = p;
    }
    return p;
}

static void uses_free(carve_arena *a, carve_uses *u) {
    if (!u)
        return;
    for (unsigned i = 0; i < u->n; i++)
        if (u->events && u->events[i] && u->events[i] != CARVE_EVENT_LATER)
            a->be.ops->event_release(&a->be, u->events[i]);
    free(u->streams);
    free(u->events);
    free(u);
}

void carve_pools_destroy(carve_arena *a) {
    carve_pool *p = a->pools;
    while (p) {
        carve_pool *n = p->next_all;
        for (carve_block *span = p->spans; span; span = span->fnext) {
            for (carve_block *b = span->u.r.first; b; b = b->next)
                if (b->state == CARVE_B_USED || b->state == CARVE_B_PENDING)
                    uses_free(a, b->flags & CARVE_BF_USES ? b->u.b.uses : NULL);
            if (a->vmm) /* what is mapped, as its blocks say, before they go */
                carve_vmm_span_destroy(a, span);
        }
        for (unsigned i = 0; i < p->vfence_n; i++) /* virtual-memory mode's fences */
            a->be.ops->event_release(&a->be, p->vfence[(p->vfence_head + i) % CARVE_VMM_FENCES].ev);
        carve_blockmap_destroy(&p->map);
        carve_slab_destroy(&p->slab);
        free(p);
        p = n;
    }
    a->pools = NULL;
    free(a->table);
    while (a->retired) {
        carve_pool_table *t = a->retired;
        a->retired = t->retired_next;
        free(t);
    }
    a->table = NULL;
}

static void pending_unlink(carve_pool *p, carve_block *b) {
    if (b->fprev)
        b->fprev->fnext = b->fnext;
    else
        p->pending_head = b->fnext;
    if (b->fnext)
        b->fnext->fprev = b->fprev;
    else
        p->pending_tail = b->fprev;
    b->fprev = b->fnext = NULL;
    p->npending--;
}

static int stream_in(const carve_stream *set, unsigned n, carve_stream s) {
    for (unsigned i = 0; i < n; i++)
        if (set[i] == s)
            return 1;
    return 0;
}

/* Use i of a pending block whose event a stream capture kept its free from
 * recording (CARVE_EVENT_LATER): on the legacy stream, which always exists,
 * it is recorded now unless a capture still refuses it, and then covers the
 * work queued there before the free (and since). Another stream may be gone
 * by now: nothing is recorded on it, a device synchronization frees the
 * block. 1 when the event is recorded. */
static int record_later(carve_pool *p, carve_uses *u, unsigned i) {
    void *ev;
    if (!carve_stream_legacy(u->streams[i]) || carve_event_record(p->arena, u->streams[i], &ev) != CARVE_OK)
        return 0;
    u->events[i] = ev;
    return 1;
}

void carve_pool_poll_pending(carve_pool *p, int how, int record) {
    int wait = how != CARVE_PENDING_POLL;
    /* Asking about an event would break a capture of p's stream. Its stream
     * is asked about only when p serves the call (record): another pool's
     * stream may have been destroyed since its buffers were freed. */
    if (!wait && record && carve_pool_capturing(p))
        return;
    carve_be *be = &p->arena->be;
    /* Without waiting: the list is in free order, and the events of one
     * stream complete in the order they were recorded, so once an event of
     * stream s is found not done, later blocks waiting on s are not asked
     * about. Blocks waiting on other streams are (a busy stream must not
     * hold back the memory of one that is done), up to a few busy streams
     * and a bounded walk, as every allocation polls while the list is not
     * empty. A legacy-stream event still to record counts as busy while a
     * capture refuses it. */
    carve_stream busy[CARVE_PENDING_BUSY];
    unsigned nbusy = 0, walked = 0;
    carve_block *b = p->pending_head;
    while (b && (wait || walked++ < CARVE_PENDING_WALK)) {
        carve_block *next = b->fnext;
        carve_uses *u = b->u.b.uses; /* pending blocks always have uses */
        int done = 1;
        for (unsigned i = 0; i < u->n && done; i++) {
            if (u->events[i] == CARVE_EVENT_LATER) {
                if (how == CARVE_PENDING_SYNCED) { /* the synchronization came after the free */
                    u->events[i] = NULL;
                } else if ((!wait && stream_in(busy, nbusy, u->streams[i])) || !record_later(p, u, i)) {
                    done = 0;
                    if (!wait && carve_stream_legacy(u->streams[i]) && !stream_in(busy, nbusy, u->streams[i])) {
                        if (nbusy == CARVE_PENDING_BUSY)
                            return;
                        busy[nbusy++] = u->streams[i];
                    }
                    continue;
                }
            }
            if (!u->events[i])
                continue;
            if (wait) {
                if (carve_wait_event(p->arena, u->events[i]) != CARVE_OK)
                    done = 0; /* not waited for (a capture refused it): the block stays pending */
            } else if (stream_in(busy, nbusy, u->streams[i])) {
                done = 0;
            } else if (carve_event_query(p->arena, u->events[i]) == 0) {
                done = 0;
                if (nbusy == CARVE_PENDING_BUSY)
                    return;
                busy[nbusy++] = u->streams[i];
            }
            if (done) {
                be->ops->event_release(be, u->events[i]);
                u->events[i] = NULL;
            }
        }
        if (done) {
            pending_unlink(p, b);
            uses_free(p->arena, u);
            carve_pool_release_block(p, b, record);
        }
        b = next;
    }
}

void carve_pool_flush_hot(carve_pool *p, int record) {
    if (p->hot) {
        carve_pool_release_block(p, p->hot, record);
        p->hot = NULL;
    }
}

void carve_pool_abandon(carve_pool *p) {
    carve_pool_flush_hot(p, 0);
    for (carve_block *span = p->spans; span; span = span->fnext)
        for (carve_block *b = span->u.r.first; b; b = b->next)
            if (b->state == CARVE_B_USED)
                b->flags |= CARVE_BF_GONE;
}

void carve_pool_release_gone(carve_pool *p, carve_block *b) {
    uses_free(p->arena, b->flags & CARVE_BF_USES ? b->u.b.uses : NULL);
    b->flags = 0;
    carve_pool_release_block(p, b, 0);
}

/* Record an empty-event for span on p's stream into *ev, and number it
 * (span->u.r.seq) in the order events are recorded: when two pending ranges
 * of the stream merge in the heap, the one recorded later is the one that
 * covers the work of both. (One stream's events are all recorded under its
 * pool's lock, so the numbers follow the stream's order.) */
static carve_status span_record(carve_pool *p, carve_block *span, void **ev) {
    carve_status st = carve_event_record(p->arena, p->stream, ev);
    if (st == CARVE_OK)
        span->u.r.seq = __atomic_add_fetch(&p->arena->heap.span_events, 1, __ATOMIC_RELAXED);
    else
        *ev = NULL;
    return st;
}

/* Record the empty-span event of the span waiting in the unrecorded slot. */
static void record_unrecorded(carve_pool *p) {
    carve_block *span = p->unrecorded;
    p->unrecorded = NULL;
    if (span && span->u.r.nlive == 0 && !span->u.r.event)
        span_record(p, span, &span->u.r.event);
}

void carve_pool_span_emptied(carve_pool *p, carve_block *span, int record) {
    carve_be *be = &p->arena->be;
    if (span->u.r.event) { /* an older one: it no longer covers the latest work */
        be->ops->event_release(be, span->u.r.event);
        span->u.r.event = NULL;
    }
    if (!record)
        return;
    if (p->unrecorded != span)
        record_unrecorded(p);
    p->unrecorded = span;
}

void carve_pool_span_refilled(carve_pool *p, carve_block *span) {
    carve_be *be = &p->arena->be;
    if (p->unrecorded == span)
        p->unrecorded = NULL;
    if (span->u.r.event) {
        be->ops->event_release(be, span->u.r.event);
        span->u.r.event = NULL;
    }
}

size_t carve_pool_return_empty(carve_pool *p, int mode) {
    if (CARVE_LOAD(&p->graph)) /* a graph pool keeps its memory until released */
        return 0;
    carve_arena *a = p->arena;
    size_t n = 0;
    /* The hot block may be all that keeps a span; only OWN may record now. */
    if (mode != CARVE_RETURN_OTHER)
        carve_pool_flush_hot(p, mode == CARVE_RETURN_OWN);
    if (mode == CARVE_RETURN_OWN)
        record_unrecorded(p);
    carve_block *span = p->spans;
    while (span) {
        carve_block *next = span->fnext;
        void *ev = span->u.r.event;
        int ok = span->u.r.nlive == 0;
        if (ok && mode == CARVE_RETURN_SYNCED && ev) { /* the sync completed it */
            a->be.ops->event_release(&a->be, ev);
            ev = span->u.r.event = NULL; /* the span may yet stay (a refused unmap) */
        } else if (ok && !ev && mode == CARVE_RETURN_OWN) {
            ok = span_record(p, span, &ev) == CARVE_OK;
        } else if (ok && !ev && mode == CARVE_RETURN_OTHER) {
            ok = 0; /* no proof that its stream's work is done */
        }
        if (ok && a->vmm) {
            /* Unmapping is not stream-ordered: the span's stream must be done
             * with it first (waited for on our own stream, else asked). */
            int done = mode == CARVE_RETURN_SYNCED || !ev ? 1
                       : mode == CARVE_RETURN_OWN     ? carve_wait_event(a, ev) == CARVE_OK
                                                      : carve_event_query(a, ev) != 0;
            if (!done || carve_vmm_unmap_span(a, p, span) != 0) {
                if (ev && ev != span->u.r.event)
                    a->be.ops->event_release(&a->be, ev);
                ok = 0;
            }
        }
        if (ok) {
            span->u.r.event = NULL; /* the heap owns ev from here */
            if (p->unrecorded == span)
                p->unrecorded = NULL;
            /* An empty span is FREE blocks, and in virtual-memory mode
             * UNMAPPED ones between them. */
            for (carve_block *b = span->u.r.first, *bn; b; b = bn) {
                bn = b->next;
                if (b->state == CARVE_B_FREE)
                    carve_index_remove(&p->index[span->cls], b);
                else
                    carve_vmm_list_remove(p, b);
                carve_slab_put(&p->slab, b);
            }
            if (span->fprev)
                span->fprev->fnext = span->fnext;
            else
                p->spans = span->fnext;
            if (span->fnext)
                span->fnext->fprev = span->fprev;
            span->fprev = span->fnext = NULL;
            p->nspans--;
            carve_heap_give(a, span, ev);
            n++;
        }
        span = next;
    }
    return n;
}

/* Free block b of span (FREE, indexed, or UNMAPPED, listed) holds the
 * whole granules [lo, hi), which the heap has just taken out of the span:
 * take them out of b, leaving FREE what is left of it on either side,
 * indexed. Where the cut made a new span right (after [lo, hi)), the blocks
 * after it move there. Needs one spare slab record. */
static void cut_block(carve_pool *p, carve_block *span, carve_block *b, uintptr_t lo, uintptr_t hi,
                      carve_block *right) {
    carve_index *ix = &p->index[span->cls];
    carve_block *prev = b->prev, *next = b->next, *left = NULL, *after = NULL;
    uintptr_t ba = b->addr, be = b->addr + b->size;
    if (b->state == CARVE_B_FREE)
        carve_index_remove(ix, b);
    else
        carve_vmm_list_remove(p, b);
    if (ba < lo) { /* b keeps its front */
        left = b;
        left->size = lo - ba;
    }
    if (hi < be) { /* and its back, as b itself or a new record */
        after = left ? carve_slab_get(&p->slab) : b;
        after->addr = hi;
        after->size = be - hi;
        after->cls = span->cls;
        after->slack = 0;
        after->flags = 0;
    }
    if (!left && !after)
        carve_slab_put(&p->slab, b);
    carve_block *last_before = left ? left : prev, *first_after = after ? after : next;
    if (last_before)
        last_before->next = NULL;
    if (first_after)
        first_after->prev = NULL;
    if (left) {
        left->state = CARVE_B_FREE;
        left->prev = prev;
    }
    if (after) {
        after->state = CARVE_B_FREE;
        after->next = next;
        if (next)
            next->prev = after;
    }
    carve_block *old_last = span->u.r.last;
    if (!last_before) { /* the front of the span went */
        span->u.r.first = first_after;
    } else if (!right && !first_after) { /* its back */
        span->u.r.last = last_before;
    } else { /* inside: what follows [lo, hi) is right's */
        span->u.r.last = last_before;
        right->u.r.first = first_after;
        right->u.r.last = after && !next ? after : old_last;
        size_t moved = 0, unmapped = 0;
        for (carve_block *x = first_after; x; x = x->next) {
            x->span = right;
            moved += x->state == CARVE_B_USED || x->state == CARVE_B_PENDING || x->state == CARVE_B_HOT;
            unmapped += x->state == CARVE_B_UNMAPPED ? x->size / CARVE_SEGMENT_GRANULE : 0;
        }
        right->u.r.nlive = moved;
        span->u.r.nlive -= moved;
        right->u.r.unmapped = unmapped; /* virtual-memory mode's unmapped granules go with their blocks */
        span->u.r.unmapped -= unmapped;
    }
    if (left)
        carve_index_insert(ix, left);
    if (after) {
        after->span = right ? right : span;
        carve_index_insert(ix, after);
    }
}

/* Pool lock held: span was cut, right (if any) holds the blocks after the
 * cut: list it, and mark either side left with no live block emptied. */
static void span_cut(carve_pool *p, carve_block *span, carve_block *right, int own) {
    if (!right)
        return;
    right->fprev = span;
    right->fnext = span->fnext;
    if (span->fnext)
        span->fnext->fprev = right;
    span->fnext = right;
    p->nspans++;
    if (span->u.r.nlive == 0)
        carve_pool_span_emptied(p, span, own);
    if (right->u.r.nlive == 0)
        carve_pool_span_emptied(p, right, own);
}

size_t carve_pool_give_room(carve_pool *p, int free_too, int own) {
    if (CARVE_LOAD(&p->graph)) /* a graph pool keeps its memory until released */
        return 0;
    carve_arena *a = p->arena;
    const size_t G = CARVE_SEGMENT_GRANULE;
    size_t given = 0;
    for (carve_block *span = p->spans; span; span = span->fnext) {
        if (span->u.r.nlive == 0)
            continue;
        for (carve_block *b = span->u.r.first, *next; b; b = next) {
            next = b->next;
            if (!(b->state == CARVE_B_UNMAPPED || (free_too && b->state == CARVE_B_FREE)))
                continue;
            uintptr_t lo = carve_align_up(b->addr, G), hi = carve_align_down(b->addr + b->size, G);
            if (hi <= lo)
                continue;
            carve_block *right;
            if (carve_slab_reserve(&p->slab, 1) != 0 || carve_heap_cut(a, span, lo, hi, &right) != 0)
                return given; /* host memory ran out: the rest stays */
            cut_block(p, span, b, lo, hi, right);
            given += hi - lo;
            if (right) { /* the rest of the blocks are right's: it is visited next */
                span_cut(p, span, right, own);
                break;
            }
        }
    }
    return given;
}

carve_block *carve_pool_give_mapped(carve_pool *q, carve_block *f, uintptr_t lo, uintptr_t hi, carve_pool *to) {
    carve_block *span = f->span, *right;
    if (carve_slab_reserve(&q->slab, 2) != 0)
        return NULL;
    carve_block *moved = carve_heap_move(q->arena, span, lo, hi, to, &right);
    if (!moved)
        return NULL;
    carve_vmm_cut_runs(q, f, lo, hi);
    cut_block(q, span, f, lo, hi, right);
    span_cut(q, span, right, 0);
    return moved;
}

int carve_pool_give_front(carve_pool *q, carve_block *u, uintptr_t hi) {
    carve_block *span = u->span, *right;
    uintptr_t lo = u->addr;
    CARVE_ASSERT_INTERNAL(u->state == CARVE_B_UNMAPPED && span->addr == lo && span->u.r.first == u &&
                          hi % CARVE_SEGMENT_GRANULE == 0 && hi > lo && hi <= lo + u->size &&
                          hi < span->addr + span->size);
    if (carve_heap_cut(q->arena, span, lo, hi, &right) != 0)
        return -1;
    CARVE_ASSERT_INTERNAL(right == NULL && span->addr == hi);
    if (hi < lo + u->size) { /* u keeps its back */
        u->size -= hi - lo;
        u->addr = hi;
    } else { /* u goes whole: the span starts with the block after it */
        carve_vmm_list_remove(q, u);
        span->u.r.first = u->next;
        u->next->prev = NULL;
        carve_slab_put(&q->slab, u);
    }
    return 0;
}

carve_block *carve_pool_give_unmapped(carve_pool *q, carve_block *u, uintptr_t lo, uintptr_t hi, carve_pool *to) {
    carve_block *span = u->span, *right;
    const size_t G = CARVE_SEGMENT_GRANULE;
    CARVE_ASSERT_INTERNAL(u->state == CARVE_B_UNMAPPED && lo % G == 0 && hi % G == 0 && lo >= u->addr &&
                          hi <= u->addr + u->size && lo < hi &&
                          ((lo == span->addr && span->u.r.first == u) ||
                           (hi == span->addr + span->size && span->u.r.last == u)));
    carve_block *moved = carve_heap_move(q->arena, span, lo, hi, to, &right);
    if (!moved)
        return NULL;
    CARVE_ASSERT_INTERNAL(right == NULL);
    span->u.r.unmapped -= (hi - lo) / G;
    moved->u.r.unmapped = (hi - lo) / G; /* it holds no memory: installed as one UNMAPPED block */
    if (lo > u->addr) { /* u keeps its front: the span's back went */
        u->size = lo - u->addr;
    } else if (hi < u->addr + u->size) { /* u keeps its back: the span's front went */
        u->size -= hi - lo;
        u->addr = hi;
    } else { /* u goes whole, at the span's front or back */
        carve_vmm_list_remove(q, u);
        if (span->u.r.first == u) {
            span->u.r.first = u->next;
            u->next->prev = NULL;
        } else {
            span->u.r.last = u->prev;
            u->prev->next = NULL;
        }
        carve_slab_put(&q->slab, u);
    }
    return moved;
}

carve_block *carve_pool_join(carve_pool *p, carve_block *keep, carve_block *gone) {
    carve_arena *a = p->arena;
    carve_index *ix = &p->index[keep->cls];
    int after = gone->addr == keep->addr + keep->size;
    carve_block *l = after ? keep : gone, *r = after ? gone : keep;
    CARVE_ASSERT_INTERNAL(a->vmm && keep->state == CARVE_B_SPAN && gone->state == CARVE_B_SPAN &&
                          CARVE_LOAD(&keep->u.r.pool) == p && CARVE_LOAD(&gone->u.r.pool) == p &&
                          keep->cls == gone->cls && gone->u.r.nlive == 0 && l->next == r &&
                          l->addr + l->size == r->addr && l->u.r.seg == r->u.r.seg);
    /* Its empty-span event goes with it (and keep's, where keep is empty
     * too: the joined span then moves to another stream only after a
     * device synchronization, as one emptied with no event does). */
    carve_pool_span_refilled(p, gone);
    if (keep->u.r.nlive == 0)
        carve_pool_span_refilled(p, keep);
    for (carve_block *x = gone->u.r.first; x; x = x->next)
        x->span = keep;
    carve_block *lb = l->u.r.last, *rb = r->u.r.first, *first = l->u.r.first, *last = r->u.r.last;
    if (lb->state == CARVE_B_FREE && rb->state == CARVE_B_FREE) {
        /* (Both edges are granule boundaries: lb's whole granules and rb's
         * are the joined block's, lb's runs first.) */
        carve_block *nx = rb->next;
        size_t size = lb->size + rb->size;
        carve_index_remove(ix, rb);
        carve_vmm_ring_absorb(p, lb, rb);
        lb->next = nx;
        if (nx)
            nx->prev = lb;
        else
            last = lb;
        carve_index_resize(ix, lb, size);
    } else if (lb->state == CARVE_B_UNMAPPED && rb->state == CARVE_B_UNMAPPED) {
        carve_block *nx = rb->next;
        carve_vmm_list_remove(p, rb);
        lb->size += rb->size;
        lb->next = nx;
        if (nx)
            nx->prev = lb;
        else
            last = lb;
        carve_slab_put(&p->slab, rb);
    } else {
        lb->next = rb;
        rb->prev = lb;
    }
    /* The heap's list of ranges loses gone. */
    if (after) {
        keep->next = gone->next;
        if (keep->next)
            keep->next->prev = keep;
    } else {
        keep->prev = gone->prev;
        if (keep->prev)
            keep->prev->next = keep;
        else
            keep->u.r.seg->first = keep;
    }
    keep->addr = l->addr;
    keep->size = l->size + r->size;
    keep->u.r.first = first;
    keep->u.r.last = last;
    keep->u.r.unmapped += gone->u.r.unmapped;
    /* Its ends are ends of what the map answers already; nothing lives in
     * it, but keep's buffers may be freed meanwhile: no node is replaced. */
    carve_pagemap_set(&a->pmap, gone->addr, gone->size, keep, 1);
    if (gone->fprev)
        gone->fprev->fnext = gone->fnext;
    else
        p->spans = gone->fnext;
    if (gone->fnext)
        gone->fnext->fprev = gone->fprev;
    p->nspans--;
    carve_slab_put(&a->heap.slab, gone);
    return keep;
}

void carve_pool_install_span(carve_pool *p, carve_block *span, carve_block *blk) {
    blk->addr = span->addr;
    blk->size = span->size;
    blk->cls = span->cls;
    blk->span = span;
    blk->slack = 0;
    blk->flags = 0;
    blk->prev = blk->next = NULL;
    span->u.r.first = span->u.r.last = blk;
    span->fprev = NULL;
    span->fnext = p->spans;
    if (p->spans)
        p->spans->fprev = span;
    p->spans = span;
    p->nspans++;
    if (span->u.r.unmapped) { /* virtual-memory mode: the heap's ranges hold no memory */
        CARVE_ASSERT_INTERNAL(span->u.r.unmapped == span->size / CARVE_SEGMENT_GRANULE);
        carve_vmm_list_add(p, blk);
    } else {
        blk->state = CARVE_B_FREE;
        carve_index_insert(&p->index[span->cls], blk);
    }
}

void carve_pool_extend_span(carve_pool *p, carve_block *span, size_t added, carve_block *blk) {
    carve_index *ix = &p->index[span->cls];
    carve_block *last = span->u.r.last;
    /* In virtual-memory mode what the heap adds holds no memory yet. */
    int unmapped = p->arena->vmm;
    if (last->state == (unmapped ? CARVE_B_UNMAPPED : CARVE_B_FREE)) {
        if (unmapped)
            last->size += added;
        else
            carve_index_resize(ix, last, last->size + added);
        carve_slab_put(&p->slab, blk);
        return;
    }
    carve_block_link(blk, span, last, last->addr + last->size, added);
    if (unmapped) {
        carve_vmm_list_add(p, blk);
    } else {
        blk->state = CARVE_B_FREE;
        carve_index_insert(ix, blk);
    }
}

void carve_pool_flush(carve_arena *a, carve_pool *p) {
    size_t ga = CARVE_ADD(&a->g_alloc, (size_t)p->unflushed_alloc);
    size_t gr = CARVE_ADD(&a->g_req, (size_t)p->unflushed_req);
    carve_atomic_max(&a->g_alloc_peak, ga);
    carve_atomic_max(&a->g_req_peak, gr);
    p->unflushed_alloc = p->unflushed_req = 0;
}

