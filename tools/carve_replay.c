/*
 * carve_replay.c — carve-replay, the fragmentation laboratory: replay an
 * allocation trace through an arena and report how much memory the arena
 * had to reserve for it, how fast it served it, the smallest single block
 * that would have held it, and a picture of the arena over time.
 *
 * The trace is loaded whole first (trace.c turns ids into dense slots), so
 * the timed replay touches nothing but the allocator and one array. The
 * default backend is VIRTUAL: addresses with nothing behind them, so a trace
 * recorded on an 80 GB device replays on any machine in seconds.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "carve.h"
#include "replay.h"
#include "svg.h"
#include "trace.h"

#define EXIT_USAGE 2

typedef struct options {
    carve_config cfg;
    const char *trace;
    const char *svg;
    unsigned repeat;
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
    while ((c = getopt_long(argc, argv, ":b:r:qhV", longs, NULL)) != -1) {
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

/* ---- input: plain or gzip, file or stdin ------------------------------- */

typedef struct input {
    FILE *f;
    pid_t gzip, feeder;  /* child processes when decompressing */
} input;

/* Open the trace. A gzip file (magic byte 0x1f, which no text trace starts
 * with) is read through `gzip -dc`; for standard input a child process feeds
 * what this process already buffered, and the rest, to gzip. */
