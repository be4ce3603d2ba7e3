/*
 * gpu_oom.c — out of memory on a real device: the status, the explanation,
 * the counters, a clean CUDA error state, and an arena that keeps working.
 *
 * Three ways to run out: the arena's own limit, the one block of growth-off
 * mode, and the driver itself (cudaMalloc failing with
 * cudaErrorMemoryAllocation in segments mode, cuMemCreate with
 * CUDA_ERROR_OUT_OF_MEMORY in the default virtual-memory mode). The last one
 * must also release the arena's cached memory and retry once, so a request
 * that only fits once the cache is gone succeeds; those cases run in both
 * modes.
 *
 * Under compute-sanitizer, the deliberate cudaMalloc failures are reported
 * as API errors; tests/gpu/run.sh runs this test with --report-api-errors no.
 */
#include "gpu_util.h"

static cudaStream_t s0;

static carve_arena *arena(int growth, size_t initial, size_t limit, const char *name) {
    return gpu_arena(0, growth, initial, limit, name);
}

static int g_segments; /* the driver-OOM cases: segments mode (1) or the default (0) */

static carve_arena *mode_arena(const char *name) {
    return g_segments ? gpu_arena_conf("vmm=0", name) : gpu_arena(0, 1, 0, 0, name);
}

static int has(const char *msg, const char *word) {
    if (strstr(msg, word))
        return 1;
    fprintf(stderr, "  message lacks \"%s\": %s\n", word, msg);
    return 0;
}

/* The explanation carve gives for an OOM names every quantity a user needs. */
static void check_message(const carve_arena *a, size_t size) {
    const char *msg = carve_last_error(a);
    char num[32];
    snprintf(num, sizeof(num), "%zu", size);
    CHECK(has(msg, "out of memory"));
    CHECK(has(msg, num));                 /* the request, in bytes */
    CHECK(has(msg, "requested"));
    CHECK(has(msg, "allocated"));
    CHECK(has(msg, "reserved"));
    CHECK(has(msg, "largest free block"));
    CHECK(has(msg, "limit"));
}

/* After an OOM the arena still allocates, frees and passes its check. */
static void check_still_works(carve_arena *a) {
    void *p = NULL;
    CHECK_OK(a, carve_alloc(a, 4096, s0, &p));
    CHECK(p != NULL);
    if (p) {
        uint64_t id = 0xAB;
        gpu_fill(p, 4096, id, s0);
        CHECK(gpu_mismatches(gpu_counter_of(0, 0), p, 4096, id, s0) == 0);
    }
    CHECK_OK(a, carve_free(a, p));
    CHECK_ARENA(a);
    CHECK(cudaGetLastError() == cudaSuccess);
    CHECK(cudaPeekAtLastError() == cudaSuccess);
}

static void case_oom_at_limit(void) {
    carve_arena *a = arena(1, 0, 256 * MiB, "oom-limit");
    void *big = NULL, *p = (void *)1;
    CHECK_OK(a, carve_alloc(a, 200 * MiB, s0, &big));
    uint64_t before = gpu_stats(a).num_ooms;
    size_t ask = 100 * MiB + 123;
    CHECK_ST(a, carve_alloc(a, ask, s0, &p), CARVE_ERR_OOM);
    CHECK(p == NULL);
    check_message(a, ask);
    printf("  message: %s\n", carve_last_error(a));
    carve_stats s = gpu_stats(a);
    CHECK(s.num_ooms == before + 1);
    CHECK(s.reserved_bytes <= 256 * MiB);
    /* A request above the limit fails at once, and counts too. */
    CHECK_ST(a, carve_alloc(a, 257 * MiB, s0, &p), CARVE_ERR_OOM);
    check_message(a, 257 * MiB);
    CHECK(gpu_stats(a).num_ooms == before + 2);
    CHECK(cudaGetLastError() == cudaSuccess);
    check_still_works(a);
    CHECK_OK(a, carve_free(a, big));
    check_still_works(a);
    carve_arena_destroy(a);
}

static void case_oom_one_block(void) {
    carve_arena *a = arena(0, 64 * MiB, 0, "oom-block");
    void *p = NULL, *q = NULL;
    CHECK_ST(a, carve_alloc(a, 65 * MiB, s0, &p), CARVE_ERR_OOM);
    check_message(a, 65 * MiB);
    CHECK(has(carve_last_error(a), "growth is off"));
    CHECK_OK(a, carve_alloc(a, 48 * MiB, s0, &p));
    CHECK_ST(a, carve_alloc(a, 48 * MiB, s0, &q), CARVE_ERR_OOM);
    CHECK(gpu_stats(a).num_ooms == 2);
    CHECK(gpu_stats(a).reserved_bytes == 64 * MiB);
    check_still_works(a);
    CHECK_OK(a, carve_free(a, p));
    carve_arena_destroy(a);
}

