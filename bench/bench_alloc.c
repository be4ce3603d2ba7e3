/*
 * bench_alloc.c — the allocator's own speed and footprint, on the VIRTUAL
 * backend so it runs on any machine (no GPU, no memory behind the arena).
 *
 * Workloads (targets from the project's issues, checked here, never in tests):
 *   pair     alloc+free of one size (256 B, 64 KiB, 2 MiB, 64 MiB)   <= 40 ns/pair
 *   churn    1000 live buffers; each step frees a random one and allocates a
 *            log-uniform size in 256 B..16 MiB                         <= 60 ns/op,
 *            footprint = reserved peak / requested peak                <= 1.10
 *   threads  8 threads, a stream each, churn                        >= 20 M ops/s
 *   scaling  the threads workload with 1, 2, 4, 8, 16 threads: each rate
 *            against 0.8 x T x the one-thread rate
 * each in the default mode (carve_config_init: virtual-memory mode on this
 * backend) and in segments mode (vmm=0). The granule maps and unmaps per
 * operation of the timed part are counted too (on a GPU each costs tens of
 * microseconds: bench/vmm_costs.cu), and the events recorded and queried
 * (each a driver call on a GPU), and the driver ledger's modeled time per
 * operation (what those calls would cost on the GPU of the cost table,
 * lib/backend/driver_costs.h): the host time measured here plus that is
 * the modeled time of an operation on a GPU.
 * Method: warm-up, many repetitions, medians; random sizes are drawn before
 * the timed loop.
 * Usage: bench_alloc [--quick] [--json FILE] [--threads N] [--segments|--vmm] [--only WORKLOAD]
 * (--segments / --vmm: only that mode; --only pair|churn|threads|scaling runs one
 * workload: bench/count_instructions.sh uses it to count the instructions of
 * one alloc+free pair under callgrind).
 */

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "carve.h"

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static uint64_t rng_state = 0x243F6A8885A308D3ull;
static uint64_t rng(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static size_t loguniform(uint64_t *s, double lo, double hi) {
    double u = (double)(rng(s) >> 11) / 9007199254740992.0;
    return (size_t)exp(log(lo) + u * (log(hi) - log(lo)));
}

static int g_vmm = CARVE_VMM_AUTO; /* the mode of the arenas made (carve_config.vmm) */

static carve_arena *new_arena(void) {
    carve_config c;
    carve_config_init(&c);
    c.backend = CARVE_BACKEND_VIRTUAL;
    c.vmm = g_vmm;
    c.name = "bench";
    carve_arena *a = NULL;
    if (carve_arena_create(&c, &a) != CARVE_OK) {
        fprintf(stderr, "arena: %s\n", carve_last_error(NULL));
        exit(1);
    }
    return a;
}

#define DIE_IF(x)                                                                  \
    do {                                                                           \
        if (x) {                                                                   \
            fprintf(stderr, "bench_alloc: %s failed at line %d: %s\n", #x, __LINE__, \
                    carve_last_error(a));                                          \
            exit(1);                                                               \
        }                                                                          \
    } while (0)

/* ---- pair ---- */
static double bench_pair(size_t size, int reps, int iters) {
    carve_arena *a = new_arena();
    double *t = malloc(sizeof(double) * (size_t)reps);
    void *p;
    for (int i = 0; i < iters; i++) { /* warm-up: the span is cached from here on */
        DIE_IF(carve_alloc(a, size, NULL, &p) != CARVE_OK);
        DIE_IF(carve_free(a, p) != CARVE_OK);
    }
    for (int r = 0; r < reps; r++) {
        double t0 = now_ns();
        for (int i = 0; i < iters; i++) {
            carve_alloc(a, size, NULL, &p);
            carve_free(a, p);
        }
        t[r] = (now_ns() - t0) / iters;
    }
    double m = median(t, reps);
    free(t);
    carve_arena_destroy(a);
    return m;
}

/* Same loop through the C library's malloc, for scale. */
static double bench_pair_malloc(size_t size, int reps, int iters) {
    double *t = malloc(sizeof(double) * (size_t)reps);
    for (int r = 0; r < reps; r++) {
        double t0 = now_ns();
        for (int i = 0; i < iters; i++) {
            void *volatile p = malloc(size);
            free(p);
        }
        t[r] = (now_ns() - t0) / iters;
    }
    double m = median(t, reps);
    free(t);
    return m;
}

/* ---- churn ---- */
typedef struct churn_result {
    double ns_per_op;
    double ops_per_s;
    double footprint;
    size_t reserved_peak, requested_peak;
    double backend_allocs_per_op; /* timed steps: segments reserved (granules mapped) per operation */
    double backend_frees_per_op;  /* ... segments released (granules unmapped) per operation */
    double events_per_op;         /* ... events recorded per operation (each a driver call on a GPU) */
    double queries_per_op;        /* ... events asked about per operation */
    double driver_ns_per_op;      /* ... modeled driver time per operation (carve_stats.driver_model_ns:
                                     the calls the CUDA backend would make, by the cost table) */
} churn_result;

/* The driver work between statistics s0 and s1, over `ops` operations of all
 * repetitions, added to res's per-operation counts. */
static void add_driver_work(churn_result *res, const carve_stats *s0, const carve_stats *s1, double ops) {
    res->backend_allocs_per_op += (double)(s1->num_backend_allocs - s0->num_backend_allocs) / ops;
    res->backend_frees_per_op += (double)(s1->num_backend_frees - s0->num_backend_frees) / ops;
    res->events_per_op += (double)(s1->num_event_records - s0->num_event_records) / ops;
    res->queries_per_op += (double)(s1->num_event_queries - s0->num_event_queries) / ops;
    res->driver_ns_per_op += (double)(s1->driver_model_ns - s0->driver_model_ns) / ops;
}

typedef struct churn_plan {
    size_t live;       /* buffers kept live */
    size_t steps;      /* free+alloc steps timed */
    size_t *sizes;     /* live + steps sizes */
    uint32_t *victims; /* steps indices */
} churn_plan;

static void plan_make(churn_plan *pl, size_t live, size_t steps, uint64_t seed) {
    pl->live = live;
    pl->steps = steps;
    pl->sizes = malloc(sizeof(size_t) * (live + steps));
    pl->victims = malloc(sizeof(uint32_t) * steps);
    for (size_t i = 0; i < live + steps; i++)
        pl->sizes[i] = loguniform(&seed, 256, 16 << 20);
    for (size_t i = 0; i < steps; i++)
        pl->victims[i] = (uint32_t)(rng(&seed) % live);
}

static void plan_free(churn_plan *pl) {
    free(pl->sizes);
    free(pl->victims);
}

/* One churn run on arena a (stream s); returns seconds for the steps, and
 * the backend calls they made in *st1 - *st0. */
static double churn_run(carve_arena *a, carve_stream s, const churn_plan *pl, carve_stats *st0, carve_stats *st1) {
    void **buf = malloc(sizeof(void *) * pl->live);
    for (size_t i = 0; i < pl->live; i++)
        DIE_IF(carve_alloc(a, pl->sizes[i], s, &buf[i]) != CARVE_OK);
    const size_t *sz = pl->sizes + pl->live;
    carve_get_stats(a, st0);
    double t0 = now_ns();
    for (size_t i = 0; i < pl->steps; i++) {
        uint32_t v = pl->victims[i];
        carve_free(a, buf[v]);
        if (carve_alloc(a, sz[i], s, &buf[v]) != CARVE_OK)
            DIE_IF(1);
    }
    double dt = (now_ns() - t0) * 1e-9;
    carve_get_stats(a, st1);
    for (size_t i = 0; i < pl->live; i++)
        carve_free(a, buf[i]);
    free(buf);
    return dt;
}

static churn_result bench_churn(int reps, size_t steps) {
    churn_result res = {0};
    double *t = malloc(sizeof(double) * (size_t)reps);
    double worst_fp = 0;
    for (int r = 0; r < reps; r++) {
        churn_plan pl;
        plan_make(&pl, 1000, steps, 1000 + (uint64_t)r);
        carve_arena *a = new_arena();
        carve_stats s0, s1;
        double dt = churn_run(a, NULL, &pl, &s0, &s1);
        add_driver_work(&res, &s0, &s1, 2.0 * (double)steps * reps);
        carve_stats st;
        carve_get_stats(a, &st);
        double fp = (double)st.reserved_bytes_peak / (double)st.requested_bytes_peak;
        if (fp > worst_fp) {
            worst_fp = fp;
            res.reserved_peak = st.reserved_bytes_peak;
            res.requested_peak = st.requested_bytes_peak;
        }
        t[r] = dt * 1e9 / (2.0 * (double)steps);
        carve_arena_destroy(a);
        plan_free(&pl);
    }
    res.ns_per_op = median(t, reps);
    res.footprint = worst_fp;
    free(t);
    return res;
}

/* ---- threads ---- */
typedef struct thread_arg {
    carve_arena *arena;
    carve_stream stream;
    churn_plan plan;
    pthread_barrier_t *start;
    double seconds;
} thread_arg;

static void *thread_main(void *p) {
    thread_arg *t = p;
    carve_arena *a = t->arena;
    void **buf = malloc(sizeof(void *) * t->plan.live);
    for (size_t i = 0; i < t->plan.live; i++)
        DIE_IF(carve_alloc(a, t->plan.sizes[i], t->stream, &buf[i]) != CARVE_OK);
    const size_t *sz = t->plan.sizes + t->plan.live;
    pthread_barrier_wait(t->start);
    double t0 = now_ns();
    for (size_t i = 0; i < t->plan.steps; i++) {
        uint32_t v = t->plan.victims[i];
        carve_free(a, buf[v]);
        if (carve_alloc(a, sz[i], t->stream, &buf[v]) != CARVE_OK)
            DIE_IF(1);
    }
    t->seconds = (now_ns() - t0) * 1e-9;
    pthread_barrier_wait(t->start);
    for (size_t i = 0; i < t->plan.live; i++)
        carve_free(a, buf[i]);
    free(buf);
    return NULL;
}

static churn_result bench_threads(int nthreads, int reps, size_t steps) {
    churn_result res = {0};
    double *rate = malloc(sizeof(double) * (size_t)reps);
    for (int r = 0; r < reps; r++) {
        carve_arena *a = new_arena();
        pthread_barrier_t bar;
        pthread_barrier_init(&bar, NULL, (unsigned)nthreads + 1);
        thread_arg *ta = calloc((size_t)nthreads, sizeof(*ta));
        pthread_t *th = calloc((size_t)nthreads, sizeof(*th));
        for (int i = 0; i < nthreads; i++) {
            ta[i].arena = a;
            ta[i].stream = (carve_stream)(uintptr_t)(0x1000 * (i + 1));
            ta[i].start = &bar;
            plan_make(&ta[i].plan, 1000, steps, 77 + (uint64_t)(r * nthreads + i));
            pthread_create(&th[i], NULL, thread_main, &ta[i]);
        }
        carve_stats s0, s1;
        pthread_barrier_wait(&bar); /* every thread has filled its buffers */
        carve_get_stats(a, &s0);
        pthread_barrier_wait(&bar); /* every thread has run its steps */
        carve_get_stats(a, &s1);
        double slowest = 0;
        for (int i = 0; i < nthreads; i++) {
            pthread_join(th[i], NULL);
            if (ta[i].seconds > slowest)
                slowest = ta[i].seconds;
            plan_free(&ta[i].plan);
        }
        rate[r] = 2.0 * (double)steps * nthreads / slowest;
        carve_stats st;
        carve_get_stats(a, &st);
        double ops = 2.0 * (double)steps * nthreads;
        add_driver_work(&res, &s0, &s1, ops * reps);
        double fp = (double)st.reserved_bytes_peak / (double)st.requested_bytes_peak;
        if (fp > res.footprint) {
            res.footprint = fp;
            res.reserved_peak = st.reserved_bytes_peak;
            res.requested_peak = st.requested_bytes_peak;
        }
        pthread_barrier_destroy(&bar);
        free(ta);
        free(th);
        carve_arena_destroy(a);
    }
    res.ops_per_s = median(rate, reps);
    free(rate);
    return res;
}

static const char *verdict(int ok) { return ok ? "meets" : "MISSES"; }

static const char *mode_name(int vmm) { return vmm == 0 ? "segments" : vmm == 1 ? "vmm=1" : "default"; }

typedef struct mode_result {
    double pair[4], mpair[4];
    churn_result churn, threads;
} mode_result;

/* Thread counts 1, 2, 4, ... up to max (and max itself): each rate against
 * 0.8 x T x the one-thread rate. */
static void run_scaling(int max, int reps, size_t steps, FILE *json) {
    double one = 0;
    printf("%-28s %12s %12s %10s\n", "threads (scaling)", "M ops/s", ">= 0.8 T x1", "");
    for (int t = 1; t <= max; t = t * 2 > max && t < max ? max : t * 2) {
        churn_result r = bench_threads(t, reps, steps);
        if (t == 1)
            one = r.ops_per_s;
        double want = 0.8 * t * one;
        printf("  %-2d thread%s (%s) %*s %9.2f M/s %9.2f M/s %8s   (footprint %.3f, maps %.4f unmaps %.4f per op, "
               "driver %.1f ns per op modeled)\n", t,
               t == 1 ? " " : "s", mode_name(g_vmm), 9 - (int)strlen(mode_name(g_vmm)), "", r.ops_per_s / 1e6,
               want / 1e6, t == 1 ? "" : verdict(r.ops_per_s >= want), r.footprint, r.backend_allocs_per_op,
               r.backend_frees_per_op, r.driver_ns_per_op);
        if (json)
            fprintf(json, "%s{\"mode\":\"%s\",\"threads\":%d,\"ops_per_s\":%.0f,\"footprint\":%.4f,"
                          "\"maps_per_op\":%.5f,\"unmaps_per_op\":%.5f,\"driver_ns_per_op\":%.2f}",
                    t == 1 ? "" : ",", mode_name(g_vmm), t, r.ops_per_s, r.footprint, r.backend_allocs_per_op,
                    r.backend_frees_per_op, r.driver_ns_per_op);
        if (t == max)
            break;
    }
}

int main(int argc, char **argv) {
    int quick = 0, nthreads = 8, forced = 0;
    const char *json = NULL, *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json = argv[++i];
        else if (!strcmp(argv[i], "--vmm"))
            g_vmm = 1, forced = 1;
        else if (!strcmp(argv[i], "--segments"))
            g_vmm = 0, forced = 1;
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            nthreads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else {
            fprintf(stderr, "usage: bench_alloc [--quick] [--json FILE] [--threads N] [--segments|--vmm] "
                            "[--only pair|churn|threads|scaling]\n");
            return 2;
        }
    }
    if (nthreads < 1 || nthreads > 1024) {
        fprintf(stderr, "bench_alloc: --threads must be 1..1024\n");
        return 2;
    }
    if (only && strcmp(only, "pair") && strcmp(only, "churn") && strcmp(only, "threads") && strcmp(only, "scaling")) {
        fprintf(stderr, "bench_alloc: --only takes pair, churn, threads or scaling, not '%s'\n", only);
        return 2;
    }
    int reps = quick ? 5 : 31, iters = quick ? 20000 : 200000;
    size_t steps = quick ? 100000 : 2000000, tsteps = quick ? 50000 : 1000000;
    int creps = quick ? 3 : 11, treps = quick ? 3 : 7;
    const size_t sizes[] = {256, 64 << 10, 2 << 20, 64 << 20};
    const char *names[] = {"256 B", "64 KiB", "2 MiB", "64 MiB"};
    if (only) { /* one workload, no JSON: for instruction counts and profiles */
        if (!strcmp(only, "pair")) {
            for (int i = 0; i < 4; i++)
                printf("pair %zu B (%s): %.1f ns\n", sizes[i], mode_name(g_vmm), bench_pair(sizes[i], reps, iters));
            printf("alloc+free pairs: %lld\n", 4LL * (iters + (long long)reps * iters));
        } else if (!strcmp(only, "churn")) {
            churn_result r = bench_churn(creps, steps);
            printf("churn (%s): %.1f ns/op, footprint %.3f, %.5f maps, %.5f unmaps, %.5f event records and %.5f "
                   "queries per op, driver %.1f ns per op modeled\n", mode_name(g_vmm), r.ns_per_op, r.footprint,
                   r.backend_allocs_per_op, r.backend_frees_per_op, r.events_per_op, r.queries_per_op,
                   r.driver_ns_per_op);
            /* Each repetition: 1000 live allocations, steps alloc+free pairs, 1000 frees. */
            printf("alloc+free pairs: %lld\n", (long long)creps * (1000 + (long long)steps));
        } else if (!strcmp(only, "threads")) {
            churn_result r = bench_threads(nthreads, treps, tsteps);
            printf("threads (%d, %s): %.1f M ops/s, footprint %.3f, %.5f maps, %.5f unmaps, %.5f event records and "
                   "%.5f queries per op, driver %.1f ns per op modeled\n", nthreads, mode_name(g_vmm),
                   r.ops_per_s / 1e6, r.footprint, r.backend_allocs_per_op, r.backend_frees_per_op, r.events_per_op,
                   r.queries_per_op, r.driver_ns_per_op);
        } else {
            run_scaling(nthreads, treps, tsteps, NULL);
        }
        return 0;
    }
    (void)rng_state;
    int modes[2] = {forced ? g_vmm : CARVE_VMM_AUTO, 0}, nmodes = forced ? 1 : 2;
    mode_result mr[2];
    FILE *f = NULL;
    if (json && !(f = fopen(json, "w"))) {
        perror(json);
        return 1;
    }
    printf("carve %s bench_alloc (virtual backend)%s\n", carve_version(), quick ? " --quick" : "");
    printf("method: median of %d repetitions x %d pairs (pair), %d x %zu steps (churn), %d x %zu steps x "
           "%d threads; modes: default (carve_config_init: virtual-memory mode here)%s\n\n", reps, iters, creps,
           steps, treps, tsteps, nthreads, forced ? "" : " and segments (vmm=0)");
    if (f)
        fprintf(f, "{\"version\":\"%s\",\"quick\":%s,\"threads\":%d,\"modes\":[", carve_version(),
                quick ? "true" : "false", nthreads);
    for (int m = 0; m < nmodes; m++) {
        g_vmm = modes[m];
        mode_result *r = &mr[m];
        printf("%-28s %12s %12s %10s   mode: %s\n", "workload", "carve", "target", "", mode_name(g_vmm));
        for (int i = 0; i < 4; i++) {
            r->pair[i] = bench_pair(sizes[i], reps, iters);
            r->mpair[i] = bench_pair_malloc(sizes[i], reps, iters / 4);
            printf("pair %-23s %9.1f ns %9s ns %10s   (glibc malloc+free: %.1f ns)\n", names[i], r->pair[i], "<= 40",
                   verdict(r->pair[i] <= 40), r->mpair[i]);
        }
        churn_result ch = r->churn = bench_churn(creps, steps);
        printf("%-28s %9.1f ns %9s ns %10s\n", "churn ns/op", ch.ns_per_op, "<= 60", verdict(ch.ns_per_op <= 60));
        printf("%-28s %9.1f ns %12s %10s   (modeled driver time per op: %.1f ns, %s)\n", "churn ns/op modeled",
               ch.ns_per_op + ch.driver_ns_per_op, "", "", ch.driver_ns_per_op, carve_driver_costs_source());
        printf("%-28s %12.3f %12s %10s   (reserved peak %.1f MiB / requested peak %.1f MiB, worst run)\n",
               "churn footprint", ch.footprint, "<= 1.10", verdict(ch.footprint <= 1.10), ch.reserved_peak / 1048576.0,
               ch.requested_peak / 1048576.0);
        if (g_vmm != 0)
            printf("%-28s %12.5f %12s %10s   (and %.5f unmaps per op)\n", "churn granule maps per op",
                   ch.backend_allocs_per_op, "", "", ch.backend_frees_per_op);
        churn_result th = r->threads = bench_threads(nthreads, treps, tsteps);
        printf("%-28s %9.1f M/s %9s M/s %8s\n", "threads aggregate ops/s", th.ops_per_s / 1e6, ">= 20",
               verdict(th.ops_per_s >= 20e6));
        printf("%-28s %12.3f   (modeled driver time per op: %.1f ns)\n", "threads footprint", th.footprint,
               th.driver_ns_per_op);
        printf("%-28s %12.5f %12s %10s   (threads: %.5f; queries per op %.5f and %.5f)\n\n", "churn event records per op",
               ch.events_per_op, "", "", th.events_per_op, ch.queries_per_op, th.queries_per_op);
        if (f) {
            fprintf(f, "%s{\"mode\":\"%s\",\"pair_ns\":{", m ? "," : "", mode_name(g_vmm));
            for (int i = 0; i < 4; i++)
                fprintf(f, "%s\"%zu\":%.2f", i ? "," : "", sizes[i], r->pair[i]);
            fprintf(f, "},\"malloc_pair_ns\":{");
            for (int i = 0; i < 4; i++)
                fprintf(f, "%s\"%zu\":%.2f", i ? "," : "", sizes[i], r->mpair[i]);
            fprintf(f,
                    "},\"churn_ns_per_op\":%.2f,\"churn_footprint\":%.4f,\"churn_reserved_peak\":%zu,"
                    "\"churn_requested_peak\":%zu,\"churn_maps_per_op\":%.5f,\"churn_unmaps_per_op\":%.5f,"
                    "\"churn_events_per_op\":%.5f,\"churn_queries_per_op\":%.5f,\"churn_driver_ns_per_op\":%.2f,"
                    "\"threads_ops_per_s\":%.0f,\"threads_footprint\":%.4f,\"threads_maps_per_op\":%.5f,"
                    "\"threads_events_per_op\":%.5f,\"threads_queries_per_op\":%.5f,"
                    "\"threads_driver_ns_per_op\":%.2f}",
                    ch.ns_per_op, ch.footprint, ch.reserved_peak, ch.requested_peak, ch.backend_allocs_per_op,
                    ch.backend_frees_per_op, ch.events_per_op, ch.queries_per_op, ch.driver_ns_per_op, th.ops_per_s,
                    th.footprint, th.backend_allocs_per_op, th.events_per_op, th.queries_per_op, th.driver_ns_per_op);
        }
    }
    if (f) {
        fprintf(f, "]}\n");
        fclose(f);
    }
    return 0;
}
