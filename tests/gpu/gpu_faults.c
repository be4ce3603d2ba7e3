/*
 * gpu_faults.c — driver failures on a real device lose nothing, and memory
 * always comes back.
 *
 * Cases:
 *  - every backend call of a scenario (cudaMalloc segments, event records,
 *    cudaFree releases; in virtual-memory mode also cuMemMap / cuMemUnmap)
 *    made to fail in turn through fail_backend_at=N: after each injected
 *    failure every live buffer is verified on the GPU (each holds a pattern
 *    of its own, written by kernels on its stream), the arena passes
 *    carve_check, the failed call returned a clear status naming the
 *    injection, and once past it the same scenario runs again without an
 *    error; device memory is back at its baseline after each run;
 *  - equal fractions for the initial block and the limit with growth off
 *    (limit_fraction = initial_fraction = 0.3 used to be refused);
 *  - twenty "models" in a row in one process: create an arena with its own
 *    limit, fill it to the limit, verify, free, destroy, and the driver's
 *    free memory is back at the baseline after each one.
 */
#include "backend/faults.h"
#include "engine/types.h"
#include "gpu_util.h"

#define NSLOT 16
#define NSTREAM 3

static cudaStream_t streams[NSTREAM];
static uint64_t ids;

typedef struct model {
    void *p[NSLOT];
    size_t size[NSLOT];
    uint64_t id[NSLOT];
    int stream[NSLOT];
    int other[NSLOT]; /* stream it was also used on, or -1 */
} model;

typedef struct tally {
    unsigned long injected, failed_calls, verified, runs, runs_reached, runs_failed;
} tally;

static void check_failure(carve_arena *a, carve_status st, int allow_oom) {
    CHECK(st == CARVE_ERR_BACKEND || (allow_oom && st == CARVE_ERR_OOM));
    CHECK(strstr(carve_last_error(a), "injected") != NULL);
}

/* Every live buffer holds its pattern (verified on its own stream). */
static void verify_all(carve_arena *a, const model *m, tally *t) {
    for (int k = 0; k < NSTREAM; k++) {
        gpu_counter c = gpu_counter_of(0, k);
        for (int i = 0; i < NSLOT; i++)
            if (m->p[i] && m->stream[i] == k) {
                gpu_verify(m->p[i], m->size[i], m->id[i], c.dev, streams[k]);
                t->verified++;
            }
        CHECK(gpu_counter_take(c, streams[k]) == 0);
    }
    CHECK_ARENA(a);
}

/* The scenario; strict: nothing may fail. After a call that failed, every
 * live buffer is verified. */
static void scenario(carve_arena *a, model *m, uint64_t seed, int nsteps, int strict, tally *t) {
    static const size_t sizes[] = {4096, 300 << 10, 3 * MiB, 12 * MiB, 40 * MiB};
    test_rng r;
    test_rng_seed(&r, seed);
    for (int step = 0; step < nsteps; step++) {
        unsigned long before = a->be.faults.failed;
        int i = (int)test_rng_below(&r, NSLOT);
        unsigned what = (unsigned)test_rng_below(&r, 16);
        carve_status st = CARVE_OK;
        if (what == 15) {
            st = carve_empty_cache(a);
            if (st != CARVE_OK)
                check_failure(a, st, 0);
        } else if (!m->p[i]) {
            int k = (int)test_rng_below(&r, NSTREAM);
            size_t size = sizes[test_rng_below(&r, 5)] + (size_t)test_rng_below(&r, 4) * 256;
            void *p = (void *)1;
            st = carve_alloc(a, size, (carve_stream)streams[k], &p);
            if (st == CARVE_OK) {
                m->p[i] = p;
                m->size[i] = size;
                m->id[i] = ++ids;
                m->stream[i] = k;
                m->other[i] = -1;
                gpu_fill(p, size, m->id[i], streams[k]);
            } else {
                CHECK(p == NULL);
                check_failure(a, st, 1);
            }
        } else if (what < 4 && m->other[i] < 0) { /* read on another stream too, after its fill */
            int j = (m->stream[i] + 1) % NSTREAM;
            cudaEvent_t filled;
            CUDA_CHECK(cudaEventCreateWithFlags(&filled, cudaEventDisableTiming));
            CUDA_CHECK(cudaEventRecord(filled, streams[m->stream[i]]));
            CUDA_CHECK(cudaStreamWaitEvent(streams[j], filled, 0));
            CUDA_CHECK(cudaEventDestroy(filled));
            gpu_counter c = gpu_counter_of(0, NSTREAM + j);
            gpu_verify(m->p[i], m->size[i], m->id[i], c.dev, streams[j]);
            CHECK_OK(a, carve_record_stream(a, m->p[i], (carve_stream)streams[j]));
            m->other[i] = j;
            CHECK(gpu_counter_take(c, streams[j]) == 0);
        } else {
            st = carve_free(a, m->p[i]);
            if (st == CARVE_OK)
                m->p[i] = NULL;
            else
                check_failure(a, st, 0); /* an event on the other stream: still live */
        }
        if (st != CARVE_OK) {
            CHECK(!strict);
            t->failed_calls++;
        }
        if (a->be.faults.failed != before) { /* a failure was injected in this step */
            t->injected++;
            verify_all(a, m, t);
        }
    }
}

