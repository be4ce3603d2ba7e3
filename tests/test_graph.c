/*
 * test_graph.c — stream capture and graph pools on the host backend
 * (segments) and the virtual backend (virtual-memory mode and segments),
 * with captures marked by carve_sim_set_capturing.
 *
 *  - A captured step that allocates and frees through carve, run once
 *    uncaptured into a graph pool first: inside the capture nothing is
 *    reserved, mapped, recorded, asked or waited for (the backend counters
 *    do not move), and every allocation succeeds from the pool's memory; a
 *    request past what the pool holds brings memory in (backend calls, but
 *    nothing recorded, asked or waited for) and the pool keeps it; one past
 *    the limit fails, waiting for nothing.
 *  - After the capture, the pool's memory stays the graph's: another stream
 *    filling the arena to its limit never gets a byte of it, and
 *    carve_empty_cache keeps it; after carve_graph_pool_release it is the
 *    arena's again (the other stream gets more), and nothing leaks.
 *  - A captured stream with no graph pool: a request its pool cannot meet
 *    fails with CARVE_ERR_OOM without touching the backend; cached memory
 *    is used; frees record nothing.
 *  - Inside a capture, a graph pool's buffer freed naming its own (routed)
 *    stream, with carve_free_on_stream or carve_record_stream first, is
 *    freed as by carve_free: no event is recorded on the capturing stream
 *    (once refused with CARVE_ERR_BACKEND, the buffer then unfreeable).
 *  - The routing calls' refusals.
 *  - A capture underway on one stream of the arena (S3, standing for a
 *    capture another thread makes) while other streams go on: carve
 *    neither synchronizes the device nor gives memory back to the driver
 *    (the backend counts each as a broken capture, as a real one breaks),
 *    and no allocation, free or carve_empty_cache fails for it; a graph
 *    pool's release, which must synchronize, is refused until the capture
 *    ends; carve_arena_destroy waits for the capture to end.
 */
#include <pthread.h>
#include <time.h>

#include "engine/types.h"
#include "test_util.h"

#define S1 ((carve_stream)(uintptr_t)0x1000)
#define S2 ((carve_stream)(uintptr_t)0x2000)
#define S3 ((carve_stream)(uintptr_t)0x3000)
#define MiB ((size_t)1 << 20)
#define LIMIT (64 * MiB)

typedef struct span {
    uintptr_t lo, hi;
} span;

/* The step: a few buffers of an inference step, allocated and freed. */
static int step(carve_arena *a, carve_stream s, span *seen, int *nseen) {
    static const size_t sizes[] = {4 * MiB, 1 * MiB, 300000, 6 * MiB, 2000};
    void *p[5] = {0};
    int ok = 1;
    for (int i = 0; i < 5; i++) {
        ok &= carve_alloc(a, sizes[i], s, &p[i]) == CARVE_OK;
        if (p[i] && seen) {
            seen[*nseen].lo = (uintptr_t)p[i];
            seen[(*nseen)++].hi = (uintptr_t)p[i] + sizes[i];
        }
        if (i == 2 && p[0]) { /* a temporary freed mid-step, its memory reused by the next */
            ok &= carve_free(a, p[0]) == CARVE_OK;
            p[0] = NULL;
        }
    }
    for (int i = 0; i < 5; i++)
        if (p[i])
            ok &= carve_free(a, p[i]) == CARVE_OK;
    return ok;
}

static int overlaps(const span *seen, int n, uintptr_t lo, uintptr_t hi) {
    for (int i = 0; i < n; i++)
        if (lo < seen[i].hi && seen[i].lo < hi)
            return 1;
    return 0;
}

