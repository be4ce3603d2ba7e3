/*
 * test_capture_reclaim.c — what carve gives back, and refuses, while a
 * stream capture is underway, on the host backend (segments) and the
 * virtual backend (virtual-memory mode and segments), with captures marked
 * by carve_sim_set_capturing (S3 stands for another thread's capture).
 *
 *  - limit: carve_set_limit lowered below what is reserved during the
 *    capture is refused with CARVE_ERR_BACKEND and the limit stays; after
 *    the capture the same call gives the cache back and the new limit
 *    holds (allocations stop at it). Before, the call answered CARVE_OK,
 *    gave nothing back, and ten 4 MiB buffers lived under an 8 MiB limit.
 *  - oom: S1 frees 12 MiB of a 16 MiB limit; during the capture S2 asks
 *    for 12 MiB. Only a device synchronization could prove S1's memory
 *    free here (its span's event is not recorded yet), so the answer is
 *    CARVE_ERR_OOM, and its message says that a capture prevented the
 *    synchronization (before, it blamed the limit alone); after the
 *    capture the same request succeeds.
 *  - window: another thread marks and clears a capture on S3 over and over
 *    while this one allocates, frees and empties the cache: every
 *    carve_empty_cache answers CARVE_OK (a capture that begins during the
 *    call means nothing goes back, not a failed synchronization) and no
 *    capture is broken. Before, carve_empty_cache answered
 *    CARVE_ERR_BACKEND "synchronizing the device failed" now and then: it
 *    decided before taking the locks, and the device wait then refused.
 *    CARVE_TEST_WINDOW_ROUNDS: rounds (default 20000).
 *  - destroy: carve_arena_destroy, memory held, waits for a capture that
 *    another thread ends with carve_sim_set_capturing(..., 0) (carve.h
 *    allows it); the arena is freed only once that call has let go of the
 *    arena's lock. Before, destroy freed it as soon as it saw the mark
 *    cleared, while the call still unlocked it (ThreadSanitizer: data race
 *    on the freed lock; AddressSanitizer builds may report a use after
 *    free). Twenty rounds.
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "engine/types.h"
#include "test_util.h"

#define S1 ((carve_stream)(uintptr_t)0x1000)
#define S2 ((carve_stream)(uintptr_t)0x2000)
#define S3 ((carve_stream)(uintptr_t)0x3000)
#define MiB ((size_t)1 << 20)

static void test_limit(carve_backend backend, const char *conf) {
    carve_arena *a = test_arena_conf(backend, 1, 0, 64 * MiB, conf);
    void *p[16];
    for (int i = 0; i < 8; i++)
        CHECK_OK(a, carve_alloc(a, 4 * MiB, S1, &p[i]));
    for (int i = 0; i < 8; i++)
        CHECK_OK(a, carve_free(a, p[i]));
    size_t held = carve_memory_reserved(a);
    CHECK(held > 8 * MiB);
    CHECK_OK(a, carve_sim_set_capturing(a, S3, 1));
    CHECK_ST(a, carve_set_limit(a, 8 * MiB), CARVE_ERR_BACKEND);
    CHECK(strstr(carve_last_error(a), "capture") != NULL);
    carve_stats s;
    CHECK_OK(a, carve_get_stats(a, &s));
    CHECK(s.limit_bytes == 64 * MiB);
    CHECK(carve_memory_reserved(a) == held);
    CHECK_OK(a, carve_set_limit(a, 128 * MiB)); /* raising needs nothing back */
    CHECK(a->be.sim_broken_captures == 0);
    CHECK_OK(a, carve_sim_set_capturing(a, S3, 0));
    CHECK_OK(a, carve_set_limit(a, 8 * MiB));
    CHECK(carve_memory_reserved(a) <= 8 * MiB);
    int n = 0;
    while (n < 16 && carve_alloc(a, 4 * MiB, S1, &p[n]) == CARVE_OK)
        n++;
    CHECK(n > 0 && (size_t)n * 4 * MiB <= 8 * MiB);
    CHECK_OK(a, carve_get_stats(a, &s));
    CHECK(s.reserved_bytes <= 8 * MiB);
    CHECK_ARENA(a);
    for (int i = 0; i < n; i++)
        CHECK_OK(a, carve_free(a, p[i]));
    carve_arena_destroy(a);
}

