/*
 * kernel_common.h — what the kernel files share: argument checks that
 * return statuses (never launch with bad arguments) and CUDA error mapping.
 * C++ (nvcc) only; the public face is include/carve_kernels.h.
 */
#ifndef CARVE_KERNEL_COMMON_H
#define CARVE_KERNEL_COMMON_H

#include <cuda_runtime.h>

#include "carve.h"

extern "C" {
/* Internal error recording from lib/engine/error.c (C linkage). */
carve_status carve_fail(const carve_arena *a, carve_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
}

namespace carve_k {

/* CARVE_OK when p is a device-accessible pointer of the current device (or
 * managed memory); CARVE_ERR_INVALID with a message otherwise. */
carve_status check_device_ptr(const void *p, const char *fn, const char *what);

/* Map a CUDA error from a launch or call to a status, clearing the
 * runtime's last error. */
carve_status launch_status(cudaError_t e, const char *fn);

/* CARVE_ERR_NO_DEVICE when no device is usable. */
carve_status check_device_present(const char *fn);

}  // namespace carve_k

#endif