static void test_graph_pool(carve_backend be, const char *conf) {
    carve_arena *a = test_arena_conf(be, 1, 0, LIMIT, conf);
    carve_graph_pool *g = NULL;
    CHECK_OK(a, carve_graph_pool_create(a, &g));
    CHECK_OK(a, carve_graph_pool_begin(a, g, S1));
    span seen[64];
    int nseen = 0;
    CHECK(step(a, S1, seen, &nseen)); /* warm-up: the pool maps what the step needs */
    carve_stats s0, s1;
    CHECK_OK(a, carve_get_stats(a, &s0));
    CHECK_OK(a, carve_sim_set_capturing(a, S1, 1));
    for (int k = 0; k < 3; k++) /* the capture (and two more, as shared-pool graphs would) */
        CHECK(step(a, S1, seen, &nseen));
    CHECK_OK(a, carve_get_stats(a, &s1));
    CHECK(s1.num_backend_allocs == s0.num_backend_allocs && s1.num_backend_frees == s0.num_backend_frees);
    CHECK(s1.num_event_records == s0.num_event_records && s1.num_event_queries == s0.num_event_queries);
    CHECK(s1.num_syncs == s0.num_syncs);
    CHECK(s1.reserved_bytes == s0.reserved_bytes);
    /* More than the pool holds (a capture whose warm-up ran elsewhere, as
     * torch.cuda.graph's does): the graph pool brings it in, recording,
     * asking and waiting for nothing, and keeps it. */
    void *big = NULL;
    CHECK_OK(a, carve_alloc(a, 30 * MiB, S1, &big));
    if (big) {
        seen[nseen].lo = (uintptr_t)big;
        seen[nseen++].hi = (uintptr_t)big + 30 * MiB;
    }
    CHECK_OK(a, carve_free(a, big));
    carve_stats s2;
    CHECK_OK(a, carve_get_stats(a, &s2));
    CHECK(s2.reserved_bytes > s1.reserved_bytes && s2.num_backend_allocs > s1.num_backend_allocs);
    CHECK(s2.num_backend_frees == s1.num_backend_frees);
    CHECK(s2.num_event_records == s1.num_event_records && s2.num_event_queries == s1.num_event_queries);
    CHECK(s2.num_syncs == s1.num_syncs);
    CHECK(step(a, S1, seen, &nseen)); /* the capture goes on in what the pool holds */
    /* Past the limit it fails as any request does, and waits for nothing. */
    void *p = (void *)1;
    CHECK_ST(a, carve_alloc(a, LIMIT + MiB, S1, &p), CARVE_ERR_OOM);
    CHECK(p == NULL);
    CHECK_OK(a, carve_get_stats(a, &s1));
    CHECK(s1.num_syncs == s2.num_syncs && s1.num_event_records == s2.num_event_records);
    CHECK(s1.reserved_bytes == s2.reserved_bytes);
    CHECK_OK(a, carve_sim_set_capturing(a, S1, 0));
    CHECK_OK(a, carve_graph_pool_end(a, g, S1));
    CHECK_ARENA(a);

    /* The graph's memory stays its own: S1 (its own pool again) and S2 fill
     * the arena and never get a byte of it; empty_cache keeps it. */
    size_t held = s1.reserved_bytes;
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) >= held);
    void *mine[64];
    int n = 0;
    while (n < 64 && carve_alloc(a, 4 * MiB, n % 2 ? S1 : S2, &mine[n]) == CARVE_OK) {
        CHECK(!overlaps(seen, nseen, (uintptr_t)mine[n], (uintptr_t)mine[n] + 4 * MiB));
        n++;
    }
    CHECK(n > 0 && n < 64);
    CHECK_ARENA(a);
    /* Released: after the synchronization its memory serves the others. */
    CHECK_ST(a, carve_graph_pool_release(a, NULL), CARVE_ERR_INVALID);
    CHECK_OK(a, carve_graph_pool_release(a, g));
    CHECK_ST(a, carve_graph_pool_release(a, g), CARVE_ERR_INVALID); /* once */
    CHECK_ST(a, carve_graph_pool_begin(a, g, S1), CARVE_ERR_INVALID);
    int more = 0, before = n;
    while (n < 64 && carve_alloc(a, 4 * MiB, S2, &mine[n]) == CARVE_OK) {
        more += overlaps(seen, nseen, (uintptr_t)mine[n], (uintptr_t)mine[n] + 4 * MiB);
        n++;
    }
    CHECK(n > before); /* the graph's memory serves S2 now */
    carve_config c;
    CHECK_OK(a, carve_arena_get_config(a, &c));
    CHECK(more > 0 || c.vmm); /* segments: the very bytes (virtual-memory mode unmaps them, maps anew) */
    for (int i = 0; i < n; i++)
        CHECK_OK(a, carve_free(a, mine[i]));
    carve_stats st;
    CHECK_OK(a, carve_get_stats(a, &st));
    CHECK(st.num_live == 0 && st.allocated_bytes == 0);
    CHECK_ARENA(a);
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0);
    carve_arena_destroy(a);
}

