/*
 * index.h — the free-block index: a two-level segregated fit (TLSF) table.
 *
 * Free blocks are kept in lists by size class. The first level is the power
 * of two of the size, the second splits each power of two into 32 classes
 * (a class spans 1/32 of its power: at most ~3% between its smallest and
 * largest member); sizes under 8 KiB have linear 256-byte classes. Two
 * bitmaps say which lists are non-empty, so finding a list whose every block
 * fits a request is two bit scans: O(1).
 *
 * Fit policy (carve_index_find): first a bounded first-fit scan of the
 * request's own class, which holds blocks both a little smaller and a little
 * larger than the request (so exact-size reuse, the common case in inference
 * loops, is found); then the smallest non-empty class above it ("good fit":
 * within 3% of best fit, in constant time). That can miss a fitting block
 * further down the request's own class when no class above holds one, so
 * the slow path, which would otherwise grow or fail, asks
 * carve_index_find_fit, which looks at the whole class then: an allocation
 * never fails, nor grows, while a free block that fits exists. The same
 * index serves pools (256-byte granularity) and the arena heap (2 MiB
 * granularity).
 */
#ifndef CARVE_ENGINE_INDEX_H
#define CARVE_ENGINE_INDEX_H

#include "engine/block.h"

#define CARVE_SL_BITS 5
#define CARVE_SL_COUNT (1u << CARVE_SL_BITS)
#define CARVE_LINEAR_SHIFT 8 /* 256-byte classes below CARVE_LINEAR_LIMIT */
#define CARVE_LINEAR_LIMIT ((size_t)1 << (CARVE_SL_BITS + CARVE_LINEAR_SHIFT))
#define CARVE_FL_COUNT (64 - (CARVE_SL_BITS + CARVE_LINEAR_SHIFT) + 1)
#define CARVE_INDEX_SCAN 8 /* blocks looked at in the request's own class */

typedef struct carve_index {
    uint64_t fl_map;
    uint32_t sl_map[CARVE_FL_COUNT];
    carve_block *heads[CARVE_FL_COUNT][CARVE_SL_COUNT];
    size_t count; /* blocks in the index */
    size_t bytes; /* their total size */
    int ordered;  /* lists kept in address order (nearly: see carve_index_insert),
                     and find takes the fitting block of lowest address */
    uint64_t gen; /* bumped by every insert, remove, resize and swap: an ordered
                     find's answer can change only when gen does (block records
                     change address or size only outside the index) */
} carve_index;

#define CARVE_INDEX_ORDER_WALK 16 /* list nodes passed at most to insert in address order */
#define CARVE_INDEX_LOW_CLASSES 2 /* ordered find: non-empty classes above the request's looked at
                                     (more found no better places on the recorded traces, and cost time) */

static inline void carve_index_class(size_t size, unsigned *fl, unsigned *sl) {
    if (size < CARVE_LINEAR_LIMIT) {
        *fl = 0;
        *sl = (unsigned)(size >> CARVE_LINEAR_SHIFT);
    } else {
        unsigned m = carve_msb(size);
        *fl = m - (CARVE_SL_BITS + CARVE_LINEAR_SHIFT) + 1;
        *sl = (unsigned)(size >> (m - CARVE_SL_BITS)) & (CARVE_SL_COUNT - 1);
    }
}

static inline int carve_index_same_class(size_t a, size_t b) {
    unsigned f1, s1, f2, s2;
    carve_index_class(a, &f1, &s1);
    carve_index_class(b, &f2, &s2);
    return f1 == f2 && s1 == s2;
}

/* Size of the largest block, 0 when empty. O(length of the top list). */
size_t carve_index_largest(const carve_index *ix) CARVE_INTERNAL;

/* ---- the operations, inline: they are on every alloc and free ---- */

/* Add free block b: at the head of its list, or in an ordered index after
 * the blocks of lower address (at most CARVE_INDEX_ORDER_WALK of them are
 * passed, so a long list is ordered only at its front: the lowest addresses
 * are what find looks at). */
static inline void carve_index_insert(carve_index *ix, carve_block *b) {
    unsigned fl, sl;
    carve_index_class(b->size, &fl, &sl);
    b->fl = (uint8_t)fl;
    b->sl = (uint8_t)sl;
    carve_block *h = ix->heads[fl][sl];
    if (CARVE_UNLIKELY(ix->ordered) && h && h->addr < b->addr) {
        carve_block *at = h;
        for (unsigned n = 0; at->fnext && at->fnext->addr < b->addr && n < CARVE_INDEX_ORDER_WALK; n++)
            at = at->fnext;
        b->fprev = at;
        b->fnext = at->fnext;
        if (at->fnext)
            at->fnext->fprev = b;
        at->fnext = b;
    } else {
        b->fprev = NULL;
        b->fnext = h;
        if (h)
            h->fprev = b;
        ix->heads[fl][sl] = b;
    }
    ix->fl_map |= (uint64_t)1 << fl;
    ix->sl_map[fl] |= 1u << sl;
    ix->count++;
    ix->bytes += b->size;
    ix->gen++;
}

