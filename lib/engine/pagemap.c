/* pagemap.c — see pagemap.h. */
#include "engine/pagemap.h"

int carve_pagemap_prepare(carve_pagemap *pm, uintptr_t addr, size_t size) {
    if (size == 0)
        return 0;
    if (addr >= CARVE_PM_MAX_ADDR || size > CARVE_PM_MAX_ADDR - addr)
        return -1;
    uintptr_t first = addr >> CARVE_PM_SHIFT, last = (addr + size - 1) >> CARVE_PM_SHIFT;
    for (uintptr_t p = first; p <= last; p = (p | (CARVE_PM_FAN - 1)) + 1) {
        carve_pm_mid **mslot = &pm->root[p >> (2 * CARVE_PM_BITS)];
        if (!*mslot) {
            carve_pm_mid *m = calloc(1, sizeof(*m));
            if (!m)
                return -1;
            CARVE_STORE_REL(mslot, m);
        }
        carve_pm_leaf **lslot = &(*mslot)->leaf[(p >> CARVE_PM_BITS) & (CARVE_PM_FAN - 1)];
        if (!*lslot) {
            carve_pm_leaf *l = calloc(1, sizeof(*l));
            if (!l)
                return -1;
            CARVE_STORE_REL(lslot, l);
        }
    }
    return 0;
}

void carve_pagemap_set(carve_pagemap *pm, uintptr_t addr, size_t size, carve_block *span) {
    if (size == 0)
        return;
    uintptr_t first = addr >> CARVE_PM_SHIFT, last = (addr + size - 1) >> CARVE_PM_SHIFT;
    for (uintptr_t p = first; p <= last; p++) {
        carve_pm_leaf *l =
            pm->root[p >> (2 * CARVE_PM_BITS)]->leaf[(p >> CARVE_PM_BITS) & (CARVE_PM_FAN - 1)];
        CARVE_STORE_REL(&l->span[p & (CARVE_PM_FAN - 1)], span);
    }
}

void carve_pagemap_destroy(carve_pagemap *pm) {
    for (unsigned i = 0; i < CARVE_PM_FAN; i++) {
        carve_pm_mid *m = pm->root[i];
        if (!m)
            continue;
        for (unsigned j = 0; j < CARVE_PM_FAN; j++)
            free(m->leaf[j]);
        free(m);
        pm->root[i] = NULL;
    }
}