static void test_capture_without_pool(carve_backend be, const char *conf) {
    carve_arena *a = test_arena_conf(be, 1, 0, LIMIT, conf);
    void *p = (void *)1, *q;
    carve_stats s0, s1;
    CHECK_OK(a, carve_sim_set_capturing(a, S3, 1));
    CHECK_OK(a, carve_get_stats(a, &s0));
    CHECK_ST(a, carve_alloc(a, 3 * MiB, S3, &p), CARVE_ERR_OOM);
    CHECK(p == NULL);
    CHECK_OK(a, carve_get_stats(a, &s1));
    CHECK(s1.num_backend_allocs == s0.num_backend_allocs && s1.num_syncs == s0.num_syncs);
    CHECK_OK(a, carve_sim_set_capturing(a, S3, 0));
    CHECK_OK(a, carve_alloc(a, 3 * MiB, S3, &p));
    CHECK_OK(a, carve_alloc(a, 8 * MiB, S3, &q));
    CHECK_OK(a, carve_free(a, p));
    CHECK_OK(a, carve_free(a, q));
    CHECK_OK(a, carve_sim_set_capturing(a, S3, 1));
    CHECK_OK(a, carve_get_stats(a, &s0));
    for (int i = 0; i < 50; i++) { /* cached memory serves; nothing recorded or asked */
        CHECK_OK(a, carve_alloc(a, (size_t)(i % 3 + 1) * MiB, S3, &p));
        CHECK_OK(a, carve_free(a, p));
    }
    CHECK_OK(a, carve_get_stats(a, &s1));
    CHECK(s1.num_backend_allocs == s0.num_backend_allocs && s1.num_backend_frees == s0.num_backend_frees);
    CHECK(s1.num_event_records == s0.num_event_records && s1.num_event_queries == s0.num_event_queries);
    CHECK(s1.num_syncs == s0.num_syncs);
    CHECK_OK(a, carve_sim_set_capturing(a, S3, 0));
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

static void test_refusals(void) {
    carve_arena *a = test_arena(CARVE_BACKEND_VIRTUAL, 1, 0, 0), *b = test_arena(CARVE_BACKEND_VIRTUAL, 1, 0, 0);
    carve_graph_pool *g, *h;
    CHECK_OK(a, carve_graph_pool_create(a, &g));
    CHECK_OK(a, carve_graph_pool_create(a, &h));
    CHECK_ST(a, carve_graph_pool_create(a, NULL), CARVE_ERR_INVALID);
    CHECK_ST(b, carve_graph_pool_begin(b, g, S1), CARVE_ERR_INVALID); /* another arena's */
    CHECK_OK(a, carve_graph_pool_begin(a, g, S1));
    CHECK_ST(a, carve_graph_pool_begin(a, h, S1), CARVE_ERR_INVALID); /* S1 routed already */
    CHECK_ST(a, carve_graph_pool_begin(a, g, S2), CARVE_ERR_INVALID); /* g has a stream */
    CHECK_ST(a, carve_graph_pool_release(a, g), CARVE_ERR_INVALID);   /* still routed */
    CHECK_ST(a, carve_graph_pool_end(a, h, S1), CARVE_ERR_INVALID);   /* not h's */
    void *p;
    carve_stream s = NULL;
    CHECK_OK(a, carve_alloc(a, 1000, S1, &p));
    CHECK_OK(a, carve_buffer_info(a, p, NULL, &s));
    CHECK(s == S1);
    CHECK_OK(a, carve_graph_pool_end(a, g, S1));
    CHECK_ST(a, carve_graph_pool_end(a, g, S1), CARVE_ERR_INVALID);
    CHECK_OK(a, carve_free(a, p)); /* into g, after the routing ended */
    CHECK_OK(a, carve_graph_pool_release(a, g));
    CHECK_OK(a, carve_graph_pool_release(a, h));
    CHECK_ARENA(a);
    carve_arena_destroy(b);
    carve_arena_destroy(a);
}

static void test_own_stream_in_capture(carve_backend backend, const char *conf) {
    carve_arena *a = test_arena_conf(backend, 1, 0, LIMIT, conf);
    carve_graph_pool *g;
    CHECK_OK(a, carve_graph_pool_create(a, &g));
    CHECK_OK(a, carve_graph_pool_begin(a, g, S1));
    void *x, *y;
    CHECK_OK(a, carve_alloc(a, 4 * MiB, S1, &x)); /* the uncaptured run */
    CHECK_OK(a, carve_alloc(a, 4 * MiB, S1, &y));
    CHECK_OK(a, carve_free(a, x));
    CHECK_OK(a, carve_free(a, y));
    CHECK_OK(a, carve_sim_set_capturing(a, S1, 1));
    carve_stats s0, s1;
    CHECK_OK(a, carve_get_stats(a, &s0));
    CHECK_OK(a, carve_alloc(a, 4 * MiB, S1, &x));
    CHECK_OK(a, carve_alloc(a, 4 * MiB, S1, &y));
    CHECK_OK(a, carve_free_on_stream(a, x, S1));
    CHECK_OK(a, carve_record_stream(a, y, S1));
    CHECK_OK(a, carve_free(a, y));
    CHECK_OK(a, carve_get_stats(a, &s1));
    CHECK(s1.num_event_records == s0.num_event_records);
    CHECK(s1.num_live == s0.num_live);
    CHECK_OK(a, carve_sim_set_capturing(a, S1, 0));
    CHECK_OK(a, carve_graph_pool_end(a, g, S1));
    CHECK_OK(a, carve_graph_pool_release(a, g));
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

typedef struct {
    carve_arena *a;
    int destroying;             /* atomic */
    unsigned long broken_then;  /* the backend's broken captures when the capture ended */
} ender;

/* Ends S3's capture once the main thread is inside carve_arena_destroy. */
static void *end_capture_later(void *arg) {
    ender *e = arg;
    while (!__atomic_load_n(&e->destroying, __ATOMIC_ACQUIRE))
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL); /* destroy is waiting by now */
    e->broken_then = __atomic_load_n(&e->a->be.sim_broken_captures, __ATOMIC_RELAXED);
    /* The capture ends: the mark goes with one store, since the arena may
     * be gone right after it (carve_sim_set_capturing, which takes the
     * arena's lock, must not race with its destruction). */
    __atomic_store_n(&e->a->be.sim_ncapturing, 0, __ATOMIC_RELEASE);
    return NULL;
}

static void test_capture_elsewhere(carve_backend backend, const char *conf) {
    carve_arena *a = test_arena_conf(backend, 1, 0, LIMIT, conf);
    void *p, *q[64];
    CHECK_OK(a, carve_alloc(a, 1000, S3, &p)); /* S3 is one of the arena's streams */
    CHECK_OK(a, carve_free(a, p));
    CHECK_OK(a, carve_sim_set_capturing(a, S3, 1));
    carve_stats s0, s1;
    CHECK_OK(a, carve_get_stats(a, &s0));
    for (int k = 0; k < 3; k++) { /* growth, frees, the cache emptied */
        CHECK_OK(a, carve_alloc(a, 8 * MiB, S1, &p));
        CHECK_OK(a, carve_alloc(a, 3 * MiB, S2, &q[0]));
        CHECK_OK(a, carve_free(a, p));
        CHECK_OK(a, carve_free_on_stream(a, q[0], S1));
        size_t held = carve_memory_reserved(a);
        CHECK_OK(a, carve_empty_cache(a));
        CHECK(carve_memory_reserved(a) == held); /* kept until a call after the capture */
    }
    carve_graph_pool *g;
    CHECK_OK(a, carve_graph_pool_create(a, &g));
    CHECK_OK(a, carve_graph_pool_begin(a, g, S1));
    CHECK(step(a, S1, NULL, NULL));
    CHECK_OK(a, carve_graph_pool_end(a, g, S1));
    CHECK_ST(a, carve_graph_pool_release(a, g), CARVE_ERR_BACKEND); /* it would synchronize */
    CHECK(strstr(carve_last_error(a), "capture") != NULL);
    int n = 0; /* the out-of-memory path: reclaims, waits for nothing */
    while (n < 64 && carve_alloc(a, 4 * MiB, S2, &q[n]) == CARVE_OK)
        n++;
    CHECK(n > 0 && n < 64);
    for (int i = 0; i < n; i++)
        CHECK_OK(a, carve_free(a, q[i]));
    CHECK_OK(a, carve_get_stats(a, &s1));
    CHECK(s1.num_backend_frees == s0.num_backend_frees); /* nothing went back to the driver */
    CHECK(a->be.sim_broken_captures == 0);              /* nor was the device synchronized */
    CHECK_ARENA(a);
    CHECK_OK(a, carve_sim_set_capturing(a, S3, 0));
    CHECK_OK(a, carve_graph_pool_release(a, g)); /* after the capture */
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0);
    CHECK_OK(a, carve_alloc(a, 8 * MiB, S1, &p)); /* destroyed with memory held, while S3 is captured */
    CHECK_OK(a, carve_sim_set_capturing(a, S3, 1));
    ender e = {.a = a};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, end_capture_later, &e) == 0);
    __atomic_store_n(&e.destroying, 1, __ATOMIC_RELEASE);
    carve_arena_destroy(a);
    pthread_join(t, NULL);
    CHECK(e.broken_then == 0);
}

