/*
 * test_failures.c — backend failures injected into the host and virtual
 * backends: a failed reserve is CARVE_ERR_OOM or CARVE_ERR_BACKEND with the
 * backend's message, nothing is lost, and the arena keeps working. And a
 * backend whose blocks are aligned to 512 bytes only (as cuMemAlloc
 * promises 256): the limit caps the blocks as the backend gave them.
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

/* A backend in front of the virtual one whose blocks start 512 bytes past
 * a granule boundary, as the CUDA driver's may (tests/dropin's mock driver
 * aligns cuMemAlloc to 512 bytes): each block of size bytes is the leaf's
 * block of size + 2 MiB, shifted. */
#define MiB ((size_t)1 << 20)
#define SKEW 512
static const carve_backend_ops *skew_leaf;
static carve_backend_ops skew_ops;
static unsigned long skew_blocks; /* blocks handed out unaligned */

static carve_status skew_reserve(carve_be *be, size_t size, uintptr_t *base) {
    carve_status st = skew_leaf->reserve(be, size + CARVE_SEGMENT_GRANULE, base);
    if (st == CARVE_OK) {
        *base += SKEW;
        skew_blocks++;
    }
    return st;
}

static carve_status skew_release(carve_be *be, uintptr_t base, size_t size) {
    return skew_leaf->release(be, base - SKEW, size + CARVE_SEGMENT_GRANULE);
}

/* An arena of conf whose backend is skewed from now on (the initial block,
 * if any, given back first so that it comes from the skewed backend). */
static carve_arena *skewed_arena(const char *conf) {
    carve_config c;
    carve_config_init(&c);
    c.backend = CARVE_BACKEND_VIRTUAL;
    carve_arena *a = NULL;
    if (carve_config_parse(&c, conf) != CARVE_OK || carve_arena_create(&c, &a) != CARVE_OK) {
        fprintf(stderr, "%s: %s\n", conf, carve_last_error(NULL));
        exit(1);
    }
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0);
    skew_leaf = a->be.ops;
    skew_ops = *skew_leaf;
    skew_ops.reserve = skew_reserve;
    skew_ops.release = skew_release;
    a->be.ops = &skew_ops;
    return a;
}

static void unskew(carve_arena *a) {
    a->be.ops = skew_leaf;
}

/* Allocate size; expect st; the arena within its limit and whole. */
static void *skew_alloc(carve_arena *a, size_t size, carve_status want) {
    void *p = NULL;
    carve_status st = carve_alloc(a, size, NULL, &p);
    CHECK(st == want);
    if (st != want)
        printf("  alloc %zu MiB: %s: %s\n", size >> 20, carve_status_str(st), carve_last_error(a));
    carve_stats s;
    CHECK_OK(a, carve_get_stats(a, &s));
    CHECK(s.reserved_bytes <= s.limit_bytes);
    CHECK_ARENA(a);
    return p;
}

static void test_unaligned_backend(void) {
    /* One block of the limit (growth off, and growth on with an initial
     * block): reserving a granule more passed the limit (66 MiB of 64). Now
     * the block as it came is kept, its aligned 62 MiB used. */
    const char *one_block[] = {"vmm=0,growth=0,initial=64MiB,limit=64MiB", "vmm=0,initial=64MiB,limit=64MiB"};
    for (int i = 0; i < 2; i++) {
        carve_arena *a = skewed_arena(one_block[i]);
        CHECK(skew_alloc(a, 64 * MiB, CARVE_ERR_OOM) == NULL); /* 62 MiB usable */
        CHECK(strstr(carve_last_error(a), "align") != NULL); /* the message says why */
        void *p = skew_alloc(a, 62 * MiB, CARVE_OK);
        CHECK(p != NULL && carve_memory_reserved(a) == 64 * MiB);
        CHECK_OK(a, carve_free(a, p));
        CHECK_OK(a, carve_empty_cache(a));
        CHECK(carve_memory_reserved(a) == 0);
        unskew(a);
        carve_arena_destroy(a);
    }
    /* Growth under a limit: the request of the limit fails on an empty
     * arena only where no aligned part holds it; a granule less fits. */
    carve_arena *a = skewed_arena("vmm=0,limit=64MiB");
    CHECK(skew_alloc(a, 64 * MiB, CARVE_ERR_OOM) == NULL);
    CHECK(strstr(carve_last_error(a), "aligned part (62.00 MiB)") != NULL);
    void *p = skew_alloc(a, 62 * MiB, CARVE_OK);
    CHECK(p != NULL);
    CHECK_OK(a, carve_free(a, p));
    /* 42 MiB (44 reserved) leaves 20 MiB: a 5 MiB request wants a 20 MiB
     * segment, one granule more does not fit, and the 18 MiB aligned part
     * of the 20 holds it. That was an out-of-memory answer. */
    CHECK_OK(a, carve_empty_cache(a));
    void *x = skew_alloc(a, 42 * MiB, CARVE_OK);
    CHECK(carve_memory_reserved(a) == 44 * MiB);
    void *y = skew_alloc(a, 5 * MiB, CARVE_OK);
    CHECK(y != NULL && carve_memory_reserved(a) == 64 * MiB);
    CHECK_OK(a, carve_free(a, x));
    CHECK_OK(a, carve_free(a, y));
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0);
    unskew(a);
    carve_arena_destroy(a);
    /* With room for a granule more, the aligned part holds the request whole. */
    a = skewed_arena("vmm=0,limit=128MiB");
    p = skew_alloc(a, 64 * MiB, CARVE_OK);
    CHECK(carve_memory_reserved(a) == 66 * MiB);
    CHECK_OK(a, carve_free(a, p));
    unskew(a);
    carve_arena_destroy(a);
    CHECK(skew_blocks > 0);
}

int main(void) {
    test_unaligned_backend();
    test_reserve_failures(CARVE_BACKEND_HOST);
    test_reserve_failures(CARVE_BACKEND_VIRTUAL);
    test_random_injection();
    return test_finish();
}