/* Free everything and give it back; a failed call is repeated once the
 * failure is past. */
static void drain(carve_arena *a, model *m, tally *t) {
    verify_all(a, m, t);
    for (int i = 0; i < NSLOT; i++)
        if (m->p[i]) {
            carve_status st = carve_free(a, m->p[i]);
            if (st != CARVE_OK) {
                check_failure(a, st, 0);
                carve_backend_faults_off(&a->be);
                CHECK_OK(a, carve_free(a, m->p[i]));
            }
            m->p[i] = NULL;
        }
    if (carve_empty_cache(a) != CARVE_OK) {
        carve_backend_faults_off(&a->be);
        CHECK_OK(a, carve_empty_cache(a));
    }
    carve_stats s = gpu_stats(a);
    CHECK(s.reserved_bytes == 0 && s.allocated_bytes == 0 && s.num_live == 0);
    CHECK_ARENA(a);
}

static carve_arena *faulty_arena(const char *mode, const char *faults, int *creation_failed) {
    char conf[160];
    snprintf(conf, sizeof(conf), "limit=2GiB,%s%s%s", mode, faults ? "," : "", faults ? faults : "");
    carve_config c;
    carve_config_init(&c);
    c.name = "faults";
    CHECK_OK(NULL, carve_config_parse(&c, conf));
    carve_arena *a = NULL;
    carve_status st = carve_arena_create(&c, &a);
    *creation_failed = st != CARVE_OK;
    if (st != CARVE_OK) { /* creation itself met the failing call (the address space of vmm=1) */
        check_failure(NULL, st, 1);
        c.fail_backend_at = c.fail_backend_every = 0;
        CHECK_OK(NULL, carve_arena_create(&c, &a));
    }
    return a;
}

static void exhaustive(const char *mode, int nsteps, unsigned long stride) {
    uint64_t seed = test_seed(0xfa17);
    gpu_mark m0;
    gpu_mark_take(&m0, 0);
    /* Count the backend calls of one clean run. */
    int failed_early = 0;
    carve_arena *a = faulty_arena(mode, NULL, &failed_early);
    carve_backend_faults_on(&a->be, 0, 1, 0, CARVE_FAULT_ALL, CARVE_ERR_OOM); /* counts, fails nothing */
    model m;
    memset(&m, 0, sizeof(m));
    tally t = {0};
    scenario(a, &m, seed, nsteps, 1, &t);
    drain(a, &m, &t);
    unsigned long n = a->be.faults.calls;
    carve_arena_destroy(a);
    CHECK(n > 10);
    for (unsigned long at = 1; at <= n; at += stride) {
        char faults[80];
        snprintf(faults, sizeof(faults), "fail_backend_at=%lu,fail_backend_status=%s", at,
                 at % 2 ? "oom" : "backend");
        a = faulty_arena(mode, faults, &failed_early);
        memset(&m, 0, sizeof(m));
        scenario(a, &m, seed, nsteps, 0, &t);
        drain(a, &m, &t);
        /* Call N was reached (in creation, in the steps or in the drain),
         * and then it failed. Which calls a run makes depends a little on
         * how fast the device finishes (an event that has completed is not
         * waited for), so a run may make fewer calls than the counting run:
         * such a run cannot fail call N, and is counted apart. */
        int reached = failed_early || a->be.faults.calls >= at;
        t.runs_reached += reached;
        t.runs_failed += reached && (failed_early || a->be.faults.failed > 0);
        carve_backend_faults_off(&a->be);
        scenario(a, &m, seed + 7, nsteps, 1, &t); /* past the failure: nothing fails */
        drain(a, &m, &t);
        carve_arena_destroy(a);
        GPU_CHECK_BACK(&m0, "device memory after a run with an injected failure");
        t.runs++;
    }
    printf("  %s: %lu backend calls in the scenario, %lu runs with call N failing (%lu reached it, %lu of those "
           "failed): %lu failures injected during the steps, %lu calls answered with a failure, %lu buffer "
           "verifications\n",
           mode, n, t.runs, t.runs_reached, t.runs_failed, t.injected, t.failed_calls, t.verified);
    /* every run that reached call N saw it fail; nearly every run reached it */
    CHECK(t.runs_failed == t.runs_reached && t.runs_reached * 4 >= t.runs * 3 && t.injected > 0 &&
          t.failed_calls > 0);
}

static void case_fault_each_call(void) { exhaustive("vmm=0", (int)gpu_scale(120, 40), gpu_quick() ? 5 : 1); }

static void case_fault_each_call_vmm(void) {
    exhaustive("vmm=1", (int)gpu_scale(60, 20), gpu_quick() ? 5 : 3);
}

