/*
 * test_stats.c — statistics: current and peak values, counters, reset,
 * cached and largest free block, and peaks merged across streams, in both
 * modes.
 */
#include "test_util.h"

static void test_single_stream(void) {
    carve_arena *a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, 0, 0, "vmm=0"); /* segments: counts as segments */
    carve_stats s;
    CHECK_ST(NULL, carve_get_stats(NULL, &s), CARVE_ERR_INVALID);
    CHECK_ST(a, carve_get_stats(a, NULL), CARVE_ERR_INVALID);
    CHECK_OK(a, carve_get_stats(a, &s));
    CHECK(s.allocated_bytes == 0 && s.reserved_bytes == 0 && s.num_allocs == 0 && s.limit_bytes == SIZE_MAX);

    void *p, *q;
    CHECK_OK(a, carve_alloc(a, 1000, NULL, &p));  /* rounds to 1024 */
    CHECK_OK(a, carve_alloc(a, 3 << 20, NULL, &q));
    CHECK_OK(a, carve_get_stats(a, &s));
    CHECK(s.requested_bytes == 1000 + (3 << 20));
    CHECK(s.allocated_bytes == 1024 + (3 << 20));
    CHECK(s.requested_bytes_peak == s.requested_bytes && s.allocated_bytes_peak == s.allocated_bytes);
    CHECK(s.num_allocs == 2 && s.num_frees == 0 && s.num_live == 2 && s.num_streams == 1);
    CHECK(s.reserved_bytes >= s.allocated_bytes && s.reserved_bytes_peak == s.reserved_bytes);
    CHECK(s.cached_bytes == s.reserved_bytes - s.allocated_bytes);
    CHECK(s.num_segments >= 1 && s.num_backend_allocs == s.num_segments && s.num_backend_frees == 0);
    CHECK(s.largest_free_block > 0 && s.largest_free_block <= s.cached_bytes);

    CHECK_OK(a, carve_free(a, q));
    CHECK_OK(a, carve_get_stats(a, &s));
    CHECK(s.allocated_bytes == 1024 && s.allocated_bytes_peak == 1024 + (3 << 20));
    CHECK(s.requested_bytes == 1000 && s.requested_bytes_peak == 1000 + (3 << 20));
    CHECK(s.num_frees == 1 && s.num_live == 1);

    carve_reset_peak_stats(a);
    CHECK_OK(a, carve_get_stats(a, &s));
    CHECK(s.allocated_bytes_peak == 1024 && s.requested_bytes_peak == 1000);
    CHECK(s.reserved_bytes_peak == s.reserved_bytes);

    CHECK_OK(a, carve_free(a, p));
    CHECK_OK(a, carve_empty_cache(a));
    CHECK_OK(a, carve_get_stats(a, &s));
    CHECK(s.reserved_bytes == 0 && s.num_segments == 0 && s.num_backend_frees == s.num_backend_allocs);
    CHECK(s.largest_free_block == 0 && s.cached_bytes == 0);
    CHECK(s.reserved_bytes_peak > 0);

    void *big;
    CHECK_ST(a, carve_alloc(a, SIZE_MAX, NULL, &big), CARVE_ERR_OOM);
    CHECK_OK(a, carve_get_stats(a, &s));
    CHECK(s.num_ooms == 1 && s.num_allocs == 2);
    carve_arena_destroy(a);
}

