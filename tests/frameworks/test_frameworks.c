/*
 * test_frameworks.c — the framework entry points (include/carve_frameworks.h)
 * on the HOST backend: the routing stack, PyTorch's and CuPy's callbacks,
 * frees on other threads, retired arenas destroyed by their last free, the
 * hooks, the recorder (through a real trace writer, replayed into an SVG),
 * and many threads routing, freeing across threads and retiring at once.
 *
 * The one idea: HOST arenas hand out real host memory, so every routed
 * buffer can be written, and carve_buffer_info / carve_route_known tell
 * exactly which arena a callback used and whether a retired arena is gone.
 * Device-dependent paths (the default arenas) are checked for their error
 * without a GPU and for success with one.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "carve_frameworks.h"
#include "carve_trace.h"
#include "engine/types.h"
#include "test_util.h"

#define MiB ((size_t)1 << 20)

static int contains(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

static carve_arena *host_arena(size_t limit) { return test_arena(CARVE_BACKEND_HOST, 1, 0, limit); }

static void test_stack(void) {
    carve_arena *a = host_arena(0), *b = host_arena(0);
    CHECK(carve_route_current() == NULL);
    CHECK_ST(NULL, carve_route_pop(), CARVE_ERR_INVALID);
    CHECK(contains(carve_last_error(NULL), "routes to no arena"));
    CHECK_ST(NULL, carve_route_push(NULL), CARVE_ERR_INVALID);
    CHECK_OK(NULL, carve_route_push(a));
    CHECK(carve_route_current() == a);
    CHECK(carve_route_known(a));
    CHECK(!carve_route_known(b));
    CHECK_OK(NULL, carve_route_push(b));
    CHECK(carve_route_current() == b);
    CHECK_OK(NULL, carve_route_pop());
    CHECK(carve_route_current() == a);
    CHECK_OK(NULL, carve_route_pop());
    CHECK(carve_route_current() == NULL);

    /* The stack is bounded. */
    int pushed = 0;
    while (carve_route_push(a) == CARVE_OK && pushed < 1000)
        pushed++;
    CHECK(pushed == CARVE_ROUTE_DEPTH);
    CHECK(contains(carve_last_error(NULL), "pop one first"));
    for (int i = 0; i < pushed; i++)
        CHECK_OK(NULL, carve_route_pop());
    CHECK(carve_route_current() == NULL);

    CHECK_OK(NULL, carve_route_forget(a));
    CHECK_OK(NULL, carve_route_forget(b));
    CHECK(!carve_route_known(a) && !carve_route_known(b));
    CHECK_ST(NULL, carve_route_forget(a), CARVE_ERR_INVALID);
    CHECK(contains(carve_last_error(NULL), "not registered"));
    carve_arena_destroy(a);
    carve_arena_destroy(b);
}

