/*
 * stress_threads.c — many threads on one arena: the host backend (rounds 0
 * and 1), and the virtual backend in virtual-memory mode (round 2), where
 * buffers up to 16 MiB make threads map granules and unmap each other's.
 *
 * Each thread runs a seeded churn on its own stream (and every fourth
 * operation on a shared stream), writes a pattern unique to each buffer
 * over all of it, verifies it before the free, and frees some buffers that
 * another thread allocated (cross-thread frees). Mid-run, one thread calls
 * carve_check, carve_get_stats, carve_snapshot_json and empty_cache while
 * the others keep going, and empty_cache and carve_get_stats at every
 * eighth of its run; an observer thread reads the statistics all along (so
 * ThreadSanitizer sees every reader beside every writer of the counters,
 * whatever the timing). At the end everything is freed, carve_check passes,
 * and the statistics are zero. Overlap or lost updates show up as corrupted
 * patterns or a failed check (the virtual backend has no memory to hold
 * patterns: there carve_check and the statistics judge).
 */
#include "test_util.h"

#include <pthread.h>
#include <unistd.h>

#define NTHREADS 8
#define LIVE 64
#define HANDOFF 256

typedef struct handoff {
    pthread_mutex_t lock;
    void *ptr[HANDOFF];
    size_t size[HANDOFF];
    uint64_t tag[HANDOFF];
    size_t n;
} handoff;

typedef struct targ {
    carve_arena *arena;
    int index;
    long steps;
    handoff *box;
    unsigned long errors;
    int vmm; /* virtual backend: no memory behind the addresses, larger sizes */
} targ;

static int g_no_memory; /* round 2: addresses only */

static void fill(void *p, size_t n, uint64_t tag) {
    if (g_no_memory)
        return;
    uint64_t *w = p;
    for (size_t i = 0; i < n / 8; i++)
        w[i] = tag ^ (i * 0x9E3779B97F4A7C15ull);
}

static int intact(const void *p, size_t n, uint64_t tag) {
    if (g_no_memory)
        return 1;
    const uint64_t *w = p;
    for (size_t i = 0; i < n / 8; i++)
        if (w[i] != (tag ^ (i * 0x9E3779B97F4A7C15ull)))
            return 0;
    return 1;
}

static void *worker(void *arg) {
    targ *t = arg;
    carve_arena *a = t->arena;
    carve_stream own = (carve_stream)(uintptr_t)(0x10000 * (t->index + 1));
    carve_stream shared = (carve_stream)(uintptr_t)0x999000;
    test_rng r;
    test_rng_seed(&r, test_seed(99) * 31 + (uint64_t)t->index);
    void *ptr[LIVE] = {0};
    size_t size[LIVE] = {0};
    uint64_t tag[LIVE] = {0};
    for (long step = 0; step < t->steps; step++) {
        int i = (int)test_rng_below(&r, LIVE);
        if (ptr[i]) {
            if (!intact(ptr[i], size[i], tag[i]))
                t->errors++;
            if (test_rng_below(&r, 8) == 0) { /* hand the buffer to another thread to free */
                pthread_mutex_lock(&t->box->lock);
                if (t->box->n < HANDOFF) {
                    size_t k = t->box->n++;
                    t->box->ptr[k] = ptr[i];
                    t->box->size[k] = size[i];
                    t->box->tag[k] = tag[i];
                    ptr[i] = NULL;
                }
                pthread_mutex_unlock(&t->box->lock);
            }
            if (ptr[i] && carve_free(a, ptr[i]) != CARVE_OK)
                t->errors++;
            ptr[i] = NULL;
        }
        /* free something another thread handed over */
        pthread_mutex_lock(&t->box->lock);
        if (t->box->n > 0 && test_rng_below(&r, 4) == 0) {
            size_t k = --t->box->n;
            if (!intact(t->box->ptr[k], t->box->size[k], t->box->tag[k]))
                t->errors++;
            if (carve_free(a, t->box->ptr[k]) != CARVE_OK)
                t->errors++;
        }
        pthread_mutex_unlock(&t->box->lock);
        size[i] = test_rng_loguniform(&r, 8, t->vmm ? (16u << 20) : (256u << 10));
        tag[i] = test_rng_next(&r);
        carve_stream s = step % 4 == 0 ? shared : own;
        if (carve_alloc(a, size[i], s, &ptr[i]) != CARVE_OK) {
            t->errors++;
            ptr[i] = NULL;
            continue;
        }
        fill(ptr[i], size[i], tag[i]);
        if (t->index == 0 && step % (t->steps / 8 + 1) == t->steps / 16) {
            carve_stats st;
            if (carve_get_stats(a, &st) != CARVE_OK || carve_empty_cache(a) != CARVE_OK)
                t->errors++;
        }
        if (t->index == 0 && step == t->steps / 2) {
            char *json = NULL;
            if (carve_check(a) != CARVE_OK || carve_snapshot_json(a, &json) != CARVE_OK)
                t->errors++;
            carve_snapshot_free(json);
            carve_stats st;
            if (carve_get_stats(a, &st) != CARVE_OK || carve_empty_cache(a) != CARVE_OK)
                t->errors++;
        }
    }
    for (int i = 0; i < LIVE; i++)
        if (ptr[i]) {
            if (!intact(ptr[i], size[i], tag[i]))
                t->errors++;
            if (carve_free(a, ptr[i]) != CARVE_OK)
                t->errors++;
        }
    return NULL;
}

