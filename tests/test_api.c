/*
 * test_api.c — the API contract: every function's statuses for bad input,
 * output parameters on failure, alignment, size 0, free(NULL), bad pointers,
 * limits and growth modes, empty_cache and destroy returning memory.
 */
#include "test_util.h"

static void test_create_errors(void) {
    carve_config c;
    carve_arena *a = (carve_arena *)1;
    CHECK_ST(NULL, carve_arena_create(NULL, &a), CARVE_ERR_INVALID);
    CHECK(a == NULL);
    carve_config_init(&c);
    CHECK_ST(NULL, carve_arena_create(&c, NULL), CARVE_ERR_INVALID);

    c.backend = CARVE_BACKEND_VIRTUAL;
    c.growth = 0;
    c.initial_bytes = 0;
    a = (carve_arena *)1;
    CHECK_ST(NULL, carve_arena_create(&c, &a), CARVE_ERR_INVALID); /* growth off, initial 0 */
    CHECK(a == NULL);
    CHECK(strstr(carve_last_error(NULL), "growth") != NULL);

    carve_config_init(&c);
    c.backend = CARVE_BACKEND_VIRTUAL;
    c.limit_bytes = 1 << 20; /* below one granule */
    CHECK_ST(NULL, carve_arena_create(&c, &a), CARVE_ERR_INVALID);
    c.limit_bytes = 64 << 20;
    c.initial_bytes = 128 << 20; /* above the limit */
    CHECK_ST(NULL, carve_arena_create(&c, &a), CARVE_ERR_INVALID);

    carve_config_init(&c);
    c.backend = (carve_backend)42;
    CHECK_ST(NULL, carve_arena_create(&c, &a), CARVE_ERR_INVALID);
    carve_config_init(&c);
    c.backend = CARVE_BACKEND_HOST;
    c.limit_fraction = 0.5; /* fractions need a device */
    CHECK_ST(NULL, carve_arena_create(&c, &a), CARVE_ERR_INVALID);
    c.limit_fraction = 1.5;
    CHECK_ST(NULL, carve_arena_create(&c, &a), CARVE_ERR_INVALID);
    carve_config_init(&c);
    c.device = -1; /* refused for the CUDA backends, before any device is asked */
    CHECK_ST(NULL, carve_arena_create(&c, &a), CARVE_ERR_INVALID);
    c.backend = CARVE_BACKEND_VIRTUAL; /* which ignores it, as carve.h says */
    CHECK_OK(NULL, carve_arena_create(&c, &a));
    carve_arena_destroy(a);

    /* The CUDA backend on a machine without a device says so. */
    if (carve_device_count() == 0) {
        carve_config_init(&c);
        a = (carve_arena *)1;
        CHECK_ST(NULL, carve_arena_create(&c, &a), CARVE_ERR_NO_DEVICE);
        CHECK(a == NULL);
        CHECK(carve_last_error(NULL)[0] != '\0');
    }
    carve_arena_destroy(NULL); /* no-op */
}

