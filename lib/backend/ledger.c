/*
 * ledger.c — the driver ledger's reading side: the counts copied out, the
 * modeled time computed from them with the one cost table
 * (driver_costs.h, included here only), and the kinds' names.
 */
#include "backend/ledger.h"

#include "backend/driver_costs.h"

void carve_ledger_read(const carve_ledger *l, uint64_t *calls, uint64_t *mappings, uint64_t *bytes) {
    for (int k = 0; k < CARVE_DRIVER_SLOTS; k++) {
        calls[k] = __atomic_load_n(&l->calls[k], __ATOMIC_RELAXED);
        mappings[k] = __atomic_load_n(&l->mappings[k], __ATOMIC_RELAXED);
        bytes[k] = __atomic_load_n(&l->bytes[k], __ATOMIC_RELAXED);
    }
}

uint64_t carve_ledger_model_ns(const uint64_t *calls, const uint64_t *mappings, const uint64_t *bytes) {
    uint64_t ns = 0;
    for (int k = 0; k < CARVE_DRV_KINDS; k++) {
        const carve_driver_cost *c = &carve_driver_costs[k];
        if (calls)
            ns += calls[k] * c->per_call_ns;
        if (mappings)
            ns += mappings[k] * c->per_mapping_ns;
        if (bytes) /* whole MiB, then the rest: no overflow for any byte count */
            ns += (bytes[k] >> 20) * c->per_mib_ns + (((bytes[k] & ((1u << 20) - 1)) * c->per_mib_ns) >> 20);
    }
    return ns;
}

const char *carve_ledger_name(int op) {
    static const char *const names[CARVE_DRV_KINDS] = {
        [CARVE_DRV_CREATE] = "cuMemCreate",
        [CARVE_DRV_RELEASE] = "cuMemRelease",
        [CARVE_DRV_MAP] = "cuMemMap",
        [CARVE_DRV_ACCESS] = "cuMemSetAccess",
        [CARVE_DRV_UNMAP] = "cuMemUnmap",
        [CARVE_DRV_RETAIN] = "cuMemRetainAllocationHandle",
        [CARVE_DRV_RESERVE] = "cuMemAddressReserve",
        [CARVE_DRV_UNRESERVE] = "cuMemAddressFree",
        [CARVE_DRV_MALLOC] = "cudaMalloc",
        [CARVE_DRV_FREE] = "cudaFree",
        [CARVE_DRV_EVENT_RECORD] = "cudaEventRecord",
        [CARVE_DRV_EVENT_QUERY] = "cudaEventQuery",
        [CARVE_DRV_EVENT_SYNC] = "cudaEventSynchronize",
        [CARVE_DRV_DEVICE_SYNC] = "cudaDeviceSynchronize",
    };
    return op >= 0 && op < CARVE_DRV_KINDS ? names[op] : "unknown";
}

const char *carve_ledger_source(void) { return CARVE_DRIVER_COSTS_FROM; }
