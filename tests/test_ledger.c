/*
 * test_ledger.c — the driver ledger of the virtual backend (carve_stats'
 * driver_* fields): the calls it counts are those the CUDA backend makes for
 * the same work, call for call, and agree with the engine's own counters,
 * which are kept apart (granule maps and unmaps, event records and queries,
 * host waits); its modeled time is the cost table applied to the counts.
 *
 * Exact sequences: a 5 MiB buffer (3 granules: 3 cuMemCreate, cuMemMap and
 * cuMemRelease, one cuMemSetAccess over 3 mappings), a remap inside a
 * recycle window (cuMemRetainAllocationHandle and cuMemUnmap per granule,
 * the kept handles mapped again without cuMemCreate), segments mode
 * (cudaMalloc and cudaFree per segment, nothing mapped); then a seeded churn
 * on three streams at a limit, where every handle created or retained is
 * released exactly once and every count equals the engine's.
 */
#include "backend/driver_costs.h"
#include "engine/types.h"
#include "test_util.h"

#define MiB ((size_t)1 << 20)
#define G (2 * MiB)

static carve_stats stats(carve_arena *a) {
    carve_stats s;
    CHECK_OK(a, carve_get_stats(a, &s));
    return s;
}

/* The model recomputed here from the table, in floating point. */
static double model(const carve_stats *s) {
    double ns = 0;
    for (int k = 0; k < CARVE_DRV_KINDS; k++)
        ns += (double)s->driver_calls[k] * carve_driver_costs[k].per_call_ns +
              (double)s->driver_mappings[k] * carve_driver_costs[k].per_mapping_ns +
              (double)s->driver_bytes[k] / (double)MiB * carve_driver_costs[k].per_mib_ns;
    return ns;
}

/* What the engine counts on its own must equal the ledger's. */
static void check_agrees(const carve_stats *s, int vmm) {
    if (vmm) {
        uint64_t reserves = s->driver_calls[CARVE_DRV_RESERVE];
        /* The engine counts granules; a mapping may hold several. */
        CHECK(s->driver_bytes[CARVE_DRV_MAP] / G + reserves == s->num_backend_allocs);
        CHECK(s->driver_bytes[CARVE_DRV_MAP] % G == 0 && s->driver_bytes[CARVE_DRV_UNMAP] % G == 0);
        CHECK(s->driver_mappings[CARVE_DRV_MAP] == s->driver_calls[CARVE_DRV_MAP]);
        CHECK(s->driver_mappings[CARVE_DRV_ACCESS] == s->driver_calls[CARVE_DRV_MAP]);
        CHECK(s->driver_bytes[CARVE_DRV_ACCESS] == s->driver_bytes[CARVE_DRV_MAP]);
        CHECK(s->driver_mappings[CARVE_DRV_UNMAP] == s->driver_calls[CARVE_DRV_UNMAP]);
        CHECK(s->driver_bytes[CARVE_DRV_UNMAP] / G + s->driver_calls[CARVE_DRV_UNRESERVE] == s->num_backend_frees);
        CHECK(s->driver_calls[CARVE_DRV_MALLOC] == 0 && s->driver_calls[CARVE_DRV_FREE] == 0);
    } else {
        CHECK(s->driver_calls[CARVE_DRV_MALLOC] == s->num_backend_allocs);
        CHECK(s->driver_calls[CARVE_DRV_FREE] == s->num_backend_frees);
        CHECK(s->driver_calls[CARVE_DRV_MAP] == 0 && s->driver_calls[CARVE_DRV_RESERVE] == 0);
    }
    CHECK(s->driver_calls[CARVE_DRV_EVENT_RECORD] == s->num_event_records);
    CHECK(s->driver_calls[CARVE_DRV_EVENT_QUERY] == s->num_event_queries);
    CHECK(s->driver_calls[CARVE_DRV_EVENT_SYNC] + s->driver_calls[CARVE_DRV_DEVICE_SYNC] == s->num_syncs);
    double m = model(s), got = (double)s->driver_model_ns;
    CHECK(got <= m + CARVE_DRV_KINDS && got + CARVE_DRV_KINDS >= m); /* integer rounding, 1 ns a kind */
    CHECK(s->driver_model_ns == carve_driver_model_ns(s->driver_calls, s->driver_mappings, s->driver_bytes));
}

