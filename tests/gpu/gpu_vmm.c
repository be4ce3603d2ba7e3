/*
 * gpu_vmm.c — virtual-memory mode (vmm=1) on a real GPU: buffers live in
 * granules mapped with cuMemCreate/cuMemMap and unmapped as carve trims.
 *
 *  - churn: random sizes on two streams, every buffer written with its own
 *    pattern and verified before its free and at the end, so a granule
 *    unmapped or remapped under a live buffer (or two buffers sharing one)
 *    shows up as a fault or a mismatch; reserved bytes (mapped) stay under the
 *    limit, and the driver agrees; the driver ledger agrees with the
 *    engine's counters (every call counted where it is made);
 *  - release: after carve_empty_cache with no live buffers nothing stays
 *    mapped and the driver's free memory is back at its baseline, and again
 *    after destroy with live buffers;
 *  - pinned room: a stream's region pinned by small buffers at both ends
 *    around a freed large one; another stream's large request is met from a
 *    second address space reservation, with patterns verified;
 *  - one mapping: on one stream, untouched room mapped as one large mapping
 *    and a granule (engine/maps.h), kept whole while a buffer touches it,
 *    unmapped whole once free.
 */
#include "gpu_util.h"

#define G CARVE_SEGMENT_GRANULE

/* The driver ledger of a CUDA virtual-memory arena agrees with the engine's
 * own counters, as on the virtual backend (tests/test_ledger.c): every call
 * counted where it was made. */
static void check_ledger(const carve_stats *s) {
    const uint64_t *n = s->driver_calls;
    /* The engine counts granules; a mapping may hold several (engine/maps.h). */
    CHECK(s->driver_bytes[CARVE_DRV_MAP] / G + n[CARVE_DRV_RESERVE] == s->num_backend_allocs);
    CHECK(s->driver_mappings[CARVE_DRV_ACCESS] == n[CARVE_DRV_MAP]);
    CHECK(s->driver_bytes[CARVE_DRV_UNMAP] / G + n[CARVE_DRV_UNRESERVE] == s->num_backend_frees);
    CHECK(s->driver_bytes[CARVE_DRV_MAP] - s->driver_bytes[CARVE_DRV_UNMAP] == s->reserved_bytes);
    CHECK(n[CARVE_DRV_EVENT_RECORD] == s->num_event_records);
    CHECK(n[CARVE_DRV_EVENT_QUERY] == s->num_event_queries);
    CHECK(n[CARVE_DRV_EVENT_SYNC] + n[CARVE_DRV_DEVICE_SYNC] == s->num_syncs);
    CHECK(n[CARVE_DRV_RELEASE] == n[CARVE_DRV_CREATE] + n[CARVE_DRV_RETAIN]); /* no recycle window open */
    CHECK(n[CARVE_DRV_MAP] >= n[CARVE_DRV_CREATE] && n[CARVE_DRV_MALLOC] == 0);
    CHECK(s->driver_model_ns == carve_driver_model_ns(s->driver_calls, s->driver_mappings, s->driver_bytes));
}

