/*
 * soak.c — carve-soak: a long mixed workload on one arena that reports the
 * memory it holds over time (CSV) and ends with a verdict.
 *
 * The one idea: a steady workload, run long enough, must reach a steady
 * state. Worker threads churn buffers (many small, some large) on their own
 * streams under a limit they keep running into, hand buffers to each other
 * to free, use them on each other's streams, and check their contents; the
 * main thread samples reserved bytes and RSS and, every few seconds, empties
 * the cache and checks the arena. After a warm-up, reserved bytes must peak
 * no higher in the second half than in the first, and RSS outside the arena
 * (measured with the workers parked) must not rise: no creeping growth. Once
 * everything is freed and the cache emptied, nothing may stay reserved.
 *
 * Usage: carve-soak --help. Exit status: 0 pass, 1 fail, 2 bad options,
 * 77 skipped (--backend cuda without a CUDA device or a CUDA build).
 */
#include "test_util.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#ifdef SOAK_CUDA
#include <cuda_runtime_api.h>
#endif

#define MiB ((size_t)1 << 20)
#define SMALL_MIN ((size_t)256)
#define SMALL_MAX MiB               /* 7 requests in 8: 256 B .. 1 MiB */
#define LARGE_MAX ((size_t)64 << 20) /* 1 in 8: 1 MiB .. 64 MiB */
#define WHOLE_MAX 4096              /* host: buffers up to this are patterned whole */
#define EDGE 1024                   /* host: else the first and last EDGE bytes */
#define MAILBOX 64                  /* buffers handed between threads at most */
#define CUDA_VERIFY_EVERY 16        /* cuda: every 16th free samples the buffer */
#define SAMPLE 32                   /* cuda: bytes per sampled range */
#define MAX_MESSAGES 20             /* error messages printed at most */
#define SKIP 77

/* Sanitizers keep memory of their own that grows with use (ASan's quarantine
 * of freed blocks, TSan's shadow and history): RSS is reported, not judged. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SOAK_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SOAK_SANITIZER 1
#endif
#endif
#ifndef SOAK_SANITIZER
#define SOAK_SANITIZER 0
#endif

/* ---- options ------------------------------------------------------------ */

typedef struct opts {
    double seconds, interval, warmup, empty_every;
    int threads, live, require_oom, show_ooms;
    carve_backend backend;
    const char *limit, *csv, *conf;
    uint64_t seed;
} opts;

static void usage(FILE *f) {
    fprintf(f,
            "usage: carve-soak [options]\n"
            "A long mixed workload on one carve arena; writes memory held over time as CSV\n"
            "and ends with a verdict on stderr (exit 0 pass, 1 fail, 2 bad options, 77 skip).\n"
            "\n"
            "  --seconds N         run time (default 20)\n"
            "  --threads N         worker threads, each on its own stream (default 4)\n"
            "  --backend B         host | virtual | cuda (default host)\n"
            "  --limit SIZE        arena limit, as carve_config_parse reads it: 256MiB, 1GiB,\n"
            "                      0.5 (of the device, cuda) (default: 64MiB per thread)\n"
            "  --live N            live buffers per thread at most (default 32)\n"
            "  --csv FILE          CSV output (default: stdout)\n"
            "  --interval SECONDS  time between CSV rows (default 1)\n"
            "  --empty-every SECS  carve_empty_cache, stats, snapshot and carve_check this\n"
            "                      often (default 3)\n"
            "  --seed N            workload seed (default: CARVE_TEST_SEED or 1)\n"
            "  --warmup FRACTION   leading share of the run not judged for flatness (default 0.2)\n"
            "  --conf TEXT         more carve_config_parse keys, e.g. vmm=1, sim_event_polls=3\n"
            "  --require-oom       fail unless the workload hit the limit at least once\n"
            "  --show-ooms N       print the first N out-of-memory explanations (default 0)\n"
            "  --help              this text\n"
            "\n"
            "CSV columns: elapsed_s,reserved_bytes,allocated_bytes,reserved_peak_bytes,\n"
            "live_buffers,rss_bytes,ops,ooms,errors,corruptions,empty_cache_calls\n"
            "(counters are cumulative). Plot with tests/soak/plot.py.\n");
}

__attribute__((format(printf, 1, 2), noreturn)) static void bad_option(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "carve-soak: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see --help)\n");
    va_end(ap);
    exit(2);
}

static double parse_double(const char *name, const char *v, double lo, double hi) {
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !(d >= lo && d <= hi))
        bad_option("%s: '%s' is not a number in [%g, %g]", name, v, lo, hi);
    return d;
}

static long parse_long(const char *name, const char *v, long lo, long hi) {
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || end == v || *end || n < lo || n > hi)
        bad_option("%s: '%s' is not an integer in [%ld, %ld]", name, v, lo, hi);
    return n;
}