static void test_names_and_table(void) {
    CHECK(!strcmp(carve_driver_op_name(CARVE_DRV_CREATE), "cuMemCreate"));
    CHECK(!strcmp(carve_driver_op_name(CARVE_DRV_ACCESS), "cuMemSetAccess"));
    CHECK(!strcmp(carve_driver_op_name(-1), "unknown"));
    CHECK(!strcmp(carve_driver_op_name(CARVE_DRV_KINDS), "unknown"));
    for (int i = 0; i < CARVE_DRV_KINDS; i++) {
        CHECK(strcmp(carve_driver_op_name(i), "unknown") != 0);
        for (int j = 0; j < i; j++)
            CHECK(strcmp(carve_driver_op_name(i), carve_driver_op_name(j)) != 0);
        /* Every kind costs something per call: a driver call is never free. */
        CHECK(carve_driver_costs[i].per_call_ns > 0);
    }
    CHECK(CARVE_DRV_KINDS <= CARVE_DRIVER_SLOTS);
    CHECK(strstr(carve_driver_costs_source(), "bench/vmm_costs.cu") != NULL);
    CHECK(carve_driver_model_ns(NULL, NULL, NULL) == 0);
    /* Linear: one call, one mapping, one MiB of each kind, taken apart. */
    uint64_t one[CARVE_DRIVER_SLOTS] = {0}, zero[CARVE_DRIVER_SLOTS] = {0};
    for (int k = 0; k < CARVE_DRV_KINDS; k++) {
        memset(one, 0, sizeof(one));
        one[k] = 1;
        CHECK(carve_driver_model_ns(one, zero, zero) == carve_driver_costs[k].per_call_ns);
        CHECK(carve_driver_model_ns(zero, one, zero) == carve_driver_costs[k].per_mapping_ns);
        one[k] = MiB;
        CHECK(carve_driver_model_ns(zero, zero, one) == carve_driver_costs[k].per_mib_ns);
        one[k] = (uint64_t)1 << 62; /* no overflow for any byte count a ledger can hold */
        CHECK(carve_driver_model_ns(zero, zero, one) == ((uint64_t)1 << 42) * carve_driver_costs[k].per_mib_ns);
    }
}

/* What one commit of `granules` granules as `mappings` mappings costs by
 * the table: a cuMemCreate, cuMemMap and cuMemRelease a mapping, one
 * cuMemSetAccess over them all. */
static uint64_t cost_of(size_t mappings, size_t granules) {
    const carve_driver_cost *c = carve_driver_costs;
    uint64_t mib = 2 * granules;
    return mappings * (c[CARVE_DRV_CREATE].per_call_ns + c[CARVE_DRV_MAP].per_call_ns +
                       c[CARVE_DRV_MAP].per_mapping_ns + c[CARVE_DRV_RELEASE].per_call_ns +
                       c[CARVE_DRV_ACCESS].per_mapping_ns) +
           c[CARVE_DRV_ACCESS].per_call_ns +
           mib * (c[CARVE_DRV_CREATE].per_mib_ns + c[CARVE_DRV_MAP].per_mib_ns + c[CARVE_DRV_RELEASE].per_mib_ns +
                  c[CARVE_DRV_ACCESS].per_mib_ns);
}