static void test_torch_callbacks(void) {
    carve_arena *a = host_arena(8 * MiB), *b = host_arena(0);
    carve_stream s = (carve_stream)(uintptr_t)0x40;
    CHECK_OK(NULL, carve_route_push(a));
    void *p = carve_torch_alloc(1000, 0, NULL);
    void *q = carve_torch_alloc(3 * MiB, 0, s);
    CHECK(p != NULL && q != NULL);
    size_t size = 0;
    carve_stream got = NULL;
    CHECK_OK(a, carve_buffer_info(a, p, &size, &got));
    CHECK(size == 1000 && got == NULL);
    CHECK_OK(a, carve_buffer_info(a, q, &size, &got));
    CHECK(size == 3 * MiB && got == s);
    CHECK_ST(b, carve_buffer_info(b, p, NULL, NULL), CARVE_ERR_BAD_POINTER);
    memset(p, 0x5a, 1000); /* host memory: really there */
    memset(q, 0xa5, 3 * MiB);

    /* A nested route wins, and popping it goes back. */
    CHECK_OK(NULL, carve_route_push(b));
    void *r = carve_torch_alloc(4096, 0, NULL);
    CHECK(r != NULL && carve_buffer_info(b, r, NULL, NULL) == CARVE_OK);
    CHECK_OK(NULL, carve_route_pop());
    CHECK(carve_route_current() == a);

    /* Size 0 gives NULL, a negative size is refused and named. */
    CHECK(carve_torch_alloc(0, 0, NULL) == NULL);
    CHECK(carve_torch_alloc(-5, 0, NULL) == NULL);
    CHECK(contains(carve_last_error(NULL), "negative size -5"));

    /* Past the arena's cap: NULL (PyTorch's out-of-memory error), and the
     * engine's explanation is on carve_last_error(NULL). */
    CHECK(carve_torch_alloc((ssize_t)(64 * MiB), 0, NULL) == NULL);
    CHECK(contains(carve_last_error(NULL), "out of memory"));
    carve_stats st;
    CHECK_OK(a, carve_get_stats(a, &st));
    CHECK(st.num_ooms == 1 && st.num_live == 2);

    /* The frees find the owner whatever is routed now, with size and stream
     * as PyTorch recorded them (ignored). */
    CHECK_OK(NULL, carve_route_pop());
    carve_torch_free(r, 4096, 0, NULL);
    CHECK(carve_memory_allocated(b) == 0);
    carve_torch_free(q, 3 * MiB, 0, s);
    carve_torch_free(p, 1000, 0, NULL);
    CHECK(carve_memory_allocated(a) == 0);
    CHECK_ARENA(a);
    CHECK_ARENA(b);

    /* A stray free changes nothing and says why. */
    carve_torch_free((void *)(uintptr_t)0x123400, 16, 0, NULL);
    CHECK(contains(carve_last_error(NULL), "not a live buffer of any arena carve routes to"));
    CHECK_ST(NULL, carve_route_free(p, 0), CARVE_ERR_BAD_POINTER); /* double free */
    CHECK_OK(NULL, carve_route_free(NULL, 0));
    carve_arena *own = a;
    CHECK_ST(NULL, carve_route_owner(p, 0, &own), CARVE_ERR_BAD_POINTER);
    CHECK(own == NULL);

    /* An explicit arena wins over the route and is registered. */
    carve_arena *c = host_arena(0);
    void *x = NULL;
    CHECK_OK(NULL, carve_route_alloc(c, 512, 0, NULL, &x));
    CHECK(carve_route_known(c));
    carve_arena *owner = NULL;
    CHECK_OK(NULL, carve_route_owner(x, 7, &owner));
    CHECK(owner == c);
    CHECK_ST(NULL, carve_route_alloc(c, 512, 0, NULL, NULL), CARVE_ERR_INVALID);

    /* record_stream reaches the owner's carve_record_stream. */
    CHECK_OK(NULL, carve_route_record_stream(x, 0, s));
    carve_torch_record_stream(x, s);
    CHECK_ST(NULL, carve_route_record_stream((void *)(uintptr_t)0x999900, 0, s), CARVE_ERR_BAD_POINTER);
    CHECK_OK(NULL, carve_route_free(x, 0));

    /* Forgotten: its buffers can no longer be freed here. */
    CHECK_OK(NULL, carve_route_alloc(c, 512, 0, NULL, &x));
    CHECK_OK(NULL, carve_route_forget(c));
    CHECK_ST(NULL, carve_route_free(x, 0), CARVE_ERR_BAD_POINTER);
    CHECK_OK(c, carve_free(c, x));

    CHECK_OK(NULL, carve_route_forget(a));
    CHECK_OK(NULL, carve_route_forget(b));
    carve_arena_destroy(a);
    carve_arena_destroy(b);
    carve_arena_destroy(c);
}

/* Replacing a device's route with an arena not yet registered registers it,
 * which may move the registry: the route in place must not be read from
 * where the registry was. Run first, the route is the registry's first
 * entry when it grows (8, 16, 32, 64 entries), the entry whose memory the
 * allocator reuses at once; under AddressSanitizer any entry is caught. */
static void test_route_device_registry_grows(void) {
    enum { N = 70 };
    carve_arena *r = host_arena(0), *n[N];
    CHECK_OK(NULL, carve_route_device(0, NULL, r));
    for (int i = 0; i < N; i++) {
        n[i] = host_arena(0);
        CHECK(!carve_route_known(n[i]));
        CHECK_OK(NULL, carve_route_device(0, r, n[i])); /* registers n[i] */
        CHECK(carve_route_device_current(0) == n[i] && carve_route_known(n[i]));
        CHECK_OK(NULL, carve_route_device(0, n[i], r));
    }
    CHECK_OK(NULL, carve_route_device(0, r, NULL));
    for (int i = 0; i < N; i++) {
        CHECK_OK(NULL, carve_route_forget(n[i]));
        carve_arena_destroy(n[i]);
    }
    CHECK_OK(NULL, carve_route_forget(r));
    carve_arena_destroy(r);
}

/* A routed free finds its owner with one lock-free lookup per registered
 * arena: it never takes another arena's heap lock, which that arena holds
 * while it grows, is checked or is snapshotted. Arena a, registered first,
 * is looked at first; its heap lock is held here until the free of b's
 * buffer comes back (or 5 s pass: then the free waited for it). */
typedef struct free_job {
    void *ptr;
    int done; /* atomic */
    carve_status st;
} free_job;