static void case_churn(void) {
    gpu_mark m;
    gpu_mark_take(&m, 0);
    const size_t limit = 512 * MiB;
    carve_arena *a = gpu_arena_conf("vmm=1,limit=512MiB", "vmm-churn");
    cudaStream_t s[2] = {gpu_stream_new(), gpu_stream_new()};
    gpu_counter c = gpu_counter_of(0, 0);
    enum { LIVE = 48 };
    void *p[LIVE] = {0};
    size_t sz[LIVE] = {0};
    uint64_t id[LIVE] = {0};
    int st[LIVE] = {0};
    test_rng r;
    test_rng_seed(&r, test_seed(77));
    uint64_t next_id = 1;
    long steps = gpu_scale(3000, 300), ooms = 0;
    unsigned long long bad = 0;
    for (long step = 0; step < steps; step++) {
        int i = (int)(test_rng_next(&r) % LIVE);
        if (p[i]) {
            bad += gpu_mismatches(c, p[i], sz[i], id[i], s[st[i]]);
            CHECK_OK(a, carve_free(a, p[i]));
            p[i] = NULL;
        }
        sz[i] = (size_t)(test_rng_next(&r) % (24 * MiB)) + 1;
        st[i] = (int)(test_rng_next(&r) & 1);
        id[i] = next_id++;
        carve_status rc = carve_alloc(a, sz[i], (carve_stream)s[st[i]], &p[i]);
        if (rc == CARVE_ERR_OOM) {
            ooms++;
            p[i] = NULL;
            continue;
        }
        CHECK_OK(a, rc);
        gpu_fill(p[i], sz[i], id[i], s[st[i]]);
        CHECK(carve_memory_reserved(a) <= limit);
    }
    for (int i = 0; i < LIVE; i++)
        if (p[i]) {
            bad += gpu_mismatches(c, p[i], sz[i], id[i], s[st[i]]);
            CHECK_OK(a, carve_free(a, p[i]));
        }
    carve_stats stt = gpu_stats(a);
    printf("  %ld steps on 2 streams, %ld OOMs under the limit; peak mapped %.1f MiB, %llu map calls, "
           "%llu unmaps\n", steps, ooms, (double)stt.reserved_bytes_peak / MiB,
           (unsigned long long)stt.num_backend_allocs, (unsigned long long)stt.num_backend_frees);
    printf("  driver ledger: %llu cuMemCreate, %llu cuMemMap, %llu cuMemUnmap, %llu retained; modeled %.1f ms\n",
           (unsigned long long)stt.driver_calls[CARVE_DRV_CREATE], (unsigned long long)stt.driver_calls[CARVE_DRV_MAP],
           (unsigned long long)stt.driver_calls[CARVE_DRV_UNMAP], (unsigned long long)stt.driver_calls[CARVE_DRV_RETAIN],
           (double)stt.driver_model_ns / 1e6);
    check_ledger(&stt);
    CHECK(bad == 0);
    CHECK(stt.reserved_bytes_peak <= limit);
    CHECK(stt.num_live == 0);
    CHECK_ARENA(a);
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0);
    stt = gpu_stats(a);
    check_ledger(&stt);
    CHECK(stt.driver_mappings[CARVE_DRV_UNMAP] == stt.driver_mappings[CARVE_DRV_MAP]); /* nothing mapped */
    GPU_CHECK_BACK(&m, "vmm churn, after empty_cache");
    carve_arena_destroy(a);
    gpu_stream_free(s[0]);
    gpu_stream_free(s[1]);
    GPU_CHECK_BACK(&m, "vmm churn, after destroy");
}

static void case_destroy_with_live(void) {
    gpu_mark m;
    gpu_mark_take(&m, 0);
    carve_arena *a = gpu_arena_conf("vmm=1", "vmm-destroy");
    void *p[8];
    for (int i = 0; i < 8; i++) {
        CHECK_OK(a, carve_alloc(a, (size_t)(i + 1) * 3 * MiB, NULL, &p[i]));
        gpu_fill(p[i], (size_t)(i + 1) * 3 * MiB, (uint64_t)i + 1, NULL);
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK(carve_memory_reserved(a) >= 108 * MiB);
    carve_arena_destroy(a); /* live buffers included */
    GPU_CHECK_BACK(&m, "vmm destroy with live buffers");
}

/* Limit 64 MiB: 1 MiB buffers below and above a freed 60 MiB one pin the
 * region of stream 1; stream 2's 60 MiB request is met from address space
 * reserved beyond it (a second reservation), and stream 1's 1 MiB one beside
 * a small buffer, with every granule mapped. Every buffer written with its
 * own pattern and verified, mapped bytes at the limit, the driver's memory
 * back at its baseline. */
static void case_pinned_room(void) {
    gpu_mark m;
    gpu_mark_take(&m, 0);
    const size_t limit = 64 * MiB;
    carve_arena *a = gpu_arena_conf("vmm=1,limit=64MiB", "vmm-room");
    cudaStream_t s1 = gpu_stream_new(), s2 = gpu_stream_new();
    gpu_counter c = gpu_counter_of(0, 0);
    unsigned long long bad = 0;
    void *lo, *big, *hi, *other, *more;
    CHECK_OK(a, carve_alloc(a, 1 * MiB, (carve_stream)s1, &lo));
    CHECK_OK(a, carve_alloc(a, 60 * MiB, (carve_stream)s1, &big));
    CHECK_OK(a, carve_alloc(a, 1 * MiB, (carve_stream)s1, &hi));
    gpu_fill(lo, 1 * MiB, 1, s1);
    gpu_fill(big, 60 * MiB, 2, s1);
    gpu_fill(hi, 1 * MiB, 3, s1);
    CHECK_OK(a, carve_free(a, big));
    CHECK_OK(a, carve_alloc(a, 60 * MiB, (carve_stream)s2, &other));
    CHECK_OK(a, carve_alloc(a, 1 * MiB, (carve_stream)s1, &more));
    gpu_fill(other, 60 * MiB, 4, s2);
    gpu_fill(more, 1 * MiB, 5, s1);
    carve_stats st = gpu_stats(a);
    printf("  %zu address space reservations, %.1f MiB mapped\n", st.num_segments, (double)st.reserved_bytes / MiB);
    CHECK(st.reserved_bytes == limit && st.num_segments == 2);
    bad += gpu_mismatches(c, other, 60 * MiB, 4, s2);
    bad += gpu_mismatches(c, lo, 1 * MiB, 1, s1);
    bad += gpu_mismatches(c, hi, 1 * MiB, 3, s1);
    bad += gpu_mismatches(c, more, 1 * MiB, 5, s1);
    CHECK(bad == 0);
    CHECK_ARENA(a);
    CHECK_OK(a, carve_free(a, other));
    CHECK_OK(a, carve_free(a, more));
    CHECK_OK(a, carve_free(a, lo));
    CHECK_OK(a, carve_free(a, hi));
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0 && gpu_stats(a).num_segments == 0);
    GPU_CHECK_BACK(&m, "vmm pinned room, after empty_cache");
    carve_arena_destroy(a);
    gpu_stream_free(s1);
    gpu_stream_free(s2);
    GPU_CHECK_BACK(&m, "vmm pinned room, after destroy");
}

