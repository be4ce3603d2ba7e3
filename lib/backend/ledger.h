/*
 * ledger.h — the driver ledger: every driver call a backend makes, counted
 * by kind (carve_driver_op) with the mappings and bytes it covers, and the
 * driver time the cost table (driver_costs.h) gives them.
 *
 * The one idea: a backend counts a call where it makes it, so the count is
 * what the driver was asked to do, and the time is computed from the counts
 * when asked, never measured: on the virtual backend, which makes no call,
 * the counts are those the CUDA backend would make for the same work, and
 * the modeled time is what they would have cost on the table's GPU,
 * deterministic on any machine. The model is linear (per call, per mapping,
 * per MiB), so the time of any stretch of work is a difference of totals.
 */
#ifndef CARVE_BACKEND_LEDGER_H
#define CARVE_BACKEND_LEDGER_H

#include <stdint.h>

#include "base/util.h"
#include "carve.h"

typedef struct carve_ledger {
    uint64_t calls[CARVE_DRIVER_SLOTS]; /* atomic, each */
    uint64_t mappings[CARVE_DRIVER_SLOTS];
    uint64_t bytes[CARVE_DRIVER_SLOTS];
} carve_ledger;

/* `calls` calls of kind op covering `mappings` mappings and `bytes` bytes
 * in all. Any thread. */
static inline void carve_ledger_add(carve_ledger *l, carve_driver_op op, uint64_t calls, uint64_t mappings,
                                    uint64_t bytes) {
    __atomic_add_fetch(&l->calls[op], calls, __ATOMIC_RELAXED);
    if (mappings)
        __atomic_add_fetch(&l->mappings[op], mappings, __ATOMIC_RELAXED);
    if (bytes)
        __atomic_add_fetch(&l->bytes[op], bytes, __ATOMIC_RELAXED);
}

/* Copy the counts into the arrays of a carve_stats (each of
 * CARVE_DRIVER_SLOTS). */
void carve_ledger_read(const carve_ledger *l, uint64_t *calls, uint64_t *mappings, uint64_t *bytes) CARVE_INTERNAL;

/* The modeled time of counts, from the table; NULL arrays count as zeros. */
uint64_t carve_ledger_model_ns(const uint64_t *calls, const uint64_t *mappings, const uint64_t *bytes) CARVE_INTERNAL;

/* The driver function of a kind; "unknown" outside the kinds. */
const char *carve_ledger_name(int op) CARVE_INTERNAL;

/* Where the table came from (device, program, date). */
const char *carve_ledger_source(void) CARVE_INTERNAL;

#endif
