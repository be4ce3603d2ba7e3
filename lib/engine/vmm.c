/*
 * vmm.c — virtual-memory mode: address space is reserved once, and physical
 * memory is mapped into it 2 MiB granule by granule as buffers need it.
 *
 * With plain segments (cudaMalloc), free memory stuck between live buffers
 * stays reserved: the arena's footprint is set by fragmentation. Here a
 * granule that no live buffer touches can be unmapped, so what the arena
 * holds is (nearly) the granules its live buffers touch.
 *
 * Unmapping is not stream-ordered (the driver unmaps at once), so a granule
 * is unmapped only when the work queued before its free is known to be
 * done: after waiting for the freeing stream (lazy trimming), after the
 * span's event completed (spans going back), or after a device
 * synchronization (carve_empty_cache).
 *
 * Every granule of a segment has a reference count (the used or pending
 * blocks that touch it) and a mapped flag, and the arena counts the
 * granules touched and their peak. An allocation maps the granules its
 * block touches that are not mapped yet. Unmapping is lazy, to keep driver
 * calls off the common path: mapped bytes may rise freely up to an
 * allowance, the peak of touched granules plus 2% (carve_vmm_allowance;
 * with several streams, the sum of each stream's own peak, so that streams
 * whose peaks come at different times do not take each other's granules on
 * every step), and only a request that would pass it first unmaps free mapped granules
 * of the requesting stream's own spans, those let go longest ago first,
 * and 2% more than it needs, so that the next requests map without
 * unmapping; only when its own spans have too few, other streams' (after
 * a device synchronization). The peak of mapped bytes therefore stays within about 2% of
 * the peak of touched granules, while in a program that repeats its steps
 * nothing is mapped or unmapped after the first (carve-replay --warm counts
 * the calls). Two more things keep mappings in use: an allocation whose
 * block would need maps at its front is placed further into the block where
 * the granules are already mapped (carve_vmm_find_mapped), and spans given
 * back to the heap are unmapped as they go, so the heap's free ranges never
 * hold memory. carve_empty_cache unmaps every free granule. Driver calls
 * are batched where the backend allows: a run of unmapped granules is
 * mapped with one commit, and the unmapping a request does to make room
 * happens inside a recycle window, in which the backend may map the
 * physical memory it just unmapped again instead of creating new.
 *
 * Granules belong to exactly one span or free range, so their counts and
 * flags (one byte each: no word shared between pools) are written under the
 * owning pool's lock; mapping and unmapping also take the heap lock, which
 * guards the mapped total and the target.
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

void carve_vmm_touched_add(carve_heap *h, size_t n) {
    size_t t = __atomic_add_fetch(&h->touched, n, __ATOMIC_RELAXED);
    size_t pk = __atomic_load_n(&h->touched_peak, __ATOMIC_RELAXED);
    while (t > pk && !__atomic_compare_exchange_n(&h->touched_peak, &pk, t, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

size_t carve_vmm_allowance(const carve_arena *a) {
    size_t pk = __atomic_load_n(&a->heap.touched_peak, __ATOMIC_RELAXED);
    if (CARVE_LOAD(&a->multi)) {
        /* Each stream may keep what it touched at its own peak: their sum,
         * not the peak of the total, or streams whose peaks come at
         * different times would take each other's granules on every step
         * (one device synchronization each). */
        size_t sum = 0;
        for (const carve_pool *q = CARVE_LOAD_ACQ(&a->pools); q; q = q->next_all)
            sum += __atomic_load_n(&q->touched_peak, __ATOMIC_RELAXED);
        pk = sum > pk ? sum : pk;
    }
    pk *= G;
    size_t slack = pk / CARVE_VMM_SLACK_DIV;
    size_t allow = pk + (slack > G ? slack : G);
    return allow > a->heap.target ? allow : a->heap.target;
}

uintptr_t carve_vmm_find_mapped(const carve_segment *s, uintptr_t lo, uintptr_t hi, size_t size) {
    uintptr_t x = carve_align_up(lo, G);
    if (x >= hi || hi - x < size)
        return 0;
    size_t need = (size + G - 1) / G, run = 0;
    for (size_t g = (x - s->base) / G, e = (hi - 1 - s->base) / G; g <= e; g++) {
        if (!s->gmapped[g]) {
            run = 0;
            continue;
        }
        if (++run == need) {
            uintptr_t at = s->base + (g + 1 - need) * G;
            return at + size <= hi ? at : 0;
        }
    }
    return 0;
}

size_t carve_vmm_unmapped(const carve_segment *s, uintptr_t addr, size_t size) {
    size_t n = 0;
    for (size_t g = (addr - s->base) / G, e = (addr + size - 1 - s->base) / G; g <= e; g++)
        n += !s->gmapped[g];
    return n;
}

size_t carve_vmm_untouched(const carve_segment *s, uintptr_t addr, size_t size) {
    size_t n = 0;
    for (size_t g = (addr - s->base) / G, e = (addr + size - 1 - s->base) / G; g <= e; g++)
        n += s->gref[g] == 0;
    return n;
}

