/* gpu_util.c — host side of gpu_util.h: start-up, counters, leak marks, cases. */
#include "gpu_util.h"
#include "base/text.h" /* carve_format_bytes */

#include <time.h>

static int g_ndev;
static int g_quick = -1;
static gpu_counter g_counters[GPU_MAX_DEVICES][GPU_COUNTERS];

void gpu_die(const char *file, int line, const char *what, int err) {
    cudaError_t e = (cudaError_t)err;
    fprintf(stderr, "FATAL %s:%d: %s: %s (%s)\n", file, line, what, cudaGetErrorName(e), cudaGetErrorString(e));
    fprintf(stderr, "(an error reported here may have been left by an earlier call)\n");
    exit(1);
}

int gpu_quick(void) {
    if (g_quick < 0) {
        const char *q = getenv("CARVE_TEST_QUICK");
        g_quick = q && *q && strcmp(q, "0") != 0;
    }
    return g_quick;
}

long gpu_scale(long n, long quick_n) { return gpu_quick() ? quick_n : n; }

double gpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void gpu_set_device(int dev) { CUDA_CHECK(cudaSetDevice(dev)); }

int gpu_get_device(void) {
    int d = -1;
    CUDA_CHECK(cudaGetDevice(&d));
    return d;
}

cudaStream_t gpu_stream_new(void) {
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
}

void gpu_stream_free(cudaStream_t s) {
    CUDA_CHECK(cudaStreamSynchronize(s));
    CUDA_CHECK(cudaStreamDestroy(s));
}

const char *gpu_fmt(char *buf, size_t len, size_t bytes) { return carve_format_bytes(buf, len, bytes); }

/* Everything a test will use once, so that lazy module loading, counter
 * memory and the driver's first stream and event pools are in place before
 * any leak mark is taken. */
static void warm_up(int dev) {
    gpu_set_device(dev);
    CUDA_CHECK(cudaFree(NULL));
    unsigned long long *dc;
    CUDA_CHECK(cudaMalloc((void **)&dc, GPU_COUNTERS * sizeof(*dc)));
    CUDA_CHECK(cudaMemset(dc, 0, GPU_COUNTERS * sizeof(*dc)));
    unsigned long long *hc;
    CUDA_CHECK(cudaHostAlloc((void **)&hc, GPU_COUNTERS * sizeof(*hc), cudaHostAllocDefault));
    for (int i = 0; i < GPU_COUNTERS; i++) {
        hc[i] = 0;
        g_counters[dev][i].dev = dc + i;
        g_counters[dev][i].host = hc + i;
    }
    void *buf;
    CUDA_CHECK(cudaMalloc(&buf, 4096));
    cudaStream_t s = gpu_stream_new();
    cudaEvent_t ev[64];
    for (int i = 0; i < 64; i++) {
        CUDA_CHECK(cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventRecord(ev[i], s));
    }
    gpu_fill(buf, 4093, 1, s);
    gpu_late_fill(buf, 4093, 1, 0, s);
    gpu_verify(buf, 4093, 1, dc, s);
    gpu_fill_ramp(buf, 1024, 1.0f, s);
    gpu_verify_ramp(buf, 1024, 1.0f, dc, s);
    CUDA_CHECK(cudaStreamSynchronize(s));
    CUDA_CHECK(cudaMemset(dc, 0, GPU_COUNTERS * sizeof(*dc)));
    for (int i = 0; i < 64; i++)
        CUDA_CHECK(cudaEventDestroy(ev[i]));
    gpu_stream_free(s);
    CUDA_CHECK(cudaFree(buf));
    CUDA_CHECK(cudaDeviceSynchronize());
}

int gpu_start(const char *test, int min_devices) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n < 1) {
        (void)cudaGetLastError();
        printf("SKIP: no CUDA device\n");
        printf("(%s: cudaGetDeviceCount gave %s, %d devices)\n", test,
               e != cudaSuccess ? cudaGetErrorName(e) : "cudaSuccess", n);
        exit(GPU_SKIP);
    }
    if (n < min_devices) {
        printf("SKIP: %s needs %d CUDA devices, %d visible\n", test, min_devices, n);
        exit(GPU_SKIP);
    }
    if (n > GPU_MAX_DEVICES)
        n = GPU_MAX_DEVICES;
    g_ndev = n;
    printf("%s: carve %s, %d device%s%s\n", test, carve_version(), n, n == 1 ? "" : "s",
           gpu_quick() ? ", quick mode" : "");
    for (int d = 0; d < n; d++) {
        struct cudaDeviceProp p;
        CUDA_CHECK(cudaGetDeviceProperties(&p, d));
        char b[32];
        printf("  device %d: %s, %s, sm_%d%d, %d SMs\n", d, p.name, gpu_fmt(b, sizeof(b), p.totalGlobalMem),
               p.major, p.minor, p.multiProcessorCount);
        warm_up(d);
    }
    gpu_set_device(0);
    CHECK(carve_device_count() >= n);
    return n;
}

int gpu_finish(void) {
    for (int d = 0; d < g_ndev; d++) {
        gpu_set_device(d);
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaFree(g_counters[d][0].dev));
        CUDA_CHECK(cudaFreeHost(g_counters[d][0].host));
    }
    if (g_ndev)
        gpu_set_device(0);
    return test_finish();
}

