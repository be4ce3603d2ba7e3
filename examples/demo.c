/*
 * demo.c — carve in one screen.
 *
 * On a machine with a CUDA device it runs on the GPU (CUDA backend, real
 * device memory, the matmul and reduce kernels on carved buffers); without
 * one it runs the same allocator on the VIRTUAL backend (addresses only), so
 * it shows something meaningful anywhere:
 *   1. churn: 1000 live buffers, random frees and log-uniform allocations;
 *      speed, memory allocated / reserved, peaks, footprint;
 *   2. an arena under a hard limit: what an out-of-memory error explains;
 *   3. empty_cache and destroy giving memory back (the driver's free memory,
 *      on a GPU);
 *   4. on a GPU: C = A*B and sum(C) on buffers from the arena.
 * Usage: carve-demo [--virtual] [--steps N]   (N from 1 to 100000000; exit 2 for bad options)
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "carve.h"
#include "carve_kernels.h"

#ifdef CARVE_DEMO_CUDA
#include <cuda_runtime_api.h>
#endif

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng_state = 12345;
static uint64_t rng(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static size_t loguniform(double lo, double hi) {
    double u = (double)(rng() >> 11) / 9007199254740992.0;
    return (size_t)exp(log(lo) + u * (log(hi) - log(lo)));
}

static const char *mib(char *buf, size_t bytes) {
    snprintf(buf, 32, "%.1f MiB", (double)bytes / 1048576.0);
    return buf;
}

static int fail(const char *what, carve_status st, const carve_arena *a) {
    fprintf(stderr, "demo: %s: %s: %s\n", what, carve_status_str(st), carve_last_error(a));
    return 1;
}

static carve_arena *make_arena(carve_backend be, const char *name, size_t limit) {
    carve_config c;
    carve_config_init(&c);
    c.backend = be;
    c.name = name;
    c.limit_bytes = limit;
    carve_arena *a = NULL;
    carve_status st = carve_arena_create(&c, &a);
    if (st != CARVE_OK)
        fail("carve_arena_create", st, NULL);
    return a;
}

static int churn(carve_backend be, long steps) {
    char b1[32], b2[32], b3[32], b4[32];
    carve_arena *a = make_arena(be, "churn", 0);
    if (!a)
        return 1;
    enum { LIVE = 1000 };
    void *buf[LIVE];
    for (int i = 0; i < LIVE; i++) {
        carve_status st = carve_alloc(a, loguniform(256, 16 << 20), NULL, &buf[i]);
        if (st != CARVE_OK)
            return fail("carve_alloc", st, a);
    }
    /* Draw the random sizes and victims first: time only the allocator. */
    size_t *sizes = malloc(sizeof(size_t) * (size_t)steps);
    int *victims = malloc(sizeof(int) * (size_t)steps);
    if (!sizes || !victims) {
        fprintf(stderr, "demo: no host memory for %ld steps (%.1f MiB)\n", steps,
                (double)steps * (double)(sizeof(size_t) + sizeof(int)) / 1048576.0);
        free(sizes);
        free(victims);
        return 1;
    }
    for (long i = 0; i < steps; i++) {
        sizes[i] = loguniform(256, 16 << 20);
        victims[i] = (int)(rng() % LIVE);
    }
    double t0 = now_s();
    for (long i = 0; i < steps; i++) {
        int v = victims[i];
        carve_free(a, buf[v]);
        carve_status st = carve_alloc(a, sizes[i], NULL, &buf[v]);
        if (st != CARVE_OK)
            return fail("carve_alloc", st, a);
    }
    double dt = now_s() - t0;
    free(sizes);
    free(victims);
    carve_stats s;
    carve_get_stats(a, &s);
    printf("1. churn: %d live buffers, %ld steps of free + log-uniform alloc (256 B .. 16 MiB)\n", LIVE, steps);
    printf("   %.1f ns per operation (alloc or free)\n", dt * 1e9 / (2.0 * (double)steps));
    printf("   allocated %s (peak %s), reserved %s (peak %s)\n", mib(b1, s.allocated_bytes),
           mib(b2, s.allocated_bytes_peak), mib(b3, s.reserved_bytes), mib(b4, s.reserved_bytes_peak));
    carve_config eff;
    carve_arena_get_config(a, &eff);
    if (eff.vmm) /* the default where the backend maps granules */
        printf("   footprint: reserved peak / requested peak = %.3f; virtual-memory mode: %llu granule maps, "
               "%llu unmaps\n", (double)s.reserved_bytes_peak / (double)s.requested_bytes_peak,
               (unsigned long long)s.num_backend_allocs - s.num_segments, (unsigned long long)s.num_backend_frees);
    else
        printf("   footprint: reserved peak / requested peak = %.3f; segments mode: %zu segments, %llu reserved in all\n",
               (double)s.reserved_bytes_peak / (double)s.requested_bytes_peak, s.num_segments,
               (unsigned long long)s.num_backend_allocs);
    for (int i = 0; i < LIVE; i++)
        carve_free(a, buf[i]);
    carve_arena_destroy(a);
    return 0;
}

