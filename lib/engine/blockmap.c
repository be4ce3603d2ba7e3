/* blockmap.c — creating and growing the address table (see blockmap.h). */
#include "engine/blockmap.h"

#define BLOCKMAP_MIN 64

static int bm_alloc(carve_blockmap *m, size_t cap) {
    m->slots = calloc(cap, sizeof(*m->slots));
    if (!m->slots)
        return -1;
    m->mask = cap - 1;
    m->shift = 64 - carve_msb(cap);
    return 0;
}

int carve_blockmap_init(carve_blockmap *m) {
    m->count = 0;
    return bm_alloc(m, BLOCKMAP_MIN);
}

void carve_blockmap_destroy(carve_blockmap *m) {
    free(m->slots);
    m->slots = NULL;
    m->count = 0;
}

int carve_blockmap_grow(carve_blockmap *m) {
    carve_blockmap old = *m;
    if (bm_alloc(m, (old.mask + 1) * 2) != 0) {
        *m = old;
        return -1;
    }
    m->count = 0;
    for (size_t i = 0; i <= old.mask; i++)
        if (old.slots[i].key)
            carve_blockmap_put(m, old.slots[i].val);
    free(old.slots);
    return 0;
}
