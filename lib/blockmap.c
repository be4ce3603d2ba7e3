/* blockmap.c — see blockmap.h. */
#include "blockmap.h"

#define BLOCKMAP_MIN 64

static inline size_t bm_hash(uintptr_t addr, size_t mask) {
    uint64_t h = (uint64_t)(addr >> 8) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 32) & mask;
}

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

static void bm_insert(carve_blockmap *m, uintptr_t key, carve_block *v) {
    size_t i = bm_hash(key, m->mask);
    while (m->keys[i])
        i = (i + 1) & m->mask;
    m->keys[i] = key;
    m->vals[i] = v;
}

int carve_blockmap_reserve(carve_blockmap *m) {
    if ((m->count + 1) * 2 <= m->mask + 1)
        return 0;
    carve_blockmap old = *m;
    if (bm_alloc(m, (old.mask + 1) * 2) != 0) {
        *m = old;
        return -1;
    }
    for (size_t i = 0; i <= old.mask; i++)
        if (old.keys[i])
            bm_insert(m, old.keys[i], old.vals[i]);
    free(old.keys);
    free(old.vals);
    return 0;
}

void carve_blockmap_put(carve_blockmap *m, carve_block *b) {
    bm_insert(m, b->addr, b);
    m->count++;
}

carve_block *carve_blockmap_get(const carve_blockmap *m, uintptr_t addr) {
    for (size_t i = bm_hash(addr, m->mask);; i = (i + 1) & m->mask) {
        if (m->keys[i] == addr)
            return m->vals[i];
        if (!m->keys[i])
            return NULL;
    }
}

carve_block *carve_blockmap_take(carve_blockmap *m, uintptr_t addr) {
    size_t i = bm_hash(addr, m->mask);
    for (;; i = (i + 1) & m->mask) {
        if (m->keys[i] == addr)
            break;
        if (!m->keys[i])
            return NULL;
    }
    carve_block *v = m->vals[i];
    /* Backward-shift: pull later members of the probe run into the hole. */
    size_t hole = i;
    for (size_t j = (i + 1) & m->mask; m->keys[j]; j = (j + 1) & m->mask) {
        size_t home = bm_hash(m->keys[j], m->mask);
        /* Move j into the hole unless its home lies cyclically in (hole, j]. */
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
