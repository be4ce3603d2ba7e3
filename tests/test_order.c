/*
 * test_order.c — stream order, case by case, on the deterministic event
 * model (event_model.h): the exact sequences that once handed memory to a
 * stream, or unmapped it, while work queued before its free had not yet
 * run. The model's device does only what each case says, and its oracle
 * fails the test wherever carve gives out or unmaps memory that unfinished
 * work still uses; each case also checks the addresses itself.
 *
 *  1. Segments mode: a range whose event completed was merged with a
 *     neighbour still waiting on another stream's event, and the merged
 *     range was handed out (heap_find) or grown into (carve_heap_extend)
 *     without asking again.
 *  2. Segments mode: ranges of one stream merged keeping the event of the
 *     span given back last, not the event recorded last.
 *  3. Default mode: trimming other streams' free granules synchronized the
 *     device before locking their pools, so granules freed during the wait
 *     counted as done.
 *  4. Both modes: carve_arena_destroy unmapped and released memory whose
 *     freed buffer a kernel queued before the free still used (no wait).
 *     (em_destroy checks every arena destroyed after a case the same way.)
 *  5. carve_record_stream took cudaStreamPerThread, whose event the free
 *     then recorded on the freeing thread's stream: the buffer was handed
 *     out again while the recording thread's kernel was still queued.
 *  6. (Reuse, not safety.) Blocks freed after use on other streams wait in
 *     their pool in free order; polling stopped at the first one not done,
 *     so a block whose other stream was done waited behind one whose
 *     stream was busy.
 *  7. Default mode: free mapped granules move from one stream's pool to
 *     another's without the driver (alloc.c's vmm_adopt) only once a
 *     completed fence of the giving stream covers them: before, the taking
 *     stream maps fresh memory; after, it takes them.
 *  8. A graph pool released while a launch is queued.
 *  9. Both modes: a buffer also used on the legacy stream, freed while
 *     another thread captures a blocking stream, answered CARVE_ERR_BACKEND
 *     and stayed live; now it is freed and waits until the capture is over.
 * 10. Default mode: as 7, for a window (the back of a free block and the
 *     unmapped room after it, alloc.c's vmm_adopt_window): it moves only
 *     once a completed fence covers the free block's granules (the test
 *     fails with that check removed), and the taker then maps the room's
 *     granules only. (explore_order moves windows too, with events
 *     completing in its random orders.)
 * 11. Default mode: as 7, for a join (alloc.c's vmm_join): the free mapped
 *     front of S1's span, right after S2's span, joins S2's span only once
 *     a completed fence covers its granules (the test fails with that
 *     check removed), and S2's request then lies across the joint.
 * 12. Default mode: a stream past the limit whose own free granules no
 *     fence shows done yet, and no other stream's free memory to unmap:
 *     the one device synchronization made to trim the others (vmm.c's
 *     trim_others, with the taker's pool locked) shows its own granules
 *     done too, and they are unmapped then (the request succeeds after one
 *     wait, not after a trim of the others, a second one at the limit and
 *     the out-of-memory path's reclaim); none before the kernel queued
 *     before their free has run (the oracle).
 */
#include <pthread.h>
#include <time.h>

#include "backend/faults.h"
#include "engine/pool.h"
#include "event_model.h"
#include "test_util.h"

#define MiB ((size_t)1 << 20)

static const carve_stream S1 = (carve_stream)(uintptr_t)0x1000, S2 = (carve_stream)(uintptr_t)0x2000,
                          S3 = (carve_stream)(uintptr_t)0x3000;

static carve_arena *arena(const char *conf) {
    carve_config c;
    carve_config_init(&c);
    c.backend = CARVE_BACKEND_VIRTUAL;
    if (carve_config_parse(&c, conf) != CARVE_OK) {
        fprintf(stderr, "%s\n", carve_last_error(NULL));
        exit(1);
    }
    carve_arena *a = NULL;
    if (carve_arena_create(&c, &a) != CARVE_OK) {
        fprintf(stderr, "%s\n", carve_last_error(NULL));
        exit(1);
    }
    return a;
}

static void *alloc_on(em_model *m, carve_arena *a, size_t size, carve_stream s) {
    void *p = NULL;
    CHECK_OK(a, carve_alloc(a, size, s, &p));
    if (p)
        em_allocated(m, p, size, s);
    return p;
}

static void free_it(em_model *m, carve_arena *a, void *p) {
    if (!p)
        return;
    em_freeing(m, p);
    CHECK_OK(a, carve_free(a, p));
}

static int overlap(const void *p, size_t n, const void *q, size_t k) {
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;
    return a < b + k && b < a + n;
}

/* Case 1, heap_find: S1 and S3 each give a 12 MiB span back (pending) by
 * asking for more than the heap holds; only S1's work is done; S2's second
 * 8 MiB buffer must not land on S3's y. */