/* Twice the device's memory with the default limit (the device's total). */
static void case_oom_larger_than_device(void) {
    carve_arena *a = arena(1, 0, 0, "oom-huge");
    size_t free_b, total;
    CHECK_OK(NULL, carve_device_mem_info(0, &free_b, &total));
    void *p = (void *)1;
    CHECK_ST(a, carve_alloc(a, 2 * total, s0, &p), CARVE_ERR_OOM);
    CHECK(p == NULL);
    check_message(a, 2 * total);
    CHECK_ST(a, carve_alloc(a, SIZE_MAX, s0, &p), CARVE_ERR_OOM);
    CHECK(gpu_stats(a).num_ooms == 2);
    CHECK(cudaGetLastError() == cudaSuccess);
    check_still_works(a);
    carve_arena_destroy(a);
}

/* Under the limit but more than the driver has: cudaMalloc itself fails.
 * The arena's cache is released and the request retried once, then OOM. */
static void case_oom_from_driver(void) {
    carve_arena *a = mode_arena("oom-driver");
    void *p = NULL, *cached = NULL;
    CHECK_OK(a, carve_alloc(a, 256 * MiB, s0, &cached));
    CHECK_OK(a, carve_free(a, cached)); /* 256 MiB cached */
    carve_stats s = gpu_stats(a);
    size_t ask = s.limit_bytes - 2 * CARVE_SEGMENT_GRANULE; /* under the limit, over what is free */
    CHECK_ST(a, carve_alloc(a, ask, s0, &p), CARVE_ERR_OOM);
    CHECK(p == NULL);
    const char *msg = carve_last_error(a);
    check_message(a, ask);
    CHECK(has(msg, g_segments ? "cudaErrorMemoryAllocation" : "CUDA_ERROR_OUT_OF_MEMORY"));
    printf("  message: %s\n", msg);
    s = gpu_stats(a);
    CHECK(s.num_ooms == 1);
    CHECK(s.reserved_bytes == 0);          /* the cache went back on the way */
    CHECK(s.num_backend_frees >= 1);
    CHECK(cudaGetLastError() == cudaSuccess); /* nothing left behind */
    CHECK(cudaPeekAtLastError() == cudaSuccess);
    check_still_works(a);
    carve_arena_destroy(a);
}

/* A request that fits only once the arena's own cache is released or
 * reused: in segments mode the first cudaMalloc fails in the driver, carve
 * releases its cached segment and retries, and the request succeeds; in
 * virtual-memory mode the cached memory becomes part of the new buffer and
 * only the rest is mapped. The test itself holds half of the free memory so
 * that the request passes the limit but not the driver. */
static void case_retry_after_release(void) {
    size_t free_b = gpu_free_now(0);
    size_t hold = (free_b / 2) & ~(CARVE_SEGMENT_GRANULE - 1);
    size_t cache = (free_b / 5) & ~(CARVE_SEGMENT_GRANULE - 1); /* 20% of free */
    size_t ask = (free_b / 5 * 2) & ~(CARVE_SEGMENT_GRANULE - 1); /* 40%: fits only without the cache */
    void *h = NULL;
    CUDA_CHECK(cudaMalloc(&h, hold));
    carve_arena *a = mode_arena("oom-retry");
    void *p = NULL, *q = NULL;
    CHECK_OK(a, carve_alloc(a, cache, s0, &p));
    CHECK_OK(a, carve_free(a, p)); /* cached: the driver has about 30% left */
    carve_stats s = gpu_stats(a);
    CHECK(s.reserved_bytes + ask <= s.limit_bytes); /* the limit is not what stops it */
    uint64_t frees0 = s.num_backend_frees;
    CHECK_OK(a, carve_alloc(a, ask, s0, &q));
    s = gpu_stats(a);
    if (g_segments)
        CHECK(s.num_backend_frees == frees0 + 1); /* the cached segment was given back */
    else /* the cached granules are part of the new buffer: only the rest was mapped */
        CHECK(s.reserved_bytes <= ask + 2 * CARVE_SEGMENT_GRANULE);
    CHECK(s.num_ooms == 0);
    CHECK(cudaGetLastError() == cudaSuccess);
    if (q) { /* all of it usable (the first 256 MiB in quick mode: memcheck is slow) */
        size_t span = gpu_quick() && ask > 256 * MiB ? 256 * MiB : ask;
        gpu_fill(q, span, 0x77, s0);
        CHECK(gpu_mismatches(gpu_counter_of(0, 0), q, span, 0x77, s0) == 0);
    }
    char b1[32], b2[32], b3[32];
    printf("  %s held outside, %s cached, %s asked: served after releasing the cache\n",
           gpu_fmt(b1, sizeof(b1), hold), gpu_fmt(b2, sizeof(b2), cache), gpu_fmt(b3, sizeof(b3), ask));
    CHECK_OK(a, carve_free(a, q));
    carve_arena_destroy(a);
    CUDA_CHECK(cudaFree(h));
}

int main(void) {
    gpu_start("gpu_oom", 1);
    s0 = gpu_stream_new();
    GPU_CASE(case_oom_at_limit);
    GPU_CASE(case_oom_one_block);
    GPU_CASE(case_oom_larger_than_device);
    GPU_CASE(case_oom_from_driver);
    GPU_CASE(case_retry_after_release);
    g_segments = 1;
    GPU_CASE(case_oom_from_driver);
    GPU_CASE(case_retry_after_release);
    gpu_stream_free(s0);
    return gpu_finish();
}
