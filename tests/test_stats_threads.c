/*
 * test_stats_threads.c — the statistics while other threads allocate, as
 * carve.h promises them: a stream's counts read together (frees never
 * more than allocations, live never wrapped), the snapshot's statistics of
 * the same instant as its streams and blocks, peaks never below the current
 * values (carve_check passes right after any reset, whatever maps run
 * meanwhile), and the largest free block counting the block freed last.
 *
 * Each case reproduces what went wrong:
 *   counts    carve_get_stats read a stream's allocation and free counts
 *             without its lock, one after the other; a pair made on another
 *             thread between the two reads gave more frees than allocations
 *             and num_live 2^64 - 1. Reproduced exactly: the test holds the
 *             stream's lock, as an allocating thread would, with the counts
 *             as such a reader would see them, while carve_get_stats runs.
 *   snapshot  the snapshot's statistics were read before its locks, so they
 *             disagreed with its streams while another thread allocated.
 *   reset     carve_reset_peak_stats stored the reserved bytes into the
 *             peak under the heap lock only, while virtual-memory maps raise
 *             both under a stream's lock: a map between its read and its
 *             store left the peak below the reserved bytes, and carve_check
 *             failed. The window is a few instructions wide, so the test
 *             checks what closes it, that no map can start (take its
 *             stream's lock) while a reset is under way, and then lets
 *             threads map and unmap while another resets and checks
 *             (CARVE_TEST_STATS_ROUNDS rounds, default 300).
 *   hot       a freed 20 MiB buffer parked for reuse (the hot block) was left
 *             out: cached 20 MiB, largest free block 0, and out-of-memory
 *             messages quoted the 0.
 */
#include <pthread.h>
#include <unistd.h>

#include "engine/types.h"
#include "test_util.h"

#define MiB ((size_t)1 << 20)

static carve_pool *pool_of(carve_arena *a, carve_stream s) {
    for (carve_pool *p = a->pools; p; p = p->next_all)
        if (p->stream == s)
            return p;
    return NULL;
}

/* ---- counts ---- */

typedef struct reader {
    carve_arena *a;
    carve_stats s;
    int done; /* atomic */
} reader;

static void *read_stats(void *arg) {
    reader *r = arg;
    carve_get_stats(r->a, &r->s);
    __atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void test_counts_read_together(void) {
    carve_arena *a = test_arena(CARVE_BACKEND_VIRTUAL, 1, 0, 0);
    const carve_stream s = (carve_stream)(uintptr_t)0x5000;
    void *p = NULL;
    CHECK_OK(a, carve_alloc(a, 4096, s, &p));
    CHECK_OK(a, carve_free(a, p));
    carve_pool *pool = pool_of(a, s);
    CHECK(pool != NULL);
    if (!pool) {
        carve_arena_destroy(a);
        return;
    }
    /* The stream's lock is held, as by a thread in carve_alloc; what a
     * reader sees if it reads the allocations before, and the frees after,
     * one more pair: one free more than allocations. */
    carve_spin_lock(&pool->lock);
    uint64_t nfrees = pool->nfrees;
    pool->nfrees = pool->nallocs + 1;
    reader r = {a, {0}, 0};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, read_stats, &r) == 0);
    usleep(50 * 1000);
    int waited = !__atomic_load_n(&r.done, __ATOMIC_ACQUIRE); /* it waits for the lock */
    pool->nfrees = nfrees;
    carve_spin_unlock(&pool->lock);
    pthread_join(th, NULL);
    CHECK(waited);
    CHECK(r.s.num_allocs == 1 && r.s.num_frees == 1 && r.s.num_live == 0);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* ---- snapshot ---- */

typedef struct churn {
    carve_arena *a;
    carve_stream s;
    size_t size;
    int stop; /* atomic */
    unsigned long pairs;
    int failed;
} churn;

/* Pairs on one stream, with one buffer kept live every other round. */
static void *churn_pairs(void *arg) {
    churn *c = arg;
    void *keep = NULL;
    while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
        void *p = NULL;
        if (carve_alloc(c->a, c->size, c->s, &p) != CARVE_OK || carve_free(c->a, p) != CARVE_OK)
            c->failed = 1;
        if (keep) {
            c->failed |= carve_free(c->a, keep) != CARVE_OK;
            keep = NULL;
        } else {
            c->failed |= carve_alloc(c->a, c->size / 2 + 256, c->s, &keep) != CARVE_OK;
        }
        c->pairs++;
    }
    if (keep)
        c->failed |= carve_free(c->a, keep) != CARVE_OK;
    return NULL;
}

