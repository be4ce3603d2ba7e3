/*
 * test_owner_race.c — a live buffer is never refused as a bad pointer while
 * other threads cut or give back the span around it.
 *
 * carve_free, carve_record_stream, carve_buffer_info and the others find a
 * buffer's pool through the address map and the span record it names, read
 * without a lock. Another stream taking memory from that span, or giving its
 * room back to the heap, can meanwhile move the buffer's range to a new
 * record and leave the old one naming another pool or none. Before
 * owner_recheck (alloc.c) the free then answered CARVE_ERR_BAD_POINTER for a
 * live buffer and a lookup said "not carve's" (an interposer would have
 * passed the buffer to the driver's free). Found by a review with a pause
 * between the two reads; this test makes the same pause through the engine's
 * hook there (carve__owner_read_hook, builds with internal checks; elsewhere
 * it exits 77): threads on their own streams allocate, free any thread's
 * buffers, declare uses on other streams and complete device work under a
 * limit, so that memory keeps moving between the streams, while one thread
 * walks carve_check and empties the cache. Every free and lookup of a live
 * buffer must succeed, and the event model must see no buffer handed out
 * while its previous work could still run.
 *
 * Usage: test_owner_race [threads [operations per thread]] (default 6, 3000)
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "engine/alloc.h"
#include "event_model.h"
#include "test_util.h"

#if CARVE_CHECKS >= 2

#define MiB ((size_t)1 << 20)
#define CAP 48

static carve_arena *A;
static em_model *M;
static int nthreads;
static long nops;
static int stop, refused;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static void *live[CAP + 64];
static int nlive;
static __thread uint64_t hook_seed;

static uint64_t next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static carve_stream stream_of(int t) { return (carve_stream)(uintptr_t)(0x1000 * (t + 1)); }

/* A pause of 200 us at one lookup in eight, between its two reads. */
static void pause_sometimes(void) {
    if (!hook_seed)
        hook_seed = 0x2545F4914F6CDD1Dull ^ (uint64_t)(uintptr_t)&hook_seed;
    if (next(&hook_seed) % 8 == 0) {
        struct timespec ts = {0, 200 * 1000};
        nanosleep(&ts, NULL);
    }
}

static void *take_any(uint64_t *g) {
    void *p = NULL;
    pthread_mutex_lock(&mu);
    if (nlive) {
        int j = (int)(next(g) % (uint64_t)nlive);
        p = live[j];
        live[j] = live[--nlive];
    }
    pthread_mutex_unlock(&mu);
    return p;
}

static void put(void *p) {
    pthread_mutex_lock(&mu);
    live[nlive++] = p;
    pthread_mutex_unlock(&mu);
}

static void refuse(const char *what, void *p, carve_status st) {
    __atomic_add_fetch(&refused, 1, __ATOMIC_RELAXED);
    fprintf(stderr, "  %s(%p) of a live buffer: status %d: %s\n", what, p, (int)st, carve_last_error(A));
}

static void *worker(void *arg) {
    int t = (int)(intptr_t)arg;
    uint64_t g = 0x9E3779B97F4A7C15ull * (uint64_t)(t + 7);
    for (long i = 0; i < nops; i++) {
        unsigned u = (unsigned)(next(&g) % 100);
        if (u < 45) {
            unsigned k = (unsigned)(next(&g) % 10);
            size_t size = k < 4 ? 1 + next(&g) % MiB : k < 8 ? MiB + next(&g) % (6 * MiB) : 6 * MiB + next(&g) % (14 * MiB);
            pthread_mutex_lock(&mu);
            int full = nlive >= CAP;
            pthread_mutex_unlock(&mu);
            if (full)
                continue;
            void *p = NULL;
            carve_status st = carve_alloc(A, size, stream_of(t), &p);
            if (st == CARVE_OK) {
                em_allocated(M, p, size, stream_of(t));
                put(p);
                if (next(&g) % 3 == 0)
                    em_enqueue(M, stream_of(t));
            } else if (st != CARVE_ERR_OOM) {
                refuse("carve_alloc", p, st);
            }
        } else if (u < 80) {
            void *p = take_any(&g);
            if (!p)
                continue;
            em_freeing(M, p);
            carve_status st = carve_free(A, p);
            if (st != CARVE_OK)
                refuse("carve_free", p, st);
        } else if (u < 88) {
            void *p = take_any(&g);
            if (!p)
                continue;
            size_t size = 0;
            carve_stream on = NULL;
            carve_status st = carve_buffer_info(A, p, &size, &on);
            if (st != CARVE_OK)
                refuse("carve_buffer_info", p, st);
            carve_stream other = stream_of((int)(next(&g) % (uint64_t)nthreads));
            st = carve_record_stream(A, p, other);
            if (st == CARVE_OK)
                em_record_stream(M, p, other);
            else
                refuse("carve_record_stream", p, st);
            put(p);
        } else if (u < 94) {
            em_enqueue(M, stream_of(t));
        } else {
            carve_stream s = stream_of((int)(next(&g) % (uint64_t)nthreads));
            em_advance(M, s, em_queued(M, s));
        }
    }
    return NULL;
}

static void *observer(void *arg) {
    (void)arg;
    uint64_t g = 99;
    while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
        unsigned u = (unsigned)(next(&g) % 4);
        if (u == 0)
            CHECK_ARENA(A);
        else if (u == 1 && next(&g) % 20 == 0)
            carve_empty_cache(A);
        else {
            carve_stats s;
            carve_get_stats(A, &s);
        }
    }
    return NULL;
}

static void run(const char *conf) {
    carve_config c;
    carve_config_init(&c);
    c.backend = CARVE_BACKEND_VIRTUAL;
    if (carve_config_parse(&c, conf) != CARVE_OK || carve_arena_create(&c, &A) != CARVE_OK) {
        fprintf(stderr, "%s: %s\n", conf, carve_last_error(NULL));
        exit(1);
    }
    M = em_attach(A);
    em_progress(M, 300, 42);
    nlive = 0;
    stop = 0;
    refused = 0;
    pthread_t th[64], ob;
    pthread_create(&ob, NULL, observer, NULL);
    for (int t = 0; t < nthreads; t++)
        pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
    for (int t = 0; t < nthreads; t++)
        pthread_join(th[t], NULL);
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    pthread_join(ob, NULL);
    printf("%s: %d live buffers refused, %lu violations\n", conf, refused, em_violations(M));
    CHECK(refused == 0);
    CHECK(em_violations(M) == 0);
    CHECK_ARENA(A);
    while (nlive) {
        void *p = live[--nlive];
        em_freeing(M, p);
        CHECK_OK(A, carve_free(A, p));
    }
    em_destroy(M); /* and the arena */
}

int main(int argc, char **argv) {
    nthreads = argc > 1 ? atoi(argv[1]) : 6;
    nops = argc > 2 ? atol(argv[2]) : 3000;
    if (nthreads < 1 || nthreads > 64 || nops < 1) {
        fprintf(stderr, "usage: test_owner_race [threads 1-64 [operations per thread]]\n");
        return 2;
    }
    CARVE_STORE_REL(&carve__owner_read_hook, pause_sometimes);
    run("limit=96MiB");
    run("limit=96MiB,vmm=0");
    CARVE_STORE_REL(&carve__owner_read_hook, (void (*)(void))NULL);
    return test_finish();
}

#else

int main(void) {
    printf("SKIP: test_owner_race needs a build with internal checks (-Dchecks=internal or expensive)\n");
    return 77;
}

#endif
