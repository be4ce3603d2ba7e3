/*
 * session.c — one run of a program under the interposer: the options read
 * from the environment, the trace, the report and picture at exit, the
 * messages on stderr, and what happens at signals and fork.
 *
 * The one idea: everything that must survive the program's end is done
 * without CUDA. The driver may already be torn down when exit handlers
 * run, so the report reads carve's host-side statistics only, the trace is
 * a file written through the trace library, and the picture replays that
 * file on the virtual backend. A SIGINT or SIGTERM that would kill the
 * program first finishes the trace with async-signal-safe calls (signals.c
 * stands in front of the program's dispositions, whatever it sets them to
 * later); one the program ignores or handles is left to it (its handler
 * runs as it was set, siginfo included). A forked child neither traces nor reports
 * (its parent does), and the child of a process that used CUDA serves
 * nothing: the locks of the interposer are taken around fork so that none
 * is left taken in the child, and all its calls go to the driver.
 *
 * Environment (carve-run sets it from its options; LD_PRELOAD users set it
 * by hand): CARVE_CONF (arena configuration, as for carve_device_arena),
 * CARVE_RUN_TRACE=FILE[.gz], CARVE_RUN_REPORT=- (text on stderr) or FILE
 * (JSON, and the text on stderr), CARVE_RUN_SVG=FILE, CARVE_RUN_QUIET=1.
 *
 * Child processes inherit all of it. The first process is the run's root
 * (CARVE_RUN_ROOT_PID, set by carve-run, or here by the first process that
 * loads the interposer): it writes the files under the names given; any
 * other process writes FILE.<pid> beside them. Files are made only by a
 * process that uses CUDA (the trace opens at its first event), so the shells
 * and compressors a program starts leave nothing behind.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/text.h"
#include "carve_trace.h"
#include "preload/preload.h"

carve_session carve_run;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pid_t owner;                  /* the process that traces and reports */
static carve_trace_writer *writer;
static char trace_path[4096], report_path[4096], svg_path[4096];
static int trace_is_temp;
static int oom_said[64], warned[64];

/* Trace stream numbers: 0 for the default streams, then in order of first use. */
static pthread_mutex_t streams_lock = PTHREAD_MUTEX_INITIALIZER;
static carve_stream stream_ids[CARVE_TRACE_MAX_STREAMS];
static unsigned nstream_ids = 1;

uint64_t carve_session_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    if (carve_run.quiet)
        return;
    char buf[1536];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof(buf) - 1)
        n = (int)sizeof(buf) - 2;
    buf[n++] = '\n';
    (void)!write(STDERR_FILENO, buf, (size_t)n);
}

/* A SIGINT or SIGTERM that ends the program: the trace is finished first
 * (signals.c calls this from its handler; async-signal-safe). */
static void finish_trace_now(void) {
    if (getpid() == owner && writer) {
        carve_trace_writer_finish_now(writer);
        writer = NULL;
    }
}

static void before_fork(void) {
    if (writer)
        carve_trace_writer_flush(writer);
}

/* Around every fork (contexts.c says what the child may do): the
 * interposer's locks, the meter's last (its holders take no other). */
static void fork_prepare(void) {
    carve_ctx_fork(0);
    carve_meter_fork(0);
}
static void fork_parent(void) {
    carve_meter_fork(1);
    carve_ctx_fork(1);
}
static void fork_child(void) {
    carve_capture_forked();
    carve_meter_fork(2);
    if (carve_ctx_fork(2))
        __atomic_store_n(&carve_run.ready, 0, __ATOMIC_RELEASE); /* every hook passes calls through */
}

static void copy_env(char *dst, size_t len, const char *name) {
    const char *v = getenv(name);
    snprintf(dst, len, "%s", v ? v : "");
}

/* A file name for this process: as given for the root, FILE.<pid> (before
 * a ".gz" or ".json" ending) for any other. */
static void name_for_process(char *dst, size_t len, const char *name, int root) {
    if (root || !name[0]) {
        snprintf(dst, len, "%s", name);
        return;
    }
    const char *ext = NULL;
    static const char *const ends[] = {".csv.gz", ".gz", ".json", ".csv", ".svg"};
    for (size_t i = 0; !ext && i < sizeof(ends) / sizeof(ends[0]); i++) {
        size_t n = strlen(name), k = strlen(ends[i]);
        if (n > k && strcmp(name + n - k, ends[i]) == 0)
            ext = name + n - k;
    }
    if (!ext)
        ext = name + strlen(name);
    snprintf(dst, len, "%.*s.%d%s", (int)(ext - name), name, (int)getpid(), ext);
}

