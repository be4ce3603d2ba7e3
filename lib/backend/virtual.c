/*
 * virtual.c — addresses with nothing behind them.
 *
 * Segments are carved with a bump pointer from one address space shared by
 * every virtual arena of the process, starting at 2^44, so every address
 * ever handed out is unique (across arenas too) and aligned, and an 80 GB
 * trace simulates on a laptop. Nothing may dereference them; the engine
 * never does. The space is never reused, which makes use-after-free of a
 * released segment impossible to mistake for a live one.
 */
#include "backend/leaves.h"
#include "backend/sim.h"

#include <string.h>

#define VIRTUAL_BASE ((uintptr_t)1 << 44)
#define VIRTUAL_END ((uintptr_t)1 << 56)

static uintptr_t next_address = VIRTUAL_BASE;

static carve_status virtual_reserve(carve_be *be, size_t size, uintptr_t *base) {
    (void)be;
    /* A one-granule gap between segments keeps them from ever looking
     * adjacent. Reserves may run concurrently: take the range atomically. */
    if (size > VIRTUAL_END - VIRTUAL_BASE) {
        carve_backend_fail("virtual address space exhausted");
        return CARVE_ERR_OOM;
    }
    uintptr_t step = size + CARVE_SEGMENT_GRANULE;
    uintptr_t at = __atomic_fetch_add(&next_address, step, __ATOMIC_RELAXED);
    if (at > VIRTUAL_END - step) {
        carve_backend_fail("virtual address space exhausted");
        return CARVE_ERR_OOM;
    }
    *base = at;
    return CARVE_OK;
}

static carve_status virtual_release(carve_be *be, uintptr_t base, size_t size) {
    (void)be;
    (void)base;
    (void)size;
    return CARVE_OK;
}

/* Mapping is bookkeeping only. */
static carve_status virtual_commit(carve_be *be, uintptr_t addr, size_t size) {
    (void)be;
    (void)addr;
    (void)size;
    return CARVE_OK;
}

static carve_status virtual_decommit(carve_be *be, uintptr_t addr, size_t size) {
    (void)be;
    (void)addr;
    (void)size;
    return CARVE_OK;
}

static void virtual_destroy(carve_be *be) { (void)be; }

static const carve_backend_ops virtual_ops = {
    .reserve = virtual_reserve,
    .release = virtual_release,
    .commit = virtual_commit,
    .decommit = virtual_decommit,
    .event_record = carve_sim_event_record,
    .event_query = carve_sim_event_query,
    .event_sync = carve_sim_event_sync,
    .device_sync = carve_sim_device_sync,
    .event_release = carve_sim_event_release,
    .destroy = virtual_destroy,
};

carve_status carve_backend_open_virtual(carve_be *be) {
    be->ops = &virtual_ops;
    return CARVE_OK;
}