/* Equal fractions with growth off give one block of the limit. */
static void case_equal_fractions(void) {
    const char *conf = gpu_quick() ? "growth=0,limit=0.1,initial=0.1" : "growth=0,limit=0.3,initial=0.3";
    gpu_mark m;
    gpu_mark_take(&m, 0);
    carve_config c;
    carve_config_init(&c);
    CHECK_OK(NULL, carve_config_parse(&c, conf));
    carve_arena *a = NULL;
    CHECK_OK(NULL, carve_arena_create(&c, &a));
    if (!a)
        return;
    carve_config eff;
    CHECK_OK(a, carve_arena_get_config(a, &eff));
    CHECK(eff.initial_bytes == eff.limit_bytes && eff.limit_bytes % CARVE_SEGMENT_GRANULE == 0);
    carve_stats s = gpu_stats(a);
    CHECK(s.reserved_bytes == eff.limit_bytes && s.num_segments == 1);
    GPU_CHECK_USAGE(&m, eff.limit_bytes, 1, "one block of the limit");
    void *p = NULL;
    CHECK_OK(a, carve_alloc(a, eff.limit_bytes, (carve_stream)streams[0], &p)); /* all of it */
    gpu_fill(p, eff.limit_bytes, ++ids, streams[0]);
    gpu_counter ctr = gpu_counter_of(0, 0);
    gpu_verify(p, eff.limit_bytes, ids, ctr.dev, streams[0]);
    CHECK(gpu_counter_take(ctr, streams[0]) == 0);
    CHECK_OK(a, carve_free(a, p));
    char b[32];
    printf("  %s: one block of %s\n", conf, gpu_fmt(b, sizeof(b), eff.limit_bytes));
    carve_arena_destroy(a);
}

/* Twenty models in a row, each with its own limit, each filled to it. */
static void case_sequential_models(void) {
    gpu_mark base;
    gpu_mark_take(&base, 0);
    test_rng r;
    test_rng_seed(&r, test_seed(0x5e9));
    int nmodels = (int)gpu_scale(20, 6);
    size_t total_filled = 0;
    for (int k = 0; k < nmodels; k++) {
        /* 0.5 .. 4.5 GiB, rarely a granule multiple; growth on or off. */
        size_t limit = (size_t)512 * MiB + (size_t)test_rng_below(&r, 4096) * MiB + (size_t)k * 12345;
        int growth = k % 3 != 2;
        char conf[128];
        if (growth)
            snprintf(conf, sizeof(conf), "growth=1,limit=%zu", limit);
        else /* one block of the limit: equal sizes, neither a granule multiple */
            snprintf(conf, sizeof(conf), "growth=0,limit=%zu,initial=%zu", limit, limit);
        char name[32];
        snprintf(name, sizeof(name), "model-%d", k);
        carve_arena *a = gpu_arena_conf(conf, name);
        size_t cap = limit / CARVE_SEGMENT_GRANULE * CARVE_SEGMENT_GRANULE;
        /* Fill: large pieces first, then smaller ones into what is left. */
        enum { MAXB = 4096 };
        static void *bufs[MAXB];
        static size_t sz[MAXB];
        static uint64_t bid[MAXB];
        int n = 0;
        size_t piece = 256 * MiB;
        while (piece >= 4096 && n < MAXB) {
            void *p = NULL;
            carve_status st = carve_alloc(a, piece, (carve_stream)streams[n % NSTREAM], &p);
            if (st == CARVE_ERR_OOM) {
                CHECK(p == NULL);
                piece /= 4;
                continue;
            }
            CHECK_OK(a, st);
            if (st != CARVE_OK)
                break;
            bufs[n] = p;
            sz[n] = piece;
            bid[n] = ++ids;
            gpu_fill(p, piece, bid[n], streams[n % NSTREAM]);
            n++;
        }
        carve_stats s = gpu_stats(a);
        CHECK(s.reserved_bytes <= cap);
        CHECK(s.allocated_bytes + 64 * MiB >= cap); /* filled to within the last small pieces */
        total_filled += s.allocated_bytes;
        for (int k2 = 0; k2 < NSTREAM; k2++) {
            gpu_counter c = gpu_counter_of(0, k2);
            for (int i = k2; i < n; i += NSTREAM)
                gpu_verify(bufs[i], sz[i], bid[i], c.dev, streams[k2]);
            CHECK(gpu_counter_take(c, streams[k2]) == 0);
        }
        for (int i = 0; i < n; i++)
            CHECK_OK(a, carve_free(a, bufs[i]));
        CHECK_ARENA(a);
        carve_arena_destroy(a);
        GPU_CHECK_BACK(&base, "device memory after a model's arena is destroyed");
    }
    char b[32];
    printf("  %d models, %s filled in all, device memory back to its baseline after each\n", nmodels,
           gpu_fmt(b, sizeof(b), total_filled));
}

int main(void) {
    gpu_start("gpu_faults", 1);
    for (int k = 0; k < NSTREAM; k++)
        streams[k] = gpu_stream_new();
    GPU_CASE(case_equal_fractions);
    GPU_CASE(case_fault_each_call);
    GPU_CASE(case_fault_each_call_vmm);
    GPU_CASE(case_sequential_models);
    for (int k = 0; k < NSTREAM; k++)
        gpu_stream_free(streams[k]);
    return gpu_finish();
}
