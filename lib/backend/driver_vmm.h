/*
 * driver_vmm.h — virtual-memory mode of the driver-API backend (driver_vmm.c):
 * address space from cuMemAddressReserve, pieces of cuMemCreate memory (a
 * granule or a larger mapping) mapped into it, through the driver table of
 * driver_api.c. driver.c owns the context and the events, and makes the
 * context current and the thread's capture mode relaxed around these calls.
 */
#ifndef CARVE_BACKEND_DRIVER_VMM_H
#define CARVE_BACKEND_DRIVER_VMM_H

#include "backend/backend.h"
#include "backend/driver_api.h"

typedef struct carve_drv_vmm carve_drv_vmm;

/* Whether api has every virtual-memory function and dev supports them:
 * CARVE_OK, else CARVE_ERR_NO_DEVICE with carve_backend_msg() saying why. */
carve_status carve_drv_vmm_check(const carve_driver_api *api, CUdevice dev) CARVE_INTERNAL;
/* The mode's state for device ordinal, its memory granted on every mapping
 * to the npeers devices in peers (owner first; peers.h), its driver calls
 * counted into ledger (the backend's, which outlives it); NULL: host memory
 * is short, said. */
carve_drv_vmm *carve_drv_vmm_new(const carve_driver_api *api, carve_ledger *ledger, int ordinal, const int *peers,
                                 int npeers) CARVE_INTERNAL;
/* Free v, releasing the handles it keeps. */
void carve_drv_vmm_free(carve_drv_vmm *v) CARVE_INTERNAL;
/* 0 while the arena's context lives (its calls need it current); else
 * abandoned (carve_drv_vmm_abandon): no context to make current. */
int carve_drv_vmm_state(carve_drv_vmm *v) CARVE_INTERNAL;
/* The backend ops' reserve, release, commit and decommit (backend.h), the
 * backend's context current. */
carve_status carve_drv_vmm_reserve(carve_drv_vmm *v, size_t size, uintptr_t *base) CARVE_INTERNAL;
carve_status carve_drv_vmm_release(carve_drv_vmm *v, uintptr_t base, size_t size) CARVE_INTERNAL;
carve_status carve_drv_vmm_commit(carve_drv_vmm *v, uintptr_t addr, size_t size, size_t piece) CARVE_INTERNAL;
carve_status carve_drv_vmm_decommit(carve_drv_vmm *v, uintptr_t addr, size_t size, size_t piece,
                                    size_t *done) CARVE_INTERNAL;
/* The backend ops' recycle: a window in which unmapped granules' handles
 * are kept to be mapped again. */
void carve_drv_vmm_recycle(carve_drv_vmm *v, int on) CARVE_INTERNAL;
/* The context is gone and the driver does not free this memory with it
 * (backend.h, abandon): stage 0, reserve and commit fail from now on
 * (CARVE_ERR_NO_DEVICE) while decommit and release still act; stage 1,
 * every kept handle is released and every range freed, and nothing acts
 * any more. Thread-safe. */
void carve_drv_vmm_abandon(carve_drv_vmm *v, int stage) CARVE_INTERNAL;

#endif
