/*
 * test_room.c — a request succeeds whenever it can be met, whatever came
 * before it: an allocation never fails, nor grows the arena, while a free
 * block that fits exists (the regression sequence of an index search that
 * gave up while one did).
 */
#include "test_util.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define G (2 * MiB)

/* One 2 MiB segment, growth off: a 16640-byte buffer, then nine of 16384
 * bytes, each after a 256-byte spacer, the rest filled; the 16640 is freed
 * first, then the nine. All ten free blocks share a size class, and the
 * 16640 one is tenth in its list: a search that looked at the first eight
 * only answered CARVE_ERR_OOM, "largest free block 16.25 KiB". */
static void exact_fit_case(const char *conf) {
    carve_arena *a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 0, G, 0, conf);
    enum { NINE = 9, MAXFILL = 256 };
    void *first, *nine[NINE], *spacer[NINE], *fill[MAXFILL];
    CHECK_OK(a, carve_alloc(a, 16640, NULL, &first));
    for (int i = 0; i < NINE; i++) { /* each after a spacer, so no two merge */
        CHECK_OK(a, carve_alloc(a, 256, NULL, &spacer[i]));
        CHECK_OK(a, carve_alloc(a, 16384, NULL, &nine[i]));
    }
    int nfill = 0;
    size_t step = 64 * KiB;
    while (nfill < MAXFILL && step >= 256) { /* fill the rest, down to the last 256 bytes */
        if (carve_alloc(a, step, NULL, &fill[nfill]) == CARVE_OK)
            nfill++;
        else
            step /= 2;
    }
    void *x;
    CHECK_ST(a, carve_alloc(a, 256, NULL, &x), CARVE_ERR_OOM); /* full */
    CHECK_OK(a, carve_free(a, first));
    for (int i = 0; i < NINE; i++)
        CHECK_OK(a, carve_free(a, nine[i]));
    carve_stats s;
    carve_get_stats(a, &s);
    CHECK(s.reserved_bytes == G);
    void *again;
    CHECK_OK(a, carve_alloc(a, 16640, NULL, &again));
    CHECK(again == first);
    CHECK_ARENA(a);
    CHECK_OK(a, carve_free(a, again));
    for (int i = 0; i < NINE; i++)
        CHECK_OK(a, carve_free(a, spacer[i]));
    for (int i = 0; i < nfill; i++)
        CHECK_OK(a, carve_free(a, fill[i]));
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* With growth on, the same miss made the arena reserve (or map) more memory
 * instead: the first granule is filled exactly, and the free 16640-byte
 * block must be taken with nothing grown. */
static void exact_fit_growth(size_t initial, const char *conf) {
    carve_arena *a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, initial, 0, conf);
    enum { NINE = 9 };
    void *first, *nine[NINE], *spacer[NINE], *fill[2];
    CHECK_OK(a, carve_alloc(a, 16640, NULL, &first));
    for (int i = 0; i < NINE; i++) {
        CHECK_OK(a, carve_alloc(a, 256, NULL, &spacer[i]));
        CHECK_OK(a, carve_alloc(a, 16384, NULL, &nine[i]));
    }
    size_t rest = G - 16640 - NINE * (256 + 16384);
    CHECK_OK(a, carve_alloc(a, 1 * MiB, NULL, &fill[0])); /* small requests both (segments mode) */
    CHECK_OK(a, carve_alloc(a, rest - 1 * MiB, NULL, &fill[1]));
    CHECK(carve_memory_reserved(a) == G);
    CHECK_OK(a, carve_free(a, first));
    for (int i = 0; i < NINE; i++)
        CHECK_OK(a, carve_free(a, nine[i]));
    carve_stats s;
    carve_get_stats(a, &s);
    uint64_t reserves = s.num_backend_allocs;
    void *again;
    CHECK_OK(a, carve_alloc(a, 16640, NULL, &again));
    CHECK(again == first);
    carve_get_stats(a, &s);
    CHECK(s.num_backend_allocs == reserves && s.reserved_bytes == G);
    CHECK_ARENA(a);
    CHECK_OK(a, carve_free(a, again));
    for (int i = 0; i < NINE; i++)
        CHECK_OK(a, carve_free(a, spacer[i]));
    CHECK_OK(a, carve_free(a, fill[0]));
    CHECK_OK(a, carve_free(a, fill[1]));
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

static void test_exact_fit(void) {
    exact_fit_case("vmm=0");
    exact_fit_case("vmm=1");
    exact_fit_growth(G, "vmm=0");
    exact_fit_growth(0, "vmm=1");
}

int main(void) {
    test_exact_fit();
    return test_finish();
}