static void init_once(void) {
    owner = getpid();
    carve_run.t0_ns = carve_session_now();
    const char *q = getenv("CARVE_RUN_QUIET");
    carve_run.quiet = q && *q && strcmp(q, "0") != 0;
    const char *rootv = getenv("CARVE_RUN_ROOT_PID");
    int root = !rootv || !*rootv || atol(rootv) == (long)owner;
    if (!rootv || !*rootv) { /* this process is the root: its children will know */
        char pid[32];
        snprintf(pid, sizeof(pid), "%d", (int)owner);
        setenv("CARVE_RUN_ROOT_PID", pid, 1);
    }
    char given[4096];
    copy_env(given, sizeof(given), "CARVE_RUN_TRACE");
    name_for_process(trace_path, sizeof(trace_path), given, root);
    copy_env(given, sizeof(given), "CARVE_RUN_REPORT");
    if (strcmp(given, "-") == 0)
        snprintf(report_path, sizeof(report_path), "-");
    else
        name_for_process(report_path, sizeof(report_path), given, root);
    copy_env(given, sizeof(given), "CARVE_RUN_SVG");
    name_for_process(svg_path, sizeof(svg_path), given, root);
    carve_run.report = report_path[0] != 0;
    if (svg_path[0] && !trace_path[0]) { /* the picture needs a trace: keep one aside */
        const char *dir = getenv("TMPDIR");
        snprintf(trace_path, sizeof(trace_path), "%s/carve-run-%d.trace", dir && *dir ? dir : "/tmp", (int)owner);
        trace_is_temp = 1;
    }
    carve_run.tracing = trace_path[0] != 0;
    carve_run.watching = carve_run.tracing || carve_run.report;
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    __atomic_store_n(&carve_run.ready, carve_faults_armed ? 2 : 1, __ATOMIC_RELEASE);
}

/* The trace opens at the first event: only processes that use CUDA make one. */
static pthread_mutex_t writer_lock = PTHREAD_MUTEX_INITIALIZER;
static int writer_tried;

