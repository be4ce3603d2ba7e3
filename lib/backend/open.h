/*
 * open.h — the dispatcher above the backends: the one call the engine makes
 * to get a backend for a configuration.
 */
#ifndef CARVE_BACKEND_OPEN_H
#define CARVE_BACKEND_OPEN_H

#include "backend/backend.h"

/* Open a backend of cfg->backend. For CUDA, cfg->vmm picks the
 * virtual-memory form (1), the cudaMalloc form (0), or (CARVE_VMM_AUTO, with
 * growth on) the virtual-memory form where the device supports it and the
 * cudaMalloc form elsewhere. On failure, carve_backend_msg() says why. */
carve_status carve_backend_open(carve_be *be, const carve_config *cfg) CARVE_INTERNAL;

#endif
