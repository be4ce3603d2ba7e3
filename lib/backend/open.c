/*
 * open.c — the dispatcher: picks the backend named by the configuration, and
 * puts the fault layer in front of it when the configuration asks for
 * injected failures. It sits above every leaf, so no leaf calls back into it.
 */
#include "backend/open.h"

#include <string.h>

#include "backend/faults.h"
#include "backend/leaves.h"

carve_status carve_backend_open(carve_be *be, const carve_config *cfg) {
    memset(be, 0, sizeof(*be));
    be->kind = cfg->backend;
    be->device = cfg->device;
    be->sim_event_polls = cfg->sim_event_polls;
    carve_status st;
    switch (cfg->backend) {
    case CARVE_BACKEND_CUDA:
        /* Automatic: the virtual-memory form where the device supports it. */
        st = cfg->vmm == 0 || (cfg->vmm != 1 && (!cfg->growth || cfg->initial_bytes || cfg->initial_fraction > 0))
                 ? CARVE_ERR_NO_DEVICE
                                                               : carve_backend_open_cuda_vmm(be, cfg);
        if (st != CARVE_OK && cfg->vmm != 1)
            st = carve_backend_open_cuda(be, cfg);
        break;
    case CARVE_BACKEND_HOST: st = carve_backend_open_host(be); break;
    case CARVE_BACKEND_VIRTUAL: st = carve_backend_open_virtual(be); break;
    case CARVE_BACKEND_CUDA_DRIVER: st = carve_backend_open_driver(be, cfg); break;
    default:
        carve_backend_fail("unknown backend %d", (int)cfg->backend);
        return CARVE_ERR_INVALID;
    }
    if (st == CARVE_OK && (cfg->fail_backend_at || cfg->fail_backend_every))
        carve_backend_faults_on(be, cfg->fail_backend_at, 1, cfg->fail_backend_every, CARVE_FAULT_ALL,
                                cfg->fail_backend_status);
    return st;
}
