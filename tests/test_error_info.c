/*
 * test_error_info.c — carve_last_error_info: the numbers beside
 * carve_last_error's text. Out of memory is told apart: the limit, or the
 * device (a reserve the backend refused, injected on the virtual backend),
 * say host_memory 0; carve's own records running out (a pool's slab
 * starved, as test_error_paths does) say 1. The driver's error code: a
 * stand-in CUDA driver given to the cuda_driver backend through
 * carve_cuda_driver_lookup (no GPU needed) answers cuMemAlloc with
 * CUDA_ERROR_OUT_OF_MEMORY (2) and cuEventRecord with
 * CUDA_ERROR_ILLEGAL_ADDRESS (700): carve_alloc's OOM and carve_free's
 * BACKEND carry those codes. Sizes out of bounds are refused; an arena
 * with no failure reads CARVE_OK and zeros.
 */
#include "backend/faults.h"
#include "engine/types.h"
#include "test_util.h"

#define S1 ((carve_stream)(uintptr_t)0x1000)
#define MiB ((size_t)1 << 20)

static carve_error_info info_of(const carve_arena *a) {
    carve_error_info e;
    memset(&e, 0xAB, sizeof(e));
    CHECK_OK(a, carve_last_error_info(a, &e));
    CHECK(e.size == sizeof(e));
    return e;
}

static void test_oom_kinds(void) {
    carve_arena *a = test_arena(CARVE_BACKEND_VIRTUAL, 1, 0, 64 * MiB);
    void *p;
    carve_error_info e = info_of(a);
    CHECK(e.status == CARVE_OK && e.driver_api == 0 && e.driver_error == 0 && e.host_memory == 0);
    /* The limit. */
    CHECK_ST(a, carve_alloc(a, 65 * MiB, S1, &p), CARVE_ERR_OOM);
    e = info_of(a);
    CHECK(e.status == CARVE_ERR_OOM && e.host_memory == 0 && e.driver_api == 0);
    /* The device: every reserve and map refused as out of memory. */
    carve_backend_faults_on(&a->be, a->be.faults.calls + 1, 100, 0, CARVE_FAULT_ALLOC, CARVE_ERR_OOM);
    CHECK_ST(a, carve_alloc(a, 8 * MiB, S1, &p), CARVE_ERR_OOM);
    e = info_of(a);
    CHECK(e.status == CARVE_ERR_OOM && e.host_memory == 0 && e.driver_api == 0);
    carve_backend_faults_off(&a->be);
    /* Host memory: the pool's records cannot grow and none is spare. */
    CHECK_OK(a, carve_alloc(a, 4096, S1, &p));
    carve_pool *pool = a->pools;
    carve_block *held = NULL;
    pool->slab.fail_grows = SIZE_MAX;
    while (pool->slab.nfree > 0) {
        carve_block *b = carve_slab_get(&pool->slab);
        b->fnext = held;
        held = b;
        pool->slab.held++;
    }
    void *q;
    CHECK_ST(a, carve_alloc(a, 8192, S1, &q), CARVE_ERR_OOM);
    e = info_of(a);
    CHECK(e.status == CARVE_ERR_OOM && e.host_memory == 1 && e.driver_api == 0);
    CHECK(strstr(carve_last_error(a), "host memory") != NULL);
    pool->slab.fail_grows = 0;
    while (held) {
        carve_block *b = held;
        held = b->fnext;
        carve_slab_put(&pool->slab, b);
        pool->slab.held--;
    }
    CHECK_OK(a, carve_free(a, p));
    /* Another failure kind clears the numbers of the last one. */
    CHECK_ST(a, carve_free(a, (void *)0x100), CARVE_ERR_BAD_POINTER);
    e = info_of(a);
    CHECK(e.status == CARVE_ERR_BAD_POINTER && e.host_memory == 0);
    /* Sizes: a smaller structure gets its first bytes; bad ones nothing. */
    unsigned char buf[sizeof(carve_error_info) + 16];
    memset(buf, 0xAB, sizeof(buf));
    CHECK_OK(a, carve_last_error_info_sized(a, (carve_error_info *)(void *)buf, sizeof(size_t) + sizeof(int)));
    CHECK(buf[sizeof(size_t) + sizeof(int)] == 0xAB);
    CHECK_ST(a, carve_last_error_info_sized(a, (carve_error_info *)(void *)buf, 4), CARVE_ERR_INVALID);
    CHECK_ST(a, carve_last_error_info_sized(a, NULL, sizeof(carve_error_info)), CARVE_ERR_INVALID);
    CHECK_ST(a, carve_last_error_info_sized(a, (carve_error_info *)(void *)buf, CARVE_ERROR_INFO_SIZE_MAX + 1),
             CARVE_ERR_INVALID);
    /* Another arena has no failure of its own. */
    carve_arena *b = test_arena(CARVE_BACKEND_HOST, 1, 0, 0);
    e = info_of(b);
    CHECK(e.status == CARVE_OK && e.host_memory == 0);
    CHECK_ARENA(a);
    carve_arena_destroy(b);
    carve_arena_destroy(a);
}

/* ---- a stand-in CUDA driver (the types as the driver ABI has them) ---- */