static opts parse_args(int argc, char **argv) {
    opts o = {.seconds = 20, .interval = 1, .warmup = 0.2, .empty_every = 3, .threads = 4,
              .live = 32, .backend = CARVE_BACKEND_HOST, .seed = test_seed(1)};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *val = NULL;
        char name[64];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            usage(stdout);
            exit(0);
        }
        if (strcmp(arg, "--require-oom") == 0) {
            o.require_oom = 1;
            continue;
        }
        if (strncmp(arg, "--", 2) != 0)
            bad_option("unexpected argument '%s'", arg);
        const char *eq = strchr(arg, '=');
        size_t n = eq ? (size_t)(eq - arg) : strlen(arg);
        if (n >= sizeof(name))
            bad_option("unknown option '%s'", arg);
        memcpy(name, arg, n);
        name[n] = '\0';
        if (eq)
            val = eq + 1;
        else if (i + 1 < argc)
            val = argv[++i];
        else
            bad_option("%s needs a value", name);
        if (strcmp(name, "--seconds") == 0)
            o.seconds = parse_double(name, val, 0.1, 1e7);
        else if (strcmp(name, "--threads") == 0)
            o.threads = (int)parse_long(name, val, 1, 256);
        else if (strcmp(name, "--show-ooms") == 0)
            o.show_ooms = (int)parse_long(name, val, 0, 1000000);
        else if (strcmp(name, "--live") == 0)
            o.live = (int)parse_long(name, val, 1, 65536);
        else if (strcmp(name, "--interval") == 0)
            o.interval = parse_double(name, val, 0.01, 1e6);
        else if (strcmp(name, "--empty-every") == 0)
            o.empty_every = parse_double(name, val, 0.01, 1e6);
        else if (strcmp(name, "--warmup") == 0)
            o.warmup = parse_double(name, val, 0, 0.9);
        else if (strcmp(name, "--limit") == 0)
            o.limit = val;
        else if (strcmp(name, "--csv") == 0)
            o.csv = val;
        else if (strcmp(name, "--conf") == 0)
            o.conf = val;
        else if (strcmp(name, "--seed") == 0) {
            char *end;
            errno = 0;
            o.seed = strtoull(val, &end, 0);
            if (errno || end == val || *end || *val == '-')
                bad_option("--seed: '%s' is not an unsigned integer", val);
        } else if (strcmp(name, "--backend") == 0) {
            if (strcmp(val, "host") == 0)
                o.backend = CARVE_BACKEND_HOST;
            else if (strcmp(val, "virtual") == 0)
                o.backend = CARVE_BACKEND_VIRTUAL;
            else if (strcmp(val, "cuda") == 0)
                o.backend = CARVE_BACKEND_CUDA;
            else
                bad_option("--backend: '%s' is not host, virtual or cuda", val);
        } else
            bad_option("unknown option '%s'", name);
    }
    return o;
}

/* ---- shared state ------------------------------------------------------- */

typedef struct buf {
    void *ptr;
    size_t size;
    uint64_t id;
    carve_stream stream; /* the stream it was allocated on */
} buf;

typedef struct worker {
    int index;
    pthread_t thread;
    carve_stream stream;
    test_rng rng;
    buf *slot;          /* opts.live slots; ptr NULL when empty */
    uint64_t next_id;
    unsigned long frees;
    _Atomic uint64_t ops, ooms, allocs;
#ifdef SOAK_CUDA
    cudaEvent_t event;      /* orders work on another stream after our fill */
    unsigned char *staging; /* pinned, 3 * SAMPLE bytes */
#endif
} worker;

static opts g_opt;
static carve_arena *g_arena;
static worker *g_workers;
static atomic_int g_stop;
static _Atomic uint64_t g_errors, g_corruptions;
static atomic_int g_messages, g_oom_messages;

static struct {
    pthread_mutex_t lock;
    buf item[MAILBOX];
    int n;
} g_box = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The manager parks every worker (between two steps) for a moment of quiet
 * in which to measure; see csv_row. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    atomic_int wanted;
    int parked;
} g_pause = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static void park_if_asked(void) {
    if (!atomic_load_explicit(&g_pause.wanted, memory_order_acquire))
        return;
    pthread_mutex_lock(&g_pause.lock);
    g_pause.parked++;
    pthread_cond_broadcast(&g_pause.cond);
    while (atomic_load_explicit(&g_pause.wanted, memory_order_relaxed))
        pthread_cond_wait(&g_pause.cond, &g_pause.lock);
    g_pause.parked--;
    pthread_mutex_unlock(&g_pause.lock);
}

static void pause_workers(void) {
    pthread_mutex_lock(&g_pause.lock);
    atomic_store(&g_pause.wanted, 1);
    while (g_pause.parked < g_opt.threads)
        pthread_cond_wait(&g_pause.cond, &g_pause.lock);
    pthread_mutex_unlock(&g_pause.lock);
}

