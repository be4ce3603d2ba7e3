/*
 * stress_api_threads.c — promises of the engine-facing calls that only
 * threads can break (run it under the sanitizers too):
 *  - carve_set_oom_callback: once it returns, the old callback runs nowhere
 *    else. One thread's requests above the limit call the callback over and
 *    over while another installs a callback with a fresh argument, removes
 *    it, marks the argument retired and frees it: a call that starts after
 *    the removal returned sees the mark (AddressSanitizer: reads freed
 *    memory). The callback read its function and argument under the lock
 *    and called them after dropping it.
 *  - carve_set_limit against allocating threads (virtual backend, both
 *    modes): only CARVE_OK and CARVE_ERR_OOM answers, carve_check after
 *    every change (nothing reserved over the limit unless it was held when
 *    the limit was lowered), no data race on the limit (ThreadSanitizer:
 *    a plain read of it in carve_vmm_would_unmap).
 * CARVE_TEST_STEPS scales both (default 1000: callback settings; limit
 * changes are a tenth).
 */
#include <pthread.h>
#include <sched.h>

#include "test_util.h"

#define S1 ((carve_stream)(uintptr_t)0x1000)
#define MiB ((size_t)1 << 20)

static long steps;

/* ---- the callback's removal ---- */

typedef struct user_block {
    int retired;
} user_block;

static carve_arena *cb_arena;
static int cb_stop;
static unsigned long cb_calls, cb_late;

static int cb(carve_arena *a, const carve_oom_info *info, void *u) {
    (void)a, (void)info;
    user_block *x = u;
    __atomic_add_fetch(&cb_calls, 1, __ATOMIC_RELAXED);
    if (__atomic_load_n(&x->retired, __ATOMIC_ACQUIRE))
        __atomic_add_fetch(&cb_late, 1, __ATOMIC_RELAXED);
    return CARVE_OOM_FAIL;
}

static void *ask_too_much(void *arg) {
    (void)arg;
    void *p;
    while (!__atomic_load_n(&cb_stop, __ATOMIC_ACQUIRE))
        if (carve_alloc(cb_arena, (size_t)1 << 40, S1, &p) != CARVE_ERR_OOM)
            __atomic_add_fetch(&cb_late, 1000000, __ATOMIC_RELAXED); /* cannot fit: a wrong answer */
    return NULL;
}

static void test_callback_removal(void) {
    cb_arena = test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, 0, 64 * MiB, "");
    cb_stop = 0;
    cb_calls = cb_late = 0;
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, ask_too_much, NULL) == 0);
    for (long i = 0; i < steps; i++) {
        user_block *u = calloc(1, sizeof(*u));
        CHECK(u != NULL);
        if (!u)
            break;
        unsigned long before = __atomic_load_n(&cb_calls, __ATOMIC_RELAXED);
        CHECK_OK(cb_arena, carve_set_oom_callback(cb_arena, cb, u));
        /* until a call of it has started (one may be running as it goes) */
        for (int k = 0; k < 100 && __atomic_load_n(&cb_calls, __ATOMIC_RELAXED) == before; k++)
            sched_yield();
        CHECK_OK(cb_arena, carve_set_oom_callback(cb_arena, NULL, NULL));
        __atomic_store_n(&u->retired, 1, __ATOMIC_RELEASE);
        free(u);
    }
    __atomic_store_n(&cb_stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("callback: %lu calls, %lu started after their removal returned\n", cb_calls, cb_late);
    CHECK(cb_late == 0);
    CHECK(cb_calls >= (unsigned long)steps / 2); /* the removals met calls */
    CHECK_ARENA(cb_arena);
    carve_arena_destroy(cb_arena);
}

/* ---- the limit moving under allocations ---- */

static carve_arena *lim_arena;
static int lim_stop;
static unsigned long lim_bad;

static void *churn(void *arg) {
    uintptr_t id = (uintptr_t)arg;
    carve_stream s = (carve_stream)(0x1000 * (1 + id));
    void *live[32] = {0};
    test_rng r;
    test_rng_seed(&r, test_seed(41 + id));
    while (!__atomic_load_n(&lim_stop, __ATOMIC_ACQUIRE)) {
        unsigned i = (unsigned)test_rng_below(&r, 32);
        if (live[i]) {
            if (carve_free(lim_arena, live[i]) != CARVE_OK)
                __atomic_add_fetch(&lim_bad, 1, __ATOMIC_RELAXED);
            live[i] = NULL;
        } else {
            carve_status st = carve_alloc(lim_arena, 1 + test_rng_below(&r, 6 * MiB), s, &live[i]);
            if (st != CARVE_OK && st != CARVE_ERR_OOM)
                __atomic_add_fetch(&lim_bad, 1, __ATOMIC_RELAXED);
        }
    }
    for (int i = 0; i < 32; i++)
        if (carve_free(lim_arena, live[i]) != CARVE_OK)
            __atomic_add_fetch(&lim_bad, 1, __ATOMIC_RELAXED);
    return NULL;
}

static void test_limit_moves(const char *conf) {
    lim_arena = test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, 0, 256 * MiB, conf);
    lim_stop = 0;
    lim_bad = 0;
    pthread_t t[2];
    for (uintptr_t i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, churn, (void *)i) == 0);
    long n = steps / 10 > 10 ? steps / 10 : 10;
    for (long k = 0; k < n; k++) {
        size_t limit = (k & 1) ? 256 * MiB : (size_t)(2 + k % 7 * 4) * MiB;
        CHECK_OK(lim_arena, carve_set_limit(lim_arena, limit));
        CHECK_ARENA(lim_arena);
        carve_stats s;
        CHECK_OK(lim_arena, carve_get_stats(lim_arena, &s));
    }
    __atomic_store_n(&lim_stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CHECK(lim_bad == 0);
    carve_stats s;
    CHECK_OK(lim_arena, carve_get_stats(lim_arena, &s));
    CHECK(s.num_live == 0);
    CHECK_ARENA(lim_arena);
    carve_arena_destroy(lim_arena);
}

int main(void) {
    steps = getenv("CARVE_TEST_STEPS") ? atol(getenv("CARVE_TEST_STEPS")) : 1000;
    test_callback_removal();
    test_limit_moves("vmm=1");
    test_limit_moves("vmm=0");
    return test_finish();
}
