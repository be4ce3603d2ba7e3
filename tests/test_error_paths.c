/*
 * test_error_paths.c — the paths that handle failure: host memory for
 * carve's block records running out (each slab can be made to fail its
 * growths, and the test can hold every spare record), a backend that
 * refuses an unmap or a release, and both at once. After every failure
 * carve_check passes, and once the failure is past everything works and
 * goes back.
 *
 *   unmap_span  virtual-memory mode: a span going back to the heap is
 *               unmapped first, and its blocks cut around what the backend
 *               refused. With no records for that, the span was once left
 *               half unmapped with a FREE block over the unmapped granules
 *               (memory that would be handed out). The sequence: 1 GiB
 *               allocated and freed on a stream, its records unable to
 *               grow, the third unmap refused, then carve_empty_cache.
 *   empty_cache a free 1 GiB block beside a live buffer, its pool starved
 *               of records: carve_empty_cache unmapped nothing and said
 *               CARVE_OK; now CARVE_ERR_OOM, and the memory goes once
 *               records can be had.
 *   release     a segment whose release the backend refused stays the
 *               arena's: linked, counted, found by carve_arena_contains, and
 *               released by the next carve_empty_cache. (A segment whose
 *               unmapping was refused was once unlinked and left out; a free
 *               range holds nothing mapped now, by construction: only pool
 *               blocks say what is mapped.)
 *   sweep       a seeded scenario on three streams in both modes, run once
 *               per step with that step starved of records and the next
 *               backend call failing: carve_check after every step.
 *               CARVE_TEST_ERROR_STEPS sets the steps (default 60).
 */
#include "backend/faults.h"
#include "engine/types.h"
#include "test_util.h"

#define MiB ((size_t)1 << 20)
#define G CARVE_SEGMENT_GRANULE

static carve_pool *pool_of(carve_arena *a, carve_stream s) {
    for (carve_pool *p = a->pools; p; p = p->next_all)
        if (p->stream == s)
            return p;
    return NULL;
}

/* The next `times` backend calls of kinds fail. */
static void fail_next(carve_arena *a, unsigned kinds, unsigned long times) {
    carve_backend_faults_on(&a->be, a->be.faults.calls + 1, times, 0, kinds, CARVE_ERR_BACKEND);
}

/* ---- starving: no record to spare, and no growth ---- */

#define STARVE_MAX 64

typedef struct starve {
    carve_slab *slab[STARVE_MAX];
    carve_block *held[STARVE_MAX];
    unsigned n;
} starve;

/* Hold every free record of s but `leave`, and make it unable to grow. */
static void starve_slab_but(starve *v, carve_slab *s, size_t leave) {
    if (v->n == STARVE_MAX)
        return;
    carve_block *list = NULL;
    s->fail_grows = SIZE_MAX;
    while (s->nfree > leave) {
        carve_block *b = carve_slab_get(s);
        b->fnext = list;
        list = b;
        s->held++; /* (carve_check counts them as taken, not lost) */
    }
    v->slab[v->n] = s;
    v->held[v->n++] = list;
}

static void starve_slab(starve *v, carve_slab *s) { starve_slab_but(v, s, 0); }

/* Every slab of the arena: the heap's and each pool's. */
static void starve_on(carve_arena *a, starve *v) {
    v->n = 0;
    starve_slab(v, &a->heap.slab);
    for (carve_pool *p = a->pools; p; p = p->next_all)
        starve_slab(v, &p->slab);
}

static void starve_off(starve *v) {
    for (unsigned i = 0; i < v->n; i++) {
        v->slab[i]->fail_grows = 0;
        while (v->held[i]) {
            carve_block *b = v->held[i];
            v->held[i] = b->fnext;
            carve_slab_put(v->slab[i], b);
            v->slab[i]->held--;
        }
    }
    v->n = 0;
}

/* A second stream, once it has existed, makes the arena map granule by
 * granule (vmm.c's map_pieces: larger mappings only while one stream
 * exists): what it mapped is given back at once, so the counted calls that
 * follow are the test's own. */
