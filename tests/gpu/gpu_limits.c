/*
 * gpu_limits.c — an arena's limit holds on a real device, by carve's own
 * count and by the driver's.
 *
 * After every step, carve's reserved bytes must not pass the limit, and the
 * device memory the process took since the start (cudaMemGetInfo) must
 * equal what carve says it reserved, within gpu_tolerance. Two arenas on one
 * device fill to their own limits independently: one at its limit answers
 * CARVE_ERR_OOM while the other still allocates.
 */
#include "gpu_util.h"

static cudaStream_t s0;
static uint64_t ids;

static carve_arena *arena(int growth, size_t initial, size_t limit, const char *name) {
    return gpu_arena(0, growth, initial, limit, name);
}

typedef struct held {
    void *p;
    size_t size;
    uint64_t id;
} held;

/* Allocate chunk-sized buffers, each filled, until OOM; returns how many. */
static size_t fill_to_limit(carve_arena *a, size_t chunk, held *out, size_t max) {
    size_t n = 0;
    for (;;) {
        void *p = NULL;
        carve_status st = carve_alloc(a, chunk, s0, &p);
        if (st == CARVE_ERR_OOM) {
            CHECK(p == NULL);
            break;
        }
        CHECK_OK(a, st);
        if (st != CARVE_OK || n == max)
            break;
        out[n] = (held){p, chunk, ++ids};
        gpu_fill(p, chunk, out[n].id, s0);
        n++;
    }
    return n;
}

static void verify_free_all(carve_arena *a, held *h, size_t n) {
    gpu_counter c = gpu_counter_of(0, 0);
    for (size_t i = 0; i < n; i++)
        gpu_verify(h[i].p, h[i].size, h[i].id, c.dev, s0);
    CHECK(gpu_counter_take(c, s0) == 0);
    for (size_t i = 0; i < n; i++)
        CHECK_OK(a, carve_free(a, h[i].p));
}

/* Random allocations and frees under a 1 GiB limit; after every step the
 * limit holds and the driver agrees with carve. */