gpu_counter gpu_counter_of(int device, int slot) {
    if (device < 0 || device >= g_ndev || slot < 0 || slot >= GPU_COUNTERS) {
        fprintf(stderr, "FATAL: gpu_counter_of(%d, %d): no such counter\n", device, slot);
        exit(1);
    }
    return g_counters[device][slot];
}

unsigned long long gpu_counter_take(gpu_counter c, cudaStream_t s) {
    CUDA_CHECK(cudaMemcpyAsync(c.host, c.dev, sizeof(*c.dev), cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaMemsetAsync(c.dev, 0, sizeof(*c.dev), s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    return *c.host;
}

unsigned long long gpu_mismatches(gpu_counter c, const void *buf, size_t bytes, uint64_t id, cudaStream_t s) {
    gpu_verify(buf, bytes, id, c.dev, s);
    return gpu_counter_take(c, s);
}

void gpu_mark_take(gpu_mark *m, int device) {
    int prev = gpu_get_device();
    gpu_set_device(device);
    CUDA_CHECK(cudaDeviceSynchronize());
    m->device = device;
    CUDA_CHECK(cudaMemGetInfo(&m->free_bytes, &m->total_bytes));
    gpu_set_device(prev);
}

size_t gpu_free_now(int device) {
    gpu_mark m;
    gpu_mark_take(&m, device);
    return m.free_bytes;
}

size_t gpu_mark_used(const gpu_mark *m) {
    size_t now = gpu_free_now(m->device);
    return now < m->free_bytes ? m->free_bytes - now : 0;
}

size_t gpu_slack(void) {
    const char *s = getenv("CARVE_TEST_MEM_SLACK_MIB");
    return (s && *s ? (size_t)strtoull(s, NULL, 10) : 8) * MiB;
}

size_t gpu_tolerance(size_t nsegments) { return gpu_slack() + nsegments * CARVE_SEGMENT_GRANULE; }

void gpu_check_back(const gpu_mark *m, const char *what, const char *file, int line) {
    size_t used = gpu_mark_used(m);
    test_checks++;
    if (used > gpu_slack()) {
        char d[256], b1[32], b2[32];
        snprintf(d, sizeof(d), "device %d: %s of device memory not given back (slack %s)", m->device,
                 gpu_fmt(b1, sizeof(b1), used), gpu_fmt(b2, sizeof(b2), gpu_slack()));
        test_fail(file, line, what, d);
    }
}

void gpu_check_usage(const gpu_mark *m, size_t reserved, size_t nsegments, const char *what, const char *file,
                     int line) {
    size_t used = gpu_mark_used(m), tol = gpu_tolerance(nsegments);
    test_checks++;
    if (used > reserved + tol || used + tol < reserved) {
        char d[320], b1[32], b2[32], b3[32];
        snprintf(d, sizeof(d),
                 "device %d: the driver shows %s taken, carve reserved %s in %zu segments (tolerance %s)",
                 m->device, gpu_fmt(b1, sizeof(b1), used), gpu_fmt(b2, sizeof(b2), reserved), nsegments,
                 gpu_fmt(b3, sizeof(b3), tol));
        test_fail(file, line, what, d);
    }
}

void gpu_run_case(const char *name, void (*fn)(void)) { gpu_run_case_opt(name, fn, 1); }

void gpu_run_case_opt(const char *name, void (*fn)(void), int leak_check) {
    gpu_mark marks[GPU_MAX_DEVICES];
    for (int d = 0; d < g_ndev; d++)
        gpu_mark_take(&marks[d], d);
    unsigned long f0 = test_failures;
    double t0 = gpu_now();
    printf("[ RUN  ] %s\n", name);
    fn();
    for (int d = 0; leak_check && d < g_ndev; d++)
        gpu_check_back(&marks[d], name, __FILE__, __LINE__);
    cudaError_t e = cudaGetLastError();
    test_checks++;
    if (e != cudaSuccess)
        test_fail(__FILE__, __LINE__, name, cudaGetErrorName(e));
    int dev = gpu_get_device();
    test_checks++;
    if (dev != 0)
        test_fail(__FILE__, __LINE__, name, "the case left a current device other than 0");
    printf("[ %s ] %s (%.2f s)\n", test_failures == f0 ? " OK " : "FAIL", name, gpu_now() - t0);
}

carve_stats gpu_stats(const carve_arena *a) {
    carve_stats s;
    CHECK_OK(a, carve_get_stats(a, &s));
    return s;
}

carve_arena *gpu_arena_conf(const char *conf, const char *name) {
    carve_config c;
    carve_config_init(&c);
    CHECK_OK(NULL, carve_config_parse(&c, conf));
    c.name = name;
    carve_arena *a = NULL;
    CHECK_OK(NULL, carve_arena_create(&c, &a));
    if (!a)
        exit(1);
    return a;
}

carve_arena *gpu_arena(int device, int growth, size_t initial, size_t limit, const char *name) {
    char conf[160];
    snprintf(conf, sizeof(conf), "device=%d,growth=%d,initial=%zu,limit=%zu", device, growth, initial, limit);
    return gpu_arena_conf(conf, name);
}
