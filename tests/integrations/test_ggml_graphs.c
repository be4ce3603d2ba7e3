/*
 * test_ggml_graphs.c — the ggml adapter (integrations/ggml/ggml-carve.c)
 * under ggml's CUDA graph captures, without ggml and without a GPU.
 *
 * The one idea: the adapter is built here on carve's host backend
 * (GGML_CARVE_TEST_BACKEND) against a stand-in CUDA runtime header
 * (stub/cudart) whose cudaStreamIsCapturing this test answers; each capture
 * is marked both there and in carve (carve_sim_set_capturing), as the
 * driver would tell both on a GPU. The test plays ggml's pool: allocations
 * and frees on a stream through the hook, some inside a capture. Checked:
 *  - Outside any capture a pool allocation asks the capture question once
 *    and a free asks nothing; nothing is counted as captured.
 *  - Inside a capture an allocation the stream's own pool cannot meet
 *    succeeds (carve alone would answer CARVE_ERR_OOM: a captured stream of
 *    the arena's own brings no memory in), counted by
 *    ggml_carve_captured_allocations; memory freed in the capture serves
 *    the capture's next allocation (the next operation).
 *  - After the capture the stream allocates from its own pool again (not
 *    the captured memory), and the captured memory goes to nobody:
 *    backend buffers filling the arena to its limit get none of it, and
 *    ggml_carve_empty_cache keeps it; allocated bytes are back to where
 *    they were once everything is freed.
 *  - A later capture on the same stream shares its graph pool (the same
 *    memory, nothing more reserved); two streams captured at once get a
 *    pool each; an invalidated capture counts as a capture.
 *  - Routes end with a capture's last buffer: twenty streams captured one
 *    after another and never used again all succeed (carve routes 16
 *    streams at most at once), and a stream ggml has destroyed after its
 *    capture is never asked about again.
 *  - A buffer that outlives its capture: the route ends at the stream's
 *    next allocation, the buffer's free goes back to the graph pool.
 * Exit 0 when every check passes.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "ggml-carve.h"
#include "ggml-cuda-allocator.h"

#define MiB ((size_t)1 << 20)
#define LIMIT (128 * MiB)
#define STREAM(n) ((cudaStream_t)(uintptr_t)(0x1000 * (n)))

static int failures;
#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            failures++;                                                                                                \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                                     \
            printf(__VA_ARGS__);                                                                                       \
            printf("\n");                                                                                              \
        }                                                                                                              \
    } while (0)

/* ---- ggml's side of the hook ---- */

static struct ggml_backend_cuda_allocator hook;

bool ggml_backend_cuda_set_allocator(const struct ggml_backend_cuda_allocator *allocator) {
    if (allocator)
        hook = *allocator;
    return true;
}

/* ---- the stand-in runtime: captures as the test marks them ---- */

#define MAX_MARKED 32
static struct {
    cudaStream_t stream;
    enum cudaStreamCaptureStatus status;
} marked[MAX_MARKED];
static int nmarked;
static cudaStream_t destroyed[MAX_MARKED];
static int ndestroyed;
static unsigned long questions, questions_destroyed, syncs;

cudaError_t stub_cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *status) {
    questions++;
    for (int i = 0; i < ndestroyed; i++)
        if (destroyed[i] == stream) {
            questions_destroyed++;
            return cudaErrorInvalidResourceHandle;
        }
    *status = cudaStreamCaptureStatusNone;
    for (int i = 0; i < nmarked; i++)
        if (marked[i].stream == stream)
            *status = marked[i].status;
    return cudaSuccess;
}
cudaError_t stub_cudaGetLastError(void) { return cudaSuccess; }
cudaError_t stub_cudaGetDevice(int *device) {
    *device = 0;
    return cudaSuccess;
}
cudaError_t stub_cudaSetDevice(int device) {
    (void)device;
    return cudaSuccess;
}
cudaError_t stub_cudaDeviceSynchronize(void) {
    syncs++;
    return cudaSuccess;
}

static carve_arena *arena;

/* The driver's view and carve's of stream s being captured (status Active or
 * Invalidated) or not (None). */
