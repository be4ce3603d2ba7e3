/*
 * carve_replay.c — carve-replay, the fragmentation laboratory: replay an
 * allocation trace through an arena and report how much memory the arena
 * had to reserve for it, how fast it served it, the smallest single block
 * that would have held it, and a picture of the arena over time.
 *
 * A thin front end: it parses options, times and prints; reading, replaying,
 * reporting and drawing are the trace library's (carve_trace.h). The trace
 * is loaded whole first (a few bytes an event), so the timed replay touches
 * nothing but the allocator and small arrays. The default backend is
 * VIRTUAL: addresses with nothing behind them, so a trace recorded on an
 * 80 GB device replays on any machine in seconds.
 *
 * Every option is checked before anything is read: a value out of range, a
 * value given twice, or a configuration the arena refuses ends the run with
 * a message naming it and exit status 2.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "carve.h"
#include "carve_trace.h"
#include "cli.h"

#define TOOL "carve-replay"

typedef struct options {
    carve_config cfg;
    char conf[2048];        /* every configuration key given, as one carve_config_parse text */
    const char *trace;
    const char *svg;
    unsigned repeat, warm;
    int json, min_capacity, quiet, progress, color_by_stream;
} options;

static void usage(FILE *out) {
    fputs(
        "usage: carve-replay [options] TRACE\n"
        "\n"
        "Replay an allocation trace through a carve arena and report its memory footprint\n"
        "and speed. TRACE is a text trace (docs/trace-format.md), gzip-compressed or not,\n"
        "or - for standard input.\n"
        "\n"
        "Arena:\n"
        "  -b, --backend NAME    virtual (default: addresses only, any size on any machine),\n"
        "                        host (real host memory) or cuda (device memory; one CUDA\n"
        "                        stream per trace stream)\n"
        "      --device N        CUDA device for --backend cuda (default 0)\n"
        "      --initial SIZE    bytes reserved at creation, e.g. 1GiB (default 0)\n"
        "      --limit SIZE      cap on reserved bytes (default: none; the device's memory\n"
        "                        for cuda); SIZE may be a fraction such as 0.5 for cuda\n"
        "      --growth 0|1      1: reserve segments on demand (default); 0: one block of\n"
        "                        --initial bytes\n"
        "      --min-grow SIZE   smallest segment reserved at once when growing\n"
        "      --conf TEXT       further configuration keys, e.g. sim_event_polls=2\n"
        "                        (the syntax of CARVE_CONF, see carve.h)\n"
        "  SIZE is an integer with an optional suffix B, KiB, MiB, GiB, TiB (or KB, MB, GB, TB).\n"
        "\n"
        "Measurements:\n"
        "  -r, --repeat N        replay N times on fresh arenas, report the median ns/op\n"
        "  -w, --warm N          after the first replay, N more on the same arena with its\n"
        "                        cache kept (what the trace left live is freed between them):\n"
        "                        median ns/op, backend calls per pass (maps and unmaps in\n"
        "                        virtual-memory mode), reserved peak; e.g. --warm 3\n"
        "      --min-capacity    find by bisection the smallest single block (growth off,\n"
        "                        initial = limit) that replays the trace without running out\n"
        "                        of memory, at 2 MiB granularity (virtual backend)\n"
        "      --svg FILE        draw the arena over time (x: event, y: address) into FILE\n"
        "      --svg-color KIND  colour buffers by size (default) or by stream\n"
        "\n"
        "Output:\n"
        "      --json            print one JSON object on stdout instead of the report\n"
        "  -q, --quiet           no progress or warnings on stderr\n"
        "      --progress        progress on stderr even when it is not a terminal\n"
        "                        (on a terminal it is shown anyway, unless --quiet)\n"
        "  -h, --help            this help\n"
        "  -V, --version         the carve version\n"
        "\n"
        "Out-of-memory allocations are counted and skipped (with their frees); malformed\n"
        "trace lines are counted and skipped. Exit status: 0 on success, 1 when the trace\n"
        "cannot be read (or holds no event line in its first 16 MiB), an output cannot\n"
        "be written or the replay fails, 2 for bad options: a value out of range or\n"
        "malformed, an option given twice, or a configuration the arena refuses.\n",
        out);
}

