/*
 * gpu_release.c — carve_empty_cache and carve_arena_destroy really give
 * memory back to the driver, and fractions resolve against the device.
 *
 * The proof is the driver's own count: cudaMemGetInfo's free bytes before
 * the arena existed must come back (within gpu_slack) after empty_cache with
 * no live buffers, and after destroy even with live buffers. Both modes are
 * covered: growth (many segments) and one large block (growth off).
 */
#include "gpu_util.h"

static cudaStream_t s0, s1;
static uint64_t ids;

static carve_arena *arena(const char *conf, const char *name) { return gpu_arena_conf(conf, name); }

/* Allocate a mix of sizes on two streams (total about `bytes`), fill them;
 * returns how many went into p[]/sz[]. */
static size_t populate(carve_arena *a, size_t bytes, void **p, size_t *sz, uint64_t *id, size_t max) {
    test_rng r;
    test_rng_seed(&r, test_seed(0xe1ea5e));
    size_t n = 0, total = 0;
    while (total < bytes && n < max) {
        size_t size = test_rng_loguniform(&r, 100, 96 * MiB);
        if (total + size > bytes)
            size = bytes - total;
        cudaStream_t s = n % 2 ? s1 : s0;
        CHECK_OK(a, carve_alloc(a, size, s, &p[n]));
        if (!p[n])
            break;
        sz[n] = size;
        id[n] = ++ids;
        gpu_fill(p[n], size, id[n], s);
        total += size;
        n++;
    }
    return n;
}

static void verify_all(void **p, size_t *sz, uint64_t *id, size_t n) {
    gpu_counter c = gpu_counter_of(0, 0);
    CUDA_CHECK(cudaDeviceSynchronize());
    for (size_t i = 0; i < n; i++)
        gpu_verify(p[i], sz[i], id[i], c.dev, s0);
    CHECK(gpu_counter_take(c, s0) == 0);
}

#define MAXB 512

static void empty_then_destroy(const char *conf, const char *name, size_t bytes, int one_block) {
    static void *p[MAXB];
    static size_t sz[MAXB];
    static uint64_t id[MAXB];
    gpu_mark m;
    gpu_mark_take(&m, 0);
    carve_arena *a = arena(conf, name);
    carve_config cfg;
    CHECK_OK(a, carve_arena_get_config(a, &cfg));
    if (one_block)
        GPU_CHECK_USAGE(&m, cfg.initial_bytes, 1, "the block reserved at create");

    /* Round 1: fill, free everything, empty_cache: back to the baseline. */
    size_t n = populate(a, bytes, p, sz, id, MAXB);
    verify_all(p, sz, id, n);
    carve_stats s = gpu_stats(a);
    GPU_CHECK_USAGE(&m, s.reserved_bytes, s.num_segments, "populated");
    if (one_block)
        CHECK(s.num_segments == 1 && s.reserved_bytes == cfg.initial_bytes);
    for (size_t i = 0; i < n; i++)
        CHECK_OK(a, carve_free(a, p[i]));
    CHECK(carve_memory_allocated(a) == 0);
    CHECK(carve_memory_reserved(a) > 0); /* cached, not given back yet */
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0);
    s = gpu_stats(a);
    CHECK(s.num_segments == 0 && s.cached_bytes == 0);
    CHECK(s.num_backend_allocs == s.num_backend_frees);
    GPU_CHECK_BACK(&m, "after carve_empty_cache");
    CHECK_ARENA(a);

    /* Round 2: the arena still works (one-block mode takes its block again),
     * and destroy with live buffers gives everything back. */
    n = populate(a, bytes / 2, p, sz, id, MAXB);
    verify_all(p, sz, id, n);
    s = gpu_stats(a);
    if (one_block)
        CHECK(s.num_segments == 1 && s.reserved_bytes == cfg.initial_bytes);
    GPU_CHECK_USAGE(&m, s.reserved_bytes, s.num_segments, "populated again");
    char b1[32], b2[32];
    printf("  %s: %zu live buffers, %s allocated, %s reserved in %zu segments at destroy\n", name, n,
           gpu_fmt(b1, sizeof(b1), s.allocated_bytes), gpu_fmt(b2, sizeof(b2), s.reserved_bytes),
           s.num_segments);
    carve_arena_destroy(a);
    GPU_CHECK_BACK(&m, "after carve_arena_destroy with live buffers");
}

static void case_growth_release(void) { empty_then_destroy("growth=1", "release-growth", 2 * GiB, 0); }

static void case_one_block_release(void) {
    size_t block = 4 * GiB;
    size_t free_b = gpu_free_now(0);
    if (block > free_b / 2)
        block = (free_b / 2) & ~(CARVE_SEGMENT_GRANULE - 1);
    char conf[64];
    snprintf(conf, sizeof(conf), "growth=0,initial=%zu", block);
    empty_then_destroy(conf, "release-block", block - block / 8, 1);
}

