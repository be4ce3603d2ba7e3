/*
 * pagemap.h — address -> span, without locks on the read side.
 *
 * carve_free must find the pool that owns a pointer before it can take that
 * pool's lock. Spans are aligned to the 2 MiB granule, so no two spans share
 * a granule, and a three-level radix tree indexed by address >> 21 (12 bits a
 * level, covering 57-bit addresses) maps each granule to its span. Writers
 * hold the heap lock; readers use acquire loads; nodes are never freed before
 * the arena, so a reader racing with a writer sees either the old or the new
 * span, both valid records.
 */
#ifndef CARVE_ENGINE_PAGEMAP_H
#define CARVE_ENGINE_PAGEMAP_H

#include "engine/block.h"

#define CARVE_PM_BITS 12
#define CARVE_PM_FAN (1u << CARVE_PM_BITS)
#define CARVE_PM_SHIFT 21 /* log2(CARVE_SEGMENT_GRANULE) */
#define CARVE_PM_MAX_ADDR ((uintptr_t)1 << (CARVE_PM_SHIFT + 3 * CARVE_PM_BITS))

typedef struct carve_pm_leaf {
    carve_block *span[CARVE_PM_FAN];
} carve_pm_leaf;

typedef struct carve_pm_mid {
    carve_pm_leaf *leaf[CARVE_PM_FAN];
} carve_pm_mid;

typedef struct carve_pagemap {
    carve_pm_mid *root[CARVE_PM_FAN];
} carve_pagemap;

/* Allocate the nodes that cover [addr, addr+size); 0 on success, -1 when
 * host memory ran out or the range is beyond CARVE_PM_MAX_ADDR. */
int carve_pagemap_prepare(carve_pagemap *pm, uintptr_t addr, size_t size) CARVE_INTERNAL;
/* Map every granule of [addr, addr+size) to span (NULL to unmap); the nodes
 * must have been prepared. */
void carve_pagemap_set(carve_pagemap *pm, uintptr_t addr, size_t size, carve_block *span) CARVE_INTERNAL;
void carve_pagemap_destroy(carve_pagemap *pm) CARVE_INTERNAL;

static inline carve_block *carve_pagemap_get(const carve_pagemap *pm, uintptr_t addr) {
    if (addr >= CARVE_PM_MAX_ADDR)
        return NULL;
    uintptr_t page = addr >> CARVE_PM_SHIFT;
    carve_pm_mid *mid = CARVE_LOAD_ACQ(&pm->root[page >> (2 * CARVE_PM_BITS)]);
    if (!mid)
        return NULL;
    carve_pm_leaf *leaf = CARVE_LOAD_ACQ(&mid->leaf[(page >> CARVE_PM_BITS) & (CARVE_PM_FAN - 1)]);
    if (!leaf)
        return NULL;
    return CARVE_LOAD_ACQ(&leaf->span[page & (CARVE_PM_FAN - 1)]);
}

#endif