static void *run_free_job(void *v) {
    free_job *j = v;
    j->st = carve_route_free(j->ptr, 0);
    __atomic_store_n(&j->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void test_free_takes_no_other_heap_lock(void) {
    carve_arena *a = host_arena(0), *b = host_arena(0);
    void *pa = NULL, *pb = NULL;
    CHECK_OK(NULL, carve_route_alloc(a, 4096, 0, NULL, &pa));
    CHECK_OK(NULL, carve_route_alloc(b, 4096, 0, NULL, &pb));
    free_job j = {pb, 0, CARVE_ERR_INVALID};
    carve_mutex_lock(&a->heap.lock);
    pthread_t t;
    pthread_create(&t, NULL, run_free_job, &j);
    for (int ms = 0; ms < 5000 && !__atomic_load_n(&j.done, __ATOMIC_ACQUIRE); ms++)
        usleep(1000);
    int came_back = __atomic_load_n(&j.done, __ATOMIC_ACQUIRE);
    carve_mutex_unlock(&a->heap.lock);
    pthread_join(t, NULL);
    CHECK(came_back);
    CHECK_OK(NULL, j.st);
    CHECK(carve_memory_allocated(b) == 0);
    CHECK_OK(NULL, carve_route_free(pa, 0));
    CHECK_OK(NULL, carve_route_retire(a, NULL));
    CHECK_OK(NULL, carve_route_retire(b, NULL));
}

static void test_no_route(void) {
    /* Nothing routed: the device's default arena. */
    void *p = carve_torch_alloc(4096, 0, NULL);
    if (carve_device_count() == 0) {
        CHECK(p == NULL);
        CHECK(contains(carve_last_error(NULL), "device 0 does not exist"));
        carve_torch_set_memory_fraction(0.5, 0);
        CHECK(contains(carve_last_error(NULL), "device 0 does not exist"));
    } else {
        CHECK(p != NULL);
        carve_arena *d = NULL, *own = NULL;
        CHECK_OK(NULL, carve_device_arena(0, &d));
        CHECK_OK(NULL, carve_route_owner(p, -1, &own));
        CHECK(own == d);
        carve_torch_free(p, 4096, 0, NULL);
        CHECK(carve_memory_allocated(d) == 0);
        carve_torch_set_memory_fraction(0.5, 0); /* too late: the arena exists */
        CHECK(contains(carve_last_error(NULL), "already exists"));
    }
    carve_torch_set_memory_fraction(1.5, 0);
    CHECK(contains(carve_last_error(NULL), "1.5 is not in (0, 1]"));
}

/* ---- Frees on other threads, retired arenas ---- */

static void *free_it(void *p) {
    CHECK_OK(NULL, carve_route_free(p, 0));
    return NULL;
}

static void test_cross_thread_and_retire(void) {
    carve_arena *a = host_arena(0);
    CHECK_OK(NULL, carve_route_push(a));
    void *p1 = carve_torch_alloc(100, 0, NULL), *p2 = carve_torch_alloc(5 * MiB, 0, NULL);
    CHECK(p1 && p2);

    /* Retiring while routed is refused. */
    CHECK_ST(NULL, carve_route_retire(a, NULL), CARVE_ERR_INVALID);
    CHECK(contains(carve_last_error(NULL), "pop it first"));
    CHECK_OK(NULL, carve_route_pop());

    pthread_t t;
    pthread_create(&t, NULL, free_it, p1);
    pthread_join(t, NULL);
    CHECK(carve_memory_allocated(a) == 5 * MiB);

    int destroyed = -1;
    CHECK_OK(NULL, carve_route_retire(a, &destroyed));
    CHECK(destroyed == 0);
    CHECK(carve_route_known(a));
    CHECK_ST(NULL, carve_route_retire(a, NULL), CARVE_ERR_INVALID);
    CHECK(contains(carve_last_error(NULL), "already retired"));
    CHECK_ST(NULL, carve_route_push(a), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_route_forget(a), CARVE_ERR_INVALID);
    void *x = NULL;
    CHECK_ST(NULL, carve_route_alloc(a, 64, 0, NULL, &x), CARVE_ERR_INVALID);
    CHECK(x == NULL && contains(carve_last_error(NULL), "retired"));
    memset(p2, 1, 5 * MiB); /* still valid */

    /* The last free, on another thread, destroys it. */
    pthread_create(&t, NULL, free_it, p2);
    pthread_join(t, NULL);
    CHECK(!carve_route_known(a));

    /* An empty arena (registered or not) goes at once. */
    carve_arena *b = host_arena(0);
    destroyed = -1;
    CHECK_OK(NULL, carve_route_retire(b, &destroyed));
    CHECK(destroyed == 1 && !carve_route_known(b));
    CHECK_ST(NULL, carve_route_retire(NULL, NULL), CARVE_ERR_INVALID);
}

/* ---- CuPy's C allocator ---- */

static void test_cupy(void) {
    carve_arena *a = host_arena(0);
    carve_stream s = (carve_stream)(uintptr_t)0x77;
    CHECK_OK(NULL, carve_route_push(a));
    void *p = carve_cupy_malloc((void *)s, 4096, 0), *q = carve_cupy_malloc(NULL, 100, 0);
    CHECK(p && q);
    carve_stream got = NULL;
    CHECK_OK(a, carve_buffer_info(a, p, NULL, &got));
    CHECK(got == s);
    CHECK_OK(a, carve_buffer_info(a, q, NULL, &got));
    CHECK(got == NULL);
    CHECK(carve_cupy_malloc(NULL, 0, 0) == NULL);
    CHECK_OK(NULL, carve_route_pop());
    carve_cupy_free((void *)s, p, 0);
    carve_cupy_free(NULL, q, 0);
    CHECK(carve_memory_allocated(a) == 0);
    int destroyed = 0;
    CHECK_OK(NULL, carve_route_retire(a, &destroyed));
    CHECK(destroyed == 1);
}

/* ---- empty_cache ---- */

static void test_empty_caches(void) {
    carve_arena *a = host_arena(0);
    CHECK_OK(NULL, carve_route_push(a));
    void *p = carve_torch_alloc((ssize_t)(40 * MiB), 0, NULL);
    CHECK(p != NULL);
    CHECK_OK(NULL, carve_route_pop());
    carve_torch_free(p, 0, 0, NULL);
    CHECK(carve_memory_reserved(a) >= 40 * MiB);
    carve_torch_empty_cache();
    CHECK(carve_memory_reserved(a) == 0);
    CHECK_OK(NULL, carve_route_retire(a, NULL));
}

/* ---- Recording ---- */

typedef struct rec_log {
    int n;
    char op[64];
    uint64_t id[64], size[64];
    uint32_t stream[64];
    uint64_t t[64];
} rec_log;

static carve_status on_alloc(void *ctx, uint64_t id, uint64_t size, uint32_t stream, uint64_t t_ns) {
    rec_log *l = ctx;
    if (l->n < 64) {
        l->op[l->n] = 'a';
        l->id[l->n] = id;
        l->size[l->n] = size;
        l->stream[l->n] = stream;
        l->t[l->n++] = t_ns;
    }
    return CARVE_OK;
}

static carve_status on_free(void *ctx, uint64_t id, uint64_t t_ns) {
    rec_log *l = ctx;
    if (l->n < 64) {
        l->op[l->n] = 'f';
        l->id[l->n] = id;
        l->t[l->n++] = t_ns;
    }
    return CARVE_OK;
}

static carve_status writer_alloc(void *ctx, uint64_t id, uint64_t size, uint32_t stream, uint64_t t_ns) {
    return carve_trace_writer_alloc(ctx, id, size, stream, t_ns);
}

static carve_status writer_free(void *ctx, uint64_t id, uint64_t t_ns) {
    return carve_trace_writer_free(ctx, id, t_ns);
}

static void test_recorder(void) {
    carve_arena *a = host_arena(0);
    rec_log log;
    memset(&log, 0, sizeof(log));
    carve_stream s1 = (carve_stream)(uintptr_t)0x100, s2 = (carve_stream)(uintptr_t)0x200;

    CHECK_ST(NULL, carve_route_set_recorder(on_alloc, NULL, &log), CARVE_ERR_INVALID);
    CHECK_OK(NULL, carve_route_push(a));
    void *p0 = carve_torch_alloc(10, 0, NULL); /* not recorded: no recorder yet */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK_OK(NULL, carve_route_set_recorder(on_alloc, on_free, &log));
    void *p1 = carve_torch_alloc(1000, 0, s2);
    void *p2 = carve_torch_alloc(2000, 0, NULL);
    void *p3 = carve_cupy_malloc((void *)s1, 3000, 0);
    void *p4 = carve_torch_alloc(4000, 0, s2);
    carve_torch_free(p2, 2000, 0, NULL);
    carve_torch_free((void *)(uintptr_t)0x4242, 1, 0, NULL); /* refused: not recorded */
    CHECK_OK(NULL, carve_route_pop());
    carve_torch_free(p1, 1000, 0, s2);
    CHECK_OK(NULL, carve_route_set_recorder(NULL, NULL, NULL));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    carve_torch_free(p3, 3000, 0, s1); /* not recorded: stopped */
    carve_torch_free(p4, 4000, 0, s2);
    carve_torch_free(p0, 10, 0, NULL);

    CHECK(log.n == 6);
    CHECK(memcmp(log.op, "aaaaff", 6) == 0);
    CHECK(log.id[0] == (uintptr_t)p1 && log.size[0] == 1000 && log.stream[0] == 1);
    CHECK(log.id[1] == (uintptr_t)p2 && log.size[1] == 2000 && log.stream[1] == 0);
    CHECK(log.id[2] == (uintptr_t)p3 && log.size[2] == 3000 && log.stream[2] == 2);
    CHECK(log.id[3] == (uintptr_t)p4 && log.stream[3] == 1);
    CHECK(log.id[4] == (uintptr_t)p2 && log.id[5] == (uintptr_t)p1);
    for (int i = 1; i < log.n; i++)
        CHECK(log.t[i] >= log.t[i - 1]);
    /* Times count from the start of the recording (a trace's @<ns>), not
     * from the clock's origin: every event falls within the recording. */
    uint64_t span = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000u + (uint64_t)t1.tv_nsec - (uint64_t)t0.tv_nsec;
    for (int i = 0; i < log.n; i++)
        CHECK(log.t[i] <= span);

    /* Through a real trace writer into a file, read back, replayed and drawn. */
    char dir[] = "/tmp/carve-fw-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char trace[64], svg[64];
    snprintf(trace, sizeof(trace), "%s/t.csv", dir);
    snprintf(svg, sizeof(svg), "%s/t.svg", dir);
    carve_trace_writer *w = NULL;
    CHECK_OK(NULL, carve_trace_writer_open(trace, "test_frameworks", &w));
    CHECK_OK(NULL, carve_route_set_recorder(writer_alloc, writer_free, w));
    CHECK_OK(NULL, carve_route_push(a));
    test_rng rng;
    test_rng_seed(&rng, test_seed(12));
    void *live[32] = {0};
    int nalloc = 0, nfree = 0;
    for (int i = 0; i < 400; i++) {
        int k = (int)test_rng_below(&rng, 32);
        if (live[k]) {
            carve_torch_free(live[k], 0, 0, NULL);
            live[k] = NULL;
            nfree++;
        } else {
            carve_stream s = test_rng_below(&rng, 2) ? s1 : NULL;
            live[k] = carve_torch_alloc((ssize_t)test_rng_loguniform(&rng, 256, 4 * MiB), 0, s);
            CHECK(live[k] != NULL);
            nalloc++;
        }
    }
    for (int k = 0; k < 32; k++)
        if (live[k]) {
            carve_torch_free(live[k], 0, 0, NULL);
            nfree++;
        }
    CHECK_OK(NULL, carve_route_pop());
    CHECK_OK(NULL, carve_route_set_recorder(NULL, NULL, NULL));
    CHECK_OK(NULL, carve_trace_writer_close(w));

    carve_trace t;
    CHECK(carve_trace_load_path(trace, &t, NULL, NULL) == 0);
    CHECK(t.nallocs == (size_t)nalloc && t.nfrees == (size_t)nfree && t.nbad == 0);
    CHECK(t.nstreams == 2);
    carve_config cfg;
    carve_config_init(&cfg);
    cfg.backend = CARVE_BACKEND_VIRTUAL;
    carve_replay_streams rs;
    CHECK_OK(NULL, carve_replay_streams_open(&rs, t.nstreams, cfg.backend, 0));
    carve_replay_rec rec;
    carve_replay_result rr;
    CHECK_OK(NULL, carve_replay_record(&t, &cfg, &rs, CARVE_SVG_COLS, &rec, &rr));
    CHECK(rr.nerrors == 0 && rr.nooms == 0);
    FILE *f = fopen(svg, "w");
    CHECK(f != NULL);
    carve_svg_info info = {"test_frameworks", "virtual", 0, rr.stats.reserved_bytes_peak, 0};
    CHECK(f && carve_svg_write(f, &t, &rec, &info) == 0);
    long bytes = f ? ftell(f) : 0;
    if (f)
        fclose(f);
    CHECK(bytes > 1000);
    carve_replay_rec_free(&rec);
    carve_replay_streams_close(&rs);
    carve_trace_free(&t);
    unlink(trace);
    unlink(svg);
    rmdir(dir);
    CHECK_OK(NULL, carve_route_retire(a, NULL));
    CHECK(!carve_route_known(a));
}

/* ---- Many threads: route, free across threads, retire ---- */

enum { NT = 6, NB = 300 };
static void *g_bufs[NT][NB];
static carve_arena *g_arenas[NT];
static pthread_barrier_t g_bar;
static unsigned g_errors[NT]; /* per worker: CHECK is not thread-safe, main checks these */

static void *worker(void *arg) {
    int me = (int)(intptr_t)arg;
    unsigned *err = &g_errors[me];
    test_rng rng;
    test_rng_seed(&rng, test_seed(99) + (uint64_t)me);
    carve_arena *a = g_arenas[me];
    carve_stream s = (carve_stream)(uintptr_t)(0x1000 + me);
    *err += carve_route_push(a) != CARVE_OK;
    for (int i = 0; i < NB; i++) {
        size_t n = test_rng_loguniform(&rng, 64, 256 << 10);
        g_bufs[me][i] = carve_torch_alloc((ssize_t)n, 0, s);
        *err += g_bufs[me][i] == NULL;
        if (g_bufs[me][i])
            memset(g_bufs[me][i], me, n < 64 ? n : 64);
        /* Churn in between: allocate and free at once. */
        void *tmp = carve_torch_alloc((ssize_t)n, 0, s);
        *err += tmp == NULL;
        carve_torch_free(tmp, 0, 0, s);
    }
    *err += carve_route_pop() != CARVE_OK;
    pthread_barrier_wait(&g_bar);
    /* Retire mine while a neighbour frees my buffers. */
    *err += carve_route_retire(a, NULL) != CARVE_OK;
    int next = (me + 1) % NT;
    for (int i = 0; i < NB; i++) {
        unsigned char *b = g_bufs[next][i];
        *err += !b || b[0] != (unsigned char)next;
        *err += carve_route_free(b, 0) != CARVE_OK;
    }
    return NULL;
}

static void test_threads(void) {
    pthread_barrier_init(&g_bar, NULL, NT);
    pthread_t t[NT];
    for (int i = 0; i < NT; i++)
        g_arenas[i] = host_arena(0);
    for (int i = 0; i < NT; i++)
        pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < NT; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < NT; i++) {
        CHECK(g_errors[i] == 0);
        CHECK(!carve_route_known(g_arenas[i]));
    }
    pthread_barrier_destroy(&g_bar);
}

/* ---- Regressions: the five races of the routing layer ---- */

/* 1. A retired arena destroyed by another thread's last free, then handed to
 * a routed call again: the registry must not read the freed arena (it did:
 * add() took its configuration, ASan heap-use-after-free; in a release build
 * the allocation then spun in the freed arena holding the read lock). */
static void test_race_retired_destroyed_then_used(void) {
    carve_arena *a = host_arena(0);
    void *p = NULL;
    CHECK_OK(NULL, carve_route_alloc(a, 4096, 0, NULL, &p));
    int destroyed = -1;
    CHECK_OK(NULL, carve_route_retire(a, &destroyed));
    CHECK(destroyed == 0);
    pthread_t t;
    pthread_create(&t, NULL, free_it, p); /* the last free: a is destroyed there */
    pthread_join(t, NULL);
    CHECK(!carve_route_known(a));
    void *x = (void *)1;
    CHECK_ST(NULL, carve_route_alloc(a, 64, 0, NULL, &x), CARVE_ERR_INVALID);
    CHECK(x == NULL && contains(carve_last_error(NULL), "not a live arena"));
    CHECK_ST(NULL, carve_route_push(a), CARVE_ERR_INVALID);
    CHECK(carve_route_current() == NULL);
    CHECK_ST(NULL, carve_route_retire(a, NULL), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_route_device(0, NULL, a), CARVE_ERR_INVALID);
    CHECK(!carve_route_known(a));
}

/* 2. Two threads free a retired arena's last two buffers (on different
 * streams) at once: each used to decide, under the read lock, that the other
 * still held one, and the arena stayed forever (93 of 1,000,000 tries of
 * this test on a 16-core machine; it needs two cores running both frees in
 * the same instant). CARVE_RACE_ITERS sets the tries: 20000 by default, 2000
 * in sanitizer builds (each try costs a hundred times more there). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RACE_ITERS 2000
#else
#define RACE_ITERS 20000
#endif
typedef struct pair_free {
    pthread_barrier_t *bar;
    void *p;
    int rounds;
    void **slots;
} pair_free;

static void *free_at_barrier(void *arg) {
    pair_free *f = arg;
    for (int i = 0; i < f->rounds; i++) {
        pthread_barrier_wait(f->bar); /* the main thread has set slots[i] */
        if (carve_route_free(f->slots[i], 0) != CARVE_OK)
            f->p = (void *)1; /* a failure: reported by main */
        pthread_barrier_wait(f->bar);
    }
    return NULL;
}

