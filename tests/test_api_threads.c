/*
 * test_api_threads.c — the engine-facing calls at once from several
 * threads, for the thread sanitizer (and carve_check) to judge: four
 * threads allocate (plain, aligned, per-thread stream), tag, read their
 * stream's counters and free (plain, on another stream) on streams of their
 * own, one of them routing its stream to a graph pool and back again and
 * again, while the main thread raises and lowers the limit, sets and
 * removes the out-of-memory callback and reads statistics. Only
 * out-of-memory answers may fail; at the end nothing is live and
 * carve_check passes. CARVE_TEST_THREAD_STEPS sets the steps per thread
 * (default 1500).
 */
#include <pthread.h>

#include "test_util.h"

#define NT 4
#define MiB ((size_t)1 << 20)

static carve_arena *g_a;
static long g_steps;
static int g_stop;
static unsigned long g_bad[NT];

static int evict_nothing(carve_arena *a, const carve_oom_info *info, void *user) {
    (void)a, (void)info, (void)user;
    return CARVE_OOM_FAIL;
}

static void *worker(void *arg) {
    int id = (int)(intptr_t)arg;
    carve_stream s = (carve_stream)(uintptr_t)(0x1000 * (id + 1)), other = (carve_stream)(uintptr_t)0x9000;
    test_rng r;
    test_rng_seed(&r, 27 + (uint64_t)id);
    void *live[16] = {0};
    carve_graph_pool *g = NULL;
    if (id == 0 && carve_graph_pool_create(g_a, &g) != CARVE_OK)
        g_bad[id]++;
    int routed = 0;
    for (long k = 0; k < g_steps; k++) {
        int i = (int)test_rng_below(&r, 16);
        if (g && k % 200 == 0) { /* route the stream to the graph pool, or back */
            carve_status st = routed ? carve_graph_pool_end(g_a, g, s) : carve_graph_pool_begin(g_a, g, s);
            g_bad[id] += st != CARVE_OK;
            routed = !routed;
        }
        if (live[i]) {
            uint64_t tag = 0;
            g_bad[id] += carve_get_tag(g_a, live[i], &tag) != CARVE_OK;
            carve_status st = test_rng_below(&r, 3) == 0 ? carve_free_on_stream(g_a, live[i], other)
                                                          : carve_free(g_a, live[i]);
            g_bad[id] += st != CARVE_OK;
            live[i] = NULL;
            continue;
        }
        size_t size = test_rng_loguniform(&r, 1, 4 * MiB);
        unsigned how = (unsigned)test_rng_below(&r, 3);
        carve_status st = how == 0   ? carve_alloc(g_a, size, s, &live[i])
                          : how == 1 ? carve_alloc_aligned(g_a, size, (size_t)4096 << test_rng_below(&r, 6), s,
                                                           &live[i])
                                     : carve_alloc(g_a, size, CARVE_STREAM_PER_THREAD, &live[i]);
        if (st == CARVE_OK) {
            g_bad[id] += carve_set_tag(g_a, live[i], (uint64_t)k % 7) != CARVE_OK;
        } else if (st != CARVE_ERR_OOM) {
            g_bad[id]++;
        }
        if (k % 64 == 0) {
            carve_stream_stats ss;
            g_bad[id] += carve_get_stream_stats(g_a, s, &ss) != CARVE_OK || ss.num_frees > ss.num_allocs;
        }
    }
    for (int i = 0; i < 16; i++)
        if (live[i])
            g_bad[id] += carve_free(g_a, live[i]) != CARVE_OK;
    if (routed)
        g_bad[id] += carve_graph_pool_end(g_a, g, s) != CARVE_OK;
    if (g)
        g_bad[id] += carve_graph_pool_release(g_a, g) != CARVE_OK;
    return NULL;
}

static void run(carve_backend be, const char *conf) {
    g_a = test_arena_conf(be, 1, 0, 256 * MiB, conf);
    g_stop = 0;
    pthread_t t[NT];
    for (int i = 0; i < NT; i++) {
        g_bad[i] = 0;
        pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    }
    /* Meanwhile: the limit up and down, the callback on and off, statistics. */
    for (int k = 0; k < 40; k++) {
        CHECK_OK(g_a, carve_set_limit(g_a, k % 2 ? 64 * MiB : 256 * MiB));
        CHECK_OK(g_a, carve_set_oom_callback(g_a, k % 3 ? evict_nothing : NULL, NULL));
        carve_stats st;
        CHECK_OK(g_a, carve_get_stats(g_a, &st));
        CHECK(st.num_frees <= st.num_allocs);
    }
    for (int i = 0; i < NT; i++) {
        pthread_join(t[i], NULL);
        CHECK(g_bad[i] == 0);
        if (g_bad[i])
            fprintf(stderr, "thread %d: %lu unexpected answers: %s\n", i, g_bad[i], carve_last_error(g_a));
    }
    CHECK_OK(g_a, carve_set_limit(g_a, 256 * MiB));
    carve_stats st;
    CHECK_OK(g_a, carve_get_stats(g_a, &st));
    CHECK(st.num_live == 0 && st.allocated_bytes == 0);
    CHECK_ARENA(g_a);
    carve_arena_destroy(g_a);
}

int main(void) {
    const char *e = getenv("CARVE_TEST_THREAD_STEPS");
    g_steps = e ? atol(e) : 1500;
    run(CARVE_BACKEND_VIRTUAL, "");
    run(CARVE_BACKEND_VIRTUAL, "vmm=0");
    run(CARVE_BACKEND_HOST, "");
    return test_finish();
}
