/*
 * test_set_limit.c — carve_set_limit on live arenas: host backend
 * (segments) and virtual backend (virtual-memory mode and segments).
 * Raising lets the arena grow at once; lowering below what is reserved
 * gives cached memory back first; lowering below what live buffers hold
 * applies to future growth (nothing live touched, growth refused until
 * frees bring the arena under it; carve_check passes throughout); the new
 * limit is read back by carve_arena_get_config and carve_stats; bad
 * values and growth-off arenas are refused with the limit unchanged.
 */
#include "test_util.h"

#define S1 ((carve_stream)(uintptr_t)0x1000)
#define MiB ((size_t)1 << 20)

static size_t limit_of(carve_arena *a) {
    carve_config c;
    CHECK_OK(a, carve_arena_get_config(a, &c));
    carve_stats s;
    CHECK_OK(a, carve_get_stats(a, &s));
    CHECK(s.limit_bytes == c.limit_bytes);
    return c.limit_bytes;
}

static void run(carve_backend be, const char *conf) {
    carve_arena *a = test_arena_conf(be, 1, 0, 64 * MiB, conf);
    void *p, *q, *r;
    CHECK(limit_of(a) == 64 * MiB);
    /* Raise: a request above the old limit fits at once. */
    CHECK_ST(a, carve_alloc(a, 100 * MiB, S1, &p), CARVE_ERR_OOM);
    CHECK_OK(a, carve_set_limit(a, 128 * MiB + 12345)); /* rounded down to the granule */
    CHECK(limit_of(a) == 128 * MiB);
    CHECK_OK(a, carve_alloc(a, 100 * MiB, S1, &p));
    CHECK_ARENA(a);
    /* Lower below what is reserved with the buffer freed: cached memory goes back. */
    CHECK_OK(a, carve_free(a, p));
    CHECK(carve_memory_reserved(a) >= 100 * MiB);
    CHECK_OK(a, carve_set_limit(a, 16 * MiB));
    CHECK(limit_of(a) == 16 * MiB);
    CHECK(carve_memory_reserved(a) <= 16 * MiB);
    CHECK_ARENA(a);
    CHECK_OK(a, carve_alloc(a, 10 * MiB, S1, &q));
    CHECK_ST(a, carve_alloc(a, 20 * MiB, S1, &r), CARVE_ERR_OOM);
    /* Lower below what live buffers hold: applies to future growth. */
    CHECK_OK(a, carve_set_limit(a, 4 * MiB));
    CHECK(limit_of(a) == 4 * MiB);
    CHECK(carve_memory_reserved(a) >= 10 * MiB); /* nothing live touched */
    CHECK_OK(a, carve_buffer_info(a, q, NULL, NULL));
    CHECK_ARENA(a);
    CHECK_ST(a, carve_alloc(a, 8 * MiB, S1, &r), CARVE_ERR_OOM);
    CHECK(carve_memory_reserved(a) <= 16 * MiB);
    CHECK_OK(a, carve_free(a, q));
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0);
    CHECK_OK(a, carve_alloc(a, 3 * MiB, S1, &r)); /* under the limit again */
    CHECK_ST(a, carve_alloc(a, 3 * MiB, S1, &q), CARVE_ERR_OOM);
    CHECK_OK(a, carve_free(a, r));
    CHECK_ARENA(a);
    /* Refusals leave the limit as it was. */
    CHECK_ST(a, carve_set_limit(a, MiB), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(a), "granule") != NULL);
    CHECK(limit_of(a) == 4 * MiB);
    CHECK_ST(NULL, carve_set_limit(NULL, 64 * MiB), CARVE_ERR_INVALID);
    /* 0: unlimited off the CUDA backends. */
    CHECK_OK(a, carve_set_limit(a, 0));
    CHECK(limit_of(a) == SIZE_MAX);
    CHECK_OK(a, carve_alloc(a, 512 * MiB, S1, &p));
    CHECK_OK(a, carve_free(a, p));
    CHECK_ARENA(a);
    carve_arena_destroy(a);

    carve_arena *fixed = test_arena_conf(be, 0, 8 * MiB, 0, conf);
    CHECK_ST(fixed, carve_set_limit(fixed, 64 * MiB), CARVE_ERR_INVALID);
    carve_arena_destroy(fixed);
}

int main(void) {
    run(CARVE_BACKEND_HOST, "");
    run(CARVE_BACKEND_VIRTUAL, "");
    run(CARVE_BACKEND_VIRTUAL, "vmm=0");
    return test_finish();
}