/* Heap lock held. Unmap granule g of segment s (reference count 0). */
static int unmap_one(carve_arena *a, carve_segment *s, size_t g) {
    if (a->be.ops->decommit(&a->be, s->base + g * G, G) != CARVE_OK) {
        a->heap.nunmap_failed++; /* the granule stays mapped and usable; reclaim reports it */
        carve_note("the %s backend refused to unmap memory: %s", carve_backend_str(a->be.kind),
                   carve_backend_msg());
        return 0;
    }
    s->gmapped[g] = 0;
    a->heap.nrelease++;
    CARVE_STORE(&a->heap.reserved, a->heap.reserved - G);
    return 1;
}

/* Heap lock held (and the owner's lock for a span). Unmap free mapped
 * granules of [addr, addr+size), skipping [keep_lo, keep_hi), until want
 * bytes are unmapped. Returns the bytes unmapped; *unmapped_out (may be
 * NULL) counts granules. */
static size_t trim_range(carve_arena *a, carve_segment *s, uintptr_t addr, size_t size, size_t want,
                         uintptr_t keep_lo, uintptr_t keep_hi, size_t *unmapped_out) {
    size_t done = 0;
    for (size_t g = (addr - s->base) / G, e = (addr + size - 1 - s->base) / G; g <= e && done < want; g++) {
        uintptr_t at = s->base + g * G;
        if (!s->gmapped[g] || s->gref[g] || (at < keep_hi && at + G > keep_lo))
            continue;
        if (unmap_one(a, s, g)) {
            done += G;
            if (unmapped_out)
                (*unmapped_out)++;
        }
    }
    return done;
}

int carve_vmm_unmap_span(carve_arena *a, carve_block *span) {
    size_t n = 0;
    trim_range(a, span->u.r.seg, span->addr, span->size, SIZE_MAX, 0, 0, &n);
    span->u.r.unmapped += n;
    return span->u.r.unmapped == span->size / G ? 0 : -1;
}

/* A free mapped granule that may be unmapped, and when it was let go. */
typedef struct trim_cand {
    uint32_t age;    /* clock - stamp: larger is longer unused (wraps safely) */
    size_t g;
    carve_block *span;
} trim_cand;

static int older_first(const void *x, const void *y) {
    const trim_cand *a = x, *b = y;
    return a->age > b->age ? -1 : a->age < b->age;
}

/* The free mapped granules of p's spans outside [keep_lo, keep_hi), into
 * *out (allocated here). Returns how many, or -1 when host memory ran out. */
static ptrdiff_t trim_candidates(carve_pool *p, uintptr_t keep_lo, uintptr_t keep_hi, trim_cand **out) {
    size_t n = 0, cap = 0;
    trim_cand *c = NULL;
    for (carve_block *span = p->spans; span; span = span->fnext) {
        carve_segment *s = span->u.r.seg;
        for (size_t g = (span->addr - s->base) / G, e = (span->addr + span->size - 1 - s->base) / G; g <= e; g++) {
            uintptr_t at = s->base + g * G;
            if (!s->gmapped[g] || s->gref[g] || (at < keep_hi && at + G > keep_lo))
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
            c[n++] = (trim_cand){p->vclock - s->gstamp[g], g, span};
        }
    }
    *out = c;
    return (ptrdiff_t)n;
}

size_t carve_vmm_trim_pool(carve_arena *a, carve_pool *p, size_t want, uintptr_t keep_lo, uintptr_t keep_hi) {
    size_t done = 0;
    trim_cand *c = NULL;
    ptrdiff_t n = want == SIZE_MAX ? -1 : trim_candidates(p, keep_lo, keep_hi, &c);
    if (n >= 0) { /* longest unused first */
        if (n > 1)
            qsort(c, (size_t)n, sizeof(*c), older_first);
        for (ptrdiff_t i = 0; i < n && done < want; i++)
            if (unmap_one(a, c[i].span->u.r.seg, c[i].g)) {
                done += G;
                c[i].span->u.r.unmapped++;
            }
        free(c);
        return done;
    }
    /* Everything, or no host memory to sort: in address order. */
    for (carve_block *span = p->spans; span && done < want; span = span->fnext) {
        size_t k = 0;
        done += trim_range(a, span->u.r.seg, span->addr, span->size, want - done, keep_lo, keep_hi, &k);
        span->u.r.unmapped += k;
    }
    return done;
}

/* Pool lock held, on p's own stream: wait until the work queued on the
 * stream so far has completed. Unmapping is not stream-ordered, so a
 * granule freed by this stream may be unmapped only once the work queued
 * before its free is done. 0 when it is, -1 when that cannot be known (no
 * event could be recorded): then nothing is unmapped. */
static int settle(carve_arena *a, carve_pool *p) {
    void *ev = NULL;
    if (a->be.ops->event_record(&a->be, p->stream, &ev) != CARVE_OK)
        return -1;
    carve_status st = a->be.ops->event_sync(&a->be, ev);
    a->be.ops->event_release(&a->be, ev);
    return st == CARVE_OK ? 0 : -1;
}

