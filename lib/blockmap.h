/*
 * blockmap.h — address -> live block, one table per pool.
 *
 * Open addressing with linear probing over a power-of-two table kept at most
 * half full, and backward-shift deletion (no tombstones), so lookups stay
 * O(1) expected however long the table lives. Keys are buffer addresses,
 * which are 256-byte aligned: the hash drops those zero bits first. The
 * lookups are inline (every alloc and free does one); growing the table is
 * in blockmap.c.
 */
#ifndef CARVE_BLOCKMAP_H
#define CARVE_BLOCKMAP_H

#include "block.h"

typedef struct carve_blockmap {
    uintptr_t *keys;       /* 0 = empty slot */
    carve_block **vals;
    size_t mask;           /* capacity - 1 */
    size_t count;
} carve_blockmap;

int carve_blockmap_init(carve_blockmap *m) CARVE_INTERNAL;
void carve_blockmap_destroy(carve_blockmap *m) CARVE_INTERNAL;
/* Double the table; 0 on success, -1 when host memory ran out. */
int carve_blockmap_grow(carve_blockmap *m) CARVE_INTERNAL;

static inline size_t carve_blockmap_hash(uintptr_t addr, size_t mask) {
    uint64_t h = (uint64_t)(addr >> 8) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 32) & mask;
}

/* Make room for one more entry; 0 on success, -1 when host memory ran out. */
static inline int carve_blockmap_reserve(carve_blockmap *m) {
    return (m->count + 1) * 2 <= m->mask + 1 ? 0 : carve_blockmap_grow(m);
}

/* Insert (after carve_blockmap_reserve succeeded). */
static inline void carve_blockmap_put(carve_blockmap *m, carve_block *b) {
    size_t i = carve_blockmap_hash(b->addr, m->mask);
    while (m->keys[i])
        i = (i + 1) & m->mask;
    m->keys[i] = b->addr;
    m->vals[i] = b;
    m->count++;
}

static inline carve_block *carve_blockmap_get(const carve_blockmap *m, uintptr_t addr) {
    for (size_t i = carve_blockmap_hash(addr, m->mask);; i = (i + 1) & m->mask) {
        if (m->keys[i] == addr)
            return m->vals[i];
        if (!m->keys[i])
            return NULL;
    }
}

/* Remove and return the entry for addr, NULL when absent. */
static inline carve_block *carve_blockmap_take(carve_blockmap *m, uintptr_t addr) {
    size_t i = carve_blockmap_hash(addr, m->mask);
    for (;; i = (i + 1) & m->mask) {
        if (m->keys[i] == addr)
            break;
        if (!m->keys[i])
            return NULL;
    }
    carve_block *v = m->vals[i];
    /* Backward shift: pull later members of the probe run into the hole
     * unless their home lies cyclically in (hole, j]. */
    size_t hole = i;
    for (size_t j = (i + 1) & m->mask; m->keys[j]; j = (j + 1) & m->mask) {
        size_t home = carve_blockmap_hash(m->keys[j], m->mask);
        int stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!stays) {
            m->keys[hole] = m->keys[j];
            m->vals[hole] = m->vals[j];
            hole = j;
        }
    }
    m->keys[hole] = 0;
    m->count--;
    return v;
}

#endif
