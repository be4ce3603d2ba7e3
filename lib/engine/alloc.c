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
#include "engine/alloc.h"

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

/* The out-of-memory answer to an allocation of size bytes (aligned to
 * align; up to 256: carve_alloc) on s, failed for the reason why; host:
 * that reason is host memory running out. */
static carve_status alloc_oom(carve_arena *a, size_t size, size_t align, carve_stream s, const char *why, int host) {
    char req[32], al[32], rq[32], rs[32], ca[32], lf[32], li[32], what[64];
    carve_stats st;
    CARVE_ADD(&a->nooms, 1);
    carve_stats_collect(a, &st, 0);
    if (align > CARVE_ALIGNMENT)
        snprintf(what, sizeof(what), "carve_alloc_aligned (to %zu bytes)", align);
    else
        snprintf(what, sizeof(what), "carve_alloc");
    return carve_fail_host(
        a, CARVE_ERR_OOM, host,
        "out of memory: %s of %s (%zu bytes) on stream %p in arena '%s' (%s backend, "
        "device %d) failed: %s. %llu live buffers: %s allocated (%s requested); %s reserved, %s of it "
        "cached; largest free block %s; limit %s.",
        what, carve_format_bytes(req, sizeof(req), size), size, (void *)carve_stream_public(s), a->name,
        carve_backend_str(a->be.kind), a->be.device, why && *why ? why : "no free block fits",
        (unsigned long long)st.num_live, carve_format_bytes(al, sizeof(al), st.allocated_bytes),
        carve_format_bytes(rq, sizeof(rq), st.requested_bytes),
        carve_format_bytes(rs, sizeof(rs), st.reserved_bytes),
        carve_format_bytes(ca, sizeof(ca), st.cached_bytes),
        carve_format_bytes(lf, sizeof(lf), st.largest_free_block),
        carve_format_bytes(li, sizeof(li), CARVE_LOAD(&a->limit)));
}

/* One call of an arena's out-of-memory callback in progress (with its
 * retry), on the stack of the thread that makes it: in the arena's list
 * (under its oom_lock) and in the thread's. */
typedef struct carve_oom_call {
    carve_arena *arena;
    uint64_t gen;      /* the setting of the callback it called (a->oom_gen) */
    int parked;        /* its thread waits in carve_set_oom_callback */
    struct carve_oom_call *prev, *next; /* the arena's calls */
    struct carve_oom_call *outer;       /* the thread's call around this one */
} carve_oom_call;

/* The calling thread's calls in progress, innermost first: an allocation on
 * an arena whose callback runs on this thread does not call it again; other
 * arenas' callbacks are called as always. */
static __thread carve_oom_call *tls_oom_calls;

static int oom_running_here(const carve_arena *a) {
    for (const carve_oom_call *c = tls_oom_calls; c; c = c->outer)
        if (c->arena == a)
            return 1;
    return 0;
}

/* Mark the calling thread's calls in progress as waiting (or no longer) in
 * carve_set_oom_callback: a thread replacing a callback does not wait for
 * them (they cannot return before it does), so two callbacks that replace
 * each other's at once, or their own, never wait forever. */
static void oom_park(int parked) {
    for (carve_oom_call *c = tls_oom_calls; c; c = c->outer) {
        carve_mutex_lock(&c->arena->oom_lock);
        c->parked = parked;
        if (parked && c->arena->oom_waiters)
            carve_cond_broadcast(&c->arena->oom_done);
        carve_mutex_unlock(&c->arena->oom_lock);
    }
}

carve_status carve_set_oom_callback(carve_arena *a, carve_oom_fn fn, void *user) {
    if (!a)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_set_oom_callback: arena is NULL");
    oom_park(1);
    carve_mutex_lock(&a->oom_lock);
    a->oom_fn = fn;
    a->oom_user = fn ? user : NULL;
    uint64_t gen = ++a->oom_gen;
    /* Until the calls of earlier settings on other threads have returned:
     * after this, the old callback and its argument are the caller's. */
    a->oom_waiters++;
    for (;;) {
        const carve_oom_call *c = a->oom_calls;
        while (c && (c->gen >= gen || c->parked))
            c = c->next;
        if (!c)
            break;
        carve_cond_wait(&a->oom_done, &a->oom_lock);
    }
    a->oom_waiters--;
    carve_mutex_unlock(&a->oom_lock);
    oom_park(0);
    return CARVE_OK;
}

/* No lock held; the allocation of size bytes (aligned to align; 0: plain
 * carve_alloc, or carve_alloc_flags with flags) on s ran out of memory,
 * for the reason why (about host memory when host is nonzero). Call the
 * arena's out-of-memory callback, if any, and retry once at its word;
 * otherwise (and when the retry fails) the out-of-memory answer. */
__attribute__((noinline, cold)) static carve_status oom_answer(carve_arena *a, size_t size, size_t align,
                                                             unsigned flags, carve_stream s, void **out,
                                                             const char *why, int host) {
    carve_mutex_lock(&a->oom_lock);
    carve_oom_fn fn = a->oom_fn;
    void *user = a->oom_user;
    if (!fn || oom_running_here(a)) {
        carve_mutex_unlock(&a->oom_lock);
        return alloc_oom(a, size, align, s, why, host);
    }
    /* In progress from here: carve_set_oom_callback waits for it to return. */
    carve_oom_call call = {.arena = a, .gen = a->oom_gen, .next = a->oom_calls, .outer = tls_oom_calls};
    if (a->oom_calls)
        a->oom_calls->prev = &call;
    a->oom_calls = &call;
    tls_oom_calls = &call;
    carve_mutex_unlock(&a->oom_lock);
    carve_stats st;
    carve_stats_collect(a, &st, 0);
    carve_oom_info info = {.size = sizeof(info), .request_bytes = size,
                           .align = align > CARVE_ALIGNMENT ? align : CARVE_ALIGNMENT,
                           .stream = carve_stream_public(s), .allocated_bytes = st.allocated_bytes,
                           .reserved_bytes = st.reserved_bytes, .cached_bytes = st.cached_bytes,
                           .largest_free_block = st.largest_free_block, .limit_bytes = st.limit_bytes,
                           .num_live = st.num_live};
    char reason[256];
    snprintf(reason, sizeof(reason), "%s", why ? why : "");
    int answer = fn(a, &info, user);
    carve_status r;
    if (answer == CARVE_OOM_RETRY) {
        CARVE_ADD(&a->nretries, 1);
        r = align ? carve_alloc_aligned(a, size, align, s, out) : carve_alloc_flags(a, size, s, flags, out);
    } else {
        r = alloc_oom(a, size, align, s, reason, host);
    }
    carve_mutex_lock(&a->oom_lock);
    if (call.prev)
        call.prev->next = call.next;
    else
        a->oom_calls = call.next;
    if (call.next)
        call.next->prev = call.prev;
    tls_oom_calls = call.outer;
    if (a->oom_waiters)
        carve_cond_broadcast(&a->oom_done);
    carve_mutex_unlock(&a->oom_lock);
    return r;
}

/* Pool lock held: drop it, reclaim (carve_reclaim flags), retake it.
 * The reason of the failure that led here survives for the OOM message.
 * Returns 1 when a stream capture kept the reclaim from waiting. */
static int reclaim_unlocked(carve_arena *a, carve_pool *p, unsigned flags) {
    char why[256];
    snprintf(why, sizeof(why), "%s", carve_note_get());
    carve_spin_unlock(&p->lock);
    carve_reclaim(a, flags, p->stream);
    carve_spin_lock(&p->lock);
    carve_note("%s", why);
    return (flags & CARVE_RECLAIM_WAIT) && carve_reclaim_captured();
}

/* The reason of an out-of-memory failure, when a capture kept the reclaim
 * before it from waiting: the memory other streams cached may well be free,
 * but only a device synchronization, which would break the capture, could
 * tell. */
static void note_captured(void) {
    if (strstr(carve_note_get(), "a stream capture was underway")) /* said already (a nested retry) */
        return;
    char why[256];
    snprintf(why, sizeof(why), "%s", carve_note_get());
    carve_note("%s; a stream capture was underway, so the device was not synchronized and memory other streams "
               "freed could not be proved free for this one (the synchronization would break the capture; "
               "retry after it)",
               why);
}

/* A request with CARVE_ALLOC_HELD needs more memory than the arena holds. */
static carve_block *held_short(void) {
    carve_note("the arena holds no free block for it without reserving or mapping more");
    return NULL;
}

