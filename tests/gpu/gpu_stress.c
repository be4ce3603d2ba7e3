/*
 * gpu_stress.c — thousands of random allocations and frees on a real GPU,
 * every buffer written and verified by kernels.
 *
 * Each buffer gets a pattern of its own (gpu_pattern of a unique id) as soon
 * as it is allocated, on its stream, and is verified on that stream just
 * before it is freed; at checkpoints the mismatch counters must be zero. If
 * two live buffers ever overlapped, or memory were reused while queued work
 * could still write it, one of the verifications would count mismatches. A
 * host-side registry of live ranges checks the same thing by address, and
 * carve_check and the statistics must agree with the test's own books.
 *
 * Phase 1: one thread, four streams, a buffer now and then also written on a
 *          second stream (declared with carve_record_stream).
 * Phase 2: four threads, each with its own stream, sharing one arena whose
 *          limit is tight enough that memory moves between streams through
 *          the out-of-memory path.
 */
#include "gpu_util.h"

#include <pthread.h>

#define NSTREAMS 4
#define NTHREADS 4
#define MAX_SIZE ((size_t)64 << 20)
#define RECENT 16

typedef struct buf {
    void *p;
    size_t size;
    uint64_t id;
    cudaStream_t s;
} buf;

/* ---- live ranges of every thread, for the host-side overlap check ---- */

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct range {
    uintptr_t lo, hi;
    uint64_t id;
} *reg;
static size_t reg_n, reg_cap;
static unsigned long reg_overlaps;
static uint64_t next_id; /* atomic */

static uint64_t new_id(void) { return __atomic_add_fetch(&next_id, 1, __ATOMIC_RELAXED); }

static void reg_add(const buf *b) {
    uintptr_t lo = (uintptr_t)b->p, hi = lo + gpu_rounded(b->size);
    pthread_mutex_lock(&reg_lock);
    for (size_t i = 0; i < reg_n; i++)
        if (lo < reg[i].hi && reg[i].lo < hi) {
            fprintf(stderr, "overlap: buffer %llu [%#lx, %#lx) meets live buffer %llu [%#lx, %#lx)\n",
                    (unsigned long long)b->id, (unsigned long)lo, (unsigned long)hi,
                    (unsigned long long)reg[i].id, (unsigned long)reg[i].lo, (unsigned long)reg[i].hi);
            reg_overlaps++;
        }
    if (reg_n == reg_cap) {
        reg_cap = reg_cap ? reg_cap * 2 : 256;
        reg = realloc(reg, reg_cap * sizeof(*reg));
        if (!reg)
            abort();
    }
    reg[reg_n].lo = lo;
    reg[reg_n].hi = hi;
    reg[reg_n].id = b->id;
    reg_n++;
    pthread_mutex_unlock(&reg_lock);
}

static void reg_remove(const buf *b) {
    pthread_mutex_lock(&reg_lock);
    for (size_t i = 0; i < reg_n; i++)
        if (reg[i].id == b->id) {
            reg[i] = reg[--reg_n];
            break;
        }
    pthread_mutex_unlock(&reg_lock);
}

/* ---- one worker's books ---- */

typedef struct worker {
    carve_arena *a;
    test_rng rng;
    cudaStream_t streams[NSTREAMS];
    gpu_counter counters[NSTREAMS];
    int nstreams;
    cudaEvent_t ev; /* for handing a buffer to a second stream */
    int cross_uses; /* phase 1: sometimes write a buffer on a second stream too */
    buf *live;
    size_t nlive, max_live;
    size_t recent[RECENT];
    unsigned nrecent;
    long steps, total; /* current step, steps to run (threads) */
    /* results */
    unsigned long errors, ooms, oom_skips, allocs, frees, cross;
    unsigned long long mismatches;
} worker;

/* Checks from worker threads: counted per worker, reported by main. */
#define WCHECK(w, cond)                                                            \
    do {                                                                           \
        if (!(cond)) {                                                             \
            (w)->errors++;                                                         \
            fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #cond,     \
                    carve_last_error((w)->a));                                     \
        }                                                                          \
    } while (0)

static size_t pick_size(worker *w) {
    if (w->nrecent && test_rng_below(&w->rng, 100) < 15)
        return w->recent[test_rng_below(&w->rng, w->nrecent < RECENT ? w->nrecent : RECENT)];
    size_t s = test_rng_loguniform(&w->rng, 1, MAX_SIZE);
    w->recent[w->nrecent++ % RECENT] = s;
    return s;
}

static int stream_index(const worker *w, cudaStream_t s) {
    for (int i = 0; i < w->nstreams; i++)
        if (w->streams[i] == s)
            return i;
    return 0;
}

/* Verify buffer i on its stream, then free it (stream order keeps the
 * verification ahead of any reuse). */
