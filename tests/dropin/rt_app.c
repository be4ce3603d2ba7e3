/*
 * rt_app.c — a program that allocates through a shared CUDA runtime, for the
 * interposer's exported runtime functions (runtime.c), run by
 * test_dropin_cpu.py against the mock driver and mock runtime, with and
 * without carve-run.
 *
 * The one idea: the runtime lives only in libraries the program loads with
 * RTLD_LOCAL (rt_user.c, rt_tail.c), as in a Python program, and the mock
 * runtime counts the calls that reach it. So the program can tell a call
 * the interposer answered itself (the count does not move) from one it
 * passed on, and check that what was passed on is exactly what must be:
 * the runtime's start, calls during a graph capture, foreign pointers, and
 * every failure, whose error cudaGetLastError then reports as the runtime
 * does. Prints "OK runtime key=value ..." (the test reads the figures), or
 * "FAIL ..." lines and exits 1.
 *
 * Usage: dropin_rt_app DIR   (DIR holds librt_user.so and librt_tail.so)
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mock_api.h"

static int failures;

static struct {
    int (*malloc_)(void **, size_t);
    int (*free_)(void *);
    int (*malloc_async)(void **, size_t, CUstream);
    int (*malloc_async_ptsz)(void **, size_t, CUstream);
    int (*free_async)(void *, CUstream);
    int (*free_async_ptsz)(void *, CUstream);
    int (*last_error)(void);
    int (*peek_error)(void);
    unsigned long long (*calls)(void);
    int (*tail_malloc)(void **, size_t);
    int (*tail_free)(void *);
} rt;

static void *sym(void *h, const char *name) {
    void *p = h ? dlsym(h, name) : NULL;
    if (!p) {
        printf("FAIL: %s not found\n", name);
        exit(1);
    }
    return p;
}
#define SYM(field, h, name) do { void *p_ = sym(h, name); memcpy(&rt.field, &p_, sizeof(p_)); } while (0)

static void load(const char *dir) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/librt_user.so", dir);
    void *u = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    snprintf(path, sizeof(path), "%s/librt_tail.so", dir);
    void *t = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!u || !t) {
        printf("FAIL: %s\n", dlerror());
        exit(1);
    }
    SYM(malloc_, u, "rtu_malloc");
    SYM(free_, u, "rtu_free");
    SYM(malloc_async, u, "rtu_malloc_async");
    SYM(malloc_async_ptsz, u, "rtu_malloc_async_ptsz");
    SYM(free_async, u, "rtu_free_async");
    SYM(free_async_ptsz, u, "rtu_free_async_ptsz");
    SYM(last_error, u, "rtu_last_error");
    SYM(peek_error, u, "rtu_peek_error");
    SYM(calls, u, "rtu_runtime_calls");
    SYM(tail_malloc, t, "rtt_malloc");
    SYM(tail_free, t, "rtt_free");
}

static unsigned long long driver_allocs(void) {
    unsigned long long a, f, b;
    size_t live;
    mock_cuda_stats(&a, &f, &b, &live);
    return a;
}

static unsigned long long driver_frees(void) {
    unsigned long long a, f, b;
    size_t live;
    mock_cuda_stats(&a, &f, &b, &live);
    return f;
}

/* n pairs of one kind; the runtime calls they made. */
static unsigned long long pairs(int kind, CUstream s, int n) {
    unsigned long long before = rt.calls();
    for (int i = 0; i < n; i++) {
        void *p = NULL;
        int e1 = kind == 0   ? rt.malloc_(&p, 4096)
                 : kind == 1 ? rt.malloc_async(&p, 4096, s)
                             : rt.malloc_async_ptsz(&p, 4096, s);
        int e2 = kind == 0 ? rt.free_(p) : kind == 1 ? rt.free_async(p, s) : rt.free_async_ptsz(p, s);
        CHECK(e1 == 0 && e2 == 0 && p);
    }
    return rt.calls() - before;
}

