/*
 * test_faults.c — fault injection as a user would configure it
 * (fail_backend_at / fail_backend_every / fail_backend_status), made
 * exhaustive: a fixed scenario (allocations on three streams, frees,
 * record_stream, empty_cache, then everything freed and given back) is
 * first run cleanly to count its backend calls
 * (reserves, maps, event records, releases, unmaps), then run once for every
 * N up to that count with call N failing.
 *
 * The one idea: after every step, whatever failed, the arena must still be
 * whole — every live buffer keeps its contents (host memory: each buffer
 * carries a pattern of its own), carve_check passes, a failed call returned
 * a clear status with the word "injected" in its message and changed
 * nothing, and the driver holds mapped exactly the bytes the arena counts
 * (the ledger: nothing half mapped, nothing leaked) — and once the failure
 * is past, the same scenario runs again without a single error and every
 * byte goes back. The virtual backend's run is made twice: on three
 * streams, and on one, where requests map untouched room as one mapping
 * (a mapping and a granule in one commit) that trims and empty_cache take
 * whole or not at all.
 */
#include "backend/faults.h"
#include "engine/types.h"
#include "test_util.h"

#define NSLOT 24
#define NSTEP 160
#define MiB ((size_t)1 << 20)

static const carve_stream streams[3] = {NULL, (carve_stream)(uintptr_t)0x1000, (carve_stream)(uintptr_t)0x2000};
/* Streams the scenario uses: 3, or 1, where untouched room comes in as one
 * mapping per request (engine/maps.h), so that failures meet larger mappings. */
static unsigned nstreams = 3;
static size_t larger_seen; /* the most mappings larger than a granule seen at once */

typedef struct model {
    void *p[NSLOT];
    size_t size[NSLOT];
    uint64_t id[NSLOT];
    int used_on_other[NSLOT];
    uint64_t next_id;
} model;

typedef struct tally {
    unsigned long failed_allocs, failed_frees, failed_empties, steps;
} tally;

/* Pattern words at both ends of a buffer (host memory). */
static void stamp(void *p, size_t size, uint64_t id) {
    uint64_t *w = p;
    size_t n = size / 8 < 8 ? size / 8 : 8;
    for (size_t i = 0; i < n; i++) {
        w[i] = id * 0x9E3779B97F4A7C15ull + i;
        w[size / 8 - 1 - i] = ~(id * 0x9E3779B97F4A7C15ull + i);
    }
}

static int intact(const void *p, size_t size, uint64_t id) {
    const uint64_t *w = p;
    size_t n = size / 8 < 8 ? size / 8 : 8;
    for (size_t i = 0; i < n; i++)
        if (w[i] != id * 0x9E3779B97F4A7C15ull + i || w[size / 8 - 1 - i] != ~(id * 0x9E3779B97F4A7C15ull + i))
            return 0;
    return 1;
}

/* After every step: contents, invariants, statistics. */
static void verify(carve_arena *a, const model *m, int real_memory) {
    size_t live = 0;
    for (int i = 0; i < NSLOT; i++) {
        if (!m->p[i])
            continue;
        live++;
        if (real_memory)
            CHECK(intact(m->p[i], m->size[i], m->id[i]));
    }
    CHECK_ARENA(a);
    carve_stats s;
    CHECK_OK(a, carve_get_stats(a, &s));
    CHECK(s.num_live == live);
    CHECK(s.reserved_bytes <= s.limit_bytes);
    if (a->vmm) { /* nothing half mapped, nothing leaked: the driver maps exactly what the engine counts */
        CHECK(s.driver_bytes[CARVE_DRV_MAP] - s.driver_bytes[CARVE_DRV_UNMAP] == s.reserved_bytes);
        if (a->maps.n > larger_seen)
            larger_seen = a->maps.n;
    }
}

/* A failed call: a status the documentation allows, naming the injection. */
static void check_failure(carve_arena *a, carve_status st, int allow_oom) {
    CHECK(st == CARVE_ERR_BACKEND || (allow_oom && st == CARVE_ERR_OOM));
    CHECK(strstr(carve_last_error(a), "injected") != NULL);
}