static int open_input(const char *path, input *in, char *err, size_t errlen) {
    memset(in, 0, sizeof(*in));
    int is_stdin = !strcmp(path, "-");
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    int c = getc(f);
    if (c == EOF || c != 0x1f) {
        if (c != EOF)
            ungetc(c, f);
        else
            clearerr(f);
        in->f = f;
        return 0;
    }
    ungetc(c, f);
    int out[2], feed[2] = {-1, -1};
    if (pipe(out) != 0 || (is_stdin && pipe(feed) != 0)) {
        snprintf(err, errlen, "cannot create a pipe: %s", strerror(errno));
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    in->gzip = fork();
    if (in->gzip < 0) {
        snprintf(err, errlen, "cannot start gzip: %s", strerror(errno));
        return -1;
    }
    if (in->gzip == 0) {
        dup2(out[1], STDOUT_FILENO);
        if (is_stdin)
            dup2(feed[0], STDIN_FILENO);
        close(out[0]);
        close(out[1]);
        if (is_stdin) {
            close(feed[0]);
            close(feed[1]);
            execlp("gzip", "gzip", "-dc", (char *)NULL);
        } else {
            execlp("gzip", "gzip", "-dc", "--", path, (char *)NULL);
        }
        _exit(127);
    }
    close(out[1]);
    if (is_stdin) {
        close(feed[0]);
        in->feeder = fork();
        if (in->feeder == 0) {
            close(out[0]);
            char buf[65536];
            size_t got;
            while ((got = fread(buf, 1, sizeof(buf), f)) > 0)
                if (write(feed[1], buf, got) != (ssize_t)got)
                    _exit(1);
            _exit(0);
        }
        close(feed[1]);
        if (in->feeder < 0) {
            snprintf(err, errlen, "cannot start a process: %s", strerror(errno));
            return -1;
        }
    } else {
        fclose(f);
    }
    in->f = fdopen(out[0], "rb");
    if (!in->f) {
        snprintf(err, errlen, "fdopen: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* Close the input; -1 when gzip failed. */
static int close_input(input *in, char *err, size_t errlen) {
    int rc = 0;
    if (in->f && in->f != stdin)
        fclose(in->f);
    int status;
    if (in->feeder > 0)
        waitpid(in->feeder, &status, 0);
    if (in->gzip > 0 && waitpid(in->gzip, &status, 0) == in->gzip &&
        !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
            snprintf(err, errlen, "the trace is gzip-compressed but gzip could not be run");
        else
            snprintf(err, errlen, "gzip -dc failed on the trace (corrupt or truncated file?)");
        rc = -1;
    }
    return rc;
}

/* ---- output ------------------------------------------------------------ */

static void json_string(FILE *out, const char *s) {
    fputc('"', out);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

typedef struct report {
    const options *o;
    const carve_trace *t;
    replay_result r;          /* first replay */
    double ns_per_op, seconds, load_seconds;
    capacity_result cap;
    int have_cap;
    size_t svg_bytes;
} report;

static double footprint(const report *p) {
    return p->t->peak_requested ? (double)p->r.stats.reserved_bytes_peak / (double)p->t->peak_requested
                                : 0;
}

static void print_json(const report *p) {
    const carve_trace *t = p->t;
    const carve_stats *s = &p->r.stats;
    const options *o = p->o;
    FILE *out = stdout;
    fputs("{\"trace\": ", out);
    json_string(out, o->trace);
    fprintf(out, ", \"backend\": \"%s\", \"growth\": %d, \"initial_bytes\": %zu, \"limit_bytes\": %zu",
            carve_backend_str(o->cfg.backend), o->cfg.growth ? 1 : 0, p->r.initial_bytes,
            s->limit_bytes == SIZE_MAX ? (size_t)0 : s->limit_bytes);
    fprintf(out, ", \"events\": %zu, \"allocs\": %zu, \"frees\": %zu, \"streams\": %u, \"slots\": %zu",
            t->n, t->nallocs, t->nfrees, t->nstreams, t->nslots);
    fprintf(out, ", \"skipped_lines\": %zu, \"diag\": ", t->nbad);
    json_string(out, t->diag);
    fprintf(out, ", \"peak_requested_bytes\": %llu, \"total_alloc_bytes\": %llu",
            (unsigned long long)t->peak_requested, (unsigned long long)t->total_alloc_bytes);
    fprintf(out, ", \"reserved_peak_bytes\": %zu, \"allocated_peak_bytes\": %zu",
            s->reserved_bytes_peak, s->allocated_bytes_peak);
    if (t->peak_requested)
        fprintf(out, ", \"footprint_ratio\": %.6f", footprint(p));
    else
        fputs(", \"footprint_ratio\": null", out);
    fprintf(out, ", \"ns_per_op\": %.3f, \"replay_seconds\": %.6f, \"repeat\": %u, \"load_seconds\": %.6f",
            p->ns_per_op, p->seconds, o->repeat, p->load_seconds);
    fprintf(out, ", \"num_backend_allocs\": %llu, \"num_backend_frees\": %llu, \"num_ooms\": %llu"
                 ", \"num_errors\": %llu, \"final_reserved_bytes\": %zu, \"live_buffers_at_end\": %llu",
            (unsigned long long)s->num_backend_allocs, (unsigned long long)s->num_backend_frees,
            (unsigned long long)p->r.nooms, (unsigned long long)p->r.nerrors, s->reserved_bytes,
            (unsigned long long)s->num_live);
    if (p->have_cap) {
        fprintf(out, ", \"min_capacity_lower_bound_bytes\": %zu, \"min_capacity_probes\": %u",
                p->cap.lower_bound, p->cap.probes);
        if (p->cap.bytes) {
            fprintf(out, ", \"min_capacity_bytes\": %zu", p->cap.bytes);
            if (t->peak_requested)
                fprintf(out, ", \"min_capacity_ratio\": %.6f",
                        (double)p->cap.bytes / (double)t->peak_requested);
            else
                fputs(", \"min_capacity_ratio\": null", out);
        } else {
            fputs(", \"min_capacity_bytes\": null, \"min_capacity_ratio\": null", out);
        }
    }
    if (o->svg) {
        fputs(", \"svg\": ", out);
        json_string(out, o->svg);
    }
    fputs("}\n", out);
}

static void print_report(const report *p) {
    const carve_trace *t = p->t;
    const carve_stats *s = &p->r.stats;
    const options *o = p->o;
    char b1[32], b2[32];
    printf("carve-replay %s: %s\n", carve_version(), o->trace);
    printf("  arena            %s backend, growth %s, initial %s, limit %s\n",
           carve_backend_str(o->cfg.backend), o->cfg.growth ? "on" : "off",
           replay_fmt_bytes(b1, sizeof(b1), p->r.initial_bytes),
           s->limit_bytes == SIZE_MAX ? "none" : replay_fmt_bytes(b2, sizeof(b2), s->limit_bytes));
    printf("  events           %zu (%zu allocs, %zu frees), %u stream%s, %zu slots\n", t->n,
           t->nallocs, t->nfrees, t->nstreams, t->nstreams == 1 ? "" : "s", t->nslots);
    if (t->nbad)
        printf("  skipped lines    %zu: %s\n", t->nbad, t->diag);
    else
        printf("  skipped lines    0\n");
    printf("  peak requested   %s (%llu bytes)\n", replay_fmt_bytes(b1, sizeof(b1), t->peak_requested),
           (unsigned long long)t->peak_requested);
    printf("  reserved peak    %s (%zu bytes)\n",
           replay_fmt_bytes(b1, sizeof(b1), s->reserved_bytes_peak), s->reserved_bytes_peak);
    if (t->peak_requested && p->r.nooms)
        printf("  footprint ratio  %.4f (reserved peak / peak requested, of which %llu "
               "allocations failed)\n", footprint(p), (unsigned long long)p->r.nooms);
    else if (t->peak_requested)
        printf("  footprint ratio  %.4f (reserved peak / peak requested)\n", footprint(p));
    else
        printf("  footprint ratio  n/a (nothing requested)\n");
    printf("  allocated peak   %s (%zu bytes, rounded sizes of live buffers)\n",
           replay_fmt_bytes(b1, sizeof(b1), s->allocated_bytes_peak), s->allocated_bytes_peak);
    printf("  speed            %.1f ns/op (%zu events in %.4f s", p->ns_per_op, t->n, p->seconds);
    if (o->repeat > 1)
        printf(", median of %u replays", o->repeat);
    printf("; loaded in %.3f s)\n", p->load_seconds);
    printf("  backend calls    %llu segment reserves, %llu releases\n",
           (unsigned long long)s->num_backend_allocs, (unsigned long long)s->num_backend_frees);
    printf("  OOMs             %llu\n", (unsigned long long)p->r.nooms);
    if (p->r.nerrors)
        printf("  errors           %llu (allocations or frees that failed other than by OOM)\n",
               (unsigned long long)p->r.nerrors);
    printf("  at the end       %llu live buffers, %s reserved\n", (unsigned long long)s->num_live,
           replay_fmt_bytes(b1, sizeof(b1), s->reserved_bytes));
    if (p->have_cap) {
        if (p->cap.bytes)
            printf("  min capacity     %s (%zu bytes), %.4f x peak requested (%u probes)\n",
                   replay_fmt_bytes(b1, sizeof(b1), p->cap.bytes), p->cap.bytes,
                   t->peak_requested ? (double)p->cap.bytes / (double)t->peak_requested : 0.0,
                   p->cap.probes);
        else
            printf("  min capacity     none up to 4 PiB (%u probes)\n", p->cap.probes);
    }
    if (o->svg)
        printf("  picture          %s (%zu bytes)\n", o->svg, p->svg_bytes);
}

/* ---- main -------------------------------------------------------------- */

static void load_progress(size_t lines, void *arg) {
    (void)arg;
    fprintf(stderr, "carve-replay: read %zu lines\n", lines);
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

    char err[512];
    input in;
    if (open_input(o.trace, &in, err, sizeof(err)) != 0) {
        fprintf(stderr, "carve-replay: %s\n", err);
        return 1;
    }
    carve_trace t;
    double t0 = replay_now();
    int lrc = carve_trace_load(in.f, &t, o.quiet ? NULL : load_progress, NULL);
    double load_seconds = replay_now() - t0;
    if (close_input(&in, err, sizeof(err)) != 0) {
        fprintf(stderr, "carve-replay: %s\n", err);
        carve_trace_free(&t);
        return 1;
    }
    if (lrc != 0) {
        fprintf(stderr, "carve-replay: cannot read %s: %s\n", o.trace, t.diag);
        carve_trace_free(&t);
        return 1;
    }
    if (!o.quiet) {
        fprintf(stderr, "carve-replay: loaded %zu events in %.2f s\n", t.n, load_seconds);
        if (t.nbad)
            fprintf(stderr, "carve-replay: warning: %zu lines skipped: %s\n", t.nbad, t.diag);
    }

    replay_streams rs;
    if (replay_streams_open(&rs, t.nstreams, o.cfg.backend, o.cfg.device, err, sizeof(err)) != 0) {
        fprintf(stderr, "carve-replay: %s\n", err);
        carve_trace_free(&t);
        return 1;
    }
    void **slots = calloc(t.nslots ? t.nslots : 1, sizeof(void *));
    double *secs = calloc(o.repeat, sizeof(double));
    if (!slots || !secs) {
        fprintf(stderr, "carve-replay: host memory exhausted\n");
        free(slots);
        free(secs);
        replay_streams_close(&rs);
        carve_trace_free(&t);
        return 1;
    }

    report p;
    memset(&p, 0, sizeof(p));
    p.o = &o;
    p.t = &t;
    p.load_seconds = load_seconds;
    int rc = 0;
    for (unsigned k = 0; k < o.repeat; k++) {
        replay_result r;
        unsigned flags = !o.quiet && t.n > ((size_t)1 << 20) ? REPLAY_PROGRESS : 0;
        if (!o.quiet && o.repeat > 1 && t.n > ((size_t)1 << 20))
            fprintf(stderr, "carve-replay: replay %u of %u\n", k + 1, o.repeat);
        carve_status st = replay_run(&t, &o.cfg, &rs, slots, flags, &r);
        if (st != CARVE_OK) {
            rc = arena_failure(st);
            goto out;
        }
        if (k == 0)
            p.r = r;
        secs[k] = r.seconds;
    }
    qsort(secs, o.repeat, sizeof(double), cmp_double);
    p.seconds = o.repeat % 2 ? secs[o.repeat / 2] : (secs[o.repeat / 2 - 1] + secs[o.repeat / 2]) / 2;
    p.ns_per_op = t.n ? p.seconds * 1e9 / (double)t.n : 0;
    if (p.r.nerrors) {
        fprintf(stderr, "carve-replay: %llu allocations or frees failed other than by OOM: %s\n",
                (unsigned long long)p.r.nerrors, p.r.error);
        rc = 1;
    }

    if (o.min_capacity) {
        carve_status st = replay_min_capacity(&t, &o.cfg, slots, o.quiet, &p.cap);
        if (st != CARVE_OK) {
            rc = arena_failure(st);
            goto out;
        }
        p.have_cap = 1;
    }

    if (o.svg) {
        replay_rec rec;
        replay_result rr;
        carve_status st = replay_record(&t, &o.cfg, &rs, SVG_COLS, &rec, &rr);
        if (st != CARVE_OK) {
            rc = arena_failure(st);
            goto out;
        }
        FILE *f = fopen(o.svg, "w");
        if (!f) {
            fprintf(stderr, "carve-replay: cannot write %s: %s\n", o.svg, strerror(errno));
            replay_rec_free(&rec);
            rc = 1;
            goto out;
        }
        const char *name = strcmp(o.trace, "-") ? o.trace : "(standard input)";
        svg_info info = {name, carve_backend_str(o.cfg.backend), footprint(&p),
                         rr.stats.reserved_bytes_peak, o.color_by_stream};
        int wrc = svg_write(f, &t, &rec, &info);
        long size = ftell(f);
        if (fclose(f) != 0 || wrc != 0) {
            fprintf(stderr, "carve-replay: cannot write %s (disk full or host memory exhausted)\n",
                    o.svg);
            rc = 1;
        }
        p.svg_bytes = size > 0 ? (size_t)size : 0;
        replay_rec_free(&rec);
    }

    if (o.json)
        print_json(&p);
    else
        print_report(&p);
    if (fflush(stdout) != 0)
        rc = 1;
out:
    free(secs);
    free(slots);
    replay_streams_close(&rs);
    carve_trace_free(&t);
    return rc;
}
