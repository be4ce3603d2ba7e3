/*
 * test_oom_callback.c — the out-of-memory callback, as an inference engine
 * uses it, on the host backend (segments) and the virtual backend (virtual-
 * memory mode and segments): a KV cache of fixed-size blocks fills a
 * limited arena; when a new block does not fit, the callback evicts the
 * oldest blocks (carve_free from inside the callback) and asks for a retry,
 * which succeeds. Every allocation of the run succeeds, the retries counted
 * in carve_stats equal the callback's, and once the cache is dropped
 * nothing leaks (carve_check, live and allocated back to zero, the cache
 * emptied). Also: a callback that answers CARVE_OOM_FAIL, one that allocates
 * itself (no second call), removal, and carve_get_stats_sized's sizes (ABI
 * 1.0's layout through the exported carve_get_stats).
 */
#include "test_util.h"

#define S1 ((carve_stream)(uintptr_t)0x1000)
#define BLOCK ((size_t)3 << 20)
#define LIMIT ((size_t)64 << 20)
#define MAXB 64

typedef struct kv_cache {
    void *blocks[MAXB]; /* a FIFO: oldest at head */
    int head, n;
    unsigned calls, evictions, retries_asked;
    int bad_info;
} kv_cache;

static int evict(carve_arena *a, const carve_oom_info *info, void *user) {
    kv_cache *kv = user;
    kv->calls++;
    if (info->size != sizeof(carve_oom_info) || info->request_bytes != BLOCK || info->stream != S1 ||
        info->limit_bytes != LIMIT || info->num_live != (uint64_t)kv->n || info->align != CARVE_ALIGNMENT)
        kv->bad_info = 1;
    if (kv->n == 0)
        return CARVE_OOM_FAIL;
    for (int k = 0; k < 2 && kv->n > 0; k++) { /* two blocks: room whatever the placement */
        if (carve_free(a, kv->blocks[kv->head]) != CARVE_OK)
            kv->bad_info = 1;
        kv->head = (kv->head + 1) % MAXB;
        kv->n--;
        kv->evictions++;
    }
    kv->retries_asked++;
    return CARVE_OOM_RETRY;
}

