/*
 * test_reduce.c — carve_reduce_sum_f32 on the GPU against a float64 host
 * reference, for n from 1 to 2^30, and its use of the arena.
 *
 * Three inputs per n, all never zero:
 *  - "signs": x = +1 or -1. Every partial sum of any order is an integer of
 *    magnitude far below 2^24 (a random walk: about sqrt(n) <= 2^15 for
 *    n = 2^30), so fp32 sums it exactly whatever the tree: the result must
 *    equal the exact sum. A dropped, doubled or misread element fails.
 *  - "positive": uniform in [1/64, 1].
 *  - "mixed": the same magnitudes with random signs.
 *   For these two, |out - ref| <= tol(n) * sum|x| with
 *   tol(n) = 1e-6 * log2(n) + 4 * 2^-24. Any fp32 summation whose tree has
 *   depth d errs by at most about d * 2^-24 * sum|x| (Higham's gamma_d bound);
 *   with rounding errors behaving as a random walk the typical error is
 *   about sqrt(d) * 2^-24 * sum|x|. CUB sums a few hundred to a few thousand
 *   elements per thread serially, then a tree over the threads: sqrt(d) *
 *   2^-24 stays near 1e-6 even at n = 2^30, under tol(n) (3e-5 there) by an
 *   order of magnitude; the 4 ulps cover tiny n. Scaling by sum|x| (not
 *   |sum|) keeps the bound meaningful for the cancelling "mixed" data.
 * The reference sums blocks of 4096 in double and adds the blocks with
 * Kahan compensation (error ~1e-13 relative: exact for this purpose).
 *
 * Arena use: after a warm-up call, each call carves its temporary storage
 * (num_allocs grows by one per call), reserves nothing new (the storage is
 * reused from the pool's cache), and gives it back (allocated bytes return
 * to the previous value). Bad arguments (misaligned pointers included)
 * return CARVE_ERR_INVALID and launch nothing. cudaStreamPerThread works
 * from four threads at once on one arena, and an arena of the cuda_driver
 * backend (carve-run's) serves as well as a cuda one.
 *
 * CARVE_TEST_QUICK=1 stops at n = 2^20 + 7 (for compute-sanitizer).
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "carve_kernels.h"
#include "ktest.h"

enum kind { SIGNS, POSITIVE, MIXED, NKINDS };
static const char *const kind_name[NKINDS] = {"signs", "positive", "mixed"};

static uint64_t g_seed;

/* Counter-based: element i of a data set depends on (seed, kind, i) only,
 * so generation runs in parallel and any element can be recomputed. */