/* The number after `key` in [from, to), summed over every occurrence. */
static unsigned long long sum_of(const char *from, const char *to, const char *key, int *n) {
    unsigned long long sum = 0;
    size_t k = strlen(key);
    *n = 0;
    for (const char *p = from; (p = strstr(p, key)) && p < to; p += k) {
        sum += strtoull(p + k, NULL, 10);
        (*n)++;
    }
    return sum;
}

static void test_snapshot_one_instant(void) {
    carve_arena *a = test_arena(CARVE_BACKEND_VIRTUAL, 1, 0, 0);
    churn c = {a, (carve_stream)(uintptr_t)0x6000, 4096, 0, 0, 0};
    void *mine = NULL;
    CHECK_OK(a, carve_alloc(a, 1 << 20, NULL, &mine)); /* a second stream, with a live buffer */
    pthread_t th;
    CHECK(pthread_create(&th, NULL, churn_pairs, &c) == 0);
    unsigned bad = 0, taken = 0;
    for (int i = 0; i < 400; i++) {
        char *json = NULL;
        if (carve_snapshot_json(a, &json) != CARVE_OK || !json) {
            bad++;
            continue;
        }
        const char *stats = strstr(json, "\"stats\":{"), *streams = strstr(json, "\"streams\":[");
        const char *segs = streams ? strstr(streams, "\"segments\":") : NULL;
        int n1, n2, n3, n4;
        if (!stats || !streams || !segs) {
            bad++;
        } else {
            unsigned long long live = sum_of(stats, streams, "\"num_live\":", &n1);
            unsigned long long alloc = sum_of(stats, streams, "\"allocated_bytes\":", &n2);
            unsigned long long slive = sum_of(streams, segs, "\"live\":", &n3);
            unsigned long long salloc = sum_of(streams, segs, "\"allocated_bytes\":", &n4);
            bad += n1 != 1 || n2 != 1 || n3 != n4 || live != slive || alloc != salloc;
        }
        taken++;
        carve_snapshot_free(json);
    }
    __atomic_store_n(&c.stop, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    CHECK(!c.failed);
    CHECK(taken == 400);
    CHECK(bad == 0);
    if (bad)
        fprintf(stderr, "snapshot: %u of %u disagree with their own streams (%lu pairs meanwhile)\n", bad, taken,
                c.pairs);
    CHECK_OK(a, carve_free(a, mine));
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* ---- reset ---- */

static void *reset_peaks(void *arg) {
    reader *r = arg;
    carve_reset_peak_stats(r->a);
    __atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* A map runs under its stream's lock and raises the reserved bytes, then
 * the peak, without the heap lock. A reset that reads the reserved bytes
 * before the raise and stores them after the peak's raise leaves the peak
 * below; so no map may start while a reset reads and stores. The test
 * holds the heap lock while a reset starts (it gets as far as the heap
 * lock), then tries what a map would: to take a stream's lock. */
static void test_reset_excludes_maps(void) {
    carve_arena *a = test_arena(CARVE_BACKEND_VIRTUAL, 1, 0, 0); /* virtual-memory mode */
    const carve_stream s = (carve_stream)(uintptr_t)0x5000;
    void *p = NULL;
    CHECK_OK(a, carve_alloc(a, 4 * MiB, s, &p));
    carve_pool *pool = pool_of(a, s);
    CHECK(pool != NULL);
    if (pool) {
        carve_mutex_lock(&a->heap.lock);
        reader r = {a, {0}, 0};
        pthread_t th;
        CHECK(pthread_create(&th, NULL, reset_peaks, &r) == 0);
        /* Until the reset holds the stream's lock (it then waits for the
         * heap lock): on a loaded machine the thread may take a while to
         * get there, so look every millisecond, for 5 s at most. */
        int map_started = 1;
        for (int i = 0; i < 5000 && map_started; i++) {
            map_started = carve_spin_trylock(&pool->lock);
            if (map_started) {
                carve_spin_unlock(&pool->lock);
                usleep(1000);
            }
        }
        if (map_started) /* the reset never held it: a map could start */
            map_started = carve_spin_trylock(&pool->lock);
        carve_mutex_unlock(&a->heap.lock);
        if (map_started) {
            usleep(20 * 1000); /* the reset reads and stores meanwhile */
            carve_spin_unlock(&pool->lock);
        }
        pthread_join(th, NULL);
        CHECK(!map_started);
        CHECK(r.done);
    }
    CHECK_OK(a, carve_free(a, p));
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

typedef struct mapper {
    carve_arena *a;
    carve_stream s;
    test_rng rng;
    int stop; /* atomic */
    int failed;
} mapper;

/* Allocations that need granules mapped (virtual-memory mode), and every
 * so often everything of the stream unmapped again by empty_cache. */
static void *map_churn(void *arg) {
    mapper *m = arg;
    void *live[4] = {0};
    for (unsigned long i = 0; !__atomic_load_n(&m->stop, __ATOMIC_ACQUIRE); i++) {
        unsigned k = (unsigned)(i % 4);
        if (live[k])
            m->failed |= carve_free(m->a, live[k]) != CARVE_OK;
        live[k] = NULL;
        size_t size = (size_t)test_rng_loguniform(&m->rng, 64 << 10, 6 * MiB);
        m->failed |= carve_alloc(m->a, size, m->s, &live[k]) != CARVE_OK;
        if (i % 16 == 15)
            m->failed |= carve_empty_cache(m->a) != CARVE_OK;
    }
    for (unsigned k = 0; k < 4; k++)
        if (live[k])
            m->failed |= carve_free(m->a, live[k]) != CARVE_OK;
    return NULL;
}

static void test_reset_under_maps(void) {
    const char *env = getenv("CARVE_TEST_STATS_ROUNDS");
    long rounds = env && *env ? atol(env) : 300;
    carve_arena *a = test_arena(CARVE_BACKEND_VIRTUAL, 1, 0, 0); /* virtual-memory mode */
    enum { NM = 2 };
    mapper m[NM];
    pthread_t th[NM];
    for (int i = 0; i < NM; i++) {
        m[i] = (mapper){a, (carve_stream)(uintptr_t)(0x7000 + 0x100 * i), {{0}}, 0, 0};
        test_rng_seed(&m[i].rng, test_seed(21) + (uint64_t)i);
        CHECK(pthread_create(&th[i], NULL, map_churn, &m[i]) == 0);
    }
    unsigned long check_failed = 0, stats_bad = 0;
    for (long r = 0; r < rounds; r++) {
        carve_reset_peak_stats(a);
        if (carve_check(a) != CARVE_OK) {
            if (!check_failed++)
                fprintf(stderr, "after a reset: %s\n", carve_last_error(a));
        }
        carve_stats s;
        if (carve_get_stats(a, &s) != CARVE_OK || s.reserved_bytes_peak < s.reserved_bytes ||
            s.allocated_bytes_peak < s.allocated_bytes || s.requested_bytes_peak < s.requested_bytes ||
            s.num_frees > s.num_allocs || s.num_live != s.num_allocs - s.num_frees)
            stats_bad++;
    }
    for (int i = 0; i < NM; i++) {
        __atomic_store_n(&m[i].stop, 1, __ATOMIC_RELEASE);
        pthread_join(th[i], NULL);
        CHECK(!m[i].failed);
    }
    CHECK(check_failed == 0);
    CHECK(stats_bad == 0);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* ---- hot ---- */

static void hot_case(const char *mode) {
    carve_arena *a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, 0, 32 * MiB, mode);
    carve_stats s;
    void *p = NULL, *q = NULL, *x = NULL;
    /* 20 MiB freed and parked: all of it is free, in one piece. */
    CHECK_OK(a, carve_alloc(a, 20 * MiB, NULL, &p));
    CHECK_OK(a, carve_free(a, p));
    CHECK_OK(a, carve_get_stats(a, &s));
    CHECK(s.cached_bytes == 20 * MiB);
    CHECK(s.largest_free_block == 20 * MiB);
    /* The out-of-memory message quotes it. */
    CHECK_ST(a, carve_alloc(a, 40 * MiB, NULL, &x), CARVE_ERR_OOM);
    CHECK(strstr(carve_last_error(a), "largest free block 20.00 MiB") != NULL);
    /* Parked between free neighbours, it counts merged with them. */
    CHECK_OK(a, carve_alloc(a, 4 * MiB, NULL, &p));
    CHECK_OK(a, carve_alloc(a, 4 * MiB, NULL, &q));
    CHECK_OK(a, carve_free(a, p)); /* parked */
    CHECK_OK(a, carve_free(a, q)); /* parked; p goes back, merged with nothing */
    CHECK_OK(a, carve_get_stats(a, &s));
    CHECK(s.largest_free_block == s.cached_bytes);
    CHECK(s.largest_free_block == 20 * MiB);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

static void test_hot_block_is_free(void) {
    hot_case("vmm=0");
    hot_case("vmm=1");
}

int main(void) {
    test_counts_read_together();
    test_hot_block_is_free();
    test_snapshot_one_instant();
    test_reset_excludes_maps();
    test_reset_under_maps();
    return test_finish();
}