static void retire(worker *w, size_t i) {
    buf b = w->live[i];
    gpu_verify(b.p, b.size, b.id, w->counters[stream_index(w, b.s)].dev, b.s);
    reg_remove(&b);
    carve_status st = carve_free(w->a, b.p);
    WCHECK(w, st == CARVE_OK);
    w->live[i] = w->live[--w->nlive];
    w->frees++;
}

static void step_alloc(worker *w) {
    size_t size = pick_size(w);
    cudaStream_t s = w->streams[test_rng_below(&w->rng, (uint64_t)w->nstreams)];
    void *p = NULL;
    carve_status st = carve_alloc(w->a, size, s, &p);
    while (st == CARVE_ERR_OOM && w->nlive > 0) {
        /* Under the limit's pressure: give back one of our buffers and retry. */
        w->ooms++;
        retire(w, 0);
        st = carve_alloc(w->a, size, s, &p);
    }
    if (st == CARVE_ERR_OOM) {
        w->ooms++;
        w->oom_skips++; /* other threads hold the memory */
        WCHECK(w, p == NULL);
        return;
    }
    WCHECK(w, st == CARVE_OK);
    if (st != CARVE_OK)
        return;
    WCHECK(w, p != NULL && ((uintptr_t)p % CARVE_ALIGNMENT) == 0);
    buf b = {p, size, new_id(), s};
    reg_add(&b);
    gpu_fill(p, size, b.id, s);
    if (w->cross_uses && w->nstreams > 1 && test_rng_below(&w->rng, 100) < 10) {
        /* Rewrite the same pattern on a second stream after the first fill,
         * and declare that use. If carve reused the memory before this
         * rewrite ran, the rewrite would clobber the next owner's pattern. */
        cudaStream_t s2 = w->streams[(stream_index(w, s) + 1 + test_rng_below(&w->rng, (uint64_t)w->nstreams - 1)) %
                                     (unsigned)w->nstreams];
        CUDA_CHECK(cudaEventRecord(w->ev, s));
        CUDA_CHECK(cudaStreamWaitEvent(s2, w->ev, 0));
        gpu_fill(p, size, b.id, s2);
        st = carve_record_stream(w->a, p, s2);
        WCHECK(w, st == CARVE_OK);
        w->cross++;
    }
    w->live[w->nlive++] = b;
    w->allocs++;
}

static void checkpoint(worker *w) {
    for (int i = 0; i < w->nstreams; i++) {
        unsigned long long m = gpu_counter_take(w->counters[i], w->streams[i]);
        if (m)
            fprintf(stderr, "FAIL: %llu mismatching words on stream %d before step %ld\n", m, i, w->steps);
        w->mismatches += m;
    }
}

static void run_steps(worker *w, long steps) {
    for (long i = 0; i < steps; i++) {
        w->steps = i;
        if (w->nlive < w->max_live && (w->nlive == 0 || test_rng_below(&w->rng, 100) < 55))
            step_alloc(w);
        else
            retire(w, (size_t)test_rng_below(&w->rng, w->nlive));
        carve_stats st;
        if (carve_get_stats(w->a, &st) == CARVE_OK)
            WCHECK(w, st.reserved_bytes <= st.limit_bytes);
        if (i % 250 == 249)
            checkpoint(w);
    }
    checkpoint(w);
}

/* Books of all workers against carve's statistics; no worker may run. */
static void check_books(carve_arena *a, worker *ws, int n) {
    uint64_t live = 0;
    size_t alloc = 0, req = 0;
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < ws[i].nlive; j++) {
            live++;
            alloc += gpu_rounded(ws[i].live[j].size);
            req += ws[i].live[j].size;
        }
    carve_stats s = gpu_stats(a);
    CHECK(s.num_live == live);
    CHECK(s.allocated_bytes == alloc);
    CHECK(s.requested_bytes == req);
    CHECK(carve_memory_allocated(a) == alloc);
    CHECK(s.num_allocs - s.num_frees == s.num_live);
    CHECK(s.reserved_bytes <= s.limit_bytes);
    CHECK(s.reserved_bytes >= s.allocated_bytes);
    CHECK(s.reserved_bytes == carve_memory_reserved(a));
    CHECK_ARENA(a);
}

/* Verify every live buffer of every worker (each on its stream), then
 * free them all. */
static void verify_and_free_all(carve_arena *a, worker *ws, int n) {
    for (int i = 0; i < n; i++) {
        worker *w = &ws[i];
        for (size_t j = 0; j < w->nlive; j++)
            gpu_verify(w->live[j].p, w->live[j].size, w->live[j].id, w->counters[stream_index(w, w->live[j].s)].dev,
                       w->live[j].s);
        checkpoint(w);
        CHECK(w->mismatches == 0);
    }
    for (int i = 0; i < n; i++)
        while (ws[i].nlive)
            retire(&ws[i], ws[i].nlive - 1);
    CUDA_CHECK(cudaDeviceSynchronize());
    carve_stats s = gpu_stats(a);
    CHECK(s.num_live == 0);
    CHECK(s.allocated_bytes == 0);
    CHECK_ARENA(a);
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0);
    s = gpu_stats(a);
    CHECK(s.num_segments == 0);
    CHECK(s.num_backend_allocs == s.num_backend_frees);
}

