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
 * blocks that touch it) and a mapped flag. An allocation maps the granules
 * its block touches that are not mapped yet. Unmapping is lazy, to keep
 * driver calls off the common path: mapped bytes may rise freely up to a
 * target (the largest amount ever needed), and only a request that would
 * pass the target first unmaps free mapped granules of the requesting
 * stream's own spans, and raises the target only by what is still missing.
 * Spans given back to the heap are unmapped as they go, so the heap's free
 * ranges never hold memory. The peak of mapped bytes therefore follows
 * the peak of touched granules, while in steady state nothing is mapped or
 * unmapped at all. carve_empty_cache unmaps every free granule.
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
    s->gmapped = calloc(s->ngran, sizeof(*s->gmapped));
    if (!s->gref || !s->gmapped) {
        carve_vmm_segment_free(s);
        return -1;
    }
    return 0;
}

void carve_vmm_segment_free(carve_segment *s) {
    free(s->gref);
    free(s->gmapped);
    s->gref = NULL;
    s->gmapped = NULL;
}

size_t carve_vmm_unmapped(const carve_segment *s, uintptr_t addr, size_t size) {
    size_t n = 0;
    for (size_t g = (addr - s->base) / G, e = (addr + size - 1 - s->base) / G; g <= e; g++)
        n += !s->gmapped[g];
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

size_t carve_vmm_trim_pool(carve_arena *a, carve_pool *p, size_t want, uintptr_t keep_lo, uintptr_t keep_hi) {
    size_t done = 0;
    for (carve_block *span = p->spans; span && done < want; span = span->fnext) {
        size_t n = 0;
        done += trim_range(a, span->u.r.seg, span->addr, span->size, want - done, keep_lo, keep_hi, &n);
        span->u.r.unmapped += n;
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

carve_status carve_vmm_map(carve_arena *a, carve_pool *p, carve_block *span, uintptr_t addr, size_t size) {
    carve_segment *s = span->u.r.seg;
    carve_heap *h = &a->heap;
    char b1[32], b2[32], b3[32];
    size_t need = carve_vmm_unmapped(s, addr, size) * G;
    if (need == 0)
        return CARVE_OK;
    carve_mutex_lock(&h->lock);
    if (h->reserved + need > h->target) {
        /* Stay under the target: unmap free granules of this stream first,
         * once its earlier work is done (waited for with the heap lock
         * dropped; the pool lock keeps the spans as they are). */
        carve_mutex_unlock(&h->lock);
        int settled = settle(a, p) == 0;
        carve_mutex_lock(&h->lock);
        if (settled && h->reserved + need > h->target)
            carve_vmm_trim_pool(a, p, h->reserved + need - h->target, addr, addr + size);
    }
    if (h->reserved + need > a->limit) {
        carve_note("mapping %s more would pass the limit of %s (%s mapped)", carve_format_bytes(b1, sizeof(b1), need),
                   carve_format_bytes(b2, sizeof(b2), a->limit), carve_format_bytes(b3, sizeof(b3), h->reserved));
        carve_mutex_unlock(&h->lock);
        return CARVE_ERR_OOM;
    }
    carve_status st = CARVE_OK;
    for (size_t g = (addr - s->base) / G, e = (addr + size - 1 - s->base) / G; g <= e; g++) {
        if (s->gmapped[g])
            continue;
        st = a->be.ops->commit(&a->be, s->base + g * G, G);
        if (st != CARVE_OK) {
            carve_note("the %s backend could not map %s: %s", carve_backend_str(a->be.kind),
                       carve_format_bytes(b1, sizeof(b1), G), carve_backend_msg());
            break;
        }
        s->gmapped[g] = 1;
        span->u.r.unmapped--;
        h->nreserve++;
        CARVE_STORE(&h->reserved, h->reserved + G);
    }
    if (h->reserved > h->target)
        h->target = h->reserved;
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