static void test_race_last_two_frees(void) {
    const char *env = getenv("CARVE_RACE_ITERS");
    int iters = env ? atoi(env) : RACE_ITERS;
    if (iters < 1)
        iters = 1;
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 3);
    pair_free f1 = {&bar, NULL, iters, NULL}, f2 = {&bar, NULL, iters, NULL};
    void **b1 = calloc((size_t)iters, sizeof(void *)), **b2 = calloc((size_t)iters, sizeof(void *));
    f1.slots = b1;
    f2.slots = b2;
    pthread_t t1, t2;
    pthread_create(&t1, NULL, free_at_barrier, &f1);
    pthread_create(&t2, NULL, free_at_barrier, &f2);
    int leaked = 0, failed = 0;
    for (int i = 0; i < iters; i++) {
        carve_arena *a = test_arena(CARVE_BACKEND_VIRTUAL, 1, 0, 0);
        failed += carve_route_alloc(a, 1000, 0, (carve_stream)(uintptr_t)0x10, &b1[i]) != CARVE_OK;
        failed += carve_route_alloc(a, 3000, 0, (carve_stream)(uintptr_t)0x20, &b2[i]) != CARVE_OK;
        failed += carve_route_retire(a, NULL) != CARVE_OK;
        pthread_barrier_wait(&bar); /* both free at once */
        pthread_barrier_wait(&bar);
        if (carve_route_known(a)) { /* no new arena was made meanwhile: a itself */
            leaked++;
            (void)carve_route_empty_caches();
        }
    }
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    pthread_barrier_destroy(&bar);
    free(b1);
    free(b2);
    if (leaked)
        fprintf(stderr, "last two frees: %d of %d retired arenas were never destroyed\n", leaked, iters);
    CHECK(leaked == 0);
    CHECK(failed == 0 && f1.p == NULL && f2.p == NULL);
}

