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
