/*
 * vmm.h — virtual-memory mode (vmm.c): per-granule reference counts and
 * mapped flags inside each segment, mapping on use and lazy unmapping.
 */
#ifndef CARVE_ENGINE_VMM_H
#define CARVE_ENGINE_VMM_H

#include "engine/types.h"

int carve_vmm_segment_init(carve_segment *s) CARVE_INTERNAL;
void carve_vmm_segment_free(carve_segment *s) CARVE_INTERNAL;
/* Granules of [addr, addr+size) not mapped. */
size_t carve_vmm_unmapped(const carve_segment *s, uintptr_t addr, size_t size) CARVE_INTERNAL;
/* Pool lock held; takes the heap lock. Map every granule of [addr,
 * addr+size) in span, unmapping free granules first where the mapped total
 * would pass its target. CARVE_ERR_OOM past the limit. */
carve_status carve_vmm_map(carve_arena *a, carve_pool *p, carve_block *span, uintptr_t addr, size_t size) CARVE_INTERNAL;
/* Heap lock held (and p's lock): unmap free mapped granules, up to want
 * bytes, of p's spans outside [keep_lo, keep_hi). */
size_t carve_vmm_trim_pool(carve_arena *a, carve_pool *p, size_t want, uintptr_t keep_lo, uintptr_t keep_hi) CARVE_INTERNAL;
/* Heap lock held, span empty: unmap all of it before it goes back to the
 * heap. 0 on success, -1 if the backend refused (the span stays). */
int carve_vmm_unmap_span(carve_arena *a, carve_block *span) CARVE_INTERNAL;
/* Heap lock held: unmap every mapped granule of a free segment. */
carve_status carve_vmm_release_segment(carve_arena *a, carve_segment *s) CARVE_INTERNAL;

/* Pool lock held: the used or pending block [addr, addr+size) of span
 * starts (delta 1) or stops (-1) touching its granules. */
static inline void carve_vmm_ref(const carve_block *span, uintptr_t addr, size_t size, int delta) {
    const carve_segment *s = span->u.r.seg;
    size_t g = (addr - s->base) >> CARVE_PM_SHIFT, e = (addr + size - 1 - s->base) >> CARVE_PM_SHIFT;
    for (; g <= e; g++)
        s->gref[g] += (uint32_t)delta;
}

#endif
