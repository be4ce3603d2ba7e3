/*
 * stress_model.c — seeded random operation sequences checked against a
 * reference model, with carve_check after every step.
 *
 * The model is the list of live buffers (address, size, stream, id). After
 * every operation the arena's statistics must equal the model's sums, every
 * new buffer must be aligned and must not overlap any live one, and on the
 * HOST backend every buffer carries a pattern derived from its id that is
 * verified before it is freed (an overlap or a stray write shows up as a
 * corrupted pattern). Bad frees (interior, foreign, misaligned, double) are
 * mixed in and must change nothing. Several streams with simulated events
 * exercise record_stream and cross-stream reuse; empty_cache and peak resets
 * are mixed in too.
 *
 * CARVE_TEST_SEED overrides the seed; CARVE_TEST_STEPS the step count.
 */
#include "test_util.h"

#include <stdint.h>

typedef struct live {
    uintptr_t addr;
    size_t size;
    carve_stream stream;
    uint64_t id;
} live;

typedef struct model {
    live *v;
    size_t n, cap;
    size_t allocated, requested;
    uint64_t next_id;
} model;

static size_t rounded(size_t n) { return (n + CARVE_ALIGNMENT - 1) & ~(size_t)(CARVE_ALIGNMENT - 1); }

static uint64_t pattern_word(uint64_t id, size_t i) { return (id * 0x9E3779B97F4A7C15ull) ^ (i * 0xC2B2AE3D27D4EB4Full); }

/* Pattern: first and last 8 words and up to 64 words spread through the buffer. */
static void pattern_apply(const live *l, int verify, int *bad) {
    size_t words = l->size / 8;
    uint64_t *w = (uint64_t *)l->addr;
    size_t step = words > 64 ? words / 64 : 1;
    for (size_t i = 0; i < words; i += (i < 8 || i + 8 >= words) ? 1 : step) {
        uint64_t want = pattern_word(l->id, i);
        if (verify) {
            if (w[i] != want)
                (*bad)++;
        } else {
            w[i] = want;
        }
    }
}

static int overlaps_any(const model *m, uintptr_t a, size_t size) {
    for (size_t i = 0; i < m->n; i++) {
        const live *l = &m->v[i];
        if (a < l->addr + rounded(l->size) && l->addr < a + rounded(size))
            return 1;
    }
    return 0;
}

static void check_stats(carve_arena *a, const model *m) {
    carve_stats s;
    CHECK_OK(a, carve_get_stats(a, &s));
    CHECK(s.allocated_bytes == m->allocated);
    CHECK(s.requested_bytes == m->requested);
    CHECK(s.num_live == m->n);
    CHECK(carve_memory_allocated(a) == m->allocated);
    CHECK(s.allocated_bytes_peak >= s.allocated_bytes);
    CHECK(s.reserved_bytes <= s.limit_bytes);
    CHECK(s.reserved_bytes >= s.allocated_bytes);
    CHECK(s.num_allocs - s.num_frees == s.num_live);
}

typedef struct run_cfg {
    carve_backend backend;
    int growth;
    size_t initial, limit, max_size;
    unsigned polls;
    int nstreams;
    long steps;
    int vmm;
} run_cfg;