static void map_granules(carve_arena *a) {
    void *x = NULL;
    CHECK_OK(a, carve_alloc(a, 256, (carve_stream)(uintptr_t)0x9000, &x));
    CHECK_OK(a, carve_free(a, x));
    CHECK_OK(a, carve_empty_cache(a));
}

/* ---- unmap_span ---- */

/* records: the pool's spare block records left (SIZE_MAX: as many as it
 * has, and its slab may grow). want: what carve_empty_cache answers (the
 * refused unmap, or, when nothing was refused, CARVE_ERR_OOM for the
 * memory left mapped for want of records). */
static void unmap_span_case(size_t records, carve_status want) {
    carve_arena *a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, 0, 0, "vmm=1");
    const carve_stream s = (carve_stream)(uintptr_t)0x1000;
    map_granules(a); /* 512 mappings, so that the third can be refused */
    void *p = NULL;
    CHECK_OK(a, carve_alloc(a, 1024 * MiB, s, &p));
    CHECK_OK(a, carve_free(a, p)); /* parked; empty_cache empties the span */
    carve_pool *pool = pool_of(a, s);
    CHECK(pool != NULL);
    if (!pool) {
        carve_arena_destroy(a);
        return;
    }
    starve v = {.n = 0};
    if (records != SIZE_MAX)
        starve_slab_but(&v, &pool->slab, records);
    carve_backend_faults_on(&a->be, a->be.faults.calls + 3, 1, 0, CARVE_FAULT_RELEASE, CARVE_ERR_BACKEND);
    CHECK_ST(a, carve_empty_cache(a), want);
    CHECK_ARENA(a);
    carve_stats stats;
    CHECK_OK(a, carve_get_stats(a, &stats));
    CHECK(stats.num_live == 0 && stats.reserved_bytes <= 1024 * MiB);
    /* With no record, nothing was unmapped; with two, the two granules
     * before the refused one (the trim that follows has no record either);
     * with enough, the span is cut around the refused granule, which the
     * trim that follows then unmaps (the refusal was once). */
    size_t left = records == 0 ? 1024 * MiB : records == 2 ? 1020 * MiB : 0;
    CHECK(stats.reserved_bytes == left);
    if (stats.reserved_bytes != left)
        fprintf(stderr, "records %zu: %zu bytes mapped, want %zu\n", records, stats.reserved_bytes, left);
    starve_off(&v);
    /* The same memory serves again, from the stream that kept it. */
    CHECK_OK(a, carve_alloc(a, 1024 * MiB, s, &p));
    CHECK_ARENA(a);
    CHECK_OK(a, carve_free(a, p));
    carve_backend_faults_off(&a->be);
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

static void test_unmap_span_without_records(void) {
    unmap_span_case(0, CARVE_ERR_OOM);            /* no record at all: nothing unmapped, nothing lost */
    unmap_span_case(2, CARVE_ERR_BACKEND);        /* one cut: up to the refused granule, then no record for the rest */
    unmap_span_case(SIZE_MAX, CARVE_ERR_BACKEND); /* records: the span cut around the refused granule */
}

/* One stream: 4 MiB, two granules, comes in as one mapping (the smallest
 * larger one; a larger request comes in as pieces of its touched peak /
 * CARVE_VMM_MAP_DIV: test_ledger), and a refused unmap keeps all of it,
 * whole and usable. Refused twice (the trim's, then the span's as it
 * goes back): the span stays and carve_empty_cache says why; refused once:
 * the span's unmapping that follows takes it whole. */
static void unmap_one_mapping_case(unsigned long refusals) {
    carve_arena *a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, 0, 0, "vmm=1");
    void *p = NULL;
    CHECK_OK(a, carve_alloc(a, 4 * MiB, NULL, &p));
    CHECK(a->maps.n == 1 && a->maps.v[0].size == 4 * MiB);
    CHECK_OK(a, carve_free(a, p));
    carve_backend_faults_on(&a->be, a->be.faults.calls + 1, refusals, 0, CARVE_FAULT_RELEASE, CARVE_ERR_BACKEND);
    CHECK_ST(a, carve_empty_cache(a), CARVE_ERR_BACKEND);
    CHECK(strstr(carve_last_error(a), "injected") != NULL);
    size_t left = refusals >= 2 ? 4 * MiB : 0; /* all of it or nothing: never a part */
    CHECK(carve_memory_reserved(a) == left && a->maps.n == (left != 0));
    CHECK_ARENA(a);
    carve_backend_faults_off(&a->be);
    CHECK_OK(a, carve_alloc(a, 4 * MiB, NULL, &p)); /* it serves again (mapped again where it went) */
    CHECK(carve_memory_reserved(a) == 4 * MiB);
    CHECK_OK(a, carve_free(a, p));
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0 && a->maps.n == 0);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