/* One stream: untouched room comes in as mappings larger than a granule
 * (of at most the touched peak / 128, two granules at least) for what a
 * request covers whole and one for a last granule it covers in part, in
 * one commit (one cuMemSetAccess); a buffer across them and a small one
 * inside a larger mapping hold their patterns; the large mapping, touched by a live
 * buffer, stays mapped whole through carve_empty_cache, and goes whole once
 * free; the driver's memory is back at its baseline. */
static void case_one_mapping(void) {
    gpu_mark m;
    gpu_mark_take(&m, 0);
    carve_arena *a = gpu_arena_conf("vmm=1", "vmm-one-mapping");
    gpu_counter c = gpu_counter_of(0, 0);
    unsigned long long bad = 0;
    void *big, *tail, *inside;
    carve_stats s0 = gpu_stats(a);
    /* 32 granules whole, 1 in part: a fresh stream's touched peak (33
     * granules) / 128 is under two granules, so 16 mappings of two and the
     * granule, in one commit */
    CHECK_OK(a, carve_alloc(a, 64 * MiB + 1 * MiB, NULL, &big));
    carve_stats s1 = gpu_stats(a);
    CHECK(s1.driver_calls[CARVE_DRV_MAP] - s0.driver_calls[CARVE_DRV_MAP] == 17);
    CHECK(s1.driver_calls[CARVE_DRV_ACCESS] - s0.driver_calls[CARVE_DRV_ACCESS] == 1);
    CHECK(s1.driver_bytes[CARVE_DRV_MAP] - s0.driver_bytes[CARVE_DRV_MAP] == 66 * MiB);
    CHECK_OK(a, carve_alloc(a, 4 * MiB, NULL, &tail)); /* shares the granule in part, and two more */
    gpu_fill(big, 65 * MiB, 1, NULL);
    gpu_fill(tail, 4 * MiB, 2, NULL);
    CHECK_OK(a, carve_free(a, big));
    CHECK_OK(a, carve_alloc(a, 1 * MiB, NULL, &inside)); /* lowest address: inside the large mapping */
    CHECK(inside == big); /* in the first 4 MiB mapping */
    gpu_fill(inside, 1 * MiB, 3, NULL);
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) >= 4 * MiB); /* the mapping inside touches stays whole */
    bad += gpu_mismatches(c, tail, 4 * MiB, 2, NULL);
    bad += gpu_mismatches(c, inside, 1 * MiB, 3, NULL);
    CHECK(bad == 0);
    check_ledger(&s1);
    carve_stats s2 = gpu_stats(a);
    check_ledger(&s2);
    CHECK_ARENA(a);
    CHECK_OK(a, carve_free(a, inside));
    CHECK_OK(a, carve_free(a, tail));
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0);
    s2 = gpu_stats(a);
    check_ledger(&s2);
    CHECK(s2.driver_mappings[CARVE_DRV_UNMAP] == s2.driver_mappings[CARVE_DRV_MAP]);
    GPU_CHECK_BACK(&m, "vmm one mapping, after empty_cache");
    carve_arena_destroy(a);
    GPU_CHECK_BACK(&m, "vmm one mapping, after destroy");
}

int main(void) {
    gpu_start("gpu_vmm", 1);
    GPU_CASE(case_churn);
    GPU_CASE(case_destroy_with_live);
    GPU_CASE(case_pinned_room);
    GPU_CASE(case_one_mapping);
    return gpu_finish();
}