static void test_alloc_free_contract(carve_backend be) {
    carve_arena *a = test_arena(be, 1, 0, 0);
    void *p = (void *)1;
    CHECK_ST(NULL, carve_alloc(NULL, 10, NULL, &p), CARVE_ERR_INVALID);
    CHECK(p == NULL);
    CHECK_ST(a, carve_alloc(a, 10, NULL, NULL), CARVE_ERR_INVALID);
    p = (void *)1;
    CHECK_OK(a, carve_alloc(a, 0, NULL, &p));
    CHECK(p == NULL);
    CHECK_OK(a, carve_free(a, NULL));
    CHECK_ST(NULL, carve_free(NULL, (void *)256), CARVE_ERR_INVALID);
    /* cudaStreamPerThread: the calling thread's stream (test_free_ordering). */
    CHECK_OK(a, carve_alloc(a, 10, CARVE_STREAM_PER_THREAD, &p));
    CHECK(p != NULL);
    CHECK_OK(a, carve_free(a, p));

    p = (void *)1;
    CHECK_ST(a, carve_alloc(a, SIZE_MAX, NULL, &p), CARVE_ERR_OOM);
    CHECK(p == NULL);
    CHECK(strstr(carve_last_error(a), "out of memory") != NULL);
    CHECK_ST(a, carve_alloc(a, SIZE_MAX - 100, NULL, &p), CARVE_ERR_OOM);

    /* Sizes round to the alignment; every buffer is aligned. */
    size_t sizes[] = {1, 255, 256, 257, 4096, 1 << 20, (1 << 20) + 1, 3 << 20, 17 << 20, 100 << 20};
    void *bufs[10];
    size_t expect = 0;
    for (int i = 0; i < 10; i++) {
        CHECK_OK(a, carve_alloc(a, sizes[i], NULL, &bufs[i]));
        CHECK(bufs[i] != NULL && (uintptr_t)bufs[i] % CARVE_ALIGNMENT == 0);
        expect += (sizes[i] + 255) & ~(size_t)255;
    }
    CHECK(carve_memory_allocated(a) == expect);
    CHECK(carve_memory_reserved(a) >= expect);
    CHECK_ARENA(a);

    /* Bad pointers: interior, misaligned, foreign, double free; nothing changes. */
    CHECK_ST(a, carve_free(a, (char *)bufs[9] + 256), CARVE_ERR_BAD_POINTER);
    CHECK(strstr(carve_last_error(a), "not the start of a live buffer") != NULL);
    CHECK_ST(a, carve_free(a, (char *)bufs[9] + 1), CARVE_ERR_BAD_POINTER);
    int local;
    CHECK_ST(a, carve_free(a, &local), CARVE_ERR_BAD_POINTER);
    CHECK_ST(a, carve_free(a, (void *)(uintptr_t)0x100), CARVE_ERR_BAD_POINTER);
    CHECK_ST(a, carve_free(a, (void *)UINTPTR_MAX), CARVE_ERR_BAD_POINTER);
    CHECK(carve_memory_allocated(a) == expect);
    CHECK_ARENA(a);
    CHECK_OK(a, carve_free(a, bufs[3]));
    CHECK_ST(a, carve_free(a, bufs[3]), CARVE_ERR_BAD_POINTER);
    CHECK_ST(a, carve_record_stream(a, bufs[3], NULL), CARVE_ERR_BAD_POINTER);
    CHECK_ST(a, carve_record_stream(a, NULL, NULL), CARVE_ERR_BAD_POINTER);
    CHECK_ST(NULL, carve_record_stream(NULL, bufs[0], NULL), CARVE_ERR_INVALID);
    CHECK_ARENA(a);

    /* A pointer from another arena is foreign here. */
    carve_arena *b = test_arena(be, 1, 0, 0);
    void *q;
    CHECK_OK(b, carve_alloc(b, 1000, NULL, &q));
    CHECK_ST(a, carve_free(a, q), CARVE_ERR_BAD_POINTER);
    CHECK_OK(b, carve_free(b, q));
    carve_arena_destroy(b);

    for (int i = 0; i < 10; i++)
        if (i != 3)
            CHECK_OK(a, carve_free(a, bufs[i]));
    CHECK(carve_memory_allocated(a) == 0);
    CHECK(carve_memory_reserved(a) > 0); /* cached */
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0);
    CHECK_ST(NULL, carve_empty_cache(NULL), CARVE_ERR_INVALID);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

static void test_reuse_is_cached(void) {
    carve_arena *a = test_arena(CARVE_BACKEND_VIRTUAL, 1, 0, 0);
    void *p, *q;
    CHECK_OK(a, carve_alloc(a, 5000, NULL, &p));
    carve_stats s1, s2;
    carve_get_stats(a, &s1);
    CHECK_OK(a, carve_free(a, p));
    CHECK_OK(a, carve_alloc(a, 5000, NULL, &q));
    CHECK(p == q); /* same stream: the memory comes straight back */
    carve_get_stats(a, &s2);
    CHECK(s2.num_backend_allocs == s1.num_backend_allocs);
    CHECK_OK(a, carve_free(a, q));
    carve_arena_destroy(a);
}

static void test_fixed_block(void) {
    /* "Grab one large block": growth off, everything from the initial block. */
    carve_arena *a = test_arena(CARVE_BACKEND_VIRTUAL, 0, 100 << 20, 0);
    carve_stats s;
    carve_get_stats(a, &s);
    CHECK(s.reserved_bytes == (100 << 20) && s.num_segments == 1 && s.num_backend_allocs == 1);
    void *p[8];
    for (int i = 0; i < 8; i++)
        CHECK_OK(a, carve_alloc(a, 12 << 20, NULL, &p[i]));
    void *x = (void *)1;
    CHECK_ST(a, carve_alloc(a, 12 << 20, NULL, &x), CARVE_ERR_OOM); /* 96 MiB used, no growth */
    CHECK(x == NULL);
    CHECK(strstr(carve_last_error(a), "growth is off") != NULL);
    carve_get_stats(a, &s);
    CHECK(s.num_ooms == 1 && s.reserved_bytes == (100 << 20) && s.num_backend_allocs == 1);
    CHECK_OK(a, carve_free(a, p[0]));
    CHECK_OK(a, carve_alloc(a, 12 << 20, NULL, &x)); /* the arena keeps working */
    CHECK_OK(a, carve_free(a, x));
    for (int i = 1; i < 8; i++)
        CHECK_OK(a, carve_free(a, p[i]));
    /* empty_cache really gives the block back; the next alloc takes it again. */
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0);
    CHECK_OK(a, carve_alloc(a, 1000, NULL, &x));
    CHECK(carve_memory_reserved(a) == (100 << 20));
    CHECK_OK(a, carve_free(a, x));
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