static void test_unmap_span_one_mapping(void) {
    unmap_one_mapping_case(1);
    unmap_one_mapping_case(2);
}

/* ---- empty_cache without records ----
 *
 * A free 1 GiB block inside a span that still holds a live buffer, its
 * pool without a spare record and unable to make one: carve_empty_cache
 * unmapped nothing and answered CARVE_OK. Now CARVE_ERR_OOM (host memory)
 * says the memory stayed; once records can be had again, it goes. */
static void test_empty_cache_without_records(void) {
    carve_arena *a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, 0, 0, "vmm=1");
    const carve_stream s = (carve_stream)(uintptr_t)0x1000;
    map_granules(a); /* (q below lands in p's granules: one mapping of p would keep all of them) */
    void *p = NULL, *q = NULL;
    CHECK_OK(a, carve_alloc(a, 1024 * MiB, s, &p));
    CHECK_OK(a, carve_alloc(a, 256, s, &q)); /* keeps the span */
    CHECK_OK(a, carve_free(a, p));
    CHECK_OK(a, carve_free(a, q));
    CHECK_OK(a, carve_alloc(a, 256, s, &q)); /* q back; p's 1 GiB free and mapped */
    carve_pool *pool = pool_of(a, s);
    CHECK(pool != NULL);
    if (!pool) {
        carve_arena_destroy(a);
        return;
    }
    starve v = {.n = 0};
    starve_slab_but(&v, &pool->slab, 0);
    size_t before = carve_memory_reserved(a);
    CHECK(before > 1024 * MiB);
    CHECK_ST(a, carve_empty_cache(a), CARVE_ERR_OOM);
    CHECK(strstr(carve_last_error(a), "host memory") != NULL);
    CHECK(carve_memory_reserved(a) == before); /* nothing went, and the status says so */
    CHECK_ARENA(a);
    starve_off(&v);
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == G); /* q's granule */
    CHECK_OK(a, carve_free(a, q));
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* ---- release ---- */

static void test_refused_release_keeps_segment(void) {
    carve_arena *a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, 0, 0, "vmm=1");
    carve_heap *h = &a->heap;
    carve_segment *seg = h->segs;
    CHECK(seg && !seg->next && h->nsegs == 1);
    if (!seg) {
        carve_arena_destroy(a);
        return;
    }
    /* Two granules mapped and given back: carve_empty_cache unmaps them
     * (two counted calls, one a mapping), then releases the segment, which
     * the backend refuses. */
    void *p = NULL;
    CHECK_OK(a, carve_alloc(a, 3 * MiB, NULL, &p));
    CHECK_OK(a, carve_free(a, p));
    carve_backend_faults_on(&a->be, a->be.faults.calls + 3, 1, 0, CARVE_FAULT_RELEASE, CARVE_ERR_BACKEND);
    CHECK_ST(a, carve_empty_cache(a), CARVE_ERR_BACKEND);
    CHECK(strstr(carve_last_error(a), "injected") != NULL);
    /* Still the arena's: linked, counted, found, with nothing mapped. */
    CHECK(h->segs == seg && h->nsegs == 1);
    void *inside = (void *)(seg->base + 5 * G);
    CHECK(carve_arena_contains(a, inside));
    CHECK(carve_memory_reserved(a) == 0);
    CHECK_ARENA(a);
    carve_backend_faults_off(&a->be);
    CHECK_OK(a, carve_empty_cache(a)); /* seg is freed */
    CHECK(h->segs == NULL && h->nsegs == 0 && carve_memory_reserved(a) == 0);
    CHECK(!carve_arena_contains(a, inside));
    CHECK_ARENA(a);
    /* It works as new. */
    CHECK_OK(a, carve_alloc(a, 3 * MiB, NULL, &p));
    CHECK_OK(a, carve_free(a, p));
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* ---- sweep ---- */