typedef int CUres;
static int fake_ctx, fake_ev;
static CUres f_ok(void) { return 0; }
static CUres f_init(unsigned flags) { (void)flags; return 0; }
static CUres f_count(int *n) { *n = 1; return 0; }
static CUres f_get(int *dev, int ordinal) { *dev = ordinal; return 0; }
static CUres f_total(size_t *bytes, int dev) { (void)dev; *bytes = (size_t)80 << 30; return 0; }
static CUres f_retain(void **ctx, int dev) { (void)dev; *ctx = &fake_ctx; return 0; }
static CUres f_release(int dev) { (void)dev; return 0; }
static CUres f_cur(void **ctx) { *ctx = &fake_ctx; return 0; }
static CUres f_ctxdev(int *dev) { *dev = 0; return 0; }
static CUres f_push(void *ctx) { (void)ctx; return 0; }
static CUres f_pop(void **ctx) { *ctx = &fake_ctx; return 0; }
static CUres f_alloc(unsigned long long *p, size_t bytes) { (void)p, (void)bytes; return 2; } /* OUT_OF_MEMORY */
static CUres f_free(unsigned long long p) { (void)p; return 0; }
static CUres f_meminfo(size_t *f, size_t *t) { *f = *t = (size_t)80 << 30; return 0; }
static CUres f_evcreate(void **ev, unsigned flags) { (void)flags; *ev = &fake_ev; return 0; }
static CUres f_evrecord(void *ev, void *s) { (void)ev, (void)s; return 700; } /* ILLEGAL_ADDRESS */
static CUres f_evquery(void *ev) { (void)ev; return 0; }
static CUres f_evsync(void *ev) { (void)ev; return 0; }
static CUres f_evdestroy(void *ev) { (void)ev; return 0; }
static CUres f_errname(CUres r, const char **name) {
    *name = r == 2 ? "CUDA_ERROR_OUT_OF_MEMORY" : r == 700 ? "CUDA_ERROR_ILLEGAL_ADDRESS" : "CUDA_ERROR_UNKNOWN";
    return 0;
}

static void *fake_lookup(const char *name, void *arg) {
    (void)arg;
    static const struct {
        const char *name;
        void (*fn)(void);
    } t[] = {
        {"cuInit", (void (*)(void))f_init}, {"cuDeviceGetCount", (void (*)(void))f_count},
        {"cuDeviceGet", (void (*)(void))f_get}, {"cuDeviceTotalMem_v2", (void (*)(void))f_total},
        {"cuDevicePrimaryCtxRetain", (void (*)(void))f_retain},
        {"cuDevicePrimaryCtxRelease_v2", (void (*)(void))f_release},
        {"cuCtxGetCurrent", (void (*)(void))f_cur}, {"cuCtxGetDevice", (void (*)(void))f_ctxdev},
        {"cuCtxPushCurrent_v2", (void (*)(void))f_push}, {"cuCtxPopCurrent_v2", (void (*)(void))f_pop},
        {"cuCtxSynchronize", (void (*)(void))f_ok}, {"cuMemAlloc_v2", (void (*)(void))f_alloc},
        {"cuMemFree_v2", (void (*)(void))f_free}, {"cuMemGetInfo_v2", (void (*)(void))f_meminfo},
        {"cuEventCreate", (void (*)(void))f_evcreate}, {"cuEventRecord", (void (*)(void))f_evrecord},
        {"cuEventQuery", (void (*)(void))f_evquery}, {"cuEventSynchronize", (void (*)(void))f_evsync},
        {"cuEventDestroy_v2", (void (*)(void))f_evdestroy}, {"cuGetErrorName", (void (*)(void))f_errname},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        if (!strcmp(t[i].name, name)) {
            void *p;
            memcpy(&p, &t[i].fn, sizeof(p));
            return p;
        }
    return NULL;
}

static void test_driver_codes(void) {
    carve_status st = carve_cuda_driver_lookup(fake_lookup, NULL);
    if (st == CARVE_ERR_NO_DEVICE) { /* built without CUDA: no driver backend to test */
        printf("SKIP driver codes: %s\n", carve_last_error(NULL));
        return;
    }
    CHECK_OK(NULL, st);
    carve_config c;
    carve_config_init(&c);
    c.backend = CARVE_BACKEND_CUDA_DRIVER;
    c.initial_bytes = 64 * MiB; /* cuMemAlloc refuses: creation fails with the driver's code */
    carve_arena *a = NULL;
    CHECK_ST(NULL, carve_arena_create(&c, &a), CARVE_ERR_OOM);
    carve_error_info e = info_of(NULL);
    CHECK(e.status == CARVE_ERR_OOM && e.driver_api == CARVE_DRIVER_ERROR_DRIVER && e.driver_error == 2 &&
          e.host_memory == 0);
    c.initial_bytes = 0;
    CHECK_OK(NULL, carve_arena_create(&c, &a));
    void *p;
    CHECK_ST(a, carve_alloc(a, 4 * MiB, S1, &p), CARVE_ERR_OOM);
    e = info_of(a);
    CHECK(e.status == CARVE_ERR_OOM && e.driver_api == CARVE_DRIVER_ERROR_DRIVER && e.driver_error == 2);
    CHECK(strstr(carve_last_error(a), "CUDA_ERROR_OUT_OF_MEMORY") != NULL);
    /* A failure the driver did not cause carries no code, even right after one. */
    CHECK_ST(a, carve_free(a, (void *)0x100), CARVE_ERR_BAD_POINTER);
    e = info_of(a);
    CHECK(e.status == CARVE_ERR_BAD_POINTER && e.driver_api == 0 && e.driver_error == 0);
    carve_arena_destroy(a);
}

int main(void) {
    test_oom_kinds();
    test_driver_codes();
    return test_finish();
}
