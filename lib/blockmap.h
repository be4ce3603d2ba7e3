/*
 * blockmap.h — address -> live block, one table per pool.
 *
 * Open addressing with linear probing over a power-of-two table kept at most
 * half full, and backward-shift deletion (no tombstones), so lookups stay
 * O(1) expected however long the table lives. Keys are buffer addresses,
 * which are 256-byte aligned: the hash drops those zero bits first.
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
/* Make room for one more entry; 0 on success, -1 when host memory ran out. */
int carve_blockmap_reserve(carve_blockmap *m) CARVE_INTERNAL;
/* Insert (after carve_blockmap_reserve succeeded). */
void carve_blockmap_put(carve_blockmap *m, carve_block *b) CARVE_INTERNAL;
carve_block *carve_blockmap_get(const carve_blockmap *m, uintptr_t addr) CARVE_INTERNAL;
/* Remove and return the entry for addr, NULL when absent. */
carve_block *carve_blockmap_take(carve_blockmap *m, uintptr_t addr) CARVE_INTERNAL;

#endif
