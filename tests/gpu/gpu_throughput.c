/*
 * gpu_throughput.c — what an alloc/free pair costs on the GPU: carve's fast
 * path against cudaMalloc + cudaFree and cudaMallocAsync + cudaFreeAsync.
 *
 * Information only: numbers are printed, never asserted (machines differ).
 * The statuses are checked, and the usual leak check runs around each case
 * (the stream-ordered pool of cudaMallocAsync is trimmed afterwards).
 */
#include "gpu_util.h"

#include <pthread.h>

#define NTHREADS 4

static cudaStream_t s0;

static void row(const char *what, double seconds, long pairs) {
    printf("  %-44s %10.1f ns/pair  (%ld pairs)\n", what, seconds * 1e9 / (double)pairs, pairs);
}

static carve_arena *arena(void) {
    carve_config c;
    carve_config_init(&c);
    c.name = "throughput";
    carve_arena *a = NULL;
    CHECK_OK(NULL, carve_arena_create(&c, &a));
    if (!a)
        exit(1);
    return a;
}

static double carve_pairs(carve_arena *a, cudaStream_t s, const size_t *sizes, int nsizes, long n,
                          unsigned long *bad) {
    void *p;
    /* Warm: the pool holds a span for every size before timing starts. */
    for (int i = 0; i < nsizes; i++) {
        if (carve_alloc(a, sizes[i], s, &p) != CARVE_OK || carve_free(a, p) != CARVE_OK)
            (*bad)++;
    }
    double t0 = gpu_now();
    for (long i = 0; i < n; i++) {
        if (carve_alloc(a, sizes[i % nsizes], s, &p) != CARVE_OK || carve_free(a, p) != CARVE_OK)
            (*bad)++;
    }
    return gpu_now() - t0;
}

typedef struct targ {
    carve_arena *a;
    cudaStream_t s;
    long n;
    double secs;
    unsigned long bad;
} targ;

static void *thread_pairs(void *arg) {
    targ *t = arg;
    static const size_t one[] = {1 << 20};
    t->secs = carve_pairs(t->a, t->s, one, 1, t->n, &t->bad);
    return NULL;
}

static void case_alloc_free_pairs(void) {
    long n = gpu_scale(1000000, 20000), n_async = gpu_scale(200000, 5000), n_malloc = gpu_scale(2000, 100);
    static const size_t one[] = {1 << 20};
    static const size_t mix[] = {256, 4096, 65536, 1 << 20, 4 << 20, 16 << 20};
    unsigned long bad = 0;
    carve_arena *a = arena();

    row("carve_alloc+carve_free, 1 MiB, one stream", carve_pairs(a, s0, one, 1, n, &bad), n);
    row("carve_alloc+carve_free, 256 B..16 MiB cycled", carve_pairs(a, s0, mix, 6, n, &bad), n);
    row("carve_alloc+carve_free, 1 MiB, default stream", carve_pairs(a, NULL, one, 1, n, &bad), n);

    targ t[NTHREADS];
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        t[i] = (targ){a, gpu_stream_new(), n / 4, 0, 0};
        CHECK(pthread_create(&th[i], NULL, thread_pairs, &t[i]) == 0);
    }
    double worst = 0;
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        bad += t[i].bad;
        worst = t[i].secs > worst ? t[i].secs : worst;
        gpu_stream_free(t[i].s);
    }
    row("carve, 1 MiB, 4 threads on own streams (each)", worst, n / 4);
    CHECK(bad == 0);
    CHECK_ARENA(a);
    carve_arena_destroy(a);

    /* cudaMallocAsync with a pool that keeps its memory, as carve does. */
    cudaMemPool_t pool;
    CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    uint64_t keep = UINT64_MAX, zero = 0;
    CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    void *p;
    CUDA_CHECK(cudaMallocAsync(&p, 1 << 20, s0));
    CUDA_CHECK(cudaFreeAsync(p, s0));
    double t0 = gpu_now();
    for (long i = 0; i < n_async; i++) {
        CUDA_CHECK(cudaMallocAsync(&p, 1 << 20, s0));
        CUDA_CHECK(cudaFreeAsync(p, s0));
    }
    row("cudaMallocAsync+cudaFreeAsync, 1 MiB", gpu_now() - t0, n_async);
    CUDA_CHECK(cudaStreamSynchronize(s0));
    CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &zero));
    CUDA_CHECK(cudaMemPoolTrimTo(pool, 0));

    t0 = gpu_now();
    for (long i = 0; i < n_malloc; i++) {
        CUDA_CHECK(cudaMalloc(&p, 1 << 20));
        CUDA_CHECK(cudaFree(p));
    }
    row("cudaMalloc+cudaFree, 1 MiB", gpu_now() - t0, n_malloc);
}

/* A small kernel workload with a fresh buffer per launch: what the
 * allocator adds to a stream of real work. */
static void case_alloc_per_launch(void) {
    long n = gpu_scale(20000, 500);
    carve_arena *a = arena();
    gpu_counter c = gpu_counter_of(0, 0);
    void *p;
    double t0 = gpu_now();
    for (long i = 0; i < n; i++) {
        CHECK_OK(a, carve_alloc(a, 64 << 10, s0, &p));
        gpu_fill(p, 64 << 10, (uint64_t)i, s0);
        gpu_verify(p, 64 << 10, (uint64_t)i, c.dev, s0);
        CHECK_OK(a, carve_free(a, p));
    }
    CUDA_CHECK(cudaStreamSynchronize(s0));
    double with = gpu_now() - t0;
    CHECK(gpu_counter_take(c, s0) == 0);
    CHECK_OK(a, carve_alloc(a, 64 << 10, s0, &p));
    t0 = gpu_now();
    for (long i = 0; i < n; i++) {
        gpu_fill(p, 64 << 10, (uint64_t)i, s0);
        gpu_verify(p, 64 << 10, (uint64_t)i, c.dev, s0);
    }
    CUDA_CHECK(cudaStreamSynchronize(s0));
    double without = gpu_now() - t0;
    CHECK(gpu_counter_take(c, s0) == 0);
    CHECK_OK(a, carve_free(a, p));
    printf("  fill+verify of 64 KiB, %ld times: %.1f us each with a carve buffer per iteration, %.1f us "
           "with one buffer\n",
           n, with * 1e6 / (double)n, without * 1e6 / (double)n);
    carve_arena_destroy(a);
}

int main(void) {
    gpu_start("gpu_throughput", 1);
    s0 = gpu_stream_new();
    GPU_CASE(case_alloc_free_pairs);
    GPU_CASE(case_alloc_per_launch);
    gpu_stream_free(s0);
    return gpu_finish();
}
