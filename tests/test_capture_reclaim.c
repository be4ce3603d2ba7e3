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
 */
#include "engine/types.h"
#include "test_util.h"

#define S1 ((carve_stream)(uintptr_t)0x1000)
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

int main(void) {
    test_limit(CARVE_BACKEND_HOST, "");
    test_limit(CARVE_BACKEND_VIRTUAL, "");
    test_limit(CARVE_BACKEND_VIRTUAL, "vmm=0");
    return test_finish();
}
