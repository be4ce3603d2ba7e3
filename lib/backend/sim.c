/*
 * sim.c — simulated events for the host and virtual backends.
 *
 * These backends have no device work, so "work queued before the event" is
 * always done; to let tests exercise stream-ordered reuse, an event instead
 * answers "not yet" to its first sim_event_polls queries. A sync completes it.
 * Each record, query and wait goes into the driver ledger as the CUDA
 * backends' call would (cudaEventRecord, cudaEventQuery,
 * cudaEventSynchronize, cudaDeviceSynchronize). Captures are streams a test
 * marks (carve_sim_set_capturing), in the one context the arena has: a
 * device synchronization or a release of memory meanwhile is refused and
 * counted as a broken capture, as the driver breaks a real one.
 */
#include "backend/sim.h"

typedef struct sim_event {
    unsigned polls_left;
    uint64_t epoch; /* device syncs before the record: a later sync completes it */
} sim_event;

carve_status carve_sim_event_record(carve_be *be, carve_stream s, void **ev) {
    carve_ledger_add(&be->ledger, CARVE_DRV_EVENT_RECORD, 1, 0, 0);
    for (unsigned i = 0; i < be->sim_ndead; i++)
        if (be->sim_dead[i] == s)
            __atomic_add_fetch(&be->sim_dead_records, 1, __ATOMIC_RELAXED);
    sim_event *e = malloc(sizeof(*e));
    if (!e) {
        *ev = NULL;
        carve_backend_fail_host("host memory exhausted creating an event");
        return CARVE_ERR_OOM;
    }
    e->polls_left = be->sim_event_polls;
    e->epoch = __atomic_load_n(&be->sim_epoch, __ATOMIC_ACQUIRE);
    *ev = e;
    return CARVE_OK;
}

/* The program's event stands for work that is simulated too: the follower
 * is a simulated event like any other. */
carve_status carve_sim_event_follow(carve_be *be, void *user, void **ev) {
    (void)user;
    return carve_sim_event_record(be, NULL, ev);
}

int carve_sim_event_query(carve_be *be, void *ev) {
    carve_ledger_add(&be->ledger, CARVE_DRV_EVENT_QUERY, 1, 0, 0);
    sim_event *e = ev;
    if (e->polls_left == 0 || e->epoch < __atomic_load_n(&be->sim_epoch, __ATOMIC_ACQUIRE))
        return 1;
    e->polls_left--;
    return 0;
}

carve_status carve_sim_event_sync(carve_be *be, void *ev) {
    carve_ledger_add(&be->ledger, CARVE_DRV_EVENT_SYNC, 1, 0, 0);
    ((sim_event *)ev)->polls_left = 0;
    return CARVE_OK;
}

/* A device synchronization while a stream is marked as captured: what
 * cudaDeviceSynchronize answers then (and the capture is lost). */
carve_status carve_sim_device_sync(carve_be *be) {
    carve_ledger_add(&be->ledger, CARVE_DRV_DEVICE_SYNC, 1, 0, 0);
    if (carve_sim_context_capturing(be)) {
        __atomic_add_fetch(&be->sim_broken_captures, 1, __ATOMIC_RELAXED);
        carve_backend_fail("the device was synchronized while a stream is being captured "
                           "(cudaErrorStreamCaptureUnsupported): the capture is broken");
        return CARVE_ERR_BACKEND;
    }
    __atomic_add_fetch(&be->sim_epoch, 1, __ATOMIC_RELEASE);
    return CARVE_OK;
}

void carve_sim_event_release(carve_be *be, void *ev) {
    (void)be;
    free(ev);
}

int carve_sim_capturing(carve_be *be, carve_stream stream) {
    unsigned n = __atomic_load_n(&be->sim_ncapturing, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++)
        if (__atomic_load_n(&be->sim_capturing[i], __ATOMIC_RELAXED) == stream)
            return 1;
    return 0;
}

int carve_sim_context_capturing(carve_be *be) { return __atomic_load_n(&be->sim_ncapturing, __ATOMIC_ACQUIRE) > 0; }

int carve_sim_release_captured(carve_be *be) {
    if (!carve_sim_context_capturing(be))
        return 0;
    __atomic_add_fetch(&be->sim_broken_captures, 1, __ATOMIC_RELAXED);
    return 1;
}
