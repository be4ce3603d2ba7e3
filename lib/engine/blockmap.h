/*
 * blockmap.h — address -> live block, one table per pool.
 *
 * Open addressing with linear probing over a power-of-two table kept at most
 * a quarter full, and backward-shift deletion (no tombstones), so lookups and
 * deletions stay short, O(1) expected, however long the table lives. Keys are buffer addresses,
 * which are 256-byte aligned: the hash drops those zero bits first. The
 * lookups are inline (every alloc and free does one); growing the table is
 * in blockmap.c.
 */
#ifndef CARVE_ENGINE_BLOCKMAP_H
#define CARVE_ENGINE_BLOCKMAP_H

#include "engine/block.h"

typedef struct carve_blockmap_slot {
    uintptr_t key;         /* 0 = empty slot */
    carve_block *val;
} carve_blockmap_slot;     /* key and value side by side: one cache line a probe */

typedef struct carve_blockmap {
    carve_blockmap_slot *slots;
    size_t mask;           /* capacity - 1 */
    unsigned shift;        /* 64 - log2(capacity) */
    size_t count;
} carve_blockmap;

int carve_blockmap_init(carve_blockmap *m) CARVE_INTERNAL;
void carve_blockmap_destroy(carve_blockmap *m) CARVE_INTERNAL;
/* Double the table; 0 on success, -1 when host memory ran out. */
int carve_blockmap_grow(carve_blockmap *m) CARVE_INTERNAL;

/* Fibonacci hashing: the top bits of the product mix every address bit. */
static inline size_t carve_blockmap_hash(const carve_blockmap *m, uintptr_t addr) {
    return (size_t)(((uint64_t)(addr >> 8) * 0x9E3779B97F4A7C15ull) >> m->shift);
}

/* Make room for one more entry; 0 on success, -1 when host memory ran out. */
static inline int carve_blockmap_reserve(carve_blockmap *m) {
    return (m->count + 1) * 4 <= m->mask + 1 ? 0 : carve_blockmap_grow(m);
}

/* Insert (after carve_blockmap_reserve succeeded). */
static inline void carve_blockmap_put(carve_blockmap *m, carve_block *b) {
    size_t i = carve_blockmap_hash(m, b->addr);
    while (m->slots[i].key)
        i = (i + 1) & m->mask;
    m->slots[i].key = b->addr;
    m->slots[i].val = b;
    m->count++;
}

static inline carve_block *carve_blockmap_get(const carve_blockmap *m, uintptr_t addr) {
    for (size_t i = carve_blockmap_hash(m, addr);; i = (i + 1) & m->mask) {
        if (m->slots[i].key == addr)
            return m->slots[i].val;
        if (!m->slots[i].key)
            return NULL;
    }
}

/* Remove and return the entry for addr, NULL when absent. */
static inline carve_block *carve_blockmap_take(carve_blockmap *m, uintptr_t addr) {
    size_t i = carve_blockmap_hash(m, addr);
    for (;; i = (i + 1) & m->mask) {
        if (m->slots[i].key == addr)
            break;
        if (!m->slots[i].key)
            return NULL;
    }
    carve_block *v = m->slots[i].val;
    /* Backward shift: pull later members of the probe run into the hole
     * unless their home lies cyclically in (hole, j]. */
    size_t hole = i;
    for (size_t j = (i + 1) & m->mask; m->slots[j].key; j = (j + 1) & m->mask) {
        size_t home = carve_blockmap_hash(m, m->slots[j].key);
        int stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!stays) {
            m->slots[hole] = m->slots[j];
            hole = j;
        }
    }
    m->slots[hole].key = 0;
    m->count--;
    return v;
}

#endif
