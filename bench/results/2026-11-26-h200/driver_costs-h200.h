/*
 * driver_costs.h — what each kind of driver call costs: the one table the
 * modeled driver time is computed from (ledger.c; carve_stats.driver_model_ns).
 *
 * A cost is split by what it scales with, in nanoseconds: each call, each
 * mapping the call covers, each MiB it covers (a cuMemSetAccess over 16
 * mappings costs 16 mappings, whatever their size: the driver's cost is per
 * mapping). bench/vmm_costs.cu measures every entry on a GPU and prints this
 * file whole (`vmm_costs 200 --header > lib/backend/driver_costs.h`), so the
 * table is regenerated with one command on the device. The comment of each
 * entry says what it was fitted from (medians, us).
 */
#ifndef CARVE_BACKEND_DRIVER_COSTS_H
#define CARVE_BACKEND_DRIVER_COSTS_H

#include "carve.h"

#define CARVE_DRIVER_COSTS_FROM "NVIDIA H200 (driver API 13000), bench/vmm_costs.cu, 2026-11"

typedef struct carve_driver_cost {
    uint32_t per_call_ns;    /* each call */
    uint32_t per_mapping_ns; /* each mapping the call covers */
    uint32_t per_mib_ns;     /* each MiB the call covers */
} carve_driver_cost;

static const carve_driver_cost carve_driver_costs[CARVE_DRV_KINDS] = {
    /*                          call  mapping  MiB      fitted from */
    [CARVE_DRV_CREATE]       = {10791, 0, 6},        /* 2 MiB 10.80, 32 MiB 10.97 */
    [CARVE_DRV_RELEASE]      = {97, 0, 0},           /* 2 MiB 0.10, 32 MiB 0.10 */
    [CARVE_DRV_MAP]          = {1017, 0, 0},         /* 2 MiB 1.02, 32 MiB 1.00 */
    [CARVE_DRV_ACCESS]       = {15377, 23929, 8},    /* 1 x 2 MiB 39.32, 16 x 2 MiB 398.50, 1 x 32 MiB 39.57 */
    [CARVE_DRV_UNMAP]        = {14134, 27632, 376},  /* 1 x 2 MiB 42.52, 16 x 2 MiB 468.29, 1 x 32 MiB 53.81 */
    [CARVE_DRV_RETAIN]       = {233, 0, 0},          /* 0.23 */
    [CARVE_DRV_RESERVE]      = {445, 0, 0},          /* 2 MiB 0.44, 65536 MiB 2.14 */
    [CARVE_DRV_UNRESERVE]    = {478, 0, 0},          /* 2 MiB 0.48, 65536 MiB 2.22 */
    [CARVE_DRV_MALLOC]       = {54775, 0, 0},        /* 2 MiB 54.77, 64 MiB 43.35 */
    [CARVE_DRV_FREE]         = {31603, 0, 762},      /* 2 MiB 33.13, 64 MiB 80.34 */
    [CARVE_DRV_EVENT_RECORD] = {294, 0, 0},          /* 0.29 */
    [CARVE_DRV_EVENT_QUERY]  = {351, 0, 0},          /* 0.35 */
    [CARVE_DRV_EVENT_SYNC]   = {335, 0, 0},          /* 0.34 */
    [CARVE_DRV_DEVICE_SYNC]  = {734, 0, 0},          /* 0.73 */
};

#endif