#define usage_error(...) cli_usage_error(TOOL, __VA_ARGS__)

/* Apply "key=value" to the configuration through carve_config_parse, so the
 * tool accepts exactly the sizes and names the library does, and keep it in
 * o->conf, parsed whole at the end: a key given twice (--limit and --conf
 * limit=, say) is refused there. */
static void set_key(options *o, const char *key, const char *value, const char *opt) {
    if (!*value || strpbrk(value, ",=;"))
        usage_error("bad value '%s' for %s", value, opt);
    char text[256];
    if ((size_t)snprintf(text, sizeof(text), "%s=%s", key, value) >= sizeof(text))
        usage_error("the value for %s is too long", opt);
    carve_config probe = o->cfg;
    if (carve_config_parse(&probe, text) != CARVE_OK)
        usage_error("bad value '%s' for %s: %s", value, opt, carve_last_error(NULL));
    size_t len = strlen(o->conf);
    if ((size_t)snprintf(o->conf + len, sizeof(o->conf) - len, "%s%s", len ? "," : "", text) >= sizeof(o->conf) - len)
        usage_error("the options make too long a configuration");
}

/* A count for opt in [min, max]. */
static unsigned count(const char *v, unsigned long long min, unsigned long long max, const char *opt) {
    unsigned long long n;
    if (cli_count(v, min, max, &n) != 0)
        usage_error("%s takes a whole number from %llu to %llu, not '%s'", opt, min, max, v);
    return (unsigned)n;
}

