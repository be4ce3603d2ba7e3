/*
 * gpu_graph.c — CUDA graphs that allocate and free through carve, replayed.
 *
 * A step on a non-blocking stream allocates a 4 MiB and a 1 MiB buffer,
 * fills both with their patterns, verifies and frees the first, allocates a
 * 4 MiB buffer again (its memory, inside the graph), fills it, verifies the
 * two live ones and frees them: every allocation and free of the step goes
 * through carve. The stream is routed to a graph pool, the step runs once
 * uncaptured, then is captured (global capture mode: any call that would
 * break the capture fails it), instantiated and launched 1000 times (50
 * under CARVE_TEST_QUICK) while a second stream allocates, fills, verifies
 * and frees buffers of its own in the same arena between launches. Any
 * overlap between the graph's memory and the other stream's, or memory the
 * graph lost between replays, shows up as mismatches in the verifications,
 * which must stay 0; every carve call inside the capture returns CARVE_OK;
 * the capture maps nothing (num_backend_allocs unchanged). Then the graph
 * is destroyed, the pool released, the arena checked and destroyed, and the
 * device's memory is back (gpu_run_case). Both modes: virtual-memory (the
 * default) and segments.
 *
 * Another thread's capture (case_other_thread): the main thread captures
 * the step on a blocking stream in global mode (the default of
 * cudaStreamBeginCapture and of torch.cuda.graph), and meanwhile a second
 * thread, in global mode too, allocates through carve on its own stream
 * with growth (cudaMalloc, or cuMemCreate/cuMemMap), fills, verifies and
 * frees, empties the cache, and uses and destroys a second arena (made
 * before the capture; its destroy waits for the capture to end). The capture must end with
 * cudaSuccess, every carve call of both threads returns CARVE_OK, and the
 * graph replays 100 times without a mismatch.
 */
#include <pthread.h>
#include <time.h>

#include "gpu_util.h"

static int g_segments;

typedef struct step_state {
    carve_arena *a;
    gpu_counter c;
    int bad; /* carve calls that did not return CARVE_OK */
} step_state;

static void step(step_state *st, cudaStream_t s) {
    void *t1 = NULL, *t2 = NULL, *t3 = NULL;
    st->bad += carve_alloc(st->a, 4 * MiB, s, &t1) != CARVE_OK;
    st->bad += carve_alloc(st->a, 1 * MiB + 512, s, &t2) != CARVE_OK;
    if (!t1 || !t2)
        return;
    gpu_fill(t1, 4 * MiB, 11, s);
    gpu_fill(t2, 1 * MiB + 512, 22, s);
    gpu_verify(t1, 4 * MiB, 11, st->c.dev, s);
    st->bad += carve_free(st->a, t1) != CARVE_OK;
    st->bad += carve_alloc(st->a, 4 * MiB, s, &t3) != CARVE_OK;
    if (!t3)
        return;
    gpu_fill(t3, 4 * MiB, 33, s);
    gpu_verify(t2, 1 * MiB + 512, 22, st->c.dev, s);
    gpu_verify(t3, 4 * MiB, 33, st->c.dev, s);
    st->bad += carve_free(st->a, t2) != CARVE_OK;
    st->bad += carve_free(st->a, t3) != CARVE_OK;
}

