/*
 * leaves.h — the entry points of the backends themselves: one open function
 * per backend (host.c, virtual.c, cuda.c, cuda_vmm.c, driver.c; nocuda.c
 * stands in for the CUDA ones in a build without CUDA), and the device queries the CUDA
 * build answers. Only the dispatcher (open.c) and the device room call them.
 */
#ifndef CARVE_BACKEND_LEAVES_H
#define CARVE_BACKEND_LEAVES_H

#include "backend/backend.h"

/* Each fills be->ops (and be->ctx, be->total_bytes) on success; on failure
 * carve_backend_msg() says why and be holds nothing to destroy. */
carve_status carve_backend_open_cuda(carve_be *be, const carve_config *cfg) CARVE_INTERNAL;
carve_status carve_backend_open_cuda_vmm(carve_be *be, const carve_config *cfg) CARVE_INTERNAL;
carve_status carve_backend_open_host(carve_be *be) CARVE_INTERNAL;
carve_status carve_backend_open_virtual(carve_be *be) CARVE_INTERNAL;
/* The driver-API backend (driver.c): binds to the current context if it is
 * on cfg->device, else retains the device's primary context. Segments from
 * cuMemAlloc, or virtual-memory mode (driver_vmm.c) with cfg->vmm 1, or
 * CARVE_VMM_AUTO with growth on and nothing to reserve at creation, where
 * the driver and device support it (vmm 1 fails elsewhere, AUTO takes
 * segments). */
carve_status carve_backend_open_driver(carve_be *be, const carve_config *cfg) CARVE_INTERNAL;

/* The driver backend's entry points from lookup(name, arg) (driver_api.c, or
 * nocuda.c without CUDA): 0, or -1 with carve_backend_msg() saying why. */
int carve_driver_api_lookup(void *(*lookup)(const char *name, void *arg), void *arg) CARVE_INTERNAL;

/* Map a buffer another process exported (carve_ipc_import) for device:
 * CARVE_IPC_FDS through cuMemImportFromShareableHandle (cuda_vmm.c), each
 * descriptor's allocation whole (sizes[i] bytes, desc->num_fds of them),
 * CARVE_IPC_CUDA through cudaIpcOpenMemHandle, each segment opened once per
 * process and device (cuda.c). *base and *len are what the close call
 * takes back. desc is checked by the caller. A close call returns
 * CARVE_ERR_NO_DEVICE only when it did nothing (the device could not be
 * made current), so the mapping stays and may be closed again; after any
 * other status the mapping is gone. */
carve_status carve_backend_import_fds(const carve_ipc_desc *desc, const int *fds, const size_t *sizes, int device,
                                      uintptr_t *base, size_t *len) CARVE_INTERNAL;
carve_status carve_backend_close_fds(int device, uintptr_t base, const size_t *sizes, size_t n) CARVE_INTERNAL;
carve_status carve_backend_import_cuda(const carve_ipc_desc *desc, int device, uintptr_t *base) CARVE_INTERNAL;
carve_status carve_backend_close_cuda(int device, uintptr_t base) CARVE_INTERNAL;

/* cudaMemGetInfo for device with the device guard; CARVE_ERR_NO_DEVICE when
 * there is no driver or no such device. (carve_device_count, the other
 * device query, is public.) */
carve_status carve_cuda_mem_info(int device, size_t *free_bytes, size_t *total_bytes) CARVE_INTERNAL;

#endif
