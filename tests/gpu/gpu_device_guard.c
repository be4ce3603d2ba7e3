/*
 * gpu_device_guard.c — carve allocates on the arena's device whatever the
 * caller's current device is, and leaves the current device as it found it.
 *
 * With one GPU: every entry point, called with device 0 current, leaves
 * device 0 current and hands out device-0 memory. With two or more, an
 * arena on device 1 used from a thread whose current device is 0 (including
 * a fresh thread, whose current device is 0 by default) allocates on device
 * 1 (cudaPointerGetAttributes says so) and leaves device 0 current; and the
 * other way round.
 */
#include "gpu_util.h"

#include <pthread.h>

static int ndev;

#define EXPECT_CURRENT(dev)                                                              \
    do {                                                                                 \
        int cur_ = gpu_get_device();                                                     \
        test_checks++;                                                                   \
        if (cur_ != (dev)) {                                                             \
            char d_[96];                                                                 \
            snprintf(d_, sizeof(d_), "current device is %d, want %d", cur_, (dev));      \
            test_fail(__FILE__, __LINE__, "device guard", d_);                           \
        }                                                                                \
    } while (0)

static int device_of(const void *p) {
    struct cudaPointerAttributes at;
    CUDA_CHECK(cudaPointerGetAttributes(&at, p));
    return at.type == cudaMemoryTypeDevice ? at.device : -1;
}

static carve_arena *arena_on(int dev, const char *name) { return gpu_arena(dev, 1, 0, 0, name); }

/* Every entry point on arena a (device dev) with device `cur` current;
 * stream is a stream of device dev (or NULL). */
static void exercise(carve_arena *a, int dev, int cur, cudaStream_t stream, cudaStream_t other) {
    void *p = NULL, *q = NULL;
    CHECK_OK(a, carve_alloc(a, 5 * MiB, stream, &p));
    EXPECT_CURRENT(cur);
    CHECK_OK(a, carve_alloc(a, 1000, NULL, &q));
    EXPECT_CURRENT(cur);
    CHECK(p && device_of(p) == dev);
    CHECK(q && device_of(q) == dev);
    if (!p || !q)
        return;
    /* Write and check on the arena's device, then come back. */
    gpu_set_device(dev);
    uint64_t id = 0x6a2d + (uint64_t)dev;
    gpu_fill(p, 5 * MiB, id, stream);
    unsigned long long m = gpu_mismatches(gpu_counter_of(dev, 2), p, 5 * MiB, id, stream);
    CHECK(m == 0);
    gpu_set_device(cur);
    CHECK_OK(a, carve_record_stream(a, p, other));
    EXPECT_CURRENT(cur);
    CHECK_OK(a, carve_free(a, p));
    EXPECT_CURRENT(cur);
    CHECK_OK(a, carve_free(a, q));
    EXPECT_CURRENT(cur);
    carve_stats s;
    CHECK_OK(a, carve_get_stats(a, &s));
    CHECK_ARENA(a);
    CHECK_OK(a, carve_empty_cache(a));
    EXPECT_CURRENT(cur);
    size_t f, t;
    CHECK_OK(NULL, carve_device_mem_info(dev, &f, &t));
    EXPECT_CURRENT(cur);
    /* A refused request touches no device state either. */
    carve_config c;
    CHECK_OK(a, carve_arena_get_config(a, &c));
    CHECK_ST(a, carve_alloc(a, c.limit_bytes + 1, stream, &p), CARVE_ERR_OOM);
    EXPECT_CURRENT(cur);
    CHECK(cudaGetLastError() == cudaSuccess);
}

static cudaStream_t stream_on(int dev) {
    int prev = gpu_get_device();
    gpu_set_device(dev);
    cudaStream_t s = gpu_stream_new();
    gpu_set_device(prev);
    return s;
}

static void stream_free_on(int dev, cudaStream_t s) {
    int prev = gpu_get_device();
    gpu_set_device(dev);
    gpu_stream_free(s);
    gpu_set_device(prev);
}