static void case1_find(void) {
    carve_arena *a = arena("initial=64MiB,vmm=0");
    em_model *m = em_attach(a);
    void *x = alloc_on(m, a, 12 * MiB, S1);
    free_it(m, a, x);
    void *y = alloc_on(m, a, 12 * MiB, S3);
    free_it(m, a, y);
    void *l1 = alloc_on(m, a, 60 * MiB, S1);
    void *l3 = alloc_on(m, a, 60 * MiB, S3);
    CHECK(em_records_on(m, S1) >= 1 && em_records_on(m, S3) >= 1); /* both spans went back with events */
    em_advance(m, S1, em_queued(m, S1));
    void *b1 = alloc_on(m, a, 8 * MiB, S2), *b2 = alloc_on(m, a, 8 * MiB, S2);
    CHECK(em_done(m, S3) < em_queued(m, S3)); /* y's last use is still queued */
    CHECK(!overlap(b1, 8 * MiB, y, 12 * MiB));
    CHECK(!overlap(b2, 8 * MiB, y, 12 * MiB));
    CHECK_ARENA(a);
    em_check_stats(m);
    em_finish(m);
    void *b3 = alloc_on(m, a, 8 * MiB, S2); /* once S3's work is done, y's memory is anyone's */
    free_it(m, a, b3);
    free_it(m, a, b1);
    free_it(m, a, b2);
    free_it(m, a, l1);
    free_it(m, a, l3);
    CHECK(em_violations(m) == 0);
    em_destroy(m);
}

/* Case 1, carve_heap_extend: S2's span is followed by S1's range (done)
 * and S3's (not done); S2 grows its span into S1's range and must stop
 * there. */
static void case1_extend(void) {
    carve_arena *a = arena("initial=64MiB,vmm=0");
    em_model *m = em_attach(a);
    void *s2a = alloc_on(m, a, 8 * MiB, S2); /* S2's span: [0, 20 MiB) */
    void *x = alloc_on(m, a, 12 * MiB, S1);  /* [20, 32) */
    void *y = alloc_on(m, a, 12 * MiB, S3);  /* [32, 44) */
    free_it(m, a, x);
    free_it(m, a, y);
    void *l1 = alloc_on(m, a, 60 * MiB, S1);
    void *l3 = alloc_on(m, a, 60 * MiB, S3);
    em_advance(m, S1, em_queued(m, S1));
    /* 8 + 16 MiB fill S2's span and need 12 MiB more of it (16 wanted);
     * the last 4 MiB take what the span grew by past them. */
    void *b1 = alloc_on(m, a, 8 * MiB, S2), *b2 = alloc_on(m, a, 16 * MiB, S2), *b3 = alloc_on(m, a, 4 * MiB, S2);
    CHECK(em_done(m, S3) < em_queued(m, S3));
    CHECK(!overlap(b1, 8 * MiB, y, 12 * MiB));
    CHECK(!overlap(b2, 16 * MiB, y, 12 * MiB));
    CHECK(!overlap(b3, 4 * MiB, y, 12 * MiB));
    CHECK_ARENA(a);
    em_check_stats(m);
    free_it(m, a, b1);
    free_it(m, a, b2);
    free_it(m, a, b3);
    free_it(m, a, s2a);
    free_it(m, a, l1);
    free_it(m, a, l3);
    CHECK(em_violations(m) == 0);
    em_destroy(m);
}

/* Case 2: S1 fills three small spans A, B, C (S3 holds the rest of the
 * block, so that no clean range is left); A empties, then C (which records
 * A's event); S1 frees y2 in B after that event; a 60 MiB request gives all
 * three back, in list order C, B, A, and they merge. With the device done
 * only up to A's event, S2's 4 MiB must not land on y2. */
static void case2(void) {
    carve_arena *a = arena("initial=64MiB,vmm=0");
    em_model *m = em_attach(a);
    void *rest = alloc_on(m, a, 58 * MiB, S3);
    void *a1 = alloc_on(m, a, 1 * MiB, S1), *a2 = alloc_on(m, a, 1 * MiB, S1); /* span A */
    void *b1 = alloc_on(m, a, 1 * MiB, S1), *y2 = alloc_on(m, a, 1 * MiB, S1); /* span B */
    void *c1 = alloc_on(m, a, 1 * MiB, S1), *c2 = alloc_on(m, a, 1 * MiB, S1); /* span C */
    free_it(m, a, a1);
    free_it(m, a, c1);
    free_it(m, a, a2);
    free_it(m, a, c2); /* A empties (its event waits) */
    CHECK(em_records_on(m, S1) == 0);
    free_it(m, a, b1); /* C empties: A's event is recorded */
    CHECK(em_records_on(m, S1) == 1);
    uint64_t at_a = em_queued(m, S1);
    free_it(m, a, y2); /* a use of y2 after A's event */
    void *big = alloc_on(m, a, 60 * MiB, S1);
    em_advance(m, S1, at_a); /* A's event done; y2's last use not */
    void *z = alloc_on(m, a, 4 * MiB, S2);
    CHECK(!overlap(z, 4 * MiB, y2, 1 * MiB));
    CHECK_ARENA(a);
    em_check_stats(m);
    free_it(m, a, z);
    free_it(m, a, big);
    free_it(m, a, rest);
    CHECK(em_violations(m) == 0);
    em_destroy(m);
}