static float value(enum kind kd, uint64_t i) {
    uint64_t z = g_seed ^ ((uint64_t)kd << 56) ^ (i * 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    int neg = (int)(z & 1);
    if (kd == SIGNS)
        return neg ? -1.f : 1.f;
    float mag = (float)((z >> 40) + 1) / (float)(1u << 24);
    if (mag < 1.f / 64)
        mag = 1.f / 64;
    return kd == MIXED && neg ? -mag : mag;
}

typedef struct {
    float *x;
    size_t lo, hi;
    enum kind kd;
    double sum, asum, comp, acomp; /* Kahan sums over 4096-element blocks */
} gen_job;

static void *gen_worker(void *arg) {
    gen_job *j = arg;
    j->sum = j->asum = j->comp = j->acomp = 0;
    for (size_t b = j->lo; b < j->hi; b += 4096) {
        size_t e = b + 4096 < j->hi ? b + 4096 : j->hi;
        double s = 0, a = 0;
        for (size_t i = b; i < e; i++) {
            float v = value(j->kd, i);
            j->x[i] = v;
            s += v;
            a += fabs((double)v);
        }
        double y = s - j->comp, t = j->sum + y;
        j->comp = (t - j->sum) - y;
        j->sum = t;
        y = a - j->acomp;
        t = j->asum + y;
        j->acomp = (t - j->asum) - y;
        j->asum = t;
    }
    return NULL;
}

/* Fill x[0..n) and return the float64 sum and sum of magnitudes. */
static void generate(float *x, size_t n, enum kind kd, double *sum, double *asum) {
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = ncpu < 1 ? 1 : ncpu > 32 ? 32 : (int)ncpu;
    size_t per = ((n + (size_t)nt - 1) / (size_t)nt + 4095) / 4096 * 4096;
    pthread_t th[32];
    gen_job jobs[32];
    for (int t = 0; t < nt; t++) {
        size_t lo = (size_t)t * per < n ? (size_t)t * per : n, hi = lo + per < n ? lo + per : n;
        jobs[t] = (gen_job){x, lo, hi, kd, 0, 0, 0, 0};
        if (pthread_create(&th[t], NULL, gen_worker, &jobs[t]) != 0) {
            gen_worker(&jobs[t]);
            th[t] = 0;
        }
    }
    double s = 0, cs = 0, a = 0, ca = 0;
    for (int t = 0; t < nt; t++) {
        if (th[t])
            pthread_join(th[t], NULL);
        double y = jobs[t].sum - cs, u = s + y;
        cs = (u - s) - y;
        s = u;
        y = jobs[t].asum - ca;
        u = a + y;
        ca = (u - a) - y;
        a = u;
    }
    *sum = s;
    *asum = a;
}

static void check_sizes(carve_arena *arena, int quick) {
    const size_t sizes[] = {1, 2, 3, 255, 256, 1000, 4097, 65536, 1000003, (1u << 20) + 7, (size_t)1 << 24,
                            (size_t)1 << 28, (size_t)1 << 30};
    size_t maxn = quick ? (1u << 20) + 7 : (size_t)1 << 30;
    float *host = malloc(maxn * sizeof(float));
    void *dx = NULL, *dout = NULL;
    if (!host) {
        fprintf(stderr, "host out of memory for %zu floats\n", maxn);
        exit(1);
    }
    CHECK_OK(arena, carve_alloc(arena, maxn * sizeof(float), NULL, &dx));
    CHECK_OK(arena, carve_alloc(arena, sizeof(float), NULL, &dout));
    if (!dx || !dout)
        exit(1);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        size_t n = sizes[si];
        if (n > maxn)
            continue;
        double t0 = ktest_now();
        for (int kd = 0; kd < NKINDS; kd++) {
            double ref, asum;
            generate(host, n, (enum kind)kd, &ref, &asum);
            CUDA_OK(cudaMemcpy(dx, host, n * sizeof(float), cudaMemcpyHostToDevice));
            CUDA_OK(cudaMemset(dout, 0xFF, sizeof(float))); /* NaN until written */
            CHECK_OK(arena, carve_reduce_sum_f32(arena, NULL, dx, n, dout));
            CUDA_OK(cudaGetLastError());
            CUDA_OK(cudaDeviceSynchronize());
            float got;
            CUDA_OK(cudaMemcpy(&got, dout, sizeof(float), cudaMemcpyDeviceToHost));
            double tol = kd == SIGNS ? 0.0 : (1e-6 * log2((double)(n < 2 ? 2 : n)) + 4.0 / 16777216.0) * asum;
            double err = fabs((double)got - ref);
            test_checks++;
            if (!(err <= tol)) {
                char d[300];
                snprintf(d, sizeof d, "n=%zu %s: got %.9g, reference %.9g, |err| %.3g > tol %.3g (sum|x| %.6g)", n,
                         kind_name[kd], (double)got, ref, err, tol, asum);
                test_fail(__FILE__, __LINE__, "reduce result", d);
            }
            printf("  n=%-11zu %-8s sum %-16.9g ref %-16.9g err/sum|x| %.2e\n", n, kind_name[kd], (double)got,
                   ref, asum > 0 ? err / asum : 0.0);
        }
        printf("n=%zu done (%.1f s)\n", n, ktest_now() - t0);
        fflush(stdout);
    }
    CHECK_OK(arena, carve_free(arena, dx));
    CHECK_OK(arena, carve_free(arena, dout));
    free(host);
}

