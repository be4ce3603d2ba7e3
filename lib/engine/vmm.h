/*
 * vmm.h — virtual-memory mode (vmm.c): per-granule reference counts and
 * mapped flags inside each segment, the pools' UNMAPPED blocks, mapping on
 * use and lazy unmapping.
 */
#ifndef CARVE_ENGINE_VMM_H
#define CARVE_ENGINE_VMM_H

#include "engine/types.h"

int carve_vmm_segment_init(carve_segment *s) CARVE_INTERNAL;
/* Mapped bytes pool p may hold before its free granules are unmapped first:
 * its peak of touched granules plus its slack, never below the heap's
 * target. */
size_t carve_vmm_allowance(const carve_arena *a, const carve_pool *p) CARVE_INTERNAL;
void carve_vmm_segment_free(carve_segment *s) CARVE_INTERNAL;
/* Granules of [addr, addr+size) not mapped. */
size_t carve_vmm_unmapped(const carve_segment *s, uintptr_t addr, size_t size) CARVE_INTERNAL;

/* Two address ranges [lo[i], hi[i]) whose granules a trim leaves mapped. */
typedef struct carve_keep {
    uintptr_t lo[2], hi[2];
} carve_keep;

/* Pool lock held, heap lock not. Map every granule of [addr, addr+size)
 * (whole granules of one UNMAPPED block of span), first unmapping free
 * granules of this pool (longest unused first; none in keep, which may be
 * NULL) where its mapped bytes would pass its allowance, and other streams'
 * where the arena's would pass the limit. Driver calls run with the heap lock dropped.
 * CARVE_ERR_OOM past the limit; the blocks are unchanged then. */
carve_status carve_vmm_map(carve_arena *a, carve_pool *p, carve_block *span, uintptr_t addr, size_t size,
                           const carve_keep *keep) CARVE_INTERNAL;
/* Pool lock held: [lo, hi), just mapped, is the front or the back (or all)
 * of UNMAPPED block u: make it FREE, merged with a FREE neighbour, and
 * indexed. Returns the FREE block that holds [lo, hi). Needs one spare
 * slab record. */
carve_block *carve_vmm_claim(carve_pool *p, carve_block *u, uintptr_t lo, uintptr_t hi) CARVE_INTERNAL;
/* Pool lock held, heap lock not: unmap free mapped granules of p, up to want
 * bytes (SIZE_MAX: all of them), those let go longest ago first, none in
 * keep (may be NULL), and only those stamped at or before done: the caller
 * knows the work queued before those frees is done (p->vdone, or p->vclock
 * after a device synchronization). FREE blocks are cut around what is
 * unmapped. Returns the bytes unmapped. */
size_t carve_vmm_trim_pool(carve_arena *a, carve_pool *p, size_t want, const carve_keep *keep,
                           uint64_t done) CARVE_INTERNAL;
/* Pool lock held, acting on p's stream (so it exists): record an event
 * that shows, once complete, that the device is done with every granule p
 * has let go so far (none when the newest one shows that already). */
void carve_vmm_fence(carve_arena *a, carve_pool *p) CARVE_INTERNAL __attribute__((cold, noinline));
/* Pool lock held, after a device synchronization: every granule p let go
 * is done with; its fences are dropped. */
void carve_vmm_fences_synced(carve_arena *a, carve_pool *p) CARVE_INTERNAL;
/* Pool and heap locks held, span empty: unmap all of it before it goes
 * back to the heap. 0 on success; -1 if the backend refused (the span stays,
 * its blocks rebuilt around what is still mapped) or host memory for the
 * block records ran out (the span stays as it was, nothing unmapped). */
int carve_vmm_unmap_span(carve_arena *a, carve_pool *p, carve_block *span) CARVE_INTERNAL;
/* Heap lock held: unmap every mapped granule of a free segment. */
carve_status carve_vmm_release_segment(carve_arena *a, carve_segment *s) CARVE_INTERNAL;

/* Pool lock held: link / unlink an UNMAPPED block in its pool's list. */
static inline void carve_vmm_list_add(carve_pool *p, carve_block *b) {
    carve_block **head = &p->unmapped[b->cls];
    b->state = CARVE_B_UNMAPPED;
    b->fprev = NULL;
    b->fnext = *head;
    if (*head)
        (*head)->fprev = b;
    *head = b;
}

static inline void carve_vmm_list_remove(carve_pool *p, carve_block *b) {
    if (b->fprev)
        b->fprev->fnext = b->fnext;
    else
        p->unmapped[b->cls] = b->fnext;
    if (b->fnext)
        b->fnext->fprev = b->fprev;
    b->fprev = b->fnext = NULL;
}

/* Pool lock held: the used or pending block [addr, addr+size) of p's span
 * starts (delta 1) or stops (-1) touching its granules. p counts the
 * granules it touches and their peak (written under its lock: nothing
 * shared with other streams); a granule let go is stamped with p's clock. */
static inline void carve_vmm_ref(carve_pool *p, const carve_block *span, uintptr_t addr, size_t size, int delta) {
    const carve_segment *s = span->u.r.seg;
    size_t g = (addr - s->base) >> CARVE_PM_SHIFT, e = (addr + size - 1 - s->base) >> CARVE_PM_SHIFT;
    size_t changed = 0;
    if (delta > 0) {
        for (; g <= e; g++)
            changed += s->gref[g]++ == 0;
        if (changed) {
            size_t t = p->touched + changed;
            __atomic_store_n(&p->touched, t, __ATOMIC_RELAXED);
            if (t > __atomic_load_n(&p->touched_peak, __ATOMIC_RELAXED)) /* reset under the heap lock */
                __atomic_store_n(&p->touched_peak, t, __ATOMIC_RELAXED);
        }
    } else {
        for (; g <= e; g++)
            if (--s->gref[g] == 0) {
                s->gstamp[g] = ++p->vclock;
                changed++;
            }
        if (changed)
            __atomic_store_n(&p->touched, p->touched - changed, __ATOMIC_RELAXED);
    }
}

#endif