/* Case 3: S2 holds X (30 MiB) and X2 (1 MiB) under a 64 MiB limit; S1's
 * 30 MiB needs other streams' free granules, and while carve waits for
 * the device, another thread queues a kernel on X and frees X and X2.
 * None of X's granules may be unmapped while that kernel is queued. */
typedef struct other_thread {
    em_model *m;
    carve_arena *a;
    void *x, *x2;
    carve_status st[2]; /* its frees' statuses, checked by the main thread after the join */
    int started, finished, waits;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t t;
} other_thread;

static void *other_run(void *arg) {
    other_thread *o = arg;
    em_freeing(o->m, o->x); /* the kernel on X, queued on S2 before the free */
    o->st[0] = carve_free(o->a, o->x);
    em_freeing(o->m, o->x2);
    o->st[1] = carve_free(o->a, o->x2);
    pthread_mutex_lock(&o->mu);
    o->finished = 1;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
    return NULL;
}

/* Inside the first device wait: start the other thread and give it up to
 * 200 ms (it cannot finish while carve holds S2's pool, as it must). */
static void in_wait(void *arg, int device_wide, carve_stream s) {
    other_thread *o = arg;
    (void)s;
    if (!device_wide || o->waits++ > 0)
        return;
    o->started = 1;
    if (pthread_create(&o->t, NULL, other_run, o) != 0)
        abort();
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 200 * 1000 * 1000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&o->mu);
    while (!o->finished && pthread_cond_timedwait(&o->cv, &o->mu, &until) == 0)
        ;
    pthread_mutex_unlock(&o->mu);
}

static void case3(void) {
    carve_arena *a = arena("limit=64MiB");
    em_model *m = em_attach(a);
    other_thread o = {.m = m, .a = a};
    pthread_mutex_init(&o.mu, NULL);
    pthread_cond_init(&o.cv, NULL);
    o.x = alloc_on(m, a, 30 * MiB, S2);
    o.x2 = alloc_on(m, a, 1 * MiB, S2);
    em_finish(m); /* everything before is done: only the other thread's kernel is not */
    em_on_wait(m, in_wait, &o);
    void *y = alloc_on(m, a, 30 * MiB, S1);
    CHECK(o.started); /* the sequence reached the wait */
    if (o.started)
        pthread_join(o.t, NULL);
    em_on_wait(m, NULL, NULL);
    CHECK(o.finished && o.st[0] == CARVE_OK && o.st[1] == CARVE_OK);
    CHECK_ARENA(a);
    em_check_stats(m);
    free_it(m, a, y);
    CHECK(em_violations(m) == 0);
    em_finish(m);
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0);
    pthread_mutex_destroy(&o.mu);
    pthread_cond_destroy(&o.cv);
    em_destroy(m);
}

/* Case 4: 8 MiB on S1, a kernel on it queued, the buffer freed, the arena
 * destroyed at once (a live buffer of S2 too, which destruction may take:
 * the program gave it up). Nothing may be unmapped or released before the
 * kernel has run: em_destroy's oracle checks every unmap and release. */
static void case4(const char *conf) {
    carve_arena *a = arena(conf);
    em_model *m = em_attach(a);
    void *p = alloc_on(m, a, 8 * MiB, S1);
    alloc_on(m, a, 4 * MiB, S2);
    free_it(m, a, p);
    CHECK(em_done(m, S1) < em_queued(m, S1)); /* the kernel has not run */
    em_destroy(m);
}

/* Case 5. A backend in front of the model resolves cudaStreamPerThread as
 * CUDA does: to the calling thread's own stream. Thread 1 allocates p on
 * S1 and declares its use on its per-thread stream (carve_record_stream
 * with cudaStreamPerThread: the calling thread's stream); thread 2 tries to
 * free p, which would record the event on thread 2's per-thread stream:
 * refused (CARVE_ERR_BACKEND), p stays live. Thread 1 frees it; the device
 * runs S1 and thread 2's per-thread stream, not thread 1's: p's memory is
 * not handed out again. */
#define PER_THREAD ((carve_stream)(uintptr_t)0x2)
static const carve_stream PT1 = (carve_stream)(uintptr_t)0x20001, PT2 = (carve_stream)(uintptr_t)0x20002;
static __thread carve_stream my_pt;
static const carve_backend_ops *pt_leaf;
static carve_backend_ops pt_ops;

static carve_status pt_record(carve_be *be, carve_stream s, void **ev) {
    return pt_leaf->event_record(be, s == PER_THREAD ? my_pt : s, ev);
}

typedef struct pt_free {
    carve_arena *a;
    void *p;
    carve_status st;
} pt_free;

static void *pt_freer(void *arg) {
    pt_free *f = arg;
    my_pt = PT2;
    f->st = carve_free(f->a, f->p);
    return NULL;
}

