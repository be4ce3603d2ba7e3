/*
 * test_host_oom.c — calls that run out of host memory for carve's own
 * records fail with CARVE_ERR_OOM, host_memory 1, and leave the arena as it
 * was: carve_record_stream (its first use record cannot be made: the buffer
 * keeps no empty record, so its free records nothing and its memory is its
 * stream's again at once), carve_free_on_stream, and carve_set_limit giving
 * memory back in virtual-memory mode (the limit unchanged).
 *
 * Host memory runs out on command: this program defines malloc, calloc and
 * realloc over glibc's own (__libc_*), failing each while `failing` is set.
 * Under a sanitizer, which owns those functions, it reports itself skipped.
 */
#include "test_util.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif

#ifndef UNDER_SANITIZER
extern void *__libc_malloc(size_t), *__libc_calloc(size_t, size_t), *__libc_realloc(void *, size_t);
static volatile int failing;
void *malloc(size_t n) { return failing ? NULL : __libc_malloc(n); }
void *calloc(size_t k, size_t n) { return failing ? NULL : __libc_calloc(k, n); }
void *realloc(void *p, size_t n) { return failing ? NULL : __libc_realloc(p, n); }
#endif

#define S1 ((carve_stream)(uintptr_t)0x1000)
#define S2 ((carve_stream)(uintptr_t)0x2000)
#define MiB ((size_t)1 << 20)

#ifndef UNDER_SANITIZER
static carve_arena *make(int vmm) {
    carve_config c;
    carve_config_init(&c);
    c.backend = CARVE_BACKEND_VIRTUAL;
    c.vmm = vmm;
    c.sim_event_polls = 1000; /* events stay pending: only a device sync completes them */
    carve_arena *a = NULL;
    CHECK(carve_arena_create(&c, &a) == CARVE_OK);
    return a;
}

static uint64_t records(carve_arena *a) {
    carve_stats s;
    carve_get_stats(a, &s);
    return s.num_event_records;
}

static void check_host_oom(carve_arena *a, carve_status st) {
    carve_error_info e;
    CHECK(st == CARVE_ERR_OOM);
    CHECK(carve_last_error_info(a, &e) == CARVE_OK && e.host_memory == 1);
}

/* A use of another stream that cannot be recorded leaves nothing behind. */
static void use_not_recorded(int vmm, int on_stream) {
    carve_arena *a = make(vmm);
    void *p = NULL, *q = NULL;
    CHECK_OK(a, carve_alloc(a, 4 * MiB, S1, &p));
    uint64_t r0 = records(a);
    failing = 1;
    carve_status st = on_stream ? carve_free_on_stream(a, p, S2) : carve_record_stream(a, p, S2);
    failing = 0;
    check_host_oom(a, st);
    CHECK(records(a) == r0);
    CHECK_ARENA(a);
    /* plain free: S2 is not among its uses, so no event, and S1 gets p back at once */
    CHECK_OK(a, carve_free(a, p));
    CHECK(records(a) == r0);
    CHECK_OK(a, carve_alloc(a, 4 * MiB, S1, &q));
    CHECK(q == p);
    CHECK_OK(a, carve_free(a, q));
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* carve_set_limit in virtual-memory mode, records for the unmapping refused. */
static void set_limit_without_records(void) {
    carve_arena *a = make(1);
    void *p[64];
    for (int i = 0; i < 64; i++)
        CHECK_OK(a, carve_alloc(a, (size_t)(1 + i % 5) * MiB, S1, &p[i]));
    for (int i = 0; i < 64; i += 2)
        CHECK_OK(a, carve_free(a, p[i]));
    carve_stats s0, s1;
    carve_get_stats(a, &s0);
    size_t want = s0.reserved_bytes - 32 * MiB;
    failing = 1;
    carve_status st = carve_set_limit(a, want);
    failing = 0;
    carve_get_stats(a, &s1);
    printf("carve_set_limit with host memory gone: %s: %s\n", carve_status_str(st), carve_last_error(a));
    check_host_oom(a, st); /* the unmapping needs records for the runs it splits */
    CHECK(s1.limit_bytes == s0.limit_bytes);
    CHECK(strstr(carve_last_error(a), "carve_set_limit") != NULL);
    CHECK_ARENA(a);
    for (int i = 1; i < 64; i += 2)
        CHECK_OK(a, carve_free(a, p[i]));
    CHECK_OK(a, carve_set_limit(a, want));
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}
#endif

int main(void) {
#ifdef UNDER_SANITIZER
    printf("SKIP: a sanitizer owns malloc; host memory cannot run out on command here\n");
    return 77;
#else
    for (int vmm = 0; vmm <= 1; vmm++)
        for (int on_stream = 0; on_stream <= 1; on_stream++)
            use_not_recorded(vmm, on_stream);
    set_limit_without_records();
    return test_finish();
#endif
}