static void test_kv_cache(carve_backend be, const char *conf) {
    carve_arena *a = test_arena_conf(be, 1, 0, LIMIT, conf);
    kv_cache kv = {0};
    CHECK_OK(a, carve_set_oom_callback(a, evict, &kv));
    int failed = 0;
    for (int step = 0; step < 200; step++) {
        void *p = NULL;
        carve_status st = carve_alloc(a, BLOCK, S1, &p);
        if (st != CARVE_OK) {
            failed++;
            continue;
        }
        kv.blocks[(kv.head + kv.n) % MAXB] = p;
        kv.n++;
        if (step % 20 == 0)
            CHECK_ARENA(a);
    }
    CHECK(failed == 0);
    CHECK(kv.calls > 0 && kv.bad_info == 0);
    carve_stats s;
    CHECK_OK(a, carve_get_stats_sized(a, &s, sizeof(s)));
    CHECK(s.num_alloc_retries == kv.retries_asked);
    CHECK(s.num_ooms == 0);
    CHECK(s.num_live == (uint64_t)kv.n);
    CHECK(s.reserved_bytes <= LIMIT);
    while (kv.n > 0) { /* drop the cache */
        CHECK_OK(a, carve_free(a, kv.blocks[kv.head]));
        kv.head = (kv.head + 1) % MAXB;
        kv.n--;
    }
    CHECK_ARENA(a);
    CHECK_OK(a, carve_get_stats_sized(a, &s, sizeof(s)));
    CHECK(s.num_live == 0 && s.allocated_bytes == 0 && s.requested_bytes == 0);
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

static unsigned g_calls;
static int refuse(carve_arena *a, const carve_oom_info *info, void *user) {
    (void)a, (void)info, (void)user;
    g_calls++;
    return CARVE_OOM_FAIL;
}

/* Allocates past the limit itself: that allocation fails without a second
 * call; then asks for a retry that cannot succeed either. */
static int greedy(carve_arena *a, const carve_oom_info *info, void *user) {
    void *p = (void *)1;
    g_calls++;
    *(carve_status *)user = carve_alloc(a, info->request_bytes, NULL, &p);
    return CARVE_OOM_RETRY;
}

static void test_answers(carve_backend be) {
    carve_arena *a = test_arena(be, 1, 0, LIMIT);
    void *p = (void *)1;
    carve_stats s;
    CHECK_OK(a, carve_set_oom_callback(a, refuse, NULL));
    g_calls = 0;
    CHECK_ST(a, carve_alloc(a, LIMIT + 1, S1, &p), CARVE_ERR_OOM); /* above the limit: asked too */
    CHECK(p == NULL && g_calls == 1);
    CHECK(strstr(carve_last_error(a), "out of memory") != NULL);
    CHECK_ST(a, carve_alloc_aligned(a, LIMIT + 1, 4096, S1, &p), CARVE_ERR_OOM);
    CHECK(g_calls == 2);
    CHECK_OK(a, carve_get_stats_sized(a, &s, sizeof(s)));
    CHECK(s.num_alloc_retries == 0 && s.num_ooms == 2);

    carve_status inner = CARVE_OK;
    CHECK_OK(a, carve_set_oom_callback(a, greedy, &inner));
    g_calls = 0;
    CHECK_ST(a, carve_alloc(a, LIMIT + 1, S1, &p), CARVE_ERR_OOM);
    CHECK(g_calls == 1 && inner == CARVE_ERR_OOM);
    CHECK_OK(a, carve_get_stats_sized(a, &s, sizeof(s)));
    CHECK(s.num_alloc_retries == 1);

    CHECK_OK(a, carve_set_oom_callback(a, NULL, NULL)); /* removed */
    g_calls = 0;
    CHECK_ST(a, carve_alloc(a, LIMIT + 1, S1, &p), CARVE_ERR_OOM);
    CHECK(g_calls == 0);
    CHECK_ST(NULL, carve_set_oom_callback(NULL, refuse, NULL), CARVE_ERR_INVALID);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* carve 1.0's exported function, as a program built against its header
 * calls it. (This file never calls carve.h's inline carve_get_stats, which
 * would be emitted here under the same name and taken instead.) */
extern carve_status carve_get_stats_as_1_0(const carve_arena *a, carve_stats_1_0 *out) __asm__("carve_get_stats");

static void test_stats_sizes(void) {
    carve_arena *a = test_arena(CARVE_BACKEND_VIRTUAL, 1, 0, 0);
    void *p;
    CHECK_OK(a, carve_alloc(a, 1000, S1, &p));
    unsigned char buf[sizeof(carve_stats) + 64];
    memset(buf, 0xAB, sizeof(buf));
    CHECK_OK(a, carve_get_stats_sized(a, (carve_stats *)(void *)buf, sizeof(carve_stats_1_0)));
    carve_stats_1_0 old;
    memcpy(&old, buf, sizeof(old));
    CHECK(old.num_live == 1 && old.requested_bytes == 1000);
    CHECK(buf[sizeof(carve_stats_1_0)] == 0xAB); /* nothing past the caller's size */
    CHECK_OK(a, carve_get_stats_sized(a, (carve_stats *)(void *)buf, sizeof(buf)));
    int zero = 1;
    for (size_t i = sizeof(carve_stats); i < sizeof(buf); i++)
        zero &= buf[i] == 0;
    CHECK(zero); /* past the library's structure: zeroed */
    memset(&old, 0xAB, sizeof(old));
    CHECK_OK(a, carve_get_stats_as_1_0(a, &old));
    CHECK(old.num_live == 1 && old.num_allocs == 1 && old.requested_bytes == 1000);
    memset(buf, 0xAB, sizeof(buf));
    CHECK_ST(a, carve_get_stats_sized(a, (carve_stats *)(void *)buf, sizeof(carve_stats_1_0) - 8),
             CARVE_ERR_INVALID);
    CHECK(buf[0] == 0xAB); /* nothing written for a size out of bounds */
    CHECK_ST(a, carve_get_stats_sized(a, (carve_stats *)(void *)buf, CARVE_STATS_SIZE_MAX + 1), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_get_stats_sized(NULL, (carve_stats *)(void *)buf, sizeof(carve_stats)), CARVE_ERR_INVALID);
    CHECK(buf[0] == 0 && buf[sizeof(carve_stats) - 1] == 0); /* zeroed */
    CHECK_OK(a, carve_free(a, p));
    carve_arena_destroy(a);
}

int main(void) {
    test_kv_cache(CARVE_BACKEND_HOST, "");
    test_kv_cache(CARVE_BACKEND_VIRTUAL, "");
    test_kv_cache(CARVE_BACKEND_VIRTUAL, "vmm=0");
    test_answers(CARVE_BACKEND_HOST);
    test_answers(CARVE_BACKEND_VIRTUAL);
    test_stats_sizes();
    return test_finish();
}
