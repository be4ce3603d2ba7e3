/*
 * gpu_cross_stream.c — freed memory is never handed to another stream while
 * work queued before the free can still write it.
 *
 * Every case uses the late writer: a kernel that sleeps on stream A, then
 * writes buffer X. X is freed while that kernel sleeps. If carve handed X's
 * memory to an allocation on stream B before the kernel finished, the late
 * write would land on B's data, and verifying B's buffer after both streams
 * finish would count mismatches.
 *
 * In carve, a freed buffer returns to its stream's pool; another stream gets
 * it only after the span goes back to the arena heap with an event recorded
 * on the freeing stream, which happens under memory pressure (the
 * out-of-memory path reclaims and waits for events) or in empty_cache. So
 * the handoff cases use arenas that hold just enough memory to force it.
 *
 * case_sensitivity first shows, with no allocator involved, that the late
 * writer really does overwrite an earlier write from another stream: the
 * other cases would otherwise prove nothing.
 *
 * case_merged_pending_range(_extend) replay the sequence of the segments-
 * mode bug where a range whose event had completed merged with a range
 * still waiting on another stream's late writer and was handed out whole
 * (tests/test_order.c, case 1, runs the same sequence on the event model).
 */
#include "gpu_util.h"

#define XSIZE ((size_t)32 << 20)

static unsigned delay_ms;
static cudaStream_t sa, sb, sc;
static uint64_t ids;

static carve_arena *arena(int growth, size_t initial, size_t limit, const char *name) {
    return gpu_arena(0, growth, initial, limit, name);
}

static unsigned long long mismatches(const void *p, size_t size, uint64_t id) {
    return gpu_mismatches(gpu_counter_of(0, 0), p, size, id, sa);
}

/* No allocator: the late writer on A and an immediate writer on B target the
 * same memory; after both finish, the late writer's pattern must be there. */
static void case_sensitivity(void) {
    void *r;
    CUDA_CHECK(cudaMalloc(&r, XSIZE));
    uint64_t late = ++ids, early = ++ids;
    gpu_fill(r, XSIZE, early, sb); /* first touch out of the timed part */
    CUDA_CHECK(cudaStreamSynchronize(sb));
    double t0 = gpu_now();
    gpu_late_fill(r, XSIZE, late, delay_ms, sa);
    gpu_fill(r, XSIZE, early, sb);
    CUDA_CHECK(cudaStreamSynchronize(sb));
    double t_early = gpu_now() - t0;
    CUDA_CHECK(cudaStreamSynchronize(sa));
    double t_late = gpu_now() - t0;
    unsigned long long m = mismatches(r, XSIZE, late);
    printf("  early writer done after %.1f ms, late writer after %.1f ms (delay %u ms); late pattern %s\n",
           t_early * 1e3, t_late * 1e3, delay_ms, m == 0 ? "intact: the test is sensitive" : "overwritten");
    if (gpu_quick()) {
        if (m != 0)
            printf("  (quick mode: the streams did not overlap; the other cases prove less here)\n");
    } else {
        CHECK(m == 0);
        CHECK(t_late * 1e3 >= delay_ms * 0.9);
    }
    CUDA_CHECK(cudaFree(r));
}

