/* pagemap.c — see pagemap.h. Levels: 0 the root, 1 a middle node, 2 a leaf;
 * an entry of level l covers 1 << shift[l] granules. */
#include "engine/pagemap.h"

#include <string.h>

#define FAN CARVE_PM_FAN
#define TAG CARVE_PM_SPAN

static const unsigned shift[3] = {2 * CARVE_PM_BITS, CARVE_PM_BITS, 0};

void carve_pagemap_init(carve_pagemap *pm) {
    memset(pm, 0, sizeof(*pm));
    for (unsigned i = 0; i < FAN; i++)
        pm->root[i] = TAG;
}

/* The node under entry *slot of level (0: a middle node under a root entry,
 * 1: a leaf under a middle one). A tagged entry is replaced by a node (a
 * spare, or a new one) that gives the same answer for each of its entries,
 * filled before it is published. NULL when host memory ran out. */
static carve_pm_node *node_under(carve_pagemap *pm, uintptr_t *slot, unsigned level) {
    uintptr_t e = *slot;
    if (!(e & TAG))
        return (carve_pm_node *)e;
    carve_pm_node *n = pm->spare[level];
    if (n) {
        pm->spare[level] = n->spare;
    } else {
        if (!(n = malloc(sizeof(*n))))
            return NULL;
        pm->nodes[level]++;
    }
    n->spare = NULL;
    uintptr_t fill = level == 0 ? e : e ^ TAG; /* a middle node's entries keep the tag; a leaf names the span */
    for (unsigned i = 0; i < FAN; i++)
        CARVE_STORE(&n->e[i], fill); /* (a stale reader of a reused spare may read them meanwhile) */
    CARVE_STORE_REL(slot, (uintptr_t)n);
    return n;
}

int carve_pagemap_prepare(carve_pagemap *pm, uintptr_t addr, size_t size) {
    if (size == 0)
        return 0;
    if (addr >= CARVE_PM_MAX_ADDR || size > CARVE_PM_MAX_ADDR - addr)
        return -1;
    uintptr_t lo = addr >> CARVE_PM_SHIFT, hi = ((addr + size - 1) >> CARVE_PM_SHIFT) + 1;
    const uintptr_t ends[2] = {lo, hi - 1};
    for (unsigned k = 0; k < 2; k++) {
        uintptr_t *slot = &pm->root[ends[k] >> shift[0]];
        for (unsigned level = 0; level < 2; level++) {
            uintptr_t s = ends[k] >> shift[level] << shift[level], e = s + ((uintptr_t)1 << shift[level]);
            if (lo <= s && hi >= e)
                break; /* the range covers the entry: a tag will do */
            carve_pm_node *n = node_under(pm, slot, level);
            if (!n)
                return -1;
            slot = &n->e[(ends[k] >> shift[level + 1]) & (FAN - 1)];
        }
    }
    return 0;
}

/* A node replaced by a tag, and the leaves under it, to the spare lists. */
static void drop(carve_pagemap *pm, uintptr_t e, unsigned level) {
    carve_pm_node *n = (carve_pm_node *)e;
    if (level == 0)
        for (unsigned i = 0; i < FAN; i++)
            if (!(n->e[i] & TAG))
                drop(pm, n->e[i], 1);
    n->spare = pm->spare[level];
    pm->spare[level] = n;
}

/* Whether node n (under an entry of level) answers nothing everywhere. */
static int node_empty(const carve_pm_node *n, unsigned level) {
    uintptr_t none = level == 0 ? TAG : 0;
    for (unsigned i = 0; i < FAN; i++)
        if (n->e[i] != none)
            return 0;
    return 1;
}

/* Write span over granules [lo, hi) in the entries of level, slots[0]
 * covering from granule base. A node left answering nothing (span NULL:
 * no live buffer is in its range, so no legitimate reader is in it) is
 * replaced by the empty tag: nodes stay where spans end, not where they
 * once did. */
static void set_level(carve_pagemap *pm, uintptr_t *slots, unsigned level, uintptr_t base, uintptr_t lo, uintptr_t hi,
                      carve_block *span, int live) {
    unsigned sh = shift[level];
    for (uintptr_t i = (lo - base) >> sh, last = (hi - 1 - base) >> sh; i <= last; i++) {
        if (level == 2) {
            CARVE_STORE_REL(&slots[i], (uintptr_t)span);
            continue;
        }
        uintptr_t s = base + (i << sh), e = s + ((uintptr_t)1 << sh), cur = slots[i];
        if (lo <= s && hi >= e && (!live || (cur & TAG))) { /* all of the entry: a tag */
            CARVE_STORE_REL(&slots[i], (uintptr_t)span | TAG);
            if (!(cur & TAG))
                drop(pm, cur, level);
            continue;
        }
        if (cur & TAG) { /* not prepared: only where it already says so */
            CARVE_ASSERT_INTERNAL(cur == ((uintptr_t)span | TAG));
            continue;
        }
        set_level(pm, ((carve_pm_node *)cur)->e, level + 1, s, lo > s ? lo : s, hi < e ? hi : e, span, live);
        if (!span && node_empty((carve_pm_node *)cur, level)) {
            CARVE_STORE_REL(&slots[i], TAG);
            drop(pm, cur, level);
        }
    }
}