/* Temporary storage comes from the arena, in stream order, and goes back. */
static void check_arena_use(carve_arena *arena) {
    const size_t n = (size_t)1 << 22;
    cudaStream_t s;
    CUDA_OK(cudaStreamCreate(&s));
    carve_stream cs = (carve_stream)s;
    void *dx, *dout;
    CHECK_OK(arena, carve_alloc(arena, n * sizeof(float), cs, &dx));
    CHECK_OK(arena, carve_alloc(arena, sizeof(float), cs, &dout));
    CUDA_OK(cudaMemsetAsync(dx, 0, n * sizeof(float), s));

    CHECK_OK(arena, carve_reduce_sum_f32(arena, cs, dx, n, dout)); /* warm-up: may reserve */
    CUDA_OK(cudaStreamSynchronize(s));
    carve_stats s0, s1, s2;
    CHECK_OK(arena, carve_get_stats(arena, &s0));
    const int calls = 5;
    for (int i = 0; i < calls; i++)
        CHECK_OK(arena, carve_reduce_sum_f32(arena, cs, dx, n, dout));
    CHECK_OK(arena, carve_get_stats(arena, &s1));
    CHECK(s1.num_allocs == s0.num_allocs + (uint64_t)calls);
    CHECK(s1.num_frees == s0.num_frees + (uint64_t)calls);
    CHECK(s1.reserved_bytes == s0.reserved_bytes);
    CHECK(s1.num_backend_allocs == s0.num_backend_allocs);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaStreamSynchronize(s));
    CHECK_OK(arena, carve_get_stats(arena, &s2));
    CHECK(s2.allocated_bytes == s0.allocated_bytes);
    CHECK(s2.num_live == s0.num_live);
    float got = 1.f;
    CUDA_OK(cudaMemcpy(&got, dout, sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(got == 0.f);
    CHECK_ARENA(arena);

    CHECK_OK(arena, carve_free(arena, dx));
    CHECK_OK(arena, carve_free(arena, dout));
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaStreamDestroy(s));
}

static void check_bad_arguments(carve_arena *arena) {
    const size_t n = 1000;
    void *dx, *dout;
    CHECK_OK(arena, carve_alloc(arena, n * sizeof(float), NULL, &dx));
    CHECK_OK(arena, carve_alloc(arena, sizeof(float), NULL, &dout));
    CUDA_OK(cudaMemset(dx, 0, n * sizeof(float)));
    CUDA_OK(cudaMemset(dout, 0xFF, sizeof(float)));
    float *host = calloc(n, sizeof(float));
    carve_arena *host_arena = test_arena(CARVE_BACKEND_HOST, 1, 0, 0);
    carve_stats before, after;
    CHECK_OK(arena, carve_get_stats(arena, &before));

    CHECK_ST(NULL, carve_reduce_sum_f32(NULL, NULL, dx, n, dout), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_reduce_sum_f32(host_arena, NULL, dx, n, dout), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "host") != NULL);
    CHECK_ST(NULL, carve_reduce_sum_f32(arena, NULL, dx, 0, dout), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_reduce_sum_f32(arena, NULL, NULL, n, dout), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_reduce_sum_f32(arena, NULL, dx, n, NULL), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_reduce_sum_f32(arena, NULL, host, n, dout), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_reduce_sum_f32(arena, NULL, dx, n, (float *)host), CARVE_ERR_INVALID);
    /* fp32 on a 4-byte boundary only. */
    CHECK_ST(NULL, carve_reduce_sum_f32(arena, NULL, (const float *)((const char *)dx + 2), n - 1, dout),
             CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "aligned") != NULL);
    CHECK_ST(NULL, carve_reduce_sum_f32(arena, NULL, dx, n, (float *)((char *)dout + 1)), CARVE_ERR_INVALID);

    /* Nothing launched, nothing carved: out still NaN, stats unchanged. */
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    CHECK_OK(arena, carve_get_stats(arena, &after));
    CHECK(after.num_allocs == before.num_allocs);
    uint32_t bits = 0;
    CUDA_OK(cudaMemcpy(&bits, dout, sizeof bits, cudaMemcpyDeviceToHost));
    CHECK(bits == 0xFFFFFFFFu);

    carve_arena_destroy(host_arena);
    free(host);
    CHECK_OK(arena, carve_free(arena, dx));
    CHECK_OK(arena, carve_free(arena, dout));
}

/* ---- cudaStreamPerThread and the cuda_driver backend ------------------------- */

typedef struct {
    carve_arena *arena;
    int id, calls;
    unsigned long bad;
} pt_job;

/* x[i] = -1 for i % 3 == 0, else 1: the sum, n - 2 * ceil(n / 3), is exact
 * in fp32 in any order. */