static void case_replay(void) {
    carve_arena *a = g_segments ? gpu_arena_conf("vmm=0", "graph") : gpu_arena(0, 1, 0, 0, "graph");
    cudaStream_t s = gpu_stream_new(), s2 = gpu_stream_new();
    step_state st = {.a = a, .c = gpu_counter_of(0, 0)};
    gpu_counter c2 = gpu_counter_of(0, 1);
    carve_graph_pool *g = NULL;
    CHECK_OK(a, carve_graph_pool_create(a, &g));
    CHECK_OK(a, carve_graph_pool_begin(a, g, (carve_stream)s));
    step(&st, s); /* uncaptured: the pool maps what the step needs */
    CHECK(gpu_counter_take(st.c, s) == 0);
    carve_stats before = gpu_stats(a);

    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    step(&st, s);
    CUDA_CHECK(cudaStreamEndCapture(s, &graph));
    CHECK(st.bad == 0);
    carve_stats after = gpu_stats(a);
    CHECK(after.num_backend_allocs == before.num_backend_allocs); /* nothing mapped or reserved */
    CHECK(after.num_syncs == before.num_syncs);
    CHECK_OK(a, carve_graph_pool_end(a, g, (carve_stream)s));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));

    long replays = gpu_scale(1000, 50);
    for (long i = 0; i < replays; i++) {
        CUDA_CHECK(cudaGraphLaunch(exec, s));
        if (i % 10 == 0) { /* another stream's buffers, beside the replays */
            void *p = NULL;
            CHECK_OK(a, carve_alloc(a, 8 * MiB, (carve_stream)s2, &p));
            if (p) {
                gpu_fill(p, 8 * MiB, 1000 + (uint64_t)i, s2);
                gpu_verify(p, 8 * MiB, 1000 + (uint64_t)i, c2.dev, s2);
                CHECK_OK(a, carve_free(a, p));
            }
        }
    }
    CUDA_CHECK(cudaStreamSynchronize(s));
    unsigned long long bad = gpu_counter_take(st.c, s), bad2 = gpu_counter_take(c2, s2);
    CHECK(bad == 0 && bad2 == 0);
    printf("  %ld replays, mismatches %llu (graph) %llu (other stream)\n", replays, bad, bad2);

    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CHECK_OK(a, carve_graph_pool_release(a, g));
    carve_stats end = gpu_stats(a);
    CHECK(end.num_live == 0);
    CHECK_ARENA(a);
    gpu_stream_free(s);
    gpu_stream_free(s2);
    carve_arena_destroy(a);
}

/* Inside a capture without a graph pool: what the stream has cached
 * serves, a request it cannot meet fails with CARVE_ERR_OOM and leaves the
 * capture intact (it still ends and instantiates). */