static uint64_t events_of(const carve_stats *s) {
    const carve_driver_cost *c = carve_driver_costs;
    return s->driver_calls[CARVE_DRV_EVENT_RECORD] * c[CARVE_DRV_EVENT_RECORD].per_call_ns +
           s->driver_calls[CARVE_DRV_EVENT_QUERY] * c[CARVE_DRV_EVENT_QUERY].per_call_ns;
}

/* One stream, room at the end of its region: what a request covers whole
 * comes in as mappings of at most the stream's touched peak (with the
 * request) / CARVE_VMM_MAP_DIV, two granules at least, and the rest of it
 * as one more; a granule it covers in part (which the next buffer shares)
 * as one of its own. */
static void test_map_sequence(void) {
    carve_arena *a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, 0, 0, "vmm=1");
    carve_stats s0 = stats(a);
    CHECK(s0.driver_calls[CARVE_DRV_RESERVE] == 1); /* the arena's address space */
    CHECK(s0.driver_calls[CARVE_DRV_CREATE] == 0 && s0.driver_model_ns == carve_driver_costs[CARVE_DRV_RESERVE].per_call_ns);
    void *p, *q;
    /* 3 granules, all whole, in pieces of two: one mapping of 2, then the
     * granule left (two commits, so two cuMemSetAccess) */
    CHECK_OK(a, carve_alloc(a, 6 * MiB, NULL, &p));
    carve_stats s = stats(a);
    CHECK(s.driver_calls[CARVE_DRV_CREATE] == 2 && s.driver_bytes[CARVE_DRV_CREATE] == 3 * G);
    CHECK(s.driver_calls[CARVE_DRV_MAP] == 2 && s.driver_mappings[CARVE_DRV_MAP] == 2);
    CHECK(s.driver_calls[CARVE_DRV_RELEASE] == 2); /* each handle let go once mapped */
    CHECK(s.driver_calls[CARVE_DRV_ACCESS] == 2 && s.driver_mappings[CARVE_DRV_ACCESS] == 2);
    CHECK(s.driver_bytes[CARVE_DRV_ACCESS] == 3 * G);
    CHECK(s.driver_calls[CARVE_DRV_UNMAP] == 0 && s.driver_calls[CARVE_DRV_RETAIN] == 0);
    CHECK(a->maps.n == 1 && a->maps.v[0].size == 2 * G);
    check_agrees(&s, 1);
    CHECK(s.driver_model_ns ==
          carve_driver_costs[CARVE_DRV_RESERVE].per_call_ns + cost_of(1, 2) + cost_of(1, 1) + events_of(&s));
    /* 5 MiB after it: granules 3 and 4 whole (one mapping), 5 in part (one
     * of its own), in one commit: one cuMemSetAccess over both. */
    CHECK_OK(a, carve_alloc(a, 5 * MiB, NULL, &q));
    CHECK((char *)q == (char *)p + 6 * MiB);
    s = stats(a);
    CHECK(s.driver_calls[CARVE_DRV_CREATE] == 4 && s.driver_bytes[CARVE_DRV_CREATE] == 6 * G);
    CHECK(s.driver_calls[CARVE_DRV_MAP] == 4 && s.driver_calls[CARVE_DRV_ACCESS] == 3);
    CHECK(s.driver_mappings[CARVE_DRV_ACCESS] == 4 && s.driver_calls[CARVE_DRV_RELEASE] == 4);
    CHECK(a->maps.n == 2 && a->maps.v[1].size == 2 * G);
    check_agrees(&s, 1);
    CHECK(s.driver_model_ns == carve_driver_costs[CARVE_DRV_RESERVE].per_call_ns + cost_of(1, 2) + cost_of(1, 1) +
                                   cost_of(2, 3) + events_of(&s));
    /* The same granule by granule, as the mode mapped before: 6 mappings,
     * over 1.5 times the driver time (the cost is per mapping). */
    CHECK(3 * (cost_of(1, 3) + cost_of(2, 3)) < 2 * (cost_of(3, 3) + cost_of(3, 3)));
    /* Freed and unmapped by carve_empty_cache: whole mappings, one
     * cuMemUnmap each (4), no handle kept. */
    CHECK_OK(a, carve_free(a, p));
    CHECK_OK(a, carve_free(a, q));
    CHECK_OK(a, carve_empty_cache(a));
    s = stats(a);
    CHECK(s.driver_calls[CARVE_DRV_UNMAP] == 4 && s.driver_mappings[CARVE_DRV_UNMAP] == 4);
    CHECK(s.driver_bytes[CARVE_DRV_UNMAP] == 6 * G);
    CHECK(s.driver_calls[CARVE_DRV_RETAIN] == 0 && s.driver_calls[CARVE_DRV_RELEASE] == 4);
    CHECK(s.driver_calls[CARVE_DRV_DEVICE_SYNC] == 1); /* empty_cache synchronizes */
    CHECK(s.reserved_bytes == 0 && a->maps.n == 0);
    check_agrees(&s, 1);
    carve_arena_destroy(a);
}