static void *per_thread_worker(void *arg) {
    pt_job *job = arg;
    const size_t n = ((size_t)1 << 20) + 1000 * (size_t)job->id;
    float *host = malloc(n * sizeof(float)), *dx = NULL, *dout = NULL;
    if (!host || cudaSetDevice(0) != cudaSuccess || cudaMalloc((void **)&dx, n * sizeof(float)) != cudaSuccess ||
        cudaMalloc((void **)&dout, sizeof(float)) != cudaSuccess) {
        job->bad = 1000000;
        free(host);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        host[i] = i % 3 == 0 ? -1.f : 1.f;
    const float want = (float)((double)n - 2.0 * (double)((n + 2) / 3));
    cudaMemcpy(dx, host, n * sizeof(float), cudaMemcpyHostToDevice);
    for (int c = 0; c < job->calls; c++) {
        float got = NAN;
        cudaMemsetAsync(dout, 0xFF, sizeof(float), cudaStreamPerThread);
        if (carve_reduce_sum_f32(job->arena, (carve_stream)cudaStreamPerThread, dx, n, dout) != CARVE_OK)
            job->bad++;
        cudaMemcpyAsync(&got, dout, sizeof(float), cudaMemcpyDeviceToHost, cudaStreamPerThread);
        if (cudaStreamSynchronize(cudaStreamPerThread) != cudaSuccess || got != want)
            job->bad++;
    }
    cudaFree(dx);
    cudaFree(dout);
    free(host);
    return NULL;
}

/* cudaStreamPerThread is accepted (carve_alloc refuses it: the storage is
 * carved for the legacy stream and held until an event on the per-thread
 * stream completes). Four threads on their own per-thread streams share
 * the arena's storage: every sum must be right, and the storage must go
 * back. */
static void check_per_thread_stream(carve_arena *arena) {
    carve_stats before, after;
    CUDA_OK(cudaDeviceSynchronize());
    CHECK_OK(arena, carve_get_stats(arena, &before));
    enum { THREADS = 4 };
    pthread_t th[THREADS];
    pt_job jobs[THREADS];
    for (int t = 0; t < THREADS; t++) {
        jobs[t] = (pt_job){arena, t, 50, 0};
        if (pthread_create(&th[t], NULL, per_thread_worker, &jobs[t]) != 0) {
            fprintf(stderr, "FAIL: pthread_create\n");
            exit(1);
        }
    }
    unsigned long bad = 0;
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        bad += jobs[t].bad;
    }
    CHECK(bad == 0);
    CUDA_OK(cudaDeviceSynchronize());
    CHECK_OK(arena, carve_get_stats(arena, &after));
    CHECK(after.num_allocs == before.num_allocs + THREADS * 50);
    CHECK(after.allocated_bytes == before.allocated_bytes);
    CHECK(after.num_live == before.num_live);
    CHECK_ARENA(arena);
    printf("cudaStreamPerThread: %d threads x 50 sums, %lu wrong\n", THREADS, bad);
}

/* An arena of the cuda_driver backend (carve-run's) is device memory: it
 * holds x and the temporary storage. */
static void check_driver_arena(void) {
    carve_arena *drv = test_arena(CARVE_BACKEND_CUDA_DRIVER, 1, 0, 0);
    const size_t n = 100003;
    void *dx = NULL, *dout = NULL;
    CHECK_OK(drv, carve_alloc(drv, n * sizeof(float), NULL, &dx));
    CHECK_OK(drv, carve_alloc(drv, sizeof(float), NULL, &dout));
    CUDA_OK(cudaMemset(dx, 0, n * sizeof(float)));
    const float one = 1.f;
    CUDA_OK(cudaMemcpy((float *)dx + n - 1, &one, 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(dout, 0xFF, sizeof(float)));
    CHECK_OK(drv, carve_reduce_sum_f32(drv, NULL, dx, n, dout));
    CUDA_OK(cudaDeviceSynchronize());
    float got = 0.f;
    CUDA_OK(cudaMemcpy(&got, dout, 4, cudaMemcpyDeviceToHost));
    CHECK(got == 1.f);
    CHECK(carve_memory_allocated(drv) > 0);
    CHECK_OK(drv, carve_free(drv, dx));
    CHECK_OK(drv, carve_free(drv, dout));
    CHECK(carve_memory_allocated(drv) == 0);
    CHECK_ARENA(drv);
    carve_arena_destroy(drv);
}

int main(void) {
    ktest_require_device();
    const int quick = ktest_quick();
    g_seed = test_seed(0x4ed0ceull);
    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(cudaFree(NULL));
    size_t free_before = ktest_free_bytes();
    carve_arena *arena = ktest_arena();

    check_bad_arguments(arena);
    check_arena_use(arena);
    check_per_thread_stream(arena);
    check_driver_arena();
    double t0 = ktest_now();
    check_sizes(arena, quick);
    printf("reduce sizes: %.1f s\n", ktest_now() - t0);

    CHECK_ARENA(arena);
    carve_arena_destroy(arena);
    CHECK(ktest_free_bytes() + ((size_t)8 << 20) >= free_before);
    return test_finish();
}
