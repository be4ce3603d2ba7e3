/*
 * test_free_ordering.c — frees that name their ordering, and per-thread
 * default streams, on the host and virtual backends (simulated events: one
 * completes after sim_event_polls queries, or a device synchronization).
 *
 *  - carve_free_on_stream on the buffer's own stream is carve_free (reused
 *    at once); on another stream, the memory is reused by no stream, its own
 *    included, before the event recorded on that stream completes;
 *  - carve_free_after_event: the same, ordered by the program's event (one
 *    record of carve's, none on the buffer's stream);
 *  - cudaStreamPerThread: each thread's buffers belong to its own stream
 *    (one pool each, buffer_info says CARVE_STREAM_PER_THREAD), a thread's
 *    free is reused at once by that thread and not by another, and an event
 *    on a thread's per-thread stream is never recorded from another thread.
 */
#include <pthread.h>

#include "test_util.h"

#define S1 ((carve_stream)(uintptr_t)0x1000)
#define S2 ((carve_stream)(uintptr_t)0x2000)
#define EV ((carve_event)(uintptr_t)0x7000)

static carve_arena *arena_polls(carve_backend be, unsigned polls) {
    char conf[64];
    snprintf(conf, sizeof(conf), "sim_event_polls=%u", polls);
    return test_arena_conf(be, 1, 0, 0, conf);
}

/* Allocate `size` on S1 eight times: at which allocation did `p` come back
 * (-1: never)? Everything is freed again. */
static int reused_at(carve_arena *a, size_t size, void *p) {
    void *keep[8];
    int at = -1;
    for (int i = 0; i < 8; i++) {
        CHECK_OK(a, carve_alloc(a, size, S1, &keep[i]));
        if (keep[i] == p && at < 0)
            at = i;
    }
    for (int i = 0; i < 8; i++)
        CHECK_OK(a, carve_free(a, keep[i]));
    return at;
}

static void test_free_on_stream(carve_backend be) {
    carve_arena *a = arena_polls(be, 3);
    void *p, *q;
    carve_stats s0, s1;
    /* Own stream: as carve_free, reused at once, no event. */
    CHECK_OK(a, carve_alloc(a, 8192, S1, &p));
    CHECK_OK(a, carve_get_stats(a, &s0));
    CHECK_OK(a, carve_free_on_stream(a, p, S1));
    CHECK_OK(a, carve_alloc(a, 8192, S1, &q));
    CHECK(q == p);
    CHECK_OK(a, carve_get_stats(a, &s1));
    CHECK(s1.num_event_records == s0.num_event_records);
    /* Another stream: one event, on S2; the memory waits for it (3 polls). */
    CHECK_OK(a, carve_free_on_stream(a, q, S2));
    CHECK_ST(a, carve_free_on_stream(a, q, S2), CARVE_ERR_BAD_POINTER); /* no longer live */
    CHECK_OK(a, carve_get_stats(a, &s1));
    CHECK(s1.num_event_records == s0.num_event_records + 1);
    CHECK(s1.num_live == 0 && s1.allocated_bytes == 0);
    CHECK_ARENA(a);
    CHECK(reused_at(a, 8192, p) >= 3);
    CHECK_OK(a, carve_free_on_stream(a, NULL, S2));
    CHECK_ST(a, carve_free_on_stream(NULL, p, S2), CARVE_ERR_INVALID);
    int x;
    CHECK_ST(a, carve_free_on_stream(a, &x, S2), CARVE_ERR_BAD_POINTER);
    CHECK_ARENA(a);
    CHECK_OK(a, carve_get_stats(a, &s1));
    CHECK(s1.num_live == 0);
    carve_arena_destroy(a);
}

static void test_free_after_event(carve_backend be) {
    carve_arena *a = arena_polls(be, 3);
    void *p;
    carve_stats s0, s1;
    CHECK_OK(a, carve_alloc(a, 8192, S1, &p));
    CHECK_ST(a, carve_free_after_event(a, p, NULL), CARVE_ERR_INVALID);
    CHECK_OK(a, carve_buffer_info(a, p, NULL, NULL)); /* refused: still live */
    CHECK_OK(a, carve_get_stats(a, &s0));
    CHECK_OK(a, carve_free_after_event(a, p, EV));
    CHECK_ST(a, carve_buffer_info(a, p, NULL, NULL), CARVE_ERR_BAD_POINTER);
    CHECK_OK(a, carve_get_stats(a, &s1));
    CHECK(s1.num_event_records == s0.num_event_records + 1); /* the follower, nothing on S1 */
    CHECK(s1.num_live == 0);
    CHECK_ARENA(a);
    CHECK(reused_at(a, 8192, p) >= 3);
    /* With carve_record_stream too: both the event and S2 are waited for. */
    CHECK_OK(a, carve_alloc(a, 8192, S1, &p));
    CHECK_OK(a, carve_record_stream(a, p, S2));
    CHECK_OK(a, carve_free_after_event(a, p, EV));
    CHECK_OK(a, carve_get_stats(a, &s1));
    CHECK(s1.num_event_records == s0.num_event_records + 3);
    CHECK(reused_at(a, 8192, p) >= 3);
    /* A device synchronization completes it at once. */
    CHECK_OK(a, carve_alloc(a, 8192, S1, &p));
    CHECK_OK(a, carve_free_after_event(a, p, EV));
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0 || be == CARVE_BACKEND_VIRTUAL);
    CHECK_OK(a, carve_free_after_event(a, NULL, EV));
    CHECK_ST(a, carve_free_after_event(NULL, p, EV), CARVE_ERR_INVALID);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* ---- per-thread default streams ---- */

