/*
 * ledger_app.c — a cuda_driver arena in virtual-memory mode counts its
 * driver calls into the arena's driver ledger (carve_stats' driver_calls,
 * driver_mappings, driver_bytes), as the cudart backends do, against the
 * mock driver's own count of cuMemCreate. Buffers of 1, 5 and 9 MiB are
 * allocated and freed, and the cache emptied (everything unmapped): the
 * ledger's cuMemCreate calls equal the mock's, every map is one granule of
 * one mapping, cuMemSetAccess covers every mapping, cuMemUnmap every one,
 * each handle is released, address space was reserved, no cuMemAlloc was
 * counted, and the model gives the calls a time. Prints "OK ledger" and
 * exits 0, else says what failed and exits 1; 77 where carve has no CUDA.
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

int main(void) {
    CUcontext ctx;
    cuInit(0);
    cuDevicePrimaryCtxRetain(&ctx, 0);
    cuCtxSetCurrent(ctx);
    if (carve_cuda_driver_lookup(lookup, NULL) != CARVE_OK) {
        printf("SKIP: %s\n", carve_last_error(NULL));
        return 77;
    }
    carve_config cfg;
    carve_config_init(&cfg);
    carve_arena *a = NULL;
    if (carve_config_parse(&cfg, "backend=cuda_driver,vmm=1") != CARVE_OK || carve_arena_create(&cfg, &a) != CARVE_OK) {
        printf("SKIP: no cuda_driver arena in virtual-memory mode: %s\n", carve_last_error(NULL));
        return 77;
    }
    const size_t G = (size_t)2 << 20;
    void *p[3] = {NULL, NULL, NULL};
    const size_t sizes[3] = {(size_t)1 << 20, (size_t)5 << 20, (size_t)9 << 20};
    for (int i = 0; i < 3; i++)
        if (carve_alloc(a, sizes[i], NULL, &p[i]) != CARVE_OK) {
            printf("FAIL: allocation of %zu bytes: %s\n", sizes[i], carve_last_error(a));
            return 1;
        }
    for (int i = 0; i < 3; i++)
        CHECK(carve_free(a, p[i]) == CARVE_OK);
    CHECK(carve_empty_cache(a) == CARVE_OK);
    size_t reserved = 0, mapped = 0, peak = 0;
    unsigned long long faults = 0, creates = 0, pool_allocs = 0;
    mock_cuda_vmm_stats(&reserved, &mapped, &peak, &faults);
    mock_cuda_memory_calls(&creates, &pool_allocs);
    CHECK(mapped == 0);
    CHECK(creates > 0);
    carve_stats s;
    CHECK(carve_get_stats(a, &s) == CARVE_OK);
    const uint64_t *c = s.driver_calls, *m = s.driver_mappings, *b = s.driver_bytes;
    printf("ledger: create %llu (mock %llu), map %llu, access %llu over %llu mappings, unmap %llu, release %llu, "
           "reserve %llu, modeled %llu ns\n",
           (unsigned long long)c[CARVE_DRV_CREATE], creates, (unsigned long long)c[CARVE_DRV_MAP],
           (unsigned long long)c[CARVE_DRV_ACCESS], (unsigned long long)m[CARVE_DRV_ACCESS],
           (unsigned long long)m[CARVE_DRV_UNMAP], (unsigned long long)c[CARVE_DRV_RELEASE],
           (unsigned long long)c[CARVE_DRV_RESERVE], (unsigned long long)s.driver_model_ns);
    CHECK(c[CARVE_DRV_CREATE] == creates);
    CHECK(b[CARVE_DRV_CREATE] == creates * G);
    CHECK(c[CARVE_DRV_MAP] >= c[CARVE_DRV_CREATE] && m[CARVE_DRV_MAP] == c[CARVE_DRV_MAP]);
    CHECK(b[CARVE_DRV_MAP] == c[CARVE_DRV_MAP] * G);
    CHECK(c[CARVE_DRV_ACCESS] > 0 && m[CARVE_DRV_ACCESS] == m[CARVE_DRV_MAP]);
    CHECK(m[CARVE_DRV_UNMAP] == m[CARVE_DRV_MAP]); /* everything mapped was unmapped */
    CHECK(c[CARVE_DRV_RELEASE] >= c[CARVE_DRV_CREATE]);
    CHECK(c[CARVE_DRV_RESERVE] > 0);
    CHECK(c[CARVE_DRV_MALLOC] == 0 && c[CARVE_DRV_FREE] == 0);
    CHECK(s.driver_model_ns > 0);
    carve_arena_destroy(a);
    if (failures)
        return 1;
    printf("OK ledger\n");
    return 0;
}
