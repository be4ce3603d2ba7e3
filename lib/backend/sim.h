/*
 * sim.h — simulated device work for the backends that have none (host and
 * virtual): events that report "not done yet" a configurable number of
 * times, and device synchronization.
 */
#ifndef CARVE_BACKEND_SIM_H
#define CARVE_BACKEND_SIM_H

#include "backend/backend.h"

/* Simulated events: an event completes after be->sim_event_polls queries,
 * or once the device is synchronized. */
carve_status carve_sim_event_record(carve_be *be, carve_stream s, void **ev) CARVE_INTERNAL;
int carve_sim_event_query(carve_be *be, void *ev) CARVE_INTERNAL;
carve_status carve_sim_event_follow(carve_be *be, void *user, void **ev) CARVE_INTERNAL;
carve_status carve_sim_event_sync(carve_be *be, void *ev) CARVE_INTERNAL;
void carve_sim_event_release(carve_be *be, void *ev) CARVE_INTERNAL;
carve_status carve_sim_device_sync(carve_be *be) CARVE_INTERNAL;
/* 1 when a test marked stream as being captured. */
int carve_sim_capturing(carve_be *be, carve_stream stream) CARVE_INTERNAL;
/* 1 when a test marked any stream as being captured. */
int carve_sim_context_capturing(carve_be *be) CARVE_INTERNAL;
/* For a release: 1 (counted in be->sim_broken_captures) when a stream is
 * marked as captured, as freeing memory would break the capture; the caller
 * then refuses the release. */
int carve_sim_release_captured(carve_be *be) CARVE_INTERNAL;

#endif