/* 3. After carve_route_forget (and the arena's destruction), a thread that
 * still has it pushed must get CARVE_ERR_INVALID, also when a new arena was
 * created at the same address and registered (it used to allocate there). */
static void test_race_forgotten_pushed(void) {
    carve_arena *a = host_arena(0);
    CHECK_OK(NULL, carve_route_push(a));
    void *p = NULL;
    CHECK_OK(NULL, carve_route_alloc(NULL, 512, 0, NULL, &p));
    CHECK_OK(NULL, carve_route_forget(a));
    CHECK_OK(a, carve_free(a, p));
    carve_arena_destroy(a);
    /* malloc usually hands the same block to the next arena of the same size
     * (not under ASan, which holds freed memory back). */
    carve_arena *b = host_arena(0);
    void *q = NULL;
    CHECK_OK(NULL, carve_route_alloc(b, 512, 0, NULL, &q)); /* b registered */
    printf("forgotten arena's address reused by the next arena: %s\n", b == a ? "yes" : "no");
    CHECK(carve_route_current() == a); /* the stale entry is still there ... */
    void *x = (void *)1;
    CHECK_ST(NULL, carve_route_alloc(NULL, 512, 0, NULL, &x), CARVE_ERR_INVALID); /* ... and refused */
    CHECK(x == NULL && contains(carve_last_error(NULL), "no longer registered"));
    CHECK(carve_torch_alloc(512, 0, NULL) == NULL);
    carve_stats st;
    CHECK_OK(b, carve_get_stats(b, &st));
    CHECK(st.num_live == 1 && st.num_allocs == 1);
    CHECK_OK(NULL, carve_route_pop());
    /* A fresh push of b works. */
    CHECK_OK(NULL, carve_route_push(b));
    void *y = carve_torch_alloc(512, 0, NULL);
    CHECK(y != NULL && carve_buffer_info(b, y, NULL, NULL) == CARVE_OK);
    CHECK_OK(NULL, carve_route_pop());
    CHECK_OK(NULL, carve_route_free(y, 0));
    CHECK_OK(NULL, carve_route_free(q, 0));
    int destroyed = 0;
    CHECK_OK(NULL, carve_route_retire(b, &destroyed));
    CHECK(destroyed == 1);
}

