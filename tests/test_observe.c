/*
 * test_observe.c — what a program can read about its buffers, on the host
 * and virtual backends: a tag per buffer (set, read back, in the snapshot,
 * and gone once the buffer is freed, also when the same block is handed
 * out again at once), per-stream counters that add up to the arena's, and
 * the retry count in the snapshot.
 */
#include "test_util.h"

#define S1 ((carve_stream)(uintptr_t)0x1000)
#define S2 ((carve_stream)(uintptr_t)0x2000)
#define S3 ((carve_stream)(uintptr_t)0x3000)

static int snapshot_has(carve_arena *a, const char *needle) {
    char *json = NULL;
    CHECK_OK(a, carve_snapshot_json(a, &json));
    int has = json && strstr(json, needle) != NULL;
    carve_snapshot_free(json);
    return has;
}

static void test_tags(carve_backend be) {
    carve_arena *a = test_arena(be, 1, 0, 0);
    void *p, *q, *r;
    uint64_t tag = 1;
    CHECK_OK(a, carve_alloc(a, 5000, S1, &p));
    CHECK_OK(a, carve_alloc(a, 7000, S1, &r));
    CHECK_OK(a, carve_get_tag(a, p, &tag));
    CHECK(tag == 0);
    CHECK_OK(a, carve_set_tag(a, p, 0xDEADBEEFCAFEF00Dull));
    CHECK_OK(a, carve_set_tag(a, r, 42));
    CHECK_OK(a, carve_get_tag(a, p, &tag));
    CHECK(tag == 0xDEADBEEFCAFEF00Dull);
    CHECK(snapshot_has(a, "\"tag\":\"0xdeadbeefcafef00d\""));
    CHECK(snapshot_has(a, "\"tag\":\"0x2a\""));
    CHECK_OK(a, carve_set_tag(a, r, 0)); /* removed */
    CHECK(!snapshot_has(a, "\"tag\":\"0x2a\""));
    /* Freed: the tag goes, even though the same block comes straight back. */
    CHECK_OK(a, carve_free(a, p));
    CHECK_ST(a, carve_get_tag(a, p, &tag), CARVE_ERR_BAD_POINTER);
    CHECK(tag == 0);
    CHECK_ST(a, carve_set_tag(a, p, 7), CARVE_ERR_BAD_POINTER);
    CHECK_OK(a, carve_alloc(a, 5000, S1, &q));
    CHECK(q == p);
    CHECK_OK(a, carve_get_tag(a, q, &tag));
    CHECK(tag == 0);
    CHECK(!snapshot_has(a, "\"tag\""));
    /* A tagged buffer declared on another stream: freed pending, tag gone. */
    CHECK_OK(a, carve_set_tag(a, q, 9));
    CHECK_OK(a, carve_record_stream(a, q, S2));
    CHECK_OK(a, carve_free(a, q));
    CHECK(!snapshot_has(a, "\"tag\""));
    CHECK_ST(a, carve_get_tag(a, q, NULL), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_set_tag(NULL, r, 1), CARVE_ERR_INVALID);
    CHECK_OK(a, carve_free(a, r));
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

static void test_stream_counters(carve_backend be) {
    carve_arena *a = test_arena(be, 1, 0, 0);
    void *p[4], *t;
    CHECK_OK(a, carve_alloc(a, 1000, S1, &p[0]));
    CHECK_OK(a, carve_alloc(a, 3000, S1, &p[1]));
    CHECK_OK(a, carve_alloc(a, 5 << 20, S1, &p[2]));
    CHECK_OK(a, carve_alloc(a, 200, S2, &p[3]));
    CHECK_OK(a, carve_alloc(a, 100, CARVE_STREAM_PER_THREAD, &t));
    CHECK_OK(a, carve_free(a, p[1]));
    carve_stream_stats s1, s2, s3, pt;
    CHECK_OK(a, carve_get_stream_stats(a, S1, &s1));
    CHECK(s1.size == sizeof(s1) && s1.stream == S1);
    CHECK(s1.num_allocs == 3 && s1.num_frees == 1 && s1.num_live == 2);
    CHECK(s1.requested_bytes == 1000 + (5 << 20) && s1.requested_bytes_peak == 1000 + 3000 + (5 << 20));
    CHECK(s1.allocated_bytes == 1024 + (5 << 20));
    CHECK_OK(a, carve_get_stream_stats(a, S2, &s2));
    CHECK(s2.num_allocs == 1 && s2.num_live == 1 && s2.requested_bytes == 200 && s2.allocated_bytes == 256);
    CHECK_OK(a, carve_get_stream_stats(a, S3, &s3)); /* never seen */
    CHECK(s3.stream == S3 && s3.num_allocs == 0 && s3.allocated_bytes == 0);
    CHECK_OK(a, carve_get_stream_stats(a, CARVE_STREAM_PER_THREAD, &pt));
    CHECK(pt.num_allocs == 1 && pt.requested_bytes == 100);
    carve_stats all;
    CHECK_OK(a, carve_get_stats(a, &all));
    CHECK(all.allocated_bytes == s1.allocated_bytes + s2.allocated_bytes + pt.allocated_bytes);
    CHECK(all.num_allocs == s1.num_allocs + s2.num_allocs + pt.num_allocs);
    /* Sizes: a smaller structure gets its bytes; bad ones are refused. */
    unsigned char buf[sizeof(carve_stream_stats) + 8];
    memset(buf, 0xAB, sizeof(buf));
    CHECK_OK(a, carve_get_stream_stats_sized(a, S1, (carve_stream_stats *)(void *)buf, 2 * sizeof(size_t)));
    CHECK(buf[2 * sizeof(size_t)] == 0xAB);
    CHECK_ST(a, carve_get_stream_stats_sized(a, S1, (carve_stream_stats *)(void *)buf, 2), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_get_stream_stats(NULL, S1, &s1), CARVE_ERR_INVALID);
    CHECK(s1.num_allocs == 0);
    CHECK(snapshot_has(a, "\"num_alloc_retries\":0"));
    CHECK_OK(a, carve_free(a, p[0]));
    CHECK_OK(a, carve_free(a, p[2]));
    CHECK_OK(a, carve_free(a, p[3]));
    CHECK_OK(a, carve_free(a, t));
    CHECK_OK(a, carve_get_stream_stats(a, S1, &s1));
    CHECK(s1.num_live == 0 && s1.allocated_bytes == 0 && s1.num_frees == 3);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

int main(void) {
    carve_backend bes[] = {CARVE_BACKEND_HOST, CARVE_BACKEND_VIRTUAL};
    for (int i = 0; i < 2; i++) {
        test_tags(bes[i]);
        test_stream_counters(bes[i]);
    }
    return test_finish();
}