static void case5(void) {
    carve_arena *a = arena("vmm=0,limit=64MiB");
    em_model *m = em_attach(a);
    pt_leaf = a->be.ops;
    pt_ops = *pt_leaf;
    pt_ops.event_record = pt_record;
    a->be.ops = &pt_ops;
    my_pt = PT1;
    void *p = alloc_on(m, a, 4 * MiB, S1);
    CHECK_OK(a, carve_record_stream(a, p, PER_THREAD));
    em_record_stream(m, p, PT1);
    pt_free f = {a, p, CARVE_OK};
    pthread_t t;
    if (pthread_create(&t, NULL, pt_freer, &f) != 0)
        abort();
    pthread_join(t, NULL);
    CHECK_ST(a, f.st, CARVE_ERR_BACKEND);
    size_t size = 0;
    CHECK_OK(a, carve_buffer_info(a, p, &size, NULL)); /* refused: p is live as it was */
    CHECK(size == 4 * MiB);
    free_it(m, a, p); /* thread 1: its event on PT1 */
    em_advance(m, S1, em_queued(m, S1));
    em_advance(m, PT2, em_queued(m, PT2));
    CHECK(em_done(m, PT1) < em_queued(m, PT1)); /* thread 1's kernel on p has not run */
    void *r = alloc_on(m, a, 4 * MiB, S1);
    CHECK(!overlap(r, 4 * MiB, p, 4 * MiB));
    free_it(m, a, r);
    CHECK(em_violations(m) == 0);
    em_finish(m);
    em_destroy(m);
}

/* Case 6: p (used on S2) and q (used on S3) of S1, freed in that order; S3
 * done, S2 not: q's memory is S1's again, p's is not. Then S2 done too. */
static void case6(const char *conf) {
    carve_arena *a = arena(conf);
    em_model *m = em_attach(a);
    void *p = alloc_on(m, a, 4 * MiB, S1), *q = alloc_on(m, a, 4 * MiB, S1);
    CHECK_OK(a, carve_record_stream(a, p, S2));
    em_record_stream(m, p, S2);
    CHECK_OK(a, carve_record_stream(a, q, S3));
    em_record_stream(m, q, S3);
    free_it(m, a, p);
    free_it(m, a, q);
    em_advance(m, S1, em_queued(m, S1));
    em_advance(m, S3, em_queued(m, S3));
    carve_pool *pool = NULL;
    for (carve_pool *x = a->pools; x; x = x->next_all)
        if (x->stream == S1)
            pool = x;
    CHECK(pool && pool->npending == 2);
    void *r = alloc_on(m, a, 4 * MiB, S1);
    CHECK(pool && pool->npending == 1); /* q went back; p waits for S2 */
    CHECK(!overlap(r, 4 * MiB, p, 4 * MiB));
    em_advance(m, S2, em_queued(m, S2));
    void *t = alloc_on(m, a, 4 * MiB, S1);
    CHECK(pool && pool->npending == 0);
    free_it(m, a, r);
    free_it(m, a, t);
    CHECK_ARENA(a);
    em_check_stats(m);
    CHECK(em_violations(m) == 0);
    em_destroy(m);
}

/* The oracle's out-of-memory judgement can fail: an injected backend
 * failure answers CARVE_ERR_OOM to requests that fit (growth in segments
 * mode, a mapping in the default mode), which it must name; requests that
 * do not fit it must call legitimate. */
static unsigned oom_class(em_model *m, carve_arena *a, size_t size, carve_stream s) {
    void *p = NULL;
    carve_status st = carve_alloc(a, size, s, &p);
    CHECK(st == CARVE_ERR_OOM && p == NULL);
    if (st != CARVE_ERR_OOM) {
        free_it(m, a, p);
        return ~0u;
    }
    return em_check_oom(m, size, s, carve_last_error(a));
}

static void oracle_oom(void) {
    carve_arena *a = arena("vmm=0,limit=64MiB");
    em_model *m = em_attach(a);
    void *x = alloc_on(m, a, 12 * MiB, S1);
    carve_backend_faults_on(&a->be, 1, 1000, 0, CARVE_FAULT_ALLOC, CARVE_ERR_OOM);
    CHECK(oom_class(m, a, 24 * MiB, S2) == EM_OOM_GROW);
    carve_backend_faults_off(&a->be);
    CHECK(oom_class(m, a, 80 * MiB, S2) == EM_OOM_OK); /* past the limit */
    free_it(m, a, x);
    em_destroy(m);

    a = arena("vmm=0,growth=0,initial=8MiB");
    m = em_attach(a);
    x = alloc_on(m, a, 6 * MiB, S1);
    CHECK(oom_class(m, a, 4 * MiB, S1) == EM_OOM_OK); /* 2 MiB left */
    CHECK(oom_class(m, a, 4 * MiB, S2) == EM_OOM_OK);
    free_it(m, a, x);
    em_destroy(m);

    a = arena("limit=64MiB");
    m = em_attach(a);
    x = alloc_on(m, a, 40 * MiB, S1);
    carve_backend_faults_on(&a->be, 1, 1000, 0, CARVE_FAULT_ALLOC, CARVE_ERR_OOM);
    CHECK(oom_class(m, a, 8 * MiB, S2) == EM_OOM_OTHER);
    carve_backend_faults_off(&a->be);
    CHECK(oom_class(m, a, 30 * MiB, S2) == EM_OOM_OK); /* 20 + 15 granules > 32 */
    free_it(m, a, x);
    em_check_stats(m);
    CHECK(em_violations(m) == 0);
    em_destroy(m);
}

