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
        CHECK(s->driver_calls[CARVE_DRV_MAP] + reserves == s->num_backend_allocs);
        CHECK(s->driver_mappings[CARVE_DRV_MAP] == s->driver_calls[CARVE_DRV_MAP]);
        CHECK(s->driver_mappings[CARVE_DRV_ACCESS] == s->driver_calls[CARVE_DRV_MAP]);
        CHECK(s->driver_bytes[CARVE_DRV_MAP] == s->driver_calls[CARVE_DRV_MAP] * G);
        CHECK(s->driver_mappings[CARVE_DRV_UNMAP] + s->driver_calls[CARVE_DRV_UNRESERVE] == s->num_backend_frees);
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

static void test_map_sequence(void) {
    carve_arena *a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, 0, 0, "vmm=1");
    carve_stats s0 = stats(a);
    CHECK(s0.driver_calls[CARVE_DRV_RESERVE] == 1); /* the arena's address space */
    CHECK(s0.driver_calls[CARVE_DRV_CREATE] == 0 && s0.driver_model_ns == carve_driver_costs[CARVE_DRV_RESERVE].per_call_ns);
    void *p;
    CHECK_OK(a, carve_alloc(a, 5 * MiB, NULL, &p)); /* 3 granules, one run */
    carve_stats s = stats(a);
    CHECK(s.driver_calls[CARVE_DRV_CREATE] == 3 && s.driver_bytes[CARVE_DRV_CREATE] == 3 * G);
    CHECK(s.driver_calls[CARVE_DRV_MAP] == 3 && s.driver_mappings[CARVE_DRV_MAP] == 3);
    CHECK(s.driver_calls[CARVE_DRV_RELEASE] == 3); /* each handle let go once mapped */
    CHECK(s.driver_calls[CARVE_DRV_ACCESS] == 1 && s.driver_mappings[CARVE_DRV_ACCESS] == 3);
    CHECK(s.driver_bytes[CARVE_DRV_ACCESS] == 3 * G);
    CHECK(s.driver_calls[CARVE_DRV_UNMAP] == 0 && s.driver_calls[CARVE_DRV_RETAIN] == 0);
    check_agrees(&s, 1);
    /* The table's cost of mapping 3 granules in one run, by hand. */
    const carve_driver_cost *c = carve_driver_costs;
    uint64_t want = c[CARVE_DRV_RESERVE].per_call_ns +
                    3 * (c[CARVE_DRV_CREATE].per_call_ns + 2 * c[CARVE_DRV_CREATE].per_mib_ns) +
                    3 * (c[CARVE_DRV_MAP].per_call_ns + c[CARVE_DRV_MAP].per_mapping_ns + 2 * c[CARVE_DRV_MAP].per_mib_ns) +
                    3 * (c[CARVE_DRV_RELEASE].per_call_ns + 2 * c[CARVE_DRV_RELEASE].per_mib_ns) +
                    c[CARVE_DRV_ACCESS].per_call_ns + 3 * c[CARVE_DRV_ACCESS].per_mapping_ns +
                    6 * c[CARVE_DRV_ACCESS].per_mib_ns;
    uint64_t events = s.driver_calls[CARVE_DRV_EVENT_RECORD] * c[CARVE_DRV_EVENT_RECORD].per_call_ns +
                      s.driver_calls[CARVE_DRV_EVENT_QUERY] * c[CARVE_DRV_EVENT_QUERY].per_call_ns;
    CHECK(s.driver_model_ns == want + events);
    /* Freed and unmapped by carve_empty_cache: no recycle window, one
     * cuMemUnmap per granule (3 mappings), no handle kept. */
    CHECK_OK(a, carve_free(a, p));
    CHECK_OK(a, carve_empty_cache(a));
    s = stats(a);
    CHECK(s.driver_calls[CARVE_DRV_UNMAP] == 3 && s.driver_mappings[CARVE_DRV_UNMAP] == 3);
    CHECK(s.driver_bytes[CARVE_DRV_UNMAP] == 3 * G);
    CHECK(s.driver_calls[CARVE_DRV_RETAIN] == 0 && s.driver_calls[CARVE_DRV_RELEASE] == 3);
    CHECK(s.driver_calls[CARVE_DRV_DEVICE_SYNC] == 1); /* empty_cache synchronizes */
    check_agrees(&s, 1);
    carve_arena_destroy(a);
}

/* Remapping at the limit: the granules unmapped to make room are unmapped
 * inside a recycle window, so their handles come back (one
 * cuMemRetainAllocationHandle each) and back the new mappings instead of new
 * cuMemCreate calls. */
static void test_recycle(void) {
    carve_arena *a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, 0, 10 * MiB, "vmm=1");
    void *x, *y, *z, *w;
    CHECK_OK(a, carve_alloc(a, 2 * MiB, NULL, &x)); /* granule 0 */
    CHECK_OK(a, carve_alloc(a, 4 * MiB, NULL, &y)); /* granules 1-2 */
    CHECK_OK(a, carve_alloc(a, 256, NULL, &z));     /* granule 3 */
    CHECK_OK(a, carve_free(a, y));
    carve_stats s0 = stats(a);
    CHECK(s0.driver_calls[CARVE_DRV_CREATE] == 4 && s0.driver_calls[CARVE_DRV_UNMAP] == 0);
    /* 6 MiB fit only past z (granules 4-6): 7 granules would pass the limit
     * of 5, so the 2 free ones are unmapped to map these. */
    CHECK_OK(a, carve_alloc(a, 6 * MiB, NULL, &w));
    carve_stats s = stats(a);
    check_agrees(&s, 1);
    CHECK(s.reserved_bytes == 10 * MiB);
    CHECK(s.driver_calls[CARVE_DRV_UNMAP] == 2 && s.driver_calls[CARVE_DRV_RETAIN] == 2);
    CHECK(s.driver_calls[CARVE_DRV_MAP] == 7);
    CHECK(s.driver_calls[CARVE_DRV_CREATE] == 5); /* 2 of the 3 new mappings on kept handles */
    /* Every handle created or taken back was let go exactly once, and no
     * window is open now. */
    CHECK(s.driver_calls[CARVE_DRV_RELEASE] == s.driver_calls[CARVE_DRV_CREATE] + s.driver_calls[CARVE_DRV_RETAIN]);
    CHECK_OK(a, carve_free(a, x));
    CHECK_OK(a, carve_free(a, z));
    CHECK_OK(a, carve_free(a, w));
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
    test_recycle();
    test_segments();
    test_churn();
    return test_finish();
}