/* The size of a mapping follows the touched peak: 1030 MiB first (515
 * granules, all whole, the peak with it) comes in as pieces of 515 / 128 = 4
 * granules, 128 of them in one commit, and the 3 granules left as one
 * mapping in a second; freed, each goes whole. */
static void test_map_cap(void) {
    carve_arena *a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, 0, 0, "vmm=1");
    carve_stats s0 = stats(a);
    void *p;
    CHECK_OK(a, carve_alloc(a, 1030 * MiB, NULL, &p));
    carve_stats s = stats(a);
    CHECK(s.driver_calls[CARVE_DRV_CREATE] - s0.driver_calls[CARVE_DRV_CREATE] == 129);
    CHECK(s.driver_bytes[CARVE_DRV_CREATE] - s0.driver_bytes[CARVE_DRV_CREATE] == 515 * G);
    CHECK(s.driver_calls[CARVE_DRV_MAP] - s0.driver_calls[CARVE_DRV_MAP] == 129);
    CHECK(s.driver_calls[CARVE_DRV_ACCESS] - s0.driver_calls[CARVE_DRV_ACCESS] == 2);
    CHECK(s.driver_mappings[CARVE_DRV_ACCESS] - s0.driver_mappings[CARVE_DRV_ACCESS] == 129);
    CHECK(a->maps.n == 129 && a->maps.v[0].size == 4 * G && a->maps.v[127].size == 4 * G &&
          a->maps.v[128].size == 3 * G);
    CHECK(s.driver_model_ns - s0.driver_model_ns == cost_of(128, 512) + cost_of(1, 3) + events_of(&s) - events_of(&s0));
    check_agrees(&s, 1);
    CHECK_OK(a, carve_free(a, p));
    CHECK_OK(a, carve_empty_cache(a));
    s = stats(a);
    CHECK(s.driver_calls[CARVE_DRV_UNMAP] == 129 && s.driver_bytes[CARVE_DRV_UNMAP] == 515 * G);
    CHECK(s.reserved_bytes == 0 && a->maps.n == 0);
    check_agrees(&s, 1);
    carve_arena_destroy(a);
}

/* Several streams: every mapping one granule (memory moves between streams
 * in granules), one cuMemSetAccess over a run. */
