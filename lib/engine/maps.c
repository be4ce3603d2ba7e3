/*
 * maps.c — the sorted table of mappings larger than a granule (maps.h).
 *
 * Binary search by address; inserting and removing move the entries after
 * the place. Entries are as many as the mappings larger than a granule that
 * are mapped now, a few hundred for the largest traces, so a move costs
 * less than the driver call it comes with by orders of magnitude.
 */
#include "engine/maps.h"

#include <stdlib.h>
#include <string.h>

#define G CARVE_SEGMENT_GRANULE

int carve_maps_init(carve_maps *m) {
    memset(m, 0, sizeof(*m));
    return carve_mutex_init(&m->lock) != 0 ? -1 : 0;
}

void carve_maps_destroy(carve_maps *m) {
    carve_mutex_destroy(&m->lock);
    free(m->v);
    m->v = NULL;
    m->n = m->cap = 0;
}

/* The number of records that start at or below addr (lock held). */
static size_t upper(const carve_maps *m, uintptr_t addr) {
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->v[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int carve_maps_reserve(carve_maps *m, size_t k) {
    int ok = 1;
    carve_mutex_lock(&m->lock);
    if (m->cap - m->n < k) {
        size_t cap = m->cap ? 2 * m->cap : 16;
        while (cap - m->n < k)
            cap *= 2;
        carve_map *v = realloc(m->v, cap * sizeof(*v));
        if (v) {
            m->v = v;
            m->cap = cap;
        } else {
            ok = 0;
        }
    }
    carve_mutex_unlock(&m->lock);
    return ok ? 0 : -1;
}

void carve_maps_add(carve_maps *m, uintptr_t addr, size_t size) {
    CARVE_ASSERT_INTERNAL(size > G && addr % G == 0 && size % G == 0);
    carve_mutex_lock(&m->lock);
    CARVE_ASSERT_INTERNAL(m->n < m->cap);
    size_t i = upper(m, addr);
    CARVE_ASSERT_INTERNAL((i == 0 || m->v[i - 1].addr + m->v[i - 1].size <= addr) &&
                          (i == m->n || addr + size <= m->v[i].addr));
    memmove(&m->v[i + 1], &m->v[i], (m->n - i) * sizeof(*m->v));
    m->v[i] = (carve_map){addr, size};
    __atomic_store_n(&m->n, m->n + 1, __ATOMIC_RELAXED);
    carve_mutex_unlock(&m->lock);
}

void carve_maps_remove(carve_maps *m, uintptr_t addr) {
    carve_mutex_lock(&m->lock);
    size_t i = upper(m, addr);
    CARVE_ASSERT_INTERNAL(i > 0 && m->v[i - 1].addr == addr);
    if (i > 0 && m->v[i - 1].addr == addr) {
        memmove(&m->v[i - 1], &m->v[i], (m->n - i) * sizeof(*m->v));
        __atomic_store_n(&m->n, m->n - 1, __ATOMIC_RELAXED);
    }
    carve_mutex_unlock(&m->lock);
}

int carve_maps_find(carve_maps *m, uintptr_t g, uintptr_t *lo, uintptr_t *hi, uintptr_t *next) {
    int rec = 0;
    *lo = g;
    *hi = g + G;
    carve_mutex_lock(&m->lock);
    size_t i = upper(m, g);
    if (i > 0 && g < m->v[i - 1].addr + m->v[i - 1].size) {
        *lo = m->v[i - 1].addr;
        *hi = m->v[i - 1].addr + m->v[i - 1].size;
        rec = 1;
    }
    if (next)
        *next = i < m->n ? m->v[i].addr : UINTPTR_MAX;
    carve_mutex_unlock(&m->lock);
    return rec;
}

size_t carve_maps_within(const carve_maps *m, uintptr_t lo, uintptr_t hi, size_t *first) {
    size_t i = upper(m, lo);
    if (i > 0 && m->v[i - 1].addr == lo)
        i--;
    *first = i;
    size_t k = i;
    while (k < m->n && m->v[k].addr < hi)
        k++;
    return k - i;
}

size_t carve_maps_cover(carve_maps *m, uintptr_t lo, uintptr_t hi, carve_be_piece *out, size_t max) {
    size_t n = 0;
    carve_mutex_lock(&m->lock);
    size_t i = upper(m, lo);
    if (i > 0 && lo < m->v[i - 1].addr + m->v[i - 1].size)
        i--;
    for (uintptr_t g = carve_align_down(lo, G); g < hi; n++) {
        carve_be_piece x = {g, G};
        if (i < m->n && m->v[i].addr <= g) {
            x = (carve_be_piece){m->v[i].addr, m->v[i].size};
            i++;
        }
        if (n < max)
            out[n] = x;
        g = x.addr + x.size;
    }
    carve_mutex_unlock(&m->lock);
    return n;
}