typedef struct observer {
    carve_arena *arena;
    int stop;            /* atomic */
    unsigned long reads, errors;
} observer;

/* Read the statistics until told to stop (each read's peaks at or above its
 * current values). */
static void *observe(void *arg) {
    observer *o = arg;
    while (!__atomic_load_n(&o->stop, __ATOMIC_ACQUIRE)) {
        carve_stats st;
        if (carve_get_stats(o->arena, &st) != CARVE_OK || st.allocated_bytes_peak < st.allocated_bytes ||
            st.reserved_bytes_peak < st.reserved_bytes)
            o->errors++;
        (void)carve_memory_reserved(o->arena);
        (void)carve_memory_allocated(o->arena);
        o->reads++;
        usleep(200);
    }
    return NULL;
}

int main(void) {
    long steps = getenv("CARVE_TEST_STEPS") ? atol(getenv("CARVE_TEST_STEPS")) * 5 : 20000;
    for (int round = 0; round < 3; round++) {
        carve_config c;
        carve_config_init(&c);
        c.backend = round < 2 ? CARVE_BACKEND_HOST : CARVE_BACKEND_VIRTUAL;
        c.growth = 1;
        c.vmm = round == 2;
        if (c.vmm) /* address space for 4 GiB: carve_check walks every granule of it */
            c.limit_bytes = (size_t)4 << 30;
        g_no_memory = round == 2;
        c.sim_event_polls = round ? 1 : 0; /* rounds 1, 2: cross-stream reuse waits on events */
        carve_arena *a = NULL;
        CHECK_OK(NULL, carve_arena_create(&c, &a));
        handoff box = {.lock = PTHREAD_MUTEX_INITIALIZER};
        pthread_t th[NTHREADS];
        targ ta[NTHREADS];
        observer obs = {a, 0, 0, 0};
        pthread_t oth;
        pthread_create(&oth, NULL, observe, &obs);
        for (int i = 0; i < NTHREADS; i++) {
            ta[i] = (targ){a, i, steps, &box, 0, c.vmm};
            pthread_create(&th[i], NULL, worker, &ta[i]);
        }
        for (int i = 0; i < NTHREADS; i++) {
            pthread_join(th[i], NULL);
            CHECK(ta[i].errors == 0);
            if (ta[i].errors)
                fprintf(stderr, "thread %d: %lu errors\n", i, ta[i].errors);
        }
        __atomic_store_n(&obs.stop, 1, __ATOMIC_RELEASE);
        pthread_join(oth, NULL);
        CHECK(obs.errors == 0 && obs.reads > 0);
        while (box.n > 0) {
            box.n--;
            CHECK(intact(box.ptr[box.n], box.size[box.n], box.tag[box.n]));
            CHECK_OK(a, carve_free(a, box.ptr[box.n]));
        }
        CHECK_ARENA(a);
        carve_stats st;
        CHECK_OK(a, carve_get_stats(a, &st));
        CHECK(st.allocated_bytes == 0 && st.requested_bytes == 0 && st.num_live == 0);
        CHECK(st.num_streams == NTHREADS + 1);
        CHECK(st.num_allocs == st.num_frees);
        CHECK_OK(a, carve_empty_cache(a));
        CHECK(carve_memory_reserved(a) == 0);
        printf("round %d (%s%s): %d threads x %ld steps, %llu allocs, %llu backend allocs, %lu reads of the "
               "statistics meanwhile\n", round, carve_backend_str(c.backend), c.vmm ? ", vmm=1" : "", NTHREADS, steps,
               (unsigned long long)st.num_allocs, (unsigned long long)st.num_backend_allocs, obs.reads);
        carve_arena_destroy(a);
    }
    return test_finish();
}
