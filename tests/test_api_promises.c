/*
 * test_api_promises.c — promises of the engine-facing calls, each at the
 * exact sequence that once broke it:
 *  - a failed carve_free_on_stream / carve_free_after_event changes nothing
 *    (the stream or event it added goes again; the message names the call):
 *    a per-thread stream of a thread that has exited, the stream named
 *    being captured, a declared use on another thread's per-thread stream;
 *  - carve_error_info.host_memory comes from the failure, not from the
 *    words of the message (an arena named "host memory pool");
 *  - out-of-memory messages name the stream the caller passed
 *    (cudaStreamPerThread, not carve's key for it) and carve_alloc_aligned;
 *  - carve_alloc_aligned judges its room (size + align - 256) against the
 *    limit before reclaiming anything;
 *  - the out-of-memory callback is not called again inside its own call,
 *    but another arena's is; a callback may replace itself.
 */
#include <pthread.h>

#include "test_util.h"

#define S1 ((carve_stream)(uintptr_t)0x1000)
#define S2 ((carve_stream)(uintptr_t)0x2000)
#define EV ((carve_event)(uintptr_t)0x7000)
#define MiB ((size_t)1 << 20)

static int has(const char *msg, const char *part) { return strstr(msg, part) != NULL; }

/* ---- failed frees change nothing ---- */

typedef struct other_free {
    carve_arena *a;
    void *p;
    carve_status st;
    char msg[512];
} other_free;

static void *free_on_own_stream(void *arg) {
    other_free *o = arg;
    o->st = carve_free_on_stream(o->a, o->p, CARVE_STREAM_PER_THREAD);
    snprintf(o->msg, sizeof(o->msg), "%s", carve_last_error(o->a));
    return NULL;
}

/* Thread B's carve_free_on_stream(p, cudaStreamPerThread) fails (the event
 * record, injected) and B exits: B's stream was left a use of p, and the
 * owner's carve_free failed from then on ("an event on another thread's
 * per-thread default stream cannot be recorded from this thread"). */