static void *new_thread(void *arg) {
    unsigned long long *out = arg;
    unsigned long long before = rt.calls(), drv = driver_allocs();
    void *p = NULL;
    CHECK(rt.malloc_(&p, 4096) == 0 && p); /* no context current yet: the runtime starts one */
    CHECK(rt.free_(p) == 0);
    out[0] = rt.calls() - before;
    out[1] = pairs(0, NULL, 100);
    out[2] = driver_allocs() - drv;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: dropin_rt_app DIR\n");
        return 2;
    }
    load(argv[1]);

    /* The runtime starts: cudaFree(NULL) is always the runtime's. */
    unsigned long long c0 = rt.calls();
    CHECK(rt.free_(NULL) == 0);
    unsigned long long start = rt.calls() - c0;

    /* Plain pairs on every flavour of default stream, and on a stream. */
    unsigned long long drv0 = driver_allocs();
    CUstream s;
    CHECK(cuStreamCreate(&s, 1) == 0);
    unsigned long long passed = pairs(0, NULL, 1000);
    passed += pairs(1, NULL, 100) + pairs(1, (CUstream)0x1, 100) + pairs(1, (CUstream)0x2, 100) + pairs(1, s, 100);
    passed += pairs(2, NULL, 100) + pairs(2, s, 100);
    unsigned long long driver = driver_allocs() - drv0;
    void *a = NULL, *b = NULL;
    CHECK(rt.malloc_async(&a, 1 << 20, s) == 0 && rt.free_async(a, s) == 0);
    CHECK(rt.malloc_async(&b, 1 << 20, s) == 0 && rt.free_async(b, s) == 0);
    int ordered_reused = a == b;

    /* Failures: the runtime's errors, and its last error. */
    CHECK(rt.last_error() == 0);
    void *p = NULL;
    CHECK(rt.malloc_(&p, 4096) == 0);
    CHECK(rt.free_(p) == 0);
    c0 = rt.calls();
    int second = rt.free_(p);
    unsigned long long second_passed = rt.calls() - c0;
    int peek = rt.peek_error();
    void *q = NULL;
    CHECK(rt.malloc_(&q, 4096) == 0 && rt.free_(q) == 0); /* success leaves the error alone */
    int still = rt.last_error(), cleared = rt.last_error();
    CHECK(second == 1 && peek == 1 && still == 1 && cleared == 0);
    c0 = rt.calls();
    int null_ptr = rt.malloc_(NULL, 16);
    int huge = rt.malloc_(&q, (size_t)1 << 40);
    int huge_error = rt.last_error();
    unsigned long long errors_passed = rt.calls() - c0;
    CHECK(null_ptr == 1 && huge == 2 && huge_error == 2);
    CHECK(rt.malloc_async(&p, 4096, s) == 0 && rt.free_async(p, s) == 0);
    int async_second = rt.free_async(p, s);
    CHECK(async_second == 1 && rt.last_error() == 1);

    /* A pointer carve did not hand out reaches the driver through the runtime. */
    CUdeviceptr managed = 0;
    CHECK(cuMemAllocManaged(&managed, 12345, 1) == 0);
    unsigned long long f0 = driver_frees();
    c0 = rt.calls();
    CHECK(rt.free_((void *)(uintptr_t)managed) == 0);
    int foreign = rt.calls() - c0 == 1 && driver_frees() - f0 == 1;

    /* During a capture everything is the runtime's; a captured stream's
     * allocation becomes the driver's (a graph node). The plain cudaMalloc
     * on the capturing thread, in global mode, is a call the driver refuses
     * (cudaErrorStreamCaptureUnsupported, and the capture is invalidated)
     * unless carve-run serves it from its arena: the program reports what it
     * got (capture_plain, capture_error, capture_end) and the test expects
     * each answer where it belongs. */
    CUstream cs;
    CHECK(cuStreamCreate(&cs, 1) == 0);
    CHECK(cuStreamBeginCapture_v2(cs, 0) == 0);
    unsigned long long nodes0 = mock_cuda_async_allocs(), drv1 = driver_allocs();
    c0 = rt.calls();
    void *g = NULL, *h = NULL;
    CHECK(rt.malloc_async(&g, 4096, cs) == 0);
    CHECK(rt.free_async(g, cs) == 0);
    int capture_plain = rt.malloc_(&h, 4096), capture_error = rt.last_error();
    if (capture_plain == 0)
        CHECK(rt.free_(h) == 0);
    unsigned long long capture_passed = rt.calls() - c0;
    int graph_nodes = (int)(mock_cuda_async_allocs() - nodes0);
    int plain_to_driver = (int)(driver_allocs() - drv1) - graph_nodes;
    void *graph = NULL;
    int capture_end = cuStreamEndCapture(cs, &graph);
    if (capture_end == 0)
        CHECK(cuGraphDestroy(graph) == 0);
    unsigned long long after_capture = pairs(0, NULL, 100);
    CHECK(cuStreamDestroy_v2(cs) == 0);

    /* A thread with no context yet. */
    unsigned long long fresh[3];
    pthread_t t;
    pthread_create(&t, NULL, new_thread, fresh);
    pthread_join(t, NULL);

    /* Calls that reach the interposer from the program itself (tail calls
     * in a library): what is passed on still reaches the program's runtime. */
    c0 = rt.calls();
    int tail_huge = rt.tail_malloc(&q, (size_t)1 << 40);
    int tail_null = rt.tail_free(NULL);
    unsigned long long tail_passed = rt.calls() - c0;
    CHECK(tail_huge == 2 && tail_null == 0 && rt.last_error() == 2);
    CHECK(cuStreamDestroy_v2(s) == 0);

    printf("OK runtime start=%llu passed=%llu driver_allocs=%llu ordered_reused=%d second_free=%d "
           "second_passed=%llu errors_passed=%llu foreign=%d capture_passed=%llu graph_nodes=%d "
           "plain_to_driver=%d after_capture=%llu fresh_first=%llu fresh_then=%llu fresh_driver=%llu "
           "tail_passed=%llu capture_plain=%d capture_error=%d capture_end=%d\n",
           start, passed, driver, ordered_reused, second, second_passed, errors_passed, foreign, capture_passed,
           graph_nodes, plain_to_driver, after_capture, fresh[0], fresh[1], fresh[2], tail_passed, capture_plain,
           capture_error, capture_end);
    return failures ? 1 : 0;
}
