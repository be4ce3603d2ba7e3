/* index.c — the cold part of the TLSF index (the hot operations are inline
 * in index.h, so the fast paths need no cross-file inlining). */
#include "engine/index.h"

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

carve_block *carve_index_find_low(const carve_index *ix, size_t size) {
    unsigned fl, sl;
    carve_index_class(size, &fl, &sl);
    carve_block *best = NULL;
    unsigned n = 0;
    for (carve_block *b = ix->heads[fl][sl]; b && n < CARVE_INDEX_SCAN; b = b->fnext, n++)
        if (b->size >= size) {
            best = b;
            break;
        }
    if (++sl == CARVE_SL_COUNT) {
        sl = 0;
        fl++;
    }
    for (unsigned seen = 0; seen < CARVE_INDEX_LOW_CLASSES && carve_index_next_class(ix, &fl, &sl); seen++) {
        carve_block *h = ix->heads[fl][sl];
        if (!best || h->addr < best->addr)
            best = h;
        if (++sl == CARVE_SL_COUNT) {
            sl = 0;
            fl++;
        }
    }
    return best;
}

carve_block *carve_index_find_fit(const carve_index *ix, size_t size) {
    carve_block *b = carve_index_find(ix, size);
    if (b)
        return b;
    unsigned fl, sl;
    carve_index_class(size, &fl, &sl);
    for (b = ix->heads[fl][sl]; b; b = b->fnext)
        if (b->size >= size)
            return b;
    return NULL;
}