#define NSLOT 16

static const carve_stream streams[3] = {NULL, (carve_stream)(uintptr_t)0x1000, (carve_stream)(uintptr_t)0x2000};

typedef struct sweep_tally {
    unsigned long failed, ok_anyway;
} sweep_tally;

/* One run of the scenario; at step `starved` (-1: none) every slab is
 * starved and the next backend call fails, for that step only. */
static void sweep_run(const char *mode, uint64_t seed, int nsteps, int starved, sweep_tally *t) {
    static const size_t sizes[] = {256, 4096, 700 << 10, 3 * MiB, 12 * MiB, 40 * MiB};
    carve_arena *a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, 0, (size_t)4 << 30, mode);
    carve_backend_faults_on(&a->be, 0, 1, 0, CARVE_FAULT_ALL, CARVE_ERR_OOM); /* counts calls */
    void *p[NSLOT] = {0};
    int other[NSLOT] = {0};
    test_rng r;
    test_rng_seed(&r, seed);
    for (int step = 0; step < nsteps; step++) {
        int i = (int)test_rng_below(&r, NSLOT);
        unsigned what = (unsigned)test_rng_below(&r, 16);
        size_t size = sizes[test_rng_below(&r, 6)] + (size_t)test_rng_below(&r, 3) * 256;
        carve_stream s = streams[test_rng_below(&r, 3)];
        starve v = {.n = 0};
        if (step == starved) {
            starve_on(a, &v);
            fail_next(a, CARVE_FAULT_ALL, 1);
        }
        carve_status st;
        if (what == 15) {
            st = carve_empty_cache(a);
        } else if (!p[i]) {
            st = carve_alloc(a, size, s, &p[i]);
            other[i] = 0;
        } else if (what < 3 && !other[i]) {
            st = carve_record_stream(a, p[i], streams[(i + 1) % 3]);
            other[i] = st == CARVE_OK;
        } else {
            st = carve_free(a, p[i]);
            if (st == CARVE_OK)
                p[i] = NULL;
        }
        if (step == starved) {
            starve_off(&v);
            carve_backend_faults_on(&a->be, 0, 1, 0, CARVE_FAULT_ALL, CARVE_ERR_OOM);
            if (st != CARVE_OK) {
                t->failed++;
                CHECK(st == CARVE_ERR_OOM || st == CARVE_ERR_BACKEND);
                CHECK(carve_last_error(a)[0] != '\0');
            } else {
                t->ok_anyway++;
            }
        } else {
            CHECK_OK(a, st);
        }
        carve_status cst = carve_check(a);
        CHECK_OK(a, cst);
        if (cst != CARVE_OK)
            fprintf(stderr, "%s, starved at step %d: after step %d: %s\n", mode, starved, step, carve_last_error(a));
    }
    for (int i = 0; i < NSLOT; i++)
        if (p[i])
            CHECK_OK(a, carve_free(a, p[i]));
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

static void test_sweep(void) {
    const char *env = getenv("CARVE_TEST_ERROR_STEPS");
    int nsteps = env && *env ? atoi(env) : 60;
    const char *modes[] = {"vmm=1", "vmm=0"};
    for (int m = 0; m < 2; m++) {
        uint64_t seed = test_seed(505) + (uint64_t)m;
        sweep_tally t = {0, 0};
        for (int at = 0; at < nsteps; at++)
            sweep_run(modes[m], seed, nsteps, at, &t);
        printf("%s: %d steps, each starved of records with the next backend call failing in turn: "
               "%lu failed cleanly, %lu succeeded anyway\n",
               modes[m], nsteps, t.failed, t.ok_anyway);
        CHECK(t.failed > 0);
    }
}

int main(void) {
    test_unmap_span_without_records();
    test_unmap_span_one_mapping();
    test_empty_cache_without_records();
    test_refused_release_keeps_segment();
    test_sweep();
    return test_finish();
}
