/*
 * slab.c — fixed chunks of block records with a free list. Chunks are kept
 * until the arena is destroyed: records are type-stable, so a pointer read
 * racily (carve_free of a stale pointer) never points into freed memory.
 * A growth can be made to fail on purpose (fail_grows), so that tests reach
 * every path that handles host memory running out.
 */
#include "engine/slab.h"

#include <stddef.h>
#include <string.h>

struct carve_slab_chunk {
    carve_slab_chunk *next;
    carve_block blocks[CARVE_SLAB_CHUNK];
};

int carve_slab_grow(carve_slab *s) {
    void *mem = NULL; /* records are cache-line aligned */
    if (s->fail_grows) { /* an injected failure (tests of the error paths) */
        s->fail_grows--;
        return -1;
    }
    if (posix_memalign(&mem, 64, sizeof(carve_slab_chunk)) != 0)
        return -1;
    carve_slab_chunk *c = mem;
    c->next = s->chunks;
    s->chunks = c;
    s->nchunks++;
    for (size_t i = CARVE_SLAB_CHUNK; i-- > 0;) {
        c->blocks[i].state = CARVE_B_DEAD;
        c->blocks[i].fnext = s->free;
        s->free = &c->blocks[i];
    }
    s->nfree += CARVE_SLAB_CHUNK;
    return 0;
}

/* Cleared around the span's pool, which is cleared with an atomic store: a
 * lookup that read this record's address from the address map before the
 * record was given back and taken again may still read that field (alloc.c,
 * owner_locked; it then asks again under a lock, owner_recheck), and must
 * see the old pool or NULL, never a pointer torn by memset. */
carve_block *carve_slab_get_clear(carve_slab *s) {
    carve_block *b = carve_slab_get(s);
    if (b) {
        size_t at = offsetof(carve_block, u.r.pool), end = at + sizeof(b->u.r.pool);
        memset(b, 0, at);
        memset((char *)b + end, 0, sizeof(*b) - end);
        __atomic_store_n(&b->u.r.pool, (struct carve_pool *)NULL, __ATOMIC_RELAXED);
    }
    return b;
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