static carve_trace_writer *trace_writer(void) {
    if (!trace_path[0] || getpid() != owner)
        return NULL;
    if (__atomic_load_n(&writer_tried, __ATOMIC_ACQUIRE))
        return writer;
    pthread_mutex_lock(&writer_lock);
    if (!writer_tried) {
        char title[256];
        snprintf(title, sizeof(title), "captured by carve-run (carve %s), pid %d", carve_version(), (int)owner);
        carve_trace_writer *w = NULL;
        if (carve_trace_writer_open(trace_path, title, &w) != CARVE_OK) {
            say("carve-run: %s; the run goes on without a trace", carve_last_error(NULL));
            w = NULL;
        } else {
            carve_signals_watch(finish_trace_now);
            pthread_atfork(before_fork, NULL, NULL);
        }
        writer = w;
        __atomic_store_n(&writer_tried, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&writer_lock);
    return writer;
}

void carve_session_init(void) { pthread_once(&once, init_once); }

static unsigned stream_number(carve_stream s) {
    if ((uintptr_t)s <= 2) /* NULL, legacy, per-thread: the default stream */
        return 0;
    pthread_mutex_lock(&streams_lock);
    unsigned k = 1;
    while (k < nstream_ids && stream_ids[k] != s)
        k++;
    if (k == nstream_ids) {
        if (nstream_ids < CARVE_TRACE_MAX_STREAMS)
            stream_ids[nstream_ids++] = s;
        else
            k = CARVE_TRACE_MAX_STREAMS - 1; /* past 1023 streams, they share the last number */
    }
    pthread_mutex_unlock(&streams_lock);
    return k;
}

void carve_session_trace_alloc(uintptr_t ptr, size_t size, carve_stream stream) {
    carve_trace_writer *w = trace_writer();
    if (w)
        carve_trace_writer_alloc(w, ptr, size, stream_number(stream), carve_session_now() - carve_run.t0_ns);
}

void carve_session_trace_free(uintptr_t ptr) {
    carve_trace_writer *w = trace_writer();
    if (w)
        carve_trace_writer_free(w, ptr, carve_session_now() - carve_run.t0_ns);
}

/* The program's own live bytes in carve's buffers, per context, and their
 * peak (carve_ctx_count_live): counted at its calls, so that what carve
 * keeps after a free (a thread's reusable buffers, the quarantine) is not
 * counted. */
void carve_session_saw_alloc(carve_ctx *c, uintptr_t ptr, size_t size, carve_stream stream) {
    carve_session_trace_alloc(ptr, size, stream);
    if (carve_run.report)
        carve_ctx_count_live(c, (ptrdiff_t)size);
}

void carve_session_saw_free(carve_ctx *c, uintptr_t ptr, size_t size) {
    carve_session_trace_free(ptr);
    if (carve_run.report)
        carve_ctx_count_live(c, -(ptrdiff_t)size);
}

void carve_session_oom(int device, size_t size, const char *why) {
    if (device >= 0 && device < 64 && __atomic_exchange_n(&oom_said[device], 1, __ATOMIC_RELAXED))
        return;
    char b[32];
    say("carve-run: out of memory on device %d: an allocation of %s failed (later failures are not repeated "
        "here).\n  %s", device, carve_format_bytes(b, sizeof(b), size), why && *why ? why : "");
}

void carve_session_warn(int device, const char *why) {
    if (device >= 0 && device < 64 && __atomic_exchange_n(&warned[device], 1, __ATOMIC_RELAXED))
        return;
    say("carve-run: device %d cannot be served from carve (%s); its allocations go to the driver", device, why);
}

static int ipc_said[64];

void carve_session_ipc_refused(int device) {
    if (device >= 0 && device < 64 && __atomic_exchange_n(&ipc_said[device], 1, __ATOMIC_RELAXED))
        return;
    say("carve-run: cuIpcGetMemHandle (cudaIpcGetMemHandle) refused on device %d with CUDA_ERROR_NOT_SUPPORTED: "
        "carve serves this device in virtual-memory mode (cuMemCreate granules), which legacy CUDA IPC cannot "
        "export; run with --mode segments to share carve's memory between processes", device);
}

/* ---- the report at exit -------------------------------------------------- */

typedef struct report_ctx {
    FILE *json;
    int first;
} report_ctx;

static void report_one(carve_arena *a, int device, const carve_ctx_counts *n, void *arg) {
    report_ctx *r = arg;
    carve_stats s;
    carve_get_stats(a, &s);
    double fp = s.requested_bytes_peak ? (double)s.reserved_bytes_peak / (double)s.requested_bytes_peak : 0;
    size_t lp = n->live_peak;
    double lfp = lp ? (double)s.reserved_bytes_peak / (double)lp : 0;
    size_t live_now = n->live;
    uint64_t calls = n->allocs + n->frees + n->async_allocs + n->async_frees;
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    say("carve-run: device %d: the program's live peak %s (footprint %.3f); the arena's peak requested %s (with "
        "what carve kept after frees), peak allocated %s, peak reserved %s (footprint %.3f), limit %s",
        device, carve_format_bytes(b5, sizeof(b5), lp), lfp, carve_format_bytes(b1, sizeof(b1), s.requested_bytes_peak),
        carve_format_bytes(b2, sizeof(b2), s.allocated_bytes_peak), carve_format_bytes(b3, sizeof(b3), s.reserved_bytes_peak),
        fp, carve_format_bytes(b4, sizeof(b4), s.limit_bytes));
    say("carve-run: device %d: %llu allocations and %llu frees (%llu and %llu stream-ordered), %llu out of "
        "memory, %llu calls passed to the driver, %llu driver reserves; %.1f ms in carve (%.0f ns a call); "
        "%llu epochs of unordered frees (%llu given back as they closed, at most %s waiting at once), %llu waits, "
        "%llu of them before growing; ordered reuse %s%s",
        device, (unsigned long long)(n->allocs + n->async_allocs), (unsigned long long)(n->frees + n->async_frees),
        (unsigned long long)n->async_allocs, (unsigned long long)n->async_frees, (unsigned long long)n->ooms,
        (unsigned long long)n->passthrough, (unsigned long long)s.num_backend_allocs, (double)n->ns_in_carve / 1e6,
        calls ? (double)n->ns_in_carve / (double)calls : 0.0, (unsigned long long)n->epochs,
        (unsigned long long)n->ordered, carve_format_bytes(b4, sizeof(b4), n->held_peak), (unsigned long long)(n->drains + n->room_waits),
        (unsigned long long)n->room_waits, n->unordered_why ? "ended by " : "on to the end",
        n->unordered_why ? n->unordered_why : "");
    if (r->json) {
        fprintf(r->json,
                "%s{\"device\": %d, \"peak_live_bytes\": %zu, \"live_footprint_ratio\": %.6f, "
                "\"peak_requested_bytes\": %zu, \"peak_allocated_bytes\": %zu, "
                "\"peak_reserved_bytes\": %zu, \"footprint_ratio\": %.6f, \"limit_bytes\": %zu, "
                "\"reserved_bytes_at_exit\": %zu, \"live_bytes_at_exit\": %zu, \"live_buffers_at_exit\": %llu, "
                "\"allocs\": %llu, \"frees\": %llu, "
                "\"async_allocs\": %llu, \"async_frees\": %llu, \"ooms\": %llu, \"passthrough_calls\": %llu, "
                "\"driver_reserves\": %llu, \"driver_releases\": %llu, \"ns_in_carve\": %llu, "
                "\"unordered_free_epochs\": %llu, \"unordered_free_ordered_epochs\": %llu, "
                "\"unordered_free_peak_bytes\": %zu, \"waits\": %llu, "
                "\"waits_before_growing\": %llu, \"arena_event_records\": %llu, "
                "\"arena_event_queries\": %llu, \"arena_syncs\": %llu, \"ordered_reuse_ended_by\": %s%s%s}",
                r->first ? "" : ", ", device, lp, lfp, s.requested_bytes_peak, s.allocated_bytes_peak, s.reserved_bytes_peak,
                fp, s.limit_bytes, s.reserved_bytes, live_now, (unsigned long long)s.num_live,
                (unsigned long long)(n->allocs + n->async_allocs), (unsigned long long)(n->frees + n->async_frees),
                (unsigned long long)n->async_allocs, (unsigned long long)n->async_frees, (unsigned long long)n->ooms,
                (unsigned long long)n->passthrough, (unsigned long long)s.num_backend_allocs,
                (unsigned long long)s.num_backend_frees, (unsigned long long)n->ns_in_carve,
                (unsigned long long)n->epochs, (unsigned long long)n->ordered, n->held_peak,
                (unsigned long long)(n->drains + n->room_waits),
                (unsigned long long)n->room_waits, (unsigned long long)s.num_event_records, (unsigned long long)s.num_event_queries,
                (unsigned long long)s.num_syncs, n->unordered_why ? "\"" : "",
                n->unordered_why ? n->unordered_why : "null", n->unordered_why ? "\"" : "");
    }
    r->first = 0;
}

static void draw(void) {
    carve_trace t;
    if (carve_trace_load_path(trace_path, &t, NULL, NULL) != 0) {
        say("carve-run: cannot read the trace back for the picture: %s", t.diag);
        carve_trace_free(&t);
        return;
    }
    carve_config cfg;
    carve_conf_parse(getenv("CARVE_CONF"), 0, &cfg);
    cfg.backend = CARVE_BACKEND_VIRTUAL;
    cfg.limit_fraction = cfg.initial_fraction = 0;
    cfg.fail_backend_at = cfg.fail_backend_every = 0;
    cfg.name = "carve-run picture";
    carve_replay_streams rs;
    carve_replay_rec rec;
    carve_replay_result res;
    FILE *f = NULL;
    if (carve_replay_streams_open(&rs, t.nstreams, CARVE_BACKEND_VIRTUAL, 0) != CARVE_OK) {
        say("carve-run: picture: %s", carve_last_error(NULL));
    } else {
        if (carve_replay_record(&t, &cfg, &rs, CARVE_SVG_COLS, &rec, &res) != CARVE_OK) {
            say("carve-run: picture: %s", carve_last_error(NULL));
        } else if (!(f = fopen(svg_path, "w"))) {
            say("carve-run: cannot write %s: %s", svg_path, strerror(errno));
        } else {
            carve_svg_info info = {"this run (replayed on the virtual backend)", "virtual",
                                   t.peak_requested ? (double)res.stats.reserved_bytes_peak / (double)t.peak_requested
                                                    : 0,
                                   res.stats.reserved_bytes_peak, 0};
            if (carve_svg_write(f, &t, &rec, &info) != 0 || fclose(f) != 0)
                say("carve-run: cannot write %s", svg_path);
            else
                say("carve-run: picture of %zu events in %s", t.n, svg_path);
            f = NULL;
        }
        if (rec.addr)
            carve_replay_rec_free(&rec);
        carve_replay_streams_close(&rs);
    }
    if (f)
        fclose(f);
    carve_trace_free(&t);
}

/* What was counted against the cap, per device and by kind (meter.c), and
 * the failures injected on purpose. */
static int report_counted(report_ctx *r) {
    int any = 0;
    for (int dev = 0; dev < 64; dev++) {
        carve_meter_view v;
        if (!carve_meter_get(dev, &v))
            continue;
        char line[1024], b1[32], b2[32], b3[32];
        int n = snprintf(line, sizeof(line), "carve-run: device %d: counted against the cap (%s): peak %s, at exit %s;",
                         dev, carve_format_bytes(b1, sizeof(b1), v.cap), carve_format_bytes(b2, sizeof(b2), v.peak),
                         carve_format_bytes(b3, sizeof(b3), v.bytes));
        for (int k = 0; k < CARVE_METER_KINDS && n > 0 && (size_t)n < sizeof(line); k++)
            if (v.kind[k].calls || v.kind[k].refused)
                n += snprintf(line + n, sizeof(line) - (size_t)n, " %s peak %s (%llu allocations, %llu refused);",
                              carve_meter_kind_name(k), carve_format_bytes(b1, sizeof(b1), v.kind[k].peak),
                              (unsigned long long)v.kind[k].calls, (unsigned long long)v.kind[k].refused);
        say("%s", line);
        if (r->json) {
            fprintf(r->json, "%s{\"device\": %d, \"cap_bytes\": %zu, \"peak_bytes\": %zu, \"bytes_at_exit\": %zu, \"kinds\": {",
                    any ? ", " : "", dev, v.cap == SIZE_MAX ? (size_t)0 : v.cap, v.peak, v.bytes);
            for (int k = 0; k < CARVE_METER_KINDS; k++)
                fprintf(r->json, "%s\"%s\": {\"peak_bytes\": %zu, \"bytes_at_exit\": %zu, \"allocations\": %llu, "
                        "\"refused\": %llu}", k ? ", " : "", carve_meter_kind_name(k), v.kind[k].peak, v.kind[k].bytes,
                        (unsigned long long)v.kind[k].calls, (unsigned long long)v.kind[k].refused);
            fprintf(r->json, "}}");
        }
        any = 1;
    }
    if (carve_faults_armed)
        say("carve-run: %llu allocation failures injected", carve_faults_injected());
    return any;
}

static void count_one(carve_arena *a, int device, const carve_ctx_counts *n, void *arg) {
    (void)a;
    (void)device;
    (void)n;
    ++*(int *)arg;
}

__attribute__((destructor)) static void at_exit(void) {
    if (!__atomic_load_n(&carve_run.ready, __ATOMIC_RELAXED) || getpid() != owner)
        return;
    if (writer) {
        if (carve_trace_writer_close(writer) != CARVE_OK)
            say("carve-run: %s", carve_last_error(NULL));
        writer = NULL;
    }
    int used_cuda = 0;
    carve_ctx_each(count_one, &used_cuda);
    carve_meter_view seen;
    for (int dev = 0; dev < 64 && !used_cuda; dev++)
        used_cuda = carve_meter_get(dev, &seen);
    if (carve_run.report && used_cuda) {
        report_ctx r = {NULL, 1};
        int json = strcmp(report_path, "-") != 0;
        if (json && !(r.json = fopen(report_path, "w")))
            say("carve-run: cannot write %s: %s", report_path, strerror(errno));
        if (r.json)
            fprintf(r.json, "{\"carve_run_report\": 1, \"version\": \"%s\", \"pid\": %d, \"seconds\": %.3f, \"devices\": [",
                    carve_version(), (int)owner, (double)(carve_session_now() - carve_run.t0_ns) / 1e9);
        carve_ctx_each(report_one, &r);
        if (r.json)
            fprintf(r.json, "], \"counted\": [");
        report_counted(&r);
        if (r.json) {
            fprintf(r.json, "], \"injected_failures\": %llu}\n", carve_faults_injected());
            if (fclose(r.json) != 0)
                say("carve-run: cannot write %s", report_path);
        }
    }
    if (svg_path[0] && writer_tried && used_cuda)
        draw();
    if (trace_is_temp && writer_tried)
        unlink(trace_path);
}