static void parse_options(int argc, char **argv, options *o) {
    enum { O_DEVICE = 256, O_INITIAL, O_LIMIT, O_GROWTH, O_MIN_GROW, O_CONF, O_JSON, O_MINCAP,
           O_SVG, O_SVG_COLOR, O_PROGRESS };
    static const struct option longs[] = {
        {"backend", required_argument, NULL, 'b'},   {"device", required_argument, NULL, O_DEVICE},
        {"initial", required_argument, NULL, O_INITIAL}, {"limit", required_argument, NULL, O_LIMIT},
        {"growth", required_argument, NULL, O_GROWTH}, {"min-grow", required_argument, NULL, O_MIN_GROW},
        {"conf", required_argument, NULL, O_CONF},    {"repeat", required_argument, NULL, 'r'},
        {"warm", required_argument, NULL, 'w'},
        {"json", no_argument, NULL, O_JSON},          {"min-capacity", no_argument, NULL, O_MINCAP},
        {"svg", required_argument, NULL, O_SVG},      {"svg-color", required_argument, NULL, O_SVG_COLOR},
        {"quiet", no_argument, NULL, 'q'},            {"progress", no_argument, NULL, O_PROGRESS},
        {"help", no_argument, NULL, 'h'},             {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof(*o));
    carve_config_init(&o->cfg);
    o->cfg.backend = CARVE_BACKEND_VIRTUAL;
    o->cfg.name = "carve-replay";
    o->repeat = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":b:r:w:qhV", longs, NULL)) != -1) {
        switch (c) {
        case 'b':
            if (strcmp(optarg, "virtual") && strcmp(optarg, "host") && strcmp(optarg, "cuda"))
                usage_error("--backend takes virtual, host or cuda, not '%s'", optarg);
            set_key(o, "backend", optarg, "--backend");
            break;
        case O_DEVICE: set_key(o, "device", optarg, "--device"); break;
        case O_INITIAL: set_key(o, "initial", optarg, "--initial"); break;
        case O_LIMIT: set_key(o, "limit", optarg, "--limit"); break;
        case O_GROWTH:
            if (strcmp(optarg, "0") && strcmp(optarg, "1"))
                usage_error("--growth takes 0 or 1, not '%s'", optarg);
            set_key(o, "growth", optarg, "--growth");
            break;
        case O_MIN_GROW: set_key(o, "min_grow", optarg, "--min-grow"); break;
        case O_CONF: {
            carve_config probe = o->cfg;
            if (!*optarg || strchr(optarg, ';'))
                usage_error("--conf takes key=value pairs separated by commas, not '%s'", optarg);
            if (carve_config_parse(&probe, optarg) != CARVE_OK)
                usage_error("bad --conf '%s': %s", optarg, carve_last_error(NULL));
            size_t len = strlen(o->conf);
            if ((size_t)snprintf(o->conf + len, sizeof(o->conf) - len, "%s%s", len ? "," : "", optarg) >=
                sizeof(o->conf) - len)
                usage_error("the options make too long a configuration");
            break;
        }
        case 'r':
            o->repeat = count(optarg, 1, 1000000, "--repeat");
            break;
        case 'w':
            o->warm = count(optarg, 0, 1000, "--warm");
            break;
        case O_JSON: o->json = 1; break;
        case O_MINCAP: o->min_capacity = 1; break;
        case O_SVG:
            if (!*optarg)
                usage_error("--svg needs a file name");
            o->svg = optarg;
            break;
        case O_SVG_COLOR:
            if (!strcmp(optarg, "stream"))
                o->color_by_stream = 1;
            else if (!strcmp(optarg, "size"))
                o->color_by_stream = 0;
            else
                usage_error("--svg-color takes size or stream, not '%s'", optarg);
            break;
        case 'q': o->quiet = 1; break;
        case O_PROGRESS: o->progress = 1; break;
        case 'h': usage(stdout); exit(0);
        case 'V': printf("carve-replay %s\n", carve_version()); exit(0);
        default: cli_bad_option(TOOL, argv, c, longs);
        }
    }
    static const char *const once[] = {"backend", "device", "initial", "limit", "growth", "min-grow", "repeat",
                                       "warm", "svg", "svg-color", NULL};
    cli_once(TOOL, optind, argv, ":b:r:w:qhV", longs, once);
    if (optind == argc)
        usage_error("no trace given (use - for standard input)");
    if (optind + 1 < argc)
        usage_error("one trace only, but '%s' follows it", argv[optind + 1]);
    if (o->quiet && o->progress)
        usage_error("--quiet and --progress: give one of them");
    /* All keys together: each may be given once, whichever option gave it. */
    if (carve_config_parse(&o->cfg, o->conf) != CARVE_OK)
        usage_error("%s (the options give '%s')", carve_last_error(NULL), o->conf);
    o->trace = argv[optind];
}

/* ---- main -------------------------------------------------------------- */

static cli_progress prog;

static void load_progress(size_t lines, void *arg) {
    (void)arg;
    cli_progress_say(&prog, "read %zu lines", lines);
}