/* 4. A thread-exit destructor that runs after carve's own (a key made later)
 * and routes: it used to read and write the freed routing stack. */
static pthread_key_t g_late_key;
static carve_arena *g_late_arena;
static int g_late_seen[5];

static void late_destructor(void *v) {
    (void)v;
    g_late_seen[0] = carve_route_current() == NULL;            /* the stack is gone */
    g_late_seen[1] = carve_route_pop() == CARVE_ERR_INVALID;   /* nothing to pop */
    g_late_seen[2] = carve_route_push(g_late_arena) == CARVE_OK; /* a fresh stack */
    g_late_seen[3] = carve_route_current() == g_late_arena;
    g_late_seen[4] = carve_route_pop() == CARVE_OK;
}

static void *exit_with_routes(void *arg) {
    (void)arg;
    CHECK_OK(NULL, carve_route_push(g_late_arena)); /* makes carve's key first, if it is not yet */
    CHECK_OK(NULL, carve_route_push(g_late_arena));
    pthread_setspecific(g_late_key, (void *)1);
    return NULL; /* exits with two routes pushed */
}

static void test_race_thread_exit(void) {
    g_late_arena = host_arena(0);
    CHECK_OK(NULL, carve_route_push(g_late_arena)); /* carve's key exists before ours */
    CHECK_OK(NULL, carve_route_pop());
    CHECK(pthread_key_create(&g_late_key, late_destructor) == 0);
    pthread_t t;
    pthread_create(&t, NULL, exit_with_routes, NULL);
    pthread_join(t, NULL);
    for (int i = 0; i < 5; i++)
        CHECK(g_late_seen[i] == 1);
    pthread_key_delete(g_late_key);
    CHECK_OK(NULL, carve_route_retire(g_late_arena, NULL));
}