static int oom(carve_backend be) {
    carve_arena *a = make_arena(be, "capped", 256 << 20);
    if (!a)
        return 1;
    void *p[64];
    int n = 0;
    carve_status st;
    while (n < 64 && (st = carve_alloc(a, 40 << 20, NULL, &p[n])) == CARVE_OK)
        n++;
    printf("\n2. an arena with limit=256MiB: %d buffers of 40 MiB fit, the next one fails with %s:\n   %s\n", n,
           carve_status_str(st), carve_last_error(a));
    carve_free(a, p[0]);
    st = carve_alloc(a, 40 << 20, NULL, &p[0]);
    printf("   after one free the arena keeps working: %s\n", carve_status_str(st));
    for (int i = 0; i < n; i++)
        carve_free(a, p[i]);
    carve_arena_destroy(a);
    return 0;
}

static int release(carve_backend be) {
    char b1[32], b2[32], b3[32];
    size_t free0 = 0, free1 = 0, free2 = 0, free3 = 0, total = 0;
    int gpu = be == CARVE_BACKEND_CUDA;
    if (gpu)
        carve_device_mem_info(0, &free0, &total);
    carve_arena *a = make_arena(be, "release", 0);
    if (!a)
        return 1;
    void *p[32];
    for (int i = 0; i < 32; i++)
        if (carve_alloc(a, 32 << 20, NULL, &p[i]) != CARVE_OK)
            return fail("carve_alloc", CARVE_ERR_OOM, a);
    if (gpu)
        carve_device_mem_info(0, &free1, &total);
    for (int i = 0; i < 32; i++)
        carve_free(a, p[i]);
    size_t cached = carve_memory_reserved(a);
    carve_empty_cache(a);
    if (gpu)
        carve_device_mem_info(0, &free2, &total);
    printf("\n3. 32 buffers of 32 MiB allocated and freed: %s stays cached; after carve_empty_cache "
           "reserved is %s\n", mib(b1, cached), mib(b2, carve_memory_reserved(a)));
    if (gpu) {
        printf("   device free memory: %s before, %s with the buffers, %s after empty_cache\n", mib(b1, free0),
               mib(b2, free1), mib(b3, free2));
    }
    carve_arena_destroy(a);
    if (gpu) {
        carve_device_mem_info(0, &free3, &total);
        printf("   after carve_arena_destroy: %s free (baseline %s)\n", mib(b1, free3), mib(b2, free0));
    }
    return 0;
}

