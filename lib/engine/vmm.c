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
 * (carve_vmm_allowance, per stream, so that streams whose peaks come at
 * different times do not take each other's granules on every step), and
 * only a request that would pass it first unmaps free granules of its own
 * pool, those let go longest ago first, and a little more than it needs so
 * that the next requests map without unmapping. Other streams' free
 * granules go (after a device synchronization) only when the arena maps a
 * quarter more than the most its streams ever touched at once, or at the
 * limit. Unmapped granules are cut out of their
 * FREE block as an UNMAPPED one. carve_empty_cache unmaps every free
 * granule, and spans given back to the heap are unmapped as they go, so the
 * heap's free ranges never hold memory.
 *
 * Unmapping is not stream-ordered (the driver unmaps at once), so a granule
 * is unmapped only when the work queued before its free is known to be
 * done: after waiting for the freeing stream, after the span's event
 * completed (spans going back), or after a device synchronization.
 *
 * Every granule of a segment has a reference count (the used or pending
 * blocks that touch it), a stamp (when its last block left) and a mapped
 * flag, one byte or word each, so pools never share a written word: a
 * granule belongs to one span or free range, and is written under the
 * owning pool's lock. The heap lock guards only the totals (mapped bytes,
 * their peak, the counters); driver calls are made with it dropped, so
 * streams mapping at the same time wait only for the driver.
 */
#include "engine/vmm.h"

#include <string.h>

#include "base/text.h"
#include "engine/error.h"

#define G CARVE_SEGMENT_GRANULE

int carve_vmm_segment_init(carve_segment *s) {
    s->ngran = s->size / G;
    s->gref = calloc(s->ngran, sizeof(*s->gref));
    s->gstamp = calloc(s->ngran, sizeof(*s->gstamp));
    s->gmapped = calloc(s->ngran, sizeof(*s->gmapped));
    if (!s->gref || !s->gstamp || !s->gmapped) {
        carve_vmm_segment_free(s);
        return -1;
    }
    return 0;
}

void carve_vmm_segment_free(carve_segment *s) {
    free(s->gref);
    free(s->gstamp);
    free(s->gmapped);
    s->gref = NULL;
    s->gstamp = NULL;
    s->gmapped = NULL;
}

