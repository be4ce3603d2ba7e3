/* blockmap.c — creating and growing the address table (see blockmap.h). */
#include "blockmap.h"

#define BLOCKMAP_MIN 64

static int bm_alloc(carve_blockmap *m, size_t cap) {
    m->keys = calloc(cap, sizeof(*m->keys));
    m->vals = malloc(cap * sizeof(*m->vals));
    if (!m->keys || !m->vals) {
        free(m->keys);
        free(m->vals);
        m->keys = NULL;
        m->vals = NULL;
        return -1;
    }
    m->mask = cap - 1;
    return 0;
}

int carve_blockmap_init(carve_blockmap *m) {
    m->count = 0;
    return bm_alloc(m, BLOCKMAP_MIN);
}

void carve_blockmap_destroy(carve_blockmap *m) {
    free(m->keys);
    free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
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
        if (old.keys[i])
            carve_blockmap_put(m, old.vals[i]);
    free(old.keys);
    free(old.vals);
    return 0;
}
