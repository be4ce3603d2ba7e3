/*
 * test_streams.c — stream order, with the simulated events of the virtual
 * backend (an event completes after sim_event_polls queries, or a sync).
 *
 *  - same stream: a freed buffer is reused at once;
 *  - another stream: a freed span is not handed over while its event is
 *    pending (the other stream grows instead), and is once it completes;
 *  - record_stream: a buffer used on a second stream is not reused, even by
 *    its own stream, until that stream's event completes;
 *  - under a limit, the out-of-memory path waits for pending events rather
 *    than failing.
 */
#include "engine/types.h"
#include "test_util.h"

#define S1 ((carve_stream)(uintptr_t)0x1000)
#define S2 ((carve_stream)(uintptr_t)0x2000)
#define S3 ((carve_stream)(uintptr_t)0x3000)
#define S4 ((carve_stream)(uintptr_t)0x4000)

static carve_arena *arena_polls(unsigned polls, size_t limit, int growth, size_t initial) {
    char conf[64];
    snprintf(conf, sizeof(conf), "sim_event_polls=%u", polls);
    return test_arena_conf(CARVE_BACKEND_VIRTUAL, growth, initial, limit, conf);
}

static void test_same_stream(void) {
    carve_arena *a = arena_polls(1000, 0, 1, 0);
    void *p, *q;
    CHECK_OK(a, carve_alloc(a, 4 << 20, S1, &p));
    CHECK_OK(a, carve_free(a, p));
    CHECK_OK(a, carve_alloc(a, 4 << 20, S1, &q));
    CHECK(p == q);
    CHECK_OK(a, carve_free(a, q));
    carve_arena_destroy(a);
}

static void test_cross_stream_waits_for_event(void) {
    /* One fixed 64 MiB block; S1 fills and frees it, then gives it back. */
    carve_arena *a = arena_polls(3, 0, 1, 0);
    void *p;
    CHECK_OK(a, carve_alloc(a, 30 << 20, S1, &p));
    uintptr_t s1_lo = (uintptr_t)p, s1_hi = s1_lo + (30 << 20);
    CHECK_OK(a, carve_free(a, p));
    CHECK_OK(a, carve_empty_cache(a)); /* syncs the events, releases everything */
    CHECK(carve_memory_reserved(a) == 0);

    /* Now without empty_cache: S1's empty span goes back to the heap with a
     * pending event when S1 needs room; S2 must not get it while pending. */
    carve_arena *b = arena_polls(1000000, 0, 1, 0);
    void *x, *y;
    CHECK_OK(b, carve_alloc(b, 30 << 20, S1, &x));
    s1_lo = (uintptr_t)x;
    s1_hi = s1_lo + (30 << 20);
    CHECK_OK(b, carve_free(b, x));
    CHECK_OK(b, carve_alloc(b, 200 << 20, S1, &y)); /* S1 returns its empty span, pending */
    CHECK_OK(b, carve_alloc(b, 30 << 20, S2, &x));
    CHECK((uintptr_t)x >= s1_hi || (uintptr_t)x + (30 << 20) <= s1_lo); /* not S1's memory */
    CHECK_OK(b, carve_free(b, x));
    CHECK_OK(b, carve_free(b, y));
    CHECK_ARENA(b);
    carve_arena_destroy(b);
    carve_arena_destroy(a);
}

static void test_cross_stream_reuse_after_event(void) {
    /* Limit 64 MiB: S2 can only get memory S1 gave back; the OOM path waits
     * for S1's event (a sync) and then hands it over. */
    carve_arena *a = arena_polls(1000000, 64 << 20, 1, 0);
    void *p, *q;
    CHECK_OK(a, carve_alloc(a, 60 << 20, S1, &p));
    CHECK_OK(a, carve_free(a, p));
    CHECK_OK(a, carve_alloc(a, 60 << 20, S2, &q));
    CHECK(carve_memory_reserved(a) <= (64 << 20));
    CHECK_OK(a, carve_free(a, q));
    CHECK_ARENA(a);
    carve_arena_destroy(a);

    /* With events that complete after a few polls, a later take by S2
     * succeeds without a sync once the polls are used up. */
    carve_arena *b = arena_polls(2, 0, 0, 64 << 20);
    CHECK_OK(b, carve_alloc(b, 40 << 20, S1, &p));
    CHECK_OK(b, carve_free(b, p));
    CHECK_OK(b, carve_alloc(b, 40 << 20, S2, &q)); /* growth off: reclaim + wait */
    CHECK_OK(b, carve_free(b, q));
    CHECK_ARENA(b);
    carve_arena_destroy(b);
}