/* Remove free block b. */
static inline void carve_index_remove(carve_index *ix, carve_block *b) {
    unsigned fl = b->fl, sl = b->sl; /* recorded by insert */
    if (b->fprev)
        b->fprev->fnext = b->fnext;
    else
        ix->heads[fl][sl] = b->fnext;
    if (b->fnext)
        b->fnext->fprev = b->fprev;
    if (!ix->heads[fl][sl]) {
        ix->sl_map[fl] &= ~(1u << sl);
        if (!ix->sl_map[fl])
            ix->fl_map &= ~((uint64_t)1 << fl);
    }
    b->fprev = b->fnext = NULL;
    ix->count--;
    ix->bytes -= b->size;
    ix->gen++;
}

/* Change the size of indexed block b to size: in place when the size class
 * stays the same (the common case when a split or merge moves a few KiB of
 * a large block), else by moving it to its new list. */
static inline void carve_index_resize(carve_index *ix, carve_block *b, size_t size) {
    unsigned fl, sl;
    carve_index_class(size, &fl, &sl);
    if (fl == b->fl && sl == b->sl) {
        ix->bytes += size - b->size;
        b->size = size;
        ix->gen++;
        return;
    }
    carve_index_remove(ix, b);
    b->size = size;
    carve_index_insert(ix, b);
}

/* Whether a block of size would sit in indexed block b's size class. */
static inline int carve_index_in_class(const carve_block *b, size_t size) {
    unsigned fl, sl;
    carve_index_class(size, &fl, &sl);
    return fl == b->fl && sl == b->sl;
}

/* Put block nb in indexed block b's list position; the caller guarantees
 * nb->size is in b->size's class. A split or merge that keeps the class
 * then touches no bitmap and no list head. */
static inline void carve_index_swap(carve_index *ix, carve_block *b, carve_block *nb) {
    unsigned fl = b->fl, sl = b->sl;
    nb->fl = b->fl;
    nb->sl = b->sl;
    nb->fprev = b->fprev;
    nb->fnext = b->fnext;
    if (nb->fprev)
        nb->fprev->fnext = nb;
    else
        ix->heads[fl][sl] = nb;
    if (nb->fnext)
        nb->fnext->fprev = nb;
    ix->bytes += nb->size - b->size;
    b->fprev = b->fnext = NULL;
    ix->gen++;
}

/* Free block b, not yet indexed, absorbs the indexed free block next that
 * follows it in span's block list: next leaves the list, b grows by next's
 * size and takes next's place in the index (its very list position when the
 * class stays). The caller then retires next's record. Both free paths
 * (pool.h, vmm.h) merge forward with this. */
static inline __attribute__((always_inline)) void carve_index_absorb_next(carve_index *ix, carve_block *span,
                                                                          carve_block *b, carve_block *next) {
    b->next = next->next;
    if (next->next)
        next->next->prev = b;
    else
        span->u.r.last = b;
    b->size += next->size;
    if (carve_index_in_class(next, b->size)) {
        carve_index_swap(ix, next, b);
    } else {
        carve_index_remove(ix, next);
        carve_index_insert(ix, b);
    }
}

/* First non-empty class at or above (fl, sl); 0 when there is none. */
static inline int carve_index_next_class(const carve_index *ix, unsigned *fl, unsigned *sl) {
    if (*fl >= CARVE_FL_COUNT)
        return 0;
    uint32_t sm = *sl < CARVE_SL_COUNT ? ix->sl_map[*fl] & (~0u << *sl) : 0;
    if (!sm) {
        uint64_t fm = *fl + 1 < 64 ? ix->fl_map & (~(uint64_t)0 << (*fl + 1)) : 0;
        if (!fm)
            return 0;
        *fl = carve_ctz(fm);
        sm = ix->sl_map[*fl];
    }
    *sl = carve_ctz(sm);
    return 1;
}

/* Ordered index: of the blocks that fit size, the one of lowest address
 * among the first fitting one of the request's own class and the heads (each
 * the lowest of its list) of the next CARVE_INDEX_LOW_CLASSES non-empty
 * classes above. Address order keeps what is in use packed at the low end,
 * so fewer granules are touched at once. */
carve_block *carve_index_find_low(const carve_index *ix, size_t size) CARVE_INTERNAL;

/* carve_index_find, and when it finds nothing, every block of the request's
 * own class (no class above holds one then): NULL only when no block fits.
 * For the slow path, where the alternative is to grow or to fail. */
carve_block *carve_index_find_fit(const carve_index *ix, size_t size) CARVE_INTERNAL __attribute__((cold));

/* A free block of at least size bytes, or NULL when none turned up in the
 * bounded search (one may still sit past the first CARVE_INDEX_SCAN blocks of
 * the request's own class: carve_index_find_fit). The block stays in the
 * index. */
static inline carve_block *carve_index_find(const carve_index *ix, size_t size) {
    if (CARVE_UNLIKELY(ix->ordered))
        return carve_index_find_low(ix, size);
    unsigned fl, sl;
    carve_index_class(size, &fl, &sl);
    /* The request's own class: blocks in it may be smaller than size. */
    carve_block *b = ix->heads[fl][sl];
    for (unsigned n = 0; b && n < CARVE_INDEX_SCAN; n++, b = b->fnext)
        if (b->size >= size)
            return b;
    /* Every block of the next non-empty class above fits. */
    if (++sl == CARVE_SL_COUNT) {
        sl = 0;
        fl++;
    }
    if (!carve_index_next_class(ix, &fl, &sl))
        return NULL;
    return ix->heads[fl][sl];
}

#endif