static void case_limit_random(void) {
    const size_t limit = 1 * GiB;
    carve_arena *a = arena(1, 0, limit, "limit-random");
    gpu_mark m;
    gpu_mark_take(&m, 0);
    test_rng r;
    test_rng_seed(&r, test_seed(0x11a1));
    held live[64];
    size_t n = 0;
    unsigned long ooms = 0, allocs = 0;
    long steps = gpu_scale(600, 120);
    gpu_counter c = gpu_counter_of(0, 0);
    for (long i = 0; i < steps; i++) {
        if (n < 64 && (n == 0 || test_rng_below(&r, 100) < 60)) {
            /* Up to 1.25x the limit: some requests can never fit. */
            size_t size = test_rng_loguniform(&r, 4096, limit + limit / 4);
            void *p = NULL;
            carve_status st = carve_alloc(a, size, s0, &p);
            if (st == CARVE_ERR_OOM) {
                ooms++;
                CHECK(p == NULL);
            } else {
                CHECK_OK(a, st);
                CHECK(size <= limit);
                if (p) {
                    live[n] = (held){p, size, ++ids};
                    gpu_fill(p, size, live[n].id, s0);
                    n++;
                    allocs++;
                }
            }
        } else {
            size_t k = (size_t)test_rng_below(&r, n);
            gpu_verify(live[k].p, live[k].size, live[k].id, c.dev, s0);
            CHECK_OK(a, carve_free(a, live[k].p));
            live[k] = live[--n];
        }
        carve_stats s = gpu_stats(a);
        CHECK(s.reserved_bytes <= limit);
        CHECK(s.reserved_bytes_peak <= limit);
        GPU_CHECK_USAGE(&m, s.reserved_bytes, s.num_segments, "driver usage vs carve's reserved");
    }
    CHECK(gpu_counter_take(c, s0) == 0);
    verify_free_all(a, live, n);
    carve_stats s = gpu_stats(a);
    char b1[32];
    printf("  %ld steps: %lu allocations, %lu OOMs, peak reserved %s\n", steps, allocs, ooms,
           gpu_fmt(b1, sizeof(b1), s.reserved_bytes_peak));
    CHECK(s.num_ooms == ooms);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* 64 MiB chunks fill a 1 GiB limit exactly: 16 fit, the 17th and even one
 * byte more are OOM, and the driver shows 1 GiB taken. */
static void case_limit_fill(void) {
    const size_t limit = 1 * GiB, chunk = 64 * MiB;
    carve_arena *a = arena(1, 0, limit, "limit-fill");
    gpu_mark m;
    gpu_mark_take(&m, 0);
    held h[64];
    size_t n = fill_to_limit(a, chunk, h, 64);
    CHECK(n == limit / chunk);
    carve_stats s = gpu_stats(a);
    CHECK(s.reserved_bytes == limit);
    CHECK(s.allocated_bytes == limit);
    GPU_CHECK_USAGE(&m, limit, s.num_segments, "a full 1 GiB arena");
    void *p = NULL;
    CHECK_ST(a, carve_alloc(a, 1, s0, &p), CARVE_ERR_OOM);
    CHECK(p == NULL);
    CHECK(strstr(carve_last_error(a), "limit") != NULL);
    /* Free one chunk: exactly one fits again. */
    CHECK_OK(a, carve_free(a, h[n - 1].p));
    CHECK_OK(a, carve_alloc(a, chunk, s0, &h[n - 1].p));
    gpu_fill(h[n - 1].p, chunk, h[n - 1].id, s0);
    CHECK_ST(a, carve_alloc(a, chunk, s0, &p), CARVE_ERR_OOM);
    CHECK(gpu_stats(a).reserved_bytes <= limit);
    verify_free_all(a, h, n);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* Growth off: the one block is all there is; the driver shows just it. */
static void case_limit_one_block(void) {
    const size_t block = 256 * MiB;
    gpu_mark m;
    gpu_mark_take(&m, 0);
    carve_arena *a = arena(0, block, 0, "limit-block");
    GPU_CHECK_USAGE(&m, block, 1, "one 256 MiB block");
    held h[64];
    size_t n = fill_to_limit(a, 16 * MiB, h, 64);
    CHECK(n == block / (16 * MiB));
    carve_stats s = gpu_stats(a);
    CHECK(s.reserved_bytes == block);
    CHECK(s.num_segments == 1);
    GPU_CHECK_USAGE(&m, block, 1, "one full 256 MiB block");
    verify_free_all(a, h, n);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* Two arenas, 1 GiB and 2 GiB, on one device: each fills to its own limit,
 * and one being full never stops the other. */
static void case_two_arenas_isolated(void) {
    const size_t l1 = 1 * GiB, l2 = 2 * GiB, chunk = 64 * MiB;
    size_t free_b = gpu_free_now(0);
    if (free_b < l1 + l2 + 512 * MiB) {
        char b[32];
        printf("  only %s free: case skipped\n", gpu_fmt(b, sizeof(b), free_b));
        return;
    }
    gpu_mark m;
    gpu_mark_take(&m, 0);
    carve_arena *a1 = arena(1, 0, l1, "iso-1GiB"), *a2 = arena(1, 0, l2, "iso-2GiB");
    held h1[64], h2[64];
    void *p = NULL;

    size_t n1 = fill_to_limit(a1, chunk, h1, 64);
    CHECK(n1 == l1 / chunk);
    /* a1 is full; a2 has not started and allocates. */
    CHECK_OK(a2, carve_alloc(a2, chunk, s0, &p));
    CHECK_OK(a2, carve_free(a2, p));
    size_t n2 = fill_to_limit(a2, chunk, h2, 64);
    CHECK(n2 == l2 / chunk);
    carve_stats s1 = gpu_stats(a1), s2 = gpu_stats(a2);
    CHECK(s1.reserved_bytes == l1 && s2.reserved_bytes == l2);
    CHECK(s1.num_ooms == 1 && s2.num_ooms == 1);
    GPU_CHECK_USAGE(&m, l1 + l2, s1.num_segments + s2.num_segments, "two full arenas");

    /* Room freed in a2 is a2's alone. */
    CHECK_OK(a2, carve_free(a2, h2[n2 - 1].p));
    CHECK_ST(a1, carve_alloc(a1, chunk, s0, &p), CARVE_ERR_OOM);
    CHECK_OK(a2, carve_alloc(a2, chunk, s0, &h2[n2 - 1].p));
    gpu_fill(h2[n2 - 1].p, chunk, h2[n2 - 1].id, s0);
    /* And room freed in a1 is a1's. */
    CHECK_OK(a1, carve_free(a1, h1[n1 - 1].p));
    CHECK_ST(a2, carve_alloc(a2, chunk, s0, &p), CARVE_ERR_OOM);
    CHECK_OK(a1, carve_alloc(a1, chunk, s0, &h1[n1 - 1].p));
    gpu_fill(h1[n1 - 1].p, chunk, h1[n1 - 1].id, s0);

    /* Both arenas' data intact: no byte of one is in the other. */
    verify_free_all(a1, h1, n1);
    verify_free_all(a2, h2, n2);
    CHECK(gpu_stats(a1).reserved_bytes <= l1);
    CHECK(gpu_stats(a2).reserved_bytes <= l2);
    CHECK_ARENA(a1);
    CHECK_ARENA(a2);
    carve_arena_destroy(a1);
    carve_arena_destroy(a2);
}

int main(void) {
    gpu_start("gpu_limits", 1);
    s0 = gpu_stream_new();
    GPU_CASE(case_limit_random);
    GPU_CASE(case_limit_fill);
    GPU_CASE(case_limit_one_block);
    GPU_CASE(case_two_arenas_isolated);
    gpu_stream_free(s0);
    return gpu_finish();
}
