/*
 * idmap.h — 64-bit ids to small numbers, for the ids that are live: the
 * loader's id -> slot map (format.c) and the writer's set of ids it wrote an
 * allocation for (writer.c).
 *
 * The one idea: open addressing with linear probing and deletion by backward
 * shift, so removals leave no tombstones and the table stays as small as the
 * live set, however many ids come and go.
 */
#ifndef CARVE_TRACE_IDMAP_H
#define CARVE_TRACE_IDMAP_H

#include <stdint.h>
#include <stdlib.h>

typedef struct id_entry {
    uint64_t id;
    uint32_t val1;   /* the value + 1; 0 marks an empty entry */
} id_entry;

typedef struct id_map {
    id_entry *e;
    size_t mask;     /* capacity - 1 (capacity a power of two) */
    size_t count;
} id_map;

static inline size_t id_hash(uint64_t x) {
    /* splitmix64's finalizer: ids are often addresses or counters, whose
     * low bits alone would cluster. */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (size_t)x;
}

/* An empty map of cap entries (a power of two); 0, or -1 when host memory ran out. */
static inline int id_map_init(id_map *m, size_t cap) {
    m->e = (id_entry *)calloc(cap, sizeof(*m->e));
    m->mask = cap - 1;
    m->count = 0;
    return m->e ? 0 : -1;
}

/* The entry holding id, or the empty entry where it would go. */
static inline id_entry *id_map_find(const id_map *m, uint64_t id) {
    size_t i = id_hash(id) & m->mask;
    while (m->e[i].val1 && m->e[i].id != id)
        i = (i + 1) & m->mask;
    return &m->e[i];
}

/* Double the capacity; 0, or -1 when host memory ran out (m unchanged). */
static inline int id_map_grow(id_map *m) {
    id_map bigger;
    if (m->mask > SIZE_MAX / 4 / sizeof(id_entry) || id_map_init(&bigger, (m->mask + 1) * 2) != 0)
        return -1;
    for (size_t i = 0; i <= m->mask; i++)
        if (m->e[i].val1)
            *id_map_find(&bigger, m->e[i].id) = m->e[i];
    bigger.count = m->count;
    free(m->e);
    *m = bigger;
    return 0;
}

/* Remove entry at (which holds a key): shift later members of its probe
 * run back so that every key stays reachable from its home position. */
static inline void id_map_remove(id_map *m, id_entry *at) {
    size_t hole = (size_t)(at - m->e);
    size_t i = hole;
    for (;;) {
        i = (i + 1) & m->mask;
        if (!m->e[i].val1)
            break;
        size_t home = id_hash(m->e[i].id) & m->mask;
        /* Move e[i] into the hole unless its home lies cyclically in (hole, i]. */
        if (((i - home) & m->mask) >= ((i - hole) & m->mask)) {
            m->e[hole] = m->e[i];
            hole = i;
        }
    }
    m->e[hole].val1 = 0;
    m->count--;
}

#endif