size_t carve_vmm_allowance(const carve_arena *a, const carve_pool *p) {
    /* Each stream keeps what it touched at its own peak, plus its slack:
     * streams whose peaks come at different times then never take each
     * other's granules (each time with a device synchronization), and the
     * fast paths need no counter every stream would write. */
    size_t t = __atomic_load_n(&p->touched_peak, __ATOMIC_RELAXED) * G;
    size_t slack = t / 1024 * __atomic_load_n(&p->vslack, __ATOMIC_RELAXED);
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

size_t carve_vmm_unmapped(const carve_segment *s, uintptr_t addr, size_t size) {
    size_t n = 0;
    for (size_t g = (addr - s->base) / G, e = (addr + size - 1 - s->base) / G; g <= e; g++)
        n += !s->gmapped[g];
    return n;
}

/* ---- blocks: FREE and UNMAPPED pieces of a span -------------------------- */

/* A new pool block [addr, addr+size) of span, linked after prev (NULL: first). */
static carve_block *block_new(carve_pool *p, carve_block *span, carve_block *prev, uintptr_t addr, size_t size) {
    carve_block *b = carve_slab_get(&p->slab);
    carve_block_link(b, span, prev, addr, size);
    return b;
}

static void block_unlink(carve_pool *p, carve_block *b) {
    carve_block *span = b->span;
    if (b->prev)
        b->prev->next = b->next;
    else
        span->u.r.first = b->next;
    if (b->next)
        b->next->prev = b->prev;
    else
        span->u.r.last = b->prev;
    carve_slab_put(&p->slab, b);
}

/* u is UNMAPPED and listed: absorb UNMAPPED neighbours into it. */
static void unmapped_coalesce(carve_pool *p, carve_block *u) {
    carve_block *n = u->next;
    if (n && n->state == CARVE_B_UNMAPPED) {
        u->size += n->size;
        carve_vmm_list_remove(p, n);
        block_unlink(p, n);
    }
    carve_block *v = u->prev;
    if (v && v->state == CARVE_B_UNMAPPED) {
        u->addr = v->addr;
        u->size += v->size;
        carve_vmm_list_remove(p, v);
        block_unlink(p, v);
    }
}

/* f is FREE and indexed; [ua, ub) inside it is no longer mapped. Cut it out
 * as an UNMAPPED block; what is left of f on either side stays FREE. Returns
 * the FREE piece after [ua, ub), or NULL. Needs two spare slab records. */
static carve_block *cut_unmapped(carve_pool *p, carve_block *f, uintptr_t ua, uintptr_t ub) {
    carve_index *ix = &p->index[f->cls];
    uintptr_t fa = f->addr, fb = f->addr + f->size;
    carve_index_remove(ix, f);
    carve_block *right = NULL, *mid;
    if (ub < fb) {
        right = block_new(p, f->span, f, ub, fb - ub);
        right->state = CARVE_B_FREE;
        carve_index_insert(ix, right);
    }
    if (ua > fa) {
        f->size = ua - fa;
        carve_index_insert(ix, f);
        mid = block_new(p, f->span, f, ua, ub - ua);
    } else {
        mid = f; /* f itself becomes the unmapped piece */
        mid->size = ub - ua;
    }
    carve_vmm_list_add(p, mid);
    unmapped_coalesce(p, mid);
    f->span->u.r.unmapped += (ub - ua) / G;
    return right;
}

carve_block *carve_vmm_claim(carve_pool *p, carve_block *u, uintptr_t lo, uintptr_t hi) {
    carve_index *ix = &p->index[u->cls];
    uintptr_t ua = u->addr, ub = u->addr + u->size;
    CARVE_ASSERT_INTERNAL(u->state == CARVE_B_UNMAPPED && lo >= ua && hi <= ub && lo < hi && (lo == ua || hi == ub));
    u->span->u.r.unmapped -= (hi - lo) / G;
    carve_block *m;
    if (lo == ua && hi == ub) {
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
    m->state = CARVE_B_FREE;
    carve_block *v = m->prev, *n = m->next;
    if (v && v->state == CARVE_B_FREE) { /* v absorbs m */
        carve_index_remove(ix, v);
        v->size += m->size;
        block_unlink(p, m);
        m = v;
    }
    if (n && n->state == CARVE_B_FREE) { /* m absorbs n */
        carve_index_remove(ix, n);
        m->size += n->size;
        block_unlink(p, n);
    }
    carve_index_insert(ix, m);
    return m;
}

/* ---- unmapping ----------------------------------------------------------- */

/* Unmap granule g of segment s (reference count 0, mapped). 1 on success;
 * 0 when the backend refused (it stays mapped and usable). Counters are
 * the caller's. */
static int unmap_granule(carve_arena *a, carve_segment *s, size_t g) {
    if (a->be.ops->decommit(&a->be, s->base + g * G, G) != CARVE_OK) {
        carve_note("the %s backend refused to unmap memory: %s", carve_backend_str(a->be.kind),
                   carve_backend_msg());
        return 0;
    }
    s->gmapped[g] = 0;
    return 1;
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
 * describe what is unmapped. Counted, so that carve_empty_cache can say so
 * (a span that could not be unmapped as it went back stays in its pool,
 * where the trim that follows counts what it cannot unmap). */
static void nohost(carve_arena *a) {
    carve_note("host memory exhausted for carve's metadata");
    __atomic_add_fetch(&a->heap.nunmap_nohost, 1, __ATOMIC_RELAXED);
}

/* A free mapped granule that may be unmapped, and when it was let go. */
typedef struct trim_cand {
    carve_block *blk; /* the FREE block that holds it */
    size_t g;
    uint64_t age;     /* clock - stamp: larger is longer unused */
} trim_cand;

static int older_first(const void *x, const void *y) {
    const trim_cand *a = *(trim_cand *const *)x, *b = *(trim_cand *const *)y;
    return a->age > b->age ? -1 : a->age < b->age;
}

/* The whole granules inside p's FREE blocks, outside the kept ranges,
 * grouped by block in address order, into *out (allocated here). Returns
 * how many, or -1 when host memory ran out. */
static ptrdiff_t trim_candidates(carve_pool *p, const carve_keep *keep, uint64_t done, trim_cand **out) {
    size_t n = 0, cap = 0;
    trim_cand *c = NULL;
    for (unsigned cls = 0; cls < 2; cls++) {
        const carve_index *ix = &p->index[cls];
        for (unsigned fl = 0; fl < CARVE_FL_COUNT; fl++) {
            if (!(ix->fl_map & ((uint64_t)1 << fl)))
                continue;
            for (unsigned sl = 0; sl < CARVE_SL_COUNT; sl++) {
                for (carve_block *b = ix->heads[fl][sl]; b; b = b->fnext) {
                    if (b->size < G)
                        continue;
                    const carve_segment *s = b->span->u.r.seg;
                    size_t g = (carve_align_up(b->addr, G) - s->base) / G;
                    size_t e = (carve_align_down(b->addr + b->size, G) - s->base) / G; /* exclusive */
                    for (; g < e; g++) {
                        uintptr_t at = s->base + g * G;
                        if (keep && ((at < keep->hi[0] && at + G > keep->lo[0]) ||
                                     (at < keep->hi[1] && at + G > keep->lo[1])))
                            continue;
                        CARVE_ASSERT_INTERNAL(s->gmapped[g] && s->gref[g] == 0);
                        if (s->gstamp[g] > done) /* the device may still be using it */
                            continue;
                        if (n == cap) {
                            cap = cap ? 2 * cap : 256;
                            trim_cand *nc = realloc(c, cap * sizeof(*c));
                            if (!nc) {
                                free(c);
                                return -1;
                            }
                            c = nc;
                        }
                        c[n++] = (trim_cand){b, g, p->vclock - s->gstamp[g]};
                    }
                }
            }
        }
    }
    *out = c;
    return (ptrdiff_t)n;
}

/* Unmap the granules of candidates c[0..n) (one FREE block's, ascending)
 * whose mapped flag is 2 (chosen), cutting the block around them. Returns
 * granules unmapped; *failed counts refusals. */
static size_t trim_block(carve_arena *a, carve_pool *p, const trim_cand *c, size_t n, size_t *failed) {
    carve_block *f = c[0].blk;
    carve_segment *s = f->span->u.r.seg;
    size_t done = 0;
    for (size_t i = 0; i < n && f;) {
        if (s->gmapped[c[i].g] != 2) {
            i++;
            continue;
        }
        size_t j = i; /* a run of chosen granules, consecutive */
        while (j < n && s->gmapped[c[j].g] == 2 && c[j].g == c[i].g + (j - i))
            j++;
        size_t k = i;
        for (; k < j; k++) {
            s->gmapped[c[k].g] = 1;
            if (!unmap_granule(a, s, c[k].g)) {
                (*failed)++;
                break;
            }
        }
        if (k > i) { /* granules i..k-1 are unmapped now */
            f = cut_unmapped(p, f, s->base + c[i].g * G, s->base + (c[k - 1].g + 1) * G);
            done += k - i;
        }
        for (; k < j; k++) /* after a refusal, the rest of the run stays */
            s->gmapped[c[k].g] = 1;
        i = j;
    }
    for (size_t i = 0; i < n; i++) /* nothing chosen stays marked */
        if (s->gmapped[c[i].g] == 2)
            s->gmapped[c[i].g] = 1;
    return done;
}

size_t carve_vmm_trim_pool(carve_arena *a, carve_pool *p, size_t want, const carve_keep *keep, uint64_t done) {
    trim_cand *c = NULL, **order = NULL;
    if (want == 0)
        return 0;
    ptrdiff_t n = trim_candidates(p, keep, done, &c);
    if (n < 0)
        nohost(a);
    if (n <= 0)
        return 0;
    size_t take = want == SIZE_MAX ? (size_t)n : (want + G - 1) / G;
    if (take > (size_t)n)
        take = (size_t)n;
    /* Choose the longest unused (all of them if there is no memory to sort). */
    if (take < (size_t)n && (order = malloc((size_t)n * sizeof(*order)))) {
        for (ptrdiff_t i = 0; i < n; i++)
            order[i] = &c[i];
        qsort(order, (size_t)n, sizeof(*order), older_first);
        for (size_t i = 0; i < take; i++)
            order[i]->blk->span->u.r.seg->gmapped[order[i]->g] = 2;
        free(order);
    } else {
        take = (size_t)n;
        for (ptrdiff_t i = 0; i < n; i++)
            c[i].blk->span->u.r.seg->gmapped[c[i].g] = 2;
    }
    size_t nun = 0, failed = 0;
    if (carve_slab_reserve(&p->slab, 2 * take + 3) == 0) { /* and three for the caller's claim and splits */
        for (ptrdiff_t i = 0; i < n;) {
            ptrdiff_t j = i;
            while (j < n && c[j].blk == c[i].blk)
                j++;
            nun += trim_block(a, p, c + i, (size_t)(j - i), &failed);
            i = j;
        }
    } else { /* no records for the cuts: unmap nothing */
        for (ptrdiff_t i = 0; i < n; i++)
            c[i].blk->span->u.r.seg->gmapped[c[i].g] = 1;
        nohost(a);
    }
    free(c);
    count_unmapped(a, nun, failed);
    return nun * G;
}

/* Pool lock held, span empty: make its blocks one FREE block per mapped run
 * and one UNMAPPED block per unmapped run (after a partial unmapping). */
static void rebuild_empty_span(carve_pool *p, carve_block *span) {
    carve_index *ix = &p->index[span->cls];
    carve_block *b = span->u.r.first;
    while (b) {
        carve_block *n = b->next;
        if (b->state == CARVE_B_FREE)
            carve_index_remove(ix, b);
        else
            carve_vmm_list_remove(p, b);
        carve_slab_put(&p->slab, b);
        b = n;
    }
    span->u.r.first = span->u.r.last = NULL;
    const carve_segment *s = span->u.r.seg;
    size_t g = (span->addr - s->base) / G, e = (span->addr + span->size - s->base) / G;
    carve_block *prev = NULL;
    span->u.r.unmapped = 0;
    while (g < e) {
        size_t r = g;
        while (r < e && !!s->gmapped[r] == !!s->gmapped[g])
            r++;
        prev = block_new(p, span, prev, s->base + g * G, (r - g) * G);
        if (s->gmapped[g]) {
            prev->state = CARVE_B_FREE;
            carve_index_insert(ix, prev);
        } else {
            carve_vmm_list_add(p, prev);
            span->u.r.unmapped += r - g;
        }
        g = r;
    }
}

/* Unmap every mapped granule of s in [g, e) (none in use), counted; stop
 * at the first refusal when stop. Returns the granules unmapped, *failed
 * the refusals. */
static size_t unmap_all(carve_arena *a, carve_segment *s, size_t g, size_t e, int stop, size_t *failed) {
    size_t n = 0;
    *failed = 0;
    for (; g < e && !(stop && *failed); g++)
        if (s->gmapped[g]) {
            if (unmap_granule(a, s, g))
                n++;
            else
                (*failed)++;
        }
    count_unmapped(a, n, *failed);
    return n;
}

int carve_vmm_unmap_span(carve_arena *a, carve_pool *p, carve_block *span) {
    carve_segment *s = span->u.r.seg;
    size_t g = (span->addr - s->base) / G, e = (span->addr + span->size - s->base) / G;
    if (carve_vmm_unmapped(s, span->addr, span->size) == e - g)
        return 0;
    /* Its blocks describe the old mapping, and must be made to match
     * whatever the backend refuses: the records for that (one a run, at
     * most one a granule) are taken before anything is unmapped. Without
     * them nothing is: a FREE block over unmapped granules would be handed
     * out as memory. */
    if (carve_slab_reserve(&p->slab, span->size / G) != 0) {
        carve_note("host memory exhausted for carve's metadata");
        return -1;
    }
    size_t failed;
    unmap_all(a, s, g, e, 0, &failed);
    rebuild_empty_span(p, span); /* the span goes back to the heap if all went, and its blocks with it */
    return failed ? -1 : 0;
}

/* ---- mapping ------------------------------------------------------------- */

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
static void fences_poll(carve_arena *a, carve_pool *p) {
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
        fences_poll(a, p);
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
static size_t make_room(carve_arena *a, carve_pool *p, size_t must, size_t want, const carve_keep *keep) {
    fences_poll(a, p);
    size_t got = carve_vmm_trim_pool(a, p, want, keep, p->vdone);
    if (got >= must)
        return got;
    uint64_t before = p->vdone;
    carve_vmm_fence(a, p);
    fences_poll(a, p);
    if (p->vdone != before && (got += carve_vmm_trim_pool(a, p, want - got, keep, p->vdone)) >= must)
        return got;
    while (got < must && p->vfence_n) {
        if (carve_wait_event(a, p->vfence[p->vfence_head].ev) != CARVE_OK)
            break;
        fences_done_to(a, p, 0);
        got += carve_vmm_trim_pool(a, p, want - got, keep, p->vdone);
    }
    return got;
}

/* Pool p's lock held, heap lock not: unmap up to want bytes of free
 * granules of other streams' pools, once all work on the device is done.
 * (Their streams may have been destroyed since their buffers were freed,
 * so nothing is recorded on them: one device synchronization, like the
 * one cudaFree makes, covers every stream. This happens only when the
 * requesting stream's own pool cannot make room.) The pools are locked
 * before the synchronization, as carve_reclaim's waiting path does: a
 * granule freed after the device was synchronized may still be used by
 * work queued after it, and with the pool locked nothing is freed until
 * the trim is over, so everything its clock counts was let go before the
 * wait. A pool whose lock is busy is passed over (waiting for it while
 * holding p's could deadlock with its holder doing the same). */
static void trim_others(carve_arena *a, carve_pool *p, size_t want) {
    size_t n = CARVE_LOAD(&a->npools), k = 0;
    carve_pool **held = malloc(n * sizeof(*held));
    if (!held)
        return; /* nothing is trimmed: the caller's mapping may pass the limit and fail */
    for (carve_pool *q = CARVE_LOAD_ACQ(&a->pools); q && k < n; q = q->next_all)
        if (q != p && carve_spin_trylock(&q->lock))
            held[k++] = q;
    if (k > 0 && carve_wait_device(a) == CARVE_OK) {
        size_t done = 0;
        for (size_t i = 0; i < k && done < want; i++) {
            carve_pool *q = held[i];
            carve_vmm_fences_synced(a, q);
            done += carve_vmm_trim_pool(a, q, want - done, NULL, q->vdone);
            /* q's stream is past its peak (idle, or gone): what it may keep
             * starts again from what it touches now. */
            __atomic_store_n(&q->touched_peak, q->touched, __ATOMIC_RELAXED);
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

carve_status carve_vmm_map(carve_arena *a, carve_pool *p, carve_block *span, uintptr_t addr, size_t size,
                           const carve_keep *keep) {
    carve_segment *s = span->u.r.seg;
    carve_heap *h = &a->heap;
    char b1[32], b2[32], b3[32];
    size_t need = size;
    CARVE_ASSERT_INTERNAL(addr % G == 0 && size % G == 0 && carve_vmm_unmapped(s, addr, size) == size / G);
    size_t allow = carve_vmm_allowance(a, p), mapped = pool_mapped(p);
    int recycle = 0;
    if (mapped + need > allow) {
        /* What is unmapped now is mostly mapped again below: let the
         * backend keep its physical memory for that (closed at the end). */
        if ((recycle = a->be.ops->recycle != NULL))
            a->be.ops->recycle(&a->be, 1);
        /* Stay within the allowance: unmap free granules of this stream
         * first (the pool lock keeps the blocks as they are), and a little
         * more, so that the next requests need not. */
        size_t must = mapped + need - allow;
        size_t got = make_room(a, p, must, must + allow / CARVE_VMM_HYSTERESIS_DIV, keep);
        if (got)
            pace(p, got / G);
    }
    if (CARVE_LOAD(&a->multi)) {
        /* Streams keep their own peaks, but not idle ones' forever: when
         * the arena maps a quarter more than the most its streams ever
         * touched at once (as seen here; no counter on the fast paths),
         * other streams' free granules go first. */
        size_t now = 0;
        for (const carve_pool *q = CARVE_LOAD_ACQ(&a->pools); q; q = q->next_all)
            now += __atomic_load_n(&q->touched, __ATOMIC_RELAXED);
        carve_atomic_max(&h->vpeak, now * G);
        size_t peak = CARVE_LOAD(&h->vpeak), cap = peak + peak / CARVE_VMM_IDLE_DIV;
        size_t total = CARVE_LOAD(&h->reserved) + CARVE_LOAD(&h->inflight) + need;
        if (total > cap && total > allow)
            trim_others(a, p, total - cap);
    }
    /* Counted against the limit while the driver maps (atomically: mapping
     * streams do not queue on the heap lock; two at the limit may both be
     * refused where one would have fitted). */
    size_t used = __atomic_add_fetch(&h->inflight, need, __ATOMIC_RELAXED) + CARVE_LOAD(&h->reserved);
    if (used > a->limit && CARVE_LOAD(&a->multi)) { /* at the limit: other streams' free granules too */
        trim_others(a, p, used - a->limit);
        used = CARVE_LOAD(&h->inflight) + CARVE_LOAD(&h->reserved);
    }
    if (used > a->limit) {
        __atomic_sub_fetch(&h->inflight, need, __ATOMIC_RELAXED);
        carve_note("mapping %s more would pass the limit of %s (%s mapped)", carve_format_bytes(b1, sizeof(b1), need),
                   carve_format_bytes(b2, sizeof(b2), a->limit),
                   carve_format_bytes(b3, sizeof(b3), CARVE_LOAD(&h->reserved)));
        if (recycle)
            a->be.ops->recycle(&a->be, 0);
        return CARVE_ERR_OOM;
    }
    carve_status st = a->be.ops->commit(&a->be, addr, size);
    if (st == CARVE_OK)
        memset(s->gmapped + (addr - s->base) / G, 1, size / G);
    else
        carve_note("the %s backend could not map %s: %s", carve_backend_str(a->be.kind),
                   carve_format_bytes(b1, sizeof(b1), size), carve_backend_msg());
    if (recycle)
        a->be.ops->recycle(&a->be, 0);
    if (st == CARVE_OK) {
        /* Granules let go until now get a fence for the next trim to find done. */
        carve_vmm_fence(a, p);
        __atomic_add_fetch(&h->nreserve, (uint64_t)(size / G), __ATOMIC_RELAXED);
        carve_atomic_max(&h->reserved_peak, __atomic_add_fetch(&h->reserved, size, __ATOMIC_RELAXED));
    }
    __atomic_sub_fetch(&h->inflight, need, __ATOMIC_RELAXED);
    return st;
}

carve_status carve_vmm_release_segment(carve_arena *a, carve_segment *s) {
    size_t failed;
    unmap_all(a, s, 0, s->ngran, 1, &failed);
    return failed ? CARVE_ERR_BACKEND : CARVE_OK;
}
