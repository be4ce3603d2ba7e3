/*
 * test_failures.c — backend failures injected into the host and virtual
 * backends: a failed reserve is CARVE_ERR_OOM or CARVE_ERR_BACKEND with the
 * backend's message, nothing is lost, and the arena keeps working.
 */
#include "backend/faults.h"
#include "engine/types.h"
#include "test_util.h"

/* After `after` more good allocation calls (reserves and maps), the next
 * `times` fail with st. */
static void inject(carve_arena *a, long after, long times, carve_status st) {
    carve_backend_faults_on(&a->be, a->be.faults.calls + (unsigned long)after + 1, (unsigned long)times, 0,
                            CARVE_FAULT_ALLOC, st);
}

static void test_reserve_failures(carve_backend be) {
    carve_arena *a = test_arena(be, 1, 0, 0);
    void *p = (void *)1;
    /* The first try and both retries after reclaiming fail: OOM. */
    inject(a, 0, 3, CARVE_ERR_OOM);
    CHECK_ST(a, carve_alloc(a, 1 << 20, NULL, &p), CARVE_ERR_OOM);
    CHECK(p == NULL);
    CHECK(strstr(carve_last_error(a), "injected") != NULL);
    CHECK_ARENA(a);
    /* One failure: the retry after reclaim succeeds. */
    inject(a, 0, 1, CARVE_ERR_OOM);
    CHECK_OK(a, carve_alloc(a, 1 << 20, NULL, &p));
    CHECK(p != NULL);
    CHECK_OK(a, carve_free(a, p));
    /* A driver error that is not OOM passes through as CARVE_ERR_BACKEND. */
    CHECK_OK(a, carve_empty_cache(a));
    inject(a, 0, 1, CARVE_ERR_BACKEND); /* not retried: only OOM is */
    CHECK_ST(a, carve_alloc(a, 5 << 20, NULL, &p), CARVE_ERR_BACKEND);
    CHECK(p == NULL);
    CHECK(strstr(carve_last_error(a), "injected") != NULL);
    carve_stats s;
    carve_get_stats(a, &s);
    CHECK(s.num_ooms == 1 && s.reserved_bytes == 0 && s.num_live == 0);
    CHECK_ARENA(a);
    CHECK_OK(a, carve_alloc(a, 5 << 20, NULL, &p));
    CHECK_OK(a, carve_free(a, p));
    CHECK_ARENA(a);
    carve_arena_destroy(a);

    /* A failing initial block fails create cleanly. */
    carve_config c;
    carve_config_init(&c);
    c.backend = be;
    c.initial_bytes = (size_t)1 << 62; /* no host can give this; the virtual space can't either */
    c.growth = 0;
    carve_arena *x = (carve_arena *)1;
    carve_status st = carve_arena_create(&c, &x);
    CHECK(st == CARVE_ERR_OOM);
    CHECK(x == NULL);
    CHECK(strstr(carve_last_error(NULL), "initial") != NULL);
}

static void test_random_injection(void) {
    test_rng r;
    test_rng_seed(&r, test_seed(4242));
    carve_arena *a = test_arena(CARVE_BACKEND_HOST, 1, 0, 256 << 20);
    void *live[64] = {0};
    size_t ok = 0, failed = 0;
    for (int step = 0; step < 3000; step++) {
        if (test_rng_below(&r, 10) == 0)
            inject(a, (long)test_rng_below(&r, 3), 1 + (long)test_rng_below(&r, 2),
                   test_rng_below(&r, 2) ? CARVE_ERR_OOM : CARVE_ERR_BACKEND);
        int i = (int)test_rng_below(&r, 64);
        if (live[i]) {
            CHECK_OK(a, carve_free(a, live[i]));
            live[i] = NULL;
        } else {
            carve_status st = carve_alloc(a, test_rng_loguniform(&r, 1, 24 << 20), NULL, &live[i]);
            if (st == CARVE_OK) {
                ok++;
                memset(live[i], 0x5C, 64);
            } else {
                CHECK(st == CARVE_ERR_OOM || st == CARVE_ERR_BACKEND);
                CHECK(live[i] == NULL);
                failed++;
            }
        }
        if (test_rng_below(&r, 50) == 0)
            CHECK_OK(a, carve_empty_cache(a));
        CHECK_ARENA(a);
        CHECK(carve_memory_reserved(a) <= (256 << 20));
    }
    for (int i = 0; i < 64; i++)
        CHECK_OK(a, carve_free(a, live[i]));
    carve_backend_faults_off(&a->be);
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0);
    printf("random injection: %zu allocations, %zu failed\n", ok, failed);
    CHECK(ok > 1000 && failed > 10);
    carve_arena_destroy(a);
}

int main(void) {
    test_reserve_failures(CARVE_BACKEND_HOST);
    test_reserve_failures(CARVE_BACKEND_VIRTUAL);
    test_random_injection();
    return test_finish();
}
