/*
 * capture_app.c — stream captures against carve's cuda_driver backend, on
 * the mock driver with its capture modes modelled (its default;
 * mock_cuda.c: a potentially unsafe call is refused, and breaks the
 * captures it conflicts with, as cuThreadExchangeStreamCaptureMode's
 * documentation says). No interposer: the program links libcarve and hands
 * it the mock's functions with carve_cuda_driver_lookup, as an engine with
 * a driver lookup does.
 *
 *  - model: the modes themselves (a raw cuMemAlloc on another thread breaks
 *    a global capture, not a thread-local one, not once that thread is
 *    relaxed; the capturing thread's own one breaks a global or
 *    thread-local capture, not a relaxed one; cuCtxSynchronize breaks any).
 *  - threads: thread A captures a blocking stream in global mode while
 *    thread B allocates through carve (growth: cuMemAlloc), frees, allocates
 *    and frees on the legacy stream, empties the cache, and destroys a second arena; A's
 *    capture ends intact, and none of B's calls fails.
 *  - pool: a graph pool on the cuda_driver arena, the step run once and
 *    then captured in global mode: no driver call the model refuses, a
 *    request beyond the pool is allocated from the driver in relaxed mode
 *    (no event, no synchronization), the capture ends intact, and the pool
 *    is released afterwards.
 * Prints "OK <case>" for each; exits 1 on the first failed check.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capture_check.h"

enum { GLOBAL = 0, THREAD_LOCAL = 1, RELAXED = 2 };

static CUcontext ctx;

static void *lookup(const char *name, void *arg) {
    (void)arg;
    return dlsym(RTLD_DEFAULT, name);
}

static void sleep_ms(int ms) { nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L}, NULL); }

/* ---- the model ------------------------------------------------------------ */

typedef struct {
    int begin_mode, thread_mode;
    CUresult got;
} raw_call;

static void *raw_alloc(void *arg) {
    raw_call *c = arg;
    CU(cuCtxSetCurrent(ctx));
    int m = c->thread_mode;
    CU(cuThreadExchangeStreamCaptureMode(&m));
    CUdeviceptr p = 0;
    c->got = cuMemAlloc_v2(&p, MiB);
    if (c->got == 0) /* in the same mode: the capture still runs */
        CU(cuMemFree_v2(p));
    CU(cuThreadExchangeStreamCaptureMode(&m));
    return NULL;
}

/* A capture in begin_mode, during which another thread in thread_mode
 * allocates: 1 when the capture survived. *got: the allocation's answer. */
static int other_thread(int begin_mode, int thread_mode, CUresult *got) {
    CUstream s;
    CU(cuStreamCreate(&s, 0));
    CU(cuStreamBeginCapture_v2(s, begin_mode));
    raw_call c = {begin_mode, thread_mode, -1};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, raw_alloc, &c) == 0);
    pthread_join(t, NULL);
    void *g = NULL;
    CUresult end = cuStreamEndCapture(s, &g);
    CU(cuGraphDestroy(g));
    CU(cuStreamDestroy_v2(s));
    *got = c.got;
    return end == 0;
}

static int own_thread(int begin_mode, CUresult *got) {
    CUstream s;
    CU(cuStreamCreate(&s, 0));
    CU(cuStreamBeginCapture_v2(s, begin_mode));
    CUdeviceptr p = 0;
    *got = cuMemAlloc_v2(&p, MiB);
    void *g = NULL;
    CUresult end = cuStreamEndCapture(s, &g);
    CU(cuGraphDestroy(g));
    if (*got == 0)
        CU(cuMemFree_v2(p));
    CU(cuStreamDestroy_v2(s));
    return end == 0;
}