/* 5. A free that fails (an injected failure of the event it records for
 * another stream) and is retried: the recorder used to hear of the free
 * before carve_free, so the trace held two frees of one allocation. */
static void test_race_failed_free_recorded_once(void) {
    /* Backend call 1 reserves the segment, call 2 is the free's event record. */
    carve_arena *a = test_arena_conf(CARVE_BACKEND_HOST, 1, 0, 0, "fail_backend_at=2,fail_backend_status=backend");
    rec_log log;
    memset(&log, 0, sizeof(log));
    CHECK_OK(NULL, carve_route_set_recorder(on_alloc, on_free, &log));
    void *p = NULL;
    CHECK_OK(NULL, carve_route_alloc(a, 4096, 0, NULL, &p));
    CHECK_OK(NULL, carve_route_record_stream(p, 0, (carve_stream)(uintptr_t)0x300));
    carve_status st = carve_route_free(p, 0);
    CHECK(st != CARVE_OK); /* the injected failure hit the free: the buffer stays live */
    CHECK(carve_buffer_info(a, p, NULL, NULL) == CARVE_OK);
    CHECK_OK(NULL, carve_route_free(p, 0)); /* the retry */
    CHECK_OK(NULL, carve_route_set_recorder(NULL, NULL, NULL));
    CHECK(log.n == 2 && log.op[0] == 'a' && log.op[1] == 'f');
    CHECK(log.id[1] == (uintptr_t)p);
    CHECK_OK(NULL, carve_route_retire(a, NULL));
}