/* Same stream: A gets X back at once, which stream order makes safe. */
static void case_same_stream(void) {
    carve_arena *a = arena(1, 0, 64 * MiB, "same-stream");
    void *x, *y;
    uint64_t idx = ++ids, idy = ++ids;
    CHECK_OK(a, carve_alloc(a, XSIZE, sa, &x));
    gpu_late_fill(x, XSIZE, idx, delay_ms, sa);
    CHECK_OK(a, carve_free(a, x));
    CHECK_OK(a, carve_alloc(a, XSIZE, sa, &y));
    CHECK(y == x); /* the only free block of A's pool */
    if (!gpu_quick()) /* handed back without waiting (a sanitizer may serialise kernels) */
        CHECK(cudaStreamQuery(sa) == cudaErrorNotReady);
    (void)cudaGetLastError();
    gpu_fill(y, XSIZE, idy, sa);
    CUDA_CHECK(cudaStreamSynchronize(sa));
    CHECK(mismatches(y, XSIZE, idy) == 0);
    CHECK_OK(a, carve_free(a, y));
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* Another stream, no pressure: B is served from fresh memory, never X. */
static void case_other_stream_no_pressure(void) {
    carve_arena *a = arena(1, 0, 1 * GiB, "no-pressure");
    void *x, *y[4];
    uint64_t idx = ++ids, idy[4];
    CHECK_OK(a, carve_alloc(a, XSIZE, sa, &x));
    gpu_late_fill(x, XSIZE, idx, delay_ms, sa);
    CHECK_OK(a, carve_free(a, x));
    for (int i = 0; i < 4; i++) {
        CHECK_OK(a, carve_alloc(a, XSIZE, sb, &y[i]));
        CHECK(y[i] != x);
        idy[i] = ++ids;
        gpu_fill(y[i], XSIZE, idy[i], sb);
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < 4; i++) {
        CHECK(mismatches(y[i], XSIZE, idy[i]) == 0);
        CHECK_OK(a, carve_free(a, y[i]));
    }
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* The arena holds room for two X-sized buffers. A frees X while the late
 * writer sleeps; B holds one buffer and asks for a second, which only X's
 * memory can satisfy: carve must wait for A's work before handing it over. */
static void handoff(carve_arena *a) {
    void *x, *y0, *y1;
    uint64_t idx = ++ids, id0 = ++ids, id1 = ++ids;
    CHECK_OK(a, carve_alloc(a, XSIZE, sa, &x));
    gpu_late_fill(x, XSIZE, idx, delay_ms, sa);
    CHECK_OK(a, carve_free(a, x));
    double t0 = gpu_now();
    CHECK_OK(a, carve_alloc(a, XSIZE, sb, &y0));
    gpu_fill(y0, XSIZE, id0, sb);
    CHECK_OK(a, carve_alloc(a, XSIZE, sb, &y1));
    double waited = gpu_now() - t0;
    int a_done = cudaStreamQuery(sa) == cudaSuccess;
    (void)cudaGetLastError();
    if (y1)
        gpu_fill(y1, XSIZE, id1, sb);
    printf("  second allocation on B: %s X's memory after %.1f ms; A's late writer %s when it returned\n",
           y1 == x ? "got" : "did not get", waited * 1e3, a_done ? "had finished" : "was still running");
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK(y0 != x);
    CHECK(y1 != NULL);
    CHECK(mismatches(y0, XSIZE, id0) == 0);
    if (y1)
        CHECK(mismatches(y1, XSIZE, id1) == 0);
    /* Keep going on B: more of the same size, all data intact. */
    CHECK_OK(a, carve_free(a, y0));
    for (int i = 0; i < 8; i++) {
        void *z;
        uint64_t idz = ++ids;
        CHECK_OK(a, carve_alloc(a, XSIZE, sb, &z));
        gpu_fill(z, XSIZE, idz, sb);
        CUDA_CHECK(cudaStreamSynchronize(sb));
        CHECK(mismatches(z, XSIZE, idz) == 0);
        CHECK_OK(a, carve_free(a, z));
    }
    CHECK_OK(a, carve_free(a, y1));
    CHECK_ARENA(a);
    carve_stats s = gpu_stats(a);
    CHECK(s.reserved_bytes <= 2 * XSIZE);
    CHECK(s.num_live == 0);
}

static void case_handoff_one_block(void) {
    /* Growth off: no segment is released or reserved on the way, so only
     * the event keeps B off X's memory. */
    carve_arena *a = arena(0, 2 * XSIZE, 0, "handoff-block");
    handoff(a);
    carve_arena_destroy(a);
}

static void case_handoff_growth_limit(void) {
    carve_arena *a = arena(1, 0, 2 * XSIZE, "handoff-growth");
    handoff(a);
    carve_arena_destroy(a);
}

/* X is allocated on A, written late on C (declared with record_stream) and
 * freed at once. A's next allocation of the same size must not get X until
 * C's work is done. With room to spare, A gets other memory; with an arena
 * of exactly one X, A's allocation waits for C. */
static void record_stream(carve_arena *a, int pressure, int same_address) {
    void *x, *y;
    uint64_t idx = ++ids, idlate = ++ids, idy = ++ids;
    CHECK_OK(a, carve_alloc(a, XSIZE, sa, &x));
    gpu_fill(x, XSIZE, idx, sa);
    cudaEvent_t ev;
    CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(ev, sa));
    CUDA_CHECK(cudaStreamWaitEvent(sc, ev, 0));
    gpu_late_fill(x, XSIZE, idlate, delay_ms, sc);
    CHECK_OK(a, carve_record_stream(a, x, sc));
    CHECK_OK(a, carve_free(a, x));
    double t0 = gpu_now();
    CHECK_OK(a, carve_alloc(a, XSIZE, sa, &y));
    double waited = gpu_now() - t0;
    int c_done = cudaStreamQuery(sc) == cudaSuccess;
    (void)cudaGetLastError();
    printf("  A's next allocation: %s X's memory after %.1f ms; C's late writer %s\n",
           y == x ? "got" : "did not get", waited * 1e3, c_done ? "had finished" : "was still running");
    if (pressure) {
        CHECK(c_done);
        if (same_address) /* growth off: X's memory is the only memory */
            CHECK(y == x);
    } else if (!gpu_quick()) {
        CHECK(y != x); /* C was still running (unless a sanitizer serialised it) */
    }
    if (y)
        gpu_fill(y, XSIZE, idy, sa);
    CUDA_CHECK(cudaDeviceSynchronize());
    if (y)
        CHECK(mismatches(y, XSIZE, idy) == 0);
    CHECK_OK(a, carve_free(a, y));
    if (!pressure) {
        /* C is done now: the pending block is A's again. */
        void *z;
        CHECK_OK(a, carve_alloc(a, XSIZE, sa, &z));
        CHECK(z == x || z == y);
        CHECK_OK(a, carve_free(a, z));
    }
    CUDA_CHECK(cudaEventDestroy(ev));
    CHECK_ARENA(a);
    CHECK(gpu_stats(a).num_live == 0);
}

static void case_record_stream_no_pressure(void) {
    carve_arena *a = arena(1, 0, 1 * GiB, "record-free");
    record_stream(a, 0, 0);
    carve_arena_destroy(a);
}

static void case_record_stream_one_block(void) {
    carve_arena *a = arena(0, XSIZE, 0, "record-block");
    record_stream(a, 1, 1);
    carve_arena_destroy(a);
}

static void case_record_stream_growth_limit(void) {
    /* X's segment is given back and reserved anew: maybe elsewhere. */
    carve_arena *a = arena(1, 0, XSIZE, "record-growth");
    record_stream(a, 1, 0);
    carve_arena_destroy(a);
}

static int overlaps(const void *p, size_t n, const void *q, size_t k) {
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;
    return p && q && a < b + k && b < a + n;
}

/* Segments mode, one 64 MiB block: A gives its 12 MiB span x back (done),
 * C gives its 12 MiB span y back while the late writer still sleeps on y
 * (each gives its span back by asking for 60 MiB, more than the block has
 * left); then B asks for memory. A range whose event completed (x's) may
 * merge with y's range, which waits for C's event: whatever B gets must not
 * be y's memory until the late writer is done. extend: B already holds a
 * span right before x's range and grows into it; else B starts from the
 * heap. B's buffers are filled at once on B and verified after both
 * streams finish: a late write into them counts mismatches. */
static void merged_pending_range(int extend) {
    carve_arena *a = gpu_arena_conf("vmm=0,initial=64MiB", extend ? "merged-extend" : "merged-find");
    void *b0 = NULL, *x, *y, *l1, *l3, *b[3] = {NULL, NULL, NULL};
    size_t bs[3] = {8 * MiB, extend ? 16 * MiB : 8 * MiB, extend ? 4 * MiB : 0};
    uint64_t idy = ++ids, idb[3];
    for (int i = 0; i < 3; i++)
        idb[i] = ++ids;
    if (extend)
        CHECK_OK(a, carve_alloc(a, 8 * MiB, sb, &b0)); /* B's span: the first 20 MiB */
    CHECK_OK(a, carve_alloc(a, 12 * MiB, sa, &x));
    CHECK_OK(a, carve_alloc(a, 12 * MiB, sc, &y));
    gpu_fill(x, 12 * MiB, ++ids, sa);
    gpu_late_fill(y, 12 * MiB, idy, delay_ms, sc);
    CHECK_OK(a, carve_free(a, x));
    CHECK_OK(a, carve_free(a, y));
    CHECK_OK(a, carve_alloc(a, 60 * MiB, sa, &l1));
    CHECK_OK(a, carve_alloc(a, 60 * MiB, sc, &l3));
    CUDA_CHECK(cudaStreamSynchronize(sa)); /* A's work, and its event, are done; C's late writer sleeps */
    int c_running = cudaStreamQuery(sc) == cudaErrorNotReady, hit = 0;
    (void)cudaGetLastError();
    for (int i = 0; i < 3 && bs[i]; i++) {
        CHECK_OK(a, carve_alloc(a, bs[i], sb, &b[i]));
        if (b[i])
            gpu_fill(b[i], bs[i], idb[i], sb);
        hit |= overlaps(b[i], bs[i], y, 12 * MiB);
    }
    c_running &= cudaStreamQuery(sc) == cudaErrorNotReady;
    (void)cudaGetLastError();
    printf("  B's buffers %s y's memory; C's late writer %s while B allocated\n", hit ? "overlap" : "do not overlap",
           c_running ? "was still running" : "had finished (the test proves less)");
    if (c_running)
        CHECK(!hit);
    CUDA_CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < 3 && bs[i]; i++)
        if (b[i])
            CHECK(mismatches(b[i], bs[i], idb[i]) == 0);
    for (int i = 0; i < 3; i++)
        CHECK_OK(a, carve_free(a, b[i]));
    CHECK_OK(a, carve_free(a, b0));
    CHECK_OK(a, carve_free(a, l1));
    CHECK_OK(a, carve_free(a, l3));
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

static void case_merged_pending_range(void) { merged_pending_range(0); }
static void case_merged_pending_range_extend(void) { merged_pending_range(1); }

/* empty_cache waits for the late writer before giving X's segment back. */
static void case_empty_cache_waits(void) {
    carve_arena *a = arena(1, 0, 1 * GiB, "empty-cache");
    void *x;
    CHECK_OK(a, carve_alloc(a, XSIZE, sa, &x));
    gpu_late_fill(x, XSIZE, ++ids, delay_ms, sa);
    CHECK_OK(a, carve_free(a, x));
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(cudaStreamQuery(sa) == cudaSuccess);
    (void)cudaGetLastError();
    CHECK(carve_memory_reserved(a) == 0);
    carve_arena_destroy(a);
}

int main(void) {
    gpu_start("gpu_cross_stream", 1);
    delay_ms = (unsigned)gpu_scale(150, 60);
    sa = gpu_stream_new();
    sb = gpu_stream_new();
    sc = gpu_stream_new();
    GPU_CASE(case_sensitivity);
    GPU_CASE(case_same_stream);
    GPU_CASE(case_other_stream_no_pressure);
    GPU_CASE(case_handoff_one_block);
    GPU_CASE(case_handoff_growth_limit);
    GPU_CASE(case_record_stream_no_pressure);
    GPU_CASE(case_record_stream_one_block);
    GPU_CASE(case_record_stream_growth_limit);
    GPU_CASE(case_empty_cache_waits);
    GPU_CASE(case_merged_pending_range);
    GPU_CASE(case_merged_pending_range_extend);
    gpu_stream_free(sa);
    gpu_stream_free(sb);
    gpu_stream_free(sc);
    return gpu_finish();
}
