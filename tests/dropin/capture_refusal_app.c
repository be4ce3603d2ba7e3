/*
 * capture_refusal_app.c — what carve's cuda_driver backend concludes when a
 * stream capture on another thread refuses (or would be broken by) its
 * driver calls, on the mock driver with the capture modes modelled
 * (unless MOCK_CAPTURE_MODES=0). One case per run, named by the first argument,
 * because the driver lookup is chosen once per process:
 *
 *  - noexch: the lookup has no cuThreadExchangeStreamCaptureMode (carve.h
 *    allows that). Thread A captures a blocking stream in global mode. A
 *    buffer of S1, used on S3 (carve_record_stream) by work still queued,
 *    is freed; allocating on S1 and emptying the cache during A's capture
 *    must neither hand that buffer out (the mock's ownership oracle sees
 *    S3's kernel still using it) nor break A's capture. Before the fix the
 *    refused cuEventQuery counted as "done" and the oracle said VIOLATION.
 *  - exchange: the same with the exchange in the lookup (the query is made
 *    in relaxed mode and answers "not ready").
 *  - stale: a stream used through carve, its buffers freed, then destroyed
 *    (carve.h allows it); no capture anywhere. carve_empty_cache, the
 *    out-of-memory path and carve_arena_destroy must hand the destroyed
 *    handle to the driver no more (before: 2, 6, 8 stale uses).
 *  - spur: S1 frees 12 of a 16 MiB limit with no work queued; during
 *    another thread's global-mode capture of a blocking stream, S2 asks for
 *    12 MiB. Only a device synchronization could prove S1's memory free
 *    here (carve records nothing on S1 from another stream's call: the
 *    program may have destroyed it), so the answer is CARVE_ERR_OOM, whose
 *    message says a capture prevented the synchronization (before, it
 *    blamed the limit alone); the capture ends intact, and after it the
 *    same request succeeds.
 * Prints "OK <case>"; exits 1 when a check failed.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capture_check.h"


static CUcontext ctx;
static int with_exchange = 1;

static void *lookup(const char *name, void *arg) {
    (void)arg;
    if (!with_exchange && strcmp(name, "cuThreadExchangeStreamCaptureMode") == 0)
        return NULL;
    return dlsym(RTLD_DEFAULT, name);
}

static void sleep_ms(int ms) { nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L}, NULL); }

/* Another thread's capture of a blocking stream in global mode, begun by
 * capture_begin and ended (intact, or the check fails) by capture_end. */
static int phase; /* 1: capturing, 2: end it (atomic) */
static int ended;  /* the cuStreamEndCapture result */
static void *capturer(void *arg) {
    (void)arg;
    CU(cuCtxSetCurrent(ctx));
    CUstream cs;
    CU(cuStreamCreate(&cs, 0));
    CU(cuStreamBeginCapture_v2(cs, 0 /* global */));
    __atomic_store_n(&phase, 1, __ATOMIC_RELEASE);
    while (__atomic_load_n(&phase, __ATOMIC_ACQUIRE) != 2)
        sleep_ms(1);
    void *g = NULL;
    ended = cuStreamEndCapture(cs, &g);
    if (g)
        CU(cuGraphDestroy(g));
    CU(cuStreamDestroy_v2(cs));
    return NULL;
}

static pthread_t capture_begin(void) {
    pthread_t t;
    __atomic_store_n(&phase, 0, __ATOMIC_RELEASE);
    CHECK(pthread_create(&t, NULL, capturer, NULL) == 0);
    while (!__atomic_load_n(&phase, __ATOMIC_ACQUIRE))
        sleep_ms(1);
    return t;
}

static void capture_end(pthread_t t) {
    __atomic_store_n(&phase, 2, __ATOMIC_RELEASE);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(ended == 0); /* the capture was not invalidated */
}

static carve_arena *driver_arena(size_t limit) {
    carve_config c;
    carve_config_init(&c);
    c.backend = CARVE_BACKEND_CUDA_DRIVER;
    c.limit_bytes = limit;
    carve_arena *a;
    CHECK(carve_arena_create(&c, &a) == CARVE_OK);
    return a;
}