static void run(const run_cfg *rc, uint64_t seed) {
    carve_config c;
    carve_config_init(&c);
    c.backend = rc->backend;
    c.growth = rc->growth;
    c.initial_bytes = rc->initial;
    c.limit_bytes = rc->limit;
    c.sim_event_polls = rc->polls;
    c.vmm = rc->vmm;
    carve_arena *a = NULL;
    CHECK_OK(NULL, carve_arena_create(&c, &a));
    if (!a)
        return;
    test_rng r;
    test_rng_seed(&r, seed);
    model m = {0};
    carve_stream streams[4] = {NULL, (carve_stream)(uintptr_t)0x1000, (carve_stream)(uintptr_t)0x2000,
                               (carve_stream)(uintptr_t)0x3000};
    int host = rc->backend == CARVE_BACKEND_HOST;
    unsigned long ooms = 0;
    for (long step = 0; step < rc->steps && test_failures == 0; step++) {
        uint64_t op = test_rng_below(&r, 100);
        if (op < 55 || m.n == 0) { /* allocate */
            size_t size = test_rng_below(&r, 50) == 0 ? 0 : test_rng_loguniform(&r, 1, rc->max_size);
            carve_stream s = streams[test_rng_below(&r, (uint64_t)rc->nstreams)];
            void *p = (void *)1;
            carve_status st = carve_alloc(a, size, s, &p);
            if (st == CARVE_ERR_OOM) {
                ooms++;
                CHECK(p == NULL);
                CHECK(strstr(carve_last_error(a), "out of memory") != NULL);
            } else {
                CHECK_OK(a, st);
                if (size == 0) {
                    CHECK(p == NULL);
                } else if (p) {
                    uintptr_t ad = (uintptr_t)p;
                    CHECK(ad % CARVE_ALIGNMENT == 0);
                    CHECK(!overlaps_any(&m, ad, size));
                    if (m.n == m.cap) {
                        m.cap = m.cap ? m.cap * 2 : 256;
                        m.v = realloc(m.v, m.cap * sizeof(*m.v));
                    }
                    live l = {ad, size, s, ++m.next_id};
                    if (host)
                        pattern_apply(&l, 0, NULL);
                    m.v[m.n++] = l;
                    m.allocated += rounded(size);
                    m.requested += size;
                }
            }
        } else if (op < 90) { /* free a live buffer */
            size_t i = (size_t)test_rng_below(&r, m.n);
            live l = m.v[i];
            if (host) {
                int bad = 0;
                pattern_apply(&l, 1, &bad);
                CHECK(bad == 0);
            }
            CHECK_OK(a, carve_free(a, (void *)l.addr));
            m.v[i] = m.v[--m.n];
            m.allocated -= rounded(l.size);
            m.requested -= l.size;
        } else if (op < 95) { /* a bad free: must change nothing */
            size_t i = (size_t)test_rng_below(&r, m.n);
            uintptr_t bad;
            switch (test_rng_below(&r, 4)) {
            case 0: bad = m.v[i].addr + CARVE_ALIGNMENT * (1 + test_rng_below(&r, 3)); break; /* interior */
            case 1: bad = m.v[i].addr + 8; break;                                             /* misaligned */
            case 2: bad = (uintptr_t)0x7000000000ull + CARVE_ALIGNMENT * test_rng_below(&r, 1000); break;
            default: bad = (uintptr_t)&m; break;                                               /* foreign */
            }
            int is_live = 0;
            for (size_t j = 0; j < m.n; j++)
                is_live |= m.v[j].addr == bad;
            if (!is_live)
                CHECK_ST(a, carve_free(a, (void *)bad), CARVE_ERR_BAD_POINTER);
        } else if (op < 98) { /* declare use on another stream */
            size_t i = (size_t)test_rng_below(&r, m.n);
            CHECK_OK(a, carve_record_stream(a, (void *)m.v[i].addr, streams[test_rng_below(&r, 4)]));
        } else if (op < 99) {
            CHECK_OK(a, carve_empty_cache(a));
            if (m.n == 0)
                CHECK(carve_memory_reserved(a) == 0);
        } else {
            carve_reset_peak_stats(a);
        }
        CHECK_ARENA(a);
        check_stats(a, &m);
    }
    /* A freed buffer cannot be freed twice. */
    if (m.n > 0) {
        live l = m.v[--m.n];
        CHECK_OK(a, carve_free(a, (void *)l.addr));
        CHECK_ST(a, carve_free(a, (void *)l.addr), CARVE_ERR_BAD_POINTER);
        m.allocated -= rounded(l.size);
        m.requested -= l.size;
    }
    while (m.n > 0) {
        live l = m.v[--m.n];
        if (host) {
            int bad = 0;
            pattern_apply(&l, 1, &bad);
            CHECK(bad == 0);
        }
        CHECK_OK(a, carve_free(a, (void *)l.addr));
        m.allocated -= rounded(l.size);
        m.requested -= l.size;
    }
    check_stats(a, &m);
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0);
    CHECK_ARENA(a);
    printf("  seed %llu: %ld steps, %lu OOMs\n", (unsigned long long)seed, rc->steps, ooms);
    free(m.v);
    carve_arena_destroy(a);
}

int main(void) {
    uint64_t seed = test_seed(20261122);
    long steps = getenv("CARVE_TEST_STEPS") ? atol(getenv("CARVE_TEST_STEPS")) : 4000;
    const run_cfg cfgs[] = {
        /* host memory, growth, unlimited: patterns catch any overlap */
        {CARVE_BACKEND_HOST, 1, 0, 0, 3 << 20, 0, 1, steps},
        /* host, several streams with events that take a few polls */
        {CARVE_BACKEND_HOST, 1, 0, 0, 3 << 20, 3, 4, steps},
        /* host, one fixed block, tight: OOM paths and reclaim */
        {CARVE_BACKEND_HOST, 0, 48 << 20, 48 << 20, 8 << 20, 2, 4, steps},
        /* virtual, huge sizes under a limit */
        {CARVE_BACKEND_VIRTUAL, 1, 0, (size_t)64 << 30, (size_t)4 << 30, 1, 4, steps},
        /* virtual, initial block plus growth */
        {CARVE_BACKEND_VIRTUAL, 1, 256 << 20, (size_t)2 << 30, 128 << 20, 0, 2, steps},
        /* virtual-memory mode: granules mapped on use, unmapped under the target */
        {CARVE_BACKEND_VIRTUAL, 1, 0, (size_t)2 << 30, 96 << 20, 2, 4, steps, 1},
        /* virtual-memory mode, tight: mapping runs into the limit */
        {CARVE_BACKEND_VIRTUAL, 0, 160 << 20, 0, 24 << 20, 0, 3, steps, 1},
    };
    for (size_t i = 0; i < sizeof(cfgs) / sizeof(cfgs[0]); i++) {
        printf("config %zu: %s growth=%d initial=%zu limit=%zu max=%zu polls=%u streams=%d vmm=%d\n", i,
               carve_backend_str(cfgs[i].backend), cfgs[i].growth, cfgs[i].initial, cfgs[i].limit, cfgs[i].max_size,
               cfgs[i].polls, cfgs[i].nstreams, cfgs[i].vmm);
        for (uint64_t k = 0; k < 3; k++)
            run(&cfgs[i], seed + 7919 * k + i);
    }
    return test_finish();
}