#ifdef CARVE_DEMO_CUDA
static int kernels(void) {
    carve_arena *a = make_arena(CARVE_BACKEND_CUDA, "kernels", 0);
    if (!a)
        return 1;
    const int n = 1024;
    size_t bytes = (size_t)n * n * sizeof(float);
    float *A, *B, *C, *sum, *h = malloc(bytes);
    carve_alloc(a, bytes, NULL, (void **)&A);
    carve_alloc(a, bytes, NULL, (void **)&B);
    carve_alloc(a, bytes, NULL, (void **)&C);
    carve_alloc(a, sizeof(float), NULL, (void **)&sum);
    for (size_t i = 0; i < (size_t)n * n; i++)
        h[i] = (float)(i % 7) * 0.25f;
    cudaMemcpy(A, h, bytes, cudaMemcpyHostToDevice);
    for (size_t i = 0; i < (size_t)n * n; i++)
        h[i] = 1.0f;
    cudaMemcpy(B, h, bytes, cudaMemcpyHostToDevice);
    carve_status st = carve_matmul_f32(NULL, n, n, n, A, B, C);
    if (st == CARVE_OK)
        st = carve_reduce_sum_f32(a, NULL, C, (size_t)n * n, sum);
    float got = 0;
    cudaMemcpy(&got, sum, sizeof(float), cudaMemcpyDeviceToHost);
    /* Row r of A*B is n * rowsum(A_r); the total is n * sum(A). */
    double want = 0;
    for (size_t i = 0; i < (size_t)n * n; i++)
        want += (double)((float)(i % 7) * 0.25f);
    want *= n;
    printf("\n4. on the GPU: C = A*B (%dx%d fp32) and sum(C) on carved buffers: %s, sum %.6g (expected %.6g)\n", n,
           n, carve_status_str(st), (double)got, want);
    carve_free(a, A);
    carve_free(a, B);
    carve_free(a, C);
    carve_free(a, sum);
    carve_arena_destroy(a);
    free(h);
    return st != CARVE_OK || fabs(got - want) > 1e-3 * want;
}
#endif

#define MAX_STEPS 100000000L /* 1.2 GB of drawn sizes and victims */

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "carve-demo: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nusage: carve-demo [--virtual] [--steps N]   (N: 1 to %ld, default 200000)\n", MAX_STEPS);
    return 2;
}

/* A step count: digits only, 1 to MAX_STEPS. */
static int parse_steps(const char *v, long *out) {
    if (!*v || strspn(v, "0123456789") != strlen(v) || strlen(v) > 9)
        return -1;
    long n = strtol(v, NULL, 10);
    if (n < 1 || n > MAX_STEPS)
        return -1;
    *out = n;
    return 0;
}

int main(int argc, char **argv) {
    long steps = 200000;
    int force_virtual = 0, steps_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (!strcmp(a, "--virtual")) {
            force_virtual = 1;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: carve-demo [--virtual] [--steps N]\n"
                   "  --virtual   the virtual backend even when there is a GPU\n"
                   "  --steps N   churn steps, 1 to %ld (default 200000)\n"
                   "Exit status: 0 when every part ran, 1 when one failed, 2 for bad options.\n", MAX_STEPS);
            return 0;
        }
        if (!strcmp(a, "--steps")) {
            if (i + 1 == argc)
                return usage_error("--steps needs a value");
            v = argv[++i];
        } else if (!strncmp(a, "--steps=", 8)) {
            v = a + 8;
        } else {
            return usage_error("unknown option '%s'", a);
        }
        if (steps_given++)
            return usage_error("--steps given twice");
        if (parse_steps(v, &steps) != 0)
            return usage_error("--steps takes a whole number of steps from 1 to 100000000, not '%s'", v);
    }
    int gpu = !force_virtual && carve_device_count() > 0;
    carve_backend be = gpu ? CARVE_BACKEND_CUDA : CARVE_BACKEND_VIRTUAL;
    printf("carve %s demo on the %s backend%s\n\n", carve_version(), carve_backend_str(be),
           gpu ? " (GPU 0)" : " (no CUDA device found: addresses only, nothing behind them)");
    int rc = churn(be, steps) || oom(be) || release(be);
#ifdef CARVE_DEMO_CUDA
    if (!rc && gpu)
        rc = kernels();
#endif
    printf("\n%s\n", rc ? "demo FAILED" : "demo done");
    return rc;
}
