/*
 * vmm.h — virtual-memory mode (vmm.c): per-granule reference counts and
 * mapped flags inside each segment, mapping on use and lazy unmapping.
 */
#ifndef CARVE_ENGINE_VMM_H
#define CARVE_ENGINE_VMM_H

#include "engine/types.h"

int carve_vmm_segment_init(carve_segment *s) CARVE_INTERNAL;
/* Add n granules to the heap's touched count and raise its peak. */
void carve_vmm_touched_add(carve_heap *h, size_t n) CARVE_INTERNAL;
/* Mapped bytes the arena may hold before free granules are unmapped first:
 * the peak of touched granules (with several pools, the sum of each pool's
 * own peak) plus a little slack (CARVE_VMM_SLACK_DIV), never below the
 * heap's target. */
size_t carve_vmm_allowance(const carve_arena *a) CARVE_INTERNAL;
/* The lowest granule-aligned address x in [lo, hi) with [x, x+size) inside
 * [lo, hi) and all mapped, or 0 when there is none. O(granules of the range). */
uintptr_t carve_vmm_find_mapped(const carve_segment *s, uintptr_t lo, uintptr_t hi, size_t size) CARVE_INTERNAL;
void carve_vmm_segment_free(carve_segment *s) CARVE_INTERNAL;
/* Granules of [addr, addr+size) not mapped. */
size_t carve_vmm_unmapped(const carve_segment *s, uintptr_t addr, size_t size) CARVE_INTERNAL;
/* Granules of [addr, addr+size) that no live or pending block touches yet. */
size_t carve_vmm_untouched(const carve_segment *s, uintptr_t addr, size_t size) CARVE_INTERNAL;
/* Pool lock held; takes the heap lock. Map every granule of [addr,
 * addr+size) in span, unmapping free granules first where the mapped total
 * would pass its target. CARVE_ERR_OOM past the limit. */
carve_status carve_vmm_map(carve_arena *a, carve_pool *p, carve_block *span, uintptr_t addr, size_t size) CARVE_INTERNAL;
/* Heap lock held (and p's lock): unmap free mapped granules, up to want
 * bytes, of p's spans outside [keep_lo, keep_hi), those let go longest ago
 * first (want SIZE_MAX: all of them). */
size_t carve_vmm_trim_pool(carve_arena *a, carve_pool *p, size_t want, uintptr_t keep_lo, uintptr_t keep_hi) CARVE_INTERNAL;
/* Heap lock held, span empty: unmap all of it before it goes back to the
 * heap. 0 on success, -1 if the backend refused (the span stays). */
int carve_vmm_unmap_span(carve_arena *a, carve_block *span) CARVE_INTERNAL;
/* Heap lock held: unmap every mapped granule of a free segment. */
carve_status carve_vmm_release_segment(carve_arena *a, carve_segment *s) CARVE_INTERNAL;

/* Pool lock held: the used or pending block [addr, addr+size) of p's span
 * starts (delta 1) or stops (-1) touching its granules. The arena counts
 * the granules touched (one atomic add per call that changes it), and so
 * does p with its own (and their peak); a granule let go is stamped with
 * p's clock. */
static inline void carve_vmm_ref(carve_pool *p, const carve_block *span, uintptr_t addr, size_t size, int delta) {
    const carve_segment *s = span->u.r.seg;
    size_t g = (addr - s->base) >> CARVE_PM_SHIFT, e = (addr + size - 1 - s->base) >> CARVE_PM_SHIFT;
    size_t changed = 0;
    if (delta > 0) {
        for (; g <= e; g++)
            changed += s->gref[g]++ == 0;
        if (changed) {
            carve_vmm_touched_add(&p->arena->heap, changed);
            size_t t = p->touched + changed;
            __atomic_store_n(&p->touched, t, __ATOMIC_RELAXED);
            if (t > p->touched_peak)
                __atomic_store_n(&p->touched_peak, t, __ATOMIC_RELAXED);
        }
    } else {
        for (; g <= e; g++)
            if (--s->gref[g] == 0) {
                s->gstamp[g] = ++p->vclock;
                changed++;
            }
        if (changed) {
            __atomic_sub_fetch(&p->arena->heap.touched, changed, __ATOMIC_RELAXED);
            __atomic_store_n(&p->touched, p->touched - changed, __ATOMIC_RELAXED);
        }
    }
}

#endif
