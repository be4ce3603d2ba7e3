/*
 * host.c — segments of real host memory, so tests can write a
 * pattern into every buffer and find overlaps by reading it back.
 */
#include "backend/leaves.h"
#include "backend/sim.h"

#include <errno.h>
#include <string.h>

static carve_status host_reserve(carve_be *be, size_t size, uintptr_t *base) {
    (void)be;
    void *p = NULL;
    int rc = posix_memalign(&p, CARVE_SEGMENT_GRANULE, size);
    if (rc != 0 || !p) {
        carve_backend_fail("posix_memalign(%zu) failed: %s", size, strerror(rc));
        return CARVE_ERR_OOM;
    }
    *base = (uintptr_t)p;
    return CARVE_OK;
}

static carve_status host_release(carve_be *be, uintptr_t base, size_t size) {
    (void)size;
    (void)carve_sim_release_captured(be); /* counted: cudaFree would break the capture */
    free((void *)base);
    return CARVE_OK;
}

static void host_destroy(carve_be *be) { (void)be; }

static const carve_backend_ops host_ops = {
    .reserve = host_reserve,
    .release = host_release,
    .event_record = carve_sim_event_record,
    .event_query = carve_sim_event_query,
    .event_sync = carve_sim_event_sync,
    .event_follow = carve_sim_event_follow,
    .capturing = carve_sim_capturing,
    .context_capturing = carve_sim_context_capturing,
    .device_sync = carve_sim_device_sync,
    .event_release = carve_sim_event_release,
    .destroy = host_destroy,
};

carve_status carve_backend_open_host(carve_be *be) {
    be->ops = &host_ops;
    return CARVE_OK;
}