static void test_map_granules(void) {
    carve_arena *a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, 0, 0, "vmm=1");
    void *x, *p;
    CHECK_OK(a, carve_alloc(a, 256, (carve_stream)(uintptr_t)0x100, &x)); /* a second stream */
    carve_stats s0 = stats(a);
    CHECK_OK(a, carve_alloc(a, 6 * MiB, NULL, &p));
    carve_stats s = stats(a);
    CHECK(s.driver_calls[CARVE_DRV_CREATE] - s0.driver_calls[CARVE_DRV_CREATE] == 3);
    CHECK(s.driver_calls[CARVE_DRV_MAP] - s0.driver_calls[CARVE_DRV_MAP] == 3);
    CHECK(s.driver_calls[CARVE_DRV_ACCESS] - s0.driver_calls[CARVE_DRV_ACCESS] == 1);
    CHECK(s.driver_mappings[CARVE_DRV_ACCESS] - s0.driver_mappings[CARVE_DRV_ACCESS] == 3);
    CHECK(a->maps.n == 0);
    check_agrees(&s, 1);
    CHECK_OK(a, carve_free(a, p));
    CHECK_OK(a, carve_free(a, x));
    CHECK_OK(a, carve_empty_cache(a));
    s = stats(a);
    CHECK(s.driver_mappings[CARVE_DRV_UNMAP] == s.driver_mappings[CARVE_DRV_MAP] && s.reserved_bytes == 0);
    check_agrees(&s, 1);
    carve_arena_destroy(a);
}

/* Remapping at the limit: the granules unmapped to make room are unmapped
 * inside a recycle window, so their handles come back (one
 * cuMemRetainAllocationHandle each) and back new granule mappings instead
 * of new cuMemCreate calls; a larger mapping needs a handle of its size. */
static void test_recycle(void) {
    carve_arena *a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, 0, 10 * MiB, "vmm=1");
    void *x, *y1, *y2, *z, *w;
    CHECK_OK(a, carve_alloc(a, 2 * MiB, NULL, &x));  /* granule 0 */
    CHECK_OK(a, carve_alloc(a, 2 * MiB, NULL, &y1)); /* granule 1 */
    CHECK_OK(a, carve_alloc(a, 2 * MiB, NULL, &y2)); /* granule 2 */
    CHECK_OK(a, carve_alloc(a, 256, NULL, &z));      /* granule 3 */
    CHECK_OK(a, carve_free(a, y1));
    CHECK_OK(a, carve_free(a, y2));
    carve_stats s0 = stats(a);
    CHECK(s0.driver_calls[CARVE_DRV_CREATE] == 4 && s0.driver_calls[CARVE_DRV_UNMAP] == 0);
    CHECK(a->maps.n == 0); /* each came in alone */
    /* 6 MiB fit only past z (granules 4-6): 7 granules would pass the limit
     * of 5, so the 2 free ones are unmapped to map these: granules 4-5,
     * which it covers whole, as one mapping (a new handle), and granule 6,
     * which it covers in part, on a kept handle. */
    CHECK_OK(a, carve_alloc(a, 6 * MiB, NULL, &w));
    carve_stats s = stats(a);
    check_agrees(&s, 1);
    CHECK(s.reserved_bytes == 10 * MiB);
    CHECK(s.driver_calls[CARVE_DRV_UNMAP] == 2 && s.driver_calls[CARVE_DRV_RETAIN] == 2);
    CHECK(s.driver_calls[CARVE_DRV_MAP] == 6 && s.driver_bytes[CARVE_DRV_MAP] == 7 * G);
    CHECK(s.driver_calls[CARVE_DRV_CREATE] == 5); /* 1 of the 2 new mappings on a kept handle */
    CHECK(a->maps.n == 1 && a->maps.v[0].size == 2 * G);
    /* Every handle created or taken back was let go exactly once, and no
     * window is open now. */
    CHECK(s.driver_calls[CARVE_DRV_RELEASE] == s.driver_calls[CARVE_DRV_CREATE] + s.driver_calls[CARVE_DRV_RETAIN]);
    CHECK_OK(a, carve_free(a, x));
    CHECK_OK(a, carve_free(a, z));
    CHECK_OK(a, carve_free(a, w));
    CHECK_OK(a, carve_empty_cache(a));
    s = stats(a);
    CHECK(s.reserved_bytes == 0 && a->maps.n == 0);
    check_agrees(&s, 1);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