/* Case 7: S2 holds a small buffer; S1 frees X (40 MiB of a span it keeps
 * with K) after 64 other frees, and one more: X's release records the
 * fence covering its granules. S2 asks for 8 MiB: mapping them would pass
 * its allowance, so it looks for another stream's free mapped memory.
 * With the fence not complete (the kernel on X queued before the free has
 * not run) it must not get X's memory, and maps its own; once the fence
 * completed, S2's next 8 MiB (past its allowance again) may take X's
 * granules, and does: four granules move, with no driver call. */
static void case7(void) {
    carve_arena *a = arena("limit=256MiB");
    em_model *m = em_attach(a);
    void *s2 = alloc_on(m, a, 4096, S2); /* two streams from the start: S1's maps set the arena's peak */
    void *x = alloc_on(m, a, 40 * MiB, S1), *k = alloc_on(m, a, 2 * MiB, S1), *w = alloc_on(m, a, 4096, S1);
    for (int i = 0; i < 64; i++)
        free_it(m, a, alloc_on(m, a, 4096, S1));
    unsigned long rec = em_records_on(m, S1);
    free_it(m, a, x);
    free_it(m, a, w); /* X leaves the parked place (the last free's) for the pool's index */
    CHECK(em_records_on(m, S1) == rec + 1); /* the fence covering X's granules */
    uint64_t moved = a->heap.nmoved, maps = a->heap.nreserve;
    void *b = alloc_on(m, a, 8 * MiB, S2);
    CHECK(em_done(m, S1) < em_queued(m, S1)); /* X's kernel has not run; nothing waited for it */
    CHECK(!overlap(b, 8 * MiB, x, 40 * MiB));
    CHECK(a->heap.nmoved == moved && a->heap.nreserve == maps + 4);
    CHECK_ARENA(a);
    em_check_stats(m);
    em_advance(m, S1, em_queued(m, S1)); /* the fence completes */
    void *c = alloc_on(m, a, 8 * MiB, S2);
    CHECK(overlap(c, 8 * MiB, x, 40 * MiB)); /* X's granules came over */
    CHECK(a->heap.nmoved == moved + 4 && a->heap.nreserve == maps + 4);
    CHECK_ARENA(a);
    em_check_stats(m);
    free_it(m, a, c);
    free_it(m, a, b);
    free_it(m, a, k);
    free_it(m, a, s2);
    CHECK(em_violations(m) == 0);
    em_destroy(m);
}

/* Case 10: as case 7, but no free block of S1 holds S2's request whole:
 * X (40 MiB) is free at the back of S1's mapped memory with unmapped room
 * after it, and S2 asks for 44 MiB, past the arena's budget. A window of
 * S1's span (X's granules and two of the room after them) may move to S2,
 * which then maps the two granules only (alloc.c's vmm_adopt_window), but
 * only once a completed fence of S1 covers X's granules. With the fence
 * not complete (complete 0: X's kernel still queued), S2 must not get X's
 * memory (the oracle also checks that nothing freed on S1 is handed out
 * before S1's work on it is done); with it complete, the window moves. */
static void case10(int complete) {
    carve_arena *a = arena("limit=256MiB");
    em_model *m = em_attach(a);
    void *s2 = alloc_on(m, a, 4096, S2);
    void *k = alloc_on(m, a, 2 * MiB, S1), *w = alloc_on(m, a, 4096, S1);
    void *x = alloc_on(m, a, 40 * MiB, S1);
    for (int i = 0; i < 64; i++)
        free_it(m, a, alloc_on(m, a, 4096, S1));
    unsigned long rec = em_records_on(m, S1);
    free_it(m, a, x);
    free_it(m, a, w);
    CHECK(em_records_on(m, S1) == rec + 1); /* the fence covering X's granules */
    if (complete)
        em_advance(m, S1, em_queued(m, S1)); /* the fence completes */
    uint64_t moved = a->heap.nmoved, maps = a->heap.nreserve;
    void *b = alloc_on(m, a, 44 * MiB, S2);
    if (complete) { /* X's granules came over, and two granules were mapped */
        CHECK(overlap(b, 44 * MiB, x, 40 * MiB));
        CHECK(a->heap.nmoved == moved + 20 && a->heap.nreserve == maps + 2);
    } else { /* the memory came from elsewhere */
        CHECK(!overlap(b, 44 * MiB, x, 40 * MiB));
        CHECK(a->heap.nmoved == moved && a->heap.nreserve == maps + 22);
    }
    CHECK_ARENA(a);
    em_check_stats(m);
    free_it(m, a, b);
    free_it(m, a, k);
    free_it(m, a, s2);
    CHECK(em_violations(m) == 0);
    em_destroy(m);
}

/* Case 11: S2's span comes first, S1's right after it. X (40 MiB) is the
 * front of S1's span, freed; S2 asks for 41 MiB, past the arena's budget:
 * no free block of S1 holds it whole (vmm_adopt), but X with the free end
 * of S2's span does. X's granules may leave S1 and join S2's span
 * (vmm_join), but only once a completed fence of S1 covers them. With the
 * fence not complete (complete 0), S2 must not get X's memory (the oracle
 * also checks every allocation against S1's queued work); with it
 * complete, X joins S2's span and the request lies on it. */
