/*
 * slab.c — fixed chunks of block records with a free list. Chunks are kept
 * until the arena is destroyed: records are type-stable, so a pointer read
 * racily (carve_free of a stale pointer) never points into freed memory.
 */
#include "block.h"

#include <string.h>

#define SLAB_CHUNK_BLOCKS 255

struct carve_slab_chunk {
    carve_slab_chunk *next;
    carve_block blocks[SLAB_CHUNK_BLOCKS];
};

static int slab_grow(carve_slab *s) {
    carve_slab_chunk *c = malloc(sizeof(*c));
    if (!c)
        return -1;
    c->next = s->chunks;
    s->chunks = c;
    s->nchunks++;
    for (size_t i = SLAB_CHUNK_BLOCKS; i-- > 0;) {
        c->blocks[i].state = CARVE_B_DEAD;
        c->blocks[i].fnext = s->free;
        s->free = &c->blocks[i];
    }
    s->nfree += SLAB_CHUNK_BLOCKS;
    return 0;
}

carve_block *carve_slab_get(carve_slab *s) {
    if (!s->free && slab_grow(s) != 0)
        return NULL;
    carve_block *b = s->free;
    s->free = b->fnext;
    s->nfree--;
    return b;
}

carve_block *carve_slab_get_clear(carve_slab *s) {
    carve_block *b = carve_slab_get(s);
    if (b)
        memset(b, 0, sizeof(*b));
    return b;
}

void carve_slab_put(carve_slab *s, carve_block *b) {
    b->state = CARVE_B_DEAD;
    b->fnext = s->free;
    s->free = b;
    s->nfree++;
}

int carve_slab_reserve(carve_slab *s, size_t n) {
    while (s->nfree < n)
        if (slab_grow(s) != 0)
            return -1;
    return 0;
}

void carve_slab_destroy(carve_slab *s) {
    carve_slab_chunk *c = s->chunks;
    while (c) {
        carve_slab_chunk *n = c->next;
        free(c);
        c = n;
    }
    memset(s, 0, sizeof(*s));
}