/* Pool and heap locks held. Grow one of the pool's spans of class cls into
 * the free range right after it, so the new memory merges with the span's
 * last free block: a stream's spans then behave as one region. Returns the
 * span's last block, which now fits rs (in virtual-memory mode it is
 * UNMAPPED, perhaps with a FREE block before it that makes up the rest),
 * or NULL. */
static carve_block *pool_extend(carve_arena *a, carve_pool *p, unsigned cls, size_t rs, size_t want) {
    for (carve_block *span = p->spans; span; span = span->fnext) {
        if (span->cls != cls)
            continue;
        carve_block *last = span->u.r.last;
        /* Room at the end: a FREE block, or (virtual-memory mode) an
         * UNMAPPED one with perhaps a FREE one before it. */
        size_t tail = last->state == CARVE_B_FREE || last->state == CARVE_B_UNMAPPED ? last->size : 0;
        if (last->state == CARVE_B_UNMAPPED && last->prev && last->prev->state == CARVE_B_FREE)
            tail += last->prev->size;
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

/* Pool lock held; the pool's index has no block for rs (and, in
 * virtual-memory mode, no UNMAPPED place holds it either). Bring a span in:
 * by extending a span of the pool, from the heap (after giving the heap this
 * pool's empty spans, so they can merge, and in virtual-memory mode the
 * address space its spans hold with nothing mapped), by growing — but before
 * growing past the largest footprint so far, other streams are asked for
 * their empty spans first — then after reclaiming every stream's cached
 * memory and waiting for it, and last after every stream has also given
 * back the free room inside its spans; a free block of the other size
 * class that fits is taken before giving up.
 * Returns a free indexed block of at least rs bytes (in
 * virtual-memory mode, the new UNMAPPED room may be that block or its
 * neighbour), or NULL with *st set. The pool lock is dropped and retaken
 * around reclaims. */
static carve_block *pool_refill(carve_arena *a, carve_pool *p, unsigned cls, size_t rs, unsigned flags,
                                carve_status *st) {
    size_t want = span_want(cls, rs), need = span_need(cls, rs);
    int asked_others = 0, captured = 0;
    carve_note("%s", "");
    for (int attempt = 0;; attempt++) {
        if (carve_slab_reserve(&p->slab, 1) != 0) {
            carve_note_host(1, "host memory exhausted for carve's metadata");
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
        /* Virtual-memory mode: before reserving more address space, the
         * address space this pool holds with nothing mapped goes back, so
         * that it can merge with the free ranges around it. */
        if (!span && *st == CARVE_OK && a->vmm && carve_pool_give_room(p, 0, 1) > 0)
            span = carve_heap_take(a, p, cls, want, need, st);
        int ask_others = !span && *st == CARVE_OK && !asked_others && !a->vmm && CARVE_LOAD(&a->multi) &&
                         CARVE_LOAD(&a->heap.reserved) + want > CARVE_LOAD(&a->heap.reserved_peak);
        if (!span && *st == CARVE_OK && !ask_others && (flags & CARVE_ALLOC_HELD)) { /* growing is the caller's to decide */
            carve_mutex_unlock(&a->heap.lock);
            *st = CARVE_ERR_OOM;
            return held_short();
        }
        if (!span && *st == CARVE_OK && !ask_others) {
            *st = carve_heap_grow(a, want, need, p->stream);
            if (*st == CARVE_OK)
                span = carve_heap_take(a, p, cls, want, need, st);
        }
        carve_mutex_unlock(&a->heap.lock);
        if (ask_others) { /* without waiting: ranges whose events are done become usable */
            asked_others = 1;
            attempt--;
            reclaim_unlocked(a, p, 0);
            carve_block *b = carve_index_find_fit(&p->index[cls], rs);
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
        /* Out of room for a new span: a free block in a span of the other
         * class will do rather than fail (the segregation is a preference). */
        carve_block *b;
        if (*st == CARVE_ERR_OOM && (b = carve_index_find_fit(&p->index[!cls], rs)))
            return b;
        if (*st != CARVE_ERR_OOM || attempt == 2 || (flags & CARVE_ALLOC_HELD)) {
            if (captured && *st == CARVE_ERR_OOM)
                note_captured();
            return NULL;
        }
        /* Release cached memory everywhere and retry; the second time, the
         * free room inside other streams' spans too (it moves only now:
         * cutting spans around their live buffers scatters what the next
         * requests of those streams touch). */
        captured |= reclaim_unlocked(a, p, CARVE_RECLAIM_WAIT | (a->growth ? CARVE_RECLAIM_RELEASE : 0) |
                                               (attempt == 1 ? CARVE_RECLAIM_ROOM : 0));
        if ((b = carve_index_find_fit(&p->index[cls], rs)))
            return b;
    }
}

static inline __attribute__((always_inline)) carve_block *block_split(carve_pool *p, carve_block *b, size_t rs);

/* q's lock held, q another stream's pool: whether a completed fence of q
 * covers every run of b's free granules in [lo, hi); q's fences are polled
 * at most once per look (*polled), when the answer is no without them. */
static int runs_done_polled(carve_arena *a, carve_pool *q, carve_block *b, uintptr_t lo, uintptr_t hi, int *polled) {
    int done = carve_vmm_runs_done(b, lo, hi, q->vdone);
    if (!done && !*polled) {
        *polled = 1;
        carve_vmm_fences_poll(a, q);
        done = carve_vmm_runs_done(b, lo, hi, q->vdone);
    }
    return done;
}

/* Pool lock held, virtual-memory mode, several streams, and p would map
 * granules for rs bytes. Memory moves between streams here without the
 * driver: another stream's free mapped granules that the device is done
 * with (a completed fence of that stream covers every one) become a span of
 * p as they are (carve_pool_give_mapped), instead of that stream unmapping
 * them one day and p mapping others now. A pool whose lock is busy is
 * passed over (p's lock is held: waiting could deadlock), and so is a graph
 * pool, whose memory its graphs' replays use until it is released. Returns a FREE
 * indexed block of p that starts a granule and holds rs bytes, or NULL. */
__attribute__((noinline, cold)) static carve_block *vmm_adopt(carve_arena *a, carve_pool *p, unsigned cls,
                                                            size_t rs) {
    const size_t G = CARVE_SEGMENT_GRANULE;
    size_t n = carve_align_up(rs, G);
    if (carve_slab_reserve(&p->slab, 1) != 0 || carve_blockmap_reserve(&p->map) != 0)
        return NULL;
    for (carve_pool *q = CARVE_LOAD_ACQ(&a->pools); q; q = q->next_all) {
        if (q == p || CARVE_LOAD(&q->graph) || !carve_spin_trylock(&q->lock))
            continue; /* (a graph pool's memory stays its graphs' until released) */
        carve_block *moved = NULL;
        int polled = 0, looked = 0;
        /* The free blocks of q that may hold the request, smallest class
         * first (at most CARVE_VMM_ADOPT_LOOK of them: q's lock is held):
         * the first whose granules a completed fence covers moves. (The
         * first fitting block alone was often one whose frees were not
         * yet done, where another was.) */
        const carve_index *ix = &q->index[cls];
        unsigned fl, sl;
        carve_index_class(n, &fl, &sl);
        while (!moved && looked < CARVE_VMM_ADOPT_LOOK && carve_index_next_class(ix, &fl, &sl)) {
            for (carve_block *f = ix->heads[fl][sl]; f && !moved && looked < CARVE_VMM_ADOPT_LOOK; f = f->fnext) {
                looked++;
                uintptr_t lo = carve_align_up(f->addr, G), hi = lo + n, mlo, mhi;
                if (f->size < n || hi > carve_align_down(f->addr + f->size, G))
                    continue;
                /* Whole mappings move (the driver unmaps whole mappings
                 * only, and a mapping stays inside one span: maps.h). */
                if (carve_maps_find(&a->maps, lo, &mlo, &mhi, NULL) && mlo < lo)
                    hi = (lo = mhi) + n;
                if (carve_maps_find(&a->maps, hi - G, &mlo, &mhi, NULL))
                    hi = mhi;
                if (hi > carve_align_down(f->addr + f->size, G) ||
                    (lo == f->span->addr && hi == f->span->addr + f->span->size))
                    continue;
                if (runs_done_polled(a, q, f, lo, hi, &polled)) {
                    carve_mutex_lock(&a->heap.lock);
                    moved = carve_pool_give_mapped(q, f, lo, hi, p);
                    carve_mutex_unlock(&a->heap.lock);
                    if (!moved) /* host memory ran out */
                        looked = CARVE_VMM_ADOPT_LOOK;
                }
            }
            if (++sl == CARVE_SL_COUNT) {
                sl = 0;
                fl++;
            }
        }
        carve_spin_unlock(&q->lock);
        if (moved) {
            carve_block *blk = carve_slab_get(&p->slab);
            carve_pool_install_span(p, moved, blk);
            carve_vmm_adopted(p, blk);
            __atomic_add_fetch(&a->heap.nmoved, (uint64_t)(moved->size / G), __ATOMIC_RELAXED);
            return blk;
        }
    }
    return NULL;
}

/* A stretch of free address space across the joint of two spans, in
 * address order: mapped (FREE) or not (UNMAPPED) pieces. */
typedef struct join_piece {
    uintptr_t lo, hi;
    int mapped;
} join_piece;

/* The free pieces of span s at its edge (its start when front, else its
 * end), walking inward, filled into v from the edge outward; returns their
 * count, at most CARVE_VMM_JOIN_LOOK. With q == NULL, s is the taker's:
 * its FREE and UNMAPPED blocks up to the first live one (its own pool's:
 * no fence needed, partial granules kept). Else s is pool q's (locked) and
 * the pieces are what may leave it: UNMAPPED room (it holds no memory: no
 * fence needed) and the whole granules of FREE blocks that a completed
 * fence of q covers (q's fences polled once), up to a live block, a
 * partial granule or a FREE block whose frees are not yet done. s keeps at
 * least a granule, and the far end of the pieces never cuts a mapping of
 * several granules (maps.h). */
static int join_pieces(carve_arena *a, carve_pool *q, carve_block *s, int front, join_piece *v, int *polled) {
    const size_t G = CARVE_SEGMENT_GRANULE;
    int n = 0;
    /* (q's span keeps a granule at its far end from the joint.) */
    uintptr_t limit_lo = s->addr + (q && !front ? G : 0), limit_hi = s->addr + s->size - (q && front ? G : 0);
    for (carve_block *b = front ? s->u.r.first : s->u.r.last; b && n < CARVE_VMM_JOIN_LOOK;
         b = front ? b->next : b->prev) {
        uintptr_t lo = b->addr, hi = b->addr + b->size;
        int mapped = b->state == CARVE_B_FREE;
        if (!mapped && b->state != CARVE_B_UNMAPPED)
            break;
        if (q && mapped) {
            uintptr_t glo = carve_align_up(lo, G), ghi = carve_align_down(hi, G);
            if ((front ? glo != lo : ghi != hi) || ghi <= glo)
                break;
            lo = glo;
            hi = ghi;
        }
        if (q) { /* the span keeps a granule */
            lo = lo < limit_lo ? limit_lo : lo;
            hi = hi > limit_hi ? limit_hi : hi;
            if (hi <= lo)
                break;
        }
        if (q && mapped) {
            if (!runs_done_polled(a, q, b, lo, hi, polled))
                break;
        }
        v[n].lo = lo;
        v[n].hi = hi;
        v[n].mapped = mapped;
        n++;
        if (q && (front ? hi != b->addr + b->size : lo != b->addr))
            break; /* cut short: what follows stays */
    }
    /* Whole mappings only: the far end of q's pieces moves back to the
     * edge of a mapping that reaches past it. */
    while (q && n) {
        join_piece *e = &v[n - 1];
        uintptr_t at = front ? e->hi - G : e->lo, mlo, mhi;
        if (!e->mapped || !carve_maps_find(&a->maps, at, &mlo, &mhi, NULL) ||
            (front ? mhi <= e->hi : mlo >= e->lo))
            break;
        if (front ? mlo > e->lo : mhi < e->hi) {
            if (front)
                e->hi = mlo;
            else
                e->lo = mhi;
            break;
        }
        n--;
    }
    return n;
}

/* The fewest granules a request of rs bytes maps in the stretch v[0..n)
 * (address order), placed as vmm_place places it (at the front or the back
 * of an UNMAPPED piece with its mapped neighbours, or in a mapped piece),
 * among the places that reach past joint on the far side (after: above it,
 * else below it); *reach gets how far into the far side that place reaches
 * (granule-aligned). SIZE_MAX when none holds it. */
static size_t join_need(const join_piece *v, int n, uintptr_t joint, int after, size_t rs, uintptr_t *reach) {
    const size_t G = CARVE_SEGMENT_GRANULE;
    size_t best = SIZE_MAX;
    for (int i = 0; i < n; i++) {
        uintptr_t lo = v[i].lo, hi = v[i].hi, ua = lo, ub = hi;
        if (!v[i].mapped) {
            if (i > 0 && v[i - 1].mapped)
                lo = v[i - 1].lo;
            if (i + 1 < n && v[i + 1].mapped)
                hi = v[i + 1].hi;
        } else if (i + 1 < n && !v[i + 1].mapped) {
            continue; /* its UNMAPPED neighbour's windows hold it */
        } else if (i > 0 && !v[i - 1].mapped) {
            continue;
        }
        if (hi - lo < rs)
            continue;
        size_t need;
        uintptr_t at;
        if (v[i].mapped) {
            need = 0;
            at = after ? lo : hi - rs;
        } else {
            uintptr_t end = lo + rs, x = hi - rs;
            size_t front = end <= ua ? 0 : (carve_align_up(end < ub ? end : ub, G) - ua) / G;
            size_t back = x >= ub ? 0 : (ub - carve_align_down(x > ua ? x : ua, G)) / G;
            int use_back = back < front;
            need = use_back ? back : front;
            at = use_back ? x : lo;
        }
        if (after ? at + rs <= joint : at >= joint)
            continue; /* no need of the other stream's memory */
        if (need < best) {
            best = need;
            *reach = after ? carve_align_up(at + rs, G) : carve_align_down(at, G);
            if (v[i].mapped) /* a mapped piece is taken whole (a block holds it from its start) */
                *reach = after ? hi : lo;
        }
    }
    return best;
}

/* Pool lock held, virtual-memory mode, several streams: p would map need
 * granules for rs bytes (mapping would first unmap), and no free block of
 * another stream holds them whole (vmm_adopt). Where another stream's span
 * lies right after (or before) a span of p, and its free edge (UNMAPPED
 * room, and mapped memory whose frees a completed fence of that stream
 * shows done) together with p's free edge holds the request with fewer
 * granules mapped than p's own best place, that edge leaves the other
 * stream (no driver call: carve_pool_give_unmapped, carve_pool_give_mapped)
 * and joins p's span (carve_pool_join): free memory on either side of the
 * joint becomes one block of p, whatever stream freed it, and the room
 * there is p's to grow into, next to the other stream's memory. Of all
 * joints, the one that maps fewest is taken. The other pool is try-locked
 * (p's lock is held) and a graph pool is passed over. Returns 1 when an
 * edge was joined (then a FREE block of p holds rs bytes, or vmm_place
 * finds the place), else 0. */
__attribute__((noinline, cold)) static int vmm_join(carve_arena *a, carve_pool *p, unsigned cls, size_t rs,
                                                  size_t need) {
    carve_block *bs = NULL;
    carve_pool *bq = NULL;
    int bafter = 0;
    uintptr_t breach = 0;
    size_t bneed = need;
    join_piece v[2 * CARVE_VMM_JOIN_LOOK];
    carve_mutex_lock(&a->heap.lock); /* the ranges next to p's spans stay where they are */
    for (carve_block *s = p->spans; s; s = s->fnext) {
        if (s->cls != cls)
            continue;
        for (int after = 0; after < 2; after++) {
            carve_block *t = after ? s->next : s->prev;
            carve_pool *q = t && t->state == CARVE_B_SPAN ? CARVE_LOAD(&t->u.r.pool) : NULL;
            if (!q || q == p || t->cls != cls || CARVE_LOAD(&q->graph) || !carve_spin_trylock(&q->lock))
                continue;
            join_piece mine[CARVE_VMM_JOIN_LOOK], theirs[CARVE_VMM_JOIN_LOOK];
            int polled = 0;
            int nm = join_pieces(a, NULL, s, !after, mine, &polled);
            int nt = join_pieces(a, q, t, after, theirs, &polled);
            carve_spin_unlock(&q->lock);
            if (!nt)
                continue;
            /* Address order, the pieces at the joint merged where both are
             * mapped or both not. */
            int n = 0;
            join_piece *lo = after ? mine : theirs, *hi = after ? theirs : mine;
            int nlo = after ? nm : nt, nhi = after ? nt : nm;
            for (int i = nlo - 1; i >= 0; i--)
                v[n++] = lo[i];
            for (int i = 0; i < nhi; i++) {
                if (i == 0 && n && v[n - 1].mapped == hi[0].mapped && v[n - 1].hi == hi[0].lo)
                    v[n - 1].hi = hi[0].hi;
                else
                    v[n++] = hi[i];
            }
            uintptr_t reach = 0, joint = after ? s->addr + s->size : s->addr;
            size_t k = join_need(v, n, joint, after, rs, &reach);
            if (k < bneed) {
                bneed = k;
                bs = s;
                bq = q;
                bafter = after;
                breach = reach;
            }
        }
    }
    int joined = 0;
    if (bs && carve_spin_trylock(&bq->lock)) {
        const size_t G = CARVE_SEGMENT_GRANULE;
        carve_block *s = bs;
        /* The other stream's blocks from the joint on, one at a time, each
         * checked again as it goes (its lock was dropped meanwhile). */
        while (bafter ? s->addr + s->size < breach : s->addr > breach) {
            carve_block *t = bafter ? s->next : s->prev;
            if (!t || t->state != CARVE_B_SPAN || CARVE_LOAD(&t->u.r.pool) != bq)
                break;
            join_piece e[CARVE_VMM_JOIN_LOOK];
            int polled = 0;
            if (!join_pieces(a, bq, t, bafter, e, &polled))
                break;
            uintptr_t lo = e[0].lo, hi = e[0].hi;
            if (bafter ? hi > breach : lo < breach) {
                if (bafter)
                    hi = breach;
                else
                    lo = breach;
            }
            uintptr_t mlo, mhi;
            if (e[0].mapped && carve_maps_find(&a->maps, bafter ? hi - G : lo, &mlo, &mhi, NULL)) {
                /* A mapping is cut by no edge: it moves whole (the far
                 * end of e[0] cuts none). */
                if (bafter && mhi > hi)
                    hi = mhi < e[0].hi ? mhi : e[0].hi;
                if (!bafter && mlo < lo)
                    lo = mlo > e[0].lo ? mlo : e[0].lo;
            }
            carve_block *b = bafter ? t->u.r.first : t->u.r.last, *moved;
            if (carve_slab_reserve(&p->slab, 1) != 0)
                break;
            moved = e[0].mapped ? carve_pool_give_mapped(bq, b, lo, hi, p) : carve_pool_give_unmapped(bq, b, lo, hi, p);
            if (!moved)
                break;
            carve_block *blk = carve_slab_get(&p->slab);
            carve_pool_install_span(p, moved, blk);
            if (e[0].mapped) {
                carve_vmm_adopted(p, blk);
                __atomic_add_fetch(&a->heap.nmoved, (uint64_t)(moved->size / G), __ATOMIC_RELAXED);
            }
            s = carve_pool_join(p, s, moved);
            joined = 1;
        }
        carve_spin_unlock(&bq->lock);
        if (joined)
            __atomic_add_fetch(&a->heap.njoins, 1, __ATOMIC_RELAXED);

    }
    carve_mutex_unlock(&a->heap.lock);
    return joined;
}

/* Pool lock held, virtual-memory mode, several streams: no free block of
 * another stream holds rs bytes whole (vmm_adopt), and p would map need
 * granules for them. A window of another stream's span may still hold
 * them: the whole granules at the back of a FREE block whose frees a
 * completed fence of that stream shows done, and the UNMAPPED room right
 * after it. The mapped part moves to p as a span of its own (as vmm_adopt
 * moves it, no driver call), the room it needs of the rest goes back to the
 * heap and that span grows into it: p then maps only the granules of the
 * window that were never mapped, fewer than need, where it would otherwise
 * map all of them (and the other stream's free memory would be unmapped
 * one day to make room). The stream whose window gives the most mapped
 * memory is taken. Returns 1 when a window moved (p's new span ends in an
 * UNMAPPED block after a FREE one: vmm_place finds it), else 0. */
__attribute__((noinline, cold)) static int vmm_adopt_window(carve_arena *a, carve_pool *p, unsigned cls, size_t rs,
                                                          size_t need) {
    const size_t G = CARVE_SEGMENT_GRANULE;
    size_t n = carve_align_up(rs, G);
    if (carve_slab_reserve(&p->slab, 2) != 0 || carve_blockmap_reserve(&p->map) != 0)
        return 0;
    for (carve_pool *q = CARVE_LOAD_ACQ(&a->pools); q; q = q->next_all) {
        if (q == p || CARVE_LOAD(&q->graph) || !carve_spin_trylock(&q->lock))
            continue;
        carve_block *bl = NULL, *bu = NULL;
        uintptr_t blo = 0, bhi = 0;
        int polled = 0;
        for (carve_block *u = q->unmapped[cls]; u; u = u->fnext) {
            carve_block *l = u->prev, *span = u->span;
            uintptr_t mid = u->addr, lo, mlo, mhi;
            if (!l || l->state != CARVE_B_FREE)
                continue;
            lo = carve_align_up(l->addr, G);
            /* Whole mappings move (maps.h: a mapping stays inside one span). */
            if (lo < mid && carve_maps_find(&a->maps, lo, &mlo, &mhi, NULL) && mlo < lo)
                lo = mhi;
            if (lo >= mid || mid - lo + u->size < n)
                continue;
            uintptr_t hi = lo + n > mid ? carve_align_up(lo + n, G) : mid;
            /* The span keeps something after the window (a span is never
             * cut whole), and the window maps fewer granules than p would. */
            if (hi >= span->addr + span->size || (hi - mid) / G >= need || (bl && mid - lo <= bhi - blo))
                continue;
            if (!runs_done_polled(a, q, l, lo, mid, &polled))
                continue;
            bl = l;
            bu = u;
            blo = lo;
            bhi = hi;
        }
        carve_block *moved = NULL;
        if (bl && carve_slab_reserve(&q->slab, 3) == 0) {
            uintptr_t mid = bu->addr;
            /* One stretch under the heap lock, so that no other stream takes
             * the room between the moves and the growth into it. */
            carve_mutex_lock(&a->heap.lock);
            moved = carve_pool_give_mapped(q, bl, blo, mid, p);
            if (moved) {
                if (bhi > mid && carve_pool_give_front(q, bu, bhi) != 0)
                    bhi = mid; /* host memory ran out for the records: the mapped part alone moves */
                carve_block *blk = carve_slab_get(&p->slab);
                carve_pool_install_span(p, moved, blk);
                carve_vmm_adopted(p, blk);
                size_t added = bhi > mid ? carve_heap_extend(a, moved, bhi - mid, bhi - mid) : 0;
                if (added)
                    carve_pool_extend_span(p, moved, added, carve_slab_get(&p->slab));
                __atomic_add_fetch(&a->heap.nmoved, (uint64_t)((mid - blo) / G), __ATOMIC_RELAXED);
                __atomic_add_fetch(&a->heap.nwindows, 1, __ATOMIC_RELAXED);
            }
            carve_mutex_unlock(&a->heap.lock);
        }
        carve_spin_unlock(&q->lock);
        if (moved)
            return 1;
    }
    return 0;
}

/* Pool lock held, virtual-memory mode, and no FREE block holds rs bytes.
 * Look at every UNMAPPED block of the class with its FREE neighbours: the
 * request can sit at the front of that window (using the FREE block before
 * and the UNMAPPED block's first granules) or at its back (its last granules
 * and the FREE block after). Take the place that needs the fewest granules
 * mapped, the lowest address among equals (which keeps what is touched
 * compact), map them, and return a FREE indexed block that starts at the
 * place. NULL with *st CARVE_OK when no window is large enough; NULL with
 * the mapping's status when mapping failed. A program whose requests change
 * shape (serving, dynamic batches) then lands where earlier requests left
 * memory mapped instead of unmapping it to map other granules, and a scan
 * of host memory replaces driver calls that cost tens of microseconds. */
__attribute__((noinline, cold)) static carve_block *vmm_place(carve_arena *a, carve_pool *p, unsigned cls,
                                                            size_t rs, unsigned flags, carve_status *st) {
    const size_t G = CARVE_SEGMENT_GRANULE;
    carve_block *best = NULL;
    size_t best_need = SIZE_MAX;
    uintptr_t best_x = 0;
    int best_back = 0, window = 0;
    carve_block *m0;
    *st = CARVE_OK;
scan:
    best = NULL;
    best_need = SIZE_MAX;
    best_x = 0;
    best_back = 0;
    for (carve_block *u = p->unmapped[cls]; u; u = u->fnext) {
        carve_block *l = u->prev && u->prev->state == CARVE_B_FREE ? u->prev : NULL;
        carve_block *r = u->next && u->next->state == CARVE_B_FREE ? u->next : NULL;
        uintptr_t ua = u->addr, ub = u->addr + u->size;
        uintptr_t lo = l ? l->addr : ua, hi = r ? r->addr + r->size : ub;
        if (hi - lo < rs)
            continue;
        uintptr_t end = lo + rs, x = hi - rs;
        size_t front = end <= ua ? 0 : (carve_align_up(end < ub ? end : ub, G) - ua) / G;
        size_t back = x >= ub ? 0 : (ub - carve_align_down(x > ua ? x : ua, G)) / G;
        int use_back = back < front;
        size_t need = use_back ? back : front;
        uintptr_t at = use_back ? x : lo;
        if (need < best_need || (need == best_need && at < best_x)) {
            best = u;
            best_need = need;
            best_x = at;
            best_back = use_back;
        }
    }
    /* Mapping would first unmap free granules somewhere: another stream's
     * free mapped memory, where it holds the request, comes over instead. */
    if ((!best || best_need) && CARVE_LOAD(&a->multi) && !window &&
        carve_vmm_would_unmap(a, p, best ? best_need * G : carve_align_up(rs, G))) {
        if ((m0 = vmm_adopt(a, p, cls, rs)))
            return m0;
        /* Else the free edge of another stream's span next to one of p's,
         * joined to it: one range, whatever stream freed what. */
        if (vmm_join(a, p, cls, rs, best ? best_need : carve_align_up(rs, G) / G + 1)) {
            window = 1;
            if ((m0 = carve_index_find_fit(&p->index[cls], rs)))
                return m0;
            goto scan;
        }
        /* Else a window of another stream's mapped memory and room, where
         * it needs fewer granules mapped than any place of p's own. */
        if (!(flags & CARVE_ALLOC_HELD) &&
            vmm_adopt_window(a, p, cls, rs, best ? best_need : carve_align_up(rs, G) / G + 1)) {
            window = 1;
            goto scan;
        }
    }
    if (!best)
        return NULL;
    if (best_need && (flags & CARVE_ALLOC_HELD)) { /* mapping more is the caller's to decide */
        *st = CARVE_ERR_OOM;
        return held_short();
    }
    carve_block *u = best, *m;
    if (carve_slab_reserve(&p->slab, 3) != 0 || carve_blockmap_reserve(&p->map) != 0) {
        carve_note_host(1, "host memory exhausted for carve's metadata");
        *st = CARVE_ERR_OOM;
        return NULL;
    }
    if (best_need == 0) { /* a FREE neighbour holds it alone (the index scan passed it over) */
        m = best_back ? u->next : u->prev;
    } else {
        uintptr_t ga = best_back ? u->addr + u->size - best_need * G : u->addr;
        /* Making room must leave mapped the place itself, and the granules
         * next to u (unmapping one would merge u away). */
        carve_keep keep = {{best_x, u->addr - G}, {best_x + rs, u->addr + u->size + G}};
        uintptr_t kept_at = 0;
        size_t kept = 0;
        *st = carve_vmm_map(a, p, u->span, ga, best_need * G, best_x, best_x + rs, &keep, &kept_at, &kept,
                            (flags & CARVE_ALLOC_REPLACE) != 0);
        if (kept) /* mapped, and refused to go again: free memory, let go now */
            carve_vmm_unclaimed(p, carve_vmm_claim(p, u, kept_at, kept_at + kept));
        if (*st != CARVE_OK)
            return NULL;
        /* The records reserved above are still there: a trim on the way
         * leaves three more than its own cuts. */
        m = carve_vmm_claim(p, u, ga, ga + best_need * G);
    }
    if (m->addr < best_x) { /* start the block at the place */
        carve_block *front = block_split(p, m, best_x - m->addr);
        carve_index_insert(&p->index[front->cls], front);
        carve_vmm_split(front); /* the runs from best_x's granule on are the request's */
        m = front->next;
    }
    return m;
}

/* Pool lock held; the fast path found no block for rs. Find or bring in a
 * block (in virtual-memory mode, map it); on running out of room, reclaim
 * cached memory from every stream and retry once. */
static carve_block *pool_take(carve_arena *a, carve_pool *p, unsigned cls, size_t rs, unsigned flags,
                              carve_status *st) {
    carve_pool_flush_hot(p, 1); /* merged, it may fit */
    int capturing = carve_pool_capturing(p), captured = 0;
    for (int attempt = 0;; attempt++) {
        carve_block *b = carve_index_find_fit(&p->index[cls], rs);
        if (b)
            return b;
        /* A captured stream's own pool takes what it holds mapped, or
         * nothing: memory brought in now would go back to the stream's
         * cache after the capture while the graph still uses it. A graph
         * pool brings memory in (backend calls in relaxed capture mode;
         * nothing recorded, asked or waited for): it stays the graph's
         * until carve_graph_pool_release. */
        if (capturing && !CARVE_LOAD(&p->graph)) {
            if ((b = carve_index_find_fit(&p->index[!cls], rs)))
                return b;
            carve_note("the stream is being captured into a CUDA graph, and inside a capture carve maps, "
                       "reserves and waits for nothing for a stream of its own: only memory the stream's "
                       "pool holds free can be used (route the stream to a graph pool, which brings memory "
                       "in during the capture: carve_graph_pool_begin)");
            *st = CARVE_ERR_OOM;
            return NULL;
        }
        if (!a->vmm)
            return pool_refill(a, p, cls, rs, flags, st);
        if (!(b = vmm_place(a, p, cls, rs, flags, st)) && *st == CARVE_OK) {
            /* No room anywhere in the pool: bring address space in. */
            b = pool_refill(a, p, cls, rs, flags, st);
            if (b && !(b->state == CARVE_B_FREE && b->size >= rs))
                b = vmm_place(a, p, cls, rs, flags, st);
        }
        if (b)
            return b;
        if (*st != CARVE_ERR_OOM || attempt == 1 || (flags & CARVE_ALLOC_HELD)) {
            if (captured && *st == CARVE_ERR_OOM)
                note_captured();
            return NULL;
        }
        captured = reclaim_unlocked(a, p, CARVE_RECLAIM_WAIT);
    }
}

/* Ordered index (virtual-memory mode): the parked block of the requested
 * size is taken back only where address order would put the request anyway
 * (no fitting free block lies below it), so parking saves the search, split
 * and merge without spreading what is live over more granules. The answer
 * is kept with the index's gen: it holds until the index changes, whatever
 * else the pool does (a hot block keeps its address and size until it
 * leaves the hot slot into the index, which changes gen). */
static inline int hot_is_lowest(carve_pool *p, const carve_index *ix, const carve_block *hot) {
    if (CARVE_LIKELY(p->hot_low == hot->addr && p->hot_low_gen == ix->gen))
        return 1;
    const carve_block *c = carve_index_find_low(ix, hot->size);
    if (c && c->addr < hot->addr)
        return 0;
    p->hot_low = hot->addr;
    p->hot_low_gen = ix->gen;
    return 1;
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

/* Pool lock held: b, cut to rs bytes, becomes a live buffer of size bytes. */
static inline __attribute__((always_inline)) void claim(carve_arena *a, carve_pool *p, carve_block *b, size_t rs,
                                                        size_t size) {
    b->state = CARVE_B_USED;
    b->slack = (uint8_t)(rs - size);
    b->flags = 0;
    if (CARVE_UNLIKELY(b->span->u.r.nlive++ == 0))
        carve_pool_span_refilled(p, b->span);
    if (CARVE_UNLIKELY(a->vmm))
        carve_vmm_take(p, b);
}

/* Pool lock held, released here: the live block b is found by its address,
 * counted, and handed out. */
static inline __attribute__((always_inline)) carve_status hand_out(carve_arena *a, carve_pool *p, carve_block *b,
                                                                   size_t rs, size_t size, void **out) {
    carve_blockmap_put(&p->map, b);
    CARVE_STORE(&p->nallocs, p->nallocs + 1);
    carve_pool_account(p, (ptrdiff_t)rs, (ptrdiff_t)size);
    carve_spin_unlock(&p->lock);
    CHECK_EXPENSIVE(a);
    *out = (void *)b->addr;
    return CARVE_OK;
}

/* carve_alloc and carve_alloc_flags (the flags reach the slow path alone). */
static inline __attribute__((always_inline)) carve_status alloc(carve_arena *a, size_t size, carve_stream s,
                                                               void **out, unsigned flags) {
    if (CARVE_UNLIKELY(!out))
        return carve_fail(a, CARVE_ERR_INVALID, "carve_alloc: out is NULL");
    *out = NULL;
    if (CARVE_UNLIKELY(!a))
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_alloc: arena is NULL");
    if (CARVE_UNLIKELY(size == 0))
        return CARVE_OK;
    if (CARVE_UNLIKELY(s == CARVE_STREAM_PER_THREAD)) /* the calling thread's stream */
        s = carve_thread_stream();
    if (CARVE_UNLIKELY(size > CARVE_MAX_ALLOC || size > CARVE_LOAD(&a->limit)))
        return oom_answer(a, size, 0, flags, s, out, "the request is larger than the arena's limit", 0);
    size_t rs = carve_align_up(size, CARVE_ALIGNMENT);
    unsigned cls = rs <= a->small_max ? CARVE_CLASS_SMALL : CARVE_CLASS_LARGE;
    carve_pool *p = carve_pool_get(a, s);
    if (CARVE_UNLIKELY(!p))
        return alloc_oom(a, size, 0, s, "host memory exhausted for carve's metadata", 1);

    carve_spin_lock(&p->lock);
    if (CARVE_UNLIKELY(p->pending_head != NULL))
        carve_pool_poll_pending(p, CARVE_PENDING_POLL, 1);
    carve_block *b = p->hot;
    carve_index *ix = &p->index[cls];
    if (b && b->size == rs && CARVE_LIKELY(carve_blockmap_reserve(&p->map) == 0) &&
        (CARVE_LIKELY(!ix->ordered) || hot_is_lowest(p, ix, b))) {
        p->hot = NULL; /* the same size again: no search, no split */
        b->state = CARVE_B_USED;
        b->slack = (uint8_t)(rs - size);
        goto found;
    }
    /* Abandoned (carve_arena_abandon, whose walk takes this lock after
     * setting the flag, empties the hot slot and marks live blocks so that
     * their frees are not parked there): what the pool holds is no longer
     * mapped. Off the hot path, which an abandoned pool never hits. */
    if (CARVE_UNLIKELY(__atomic_load_n(&a->abandoned, __ATOMIC_RELAXED))) {
        carve_spin_unlock(&p->lock);
        return carve_fail(a, CARVE_ERR_NO_DEVICE, "carve_alloc: the arena's CUDA context is gone (carve_arena_abandon)");
    }
    if (CARVE_UNLIKELY(b != NULL) && ix->ordered) /* merged first: nothing is placed around it */
        carve_pool_flush_hot(p, 1);
    b = carve_index_find(ix, rs);
    carve_status st = CARVE_OK;
    if (CARVE_UNLIKELY(!b))
        b = pool_take(a, p, cls, rs, flags, &st);
    if (CARVE_LIKELY(b) && CARVE_UNLIKELY(carve_slab_reserve(&p->slab, 1) != 0 ||
                                           carve_blockmap_reserve(&p->map) != 0)) {
        carve_note_host(1, "host memory exhausted for carve's metadata");
        b = NULL;
        st = CARVE_ERR_OOM;
    }
    if (CARVE_UNLIKELY(!b)) {
        carve_spin_unlock(&p->lock);
        if (st == CARVE_ERR_OOM && (flags & CARVE_ALLOC_HELD))
            return carve_fail_host(a, st, carve_note_is_host(),
                                   "carve_alloc_flags of %zu bytes from what the arena holds: %s", size, carve_note_get());
        if (st == CARVE_ERR_OOM)
            return oom_answer(a, size, 0, flags, s, out, carve_note_get(), carve_note_is_host());
        return carve_fail_host(a, st, carve_note_is_host(), "carve_alloc of %zu bytes: %s", size, carve_note_get());
    }
    b = block_split(p, b, rs);
    claim(a, p, b, rs, size);
found:
    return hand_out(a, p, b, rs, size, out);
}

carve_status carve_alloc(carve_arena *a, size_t size, carve_stream s, void **out) { return alloc(a, size, s, out, 0); }

carve_status carve_alloc_flags(carve_arena *a, size_t size, carve_stream s, unsigned flags, void **out) {
    if (CARVE_UNLIKELY(flags & ~(CARVE_ALLOC_HELD | CARVE_ALLOC_REPLACE))) {
        if (out)
            *out = NULL;
        return carve_fail(a, CARVE_ERR_INVALID, "carve_alloc_flags: unknown flags %#x", flags & ~(CARVE_ALLOC_HELD | CARVE_ALLOC_REPLACE));
    }
    return alloc(a, size, s, out, flags);
}

carve_status carve_alloc_aligned(carve_arena *a, size_t size, size_t align, carve_stream s, void **out) {
    if (!out)
        return carve_fail(a, CARVE_ERR_INVALID, "carve_alloc_aligned: out is NULL");
    *out = NULL;
    if (!a)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_alloc_aligned: arena is NULL");
    if (align & (align - 1) || align > CARVE_SEGMENT_GRANULE)
        return carve_fail(a, CARVE_ERR_INVALID,
                          "carve_alloc_aligned: alignment %zu is not a power of two up to the 2 MiB granule", align);
    if (align <= CARVE_ALIGNMENT) /* every buffer has that much */
        return carve_alloc(a, size, s, out);
    if (size == 0)
        return CARVE_OK;
    if (s == CARVE_STREAM_PER_THREAD)
        s = carve_thread_stream();
    if (size > CARVE_MAX_ALLOC)
        return oom_answer(a, size, align, 0, s, out, "the request is larger than the arena's limit", 0);
    /* Any free block of rs + align - CARVE_ALIGNMENT bytes holds rs bytes at
     * an aligned address; the bytes before it stay a free block of their own,
     * those after it too. That room is what has to fit under the limit. */
    size_t rs = carve_align_up(size, CARVE_ALIGNMENT), want = rs + align - CARVE_ALIGNMENT;
    if (want > CARVE_LOAD(&a->limit)) {
        char b1[32];
        carve_note("the request with its alignment's room (%s) is larger than the arena's limit",
                   carve_format_bytes(b1, sizeof(b1), want));
        return oom_answer(a, size, align, 0, s, out, carve_note_get(), 0);
    }
    unsigned cls = want <= a->small_max ? CARVE_CLASS_SMALL : CARVE_CLASS_LARGE;
    carve_pool *p = carve_pool_get(a, s);
    if (!p)
        return alloc_oom(a, size, align, s, "host memory exhausted for carve's metadata", 1);
    carve_spin_lock(&p->lock);
    if (__atomic_load_n(&a->abandoned, __ATOMIC_RELAXED)) { /* what the pool holds is no longer mapped */
        carve_spin_unlock(&p->lock);
        return carve_fail(a, CARVE_ERR_NO_DEVICE,
                          "carve_alloc_aligned: the arena's CUDA context is gone (carve_arena_abandon)");
    }
    if (p->pending_head)
        carve_pool_poll_pending(p, CARVE_PENDING_POLL, 1);
    carve_pool_flush_hot(p, 1);
    carve_status st = CARVE_OK;
    carve_block *b = carve_index_find(&p->index[cls], want);
    if (!b && (b = pool_take(a, p, cls, want, 0, &st)) && a->vmm)
        carve_vmm_unclaimed(p, b); /* granules mapped for want that the buffer may leave */
    if (b && (carve_slab_reserve(&p->slab, 2) != 0 || carve_blockmap_reserve(&p->map) != 0)) {
        carve_note_host(1, "host memory exhausted for carve's metadata");
        b = NULL;
        st = CARVE_ERR_OOM;
    }
    if (!b) {
        carve_spin_unlock(&p->lock);
        if (st == CARVE_ERR_OOM)
            return oom_answer(a, size, align, 0, s, out, carve_note_get(), carve_note_is_host());
        return carve_fail_host(a, st, carve_note_is_host(), "carve_alloc_aligned of %zu bytes: %s", size,
                               carve_note_get());
    }
    size_t pad = carve_align_up(b->addr, align) - b->addr;
    if (pad) { /* the bytes before the aligned address stay free, indexed */
        carve_block *v = b->prev, *front = block_split(p, b, pad);
        b = front->next;
        if (a->vmm)
            carve_vmm_split(front); /* the runs from the cut's granule on go with the buffer */
        if (a->vmm && v && v->state == CARVE_B_FREE) {
            /* vmm_place started the block at the place it mapped for, after
             * the FREE rest of the granules it mapped (or of a FREE block
             * it extended): the pad joins that block, with its runs. */
            v->next = b;
            b->prev = v;
            carve_vmm_ring_absorb(p, v, front);
            carve_index_resize(&p->index[v->cls], v, v->size + pad);
        } else {
            carve_index_insert(&p->index[front->cls], front);
        }
    }
    b = block_split(p, b, rs);
    claim(a, p, b, rs, size);
    return hand_out(a, p, b, rs, size, out);
}

#if CARVE_CHECKS >= 2
void (*carve__owner_read_hook)(void);
#define OWNER_READ_HOOK()                                                                                              \
    do {                                                                                                               \
        void (*hook_)(void) = CARVE_LOAD_ACQ(&carve__owner_read_hook);                                                 \
        if (hook_)                                                                                                     \
            hook_();                                                                                                   \
    } while (0)
#else
#define OWNER_READ_HOOK() ((void)0)
#endif

/* The pool that owns the span holding addr, locked; NULL when addr is in no
 * span. The caller still has to find addr among the pool's live blocks, and
 * ask owner_recheck before it calls a miss a bad pointer. */
static carve_pool *owner_locked(carve_arena *a, uintptr_t addr) {
    if (addr & (CARVE_ALIGNMENT - 1))
        return NULL;
    carve_block *span = carve_pagemap_get(&a->pmap, addr);
    if (!span)
        return NULL;
    OWNER_READ_HOOK();
    carve_pool *p = CARVE_LOAD_ACQ(&span->u.r.pool);
    if (!p)
        return NULL;
    carve_spin_lock(&p->lock);
    return p;
}

/* After owner_locked's answer missed (no pool, or no live block at addr in
 * the pool it locked, since unlocked). owner_locked reads the address map and
 * the span's pool without a lock, and another thread cutting or giving back
 * that span meanwhile (heap.c's cut_out, carve_heap_give; memory moving
 * between streams) can leave the record it read naming another pool, or
 * none, while the buffer at addr stays live in its own: a live buffer
 * refused as a bad pointer, and an interposer told that a buffer of carve's
 * is not. A live block never changes pool, and the map's entries for a
 * pool's ranges change only under that pool's lock (a heap range's under
 * the heap lock): so look again, and answer "no live buffer" only when the
 * map, read under the lock of the pool (or heap) its record names, still
 * names that record, and that pool still has no live block at addr. The
 * pool with *b (taken out when take), locked; NULL, nothing locked. */
static carve_pool *owner_recheck(carve_arena *a, uintptr_t addr, int take, carve_block **b) {
    if (addr & (CARVE_ALIGNMENT - 1))
        return NULL;
    for (;;) {
        carve_block *span = carve_pagemap_get(&a->pmap, addr);
        if (!span)
            return NULL;
        carve_pool *p = CARVE_LOAD_ACQ(&span->u.r.pool);
        if (!p) {
            carve_mutex_lock(&a->heap.lock);
            int same = carve_pagemap_get(&a->pmap, addr) == span && !CARVE_LOAD_ACQ(&span->u.r.pool);
            carve_mutex_unlock(&a->heap.lock);
            if (same)
                return NULL;
            continue;
        }
        carve_spin_lock(&p->lock);
        *b = take ? carve_blockmap_take(&p->map, addr) : carve_blockmap_get(&p->map, addr);
        if (*b)
            return p;
        int same = carve_pagemap_get(&a->pmap, addr) == span && CARVE_LOAD_ACQ(&span->u.r.pool) == p;
        carve_spin_unlock(&p->lock);
        if (same)
            return NULL;
    }
}

/* The pool of the live buffer that starts at ptr, locked, with its block in
 * *b (taken out of the address index when take: a free); NULL, nothing
 * locked, when ptr starts no live buffer. The calls other than carve_free,
 * whose own lookup is on the fast path. */
static carve_pool *live_locked(carve_arena *a, const void *ptr, int take, carve_block **b) {
    uintptr_t addr = (uintptr_t)ptr;
    if (!ptr)
        return NULL;
    carve_pool *p = owner_locked(a, addr);
    if (p) {
        *b = take ? carve_blockmap_take(&p->map, addr) : carve_blockmap_get(&p->map, addr);
        if (*b)
            return p;
        carve_spin_unlock(&p->lock);
    }
    return owner_recheck(a, addr, take, b);
}

static carve_status bad_pointer(carve_arena *a, const char *fn, void *ptr) {
    return carve_fail(a, CARVE_ERR_BAD_POINTER,
                      "%s: %p is not the start of a live buffer of arena '%s' (foreign, interior, "
                      "misaligned or already freed)",
                      fn, ptr, a->name);
}

/* Record one event per extra stream; all or nothing. Entries of
 * carve_free_after_event hold their event already. A record that a stream
 * capture refuses (the legacy stream while a blocking stream is captured,
 * a stream being captured) does not fail the free: the entry becomes
 * CARVE_EVENT_LATER and the block waits until the capture is over
 * (block.h). Only on strict, the stream a carve_free_on_stream names, is a
 * capture of that stream itself a failure (carve.h). */
static carve_status uses_record(carve_arena *a, carve_uses *u, carve_stream strict) {
    for (unsigned i = 0; i < u->n; i++) {
        if (u->streams[i] == CARVE_KEY_NONE)
            continue;
        int capture;
        carve_status st = carve_event_record_why(a, u->streams[i], &u->events[i], &capture);
        if (st != CARVE_OK && capture && !(capture == CARVE_REC_CAPTURED && u->streams[i] == strict)) {
            u->events[i] = CARVE_EVENT_LATER;
            continue;
        }
        if (st != CARVE_OK) {
            while (i-- > 0) {
                if (u->streams[i] == CARVE_KEY_NONE)
                    continue;
                if (u->events[i] != CARVE_EVENT_LATER)
                    a->be.ops->event_release(&a->be, u->events[i]);
                u->events[i] = NULL;
            }
            return st;
        }
    }
    return CARVE_OK;
}

/* Pool lock held, b live. Add a use of b: stream s (nothing when b's own
 * or already known), or with s CARVE_KEY_NONE an event ev of the backend's
 * that the buffer waits for. CARVE_OK, or CARVE_ERR_OOM (nothing added). */
static carve_status uses_add(carve_pool *p, carve_block *b, carve_stream s, void *ev) {
    carve_uses *u = b->flags & CARVE_BF_USES ? b->u.b.uses : NULL;
    int known = s == p->stream || (CARVE_LOAD(&p->graph) && s == CARVE_LOAD(&p->route)); /* a graph pool: its stream */
    for (unsigned i = 0; u && !known && s != CARVE_KEY_NONE && i < u->n; i++)
        known = u->streams[i] == s;
    if (known)
        return CARVE_OK;
    int fresh = !u;
    if (fresh && !(u = calloc(1, sizeof(*u))))
        return CARVE_ERR_OOM;
    if (u->n == u->cap) {
        unsigned cap = u->cap ? u->cap * 2 : 2;
        carve_stream *ns = realloc(u->streams, cap * sizeof(*ns));
        if (ns)
            u->streams = ns;
        void **ne = ns ? realloc(u->events, cap * sizeof(*ne)) : NULL;
        if (ne)
            u->events = ne;
        if (!ns || !ne) { /* the buffer stays as it was: a fresh record is not attached */
            if (fresh) {
                free(u->streams);
                free(u->events);
                free(u);
            }
            return CARVE_ERR_OOM;
        }
        u->cap = cap;
    }
    b->u.b.uses = u;
    b->flags |= CARVE_BF_USES;
    u->streams[u->n] = s;
    u->events[u->n] = ev;
    u->n++;
    return CARVE_OK;
}

static inline __attribute__((always_inline)) carve_status free_finish(carve_arena *a, carve_pool *p, carve_block *b,
                                                                      carve_uses *u);

carve_status carve_free(carve_arena *a, void *ptr) {
    if (CARVE_UNLIKELY(!a))
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_free: arena is NULL");
    if (CARVE_UNLIKELY(!ptr))
        return CARVE_OK;
    uintptr_t addr = (uintptr_t)ptr;
    carve_pool *p = owner_locked(a, addr);
    carve_block *b = CARVE_LIKELY(p != NULL) ? carve_blockmap_take(&p->map, addr) : NULL;
    if (CARVE_UNLIKELY(!b)) {
        if (p)
            carve_spin_unlock(&p->lock);
        p = owner_recheck(a, addr, 1, &b);
        if (!p)
            return bad_pointer(a, "carve_free", ptr);
    }
    carve_uses *u = NULL;
    if (CARVE_UNLIKELY(b->flags != 0)) { /* other streams' uses, a tag, an abandoned arena */
        if (b->flags & CARVE_BF_GONE) { /* its arena was abandoned: released, never parked hot */
            CARVE_STORE(&p->nfrees, p->nfrees + 1);
            carve_pool_account(p, -(ptrdiff_t)b->size, -(ptrdiff_t)carve_block_requested(b));
            carve_pool_release_gone(p, b);
            carve_spin_unlock(&p->lock);
            return CARVE_OK;
        }
        u = b->flags & CARVE_BF_USES ? b->u.b.uses : NULL;
        carve_status st = u ? uses_record(a, u, CARVE_KEY_NONE) : CARVE_OK;
        if (st != CARVE_OK) {
            carve_blockmap_put(&p->map, b); /* a slot was just freed: no growth needed */
            carve_spin_unlock(&p->lock);
            return carve_fail_host(a, st, carve_backend_host(), "carve_free(%p): recording an event on a stream the "
                                   "buffer was used on failed: %s", ptr, carve_backend_msg());
        }
        b->flags &= (uint8_t)~CARVE_BF_TAG; /* the buffer's tag goes with it */
    }
    return free_finish(a, p, b, u);
}

/* Pool lock held, released here: live block b, taken out of the map, its
 * tag dropped and an event recorded for each of its uses u (NULL: none),
 * becomes free: pending until the events complete, or parked. */
static inline __attribute__((always_inline)) carve_status free_finish(carve_arena *a, carve_pool *p, carve_block *b,
                                                                      carve_uses *u) {
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
    carve_block *b;
    carve_pool *p = live_locked(a, ptr, 0, &b);
    if (!p)
        return bad_pointer(a, "carve_buffer_info", (void *)ptr);
    if (size)
        *size = carve_block_requested(b);
    if (stream) { /* a graph pool's buffers: the stream routed to it */
        int graph = ((uintptr_t)p->stream & CARVE_KEY_MASK) == CARVE_KEY_GRAPH;
        *stream = carve_stream_public(graph ? CARVE_LOAD(&p->route) : p->stream);
    }
    carve_spin_unlock(&p->lock);
    return CARVE_OK;
}

/* The free of ptr waits for s's work queued by then (cudaStreamPerThread:
 * the calling thread's). */
carve_status carve_record_stream(carve_arena *a, void *ptr, carve_stream s) {
    if (!a)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_record_stream: arena is NULL");
    if (s == CARVE_STREAM_PER_THREAD)
        s = carve_thread_stream();
    carve_block *b;
    carve_pool *p = live_locked(a, ptr, 0, &b);
    if (!p)
        return bad_pointer(a, "carve_record_stream", ptr);
    carve_status st = uses_add(p, b, s, NULL);
    carve_spin_unlock(&p->lock);
    if (st != CARVE_OK)
        return carve_fail_host(a, st, 1, "carve_record_stream: host memory exhausted");
    return CARVE_OK;
}

/* Free ptr once the work queued so far on stream s (CARVE_KEY_NONE: the
 * program's event, followed by an event of the backend's) is done, and that
 * of every stream it was used on: all or nothing. On failure the buffer is
 * as it was (live, the same uses; what was added for this call removed and
 * its event released). what names the caller in messages. */
static carve_status free_with_use(carve_arena *a, void *ptr, carve_stream s, carve_event event, const char *what) {
    carve_block *b;
    carve_pool *p = live_locked(a, ptr, 1, &b);
    if (!p)
        return bad_pointer(a, what, ptr);
    carve_uses *had = b->flags & CARVE_BF_USES ? b->u.b.uses : NULL;
    unsigned n0 = had ? had->n : 0;
    void *ev = NULL;
    carve_status st = CARVE_OK;
    const char *why = "host memory exhausted";
    int host = 1;
    if (s == CARVE_KEY_NONE) { /* the backend's event that follows the program's */
        if (a->be.ops->event_follow) {
            __atomic_add_fetch(&a->heap.nrecords, 1, __ATOMIC_RELAXED);
            st = a->be.ops->event_follow(&a->be, event, &ev);
        } else {
            st = CARVE_ERR_INVALID;
            carve_backend_fail("the %s backend cannot wait for a program's event", carve_backend_str(a->be.kind));
        }
        if (st != CARVE_OK) {
            why = carve_backend_msg();
            host = carve_backend_host();
        }
    }
    if (st == CARVE_OK)
        st = uses_add(p, b, s, ev);
    carve_uses *u = b->flags & CARVE_BF_USES ? b->u.b.uses : NULL;
    if (st == CARVE_OK && u && (st = uses_record(a, u, s)) != CARVE_OK) {
        why = carve_backend_msg();
        host = carve_backend_host();
    }
    if (st != CARVE_OK) { /* undone: the uses as they were */
        if (had) {
            had->n = n0;
        } else if (u) {
            free(u->streams);
            free(u->events);
            free(u);
            b->u.b.uses = NULL;
            b->flags &= (uint8_t)~CARVE_BF_USES;
        }
        if (ev)
            a->be.ops->event_release(&a->be, ev);
        carve_blockmap_put(&p->map, b); /* a slot was just freed: no growth needed */
        carve_spin_unlock(&p->lock);
        return carve_fail_host(a, st, host, "%s(%p): %s (the buffer stays live, as it was)", what, ptr, why);
    }
    b->flags &= (uint8_t)~CARVE_BF_TAG; /* the buffer's tag goes with it */
    return free_finish(a, p, b, u);
}

carve_status carve_free_on_stream(carve_arena *a, void *ptr, carve_stream s) {
    if (!a)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_free_on_stream: arena is NULL");
    if (!ptr)
        return CARVE_OK;
    if (s == CARVE_STREAM_PER_THREAD)
        s = carve_thread_stream();
    /* Another stream: its work queued so far must complete before any
     * stream reuses the memory, the buffer's own included. */
    return free_with_use(a, ptr, s, NULL, "carve_free_on_stream");
}

carve_status carve_free_after_event(carve_arena *a, void *ptr, carve_event event) {
    if (!a)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_free_after_event: arena is NULL");
    if (!ptr)
        return CARVE_OK;
    if (!event)
        return carve_fail(a, CARVE_ERR_INVALID, "carve_free_after_event: event is NULL");
    return free_with_use(a, ptr, CARVE_KEY_NONE, event, "carve_free_after_event");
}

carve_status carve_set_tag(carve_arena *a, void *ptr, uint64_t tag) {
    if (!a)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_set_tag: arena is NULL");
    carve_block *b;
    carve_pool *p = live_locked(a, ptr, 0, &b);
    if (!p)
        return bad_pointer(a, "carve_set_tag", ptr);
    b->u.b.tag = tag;
    b->flags = tag ? (uint8_t)(b->flags | CARVE_BF_TAG) : (uint8_t)(b->flags & ~CARVE_BF_TAG);
    carve_spin_unlock(&p->lock);
    return CARVE_OK;
}

carve_status carve_get_tag(const carve_arena *ca, const void *ptr, uint64_t *tag) {
    if (tag)
        *tag = 0;
    if (!ca || !tag)
        return carve_fail(ca, CARVE_ERR_INVALID, "carve_get_tag: NULL argument");
    carve_arena *a = (carve_arena *)ca; /* the lock is taken; nothing observable changes */
    carve_block *b;
    carve_pool *p = live_locked(a, ptr, 0, &b);
    if (!p)
        return bad_pointer(a, "carve_get_tag", (void *)ptr);
    if (b->flags & CARVE_BF_TAG)
        *tag = b->u.b.tag;
    carve_spin_unlock(&p->lock);
    return CARVE_OK;
}

int carve_buffer_live(const carve_arena *ca, const void *ptr) {
    if (!ca || !ptr)
        return 0;
    carve_arena *a = (carve_arena *)ca; /* the lock is taken; nothing observable changes */
    carve_block *b;
    carve_pool *p = live_locked(a, ptr, 0, &b);
    if (!p)
        return 0;
    carve_spin_unlock(&p->lock);
    return 1;
}