static void case_one_device_keeps_current(void) {
    gpu_set_device(0);
    carve_arena *a = arena_on(0, "guard-0");
    EXPECT_CURRENT(0);
    cudaStream_t s = stream_on(0), o = stream_on(0);
    exercise(a, 0, 0, s, o);
    exercise(a, 0, 0, NULL, o);
    carve_arena_destroy(a);
    EXPECT_CURRENT(0);
    carve_arena *d = NULL;
    CHECK_OK(NULL, carve_device_arena(0, &d));
    EXPECT_CURRENT(0);
    void *p = NULL;
    CHECK_OK(d, carve_alloc(d, 1 * MiB, s, &p));
    CHECK(p && device_of(p) == 0);
    CHECK_OK(d, carve_free(d, p));
    carve_device_arenas_release();
    EXPECT_CURRENT(0);
    stream_free_on(0, s);
    stream_free_on(0, o);
}

static void case_device1_from_device0(void) {
    gpu_set_device(0);
    carve_arena *a = arena_on(1, "guard-1");
    EXPECT_CURRENT(0);
    cudaStream_t s = stream_on(1), o = stream_on(1);
    exercise(a, 1, 0, s, o);
    exercise(a, 1, 0, NULL, o);
    carve_arena_destroy(a);
    EXPECT_CURRENT(0);
    stream_free_on(1, s);
    stream_free_on(1, o);
}

static void case_device0_from_device1(void) {
    gpu_set_device(1);
    carve_arena *a = arena_on(0, "guard-0-from-1");
    EXPECT_CURRENT(1);
    cudaStream_t s = stream_on(0), o = stream_on(0);
    exercise(a, 0, 1, s, o);
    carve_arena_destroy(a);
    EXPECT_CURRENT(1);
    stream_free_on(0, s);
    stream_free_on(0, o);
    gpu_set_device(0);
}

typedef struct thread_arg {
    carve_arena *a;
    int cur_before, cur_after, dev_of_p;
    carve_status st;
} thread_arg;

static void *fresh_thread(void *arg) {
    thread_arg *t = arg;
    /* A new thread's current device is 0 until it says otherwise. */
    CUDA_CHECK(cudaGetDevice(&t->cur_before));
    void *p = NULL;
    t->st = carve_alloc(t->a, 3 * MiB, NULL, &p);
    CUDA_CHECK(cudaGetDevice(&t->cur_after));
    t->dev_of_p = p ? device_of(p) : -1;
    if (p)
        carve_free(t->a, p);
    return NULL;
}

static void case_fresh_thread_uses_device1(void) {
    carve_arena *a = arena_on(1, "guard-thread");
    thread_arg t = {a, -1, -1, -1, CARVE_ERR_INVALID};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, fresh_thread, &t) == 0);
    pthread_join(th, NULL);
    CHECK(t.st == CARVE_OK);
    CHECK(t.cur_before == 0 && t.cur_after == 0);
    CHECK(t.dev_of_p == 1);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* Two arenas on two devices, used alternately from one thread. */
static void case_alternate_devices(void) {
    carve_arena *a0 = arena_on(0, "alt-0"), *a1 = NULL;
    CHECK_OK(NULL, carve_device_arena(1, &a1));
    if (!a1)
        return;
    void *p0[16], *p1[16];
    for (int i = 0; i < 16; i++) {
        CHECK_OK(a0, carve_alloc(a0, (size_t)(i + 1) * MiB, NULL, &p0[i]));
        CHECK_OK(a1, carve_alloc(a1, (size_t)(i + 1) * MiB, NULL, &p1[i]));
        CHECK(p0[i] && device_of(p0[i]) == 0);
        CHECK(p1[i] && device_of(p1[i]) == 1);
    }
    EXPECT_CURRENT(0);
    for (int i = 0; i < 16; i++) {
        CHECK_OK(a0, carve_free(a0, p0[i]));
        CHECK_OK(a1, carve_free(a1, p1[i]));
    }
    EXPECT_CURRENT(0);
    carve_arena_destroy(a0);
    carve_device_arenas_release();
    EXPECT_CURRENT(0);
}

int main(void) {
    ndev = gpu_start("gpu_device_guard", 1);
    GPU_CASE(case_one_device_keeps_current);
    if (ndev >= 2) {
        GPU_CASE(case_device1_from_device0);
        GPU_CASE(case_device0_from_device1);
        GPU_CASE(case_fresh_thread_uses_device1);
        GPU_CASE(case_alternate_devices);
    } else {
        printf("  one device: the cross-device cases are skipped\n");
    }
    return gpu_finish();
}