typedef struct pt_shared {
    carve_arena *a;
    pthread_barrier_t bar;
    void *p;
    int again_same;
} pt_shared;

static void *pt_thread(void *arg) {
    pt_shared *sh = arg;
    void *p, *q;
    carve_stream s = NULL;
    size_t size = 0;
    CHECK_OK(sh->a, carve_alloc(sh->a, 8192, CARVE_STREAM_PER_THREAD, &p));
    CHECK_OK(sh->a, carve_buffer_info(sh->a, p, &size, &s));
    CHECK(s == CARVE_STREAM_PER_THREAD && size == 8192);
    CHECK_OK(sh->a, carve_free(sh->a, p));
    sh->p = p;
    pthread_barrier_wait(&sh->bar); /* the main thread allocates now */
    pthread_barrier_wait(&sh->bar);
    CHECK_OK(sh->a, carve_alloc(sh->a, 8192, CARVE_STREAM_PER_THREAD, &q));
    sh->again_same = q == p; /* its own stream: reused at once */
    CHECK_OK(sh->a, carve_free(sh->a, q));
    return NULL;
}

static void test_per_thread(carve_backend be) {
    pt_shared sh = {.a = arena_polls(be, 1000)};
    pthread_t t;
    pthread_barrier_init(&sh.bar, NULL, 2);
    pthread_create(&t, NULL, pt_thread, &sh);
    pthread_barrier_wait(&sh.bar);
    void *q;
    CHECK_OK(sh.a, carve_alloc(sh.a, 8192, CARVE_STREAM_PER_THREAD, &q));
    CHECK(q != sh.p); /* another thread's stream may still use it */
    carve_stats s;
    CHECK_OK(sh.a, carve_get_stats(sh.a, &s));
    CHECK(s.num_streams == 2);
    pthread_barrier_wait(&sh.bar);
    pthread_join(t, NULL);
    CHECK(sh.again_same);
    /* record_stream on the per-thread stream: the event must be recorded on
     * this thread's stream, which only this thread can do. */
    void *r;
    CHECK_OK(sh.a, carve_alloc(sh.a, 4096, S1, &r));
    CHECK_OK(sh.a, carve_record_stream(sh.a, r, CARVE_STREAM_PER_THREAD));
    CHECK_OK(sh.a, carve_free(sh.a, r));
    CHECK_OK(sh.a, carve_free(sh.a, q));
    CHECK_OK(sh.a, carve_get_stats(sh.a, &s));
    CHECK(s.num_live == 0 && s.num_streams == 3);
    CHECK_ARENA(sh.a);
    pthread_barrier_destroy(&sh.bar);
    carve_arena_destroy(sh.a);
}

/* A buffer declared on another thread's per-thread stream, freed here: no
 * event can be recorded on that stream from this thread, so the free is
 * refused and the buffer stays live; its own thread frees it. */
typedef struct pt_decl {
    carve_arena *a;
    void *p;
} pt_decl;

static void *pt_declare(void *arg) {
    pt_decl *d = arg;
    CHECK_OK(d->a, carve_record_stream(d->a, d->p, CARVE_STREAM_PER_THREAD));
    return NULL;
}

static void test_per_thread_foreign_record(carve_backend be) {
    pt_decl d = {.a = arena_polls(be, 0)};
    CHECK_OK(d.a, carve_alloc(d.a, 4096, S1, &d.p));
    pthread_t t;
    pthread_create(&t, NULL, pt_declare, &d);
    pthread_join(t, NULL);
    CHECK_ST(d.a, carve_free(d.a, d.p), CARVE_ERR_BACKEND);
    CHECK(strstr(carve_last_error(d.a), "per-thread") != NULL);
    CHECK_OK(d.a, carve_buffer_info(d.a, d.p, NULL, NULL)); /* still live */
    carve_arena_destroy(d.a);
}

int main(void) {
    carve_backend bes[] = {CARVE_BACKEND_VIRTUAL, CARVE_BACKEND_HOST};
    for (int i = 0; i < 2; i++) {
        test_free_on_stream(bes[i]);
        test_free_after_event(bes[i]);
        test_per_thread(bes[i]);
        test_per_thread_foreign_record(bes[i]);
    }
    return test_finish();
}