/* The scenario: a fixed sequence of steps from seed. strict: nothing may
 * fail. */
static void scenario(carve_arena *a, model *m, uint64_t seed, int strict, int real_memory, tally *t) {
    static const size_t sizes[] = {256, 4096, 700 << 10, 3 * MiB, 12 * MiB, 40 * MiB};
    test_rng r;
    test_rng_seed(&r, seed);
    for (int step = 0; step < NSTEP; step++) {
        int i = (int)test_rng_below(&r, NSLOT);
        unsigned what = (unsigned)test_rng_below(&r, 16);
        carve_status st;
        if (what == 15) { /* empty_cache: releases segments, syncs */
            st = carve_empty_cache(a);
            if (st != CARVE_OK) {
                CHECK(!strict);
                check_failure(a, st, 0);
                t->failed_empties++;
            }
        } else if (!m->p[i]) {
            size_t size = sizes[test_rng_below(&r, 6)] + (size_t)test_rng_below(&r, 3) * 256;
            int k = (int)(test_rng_below(&r, 3) % nstreams);
            void *p = (void *)1;
            st = carve_alloc(a, size, streams[k], &p);
            if (st == CARVE_OK) {
                m->p[i] = p;
                m->size[i] = size;
                m->id[i] = ++m->next_id;
                m->used_on_other[i] = 0;
                if (real_memory)
                    stamp(p, size, m->id[i]);
            } else {
                CHECK(!strict);
                CHECK(p == NULL);
                check_failure(a, st, 1);
                t->failed_allocs++;
            }
        } else if (what < 4 && !m->used_on_other[i] && nstreams > 1) { /* also used on another stream */
            CHECK_OK(a, carve_record_stream(a, m->p[i], streams[(i + 1) % 3]));
            m->used_on_other[i] = 1;
        } else {
            st = carve_free(a, m->p[i]);
            if (st == CARVE_OK) {
                m->p[i] = NULL;
            } else { /* only an event on the other stream can fail: the buffer stays live */
                CHECK(!strict);
                CHECK(m->used_on_other[i]);
                check_failure(a, st, 0);
                t->failed_frees++;
            }
        }
        verify(a, m, real_memory);
        t->steps++;
    }
    /* Drain: every buffer freed, the cache emptied; a failed call is repeated
     * (a one-shot failure is then past). */
    for (int i = 0; i < NSLOT; i++) {
        if (!m->p[i])
            continue;
        carve_status st = carve_free(a, m->p[i]);
        if (st != CARVE_OK) {
            CHECK(!strict);
            check_failure(a, st, 0);
            t->failed_frees++;
            verify(a, m, real_memory);
            if (a->be.faults.every)
                carve_backend_faults_off(&a->be);
            CHECK_OK(a, carve_free(a, m->p[i]));
        }
        m->p[i] = NULL;
        verify(a, m, real_memory);
    }
    carve_status st = carve_empty_cache(a);
    if (st != CARVE_OK) {
        CHECK(!strict);
        check_failure(a, st, 0);
        t->failed_empties++;
        verify(a, m, real_memory);
        if (a->be.faults.every)
            carve_backend_faults_off(&a->be);
        CHECK_OK(a, carve_empty_cache(a));
    }
    CHECK(carve_memory_reserved(a) == 0 && carve_memory_allocated(a) == 0);
    verify(a, m, real_memory);
}

static carve_arena *arena_for(carve_backend be, const char *faults, carve_status *st) {
    carve_config c;
    carve_config_init(&c);
    c.backend = be;
    c.name = "faults";
    CHECK_OK(NULL, carve_config_parse(&c, "limit=1GiB,sim_event_polls=2"));
    if (be == CARVE_BACKEND_VIRTUAL)
        CHECK_OK(NULL, carve_config_parse(&c, "vmm=1"));
    if (faults)
        CHECK_OK(NULL, carve_config_parse(&c, faults));
    carve_arena *a = NULL;
    *st = carve_arena_create(&c, &a);
    return a;
}