static void test_queued(const char *name) {
    int broken = mock_cuda_broken_captures();
    carve_arena *a = driver_arena(0);
    CUstream s1, s3;
    CU(cuStreamCreate(&s1, 1));
    CU(cuStreamCreate(&s3, 1));
    size_t n = MiB;
    void *x, *y;
    CHECK(carve_alloc(a, n, CS(s1), &x) == CARVE_OK);
    CHECK(mock_cuda_own((CUdeviceptr)x, n, s1, 1) == 0);
    CHECK(carve_record_stream(a, x, CS(s3)) == CARVE_OK);
    CU(mock_cuda_launch(s3, (CUdeviceptr)x, n)); /* S3's kernel uses x: not complete */
    mock_cuda_disown((CUdeviceptr)x);
    CHECK(carve_free(a, x) == CARVE_OK); /* pending on S3's event */
    pthread_t t = capture_begin();
    carve_status st = carve_empty_cache(a);
    CHECK(st == CARVE_OK || st == CARVE_ERR_BACKEND); /* nothing given back during the capture */
    CHECK(carve_alloc(a, n, CS(s1), &y) == CARVE_OK);
    char text[600] = "";
    int bad = mock_cuda_own((CUdeviceptr)y, n, s1, 1);
    mock_cuda_violations(text, sizeof(text));
    if (bad)
        fprintf(stderr, "oracle: %s\n", text);
    CHECK(!bad);
    capture_end(t);
    CHECK(mock_cuda_broken_captures() == broken);
    mock_cuda_disown((CUdeviceptr)y);
    CHECK(carve_free(a, y) == CARVE_OK);
    CU(cuStreamSynchronize(s3));
    CHECK(carve_empty_cache(a) == CARVE_OK);
    CHECK(carve_memory_reserved(a) == 0);
    carve_arena_destroy(a);
    CU(cuStreamDestroy_v2(s1));
    CU(cuStreamDestroy_v2(s3));
    printf("OK %s\n", name);
}

static void test_stale(void) {
    carve_arena *a = driver_arena(64 * MiB);
    CUstream s;
    CU(cuStreamCreate(&s, 1));
    void *p;
    CHECK(carve_alloc(a, 4 * MiB, CS(s), &p) == CARVE_OK);
    CHECK(carve_free(a, p) == CARVE_OK);
    CU(cuStreamDestroy_v2(s));
    int before = mock_cuda_stale_stream_uses();
    CHECK(carve_empty_cache(a) == CARVE_OK);
    CHECK(mock_cuda_stale_stream_uses() == before);
    void *q[32];
    int n = 0;
    while (n < 32 && carve_alloc(a, 8 * MiB, NULL, &q[n]) == CARVE_OK) /* to the limit: the OOM path */
        n++;
    CHECK(n > 0 && n < 32);
    CHECK(mock_cuda_stale_stream_uses() == before);
    for (int i = 0; i < n; i++)
        CHECK(carve_free(a, q[i]) == CARVE_OK);
    carve_arena_destroy(a);
    CHECK(mock_cuda_stale_stream_uses() == before);
    printf("OK stale\n");
}

static void test_spur(void) {
    int broken = mock_cuda_broken_captures();
    carve_arena *a = driver_arena(16 * MiB);
    CUstream s1, s2;
    CU(cuStreamCreate(&s1, 1));
    CU(cuStreamCreate(&s2, 1));
    void *p, *q;
    CHECK(carve_alloc(a, 12 * MiB, CS(s1), &p) == CARVE_OK);
    CHECK(carve_free(a, p) == CARVE_OK); /* no work queued at all */
    pthread_t t = capture_begin();
    CHECK(carve_alloc(a, 12 * MiB, CS(s2), &q) == CARVE_ERR_OOM);
    CHECK(strstr(carve_last_error(a), "a stream capture was underway, so the device was not synchronized") != NULL);
    capture_end(t);
    CHECK(mock_cuda_broken_captures() == broken);
    CHECK(carve_alloc(a, 12 * MiB, CS(s2), &q) == CARVE_OK);
    CHECK(carve_free(a, q) == CARVE_OK);
    CHECK(carve_check(a) == CARVE_OK);
    carve_arena_destroy(a);
    CU(cuStreamDestroy_v2(s1));
    CU(cuStreamDestroy_v2(s2));
    printf("OK spur\n");
}

int main(int argc, char **argv) {
    const char *m = getenv("MOCK_CAPTURE_MODES");
    const char *which = argc > 1 ? argv[1] : "";
    if (m && strcmp(m, "0") == 0) {
        fprintf(stderr, "capture_refusal_app needs the mock's capture modes (MOCK_CAPTURE_MODES unset or 1)\n");
        return 1;
    }
    with_exchange = strcmp(which, "noexch") != 0;
    CU(cuInit(0));
    CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU(cuCtxSetCurrent(ctx));
    carve_status st = carve_cuda_driver_lookup(lookup, NULL);
    if (st == CARVE_ERR_NO_DEVICE) { /* built without CUDA: no driver backend */
        printf("SKIP: %s\n", carve_last_error(NULL));
        return 77;
    }
    CHECK(st == CARVE_OK);
    if (strcmp(which, "noexch") == 0 || strcmp(which, "exchange") == 0)
        test_queued(which);
    else if (strcmp(which, "stale") == 0)
        test_stale();
    else if (strcmp(which, "spur") == 0)
        test_spur();
    else {
        fprintf(stderr, "usage: capture_refusal_app noexch|exchange|stale|spur\n");
        return 1;
    }
    return 0;
}
