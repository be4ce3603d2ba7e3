/*
 * abandon_app.c — carve_arena_abandon on a cuda_driver arena in
 * virtual-memory mode, against the mock driver (which checks every address
 * handed out against what is mapped). The sequence that once served
 * unmapped memory: allocate 1 MiB, abandon, allocate 512 KiB and 3 MiB;
 * both must answer CARVE_ERR_NO_DEVICE, the first buffer's free is still
 * accepted, 1 MiB again (the size just freed, which carve_alloc's hot path
 * would serve) answers CARVE_ERR_NO_DEVICE too, and nothing is left mapped
 * or reserved. Prints "OK abandon" and
 * exits 0, else says what failed and exits 1; 77 where carve has no CUDA.
 */
#include <stdio.h>

#include "carve.h"
#include "mock_api.h"

#include <dlfcn.h>

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
    int failed = 0;
    void *p1 = NULL, *p2 = NULL, *p3 = NULL;
    if (carve_alloc(a, 1 << 20, NULL, &p1) != CARVE_OK) {
        printf("FAIL: first allocation: %s\n", carve_last_error(a));
        return 1;
    }
    carve_arena_abandon(a);
    carve_status s2 = carve_alloc(a, 512 << 10, NULL, &p2);
    carve_status s3 = carve_alloc(a, 3 << 20, NULL, &p3);
    if (s2 != CARVE_ERR_NO_DEVICE || s3 != CARVE_ERR_NO_DEVICE || p2 || p3) {
        printf("FAIL: allocations after abandon answered %s %p and %s %p (want CARVE_ERR_NO_DEVICE)\n",
               carve_status_str(s2), p2, carve_status_str(s3), p3);
        failed = 1;
    }
    carve_status sf = carve_free(a, p1);
    if (sf != CARVE_OK) {
        printf("FAIL: the buffer from before abandon: free answered %s\n", carve_status_str(sf));
        failed = 1;
    }
    void *p4 = NULL; /* the same size again: the freed buffer must not be served from the hot slot */
    carve_status s4 = carve_alloc(a, 1 << 20, NULL, &p4);
    if (s4 != CARVE_ERR_NO_DEVICE || p4) {
        printf("FAIL: 1 MiB again after the free answered %s %p (want CARVE_ERR_NO_DEVICE)\n", carve_status_str(s4), p4);
        failed = 1;
    }
    carve_arena_destroy(a);
    size_t reserved = 0, mapped = 0, peak = 0;
    unsigned long long fails = 0;
    mock_cuda_vmm_stats(&reserved, &mapped, &peak, &fails);
    char why[512] = "";
    unsigned long long bad = mock_cuda_violations(why, sizeof(why));
    if (reserved || mapped || bad) {
        printf("FAIL: after destroy %zu reserved, %zu mapped, %llu violations: %s\n", reserved, mapped, bad, why);
        failed = 1;
    }
    if (!failed)
        printf("OK abandon\n");
    return failed;
}