static void case11(int complete) {
    carve_arena *a = arena("limit=256MiB");
    em_model *m = em_attach(a);
    void *s2 = alloc_on(m, a, 4096, S2);
    void *x = alloc_on(m, a, 40 * MiB, S1);
    void *w = alloc_on(m, a, 4096, S1), *k = alloc_on(m, a, 2 * MiB, S1);
    CHECK((uintptr_t)s2 < (uintptr_t)x); /* S2's span, then S1's */
    for (int i = 0; i < 64; i++)
        free_it(m, a, alloc_on(m, a, 4096, S1));
    unsigned long rec = em_records_on(m, S1);
    free_it(m, a, x);
    free_it(m, a, w);
    CHECK(em_records_on(m, S1) == rec + 1); /* the fence covering X's granules */
    if (complete)
        em_advance(m, S1, em_queued(m, S1)); /* the fence completes */
    uint64_t moved = a->heap.nmoved, joins = a->heap.njoins;
    void *b = alloc_on(m, a, 41 * MiB, S2);
    if (complete) { /* X's granules joined S2's span, and the request lies on them */
        CHECK(overlap(b, 41 * MiB, x, 40 * MiB));
        CHECK(a->heap.njoins == joins + 1 && a->heap.nmoved == moved + 20);
    } else { /* the memory came from elsewhere */
        CHECK(!overlap(b, 41 * MiB, x, 40 * MiB));
        CHECK(a->heap.njoins == joins);
    }
    CHECK_ARENA(a);
    em_check_stats(m);
    free_it(m, a, b);
    free_it(m, a, k);
    free_it(m, a, s2);
    CHECK_ARENA(a);
    CHECK(em_violations(m) == 0);
    em_destroy(m);
}

/* Case 12: under a 64 MiB limit, S1 holds X (30 MiB) and L (2 MiB, after
 * X), then S2 2 MiB (nothing of S2's is free); S1 queues a kernel on X and
 * frees it (no fence of S1 covers it: the kernel has not run). S1 then
 * asks for 40 MiB, which X's place cannot hold: X's granules must go to
 * make room under the limit, and only the device synchronization can show
 * them done. (Without the own trim, 4 waits: the trim of the others, a
 * second one at the limit, the out-of-memory path's reclaim.) */
static void count_wait(void *arg, int device_wide, carve_stream s) {
    (void)s;
    if (device_wide)
        (*(int *)arg)++;
}

static void case12(void) {
    carve_arena *a = arena("limit=64MiB");
    em_model *m = em_attach(a);
    void *x = alloc_on(m, a, 30 * MiB, S1), *l = alloc_on(m, a, 2 * MiB, S1);
    void *s2 = alloc_on(m, a, 2 * MiB, S2);
    free_it(m, a, x);
    CHECK(em_done(m, S1) < em_queued(m, S1)); /* the kernel on X has not run */
    int waits = 0;
    em_on_wait(m, count_wait, &waits);
    void *y = alloc_on(m, a, 40 * MiB, S1);
    em_on_wait(m, NULL, NULL);
    CHECK(y != NULL && waits == 1);
    CHECK(carve_memory_reserved(a) <= 64 * MiB);
    CHECK_ARENA(a);
    em_check_stats(m);
    free_it(m, a, y);
    free_it(m, a, l);
    free_it(m, a, s2);
    CHECK(em_violations(m) == 0);
    em_destroy(m);
}

/* Case 8: a graph pool's memory while carve_graph_pool_release waits for
 * the device. S1 routed to a graph pool g: x (40 MiB), k, w allocated, x
 * and w freed (the uncaptured run); everything done; then a launch of the
 * graph on S1 is queued (it uses x's memory) and g is released. While the
 * release waits for the device, another thread allocates 8 MiB on S2: it
 * must not get x's memory (once the pool stopped being a graph pool before
 * that wait, and S2 adopted x's granules with the launch still queued). */
typedef struct rel_other {
    em_model *m;
    carve_arena *a;
    void *got;
    int fired, done;
} rel_other;