void carve_pagemap_set(carve_pagemap *pm, uintptr_t addr, size_t size, carve_block *span, int live) {
    if (size == 0)
        return;
    uintptr_t lo = addr >> CARVE_PM_SHIFT, hi = ((addr + size - 1) >> CARVE_PM_SHIFT) + 1;
    set_level(pm, pm->root, 0, 0, lo, hi, span, live);
}

static void free_list(carve_pm_node *n) {
    while (n) {
        carve_pm_node *next = n->spare;
        free(n);
        n = next;
    }
}

void carve_pagemap_destroy(carve_pagemap *pm) {
    for (unsigned i = 0; i < FAN; i++) {
        if (pm->root[i] & TAG)
            continue;
        carve_pm_node *m = (carve_pm_node *)pm->root[i];
        for (unsigned j = 0; j < FAN; j++)
            if (!(m->e[j] & TAG))
                free((carve_pm_node *)m->e[j]);
        free(m);
        pm->root[i] = TAG;
    }
    free_list(pm->spare[0]);
    free_list(pm->spare[1]);
    pm->spare[0] = pm->spare[1] = NULL;
    pm->nodes[0] = pm->nodes[1] = 0;
}

static int covers_level(const uintptr_t *slots, unsigned level, uintptr_t base, uintptr_t lo, uintptr_t hi,
                        uintptr_t want) {
    unsigned sh = shift[level];
    for (uintptr_t i = (lo - base) >> sh, last = (hi - 1 - base) >> sh; i <= last; i++) {
        uintptr_t s = base + (i << sh), e = s + ((uintptr_t)1 << sh), cur = slots[i];
        if (level == 2 || (cur & TAG)) {
            if (cur != (level == 2 ? want : want | TAG))
                return 0;
        } else if (!covers_level(((const carve_pm_node *)cur)->e, level + 1, s, lo > s ? lo : s, hi < e ? hi : e,
                                 want)) {
            return 0;
        }
    }
    return 1;
}

int carve_pagemap_covers(const carve_pagemap *pm, uintptr_t addr, size_t size, const carve_block *want) {
    if (size == 0)
        return 1;
    if (addr >= CARVE_PM_MAX_ADDR || size > CARVE_PM_MAX_ADDR - addr)
        return want == NULL;
    uintptr_t lo = addr >> CARVE_PM_SHIFT, hi = ((addr + size - 1) >> CARVE_PM_SHIFT) + 1;
    return covers_level(pm->root, 0, 0, lo, hi, (uintptr_t)want);
}

static int walk_level(const uintptr_t *slots, unsigned level, uintptr_t base,
                      int (*fn)(const carve_block *, uintptr_t, size_t, void *), void *arg, size_t reached[2]) {
    unsigned sh = shift[level];
    for (uintptr_t i = 0; i < FAN; i++) {
        uintptr_t s = base + (i << sh), cur = slots[i];
        int r = 0;
        if (level == 2) {
            if (cur)
                r = fn((const carve_block *)cur, s << CARVE_PM_SHIFT, CARVE_SEGMENT_GRANULE, arg);
        } else if (cur & TAG) {
            if (cur != TAG)
                r = fn((const carve_block *)(cur ^ TAG), s << CARVE_PM_SHIFT,
                       ((size_t)1 << sh) * CARVE_SEGMENT_GRANULE, arg);
        } else {
            reached[level]++;
            r = walk_level(((const carve_pm_node *)cur)->e, level + 1, s, fn, arg, reached);
        }
        if (r)
            return r;
    }
    return 0;
}

int carve_pagemap_walk(const carve_pagemap *pm, int (*fn)(const carve_block *, uintptr_t, size_t, void *), void *arg,
                       size_t reached[2], size_t spares[2]) {
    reached[0] = reached[1] = 0;
    for (unsigned level = 0; level < 2; level++) {
        spares[level] = 0;
        for (const carve_pm_node *n = pm->spare[level]; n; n = n->spare)
            spares[level]++;
    }
    return walk_level(pm->root, 0, 0, fn, arg, reached);
}