static void test_model(void) {
    CUresult got;
    CHECK(!other_thread(GLOBAL, GLOBAL, &got) && got == 900);
    CHECK(other_thread(GLOBAL, RELAXED, &got) && got == 0);
    CHECK(other_thread(GLOBAL, THREAD_LOCAL, &got) && got == 0);
    CHECK(other_thread(THREAD_LOCAL, GLOBAL, &got) && got == 0);
    CHECK(other_thread(RELAXED, GLOBAL, &got) && got == 0);
    CHECK(!own_thread(GLOBAL, &got) && got == 900);
    CHECK(!own_thread(THREAD_LOCAL, &got) && got == 900);
    CHECK(own_thread(RELAXED, &got) && got == 0);
    CUstream s; /* a wait for the whole context breaks even a relaxed capture */
    CU(cuStreamCreate(&s, 0));
    CU(cuStreamBeginCapture_v2(s, RELAXED));
    CHECK(cuCtxSynchronize() == 900);
    void *g;
    CHECK(cuStreamEndCapture(s, &g) == 901);
    CU(cuStreamDestroy_v2(s));
    printf("OK model\n");
}

/* ---- another thread captures ---------------------------------------------- */

static carve_arena *driver_arena(size_t limit) {
    carve_config c;
    carve_config_init(&c);
    c.backend = CARVE_BACKEND_CUDA_DRIVER;
    c.limit_bytes = limit;
    carve_arena *a = NULL;
    CHECK(carve_arena_create(&c, &a) == CARVE_OK);
    return a;
}

typedef struct {
    carve_arena *a;
    CUstream s;
    int started, done, ended;  /* atomic */
    carve_status worst;
    int broke_before_destroy;
} shared;

static int load(int *x) { return __atomic_load_n(x, __ATOMIC_ACQUIRE); }
static void store(int *x, int v) { __atomic_store_n(x, v, __ATOMIC_RELEASE); }

static void note(shared *sh, carve_status st) {
    if (st != CARVE_OK && sh->worst == CARVE_OK) {
        sh->worst = st;
        fprintf(stderr, "B: %s: %s\n", carve_status_str(st), carve_last_error(sh->a));
    }
}

static void *thread_b(void *arg) {
    shared *sh = arg;
    CU(cuCtxSetCurrent(ctx));
    while (!load(&sh->started))
        sleep_ms(1);
    carve_arena *a = sh->a;
    void *p[8] = {0};
    for (int round = 0; round < 3; round++) { /* growth each round after an empty cache */
        for (int i = 0; i < 8; i++)
            note(sh, carve_alloc(a, (size_t)(i + 1) * 3 * MiB, CS(sh->s), &p[i]));
        for (int i = 0; i < 8; i++)
            note(sh, carve_free(a, p[i]));
        void *q = NULL; /* the legacy stream's own pool: a span emptied there asks for an event */
        note(sh, carve_alloc(a, 5 * MiB, NULL, &q));
        note(sh, carve_free(a, q));
        note(sh, carve_empty_cache(a));
    }
    carve_arena *y = driver_arena(0); /* a second arena, destroyed while A still captures */
    void *r = NULL;
    note(sh, carve_alloc(y, 9 * MiB, CS(sh->s), &r));
    note(sh, carve_free(y, r));
    store(&sh->done, 1);
    sh->broke_before_destroy = mock_cuda_broken_captures();
    carve_arena_destroy(y); /* waits for A's capture to end, then synchronizes */
    CHECK(load(&sh->ended)); /* it did wait */
    return NULL;
}

static void test_threads(void) {
    int broken = mock_cuda_broken_captures();
    shared sh = {.a = driver_arena(0), .worst = CARVE_OK};
    CU(cuStreamCreate(&sh.s, 1)); /* B's stream: non-blocking */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, thread_b, &sh) == 0);
    CUstream cs;
    CU(cuStreamCreate(&cs, 0)); /* A's: blocking, captured in global mode */
    CU(cuStreamBeginCapture_v2(cs, GLOBAL));
    store(&sh.started, 1);
    while (!load(&sh.done))
        sleep_ms(1);
    sleep_ms(30); /* B is in carve_arena_destroy now */
    store(&sh.ended, 1);
    void *g = NULL;
    CUresult end = cuStreamEndCapture(cs, &g);
    pthread_join(t, NULL);
    CHECK(sh.worst == CARVE_OK);
    CHECK(sh.broke_before_destroy == broken);
    CHECK(end == 0 && g != NULL);
    CHECK(mock_cuda_broken_captures() == broken);
    CU(cuGraphDestroy(g));
    CU(cuStreamDestroy_v2(cs));
    CU(cuStreamDestroy_v2(sh.s));
    carve_arena_destroy(sh.a);
    printf("OK threads\n");
}

