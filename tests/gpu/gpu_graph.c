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
 */
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

int main(void) {
    gpu_start("gpu_graph", 1);
    GPU_CASE(case_replay);
    GPU_CASE(case_capture_without_pool);
    g_segments = 1;
    GPU_CASE(case_replay);
    GPU_CASE(case_capture_without_pool);
    return gpu_finish();
}