/* Pool p's lock held, heap lock not: unmap up to want bytes of free
 * granules of other streams' pools, once all work on the device is done.
 * (Their streams may have been destroyed since their buffers were freed,
 * so nothing is recorded on them: one device synchronization, like the
 * one cudaFree makes, covers every stream. This happens only when the
 * requesting stream's own pool cannot make room.) A pool whose lock is
 * busy is passed over (waiting for it while holding p's could deadlock
 * with its holder doing the same). */
static void trim_others(carve_arena *a, carve_pool *p, size_t want) {
    if (a->be.ops->device_sync(&a->be) != CARVE_OK)
        return;
    size_t done = 0;
    for (carve_pool *q = CARVE_LOAD_ACQ(&a->pools); q && done < want; q = q->next_all) {
        if (q == p || !carve_spin_trylock(&q->lock))
            continue;
        carve_mutex_lock(&a->heap.lock);
        done += carve_vmm_trim_pool(a, q, want - done, 0, 0);
        carve_mutex_unlock(&a->heap.lock);
        /* q's stream is past its peak (idle, or gone): what it may keep
         * starts again from what it touches now. */
        __atomic_store_n(&q->touched_peak, q->touched, __ATOMIC_RELAXED);
        carve_spin_unlock(&q->lock);
    }
}

carve_status carve_vmm_map(carve_arena *a, carve_pool *p, carve_block *span, uintptr_t addr, size_t size) {
    carve_segment *s = span->u.r.seg;
    carve_heap *h = &a->heap;
    char b1[32], b2[32], b3[32];
    size_t need = carve_vmm_unmapped(s, addr, size) * G;
    if (need == 0)
        return CARVE_OK;
    carve_mutex_lock(&h->lock);
    size_t allow = carve_vmm_allowance(a);
    int recycle = 0;
    if (h->reserved + need > allow) {
        /* What is unmapped now is mostly mapped again below: let the
         * backend keep its physical memory for that (closed at the end). */
        if ((recycle = a->be.ops->recycle != NULL))
            a->be.ops->recycle(&a->be, 1);
        /* Stay within the allowance: unmap free granules of this stream
         * first, once its earlier work is done (waited for with the heap
         * lock dropped; the pool lock keeps the spans as they are), and a
         * little more, so that the next requests need not. */
        carve_mutex_unlock(&h->lock);
        int settled = settle(a, p) == 0;
        carve_mutex_lock(&h->lock);
        allow = carve_vmm_allowance(a);
        size_t want = h->reserved + need - allow + allow / CARVE_VMM_HYSTERESIS_DIV;
        size_t got = settled && h->reserved + need > allow ? carve_vmm_trim_pool(a, p, want, addr, addr + size) : want;
        if (got < want && CARVE_LOAD(&a->multi)) {
            carve_mutex_unlock(&h->lock);
            trim_others(a, p, want - got);
            carve_mutex_lock(&h->lock);
        }
    }
    if (h->reserved + need > a->limit) {
        carve_note("mapping %s more would pass the limit of %s (%s mapped)", carve_format_bytes(b1, sizeof(b1), need),
                   carve_format_bytes(b2, sizeof(b2), a->limit), carve_format_bytes(b3, sizeof(b3), h->reserved));
        if (recycle)
            a->be.ops->recycle(&a->be, 0);
        carve_mutex_unlock(&h->lock);
        return CARVE_ERR_OOM;
    }
    /* Map each run of unmapped granules with one backend call. */
    carve_status st = CARVE_OK;
    for (size_t g = (addr - s->base) / G, e = (addr + size - 1 - s->base) / G; g <= e;) {
        if (s->gmapped[g]) {
            g++;
            continue;
        }
        size_t r = g;
        while (r <= e && !s->gmapped[r])
            r++;
        st = a->be.ops->commit(&a->be, s->base + g * G, (r - g) * G);
        if (st != CARVE_OK) {
            carve_note("the %s backend could not map %s: %s", carve_backend_str(a->be.kind),
                       carve_format_bytes(b1, sizeof(b1), (r - g) * G), carve_backend_msg());
            break;
        }
        memset(s->gmapped + g, 1, r - g);
        span->u.r.unmapped -= r - g;
        h->nreserve += r - g;
        CARVE_STORE(&h->reserved, h->reserved + (r - g) * G);
        g = r;
    }
    if (recycle)
        a->be.ops->recycle(&a->be, 0);
    if (h->reserved > h->reserved_peak)
        CARVE_STORE(&h->reserved_peak, h->reserved);
    carve_mutex_unlock(&h->lock);
    return st;
}

carve_status carve_vmm_release_segment(carve_arena *a, carve_segment *s) {
    for (size_t g = 0; g < s->ngran; g++)
        if (s->gmapped[g] && !unmap_one(a, s, g))
            return CARVE_ERR_BACKEND;
    return CARVE_OK;
}