static void test_record_stream(void) {
    carve_arena *a = arena_polls(3, 0, 1, 0);
    void *p, *q, *r;
    CHECK_OK(a, carve_alloc(a, 8192, S1, &p));
    CHECK_OK(a, carve_record_stream(a, p, S2));
    CHECK_OK(a, carve_record_stream(a, p, S2)); /* twice is fine */
    CHECK_OK(a, carve_record_stream(a, p, S1)); /* own stream: nothing to do */
    CHECK_OK(a, carve_free(a, p));
    CHECK_ST(a, carve_free(a, p), CARVE_ERR_BAD_POINTER); /* pending is not live */
    carve_stats s;
    CHECK_OK(a, carve_get_stats(a, &s));
    CHECK(s.num_live == 0 && s.allocated_bytes == 0);
    CHECK(s.num_event_records == 1 && s.num_event_queries == 0); /* S2's use, not asked about yet */
    CHECK_ARENA(a);
    /* Each alloc polls the pending event once; the memory comes back only
     * after the event reports done (3 polls). */
    int reused_at = -1;
    void *keep[8];
    for (int i = 0; i < 8; i++) {
        CHECK_OK(a, carve_alloc(a, 8192, S1, &keep[i]));
        if (keep[i] == p && reused_at < 0)
            reused_at = i;
    }
    CHECK(reused_at >= 3);
    CHECK_OK(a, carve_get_stats(a, &s));
    CHECK(s.num_event_queries >= 3 && s.num_event_records == 1);
    for (int i = 0; i < 8; i++)
        CHECK_OK(a, carve_free(a, keep[i]));
    /* empty_cache waits for pending events. */
    CHECK_OK(a, carve_alloc(a, 8192, S1, &q));
    CHECK_OK(a, carve_record_stream(a, q, S2));
    CHECK_OK(a, carve_free(a, q));
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0);
    CHECK_OK(a, carve_alloc(a, 100, S2, &r));
    CHECK_OK(a, carve_free(a, r));
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* Streams die. Once a program has destroyed a stream, carve must never
 * record an event on it: memory that stream cached moves to others only
 * through events recorded while it lived, or after a device sync. (A
 * stream named with carve_record_stream must live until the buffer is
 * freed: the free records its event.) */
static void test_dead_stream(void) {
    carve_arena *a = arena_polls(1000000, 96 << 20, 1, 0);
    void *p[4], *q;
    for (int i = 0; i < 4; i++)
        CHECK_OK(a, carve_alloc(a, 12 << 20, S2, &p[i]));
    CHECK_OK(a, carve_alloc(a, 1000, S2, &q));
    for (int i = 0; i < 4; i++)
        CHECK_OK(a, carve_free(a, p[i]));
    CHECK_OK(a, carve_free(a, q)); /* parked in S2's hot slot, not released */
    a->be.sim_dead[a->be.sim_ndead++] = S2; /* cudaStreamDestroy(S2) */
    /* S3 holds a buffer also used on S4; once S4's event completes, the
     * block is released during another stream's reclaim, emptying its span
     * there: no event may be recorded on S3 for it (it is gone too). */
    void *x;
    a->be.sim_event_polls = 0; /* S4's work is done at the first look */
    CHECK_OK(a, carve_alloc(a, 12 << 20, S3, &x));
    CHECK_OK(a, carve_record_stream(a, x, S4));
    CHECK_OK(a, carve_free(a, x));
    a->be.sim_dead[a->be.sim_ndead++] = S3;
    /* S4 was named for x: it may go once x is freed (the free recorded its
     * event), and nothing is recorded on it after. */
    a->be.sim_dead[a->be.sim_ndead++] = S4;
    /* S1 now needs memory: soft reclaim (before raising the peak), then the
     * out-of-memory path, then empty_cache, all without touching S2. */
    void *r[8];
    int n = 0;
    while (n < 8 && carve_alloc(a, 12 << 20, S1, &r[n]) == CARVE_OK)
        n++;
    CHECK(n >= 6);
    for (int i = 0; i < n; i++)
        CHECK_OK(a, carve_free(a, r[i]));
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0);
    CHECK(a->be.sim_dead_records == 0);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

int main(void) {
    test_dead_stream();
    test_same_stream();
    test_cross_stream_waits_for_event();
    test_cross_stream_reuse_after_event();
    test_record_stream();
    return test_finish();
}
