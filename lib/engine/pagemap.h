/*
 * pagemap.h — address -> span, without locks on the read side, in memory
 * that follows the spans' ends rather than the address space they cover.
 *
 * carve_free must find the pool that owns a pointer before it can take that
 * pool's lock. Spans are aligned to the 2 MiB granule, so no two spans share
 * a granule, and a three-level radix tree indexed by address >> 21 (12 bits a
 * level, covering 57-bit addresses) maps each granule to its span.
 *
 * The one idea: an entry of the two upper levels (the root, 32 TiB an
 * entry, and the middle nodes, 8 GiB an entry) either points to the node
 * below or, tagged in its lowest bit (records are 64-byte aligned), names
 * the span that covers all of its range, or none (the tag alone). A span
 * then costs entries only where its ends fall inside an entry's range: at
 * most two nodes' worth a level, however many granules it covers, and one
 * allocation of 2^52 bytes takes a few KiB, not 16 GiB of leaves. Reading
 * stays three loads and two tests: the tag test takes the place of the test
 * for a missing node (an empty slot is the tag, not NULL). A leaf entry
 * names the span of one granule, untagged.
 *
 * Writers hold the heap lock; readers use acquire loads. A node is filled
 * before it is published, and a tagged entry is turned into a node holding
 * the same answer, so a reader racing with a writer sees the old or the new
 * span, both valid records. A node that a write replaces by a tag goes to a
 * spare list and is reused (for the same level, so a stale reader reads an
 * entry of the kind it expects); nodes are freed only with the arena. Only
 * a write over ranges that hold no live buffer replaces nodes, and a node
 * that comes to answer nothing everywhere is replaced by the empty tag: a
 * legitimate reader (a free of a live buffer) never walks a node that is
 * being reused, and nodes stay only where spans end (or inside spans, until
 * they go), so the map's memory follows the spans there are.
 */
#ifndef CARVE_ENGINE_PAGEMAP_H
#define CARVE_ENGINE_PAGEMAP_H

#include "engine/block.h"

#define CARVE_PM_BITS 12
#define CARVE_PM_FAN (1u << CARVE_PM_BITS)
#define CARVE_PM_SHIFT 21 /* log2(CARVE_SEGMENT_GRANULE) */
#define CARVE_PM_MAX_ADDR ((uintptr_t)1 << (CARVE_PM_SHIFT + 3 * CARVE_PM_BITS))
#define CARVE_PM_SPAN ((uintptr_t)1) /* tag of an upper entry: the span of all its range (or none) */

/* A middle node (tagged entries or leaves) or a leaf (span pointers). */
typedef struct carve_pm_node {
    uintptr_t e[CARVE_PM_FAN];
    struct carve_pm_node *spare; /* on a spare list, the next one (readers never read it) */
} carve_pm_node;

typedef struct carve_pagemap {
    uintptr_t root[CARVE_PM_FAN];
    carve_pm_node *spare[2]; /* nodes replaced by a tag, for reuse: middle nodes, leaves */
    size_t nodes[2];         /* nodes allocated, middle and leaves (spares included) */
} carve_pagemap;

/* Every address mapped to nothing. */
void carve_pagemap_init(carve_pagemap *pm) CARVE_INTERNAL;
/* Allocate the nodes that a carve_pagemap_set over [addr, addr+size) will
 * write into (those where the range's ends fall inside an upper entry's
 * range); 0 on success, -1 when host memory ran out or the range is beyond
 * CARVE_PM_MAX_ADDR. Changes no answer. */
int carve_pagemap_prepare(carve_pagemap *pm, uintptr_t addr, size_t size) CARVE_INTERNAL;
/* Map every granule of [addr, addr+size) (granule-aligned) to span (NULL to
 * unmap); the range must have been prepared, or every one of its ends must
 * already be an end of what the map answers. live: buffers in the range are
 * live and may be freed meanwhile (a span cut in two): no node is replaced,
 * only written. */
void carve_pagemap_set(carve_pagemap *pm, uintptr_t addr, size_t size, carve_block *span, int live) CARVE_INTERNAL;
void carve_pagemap_destroy(carve_pagemap *pm) CARVE_INTERNAL;

/* carve_check: whether every granule of [addr, addr+size) maps to want. */
int carve_pagemap_covers(const carve_pagemap *pm, uintptr_t addr, size_t size, const carve_block *want) CARVE_INTERNAL;
/* carve_check: call fn for every entry that names a span, with the range
 * it covers, and count the nodes reachable (*nodes[0] middle, [1] leaves)
 * and on the spare lists; stop at the first nonzero fn, returned. */
int carve_pagemap_walk(const carve_pagemap *pm, int (*fn)(const carve_block *span, uintptr_t addr, size_t size, void *arg),
                       void *arg, size_t reached[2], size_t spares[2]) CARVE_INTERNAL;

static inline carve_block *carve_pagemap_get(const carve_pagemap *pm, uintptr_t addr) {
    if (addr >= CARVE_PM_MAX_ADDR)
        return NULL;
    uintptr_t page = addr >> CARVE_PM_SHIFT;
    /* (Held as a node pointer throughout: GCC then indexes each level in
     * one instruction, as with plain pointers.) */
    const carve_pm_node *n = (const carve_pm_node *)CARVE_LOAD_ACQ(&pm->root[page >> (2 * CARVE_PM_BITS)]);
    if (CARVE_UNLIKELY((uintptr_t)n & CARVE_PM_SPAN))
        return (carve_block *)((uintptr_t)n ^ CARVE_PM_SPAN);
    n = (const carve_pm_node *)CARVE_LOAD_ACQ(&n->e[(page >> CARVE_PM_BITS) & (CARVE_PM_FAN - 1)]);
    if (CARVE_UNLIKELY((uintptr_t)n & CARVE_PM_SPAN))
        return (carve_block *)((uintptr_t)n ^ CARVE_PM_SPAN);
    return (carve_block *)CARVE_LOAD_ACQ(&n->e[page & (CARVE_PM_FAN - 1)]);
}

#endif
