/*
 * ledger_app.c — a cuda_driver arena in virtual-memory mode counts its
 * driver calls into the arena's driver ledger (carve_stats' driver_calls,
 * driver_mappings, driver_bytes) exactly as the virtual backend counts the
 * same work, against the mock driver's own count of cuMemCreate. Buffers of
 * 1, 5, 9 and 67 MiB are allocated and freed, the cache emptied (everything
 * unmapped), a 9 MiB buffer allocated and freed again and the cache emptied
 * once more: on one stream the engine maps untouched room as mappings larger
 * than a granule with a shorter last piece (vmm.c's map_pieces), so the
 * commits and unmaps are pieces of several sizes. The same sequence on a
 * virtual arena (vmm=1) must give the same calls, mappings and bytes for
 * every kind but the address space (whose step follows each arena's
 * limit): cuMemCreate, cuMemRelease, cuMemMap, cuMemSetAccess, cuMemUnmap,
 * cuMemRetainAllocationHandle. The ledger's cuMemCreate calls also equal
 * the mock's, nothing stays mapped, no cuMemAlloc was counted, and the model
 * gives the calls a time. Prints "OK ledger" and exits 0, else says what
 * failed and exits 1; 77 where carve has no CUDA.
 */
#include <stdio.h>

#include "carve.h"
#include "mock_api.h"

#include <dlfcn.h>

static int failures;

static void *lookup(const char *name, void *arg) {
    (void)arg;
    return dlsym(RTLD_DEFAULT, name);
}

/* The sequence on an arena made from conf; its statistics in *out. 0, or
 * -1 (said why) where no such arena can be made. */
static int run(const char *conf, carve_stats *out) {
    carve_config cfg;
    carve_config_init(&cfg);
    carve_arena *a = NULL;
    if (carve_config_parse(&cfg, conf) != CARVE_OK || carve_arena_create(&cfg, &a) != CARVE_OK) {
        printf("SKIP: no arena for %s: %s\n", conf, carve_last_error(NULL));
        return -1;
    }
    const size_t MiB = (size_t)1 << 20;
    const size_t sizes[] = {1 * MiB, 5 * MiB, 9 * MiB, 67 * MiB};
    enum { N = sizeof(sizes) / sizeof(sizes[0]) };
    void *p[N] = {NULL};
    for (int i = 0; i < N; i++)
        if (carve_alloc(a, sizes[i], NULL, &p[i]) != CARVE_OK) {
            printf("FAIL: %s: allocation of %zu bytes: %s\n", conf, sizes[i], carve_last_error(a));
            failures++;
        }
    for (int i = 0; i < N; i++)
        CHECK(carve_free(a, p[i]) == CARVE_OK);
    CHECK(carve_empty_cache(a) == CARVE_OK);
    void *q = NULL;
    CHECK(carve_alloc(a, 9 * MiB, NULL, &q) == CARVE_OK);
    CHECK(carve_free(a, q) == CARVE_OK);
    CHECK(carve_empty_cache(a) == CARVE_OK);
    CHECK(carve_get_stats(a, out) == CARVE_OK);
    carve_arena_destroy(a);
    return 0;
}

int main(void) {
    CUcontext ctx;
    cuInit(0);
    cuDevicePrimaryCtxRetain(&ctx, 0);
    cuCtxSetCurrent(ctx);
    if (carve_cuda_driver_lookup(lookup, NULL) != CARVE_OK) {
        printf("SKIP: %s\n", carve_last_error(NULL));
        return 77;
    }
    carve_stats drv, vir;
    if (run("backend=cuda_driver,vmm=1", &drv) != 0 || run("backend=virtual,vmm=1", &vir) != 0)
        return 77;
    size_t reserved = 0, mapped = 0, peak = 0;
    unsigned long long faults = 0, creates = 0, pool_allocs = 0;
    mock_cuda_vmm_stats(&reserved, &mapped, &peak, &faults);
    mock_cuda_memory_calls(&creates, &pool_allocs);
    CHECK(mapped == 0);
    const uint64_t *c = drv.driver_calls, *m = drv.driver_mappings;
    printf("ledger: create %llu (mock %llu), map %llu over %llu mappings, access %llu, unmap %llu, release %llu, "
           "retain %llu, reserve %llu, modeled %llu ns\n",
           (unsigned long long)c[CARVE_DRV_CREATE], creates, (unsigned long long)c[CARVE_DRV_MAP],
           (unsigned long long)m[CARVE_DRV_MAP], (unsigned long long)c[CARVE_DRV_ACCESS],
           (unsigned long long)c[CARVE_DRV_UNMAP], (unsigned long long)c[CARVE_DRV_RELEASE],
           (unsigned long long)c[CARVE_DRV_RETAIN], (unsigned long long)c[CARVE_DRV_RESERVE],
           (unsigned long long)drv.driver_model_ns);
    const int same[] = {CARVE_DRV_CREATE, CARVE_DRV_RELEASE, CARVE_DRV_MAP,
                        CARVE_DRV_ACCESS, CARVE_DRV_UNMAP,   CARVE_DRV_RETAIN};
    for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
        int k = same[i];
        if (drv.driver_calls[k] != vir.driver_calls[k] || drv.driver_mappings[k] != vir.driver_mappings[k] ||
            drv.driver_bytes[k] != vir.driver_bytes[k]) {
            printf("FAIL: %s: cuda_driver counts %llu calls, %llu mappings, %llu bytes; virtual %llu, %llu, %llu\n",
                   carve_driver_op_name(k), (unsigned long long)drv.driver_calls[k],
                   (unsigned long long)drv.driver_mappings[k], (unsigned long long)drv.driver_bytes[k],
                   (unsigned long long)vir.driver_calls[k], (unsigned long long)vir.driver_mappings[k],
                   (unsigned long long)vir.driver_bytes[k]);
            failures++;
        }
    }
    CHECK(c[CARVE_DRV_CREATE] == creates);
    CHECK(drv.driver_mappings[CARVE_DRV_ACCESS] == m[CARVE_DRV_MAP]); /* access covers every mapping */
    CHECK(drv.driver_bytes[CARVE_DRV_MAP] > m[CARVE_DRV_MAP] * ((size_t)2 << 20)); /* mappings larger than a granule */
    CHECK(m[CARVE_DRV_UNMAP] == m[CARVE_DRV_MAP]); /* everything mapped was unmapped */
    CHECK(c[CARVE_DRV_RESERVE] > 0);
    CHECK(c[CARVE_DRV_MALLOC] == 0 && c[CARVE_DRV_FREE] == 0);
    CHECK(drv.driver_model_ns > 0);
    if (failures)
        return 1;
    printf("OK ledger\n");
    return 0;
}
