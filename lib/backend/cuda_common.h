/*
 * cuda_common.h — what the two CUDA backends share: the device guard, error
 * mapping and events (cuda_common.c), used by the cudaMalloc backend
 * (cuda.c) and the virtual-memory backend (cuda_vmm.c).
 */
#ifndef CARVE_BACKEND_CUDA_COMMON_H
#define CARVE_BACKEND_CUDA_COMMON_H

#include <cuda_runtime_api.h>

#include "backend/backend.h"
#include "base/lock.h"

typedef struct carve_cuda_ctx {
    int device;
    carve_mutex lock; /* guards the event free list */
    cudaEvent_t *spare;
    size_t nspare, cap;
    cudaStream_t follow; /* created on first use: waits for programs' events (event_follow) */
} carve_cuda_ctx;

/* Map a runtime error to a status, with the CUDA error's name in the
 * backend message; clears the runtime's last error. */
carve_status carve_cuda_error(cudaError_t e, const char *what) CARVE_INTERNAL;
/* Make dev current; *prev gets the caller's device for carve_cuda_leave. */
carve_status carve_cuda_enter(int dev, int *prev) CARVE_INTERNAL;
void carve_cuda_leave(int dev, int prev) CARVE_INTERNAL;
/* Events: be->ctx must start with a carve_cuda_ctx. */
carve_status carve_cuda_event_record(carve_be *be, carve_stream s, void **ev) CARVE_INTERNAL;
carve_status carve_cuda_event_follow(carve_be *be, void *user, void **ev) CARVE_INTERNAL;
int carve_cuda_capturing(carve_be *be, carve_stream s) CARVE_INTERNAL;
int carve_cuda_context_capturing(carve_be *be) CARVE_INTERNAL;
/* The calling thread's capture mode made relaxed around a potentially
 * unsafe call (backend.h, context_capturing): relax returns the mode to give
 * unrelax, -1 when the driver has no cuThreadExchangeStreamCaptureMode. */
int carve_cuda_relax(void) CARVE_INTERNAL;
void carve_cuda_unrelax(int old) CARVE_INTERNAL;
int carve_cuda_event_query(carve_be *be, void *ev) CARVE_INTERNAL;
carve_status carve_cuda_event_sync(carve_be *be, void *ev) CARVE_INTERNAL;
void carve_cuda_event_release(carve_be *be, void *ev) CARVE_INTERNAL;
carve_status carve_cuda_device_sync(carve_be *be) CARVE_INTERNAL;
/* Destroy the spare events and the lock (not c itself). */
void carve_cuda_ctx_destroy(carve_cuda_ctx *c) CARVE_INTERNAL;
/* The devices cfg->peers grants device's memory to (peers.h: owner first),
 * asking cudaDeviceCanAccessPeer. CARVE_OK, CARVE_ERR_INVALID for a listed
 * device that does not exist or cannot access device, or the error of
 * cudaGetDeviceCount. */
carve_status carve_cuda_peer_list(const carve_config *cfg, int device, int *out, int *n) CARVE_INTERNAL;
/* A driver function by name (its CUDA 12 ABI version), through the
 * runtime's entry-point query, so that carve links cudart only; NULL (with
 * the message written) when the driver lacks it. */
void *carve_cuda_driver_fn(const char *name) CARVE_INTERNAL;

#endif