static void test_many_streams(void) {
    carve_arena *a = test_arena(CARVE_BACKEND_VIRTUAL, 1, 0, 0);
    enum { N = 6 };
    void *p[N][20];
    size_t total = 0;
    for (int s = 0; s < N; s++)
        for (int i = 0; i < 20; i++) {
            CHECK_OK(a, carve_alloc(a, 4 << 20, (carve_stream)(uintptr_t)(s * 4096), &p[s][i]));
            total += 4 << 20;
        }
    carve_stats st;
    CHECK_OK(a, carve_get_stats(a, &st));
    CHECK(st.allocated_bytes == total && st.num_streams == N && st.num_live == N * 20);
    /* With several streams the peak may read low by at most 16 MiB per stream. */
    CHECK(st.allocated_bytes_peak >= total - (size_t)N * (16 << 20) && st.allocated_bytes_peak >= st.allocated_bytes);
    CHECK(carve_memory_allocated(a) == total);
    for (int s = 0; s < N; s++)
        for (int i = 0; i < 20; i++)
            CHECK_OK(a, carve_free(a, p[s][i]));
    CHECK_OK(a, carve_get_stats(a, &st));
    CHECK(st.allocated_bytes == 0 && st.allocated_bytes_peak >= total - (size_t)N * (16 << 20));
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* Virtual-memory mode: reserved bytes are mapped granules, backend calls
 * count granule maps and unmaps, one segment of address space. */
static void test_vmm_counts(void) {
    carve_arena *a = test_arena(CARVE_BACKEND_VIRTUAL, 1, 0, 0); /* the default mode there */
    carve_stats s;
    void *p, *q;
    CHECK_OK(a, carve_alloc(a, 1000, NULL, &p));
    CHECK_OK(a, carve_alloc(a, 3 << 20, NULL, &q)); /* [1 KiB, 3 MiB + 1 KiB): two granules in all */
    CHECK_OK(a, carve_get_stats(a, &s));
    /* one reservation of address space, two granule maps */
    CHECK(s.reserved_bytes == (size_t)4 << 20 && s.num_segments == 1 && s.num_backend_allocs == 3);
    CHECK(s.cached_bytes == s.reserved_bytes - s.allocated_bytes);
    CHECK(s.largest_free_block > 0 && s.largest_free_block <= s.cached_bytes);
    CHECK_OK(a, carve_free(a, q));
    CHECK_OK(a, carve_free(a, p));
    CHECK_OK(a, carve_empty_cache(a));
    CHECK_OK(a, carve_get_stats(a, &s));
    /* two unmaps and the address space: as many as were made */
    CHECK(s.reserved_bytes == 0 && s.num_backend_frees == 3 && s.num_backend_frees == s.num_backend_allocs);
    CHECK(s.reserved_bytes_peak == (size_t)4 << 20);
    CHECK(s.largest_free_block == 0 && s.cached_bytes == 0);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* The peak reset with several streams: S2 allocates 20 MiB (a batch
 * merged) and frees 10 (not merged: under the batch); the reset left the
 * allocated peak at the merged 20 MiB, above the current 10 with no
 * allocation since. The reset merges every batch first: the peaks are the
 * current values, exactly. */
static void test_reset_many_streams(void) {
    carve_arena *a = test_arena(CARVE_BACKEND_VIRTUAL, 1, 0, 0);
    const carve_stream s1 = (carve_stream)(uintptr_t)0x1000, s2 = (carve_stream)(uintptr_t)0x2000;
    void *x, *y, *z;
    CHECK_OK(a, carve_alloc(a, 256, s1, &x)); /* a second stream exists: batches */
    CHECK_OK(a, carve_alloc(a, 20 << 20, s2, &y));
    CHECK_OK(a, carve_alloc(a, 10 << 20, s2, &z));
    CHECK_OK(a, carve_free(a, y));
    carve_reset_peak_stats(a);
    carve_stats s;
    CHECK_OK(a, carve_get_stats(a, &s));
    CHECK(s.allocated_bytes == (10 << 20) + 256);
    CHECK(s.allocated_bytes_peak == s.allocated_bytes);
    CHECK(s.requested_bytes_peak == s.requested_bytes);
    CHECK(s.reserved_bytes_peak == s.reserved_bytes);
    /* and from there, peaks follow the values again */
    CHECK_OK(a, carve_alloc(a, 4 << 20, s1, &y));
    CHECK_OK(a, carve_free(a, y));
    CHECK_OK(a, carve_get_stats(a, &s));
    CHECK(s.allocated_bytes_peak >= s.allocated_bytes);
    CHECK_OK(a, carve_free(a, x));
    CHECK_OK(a, carve_free(a, z));
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

int main(void) {
    test_reset_many_streams();
    test_single_stream();
    test_vmm_counts();
    test_many_streams();
    return test_finish();
}
