/* index.c — TLSF lists and bitmaps (see index.h for the policy). */
#include "index.h"

void carve_index_insert(carve_index *ix, carve_block *b) {
    unsigned fl, sl;
    carve_index_class(b->size, &fl, &sl);
    carve_block *h = ix->heads[fl][sl];
    b->fprev = NULL;
    b->fnext = h;
    if (h)
        h->fprev = b;
    ix->heads[fl][sl] = b;
    ix->fl_map |= (uint64_t)1 << fl;
    ix->sl_map[fl] |= 1u << sl;
    ix->count++;
    ix->bytes += b->size;
}

void carve_index_remove(carve_index *ix, carve_block *b) {
    unsigned fl, sl;
    carve_index_class(b->size, &fl, &sl);
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
}

void carve_index_resize(carve_index *ix, carve_block *b, size_t size) {
    if (carve_index_same_class(b->size, size)) {
        ix->bytes += size - b->size;
        b->size = size;
        return;
    }
    carve_index_remove(ix, b);
    b->size = size;
    carve_index_insert(ix, b);
}

void carve_index_swap(carve_index *ix, carve_block *b, carve_block *nb) {
    unsigned fl, sl;
    carve_index_class(b->size, &fl, &sl);
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
}

int carve_index_next_class(const carve_index *ix, unsigned *fl, unsigned *sl) {
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

carve_block *carve_index_find(const carve_index *ix, size_t size) {
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

size_t carve_index_largest(const carve_index *ix) {
    if (!ix->fl_map)
        return 0;
    unsigned fl = carve_msb(ix->fl_map);
    unsigned sl = carve_msb(ix->sl_map[fl]);
    size_t best = 0;
    for (const carve_block *b = ix->heads[fl][sl]; b; b = b->fnext)
        if (b->size > best)
            best = b->size;
    return best;
}