static void test_oom(carve_backend backend, const char *conf) {
    carve_arena *a = test_arena_conf(backend, 1, 0, 16 * MiB, conf);
    void *p, *q;
    CHECK_OK(a, carve_alloc(a, 12 * MiB, S1, &p));
    CHECK_OK(a, carve_free(a, p));
    CHECK_OK(a, carve_sim_set_capturing(a, S3, 1));
    CHECK_ST(a, carve_alloc(a, 12 * MiB, S2, &q), CARVE_ERR_OOM);
    CHECK(q == NULL);
    CHECK(strstr(carve_last_error(a), "a stream capture was underway, so the device was not synchronized") != NULL);
    CHECK(strstr(carve_last_error(a), "limit") != NULL); /* the numbers stay */
    CHECK(a->be.sim_broken_captures == 0);
    CHECK_OK(a, carve_sim_set_capturing(a, S3, 0));
    CHECK_OK(a, carve_alloc(a, 12 * MiB, S2, &q));
    CHECK_OK(a, carve_free(a, q));
    CHECK_ST(a, carve_alloc(a, 32 * MiB, S2, &q), CARVE_ERR_OOM); /* no capture: no word of one */
    CHECK(strstr(carve_last_error(a), "capture") == NULL);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

typedef struct toggler {
    carve_arena *a;
    int stop; /* atomic */
    unsigned long flips;
} toggler;

static void *toggle(void *arg) {
    toggler *t = arg;
    while (!__atomic_load_n(&t->stop, __ATOMIC_ACQUIRE)) {
        carve_sim_set_capturing(t->a, S3, 1);
        for (volatile int i = 0; i < 200; i++) {
        }
        carve_sim_set_capturing(t->a, S3, 0);
        for (volatile int i = 0; i < 200; i++) {
        }
        __atomic_add_fetch(&t->flips, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void test_window(carve_backend backend, const char *conf) {
    carve_arena *a = test_arena_conf(backend, 1, 0, 256 * MiB, conf);
    const char *env = getenv("CARVE_TEST_WINDOW_ROUNDS");
    int rounds = env ? atoi(env) : 20000, refused = 0;
    toggler t = {.a = a};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, toggle, &t) == 0);
    while (!__atomic_load_n(&t.flips, __ATOMIC_ACQUIRE)) /* the toggling has begun */
        sched_yield();
    for (int i = 0; i < rounds; i++) {
        void *p;
        CHECK_OK(a, carve_alloc(a, 3 * MiB, S1, &p));
        CHECK_OK(a, carve_free(a, p));
        carve_status st = carve_empty_cache(a);
        if (st != CARVE_OK && !refused++)
            fprintf(stderr, "round %d: carve_empty_cache: %s: %s\n", i, carve_status_str(st), carve_last_error(a));
    }
    __atomic_store_n(&t.stop, 1, __ATOMIC_RELEASE);
    CHECK(pthread_join(th, NULL) == 0);
    CHECK(refused == 0);
    CHECK(t.flips > 0);
    CHECK(a->be.sim_broken_captures == 0);
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0);
    carve_arena_destroy(a);
}

typedef struct ender {
    carve_arena *a;
    int waiting; /* atomic: destroy is about to wait */
} ender;

static void *end_capture(void *arg) {
    ender *e = arg;
    while (!__atomic_load_n(&e->waiting, __ATOMIC_ACQUIRE))
        sched_yield();
    nanosleep(&(struct timespec){.tv_nsec = 5000000}, NULL); /* destroy waits by now */
    carve_sim_set_capturing(e->a, S3, 0);
    return NULL;
}

static void test_destroy(carve_backend backend, const char *conf) {
    for (int i = 0; i < 20; i++) {
        carve_arena *a = test_arena_conf(backend, 1, 0, 64 * MiB, conf);
        void *p;
        CHECK_OK(a, carve_alloc(a, MiB, NULL, &p)); /* memory held: destroy would synchronize */
        CHECK_OK(a, carve_sim_set_capturing(a, S3, 1));
        ender e = {.a = a};
        pthread_t t;
        CHECK(pthread_create(&t, NULL, end_capture, &e) == 0);
        __atomic_store_n(&e.waiting, 1, __ATOMIC_RELEASE);
        carve_arena_destroy(a);
        CHECK(pthread_join(t, NULL) == 0);
    }
}

int main(void) {
    test_limit(CARVE_BACKEND_HOST, "");
    test_limit(CARVE_BACKEND_VIRTUAL, "");
    test_limit(CARVE_BACKEND_VIRTUAL, "vmm=0");
    test_oom(CARVE_BACKEND_HOST, "");
    test_oom(CARVE_BACKEND_VIRTUAL, "");
    test_oom(CARVE_BACKEND_VIRTUAL, "vmm=0");
    test_window(CARVE_BACKEND_HOST, "");
    test_window(CARVE_BACKEND_VIRTUAL, "");
    test_window(CARVE_BACKEND_VIRTUAL, "vmm=0");
    test_destroy(CARVE_BACKEND_HOST, "");
    return test_finish();
}