static void capture(cudaStream_t s, enum cudaStreamCaptureStatus status) {
    int i = 0;
    while (i < nmarked && marked[i].stream != s)
        i++;
    if (status != cudaStreamCaptureStatusNone) {
        if (i == nmarked)
            nmarked++;
        marked[i].stream = s;
        marked[i].status = status;
    } else if (i < nmarked) {
        marked[i] = marked[--nmarked];
    }
    CHECK(carve_sim_set_capturing(arena, (carve_stream)s, status != cudaStreamCaptureStatusNone) == CARVE_OK, "%s",
          carve_last_error(arena));
}

static void *pool_alloc(size_t size, cudaStream_t s) { return hook.alloc(hook.user_data, 0, size, s); }
static void pool_free(void *p, cudaStream_t s) { hook.free(hook.user_data, 0, p, s); }
static void *buffer_alloc(size_t size) { return hook.alloc(hook.user_data, 0, size, NULL); }
static void buffer_free(void *p) { hook.free(hook.user_data, 0, p, NULL); }

static int overlaps(const void *p, size_t n, const void *q, size_t m) {
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;
    return p && q && a < b + m && b < a + n;
}

int main(void) {
    CHECK(ggml_carve_init("limit=128MiB") == 0, "%s", ggml_carve_error());
    arena = ggml_carve_arena(0);
    CHECK(arena != NULL && hook.alloc && hook.free, "%s", ggml_carve_error());
    if (!arena) {
        printf("FAILED\n");
        return 1;
    }
    const size_t base = ggml_carve_memory_allocated(0);
    cudaStream_t s1 = STREAM(1), s2 = STREAM(2), s3 = STREAM(3);

    /* Outside any capture: one question per pool allocation, none per free. */
    void *w = pool_alloc(1 * MiB, s1); /* ggml's warm-up evaluation, uncaptured */
    CHECK(w && questions == 1, "a pool allocation asks once (%lu)", questions);
    pool_free(w, s1);
    void *buf = buffer_alloc(2 * MiB);
    buffer_free(buf);
    CHECK(buf && questions == 1 && syncs == 1, "a free and a backend buffer ask nothing (%lu), the buffer's free "
          "synchronizes (%lu)", questions, syncs);
    CHECK(ggml_carve_captured_allocations(0) == 0, "nothing captured yet");

    /* The capture: more than the stream's own pool holds comes from its
     * graph pool; what one operation frees serves the next. */
    capture(s1, cudaStreamCaptureStatusActive);
    void *t1 = pool_alloc(3 * MiB, s1);
    CHECK(t1 != NULL, "a captured allocation past the stream's own pool is served");
    CHECK(ggml_carve_captured_allocations(0) == 1, "counted (%llu)",
          (unsigned long long)ggml_carve_captured_allocations(0));
    pool_free(t1, s1);
    void *t2 = pool_alloc(3 * MiB, s1);
    CHECK(t2 == t1, "the capture's next operation reuses its freed memory (%p, %p)", t2, t1);
    void *t3 = pool_alloc(1 * MiB, s1);
    CHECK(t3 && !overlaps(t3, 1 * MiB, t2, 3 * MiB), "two live at once");
    pool_free(t3, s1);
    pool_free(t2, s1);
    capture(s1, cudaStreamCaptureStatusNone);
    CHECK(ggml_carve_captured_allocations(0) == 3, "three captured (%llu)",
          (unsigned long long)ggml_carve_captured_allocations(0));

    /* After it: the stream's own pool, and the captured memory for nobody. */
    void *q = pool_alloc(3 * MiB, s1);
    CHECK(q && q != t1 && !overlaps(q, 3 * MiB, t1, 3 * MiB) && !overlaps(q, 3 * MiB, t3, 1 * MiB),
          "after the capture the stream allocates from its own pool (%p; captured %p)", q, t1);
    CHECK(ggml_carve_captured_allocations(0) == 3, "not counted");
    pool_free(q, s1);
    CHECK(ggml_carve_empty_cache() == CARVE_OK, "%s", ggml_carve_error());
    CHECK(carve_arena_contains(arena, t1) && carve_arena_contains(arena, t3),
          "ggml_carve_empty_cache keeps the captured memory");
    void *fill[64];
    int nfill = 0, taken = 0;
    while (nfill < 64 && (fill[nfill] = buffer_alloc(4 * MiB)) != NULL) {
        taken |= overlaps(fill[nfill], 4 * MiB, t1, 3 * MiB) || overlaps(fill[nfill], 4 * MiB, t3, 1 * MiB);
        nfill++;
    }
    carve_stats full;
    carve_get_stats(arena, &full);
    CHECK(nfill > 0 && nfill < 64 && full.reserved_bytes + 4 * MiB > LIMIT && !taken,
          "backend buffers fill the arena to its limit (%d of 4 MiB, %zu reserved) without a byte of the captured "
          "memory", nfill, full.reserved_bytes);
    for (int i = 0; i < nfill; i++)
        buffer_free(fill[i]);

    /* A later graph on the same stream shares its pool. */
    carve_stats s_before, s_after;
    carve_get_stats(arena, &s_before);
    capture(s1, cudaStreamCaptureStatusActive);
    void *u1 = pool_alloc(3 * MiB, s1);
    carve_get_stats(arena, &s_after);
    CHECK(u1 == t1 && s_after.reserved_bytes == s_before.reserved_bytes,
          "a second capture on the stream reuses its graph pool (%p, %p; %zu reserved, %zu before)", u1, t1,
          s_after.reserved_bytes, s_before.reserved_bytes);
    /* Two streams captured at once (a capture forking onto s2): a pool each. */
    capture(s2, cudaStreamCaptureStatusInvalidated);
    pool_free(u1, s1);
    void *u2 = pool_alloc(3 * MiB, s2);
    CHECK(u2 && !overlaps(u2, 3 * MiB, t1, 3 * MiB), "another stream's capture has a graph pool of its own");
    CHECK(ggml_carve_captured_allocations(0) == 5, "an invalidated capture is a capture (%llu)",
          (unsigned long long)ggml_carve_captured_allocations(0));
    pool_free(u2, s2);
    capture(s1, cudaStreamCaptureStatusNone);
    capture(s2, cudaStreamCaptureStatusNone);

    /* Twenty streams captured in turn, each destroyed right after (as
     * ggml_backend_free does): no route outlives a capture. */
    unsigned long asked = questions;
    int served = 0;
    for (int i = 0; i < 20; i++) {
        cudaStream_t s = STREAM(100 + i);
        capture(s, cudaStreamCaptureStatusActive);
        void *p = pool_alloc(64 * 1024, s);
        served += p != NULL;
        pool_free(p, s);
        capture(s, cudaStreamCaptureStatusNone);
        destroyed[ndestroyed++] = s;
    }
    CHECK(served == 20, "every capture served (%d of 20): routes end with the capture's last buffer", served);
    CHECK(questions == asked + 20, "one question per captured allocation, none per free (%lu)", questions - asked);
    void *after = pool_alloc(1 * MiB, s2);
    pool_free(after, s2);
    CHECK(ggml_carve_empty_cache() == CARVE_OK, "%s", ggml_carve_error());
    CHECK(questions_destroyed == 0, "a destroyed stream was asked about %lu times", questions_destroyed);

    /* A buffer that outlives its capture. */
    capture(s3, cudaStreamCaptureStatusActive);
    void *v = pool_alloc(2 * MiB, s3);
    capture(s3, cudaStreamCaptureStatusNone);
    void *x = pool_alloc(2 * MiB, s3);
    CHECK(v && x && !overlaps(x, 2 * MiB, v, 2 * MiB), "the first allocation after the capture ends the route");
    pool_free(v, s3);
    pool_free(x, s3);
    capture(s3, cudaStreamCaptureStatusActive);
    void *v2 = pool_alloc(2 * MiB, s3);
    CHECK(v2 == v, "the late free went back to the graph pool (%p, %p)", v2, v);
    pool_free(v2, s3);
    capture(s3, cudaStreamCaptureStatusNone);

    CHECK(ggml_carve_memory_allocated(0) == base, "allocated %zu, %zu before", ggml_carve_memory_allocated(0), base);
    CHECK(ggml_carve_empty_cache() == CARVE_OK && ggml_carve_memory_reserved(0) > 0,
          "the graph pools keep their memory (%zu reserved)", ggml_carve_memory_reserved(0));
    CHECK(ggml_carve_captured_allocations(-1) == 0 && ggml_carve_captured_allocations(64) == 0, "out of range");
    ggml_carve_report(stdout);
    printf("%s\n", failures ? "FAILED" : "all checks passed");
    return failures ? 1 : 0;
}