/* A graph pool growing during its capture beside memory another stream
 * left fully free (segments mode): the growth reserves anew, and gives
 * nothing back to the backend (which may wait for the device and breaks
 * the capture), although a segment is fully free and the new one raises
 * the reserved peak. At the limit, the growth fails waiting for nothing. */
static void test_growth_in_capture(carve_backend be, const char *conf) {
    carve_arena *a = test_arena_conf(be, 1, 0, 512 * MiB, conf);
    void *x[3] = {0}, *y = NULL, *z = (void *)1;
    for (int i = 0; i < 3; i++)
        CHECK_OK(a, carve_alloc(a, 32 * MiB, S2, &x[i]));
    for (int i = 0; i < 3; i++)
        CHECK_OK(a, carve_free(a, x[i]));
    carve_graph_pool *g = NULL;
    CHECK_OK(a, carve_graph_pool_create(a, &g));
    CHECK_OK(a, carve_graph_pool_begin(a, g, S1));
    CHECK_OK(a, carve_sim_set_capturing(a, S1, 1));
    unsigned broken = a->be.sim_broken_captures;
    carve_stats s0, s1;
    CHECK_OK(a, carve_get_stats(a, &s0));
    CHECK_OK(a, carve_alloc(a, 80 * MiB, S1, &y));
    CHECK_OK(a, carve_get_stats(a, &s1));
    CHECK(s1.num_backend_frees == s0.num_backend_frees && s1.num_syncs == s0.num_syncs);
    CHECK(s1.num_backend_allocs > s0.num_backend_allocs && s1.num_event_records == s0.num_event_records);
    CHECK(a->be.sim_broken_captures == broken);
    /* Past the limit with y live: out of memory, the message naming the
     * capture; nothing given back, nothing recorded, no device wait (an
     * event of S2's may be waited for, in relaxed mode: it breaks nothing). */
    CHECK_ST(a, carve_alloc(a, 500 * MiB, S1, &z), CARVE_ERR_OOM);
    CHECK(z == NULL && strstr(carve_last_error(a), "capture") != NULL);
    CHECK_OK(a, carve_get_stats(a, &s1));
    CHECK(s1.num_backend_frees == s0.num_backend_frees && s1.num_event_records == s0.num_event_records);
    CHECK(a->be.sim_broken_captures == broken);
    CHECK(s1.reserved_bytes <= 512 * MiB);
    CHECK_OK(a, carve_free(a, y));
    CHECK_OK(a, carve_sim_set_capturing(a, S1, 0));
    CHECK_OK(a, carve_graph_pool_end(a, g, S1));
    CHECK_OK(a, carve_graph_pool_release(a, g));
    CHECK_ARENA(a);
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0);
    carve_arena_destroy(a);
}

