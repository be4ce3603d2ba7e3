/*
 * test_capture_reclaim.c — what carve gives back, and refuses, while a
 * stream capture is underway, on the host backend (segments) and the
 * virtual backend (virtual-memory mode and segments), with captures marked
 * by carve_sim_set_capturing (S3 stands for another thread's capture).
 *
 *  - limit: carve_set_limit lowered below what is reserved during the
 *    capture is refused with CARVE_ERR_BACKEND and the limit stays; after
 *    the capture the same call gives the cache back and the new limit
 *    holds (allocations stop at it). Before, the call answered CARVE_OK,
 *    gave nothing back, and ten 4 MiB buffers lived under an 8 MiB limit.
 *  - oom: S1 frees 12 MiB of a 16 MiB limit; during the capture S2 asks
 *    for 12 MiB. Only a device synchronization could prove S1's memory
 *    free here (its span's event is not recorded yet), so the answer is
 *    CARVE_ERR_OOM, and its message says that a capture prevented the
 *    synchronization (before, it blamed the limit alone); after the
 *    capture the same request succeeds.
 */
#include "engine/types.h"
#include "test_util.h"

#define S1 ((carve_stream)(uintptr_t)0x1000)
#define S2 ((carve_stream)(uintptr_t)0x2000)
#define S3 ((carve_stream)(uintptr_t)0x3000)
#define MiB ((size_t)1 << 20)

static void test_limit(carve_backend backend, const char *conf) {
    carve_arena *a = test_arena_conf(backend, 1, 0, 64 * MiB, conf);
    void *p[16];
    for (int i = 0; i < 8; i++)
        CHECK_OK(a, carve_alloc(a, 4 * MiB, S1, &p[i]));
    for (int i = 0; i < 8; i++)
        CHECK_OK(a, carve_free(a, p[i]));
    size_t held = carve_memory_reserved(a);
    CHECK(held > 8 * MiB);
    CHECK_OK(a, carve_sim_set_capturing(a, S3, 1));
    CHECK_ST(a, carve_set_limit(a, 8 * MiB), CARVE_ERR_BACKEND);
    CHECK(strstr(carve_last_error(a), "capture") != NULL);
    carve_stats s;
    CHECK_OK(a, carve_get_stats(a, &s));
    CHECK(s.limit_bytes == 64 * MiB);
    CHECK(carve_memory_reserved(a) == held);
    CHECK_OK(a, carve_set_limit(a, 128 * MiB)); /* raising needs nothing back */
    CHECK(a->be.sim_broken_captures == 0);
    CHECK_OK(a, carve_sim_set_capturing(a, S3, 0));
    CHECK_OK(a, carve_set_limit(a, 8 * MiB));
    CHECK(carve_memory_reserved(a) <= 8 * MiB);
    int n = 0;
    while (n < 16 && carve_alloc(a, 4 * MiB, S1, &p[n]) == CARVE_OK)
        n++;
    CHECK(n > 0 && (size_t)n * 4 * MiB <= 8 * MiB);
    CHECK_OK(a, carve_get_stats(a, &s));
    CHECK(s.reserved_bytes <= 8 * MiB);
    CHECK_ARENA(a);
    for (int i = 0; i < n; i++)
        CHECK_OK(a, carve_free(a, p[i]));
    carve_arena_destroy(a);
}

static void test_oom(carve_backend backend, const char *conf) {
    carve_arena *a = test_arena_conf(backend, 1, 0, 16 * MiB, conf);
    void *p, *q;
    CHECK_OK(a, carve_alloc(a, 12 * MiB, S1, &p));
    CHECK_OK(a, carve_free(a, p));
    CHECK_OK(a, carve_sim_set_capturing(a, S3, 1));
    CHECK_ST(a, carve_alloc(a, 12 * MiB, S2, &q), CARVE_ERR_OOM);
    CHECK(q == NULL);
    CHECK(strstr(carve_last_error(a), "a stream capture was underway, so the device was not synchronized") != NULL);
    CHECK(strstr(carve_last_error(a), "limit") != NULL); /* the numbers stay */
    CHECK(a->be.sim_broken_captures == 0);
    CHECK_OK(a, carve_sim_set_capturing(a, S3, 0));
    CHECK_OK(a, carve_alloc(a, 12 * MiB, S2, &q));
    CHECK_OK(a, carve_free(a, q));
    CHECK_ST(a, carve_alloc(a, 32 * MiB, S2, &q), CARVE_ERR_OOM); /* no capture: no word of one */
    CHECK(strstr(carve_last_error(a), "capture") == NULL);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

int main(void) {
    test_limit(CARVE_BACKEND_HOST, "");
    test_limit(CARVE_BACKEND_VIRTUAL, "");
    test_limit(CARVE_BACKEND_VIRTUAL, "vmm=0");
    test_oom(CARVE_BACKEND_HOST, "");
    test_oom(CARVE_BACKEND_VIRTUAL, "");
    test_oom(CARVE_BACKEND_VIRTUAL, "vmm=0");
    return test_finish();
}