/* ---- Device routes (autograd's threads) ---- */

static carve_arena *g_dev_arena;

static void *alloc_unrouted_thread(void *out) {
    *(void **)out = carve_torch_alloc(1000, 0, NULL);
    return NULL;
}

static void test_device_route(void) {
    carve_arena *a = host_arena(0), *b = host_arena(0);
    g_dev_arena = a;
    CHECK(carve_route_device_current(0) == NULL);
    CHECK_ST(NULL, carve_route_device(-1, NULL, a), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_route_device(64, NULL, a), CARVE_ERR_INVALID);
    CHECK_OK(NULL, carve_route_device(0, NULL, a));
    CHECK(carve_route_device_current(0) == a && carve_route_known(a));
    CHECK_ST(NULL, carve_route_device(0, NULL, b), CARVE_ERR_INVALID); /* not what is set */
    CHECK(contains(carve_last_error(NULL), "routes to"));

    /* A thread that routes nowhere (as PyTorch's autograd threads) lands in a. */
    void *p = NULL;
    pthread_t t;
    pthread_create(&t, NULL, alloc_unrouted_thread, &p);
    pthread_join(t, NULL);
    CHECK(p != NULL && carve_buffer_info(a, p, NULL, NULL) == CARVE_OK);
    /* A pushed route still wins on its thread. */
    CHECK_OK(NULL, carve_route_push(b));
    void *q = carve_torch_alloc(100, 0, NULL);
    CHECK(q && carve_buffer_info(b, q, NULL, NULL) == CARVE_OK);
    CHECK_OK(NULL, carve_route_pop());
    /* Other devices are not routed. */
    void *r = carve_torch_alloc(100, 1, NULL);
    CHECK(r == NULL || carve_buffer_info(a, r, NULL, NULL) != CARVE_OK);
    carve_torch_free(r, 100, 1, NULL);

    /* A device's route cannot be retired or forgotten. */
    CHECK_ST(NULL, carve_route_retire(a, NULL), CARVE_ERR_INVALID);
    CHECK(contains(carve_last_error(NULL), "route of a device"));
    CHECK_ST(NULL, carve_route_forget(a), CARVE_ERR_INVALID);
    /* Nested: replace, then put back. */
    CHECK_OK(NULL, carve_route_device(0, a, b));
    CHECK(carve_route_device_current(0) == b);
    CHECK_OK(NULL, carve_route_device(0, b, a));
    CHECK_OK(NULL, carve_route_device(0, a, NULL));
    CHECK(carve_route_device_current(0) == NULL);
    CHECK_OK(NULL, carve_route_free(p, 0));
    CHECK_OK(NULL, carve_route_free(q, 0));
    CHECK_OK(NULL, carve_route_retire(a, NULL));
    /* A retired arena cannot become a route. */
    void *k = NULL;
    CHECK_OK(NULL, carve_route_alloc(b, 64, 0, NULL, &k));
    CHECK_OK(NULL, carve_route_retire(b, NULL));
    CHECK_ST(NULL, carve_route_device(0, NULL, b), CARVE_ERR_INVALID);
    CHECK_OK(NULL, carve_route_free(k, 0));
    CHECK(!carve_route_known(b));
}

int main(void) {
    test_route_device_registry_grows();
    test_stack();
    test_free_takes_no_other_heap_lock();
    test_torch_callbacks();
    test_no_route();
    test_cross_thread_and_retire();
    test_cupy();
    test_empty_caches();
    test_recorder();
    test_threads();
    test_race_retired_destroyed_then_used();
    test_race_last_two_frees();
    test_race_forgotten_pushed();
    test_race_thread_exit();
    test_race_failed_free_recorded_once();
    test_device_route();
    carve_device_arenas_release();
    return test_finish();
}