/* Counted backend calls of one clean run of the scenario. */
static unsigned long count_calls(carve_backend be, uint64_t seed) {
    carve_status st;
    carve_arena *a = arena_for(be, NULL, &st);
    CHECK_OK(NULL, st);
    carve_backend_faults_on(&a->be, 0, 1, 0, CARVE_FAULT_ALL, CARVE_ERR_OOM); /* counts, fails nothing */
    model m;
    memset(&m, 0, sizeof(m));
    tally t = {0};
    scenario(a, &m, seed, 1, be == CARVE_BACKEND_HOST, &t);
    unsigned long n = a->be.faults.calls;
    CHECK(a->be.faults.failed == 0);
    carve_arena_destroy(a);
    return n;
}

/* One run with the configuration faults, then the same scenario again with
 * the failures past: everything works and goes back. */
static void run_with(carve_backend be, uint64_t seed, const char *faults, int stop_after_first, tally *t) {
    carve_status st;
    carve_arena *a = arena_for(be, faults, &st);
    if (!a) { /* creation itself reached the failing call (the address space of vmm=1) */
        CHECK(st == CARVE_ERR_OOM || st == CARVE_ERR_BACKEND);
        CHECK(strstr(carve_last_error(NULL), "injected") != NULL);
        a = arena_for(be, NULL, &st);
        CHECK_OK(NULL, st);
    }
    model m;
    memset(&m, 0, sizeof(m));
    int real = be == CARVE_BACKEND_HOST;
    scenario(a, &m, seed, 0, real, t);
    if (stop_after_first) /* periodic failures: stop them, then the arena must work */
        carve_backend_faults_off(&a->be);
    else if (a->be.faults.leaf)
        CHECK(a->be.faults.failed == 1); /* call N was reached, and failed, in the first pass */
    scenario(a, &m, seed + 1, 1, real, t);
    carve_arena_destroy(a);
}

static void exhaustive(carve_backend be, uint64_t seed) {
    unsigned long n = count_calls(be, seed);
    CHECK(n > 20); /* the scenario reaches the backend often enough to be worth it */
    tally t = {0};
    unsigned long injected = 0;
    for (unsigned long at = 1; at <= n; at++) {
        char conf[96];
        snprintf(conf, sizeof(conf), "fail_backend_at=%lu,fail_backend_status=%s", at,
                 at % 2 ? "oom" : "backend");
        tally one = {0};
        run_with(be, seed, conf, 0, &one);
        t.failed_allocs += one.failed_allocs;
        t.failed_frees += one.failed_frees;
        t.failed_empties += one.failed_empties;
        t.steps += one.steps;
        injected++;
    }
    for (unsigned long every = 2; every <= 7; every++) {
        char conf[64];
        snprintf(conf, sizeof(conf), "fail_backend_every=%lu", every);
        run_with(be, seed, conf, 1, &t);
    }
    printf("%s: %lu backend calls in the scenario; each made to fail in turn (%lu runs) and every 2nd..7th: "
           "%lu steps, %lu allocations, %lu frees, %lu empty_cache calls answered with a failure\n",
           carve_backend_str(be), n, injected, t.steps, t.failed_allocs, t.failed_frees, t.failed_empties);
    CHECK(t.failed_allocs > 0 && (t.failed_frees > 0 || nstreams == 1) && t.failed_empties > 0); /* (one stream: no event a free records) */
}

/* A failed initial reserve fails carve_arena_create cleanly. */
static void test_create(void) {
    carve_config c;
    carve_config_init(&c);
    c.backend = CARVE_BACKEND_HOST;
    CHECK_OK(NULL, carve_config_parse(&c, "initial=64MiB,fail_backend_at=1"));
    carve_arena *a = (carve_arena *)1;
    CHECK_ST(NULL, carve_arena_create(&c, &a), CARVE_ERR_OOM);
    CHECK(a == NULL && strstr(carve_last_error(NULL), "injected") != NULL);
    CHECK_OK(NULL, carve_config_parse(&c, "fail_backend_at=2"));
    CHECK_OK(NULL, carve_arena_create(&c, &a));
    carve_arena_destroy(a); /* all goes back although a release would be call 2 */
}