static void test_limit(void) {
    carve_arena *a = test_arena(CARVE_BACKEND_VIRTUAL, 1, 0, 64 << 20);
    void *p[100];
    int n = 0;
    carve_status st;
    while ((st = carve_alloc(a, 3 << 20, NULL, &p[n])) == CARVE_OK && n < 99)
        n++;
    CHECK(st == CARVE_ERR_OOM);
    CHECK(n >= 16 && n <= 21); /* 64 MiB / 3 MiB, minus fragmentation at span ends */
    CHECK(carve_memory_reserved(a) <= (64 << 20));
    const char *msg = carve_last_error(a);
    if (!strstr(msg, "3.00 MiB"))
        fprintf(stderr, "message: %s\n", msg);
    CHECK(strstr(msg, "limit") && strstr(msg, "reserved") && strstr(msg, "largest free block") &&
          strstr(msg, "allocated") && strstr(msg, "3.00 MiB"));
    /* Small requests still fit in what is left. */
    void *small;
    CHECK_OK(a, carve_alloc(a, 1000, NULL, &small));
    CHECK_OK(a, carve_free(a, small));
    for (int i = 0; i < n; i++)
        CHECK_OK(a, carve_free(a, p[i]));
    /* A request bigger than the limit is OOM at once. */
    CHECK_ST(a, carve_alloc(a, 65 << 20, NULL, &small), CARVE_ERR_OOM);
    /* After frees, the cached memory serves a larger request (reclaim + retry). */
    CHECK_OK(a, carve_alloc(a, 60 << 20, NULL, &small));
    CHECK(carve_memory_reserved(a) <= (64 << 20));
    CHECK_OK(a, carve_free(a, small));
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

static void test_host_memory_is_real(void) {
    carve_arena *a = test_arena(CARVE_BACKEND_HOST, 1, 0, 0);
    unsigned char *p;
    CHECK_OK(a, carve_alloc(a, 1 << 20, NULL, (void **)&p));
    memset(p, 0xAB, 1 << 20);
    CHECK(p[0] == 0xAB && p[(1 << 20) - 1] == 0xAB);
    CHECK_OK(a, carve_free(a, p));
    carve_arena_destroy(a);
}

static void test_destroy_with_live(void) {
    carve_arena *a = test_arena(CARVE_BACKEND_HOST, 1, 0, 0);
    void *p;
    for (int i = 0; i < 50; i++)
        CHECK_OK(a, carve_alloc(a, (size_t)(i + 1) * 10000, (carve_stream)(uintptr_t)(i % 3 * 64), &p));
    CHECK_OK(a, carve_record_stream(a, p, (carve_stream)(uintptr_t)4096));
    carve_arena_destroy(a); /* returns everything; leak checkers verify */
}

static void test_misc(void) {
    CHECK(strcmp(carve_status_str(CARVE_OK), "CARVE_OK") == 0);
    CHECK(strcmp(carve_status_str(CARVE_ERR_NO_DEVICE), "CARVE_ERR_NO_DEVICE") == 0);
    CHECK(strcmp(carve_status_str((carve_status)99), "unknown status") == 0);
    CHECK(strcmp(carve_backend_str(CARVE_BACKEND_VIRTUAL), "virtual") == 0);
    char version[32]; /* the library and the header it was built with agree */
    snprintf(version, sizeof(version), "%d.%d.%d", CARVE_VERSION_MAJOR, CARVE_VERSION_MINOR, CARVE_VERSION_PATCH);
    CHECK(strcmp(carve_version(), version) == 0);
    CHECK(carve_memory_allocated(NULL) == 0 && carve_memory_reserved(NULL) == 0);
    CHECK_ST(NULL, carve_check(NULL), CARVE_ERR_INVALID);
    carve_reset_peak_stats(NULL);
    carve_config c;
    CHECK_ST(NULL, carve_arena_get_config(NULL, &c), CARVE_ERR_INVALID);
    carve_arena *a = test_arena(CARVE_BACKEND_VIRTUAL, 1, 3 << 20, 0);
    CHECK_OK(a, carve_arena_get_config(a, &c));
    CHECK(c.initial_bytes == (4 << 20) && c.limit_bytes == SIZE_MAX && c.backend == CARVE_BACKEND_VIRTUAL);
    CHECK_ST(a, carve_arena_get_config(a, NULL), CARVE_ERR_INVALID);
    carve_arena_destroy(a);
    /* last_error is per arena: another arena's message is not returned. */
    carve_arena *x = test_arena(CARVE_BACKEND_VIRTUAL, 1, 0, 0), *y = test_arena(CARVE_BACKEND_VIRTUAL, 1, 0, 0);
    CHECK_ST(x, carve_free(x, (void *)(uintptr_t)256), CARVE_ERR_BAD_POINTER);
    CHECK(carve_last_error(x)[0] != '\0');
    CHECK(carve_last_error(y)[0] == '\0');
    carve_arena_destroy(x);
    carve_arena_destroy(y);
}

int main(void) {
    test_create_errors();
    test_alloc_free_contract(CARVE_BACKEND_HOST);
    test_alloc_free_contract(CARVE_BACKEND_VIRTUAL);
    test_reuse_is_cached();
    test_fixed_block();
    test_limit();
    test_host_memory_is_real();
    test_destroy_with_live();
    test_misc();
    return test_finish();
}