static void test_segments(void) {
    carve_arena *a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, 0, 0, "vmm=0");
    void *p[4];
    for (int i = 0; i < 4; i++)
        CHECK_OK(a, carve_alloc(a, (size_t)(i + 1) * 24 * MiB, NULL, &p[i]));
    carve_stats s = stats(a);
    CHECK(s.driver_calls[CARVE_DRV_MALLOC] > 0);
    CHECK(s.driver_bytes[CARVE_DRV_MALLOC] >= (24 + 48 + 72 + 96) * MiB);
    check_agrees(&s, 0);
    for (int i = 0; i < 4; i++)
        CHECK_OK(a, carve_free(a, p[i]));
    CHECK_OK(a, carve_empty_cache(a));
    s = stats(a);
    CHECK(s.driver_calls[CARVE_DRV_FREE] == s.driver_calls[CARVE_DRV_MALLOC]);
    CHECK(s.driver_bytes[CARVE_DRV_FREE] == s.driver_bytes[CARVE_DRV_MALLOC]);
    check_agrees(&s, 0);
    carve_arena_destroy(a);
}

/* A seeded churn on three streams at a limit (remaps, trims of other
 * streams, cross-stream frees, waits): the ledger agrees with the engine
 * throughout, and the same run twice gives the same ledger. */
static uint64_t churn(uint64_t seed, carve_stats *out) {
    carve_arena *a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, 0, 192 * MiB, "vmm=1,sim_event_polls=2");
    enum { LIVE = 64 };
    void *buf[LIVE] = {0};
    carve_stream st[3] = {NULL, (carve_stream)(uintptr_t)0x100, (carve_stream)(uintptr_t)0x200};
    test_rng r;
    test_rng_seed(&r, seed);
    for (int i = 0; i < 6000; i++) {
        size_t k = (size_t)test_rng_below(&r, LIVE);
        if (buf[k]) {
            if (test_rng_below(&r, 8) == 0)
                CHECK_OK(a, carve_record_stream(a, buf[k], st[test_rng_below(&r, 3)]));
            CHECK_OK(a, carve_free(a, buf[k]));
            buf[k] = NULL;
        } else {
            size_t size = test_rng_loguniform(&r, 256, 12 * MiB);
            carve_status s = carve_alloc(a, size, st[k % 3], &buf[k]);
            CHECK(s == CARVE_OK || s == CARVE_ERR_OOM);
        }
        if (i % 1000 == 999) {
            carve_stats s = stats(a);
            check_agrees(&s, 1);
        }
    }
    for (int k = 0; k < LIVE; k++)
        if (buf[k])
            CHECK_OK(a, carve_free(a, buf[k]));
    CHECK_OK(a, carve_empty_cache(a));
    *out = stats(a);
    check_agrees(out, 1);
    CHECK(out->driver_calls[CARVE_DRV_RELEASE] ==
          out->driver_calls[CARVE_DRV_CREATE] + out->driver_calls[CARVE_DRV_RETAIN]);
    CHECK(out->driver_mappings[CARVE_DRV_UNMAP] == out->driver_mappings[CARVE_DRV_MAP]); /* all unmapped */
    CHECK_ARENA(a);
    carve_arena_destroy(a);
    return out->driver_model_ns;
}

static void test_churn(void) {
    uint64_t seed = test_seed(23);
    carve_stats s1, s2;
    uint64_t m1 = churn(seed, &s1), m2 = churn(seed, &s2);
    CHECK(m1 == m2);
    CHECK(!memcmp(s1.driver_calls, s2.driver_calls, sizeof(s1.driver_calls)));
    CHECK(s1.driver_calls[CARVE_DRV_UNMAP] > 0 && s1.driver_calls[CARVE_DRV_RETAIN] > 0); /* it remapped */
}

int main(void) {
    test_names_and_table();
    test_map_sequence();
    test_map_cap();
    test_map_granules();
    test_recycle();
    test_segments();
    test_churn();
    return test_finish();
}