static void case_capture_without_pool(void) {
    carve_arena *a = g_segments ? gpu_arena_conf("vmm=0", "capture") : gpu_arena(0, 1, 0, 0, "capture");
    cudaStream_t s = gpu_stream_new();
    void *p = NULL;
    CHECK_OK(a, carve_alloc(a, 2 * MiB, (carve_stream)s, &p));
    CHECK_OK(a, carve_free(a, p));
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK_OK(a, carve_alloc(a, 2 * MiB, (carve_stream)s, &p));
    if (p)
        gpu_fill(p, 2 * MiB, 5, s);
    void *q = (void *)1;
    CHECK_ST(a, carve_alloc(a, 512 * MiB, (carve_stream)s, &q), CARVE_ERR_OOM);
    CHECK(q == NULL);
    CHECK_OK(a, carve_free(a, p));
    CUDA_CHECK(cudaStreamEndCapture(s, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaStreamSynchronize(s));
    CHECK_ARENA(a);
    gpu_stream_free(s);
    carve_arena_destroy(a);
}

typedef struct other {
    carve_arena *a, *y;
    cudaStream_t s2;
    int started, done, ended; /* atomic */
    int bad;                  /* carve calls that did not return CARVE_OK */
    unsigned long long mismatches;
} other;

static int load(int *x) { return __atomic_load_n(x, __ATOMIC_ACQUIRE); }
static void pause_ms(int ms) { nanosleep(&(struct timespec){.tv_nsec = ms * 1000000L}, NULL); }

static void *other_thread(void *arg) {
    other *o = arg;
    CUDA_CHECK(cudaSetDevice(0));
    cudaStream_t s2 = o->s2;
    gpu_counter c = gpu_counter_of(0, 2);
    while (!load(&o->started))
        pause_ms(1);
    for (int round = 0; round < 3; round++) { /* the arena grows each round: the cache was emptied */
        void *p[6] = {0};
        for (int i = 0; i < 6; i++) {
            size_t n = (size_t)(i + 1) * 7 * MiB;
            o->bad += carve_alloc(o->a, n, (carve_stream)s2, &p[i]) != CARVE_OK;
            if (p[i]) {
                gpu_fill(p[i], n, 500 + (uint64_t)(round * 6 + i), s2);
                gpu_verify(p[i], n, 500 + (uint64_t)(round * 6 + i), c.dev, s2);
            }
        }
        for (int i = 0; i < 6; i++)
            if (p[i])
                o->bad += carve_free(o->a, p[i]) != CARVE_OK;
        o->bad += carve_empty_cache(o->a) != CARVE_OK;
    }
    carve_arena *y = o->y;
    void *q = NULL;
    o->bad += carve_alloc(y, 24 * MiB, (carve_stream)s2, &q) != CARVE_OK;
    if (q) {
        gpu_fill(q, 24 * MiB, 77, s2);
        gpu_verify(q, 24 * MiB, 77, c.dev, s2);
        o->bad += carve_free(y, q) != CARVE_OK;
    }
    /* The test's own wait for s2 (not carve's) in relaxed mode: a thread in
     * global mode may not wait for a stream while another captures. */
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    o->mismatches = gpu_counter_take(c, s2);
    CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    __atomic_store_n(&o->done, 1, __ATOMIC_RELEASE);
    carve_arena_destroy(y); /* waits for the capture to end */
    CHECK(load(&o->ended));
    return NULL;
}

static void case_other_thread(void) {
    carve_arena *a = g_segments ? gpu_arena_conf("vmm=0", "graph") : gpu_arena(0, 1, 0, 0, "graph");
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreate(&s)); /* blocking: the legacy stream tells of its capture */
    step_state st = {.a = a, .c = gpu_counter_of(0, 0)};
    carve_graph_pool *g = NULL;
    CHECK_OK(a, carve_graph_pool_create(a, &g));
    CHECK_OK(a, carve_graph_pool_begin(a, g, (carve_stream)s));
    step(&st, s);
    CHECK(gpu_counter_take(st.c, s) == 0);
    other o = {.a = a, .s2 = gpu_stream_new()}; /* made before the capture, as the second arena */
    o.y = g_segments ? gpu_arena_conf("vmm=0", "other") : gpu_arena(0, 1, 0, 0, "other");
    pthread_t t;
    CHECK(pthread_create(&t, NULL, other_thread, &o) == 0);
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    __atomic_store_n(&o.started, 1, __ATOMIC_RELEASE);
    step(&st, s);
    while (!load(&o.done))
        pause_ms(1);
    pause_ms(20); /* the other thread is in carve_arena_destroy */
    __atomic_store_n(&o.ended, 1, __ATOMIC_RELEASE);
    cudaError_t e = cudaStreamEndCapture(s, &graph);
    pthread_join(t, NULL);
    CHECK(e == cudaSuccess && graph != NULL);
    CHECK(st.bad == 0 && o.bad == 0 && o.mismatches == 0);
    CHECK_OK(a, carve_graph_pool_end(a, g, (carve_stream)s));
    if (graph) {
        CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
        for (int i = 0; i < 100; i++)
            CUDA_CHECK(cudaGraphLaunch(exec, s));
        CUDA_CHECK(cudaStreamSynchronize(s));
        CUDA_CHECK(cudaGraphExecDestroy(exec));
        CUDA_CHECK(cudaGraphDestroy(graph));
    }
    unsigned long long bad = gpu_counter_take(st.c, s);
    CHECK(bad == 0);
    printf("  capture beside another thread's carve calls: %s, mismatches %llu (graph) %llu (other thread)\n",
           cudaGetErrorName(e), bad, o.mismatches);
    CHECK_OK(a, carve_graph_pool_release(a, g));
    CHECK_ARENA(a);
    CUDA_CHECK(cudaStreamDestroy(s));
    gpu_stream_free(o.s2);
    carve_arena_destroy(a);
}

int main(void) {
    gpu_start("gpu_graph", 1);
    GPU_CASE(case_replay);
    GPU_CASE(case_capture_without_pool);
    GPU_CASE(case_other_thread);
    g_segments = 1;
    GPU_CASE(case_replay);
    GPU_CASE(case_capture_without_pool);
    GPU_CASE(case_other_thread);
    return gpu_finish();
}