/* The driver holds mapped exactly the bytes the arena counts as reserved. */
static int ledger_even(carve_arena *a) {
    carve_stats s;
    carve_get_stats(a, &s);
    return s.driver_bytes[CARVE_DRV_MAP] - s.driver_bytes[CARVE_DRV_UNMAP] == s.reserved_bytes;
}

/* One stream maps a request of more than its pieces in two commits (the
 * pieces, then the piece left over and the last granule). From call k of
 * that map on, every map and unmap is refused: with k = 2 the second commit
 * fails and so does every unmap of the first one's pieces, which then stay
 * mapped. The request fails; what stays mapped is free memory the arena
 * counts (reserved, a refused unmap, carve_check), a retry maps the rest
 * only (the ledger stays even: nothing mapped twice), and empty_cache
 * unmaps it all. */
static void test_undo_refused(void) {
    int kept_seen = 0;
    for (unsigned long k = 1; k <= 4; k++) {
        carve_config c;
        carve_config_init(&c);
        c.backend = CARVE_BACKEND_VIRTUAL;
        CHECK_OK(NULL, carve_config_parse(&c, "vmm=1,limit=8GiB"));
        carve_arena *a;
        CHECK_OK(NULL, carve_arena_create(&c, &a));
        void *small, *p = NULL;
        CHECK_OK(a, carve_alloc(a, 1 * MiB, NULL, &small));
        CHECK_OK(a, carve_free(a, small));
        carve_backend_faults_on(&a->be, 0, 1, 0, CARVE_FAULT_ALL, CARVE_ERR_OOM); /* counts calls only */
        unsigned long base = a->be.faults.calls;
        carve_backend_faults_on(&a->be, base + k, 1000, 0, CARVE_FAULT_ALLOC | CARVE_FAULT_RELEASE, CARVE_ERR_OOM);
        uint64_t refused = a->heap.nunmap_failed;
        carve_status st = carve_alloc(a, 1030 * MiB, NULL, &p);
        CHECK(st == CARVE_OK || st == CARVE_ERR_OOM);
        carve_stats s;
        carve_get_stats(a, &s);
        if (s.reserved_bytes > 2 * MiB && st == CARVE_ERR_OOM) { /* the first commit's pieces stayed */
            kept_seen++;
            CHECK(a->heap.nunmap_failed > refused);
        }
        CHECK(ledger_even(a));
        CHECK_OK(a, carve_check(a));
        carve_backend_faults_off(&a->be);
        if (st == CARVE_OK)
            CHECK_OK(a, carve_free(a, p));
        CHECK_OK(a, carve_alloc(a, 1030 * MiB, NULL, &p));
        CHECK(ledger_even(a));
        CHECK_OK(a, carve_check(a));
        CHECK_OK(a, carve_free(a, p));
        CHECK_OK(a, carve_empty_cache(a));
        carve_get_stats(a, &s);
        CHECK(ledger_even(a) && s.reserved_bytes == 0);
        CHECK_OK(a, carve_check(a));
        carve_arena_destroy(a);
    }
    CHECK(kept_seen > 0); /* the refused undo was reached */
}

int main(void) {
    uint64_t seed = test_seed(2026);
    test_create();
    test_undo_refused();
    exhaustive(CARVE_BACKEND_HOST, seed);
    exhaustive(CARVE_BACKEND_VIRTUAL, seed + 100);
    /* One stream: maps of larger mappings (one commit of a mapping and a
     * granule), trims and spans taking them whole, each refused in turn. */
    nstreams = 1;
    larger_seen = 0;
    exhaustive(CARVE_BACKEND_VIRTUAL, seed + 200);
    CHECK(larger_seen >= 2);
    printf("one stream: up to %zu mappings larger than a granule at once\n", larger_seen);
    return test_finish();
}
