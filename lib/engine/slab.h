/*
 * slab.h — where block records come from: fixed chunks with a free list,
 * taken and given back inline on the fast paths (growing by a chunk is in
 * slab.c). Chunks live until the arena dies, so records are type-stable.
 */
#ifndef CARVE_ENGINE_SLAB_H
#define CARVE_ENGINE_SLAB_H

#include "engine/block.h"

typedef struct carve_slab_chunk carve_slab_chunk;

#define CARVE_SLAB_CHUNK 255 /* records a chunk */

typedef struct carve_slab {
    carve_block *free;
    size_t nfree;
    carve_slab_chunk *chunks;
    size_t nchunks;
    size_t fail_grows; /* tests: this many growths to come fail, as when host memory runs out */
    size_t held;       /* tests: records taken out on purpose (carve_check counts them as not lost) */
} carve_slab;

/* Add one chunk of records; 0 on success, -1 when host memory ran out (or
 * fail_grows said so). */
int carve_slab_grow(carve_slab *s) CARVE_INTERNAL;
/* Same as carve_slab_get, zeroed. */
carve_block *carve_slab_get_clear(carve_slab *s) CARVE_INTERNAL;
void carve_slab_destroy(carve_slab *s) CARVE_INTERNAL;

/* A record, NULL when host memory is exhausted. Its fields are left as they
 * were: the caller sets every field it relies on. */
static inline carve_block *carve_slab_get(carve_slab *s) {
    if (CARVE_UNLIKELY(!s->free) && carve_slab_grow(s) != 0)
        return NULL;
    carve_block *b = s->free;
    s->free = b->fnext;
    s->nfree--;
    return b;
}

static inline void carve_slab_put(carve_slab *s, carve_block *b) {
    b->state = CARVE_B_DEAD;
    b->fnext = s->free;
    s->free = b;
    s->nfree++;
}

/* Make sure n records can be taken without failing. 0 on success. */
static inline int carve_slab_reserve(carve_slab *s, size_t n) {
    while (CARVE_UNLIKELY(s->nfree < n))
        if (carve_slab_grow(s) != 0)
            return -1;
    return 0;
}

#endif
