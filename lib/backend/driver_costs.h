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

#define CARVE_DRIVER_COSTS_FROM "NVIDIA H100 80GB HBM3 (driver API 13000), bench/vmm_costs.cu, 2026-11"

typedef struct carve_driver_cost {
    uint32_t per_call_ns;    /* each call */
    uint32_t per_mapping_ns; /* each mapping the call covers */
    uint32_t per_mib_ns;     /* each MiB the call covers */
} carve_driver_cost;

/* This first table was fitted by hand from bench/results/2026-11-24-h100-c/
 * vmm_costs.log (H100, bench/vmm_costs.cu, 2026-11) and the cudaMalloc
 * times of issue 23, before the program measured every kind: "estimate"
 * marks what neither measured; "unmapped" and "handles held" say the
 * measurement differs from how carve calls it (a release after the map,
 * an unmap that frees). The next `vmm_costs 200 --header` replaces them. */
static const carve_driver_cost carve_driver_costs[CARVE_DRV_KINDS] = {
    /*                          call  mapping  MiB      fitted from */
    [CARVE_DRV_CREATE]       = {13953, 0, 49},       /* 2 MiB 14.05, 32 MiB 15.51 */
    [CARVE_DRV_RELEASE]      = {13401, 0, 919},      /* 2 MiB 15.24 (a kernel running), 32 MiB 42.82: unmapped */
    [CARVE_DRV_MAP]          = {1060, 0, 0},         /* 2 MiB 1.06, 32 MiB 1.03 */
    [CARVE_DRV_ACCESS]       = {7571, 29963, 298},   /* 1 x 2 MiB 38.13, 16 x 2 MiB 496.51, 1 x 32 MiB 47.07 */
    [CARVE_DRV_UNMAP]        = {3519, 18997, 157},   /* 1 x 2 MiB 22.83, 16 x 2 MiB 312.50, 1 x 32 MiB 27.54: handles held */
    [CARVE_DRV_RETAIN]       = {1000, 0, 0},         /* estimate */
    [CARVE_DRV_RESERVE]      = {5000, 0, 0},         /* estimate */
    [CARVE_DRV_UNRESERVE]    = {5000, 0, 0},         /* estimate */
    [CARVE_DRV_MALLOC]       = {59325, 0, 137},      /* issue 23: 2 MiB 55-64, 1 GiB 150-250 */
    [CARVE_DRV_FREE]         = {38000, 0, 1000},     /* estimate: an unmap and a release */
    [CARVE_DRV_EVENT_RECORD] = {500, 0, 0},          /* estimate: record + query 0.73 */
    [CARVE_DRV_EVENT_QUERY]  = {230, 0, 0},          /* estimate: record + query 0.73 */
    [CARVE_DRV_EVENT_SYNC]   = {270, 0, 0},          /* estimate: record + synchronize 0.77 */
    [CARVE_DRV_DEVICE_SYNC]  = {710, 0, 0},          /* 0.71 */
};

#endif
