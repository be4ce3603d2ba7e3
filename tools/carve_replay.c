/*
 * carve_replay.c — carve-replay, the fragmentation laboratory: replay an
 * allocation trace through an arena and report how much memory the arena
 * had to reserve for it, how fast it served it, the smallest single block
 * that would have held it, and a picture of the arena over time.
 *
 * A thin front end: it parses options, times and prints; reading, replaying,
 * reporting and drawing are the trace library's (carve_trace.h). The trace
 * is loaded whole first, so the timed replay touches nothing but the
 * allocator and one array. The default backend is VIRTUAL: addresses with
 * nothing behind them, so a trace recorded on an 80 GB device replays on any
 * machine in seconds.
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

#define EXIT_USAGE 2

typedef struct options {
    carve_config cfg;
    const char *trace;
    const char *svg;
    unsigned repeat, warm;
    int json, min_capacity, quiet, color_by_stream;
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
        "  -h, --help            this help\n"
        "  -V, --version         the carve version\n"
        "\n"
        "Out-of-memory allocations are counted and skipped (with their frees); malformed\n"
        "trace lines are counted and skipped. Exit status: 0 on success, 1 when the trace\n"
        "cannot be read or the replay fails, 2 for bad options.\n",
        out);
}

static void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("carve-replay: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nTry 'carve-replay --help' for more information.\n", stderr);
    exit(EXIT_USAGE);
}

/* Apply "key=value" to the configuration through carve_config_parse, so the
 * tool accepts exactly the sizes and names the library does. */
static void set_key(options *o, const char *key, const char *value, const char *opt) {
    if (!*value || strpbrk(value, ",=;"))
        usage_error("bad value for %s", opt);
    char text[256];
    if ((size_t)snprintf(text, sizeof(text), "%s=%s", key, value) >= sizeof(text))
        usage_error("value for %s is too long", opt);
    if (carve_config_parse(&o->cfg, text) != CARVE_OK) {
        fprintf(stderr, "carve-replay: bad value for %s: %s\n", opt, carve_last_error(NULL));
        fputs("Try 'carve-replay --help' for more information.\n", stderr);
        exit(EXIT_USAGE);
    }
}

static void parse_options(int argc, char **argv, options *o) {
    enum { O_DEVICE = 256, O_INITIAL, O_LIMIT, O_GROWTH, O_MIN_GROW, O_CONF, O_JSON, O_MINCAP,
           O_SVG, O_SVG_COLOR };
    static const struct option longs[] = {
        {"backend", required_argument, NULL, 'b'},   {"device", required_argument, NULL, O_DEVICE},
        {"initial", required_argument, NULL, O_INITIAL}, {"limit", required_argument, NULL, O_LIMIT},
        {"growth", required_argument, NULL, O_GROWTH}, {"min-grow", required_argument, NULL, O_MIN_GROW},
        {"conf", required_argument, NULL, O_CONF},    {"repeat", required_argument, NULL, 'r'},
        {"warm", required_argument, NULL, 'w'},
        {"json", no_argument, NULL, O_JSON},          {"min-capacity", no_argument, NULL, O_MINCAP},
        {"svg", required_argument, NULL, O_SVG},      {"svg-color", required_argument, NULL, O_SVG_COLOR},
        {"quiet", no_argument, NULL, 'q'},            {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},          {NULL, 0, NULL, 0},
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
                usage_error("unknown backend '%s' (virtual, host or cuda)", optarg);
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
        case O_CONF:
            if (carve_config_parse(&o->cfg, optarg) != CARVE_OK)
                usage_error("bad --conf: %s", carve_last_error(NULL));
            break;
        case 'r': {
            char *end;
            errno = 0;
            unsigned long v = strtoul(optarg, &end, 10);
            if (errno || end == optarg || *end || v < 1 || v > 1000000 || optarg[0] == '-')
                usage_error("--repeat takes a count from 1 to 1000000, not '%s'", optarg);
            o->repeat = (unsigned)v;
            break;
        }
        case 'w': {
            char *end;
            errno = 0;
            unsigned long v = strtoul(optarg, &end, 10);
            if (errno || end == optarg || *end || v > 1000 || optarg[0] == '-')
                usage_error("--warm takes a count from 0 to 1000, not '%s'", optarg);
            o->warm = (unsigned)v;
            break;
        }
        case O_JSON: o->json = 1; break;
        case O_MINCAP: o->min_capacity = 1; break;
        case O_SVG: o->svg = optarg; break;
        case O_SVG_COLOR:
            if (!strcmp(optarg, "stream"))
                o->color_by_stream = 1;
            else if (!strcmp(optarg, "size"))
                o->color_by_stream = 0;
            else
                usage_error("--svg-color takes size or stream, not '%s'", optarg);
            break;
        case 'q': o->quiet = 1; break;
        case 'h': usage(stdout); exit(0);
        case 'V': printf("carve-replay %s\n", carve_version()); exit(0);
        case ':':
            usage_error("option %s needs a value", argv[optind - 1]);
            break;
        default:
            if (optopt)
                fprintf(stderr, "carve-replay: unknown option '-%c'\n", optopt);
            else
                fprintf(stderr, "carve-replay: unknown option '%s'\n", argv[optind - 1]);
            fputs("Try 'carve-replay --help' for more information.\n", stderr);
            exit(EXIT_USAGE);
        }
    }
    if (optind == argc)
        usage_error("no trace given (use - for standard input)");
    if (optind + 1 < argc)
        usage_error("one trace only, but '%s' follows it", argv[optind + 1]);
    o->trace = argv[optind];
}