static void test_failed_free_on_per_thread_stream(void) {
    carve_arena *a = test_arena_conf(CARVE_BACKEND_HOST, 1, 0, 0, "fail_backend_at=2");
    other_free o = {.a = a};
    CHECK_OK(a, carve_alloc(a, 4096, S1, &o.p));
    pthread_t t;
    CHECK(pthread_create(&t, NULL, free_on_own_stream, &o) == 0);
    pthread_join(t, NULL);
    CHECK(o.st == CARVE_ERR_BACKEND);
    CHECK(has(o.msg, "carve_free_on_stream(") && !has(o.msg, "carve_free("));
    CHECK_OK(a, carve_buffer_info(a, o.p, NULL, NULL)); /* still live */
    CHECK_OK(a, carve_free(a, o.p));
    carve_stats s;
    CHECK_OK(a, carve_get_stats(a, &s));
    CHECK(s.num_live == 0 && s.allocated_bytes == 0);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

typedef struct declarer {
    carve_arena *a;
    void *p;
    pthread_barrier_t bar;
    carve_status declared, freed;
} declarer;

/* Declares p used on this thread's per-thread stream, waits while the main
 * thread's frees fail, then frees p itself. */
static void *declare_then_free(void *arg) {
    declarer *d = arg;
    d->declared = carve_record_stream(d->a, d->p, CARVE_STREAM_PER_THREAD);
    pthread_barrier_wait(&d->bar);
    pthread_barrier_wait(&d->bar);
    d->freed = carve_free(d->a, d->p);
    return NULL;
}

/* carve_free_on_stream(p, S2) while S2 is captured fails; S2 then stayed a
 * use of p, and the plain carve_free later recorded an event on S2 (which
 * the program may have destroyed) and kept p from S1 at once. */
static void test_failed_free_on_captured_stream(void) {
    carve_arena *a = test_arena_conf(CARVE_BACKEND_HOST, 1, 0, 0, "sim_event_polls=1000");
    void *p, *q;
    carve_stats s0, s1;
    CHECK_OK(a, carve_alloc(a, 4096, S1, &p));
    CHECK_OK(a, carve_sim_set_capturing(a, S2, 1));
    CHECK_ST(a, carve_free_on_stream(a, p, S2), CARVE_ERR_BACKEND);
    CHECK(has(carve_last_error(a), "carve_free_on_stream("));
    CHECK_OK(a, carve_sim_set_capturing(a, S2, 0));
    CHECK_OK(a, carve_get_stats(a, &s0));
    CHECK_OK(a, carve_free(a, p));
    CHECK_OK(a, carve_get_stats(a, &s1));
    CHECK(s1.num_event_records == s0.num_event_records); /* nothing on S2 */
    CHECK_OK(a, carve_alloc(a, 4096, S1, &q));
    CHECK(q == p); /* a plain free: reusable at once on its own stream */
    CHECK_OK(a, carve_free(a, q));
    /* A use declared before stays: only what the failed call added goes.
     * (A capture of a declared stream fails no free: test_order, case 9.) */
    declarer d = {.a = a};
    CHECK_OK(a, carve_alloc(a, 4096, S1, &d.p));
    CHECK(pthread_barrier_init(&d.bar, NULL, 2) == 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, declare_then_free, &d) == 0);
    pthread_barrier_wait(&d.bar); /* its per-thread stream is a use of p, which no other thread can record on */
    CHECK_ST(a, carve_free_after_event(a, d.p, EV), CARVE_ERR_BACKEND);
    CHECK(has(carve_last_error(a), "carve_free_after_event("));
    CHECK_ST(a, carve_free_on_stream(a, d.p, (carve_stream)(uintptr_t)0x3000), CARVE_ERR_BACKEND);
    CHECK(has(carve_last_error(a), "carve_free_on_stream("));
    CHECK_OK(a, carve_get_stats(a, &s0));
    pthread_barrier_wait(&d.bar); /* it frees p now */
    pthread_join(t, NULL);
    pthread_barrier_destroy(&d.bar);
    CHECK(d.declared == CARVE_OK && d.freed == CARVE_OK);
    CHECK_OK(a, carve_get_stats(a, &s1));
    CHECK(s1.num_event_records == s0.num_event_records + 1); /* its stream's, and only its */
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* ---- messages and error numbers ---- */

static void test_oom_reports(void) {
    carve_config c;
    carve_config_init(&c);
    c.backend = CARVE_BACKEND_HOST;
    c.limit_bytes = 4 * MiB;
    c.name = "host memory pool";
    carve_arena *a;
    CHECK_OK(NULL, carve_arena_create(&c, &a));
    void *p;
    carve_error_info e;
    /* A limit OOM, whatever the arena's name says. */
    CHECK_ST(a, carve_alloc(a, 8 * MiB, S1, &p), CARVE_ERR_OOM);
    CHECK_OK(a, carve_last_error_info(a, &e));
    CHECK(e.status == CARVE_ERR_OOM && e.host_memory == 0 && e.driver_api == 0);
    /* The stream as passed (it printed carve's key for it, 0x14). */
    CHECK_ST(a, carve_alloc(a, 8 * MiB, CARVE_STREAM_PER_THREAD, &p), CARVE_ERR_OOM);
    char want[64];
    snprintf(want, sizeof(want), "on stream %p ", (void *)CARVE_STREAM_PER_THREAD);
    CHECK(has(carve_last_error(a), want));
    /* Aligned: 3 MiB at 2 MiB needs 5 MiB of room, over the 4 MiB limit:
     * refused at once, no device synchronization (it made two), and the
     * message names carve_alloc_aligned. */
    carve_stats s0, s1;
    CHECK_OK(a, carve_alloc(a, MiB, S1, &p));
    CHECK_OK(a, carve_free(a, p));
    CHECK_OK(a, carve_get_stats(a, &s0));
    CHECK_ST(a, carve_alloc_aligned(a, 3 * MiB, 2 * MiB, S1, &p), CARVE_ERR_OOM);
    CHECK(p == NULL);
    CHECK_OK(a, carve_get_stats(a, &s1));
    CHECK(s1.num_syncs == s0.num_syncs);
    CHECK(has(carve_last_error(a), "carve_alloc_aligned"));
    CHECK_OK(a, carve_last_error_info(a, &e));
    CHECK(e.host_memory == 0);
    /* Room that fits the limit still works. */
    CHECK_OK(a, carve_alloc_aligned(a, MiB, 2 * MiB, S1, &p));
    CHECK(p && ((uintptr_t)p & (2 * MiB - 1)) == 0);
    CHECK_OK(a, carve_free(a, p));
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* ---- the out-of-memory callback ---- */

static carve_arena *arena_a, *arena_b;
static unsigned calls_a, calls_b;
static carve_status inner_st;

static int cb_b(carve_arena *a, const carve_oom_info *i, void *u) {
    (void)a, (void)i, (void)u;
    calls_b++;
    return CARVE_OOM_FAIL;
}

static int cb_a(carve_arena *a, const carve_oom_info *i, void *u) {
    (void)i, (void)u;
    void *p;
    calls_a++;
    inner_st = carve_alloc(arena_b, (size_t)1 << 30, S1, &p); /* B's callback: called */
    carve_status again = carve_alloc(a, (size_t)1 << 30, S1, &p); /* A's own: not again */
    CHECK(again == CARVE_ERR_OOM);
    return CARVE_OOM_FAIL;
}

static int replaces_itself(carve_arena *a, const carve_oom_info *i, void *u) {
    (void)i;
    calls_a++;
    CHECK_OK(a, carve_set_oom_callback(a, cb_b, u)); /* its own call is not waited for */
    return CARVE_OOM_FAIL;
}

/* Inside A's callback an allocation on B ran out of memory without calling
 * B's callback: the suppression was per thread, not per arena. */
static void test_callback_per_arena(void) {
    arena_a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, 0, 64 * MiB, "");
    arena_b = test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, 0, 64 * MiB, "");
    CHECK_OK(arena_a, carve_set_oom_callback(arena_a, cb_a, NULL));
    CHECK_OK(arena_b, carve_set_oom_callback(arena_b, cb_b, NULL));
    void *p;
    CHECK_ST(arena_a, carve_alloc(arena_a, (size_t)1 << 30, S1, &p), CARVE_ERR_OOM);
    CHECK(calls_a == 1 && calls_b == 1 && inner_st == CARVE_ERR_OOM);
    /* After the call, A's callback is called again. */
    CHECK_ST(arena_a, carve_alloc(arena_a, (size_t)1 << 30, S1, &p), CARVE_ERR_OOM);
    CHECK(calls_a == 2 && calls_b == 2);
    /* A callback replacing itself returns (and the next failure calls the new one). */
    calls_a = calls_b = 0;
    CHECK_OK(arena_a, carve_set_oom_callback(arena_a, replaces_itself, NULL));
    CHECK_ST(arena_a, carve_alloc(arena_a, (size_t)1 << 30, S1, &p), CARVE_ERR_OOM);
    CHECK(calls_a == 1 && calls_b == 0);
    CHECK_ST(arena_a, carve_alloc(arena_a, (size_t)1 << 30, S1, &p), CARVE_ERR_OOM);
    CHECK(calls_a == 1 && calls_b == 1);
    carve_arena_destroy(arena_a);
    carve_arena_destroy(arena_b);
}

int main(void) {
    test_failed_free_on_per_thread_stream();
    test_failed_free_on_captured_stream();
    test_oom_reports();
    test_callback_per_arena();
    return test_finish();
}