int main(void) {
    test_graph_pool(CARVE_BACKEND_HOST, "");
    test_graph_pool(CARVE_BACKEND_VIRTUAL, "");
    test_graph_pool(CARVE_BACKEND_VIRTUAL, "vmm=0");
    test_capture_without_pool(CARVE_BACKEND_HOST, "");
    test_capture_without_pool(CARVE_BACKEND_VIRTUAL, "");
    test_capture_without_pool(CARVE_BACKEND_VIRTUAL, "vmm=0");
    test_own_stream_in_capture(CARVE_BACKEND_HOST, "");
    test_own_stream_in_capture(CARVE_BACKEND_VIRTUAL, "");
    test_own_stream_in_capture(CARVE_BACKEND_VIRTUAL, "vmm=0");
    test_refusals();
    test_growth_in_capture(CARVE_BACKEND_HOST, "");
    test_growth_in_capture(CARVE_BACKEND_VIRTUAL, "");
    test_growth_in_capture(CARVE_BACKEND_VIRTUAL, "vmm=0");
    test_capture_elsewhere(CARVE_BACKEND_HOST, "");
    test_capture_elsewhere(CARVE_BACKEND_VIRTUAL, "");
    test_capture_elsewhere(CARVE_BACKEND_VIRTUAL, "vmm=0");
    return test_finish();
}