static void progress(void *arg, const char *message) {
    const char *what = arg;
    cli_progress_say(&prog, "%s%s", what ? what : "", message);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* A failure to create the arena during the run (exit 1). */
static int arena_failure(carve_status st) {
    cli_progress_done(&prog);
    fprintf(stderr, "carve-replay: cannot create the arena: %s: %s\n", carve_status_str(st),
            carve_last_error(NULL));
    return 1;
}

/* "--initial 16.00 EiB (18446744073709551615 bytes)" or "--limit 0.5", for
 * the sizes that were given ("" when neither). */
static const char *sizes_given(char *buf, size_t len, const carve_config *c) {
    struct {
        const char *opt;
        size_t bytes;
        double fraction;
    } v[2] = {{"--initial", c->initial_bytes, c->initial_fraction}, {"--limit", c->limit_bytes, c->limit_fraction}};
    buf[0] = '\0';
    for (int i = 0; i < 2; i++) {
        size_t n = strlen(buf);
        char b[32];
        if (v[i].fraction > 0)
            snprintf(buf + n, len - n, "%s%s %g", n ? ", " : "", v[i].opt, v[i].fraction);
        else if (v[i].bytes)
            snprintf(buf + n, len - n, "%s%s %s (%zu bytes)", n ? ", " : "", v[i].opt,
                     v[i].bytes == SIZE_MAX ? "16.00 EiB" : carve_format_bytes(b, sizeof(b), v[i].bytes), v[i].bytes);
    }
    return buf;
}

/* The configuration must make an arena before a trace is read: one the
 * arena refuses, or whose memory cannot even be reserved, is the user's to
 * change (exit 2), named by the options that set it. */
static void check_arena(const options *o) {
    if (o->cfg.device && o->cfg.backend != CARVE_BACKEND_CUDA && o->cfg.backend != CARVE_BACKEND_CUDA_DRIVER)
        usage_error("--device %d is for --backend cuda; the %s backend has no devices", o->cfg.device,
                    carve_backend_str(o->cfg.backend));
    if (o->color_by_stream && !o->svg)
        usage_error("--svg-color colours the picture of --svg FILE, which is not asked for");
    carve_arena *probe;
    carve_status st = carve_arena_create(&o->cfg, &probe);
    if (st == CARVE_OK) {
        carve_arena_destroy(probe);
        return;
    }
    char sizes[192], why[512];
    snprintf(why, sizeof(why), "%s", carve_last_error(NULL));
    sizes_given(sizes, sizeof(sizes), &o->cfg);
    if (st == CARVE_ERR_INVALID)
        usage_error("the arena refuses this configuration: %s", why);
    if (st == CARVE_ERR_OOM) {
        /* The backend's own words end the arena's message: "...: virtual
         * address space exhausted". (The arena's words before them may name
         * 2^64 - 1 bytes "unlimited".) */
        const char *said = strrchr(why, ':');
        usage_error("%s%smore than the %s backend can reserve (it says: %s)", sizes,
                    *sizes ? ": " : "the configuration asks for ", carve_backend_str(o->cfg.backend),
                    said && said[1] ? said + 2 : why);
    }
    fprintf(stderr, "carve-replay: cannot create the arena: %s: %s\n", carve_status_str(st), why);
    exit(1);
}

int main(int argc, char **argv) {
    options o;
    parse_options(argc, argv, &o);
    cli_progress_init(&prog, TOOL, o.quiet, o.progress);

    /* Try the configuration before reading what may be a long trace. */
    check_arena(&o);

    carve_trace t;
    double t0 = now_s();
    if (carve_trace_load_path(o.trace, &t, load_progress, NULL) != 0) {
        cli_progress_done(&prog);
        fprintf(stderr, "carve-replay: cannot read %s: %s\n", o.trace, t.diag);
        carve_trace_free(&t);
        return 1;
    }
    double load_seconds = now_s() - t0;
    cli_progress_done(&prog);
    if (!o.quiet) {
        fprintf(stderr, "carve-replay: loaded %zu events in %.2f s\n", t.n, load_seconds);
        if (t.nbad)
            fprintf(stderr, "carve-replay: warning: %zu lines skipped: %s\n", t.nbad, t.diag);
    }

    carve_replay_streams rs;
    if (carve_replay_streams_open(&rs, t.nstreams, o.cfg.backend, o.cfg.device) != CARVE_OK) {
        fprintf(stderr, "carve-replay: %s\n", carve_last_error(NULL));
        carve_trace_free(&t);
        return 1;
    }
    void **slots = calloc(t.nslots ? t.nslots : 1, sizeof(void *));
    double *secs = calloc(o.repeat, sizeof(double));
    if (!slots || !secs) {
        fprintf(stderr, "carve-replay: host memory exhausted\n");
        free(slots);
        free(secs);
        carve_replay_streams_close(&rs);
        carve_trace_free(&t);
        return 1;
    }

    carve_replay_result first;
    carve_capacity_result cap;
    carve_replay_warm warm;
    carve_replay_report p;
    memset(&p, 0, sizeof(p));
    p.trace_name = strcmp(o.trace, "-") ? o.trace : "(standard input)";
    p.trace = &t;
    p.cfg = &o.cfg;
    p.result = &first;
    p.repeat = o.repeat;
    p.load_seconds = load_seconds;
    p.warm = o.warm ? &warm : NULL;
    carve_replay_driver drv;
    carve_replay_driver_init(&drv);
    int rc = 0;
    char what[64] = "";
    for (unsigned k = 0; k < o.repeat; k++) {
        carve_replay_result r;
        if (o.repeat > 1) {
            snprintf(what, sizeof(what), "replay %u of %u: ", k + 1, o.repeat);
            cli_progress_say(&prog, "replay %u of %u", k + 1, o.repeat);
        }
        /* The warm passes follow the first replay only; later replays time the cold pass. */
        carve_status st = carve_replay_run_driver(&t, &o.cfg, &rs, slots, 0, k == 0 ? o.warm : 0, progress, what,
                                                  &r, k == 0 ? &warm : NULL, k == 0 ? &drv : NULL);
        if (st != CARVE_OK) {
            rc = arena_failure(st);
            goto out;
        }
        if (k == 0)
            first = r;
        secs[k] = r.seconds;
    }
    qsort(secs, o.repeat, sizeof(double), cmp_double);
    p.seconds = o.repeat % 2 ? secs[o.repeat / 2] : (secs[o.repeat / 2 - 1] + secs[o.repeat / 2]) / 2;
    p.ns_per_op = t.n ? p.seconds * 1e9 / (double)t.n : 0;
    if (first.nerrors) {
        cli_progress_done(&prog);
        fprintf(stderr, "carve-replay: %llu allocations or frees failed other than by OOM: %s\n",
                (unsigned long long)first.nerrors, first.error);
        rc = 1;
    }

    if (o.min_capacity) {
        carve_status st = carve_replay_min_capacity(&t, &o.cfg, slots, progress, NULL, &cap);
        if (st != CARVE_OK) {
            rc = arena_failure(st);
            goto out;
        }
        p.capacity = &cap;
    }

    if (o.svg) {
        carve_replay_rec rec;
        carve_replay_result rr;
        cli_progress_say(&prog, "drawing %s", o.svg);
        carve_status st = carve_replay_record(&t, &o.cfg, &rs, CARVE_SVG_COLS, &rec, &rr);
        if (st != CARVE_OK) {
            rc = arena_failure(st);
            goto out;
        }
        FILE *f = fopen(o.svg, "w");
        if (!f) {
            cli_progress_done(&prog);
            fprintf(stderr, "carve-replay: cannot write %s: %s\n", o.svg, strerror(errno));
            carve_replay_rec_free(&rec);
            rc = 1;
        } else {
            carve_svg_info info = {p.trace_name, carve_backend_str(o.cfg.backend), carve_replay_footprint(&p),
                                   rr.stats.reserved_bytes_peak, o.color_by_stream};
            int wrc = carve_svg_write(f, &t, &rec, &info);
            long size = ftell(f);
            errno = 0;
            if (fclose(f) != 0 || wrc != 0) {
                cli_progress_done(&prog);
                fprintf(stderr, "carve-replay: cannot write %s: %s\n", o.svg,
                        errno ? strerror(errno) : "disk full or host memory exhausted");
                rc = 1;
            } else { /* the report names the picture only when it was written */
                p.svg_bytes = size > 0 ? (size_t)size : 0;
                p.svg_path = o.svg;
            }
            carve_replay_rec_free(&rec);
        }
    }

    cli_progress_done(&prog);
    if (carve_replay_report_write_driver(stdout, &p, &drv, o.json) != 0 || fflush(stdout) != 0)
        rc = 1;
out:
    free(secs);
    free(slots);
    carve_replay_streams_close(&rs);
    carve_trace_free(&t);
    return rc;
}