static void resume_workers(void) {
    pthread_mutex_lock(&g_pause.lock);
    atomic_store(&g_pause.wanted, 0);
    pthread_cond_broadcast(&g_pause.cond);
    pthread_mutex_unlock(&g_pause.lock);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double mib(size_t bytes) { return (double)bytes / (double)MiB; }

/* Print one message (the first MAX_MESSAGES of the run) to stderr. */
__attribute__((format(printf, 2, 0))) static void say(const char *kind, const char *fmt, va_list ap) {
    if (atomic_fetch_add(&g_messages, 1) >= MAX_MESSAGES)
        return;
    char line[2048];
    vsnprintf(line, sizeof(line), fmt, ap);
    fprintf(stderr, "carve-soak: %s: %s\n", kind, line);
}

__attribute__((format(printf, 1, 2))) static void soak_error(const char *fmt, ...) {
    atomic_fetch_add(&g_errors, 1);
    va_list ap;
    va_start(ap, fmt);
    say("ERROR", fmt, ap);
    va_end(ap);
}

__attribute__((format(printf, 1, 2))) static void corruption(const char *fmt, ...) {
    atomic_fetch_add(&g_corruptions, 1);
    va_list ap;
    va_start(ap, fmt);
    say("CORRUPTION", fmt, ap);
    va_end(ap);
}

/* ---- buffer contents ---------------------------------------------------- */

static uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static inline uint8_t pattern_byte(uint64_t h, size_t off) {
    return (uint8_t)((h + (uint64_t)off * 0x9E3779B97F4A7C15ull) >> 56);
}

/* Host: the byte ranges that carry the pattern. */
static int host_ranges(size_t size, size_t from[2], size_t to[2]) {
    if (size <= WHOLE_MAX) {
        from[0] = 0;
        to[0] = size;
        return 1;
    }
    from[0] = 0;
    to[0] = EDGE;
    from[1] = size - EDGE;
    to[1] = size;
    return 2;
}

static void host_fill(const buf *b) {
    size_t from[2], to[2];
    uint64_t h = mix64(b->id);
    unsigned char *p = b->ptr;
    for (int r = host_ranges(b->size, from, to); r-- > 0;)
        for (size_t i = from[r]; i < to[r]; i++)
            p[i] = pattern_byte(h, i);
}

static void host_verify(const buf *b) {
    size_t from[2], to[2];
    uint64_t h = mix64(b->id);
    const unsigned char *p = b->ptr;
    for (int r = host_ranges(b->size, from, to); r-- > 0;)
        for (size_t i = from[r]; i < to[r]; i++)
            if (p[i] != pattern_byte(h, i)) {
                corruption("buffer %#llx (%zu bytes at %p): byte %zu is %#x, want %#x",
                           (unsigned long long)b->id, b->size, b->ptr, i, p[i], pattern_byte(h, i));
                return;
            }
}

#ifdef SOAK_CUDA
static uint8_t cuda_byte(uint64_t id) { return (uint8_t)mix64(id); }

static int cuda_ok(cudaError_t e, const char *what) {
    if (e == cudaSuccess)
        return 1;
    soak_error("%s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
    return 0;
}

/* Copy three ranges of b (start, end, somewhere) on its stream, wait, and
 * compare them with its fill byte. */
static void cuda_verify(worker *w, const buf *b) {
    size_t n = b->size < SAMPLE ? b->size : SAMPLE;
    size_t off[3] = {0, b->size - n, (size_t)test_rng_below(&w->rng, b->size - n + 1)};
    cudaStream_t s = b->stream;
    for (int r = 0; r < 3; r++)
        if (!cuda_ok(cudaMemcpyAsync(w->staging + r * SAMPLE, (const char *)b->ptr + off[r], n,
                                     cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync (verify)"))
            return;
    if (!cuda_ok(cudaStreamSynchronize(s), "cudaStreamSynchronize (verify)"))
        return;
    uint8_t want = cuda_byte(b->id);
    for (int r = 0; r < 3; r++)
        for (size_t i = 0; i < n; i++)
            if (w->staging[r * SAMPLE + i] != want) {
                corruption("buffer %#llx (%zu bytes at %p, stream %p): byte %zu is %#x, want %#x",
                           (unsigned long long)b->id, b->size, b->ptr, (void *)s, off[r] + i,
                           w->staging[r * SAMPLE + i], want);
                return;
            }
}
#endif

/* ---- the worker --------------------------------------------------------- */

static void free_buf(worker *w, const buf *b) {
    if (g_opt.backend == CARVE_BACKEND_HOST)
        host_verify(b);
#ifdef SOAK_CUDA
    if (g_opt.backend == CARVE_BACKEND_CUDA && ++w->frees % CUDA_VERIFY_EVERY == 0)
        cuda_verify(w, b);
#endif
    carve_status st = carve_free(g_arena, b->ptr);
    if (st != CARVE_OK)
        soak_error("carve_free(%p) on thread %d: %s: %s", b->ptr, w->index, carve_status_str(st),
                   carve_last_error(g_arena));
    atomic_fetch_add_explicit(&w->ops, 1, memory_order_relaxed);
}

/* Declare that b is also used on another thread's stream (on cuda, really
 * use it there: the same fill again, ordered after ours, so that a too-early
 * reuse of its memory would overwrite a newer buffer). */
static void use_elsewhere(worker *w, const buf *b) {
    if (g_opt.threads < 2)
        return;
    int j = (int)test_rng_below(&w->rng, (uint64_t)g_opt.threads - 1);
    carve_stream other = g_workers[j >= w->index ? j + 1 : j].stream;
#ifdef SOAK_CUDA
    if (g_opt.backend == CARVE_BACKEND_CUDA) {
        if (!cuda_ok(cudaEventRecord(w->event, b->stream), "cudaEventRecord") ||
            !cuda_ok(cudaStreamWaitEvent(other, w->event, 0), "cudaStreamWaitEvent") ||
            !cuda_ok(cudaMemsetAsync(b->ptr, cuda_byte(b->id), b->size, other), "cudaMemsetAsync (other stream)"))
            return;
    }
#endif
    carve_status st = carve_record_stream(g_arena, b->ptr, other);
    if (st != CARVE_OK)
        soak_error("carve_record_stream(%p, %p): %s: %s", b->ptr, (void *)other, carve_status_str(st),
                   carve_last_error(g_arena));
}

/* Take one buffer out of the mailbox (another thread's, usually) and free it. */
static int free_from_mailbox(worker *w) {
    buf b;
    pthread_mutex_lock(&g_box.lock);
    int have = g_box.n > 0;
    if (have) {
        int k = (int)test_rng_below(&w->rng, (uint64_t)g_box.n);
        b = g_box.item[k];
        g_box.item[k] = g_box.item[--g_box.n];
    }
    pthread_mutex_unlock(&g_box.lock);
    if (have)
        free_buf(w, &b);
    return have;
}

/* Hand b to whichever thread looks in the mailbox next; 0 if it is full. */
static int hand_over(const buf *b) {
    pthread_mutex_lock(&g_box.lock);
    int ok = g_box.n < MAILBOX;
    if (ok)
        g_box.item[g_box.n++] = *b;
    pthread_mutex_unlock(&g_box.lock);
    return ok;
}

static size_t pick_size(test_rng *r) {
    if (test_rng_below(r, 8) != 0)
        return test_rng_loguniform(r, SMALL_MIN, SMALL_MAX);
    return test_rng_loguniform(r, SMALL_MAX, LARGE_MAX);
}

/* Out of memory: free about a third of our buffers and a few handed over. */
static void relieve(worker *w) {
    for (int i = 0; i < g_opt.live; i++)
        if (w->slot[i].ptr && test_rng_below(&w->rng, 3) == 0) {
            free_buf(w, &w->slot[i]);
            w->slot[i].ptr = NULL;
        }
    for (int k = 0; k < 4 && free_from_mailbox(w); k++)
        ;
}

static void alloc_into(worker *w, buf *b) {
    b->size = pick_size(&w->rng);
    b->id = w->next_id++;
    b->stream = w->stream;
    void *p = (void *)(uintptr_t)0x1; /* must come back NULL on failure */
    carve_status st = carve_alloc(g_arena, b->size, w->stream, &p);
    if (st == CARVE_ERR_OOM) {
        atomic_fetch_add_explicit(&w->ooms, 1, memory_order_relaxed);
        const char *why = carve_last_error(g_arena);
        if (p != NULL)
            soak_error("carve_alloc(%zu) returned CARVE_ERR_OOM with *out = %p, not NULL", b->size, p);
        if (!why || !*why)
            soak_error("carve_alloc(%zu) returned CARVE_ERR_OOM with an empty carve_last_error", b->size);
        else if (atomic_fetch_add(&g_oom_messages, 1) < g_opt.show_ooms)
            fprintf(stderr, "carve-soak: OOM on thread %d: %s\n", w->index, why);
        b->ptr = NULL;
        relieve(w);
        return;
    }
    if (st != CARVE_OK || !p) {
        soak_error("carve_alloc(%zu) on thread %d: %s (*out %p): %s", b->size, w->index, carve_status_str(st), p,
                   carve_last_error(g_arena));
        b->ptr = NULL;
        return;
    }
    b->ptr = p;
    atomic_fetch_add_explicit(&w->ops, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&w->allocs, 1, memory_order_relaxed);
    if (g_opt.backend == CARVE_BACKEND_HOST)
        host_fill(b);
#ifdef SOAK_CUDA
    if (g_opt.backend == CARVE_BACKEND_CUDA)
        cuda_ok(cudaMemsetAsync(p, cuda_byte(b->id), b->size, w->stream), "cudaMemsetAsync");
#endif
}

static void *worker_main(void *arg) {
    worker *w = arg;
    while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
        park_if_asked();
        buf *b = &w->slot[test_rng_below(&w->rng, (uint64_t)g_opt.live)];
        if (b->ptr) {
            unsigned what = (unsigned)test_rng_below(&w->rng, 16);
            if (what < 2)
                use_elsewhere(w, b);       /* 1 in 8: used on another stream, then freed */
            if (what == 15 && hand_over(b)) /* 1 in 16: another thread frees it */
                b->ptr = NULL;
            if (b->ptr)
                free_buf(w, b);
            b->ptr = NULL;
        }
        if (test_rng_below(&w->rng, 4) == 0)
            free_from_mailbox(w);
        alloc_into(w, b);
    }
    for (int i = 0; i < g_opt.live; i++)
        if (w->slot[i].ptr) {
            free_buf(w, &w->slot[i]);
            w->slot[i].ptr = NULL;
        }
    return NULL;
}

/* ---- the manager -------------------------------------------------------- */

static size_t rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long pages = 0, resident = 0;
    if (!f)
        return 0;
    if (fscanf(f, "%llu %llu", &pages, &resident) != 2)
        resident = 0;
    fclose(f);
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* Minimal well-formedness: starts with '{', ends with '}', and braces and
 * brackets balance outside strings. */
static int json_plausible(const char *s) {
    int depth = 0, in_str = 0;
    const char *last = NULL;
    if (!s || *s != '{')
        return 0;
    for (const char *c = s; *c; c++) {
        if (in_str) {
            if (*c == '\\' && c[1])
                c++;
            else if (*c == '"')
                in_str = 0;
            continue;
        }
        if (*c == '"')
            in_str = 1;
        else if (*c == '{' || *c == '[')
            depth++;
        else if ((*c == '}' || *c == ']') && --depth < 0)
            return 0;
        if (*c != ' ' && *c != '\n' && *c != '\t' && *c != '\r')
            last = c;
    }
    return depth == 0 && !in_str && last && *last == '}';
}

typedef struct totals {
    uint64_t ops, ooms, allocs;
} totals;

static totals sum_workers(void) {
    totals t = {0, 0, 0};
    for (int i = 0; i < g_opt.threads; i++) {
        t.ops += atomic_load_explicit(&g_workers[i].ops, memory_order_relaxed);
        t.ooms += atomic_load_explicit(&g_workers[i].ooms, memory_order_relaxed);
        t.allocs += atomic_load_explicit(&g_workers[i].allocs, memory_order_relaxed);
    }
    return t;
}

static int g_checks, g_check_failures, g_empty_calls;

/* Every few seconds: give the cache back, read stats and a snapshot, check. */
static void maintain(void) {
    carve_status st = carve_empty_cache(g_arena);
    g_empty_calls++;
    if (st != CARVE_OK)
        soak_error("carve_empty_cache: %s: %s", carve_status_str(st), carve_last_error(g_arena));
    carve_stats s;
    if ((st = carve_get_stats(g_arena, &s)) != CARVE_OK)
        soak_error("carve_get_stats: %s: %s", carve_status_str(st), carve_last_error(g_arena));
    else if (s.reserved_bytes > s.limit_bytes)
        soak_error("reserved %zu bytes > limit %zu", s.reserved_bytes, s.limit_bytes);
    char *json = NULL;
    if ((st = carve_snapshot_json(g_arena, &json)) != CARVE_OK)
        soak_error("carve_snapshot_json: %s: %s", carve_status_str(st), carve_last_error(g_arena));
    else if (!json_plausible(json))
        soak_error("carve_snapshot_json: malformed JSON (%zu bytes, starts '%.40s')", strlen(json), json);
    carve_snapshot_free(json);
    g_checks++;
    if ((st = carve_check(g_arena)) != CARVE_OK) {
        g_check_failures++;
        soak_error("carve_check: %s: %s", carve_status_str(st), carve_last_error(g_arena));
    }
}

/* Host backend: bytes of the arena's segments that are resident (mincore
 * over every segment the snapshot lists). Workers must be parked. */
static size_t arena_resident(void) {
    static unsigned char vec[16384];
    size_t page = (size_t)sysconf(_SC_PAGESIZE), total = 0;
    char *json = NULL;
    if (carve_snapshot_json(g_arena, &json) != CARVE_OK) {
        soak_error("carve_snapshot_json: %s", carve_last_error(g_arena));
        return 0;
    }
    const char *c = strstr(json, "\"segments\"");
    while (c && (c = strstr(c, "\"address\""))) {
        c += strlen("\"address\"");
        c += strspn(c, " :\"");
        uintptr_t base = (uintptr_t)strtoull(c, NULL, 16);
        const char *z = strstr(c, "\"size\"");
        if (!z)
            break;
        z += strlen("\"size\"");
        z += strspn(z, " :");
        size_t size = (size_t)strtoull(z, NULL, 10);
        for (size_t off = 0; off < size; off += sizeof(vec) * page) {
            size_t len = size - off < sizeof(vec) * page ? size - off : sizeof(vec) * page;
            if (mincore((void *)(base + off), len, vec) != 0) {
                soak_error("mincore(%#lx, %zu): %s", (unsigned long)(base + off), len, strerror(errno));
                break;
            }
            for (size_t i = 0; i < (len + page - 1) / page; i++)
                total += (vec[i] & 1) ? page : 0;
        }
        c = z;
    }
    carve_snapshot_free(json);
    return total;
}

/* What the run measured for the verdict. Reserved and allocated are
 * sampled every millisecond, their maxima kept per judged half; RSS is
 * sampled with the workers parked, as the process's RSS less the resident
 * pages of the arena's own segments (host backend: buffer memory is process
 * memory, and which of its pages a workload has touched is noise, not a
 * leak). */
typedef struct measure {
    size_t reserved_max[2], allocated_max[2];
    size_t out_base, out_max, out_last, rss_max, rss_last; /* after warm-up */
    int have_base;
} measure;

static void sample(measure *m, int half) {
    size_t r = carve_memory_reserved(g_arena), a = carve_memory_allocated(g_arena);
    if (r > m->reserved_max[half])
        m->reserved_max[half] = r;
    if (a > m->allocated_max[half])
        m->allocated_max[half] = a;
}

/* One CSV row, taken with the workers parked so that its numbers belong to
 * one instant; after warm-up, also an RSS sample for the verdict. */
static void csv_row(FILE *f, double t, measure *m, int judged) {
    pause_workers();
    carve_stats s;
    if (carve_get_stats(g_arena, &s) != CARVE_OK)
        soak_error("carve_get_stats: %s", carve_last_error(g_arena));
    size_t rss = rss_bytes();
    size_t in_arena = judged && g_opt.backend == CARVE_BACKEND_HOST ? arena_resident() : 0;
    resume_workers();
    if (judged) {
        size_t out = rss > in_arena ? rss - in_arena : 0;
        if (!m->have_base) {
            m->out_base = out;
            m->have_base = 1;
        }
        m->out_max = out > m->out_max ? out : m->out_max;
        m->out_last = out;
        m->rss_max = rss > m->rss_max ? rss : m->rss_max;
        m->rss_last = rss;
    }
    totals w = sum_workers();
    fprintf(f, "%.3f,%zu,%zu,%zu,%llu,%zu,%llu,%llu,%llu,%llu,%d\n", t, s.reserved_bytes, s.allocated_bytes,
            s.reserved_bytes_peak, (unsigned long long)s.num_live, rss, (unsigned long long)w.ops,
            (unsigned long long)w.ooms, (unsigned long long)atomic_load(&g_errors),
            (unsigned long long)atomic_load(&g_corruptions), g_empty_calls);
    fflush(f);
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void run(FILE *csv, measure *m) {
    double t0 = now_s(), warm = g_opt.seconds * g_opt.warmup;
    double mid = warm + (g_opt.seconds - warm) / 2;
    double next_row = 0, next_empty = g_opt.empty_every;
    fprintf(csv, "elapsed_s,reserved_bytes,allocated_bytes,reserved_peak_bytes,live_buffers,rss_bytes,"
                 "ops,ooms,errors,corruptions,empty_cache_calls\n");
    for (;;) {
        double t = now_s() - t0;
        if (t >= g_opt.seconds)
            break;
        if (t >= warm)
            sample(m, t >= mid);
        if (t >= next_row) {
            csv_row(csv, t, m, t >= warm);
            next_row += g_opt.interval;
        }
        if (t >= next_empty) {
            maintain();
            next_empty += g_opt.empty_every;
        }
        sleep_s(0.001);
    }
    sample(m, 1);
    csv_row(csv, now_s() - t0, m, 1);
}

/* ---- setup, teardown, verdict -------------------------------------------- */

static void start_streams(void) {
    for (int i = 0; i < g_opt.threads; i++) {
        worker *w = &g_workers[i];
        w->index = i;
        test_rng_seed(&w->rng, g_opt.seed * 1000003u + (uint64_t)i);
        w->next_id = ((uint64_t)(i + 1) << 40) | 1;
        w->slot = calloc((size_t)g_opt.live, sizeof(buf));
        if (!w->slot) {
            fprintf(stderr, "carve-soak: out of host memory\n");
            exit(1);
        }
        /* Distinct fake handles, away from the special values 0, 1, 2. */
        w->stream = (carve_stream)(uintptr_t)(0x10000 * (uintptr_t)(i + 1));
#ifdef SOAK_CUDA
        if (g_opt.backend == CARVE_BACKEND_CUDA) {
            cudaStream_t s;
            if (!cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags") ||
                !cuda_ok(cudaEventCreateWithFlags(&w->event, cudaEventDisableTiming), "cudaEventCreate") ||
                !cuda_ok(cudaMallocHost((void **)&w->staging, 3 * SAMPLE), "cudaMallocHost"))
                exit(1);
            w->stream = s;
        }
#endif
    }
}

#ifdef SOAK_CUDA
/* Exit 77 without a device; else make the context, streams and staging
 * exist and warm, so that the free-memory baseline taken next is stable. */
static size_t cuda_prepare(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n < 1) {
        printf("SKIP: no CUDA device (cudaGetDeviceCount: %s, %d devices)\n",
               e != cudaSuccess ? cudaGetErrorName(e) : "cudaSuccess", n);
        fprintf(stderr, "carve-soak: SKIP: no CUDA device\n");
        exit(SKIP);
    }
    if (!cuda_ok(cudaSetDevice(0), "cudaSetDevice") || !cuda_ok(cudaFree(NULL), "cudaFree(NULL)"))
        exit(1);
    start_streams();
    void *tmp;
    if (!cuda_ok(cudaMalloc(&tmp, 4096), "cudaMalloc"))
        exit(1);
    for (int i = 0; i < g_opt.threads; i++) {
        worker *w = &g_workers[i];
        cuda_ok(cudaMemsetAsync(tmp, i, 4096, w->stream), "cudaMemsetAsync (warm-up)");
        cuda_ok(cudaMemcpyAsync(w->staging, tmp, 3 * SAMPLE, cudaMemcpyDeviceToHost, w->stream),
                "cudaMemcpyAsync (warm-up)");
        cuda_ok(cudaEventRecord(w->event, w->stream), "cudaEventRecord (warm-up)");
    }
    cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    cuda_ok(cudaFree(tmp), "cudaFree");
    size_t free_b = 0, total_b = 0;
    if (!cuda_ok(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo"))
        exit(1);
    return free_b;
}

static size_t cuda_free_now(void) {
    size_t free_b = 0, total_b = 0;
    cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    cuda_ok(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    return free_b;
}

static void cuda_teardown(void) {
    for (int i = 0; i < g_opt.threads; i++) {
        worker *w = &g_workers[i];
        cuda_ok(cudaStreamSynchronize(w->stream), "cudaStreamSynchronize");
        cuda_ok(cudaStreamDestroy(w->stream), "cudaStreamDestroy");
        cuda_ok(cudaEventDestroy(w->event), "cudaEventDestroy");
        cuda_ok(cudaFreeHost(w->staging), "cudaFreeHost");
    }
}
#endif

static size_t env_mib(const char *name, size_t dflt) {
    const char *v = getenv(name);
    return v && *v ? (size_t)strtoull(v, NULL, 10) * MiB : dflt;
}

static int quick_mode(void) {
    const char *q = getenv("CARVE_TEST_QUICK");
    return q && *q && strcmp(q, "0") != 0;
}

__attribute__((format(printf, 2, 3))) static int verdict_line(int ok, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "  %-4s ", ok ? "ok" : "FAIL");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return ok;
}

int main(int argc, char **argv) {
    g_opt = parse_args(argc, argv);

    carve_config cfg;
    carve_config_init(&cfg);
    cfg.backend = g_opt.backend;
    cfg.growth = 1;
    cfg.name = "soak";
    cfg.limit_bytes = (size_t)g_opt.threads * 64 * MiB;
    if (g_opt.conf && carve_config_parse(&cfg, g_opt.conf) != CARVE_OK)
        bad_option("--conf: %s", carve_last_error(NULL));
    if (g_opt.limit) {
        char text[256];
        snprintf(text, sizeof(text), "limit=%s", g_opt.limit);
        if (carve_config_parse(&cfg, text) != CARVE_OK)
            bad_option("--limit: %s", carve_last_error(NULL));
    }
    cfg.backend = g_opt.backend; /* --backend wins over --conf */

    FILE *csv = stdout;
    if (g_opt.csv && !(csv = fopen(g_opt.csv, "w"))) {
        fprintf(stderr, "carve-soak: cannot write %s: %s\n", g_opt.csv, strerror(errno));
        return 2;
    }
    g_workers = calloc((size_t)g_opt.threads, sizeof(worker));
    if (!g_workers)
        return 1;

    size_t cuda_free_before = 0;
    if (g_opt.backend == CARVE_BACKEND_CUDA) {
#ifdef SOAK_CUDA
        cuda_free_before = cuda_prepare();
#else
        printf("SKIP: carve-soak was built without CUDA\n");
        fprintf(stderr, "carve-soak: SKIP: --backend cuda needs a build with CUDA\n");
        return SKIP;
#endif
    } else {
#if defined(__GLIBC__) && defined(M_MMAP_THRESHOLD)
        /* Host segments (2 MiB and more) always from mmap and back to the
         * kernel on free, so that glibc's adaptive heap does not keep them. */
        if (g_opt.backend == CARVE_BACKEND_HOST)
            mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
        start_streams();
    }
#if defined(__GLIBC__) && defined(M_PERTURB)
    /* meson test sets MALLOC_PERTURB_, which makes glibc fill every segment
     * the host backend reserves (up to 64 MiB, thousands of times a second
     * here): the soak would run 50x fewer operations. The unit tests keep it. */
    mallopt(M_PERTURB, 0);
#endif

    carve_status st = carve_arena_create(&cfg, &g_arena);
    if (st != CARVE_OK) {
        fprintf(stderr, "carve-soak: carve_arena_create: %s: %s\n", carve_status_str(st), carve_last_error(NULL));
        return 1;
    }
    carve_config eff;
    carve_arena_get_config(g_arena, &eff);
    size_t limit = eff.limit_bytes;
    fprintf(stderr, "carve-soak: %s backend, %d threads x %d live buffers, %.1f s (warm-up %.1f s), limit %.1f MiB, "
            "seed %llu%s%s\n", carve_backend_str(g_opt.backend), g_opt.threads, g_opt.live, g_opt.seconds,
            g_opt.seconds * g_opt.warmup, mib(limit), (unsigned long long)g_opt.seed, g_opt.conf ? ", conf " : "",
            g_opt.conf ? g_opt.conf : "");

    for (int i = 0; i < g_opt.threads; i++)
        if (pthread_create(&g_workers[i].thread, NULL, worker_main, &g_workers[i]) != 0) {
            fprintf(stderr, "carve-soak: pthread_create failed\n");
            return 1;
        }
    measure m;
    memset(&m, 0, sizeof(m));
    double t0 = now_s();
    run(csv, &m);
    atomic_store(&g_stop, 1);
    for (int i = 0; i < g_opt.threads; i++)
        pthread_join(g_workers[i].thread, NULL);
    double ran = now_s() - t0;
    worker drain = {.index = -1};
#ifdef SOAK_CUDA
    if (g_opt.backend == CARVE_BACKEND_CUDA)
        drain.staging = g_workers[0].staging;
#endif
    test_rng_seed(&drain.rng, g_opt.seed);
    while (free_from_mailbox(&drain))
        ;
    totals w = sum_workers();
    w.ops += atomic_load(&drain.ops);

    /* The end: nothing live, the arena consistent, the cache back to zero. */
    carve_stats end, full;
    carve_get_stats(g_arena, &end);
    g_checks++;
    if ((st = carve_check(g_arena)) != CARVE_OK) {
        g_check_failures++;
        soak_error("carve_check at the end: %s: %s", carve_status_str(st), carve_last_error(g_arena));
    }
    if (end.num_live != 0 || end.allocated_bytes != 0)
        soak_error("after freeing everything: %llu live buffers, %zu bytes allocated", (unsigned long long)end.num_live,
                   end.allocated_bytes);
    if (end.num_ooms != w.ooms)
        soak_error("carve counted %llu OOMs, the workers %llu", (unsigned long long)end.num_ooms,
                   (unsigned long long)w.ooms);
    if (end.num_allocs != w.allocs || end.num_frees != w.allocs)
        soak_error("carve counted %llu allocs and %llu frees, the workers %llu of each",
                   (unsigned long long)end.num_allocs, (unsigned long long)end.num_frees, (unsigned long long)w.allocs);
    if ((st = carve_empty_cache(g_arena)) != CARVE_OK)
        soak_error("final carve_empty_cache: %s: %s", carve_status_str(st), carve_last_error(g_arena));
    carve_get_stats(g_arena, &full);
    size_t reserved_end = carve_memory_reserved(g_arena);
    size_t cuda_free_after = 0, cuda_free_destroyed = 0;
#ifdef SOAK_CUDA
    if (g_opt.backend == CARVE_BACKEND_CUDA)
        cuda_free_after = cuda_free_now();
#endif
    carve_arena_destroy(g_arena);
#ifdef SOAK_CUDA
    if (g_opt.backend == CARVE_BACKEND_CUDA) {
        cuda_free_destroyed = cuda_free_now();
        cuda_teardown();
    }
#endif
    if (csv != stdout)
        fclose(csv);

    /* The verdict. */
    uint64_t errors = atomic_load(&g_errors), corruptions = atomic_load(&g_corruptions);
    int pass = 1;
    fprintf(stderr, "carve-soak verdict (%s backend, %d threads, %.1f s, warm-up %.1f s, limit %.1f MiB):\n",
            carve_backend_str(g_opt.backend), g_opt.threads, ran, g_opt.seconds * g_opt.warmup, mib(limit));
    fprintf(stderr, "       %llu ops (%.2f M/s), %llu allocs, %llu OOMs, %d empty_cache calls, %d carve_check runs\n",
            (unsigned long long)w.ops, (double)w.ops / ran / 1e6, (unsigned long long)w.allocs,
            (unsigned long long)w.ooms, g_empty_calls, g_checks);
    pass &= verdict_line(errors == 0, "errors: %llu", (unsigned long long)errors);
    pass &= verdict_line(corruptions == 0, "corruptions: %llu%s", (unsigned long long)corruptions,
                         g_opt.backend == CARVE_BACKEND_VIRTUAL ? " (virtual backend: contents not checked)" : "");
    pass &= verdict_line(g_check_failures == 0, "carve_check: %d of %d failed", g_check_failures, g_checks);
    size_t rmax = m.reserved_max[0] > m.reserved_max[1] ? m.reserved_max[0] : m.reserved_max[1];
    pass &= verdict_line(rmax <= limit && full.reserved_bytes_peak <= limit,
                         "reserved within the limit: max after warm-up %.1f MiB, peak of the run %.1f MiB, "
                         "limit %.1f MiB", mib(rmax), mib(full.reserved_bytes_peak), mib(limit));
    double growth = m.reserved_max[0] ? 100.0 * ((double)m.reserved_max[1] / (double)m.reserved_max[0] - 1) : 0;
    pass &= verdict_line((double)m.reserved_max[1] <= 1.05 * (double)m.reserved_max[0],
                         "reserved flat: max %.1f MiB in the first half after warm-up, %.1f MiB in the last "
                         "half (%+.1f%%, at most +5%%); allocated max %.1f / %.1f MiB",
                         mib(m.reserved_max[0]), mib(m.reserved_max[1]), growth, mib(m.allocated_max[0]),
                         mib(m.allocated_max[1]));
    size_t rss_allow = m.out_base / 20 > 16 * MiB ? m.out_base / 20 : 16 * MiB;
    int rss_ok = m.out_max <= m.out_base + rss_allow;
    const char *rss_excuse = SOAK_SANITIZER ? "built with a sanitizer, whose own memory grows with use"
                             : quick_mode() ? "CARVE_TEST_QUICK is set (tools such as compute-sanitizer keep "
                                              "host memory of their own)"
                                            : NULL;
    if (rss_excuse && !rss_ok)
        fprintf(stderr, "  (the RSS growth below is not judged: %s)\n", rss_excuse);
    pass &= verdict_line(rss_ok || rss_excuse,
                         "RSS flat%s: %.1f MiB at the end of warm-up, at most %.1f MiB after (%+.1f MiB, "
                         "allowed +%.1f MiB), %.1f MiB at the end; whole process: at most %.1f MiB, %.1f MiB "
                         "at the end",
                         g_opt.backend == CARVE_BACKEND_HOST ? " (outside the arena's segments)" : "",
                         mib(m.out_base), mib(m.out_max), mib(m.out_max) - mib(m.out_base), mib(rss_allow),
                         mib(m.out_last), mib(m.rss_max), mib(m.rss_last));
    pass &= verdict_line(reserved_end == 0 && full.reserved_bytes == 0,
                         "everything back: reserved %zu bytes after freeing all and carve_empty_cache "
                         "(%llu segments reserved and %llu given back over the run)",
                         reserved_end, (unsigned long long)full.num_backend_allocs,
                         (unsigned long long)full.num_backend_frees);
    if (g_opt.backend == CARVE_BACKEND_CUDA) {
        size_t slack = env_mib("CARVE_TEST_MEM_SLACK_MIB", 16 * MiB);
        double diff = mib(cuda_free_before) - mib(cuda_free_after);
        pass &= verdict_line(cuda_free_after + slack >= cuda_free_before,
                             "device memory back: free %.1f MiB before the arena, %.1f MiB after "
                             "carve_empty_cache (%.1f MiB missing, at most %.1f), %.1f MiB after destroy",
                             mib(cuda_free_before), mib(cuda_free_after), diff, mib(slack),
                             mib(cuda_free_destroyed));
    }
    if (g_opt.require_oom)
        pass &= verdict_line(w.ooms >= 1, "the workload reached the limit: %llu OOMs (at least 1 required)",
                             (unsigned long long)w.ooms);
    fprintf(stderr, "carve-soak: %s\n", pass ? "PASS" : "FAIL");
    for (int i = 0; i < g_opt.threads; i++)
        free(g_workers[i].slot);
    free(g_workers);
    return pass ? 0 : 1;
}