static carve_arena *stress_arena(const char *name, size_t limit) { return gpu_arena(0, 1, 0, limit, name); }

static void report(const char *phase, worker *ws, int n, carve_arena *a) {
    unsigned long allocs = 0, frees = 0, ooms = 0, skips = 0, cross = 0, errors = 0;
    for (int i = 0; i < n; i++) {
        allocs += ws[i].allocs;
        frees += ws[i].frees;
        ooms += ws[i].ooms;
        skips += ws[i].oom_skips;
        cross += ws[i].cross;
        errors += ws[i].errors;
    }
    carve_stats s = gpu_stats(a);
    char b1[32], b2[32];
    printf("  %s: %lu allocs, %lu frees, %lu OOMs under the limit (%lu skipped), %lu second-stream uses; "
           "peak allocated %s, peak reserved %s, %llu segments reserved ever\n",
           phase, allocs, frees, ooms, skips, cross, gpu_fmt(b1, sizeof(b1), s.allocated_bytes_peak),
           gpu_fmt(b2, sizeof(b2), s.reserved_bytes_peak), (unsigned long long)s.num_backend_allocs);
    CHECK(errors == 0);
}

static void worker_init(worker *w, carve_arena *a, uint64_t seed, int nstreams, int first_counter, size_t max_live) {
    memset(w, 0, sizeof(*w));
    w->a = a;
    test_rng_seed(&w->rng, seed);
    w->nstreams = nstreams;
    for (int i = 0; i < nstreams; i++) {
        w->streams[i] = gpu_stream_new();
        w->counters[i] = gpu_counter_of(0, first_counter + i);
    }
    CUDA_CHECK(cudaEventCreateWithFlags(&w->ev, cudaEventDisableTiming));
    w->max_live = max_live;
    w->live = calloc(max_live, sizeof(buf));
    if (!w->live)
        abort();
}

static void worker_fini(worker *w) {
    for (int i = 0; i < w->nstreams; i++)
        gpu_stream_free(w->streams[i]);
    CUDA_CHECK(cudaEventDestroy(w->ev));
    free(w->live);
}

/* ---- phase 1 ---- */

static void case_one_thread_four_streams(void) {
    carve_arena *a = stress_arena("stress-streams", 512 * MiB);
    worker w;
    worker_init(&w, a, test_seed(0x5eed01), NSTREAMS, 0, 48);
    w.cross_uses = 1;
    long steps = gpu_scale(4000, 400);
    for (long done = 0; done < steps; done += 500) {
        run_steps(&w, steps - done < 500 ? steps - done : 500);
        check_books(a, &w, 1);
        CHECK(w.mismatches == 0);
        CHECK(reg_overlaps == 0);
    }
    verify_and_free_all(a, &w, 1);
    report("1 thread x 4 streams", &w, 1, a);
    CHECK(reg_overlaps == 0);
    carve_arena_destroy(a);
    worker_fini(&w);
}

/* ---- phase 2 ---- */

static void *thread_main(void *arg) {
    worker *w = arg;
    run_steps(w, w->total);
    return NULL;
}

static void case_four_threads_shared_arena(void) {
    carve_arena *a = stress_arena("stress-threads", 768 * MiB);
    worker ws[NTHREADS];
    pthread_t th[NTHREADS];
    long steps = gpu_scale(2000, 200);
    for (int i = 0; i < NTHREADS; i++) {
        worker_init(&ws[i], a, test_seed(0x5eed01) + 1000 + (uint64_t)i, 1, NSTREAMS + i, 32);
        ws[i].total = steps;
    }
    for (int i = 0; i < NTHREADS; i++)
        CHECK(pthread_create(&th[i], NULL, thread_main, &ws[i]) == 0);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < NTHREADS; i++)
        CHECK(ws[i].mismatches == 0);
    CHECK(reg_overlaps == 0);
    check_books(a, ws, NTHREADS);
    verify_and_free_all(a, ws, NTHREADS);
    report("4 threads x 1 stream, shared arena", ws, NTHREADS, a);
    CHECK(reg_overlaps == 0);
    carve_arena_destroy(a);
    for (int i = 0; i < NTHREADS; i++)
        worker_fini(&ws[i]);
}

int main(void) {
    gpu_start("gpu_stress", 1);
    GPU_CASE(case_one_thread_four_streams);
    GPU_CASE(case_four_threads_shared_arena);
    free(reg);
    return gpu_finish();
}
