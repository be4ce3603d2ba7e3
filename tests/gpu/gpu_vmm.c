/*
 * gpu_vmm.c — virtual-memory mode (vmm=1) on a real GPU: buffers live in
 * granules mapped with cuMemCreate/cuMemMap and unmapped as carve trims.
 *
 *  - churn: random sizes on two streams, every buffer written with its own
 *    pattern and verified before its free and at the end, so a granule
 *    unmapped or remapped under a live buffer (or two buffers sharing one)
 *    shows up as a fault or a mismatch; reserved bytes (mapped) stay under the
 *    limit, and the driver agrees;
 *  - release: after carve_empty_cache with no live buffers nothing stays
 *    mapped and the driver's free memory is back at its baseline, and again
 *    after destroy with live buffers.
 */
#include "gpu_util.h"

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
    CHECK(bad == 0);
    CHECK(stt.reserved_bytes_peak <= limit);
    CHECK(stt.num_live == 0);
    CHECK_ARENA(a);
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0);
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

int main(void) {
    gpu_start("gpu_vmm", 1);
    GPU_CASE(case_churn);
    GPU_CASE(case_destroy_with_live);
    return gpu_finish();
}
