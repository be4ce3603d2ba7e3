/*
 * open.c — the dispatcher: picks the backend named by the configuration. It
 * sits above every leaf, so no leaf ever calls back into it.
 */
#include "backend/open.h"

#include <string.h>

#include "backend/leaves.h"

carve_status carve_backend_open(carve_be *be, const carve_config *cfg) {
    memset(be, 0, sizeof(*be));
    be->kind = cfg->backend;
    be->device = cfg->device;
    be->sim_event_polls = cfg->sim_event_polls;
    be->fail_after = -1;
    switch (cfg->backend) {
    case CARVE_BACKEND_CUDA:
        return cfg->vmm ? carve_backend_open_cuda_vmm(be, cfg->device) : carve_backend_open_cuda(be, cfg->device);
    case CARVE_BACKEND_HOST: return carve_backend_open_host(be);
    case CARVE_BACKEND_VIRTUAL: return carve_backend_open_virtual(be);
    }
    carve_backend_fail("unknown backend %d", (int)cfg->backend);
    return CARVE_ERR_INVALID;
}