/* ---- main -------------------------------------------------------------- */

static void load_progress(size_t lines, void *arg) {
    (void)arg;
    fprintf(stderr, "carve-replay: read %zu lines\n", lines);
}

static void progress(void *arg, const char *message) {
    (void)arg;
    fprintf(stderr, "carve-replay: %s\n", message);
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

/* A failure to create the arena: configuration errors are the user's (2). */
static int arena_failure(carve_status st) {
    fprintf(stderr, "carve-replay: cannot create the arena: %s: %s\n", carve_status_str(st),
            carve_last_error(NULL));
    return st == CARVE_ERR_INVALID ? EXIT_USAGE : 1;
}

int main(int argc, char **argv) {
    options o;
    parse_options(argc, argv, &o);

    /* Try the configuration before reading what may be a long trace. */
    carve_arena *probe;
    carve_status cst = carve_arena_create(&o.cfg, &probe);
    if (cst != CARVE_OK)
        return arena_failure(cst);
    carve_arena_destroy(probe);

    carve_trace t;
    double t0 = now_s();
    if (carve_trace_load_path(o.trace, &t, o.quiet ? NULL : load_progress, NULL) != 0) {
        fprintf(stderr, "carve-replay: cannot read %s: %s\n", o.trace, t.diag);
        carve_trace_free(&t);
        return 1;
    }
    double load_seconds = now_s() - t0;
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
    int rc = 0;
    int loud = !o.quiet && t.n > ((size_t)1 << 20);
    for (unsigned k = 0; k < o.repeat; k++) {
        carve_replay_result r;
        if (loud && o.repeat > 1)
            fprintf(stderr, "carve-replay: replay %u of %u\n", k + 1, o.repeat);
        carve_status st = carve_replay_run_warm(&t, &o.cfg, &rs, slots, 0, k == 0 ? o.warm : 0,
                                                loud ? progress : NULL, NULL, &r, &warm);
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
        fprintf(stderr, "carve-replay: %llu allocations or frees failed other than by OOM: %s\n",
                (unsigned long long)first.nerrors, first.error);
        rc = 1;
    }

    if (o.min_capacity) {
        carve_status st = carve_replay_min_capacity(&t, &o.cfg, slots, o.quiet ? NULL : progress, NULL, &cap);
        if (st != CARVE_OK) {
            rc = arena_failure(st);
            goto out;
        }
        p.capacity = &cap;
    }

    if (o.svg) {
        carve_replay_rec rec;
        carve_replay_result rr;
        carve_status st = carve_replay_record(&t, &o.cfg, &rs, CARVE_SVG_COLS, &rec, &rr);
        if (st != CARVE_OK) {
            rc = arena_failure(st);
            goto out;
        }
        FILE *f = fopen(o.svg, "w");
        if (!f) {
            fprintf(stderr, "carve-replay: cannot write %s: %s\n", o.svg, strerror(errno));
            carve_replay_rec_free(&rec);
            rc = 1;
            goto out;
        }
        carve_svg_info info = {p.trace_name, carve_backend_str(o.cfg.backend), carve_replay_footprint(&p),
                               rr.stats.reserved_bytes_peak, o.color_by_stream};
        int wrc = carve_svg_write(f, &t, &rec, &info);
        long size = ftell(f);
        if (fclose(f) != 0 || wrc != 0) {
            fprintf(stderr, "carve-replay: cannot write %s (disk full or host memory exhausted)\n",
                    o.svg);
            rc = 1;
        }
        p.svg_bytes = size > 0 ? (size_t)size : 0;
        p.svg_path = o.svg;
        carve_replay_rec_free(&rec);
    }

    if (carve_replay_report_write(stdout, &p, o.json) != 0 || fflush(stdout) != 0)
        rc = 1;
out:
    free(secs);
    free(slots);
    carve_replay_streams_close(&rs);
    carve_trace_free(&t);
    return rc;
}
