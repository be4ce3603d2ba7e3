/*
 * maps.h — where the arena's mappings begin and end (virtual-memory mode).
 *
 * The driver unmaps whole mappings only, and a mapping costs the same
 * whatever its size, so memory brought into untouched address space comes
 * in as mappings of many granules (pieces of at most the stream's touched
 * peak / 128, vmm.c). Only those are recorded here:
 * a granule outside every record is a mapping of its own. So the table
 * holds as many entries as there are mappings larger than a granule, never
 * one per granule, and an arena that maps granule by granule holds none.
 *
 * One sorted array of [addr, addr+size) under a mutex of its own: lookups
 * and changes happen on slow paths only (mapping, trimming, moving mapped
 * memory between streams, exporting, carve_check), from whichever pool's
 * lock is held, and every mapping lies inside one span.
 */
#ifndef CARVE_ENGINE_MAPS_H
#define CARVE_ENGINE_MAPS_H

#include "backend/backend.h"
#include "base/lock.h"
#include "base/util.h"
#include "carve.h"

typedef struct carve_map {
    uintptr_t addr;
    size_t size; /* more than one granule */
} carve_map;

typedef struct carve_maps {
    carve_mutex lock;
    carve_map *v;
    size_t n, cap; /* n: written under lock, atomically (carve_maps_any) */
} carve_maps;

int carve_maps_init(carve_maps *m) CARVE_INTERNAL;
/* Whether any mapping larger than a granule is recorded (no lock: a hint
 * for skipping lookups where none can answer). */
static inline int carve_maps_any(const carve_maps *m) { return __atomic_load_n(&m->n, __ATOMIC_RELAXED) != 0; }
void carve_maps_destroy(carve_maps *m) CARVE_INTERNAL;
/* Room for k more records, so that k calls of carve_maps_add cannot fail:
 * 0, or -1 when host memory ran out. */
int carve_maps_reserve(carve_maps *m, size_t k) CARVE_INTERNAL;
/* [addr, addr+size), just mapped as one mapping of more than a granule and
 * overlapping no record, is recorded (room reserved first). */
void carve_maps_add(carve_maps *m, uintptr_t addr, size_t size) CARVE_INTERNAL;
/* The record that starts at addr is dropped (the mapping was unmapped). */
void carve_maps_remove(carve_maps *m, uintptr_t addr) CARVE_INTERNAL;
/* The mapping that holds the granule at g (granule-aligned): *lo and *hi
 * get its ends; a granule no record holds is a mapping of its own. Returns
 * 1 when that mapping is a record (larger than a granule). next (may be
 * NULL) gets where the first record after g's mapping starts (UINTPTR_MAX:
 * none). */
int carve_maps_find(carve_maps *m, uintptr_t g, uintptr_t *lo, uintptr_t *hi, uintptr_t *next) CARVE_INTERNAL;
/* The mappings that hold [lo, hi) (mapped whole granules around a live
 * buffer), in address order: each recorded one, and each granule no record
 * holds, into out (room for max). Returns their number (those past max
 * are counted, not written). */
size_t carve_maps_cover(carve_maps *m, uintptr_t lo, uintptr_t hi, carve_be_piece *out, size_t max) CARVE_INTERNAL;
/* The records inside [lo, hi): how many, and the first one's index in m->v
 * (lock held by the caller: carve_check). */
size_t carve_maps_within(const carve_maps *m, uintptr_t lo, uintptr_t hi, size_t *first) CARVE_INTERNAL;

#endif
