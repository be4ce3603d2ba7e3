/*
 * open.h — the dispatcher above the backends: the one call the engine makes
 * to get a backend for a configuration.
 */
#ifndef CARVE_BACKEND_OPEN_H
#define CARVE_BACKEND_OPEN_H

#include "backend/backend.h"

/* Open a backend of cfg->backend (cfg->vmm picks the CUDA virtual-memory
 * backend). On failure, carve_backend_msg() says why. */
carve_status carve_backend_open(carve_be *be, const carve_config *cfg) CARVE_INTERNAL;

#endif