static void *rel_alloc(void *arg) {
    rel_other *o = arg;
    o->got = alloc_on(o->m, o->a, 8 * MiB, S2);
    __atomic_store_n(&o->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void rel_wait(void *arg, int device_wide, carve_stream s) {
    (void)device_wide;
    (void)s;
    rel_other *o = arg;
    if (o->fired++)
        return;
    pthread_t t;
    if (pthread_create(&t, NULL, rel_alloc, o) != 0)
        abort();
    for (int i = 0; i < 2000 && !__atomic_load_n(&o->done, __ATOMIC_ACQUIRE); i++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    pthread_detach(t);
}

static void case8(void) {
    carve_arena *a = arena("limit=256MiB");
    em_model *m = em_attach(a);
    void *s2 = alloc_on(m, a, 4096, S2);
    carve_graph_pool *g;
    CHECK_OK(a, carve_graph_pool_create(a, &g));
    CHECK_OK(a, carve_graph_pool_begin(a, g, S1));
    void *x = alloc_on(m, a, 40 * MiB, S1), *k = alloc_on(m, a, 2 * MiB, S1), *w = alloc_on(m, a, 4096, S1);
    free_it(m, a, x);
    free_it(m, a, w);
    CHECK_OK(a, carve_graph_pool_end(a, g, S1));
    em_finish(m);
    CHECK_OK(a, carve_empty_cache(a));
    em_enqueue(m, S1); /* cudaGraphLaunch on S1: uses x's memory */
    rel_other o = {.m = m, .a = a};
    em_on_wait(m, rel_wait, &o);
    CHECK_OK(a, carve_graph_pool_release(a, g));
    em_on_wait(m, NULL, NULL);
    CHECK(o.fired > 0);
    for (int i = 0; i < 5000 && !__atomic_load_n(&o.done, __ATOMIC_ACQUIRE); i++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    CHECK(__atomic_load_n(&o.done, __ATOMIC_ACQUIRE));
    CHECK(o.got && !overlap(o.got, 8 * MiB, x, 40 * MiB));
    if (o.got)
        free_it(m, a, o.got);
    free_it(m, a, k);
    free_it(m, a, s2);
    CHECK(em_violations(m) == 0);
    em_destroy(m);
}

/* Case 9: buffers used on more streams than their own, freed while another
 * thread captures a blocking stream (S3 marked captured). p and r were also
 * used on the legacy stream, q on S3 itself. carve_free(p) answered
 * CARVE_ERR_BACKEND (no event may be recorded on the legacy stream during
 * that capture) and p stayed live for good; so did r, freed with
 * carve_free_on_stream naming S2, and q. Now each free succeeds and the
 * memory waits, for its own stream too: p and r until an event recorded on
 * the legacy stream after the capture completes, q (its stream may be
 * destroyed after the capture: nothing is recorded on it later) until a
 * device synchronization made after the capture. The model fails the test
 * where carve hands memory out while its last use is queued, records on
 * the legacy stream or S3 during the capture, or synchronizes then.
 * carve_free_on_stream naming the captured stream is still refused. */
static size_t pending_on(carve_arena *a, carve_stream s) {
    carve_pool *p = carve_pool_find(a, s);
    return p ? p->npending : 0;
}

static void case9(const char *conf) {
    carve_arena *a = arena(conf);
    em_model *m = em_attach(a);
    const size_t n = 4 * MiB;
    void *p = alloc_on(m, a, n, S1), *r = alloc_on(m, a, n, S1), *q = alloc_on(m, a, n, S2);
    void *x = alloc_on(m, a, n, S1);
    CHECK_OK(a, carve_record_stream(a, p, NULL));
    em_record_stream(m, p, NULL);
    CHECK_OK(a, carve_record_stream(a, r, NULL));
    em_record_stream(m, r, NULL);
    CHECK_OK(a, carve_record_stream(a, q, S3));
    em_record_stream(m, q, S3);
    CHECK_OK(a, carve_sim_set_capturing(a, S3, 1)); /* another thread's capture */
    unsigned long legacy0 = em_records_on(m, NULL);
    free_it(m, a, p);
    em_record_stream(m, r, S2);
    em_freeing(m, r);
    CHECK_OK(a, carve_free_on_stream(a, r, S2));
    free_it(m, a, q);
    CHECK_ST(a, carve_free_on_stream(a, x, S3), CARVE_ERR_BACKEND); /* the stream named is captured */
    CHECK_OK(a, carve_buffer_info(a, x, NULL, NULL));              /* x stays live */
    CHECK(em_records_on(m, NULL) == legacy0 && em_records_on(m, S3) == 0);
    CHECK(pending_on(a, S1) == 2 && pending_on(a, S2) == 1);
    /* During the capture nothing of p, r or q is handed out, whatever the
     * stream (the model has not run their last uses either). */
    void *y[4];
    for (int i = 0; i < 4; i++) {
        y[i] = alloc_on(m, a, n, i & 1 ? S2 : S1);
        CHECK(!overlap(y[i], n, p, n) && !overlap(y[i], n, r, n) && !overlap(y[i], n, q, n));
    }
    CHECK_OK(a, carve_empty_cache(a)); /* no synchronization now */
    CHECK(pending_on(a, S1) == 2 && pending_on(a, S2) == 1);
    CHECK_ARENA(a);
    em_check_stats(m);
    /* The capture ends: the next allocation on S1 records the legacy
     * stream's events; their work is still queued, so nothing is reused. */
    CHECK_OK(a, carve_sim_set_capturing(a, S3, 0));
    void *z = alloc_on(m, a, n, S1);
    CHECK(em_records_on(m, NULL) > legacy0); /* p's at least (r's waits behind it) */
    CHECK(!overlap(z, n, p, n) && !overlap(z, n, r, n));
    CHECK(pending_on(a, S1) == 2);
    /* The legacy stream's and S2's work done: p and r come back to S1. */
    em_advance(m, NULL, em_queued(m, NULL));
    em_advance(m, S2, em_queued(m, S2));
    void *w = alloc_on(m, a, n, S1);
    CHECK(pending_on(a, S1) == 0);
    CHECK(overlap(w, n, p, n) || overlap(w, n, r, n));
    /* q waits for a synchronization, S3's work done or not. */
    em_advance(m, S3, em_queued(m, S3));
    void *v = alloc_on(m, a, n, S2);
    CHECK(pending_on(a, S2) == 1 && !overlap(v, n, q, n));
    CHECK(em_records_on(m, S3) == 0);
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(pending_on(a, S2) == 0);
    CHECK_ARENA(a);
    em_check_stats(m);
    for (int i = 0; i < 4; i++)
        free_it(m, a, y[i]);
    free_it(m, a, x);
    free_it(m, a, z);
    free_it(m, a, w);
    free_it(m, a, v);
    CHECK(em_violations(m) == 0);
    CHECK(a->be.sim_broken_captures == 0);
    em_destroy(m);
}

/* A request that fits must succeed; where it fails, the oracle must name
 * why. The two sequences that once gave false out-of-memory answers (the
 * default mode's address space, the pool's search giving up) succeed. */
static void must_fit(em_model *m, carve_arena *a, size_t size, carve_stream s, unsigned cls) {
    void *p = NULL;
    carve_status st = carve_alloc(a, size, s, &p);
    if (st == CARVE_ERR_OOM) {
        unsigned got = em_check_oom(m, size, s, carve_last_error(a));
        printf("  %zu bytes: out of memory, which the oracle calls: %s\n", size, em_oom_name(got));
        CHECK(got == cls);
    } else {
        CHECK_OK(a, st);
        em_allocated(m, p, size, s);
        free_it(m, a, p);
    }
}

static void oracle_false_oom(void) {
    /* Default mode, limit 64 MiB: 60 + 1 MiB on S1, the 60 freed, the cache
     * emptied; S2's 60 MiB. */
    carve_arena *a = arena("limit=64MiB");
    em_model *m = em_attach(a);
    void *big = alloc_on(m, a, 60 * MiB, S1), *small = alloc_on(m, a, 1 * MiB, S1);
    free_it(m, a, big);
    CHECK_OK(a, carve_empty_cache(a));
    must_fit(m, a, 60 * MiB, S2, EM_OOM_SPACE);
    free_it(m, a, small);
    em_destroy(m);

    /* Segments mode, one 2 MiB block: 16640 bytes, then nine 16384-byte
     * buffers, each followed by a 256-byte spacer, the rest filled; the
     * 16640 freed, then the nine: nine blocks too small head its size
     * class's list. */
    a = arena("vmm=0,growth=0,initial=2MiB");
    m = em_attach(a);
    void *first = alloc_on(m, a, 16640, S1), *nine[9], *spacer[10], *fill[4] = {NULL};
    spacer[0] = alloc_on(m, a, 256, S1);
    for (int i = 0; i < 9; i++) {
        nine[i] = alloc_on(m, a, 16384, S1);
        spacer[i + 1] = alloc_on(m, a, 256, S1);
    }
    size_t rest = 2 * MiB - 16640 - 9 * 16384 - 10 * 256;
    for (int i = 0; rest > 0 && i < 4; i++) {
        size_t n = rest < MiB ? rest : MiB;
        fill[i] = alloc_on(m, a, n, S1);
        rest -= n;
    }
    free_it(m, a, first);
    for (int i = 0; i < 9; i++)
        free_it(m, a, nine[i]);
    must_fit(m, a, 16640, S1, EM_OOM_INDEX);
    for (int i = 0; i < 10; i++)
        free_it(m, a, spacer[i]);
    for (int i = 0; i < 4; i++)
        free_it(m, a, fill[i]);
    CHECK(em_violations(m) == 0);
    em_destroy(m);
}

int main(void) {
    printf("case 1 (heap_find)\n");
    case1_find();
    printf("case 1 (carve_heap_extend)\n");
    case1_extend();
    printf("case 2\n");
    case2();
    printf("case 3\n");
    case3();
    printf("case 4 (carve_arena_destroy)\n");
    case4("limit=64MiB");
    case4("vmm=0,limit=64MiB");
    case4("vmm=0,growth=0,initial=16MiB");
    printf("case 5 (carve_record_stream and cudaStreamPerThread)\n");
    case5();
    printf("case 6 (blocks pending on different streams)\n");
    case6("limit=64MiB");
    case6("vmm=0,limit=64MiB");
    printf("case 7 (free mapped memory moving between streams)\n");
    case7();
    printf("case 10 (a window of free mapped memory and room moving between streams)\n");
    case10(0);
    case10(1);
    printf("case 11 (free mapped memory at the edge of a span joining the next stream's span)\n");
    case11(0);
    case11(1);
    printf("case 12 (a stream's own free granules unmapped after the synchronization that trims the others)\n");
    case12();
    printf("case 8 (a graph pool released while a launch is queued)\n");
    case8();
    printf("case 9 (frees during another thread's capture)\n");
    case9("limit=64MiB");
    case9("vmm=0,limit=64MiB");
    printf("the oracle's out-of-memory judgement\n");
    oracle_oom();
    oracle_false_oom();
    return test_finish();
}