/* empty_cache with live buffers gives back only wholly free segments; the
 * driver sees exactly what stays reserved. */
static void case_partial_release(void) {
    gpu_mark m;
    gpu_mark_take(&m, 0);
    carve_arena *a = arena("growth=1", "partial");
    void *p[8];
    for (int i = 0; i < 8; i++) {
        CHECK_OK(a, carve_alloc(a, 64 * MiB, s0, &p[i]));
        gpu_fill(p[i], 64 * MiB, ++ids, s0);
    }
    for (int i = 0; i < 8; i += 2)
        CHECK_OK(a, carve_free(a, p[i]));
    CHECK_OK(a, carve_empty_cache(a));
    carve_stats s = gpu_stats(a);
    CHECK(s.reserved_bytes >= s.allocated_bytes);
    CHECK(s.reserved_bytes == 4 * 64 * MiB); /* each 64 MiB buffer had a segment of its own */
    GPU_CHECK_USAGE(&m, s.reserved_bytes, s.num_segments, "half released");
    for (int i = 1; i < 8; i += 2)
        CHECK_OK(a, carve_free(a, p[i]));
    CHECK_OK(a, carve_empty_cache(a));
    GPU_CHECK_BACK(&m, "all released");
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* limit_fraction and initial_fraction resolve against the device's total
 * memory, through the config fields and through the text form. */
static void case_fractions(void) {
    size_t free_b, total;
    CHECK_OK(NULL, carve_device_mem_info(0, &free_b, &total));
    size_t want_limit = (size_t)((double)total * 0.05) & ~(CARVE_SEGMENT_GRANULE - 1);
    size_t want_init = ((size_t)((double)total * 0.02) + CARVE_SEGMENT_GRANULE - 1) & ~(CARVE_SEGMENT_GRANULE - 1);

    gpu_mark m;
    gpu_mark_take(&m, 0);
    carve_config c;
    carve_config_init(&c);
    c.limit_fraction = 0.05;
    c.initial_fraction = 0.02;
    carve_arena *a = NULL;
    CHECK_OK(NULL, carve_arena_create(&c, &a));
    carve_config got;
    CHECK_OK(a, carve_arena_get_config(a, &got));
    CHECK(got.limit_bytes == want_limit);
    CHECK(got.initial_bytes == want_init);
    carve_stats s = gpu_stats(a);
    CHECK(s.limit_bytes == want_limit);
    CHECK(s.reserved_bytes == want_init);
    GPU_CHECK_USAGE(&m, want_init, 1, "initial_fraction=0.02");
    /* Fill to the limit: reserved stops at 5% of the device. */
    static void *p[4096];
    size_t n = 0;
    while (n < 4096 && carve_alloc(a, 32 * MiB, s0, &p[n]) == CARVE_OK)
        n++;
    s = gpu_stats(a);
    CHECK(s.reserved_bytes <= want_limit);
    CHECK(s.reserved_bytes + 32 * MiB + s.num_segments * CARVE_SEGMENT_GRANULE > want_limit);
    CHECK(s.num_ooms == 1);
    GPU_CHECK_USAGE(&m, s.reserved_bytes, s.num_segments, "limit_fraction=0.05, full");
    char b1[32], b2[32];
    printf("  total %s: limit_fraction=0.05 -> %s, %zu x 32 MiB fit\n", gpu_fmt(b1, sizeof(b1), total),
           gpu_fmt(b2, sizeof(b2), want_limit), n);
    carve_arena_destroy(a);
    GPU_CHECK_BACK(&m, "fractions arena destroyed");

    /* The same through text. */
    a = arena("limit=0.05,initial=0.02", "fractions-text");
    CHECK_OK(a, carve_arena_get_config(a, &got));
    CHECK(got.limit_bytes == want_limit && got.initial_bytes == want_init);
    carve_arena_destroy(a);

    /* Out of range fractions are refused before anything is reserved. */
    carve_config_init(&c);
    c.limit_fraction = 1.5;
    CHECK_ST(NULL, carve_arena_create(&c, &a), CARVE_ERR_INVALID);
    CHECK(a == NULL);
}

int main(void) {
    gpu_start("gpu_release", 1);
    s0 = gpu_stream_new();
    s1 = gpu_stream_new();
    GPU_CASE(case_growth_release);
    GPU_CASE(case_one_block_release);
    GPU_CASE(case_partial_release);
    GPU_CASE(case_fractions);
    gpu_stream_free(s0);
    gpu_stream_free(s1);
    return gpu_finish();
}