/* ---- a graph pool on the driver backend ---------------------------------- */

static int step(carve_arena *a, CUstream s) {
    static const size_t sizes[] = {4 * MiB, 1 * MiB, 300000, 6 * MiB, 2000};
    void *p[5] = {0};
    int ok = 1;
    for (int i = 0; i < 5; i++) {
        ok &= carve_alloc(a, sizes[i], CS(s), &p[i]) == CARVE_OK;
        if (i == 2 && p[0]) {
            ok &= carve_free(a, p[0]) == CARVE_OK;
            p[0] = NULL;
        }
    }
    for (int i = 0; i < 5; i++)
        if (p[i])
            ok &= carve_free(a, p[i]) == CARVE_OK;
    return ok;
}

static void test_pool(void) {
    int broken = mock_cuda_broken_captures();
    carve_arena *a = driver_arena(256 * MiB);
    CUstream s;
    CU(cuStreamCreate(&s, 0));
    carve_graph_pool *g;
    CHECK(carve_graph_pool_create(a, &g) == CARVE_OK);
    CHECK(carve_graph_pool_begin(a, g, CS(s)) == CARVE_OK);
    CHECK(step(a, s)); /* uncaptured: the pool takes what the step needs */
    carve_stats s0, s1;
    CHECK(carve_get_stats(a, &s0) == CARVE_OK);
    CU(cuStreamBeginCapture_v2(s, GLOBAL));
    for (int k = 0; k < 3; k++)
        CHECK(step(a, s));
    CHECK(carve_get_stats(a, &s1) == CARVE_OK);
    CHECK(s1.num_backend_allocs == s0.num_backend_allocs); /* the steps: from the pool */
    /* Beyond the pool: the graph pool allocates it from the driver in
     * relaxed mode, which breaks no capture in global mode, and keeps it. */
    void *p = NULL;
    CHECK(carve_alloc(a, 100 * MiB, CS(s), &p) == CARVE_OK && p != NULL);
    CHECK(carve_free(a, p) == CARVE_OK);
    CHECK(step(a, s));
    void *graph = NULL;
    CHECK(cuStreamEndCapture(s, &graph) == 0 && graph != NULL);
    CU(cuGraphDestroy(graph));
    CHECK(carve_get_stats(a, &s1) == CARVE_OK);
    CHECK(s1.num_backend_allocs > s0.num_backend_allocs && s1.num_event_records == s0.num_event_records &&
          s1.num_syncs == s0.num_syncs);
    CHECK(carve_graph_pool_end(a, g, CS(s)) == CARVE_OK);
    CHECK(carve_graph_pool_release(a, g) == CARVE_OK);
    CHECK(carve_check(a) == CARVE_OK);
    CHECK(mock_cuda_broken_captures() == broken);
    CU(cuStreamDestroy_v2(s));
    carve_arena_destroy(a);
    printf("OK pool\n");
}

int main(void) {
    const char *m = getenv("MOCK_CAPTURE_MODES");
    if (m && strcmp(m, "0") == 0) {
        fprintf(stderr, "capture_app needs the mock's capture modes (MOCK_CAPTURE_MODES unset or 1)\n");
        return 1;
    }
    CU(cuInit(0));
    CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU(cuCtxSetCurrent(ctx));
    carve_status st = carve_cuda_driver_lookup(lookup, NULL);
    if (st == CARVE_ERR_NO_DEVICE) { /* built without CUDA: no driver backend */
        printf("SKIP: %s\n", carve_last_error(NULL));
        return 77;
    }
    CHECK(st == CARVE_OK);
    test_model();
    test_threads();
    test_pool();
    return 0;
}
