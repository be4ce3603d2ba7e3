/*
 * commitfault_app.c — a commit that fails half way on a cuda_driver arena
 * in virtual-memory mode, against the mock driver. Run with
 * MOCK_VMM_FAIL=cuMemSetAccess,cuMemUnmap MOCK_VMM_FAIL_AT=1,2,3: the first
 * commit's cuMemSetAccess fails, and so do both tries of its rollback's
 * first cuMemUnmap, leaving a granule mapped that the engine holds
 * unmapped. The next allocation must map there all the same (served, and
 * inside mapped memory, as the mock's oracle checks), and after destroy
 * nothing may be left mapped or reserved. Once, the granule stayed mapped:
 * every later commit there failed (cuMemMap onto mapped memory) and
 * cuMemAddressFree refused the range. Prints "OK commitfault" and exits 0,
 * else says what failed and exits 1; 77 where carve has no CUDA or the
 * faults are not set.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "carve.h"
#include "mock_api.h"

#include <dlfcn.h>

static void *lookup(const char *name, void *arg) {
    (void)arg;
    return dlsym(RTLD_DEFAULT, name);
}

int main(void) {
    const char *only = getenv("MOCK_VMM_FAIL"), *at = getenv("MOCK_VMM_FAIL_AT");
    if (!only || strcmp(only, "cuMemSetAccess,cuMemUnmap") || !at || strcmp(at, "1,2,3")) {
        printf("SKIP: run with MOCK_VMM_FAIL=cuMemSetAccess,cuMemUnmap MOCK_VMM_FAIL_AT=1,2,3\n");
        return 77;
    }
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
    int failed = 0;
    void *p = NULL, *q = NULL;
    carve_status s1 = carve_alloc(a, 4 << 20, NULL, &p); /* the commit that fails */
    size_t reserved = 0, mapped = 0, peak = 0;
    unsigned long long faults = 0;
    mock_cuda_vmm_stats(&reserved, &mapped, &peak, &faults);
    if (faults != 3) {
        printf("FAIL: %llu faults injected by the first allocation (want 3: access, unmap twice)\n", faults);
        failed = 1;
    }
    carve_status s2 = carve_alloc(a, 4 << 20, NULL, &q);
    char why[512] = "";
    if (s2 != CARVE_OK) {
        printf("FAIL: the allocation after the failed commit answered %s: %s\n", carve_status_str(s2),
               carve_last_error(a));
        failed = 1;
    } else if (mock_cuda_own((CUdeviceptr)q, 4 << 20, NULL, 0) != 0) {
        mock_cuda_violations(why, sizeof(why));
        printf("FAIL: the allocation after the failed commit is not all mapped: %s\n", why);
        failed = 1;
    }
    if (q)
        mock_cuda_disown((CUdeviceptr)q);
    carve_free(a, p);
    carve_free(a, q);
    carve_arena_destroy(a);
    mock_cuda_vmm_stats(&reserved, &mapped, &peak, &faults);
    unsigned long long bad = mock_cuda_violations(why, sizeof(why));
    if (reserved || mapped || bad) {
        printf("FAIL: after destroy %zu reserved, %zu mapped, %llu violations: %s\n", reserved, mapped, bad, why);
        failed = 1;
    }
    if (!failed)
        printf("OK commitfault: first allocation %s, second %s\n", carve_status_str(s1), carve_status_str(s2));
    return failed;
}
