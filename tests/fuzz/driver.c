/*
 * driver.c — a plain main() for the fuzz targets, so they run without
 * clang or libFuzzer: it replays every file of the corpora named on the
 * command line through LLVMFuzzerTestOneInput, then runs a seeded mutation
 * loop (bit flips, byte sets, inserts, deletes, copies, splices and slices
 * of corpus entries, dictionary tokens) for a bounded number of iterations or seconds.
 *
 * The one idea: a target reports a violated invariant by aborting, so the
 * driver only has to remember which input is running and, when the process
 * dies (abort, a signal, or a sanitizer report), write that input to a
 * crash file and print its path before the process goes. Everything is
 * deterministic given the seed: a time bound only cuts the same sequence
 * short.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fuzz_common.h"

/* ---- options ---------------------------------------------------------------------- */

typedef struct options {
    unsigned long long iterations; /* mutated inputs to run; 0 = none unless seconds > 0 */
    double seconds;                /* time bound of the mutation loop; 0 = none */
    uint64_t seed;
    size_t max_len;
    const char *dict;
    const char *artifact_dir;
    double slow_seconds;           /* report inputs slower than this; 0 = never */
    int verbose;
} options;

static void usage(FILE *out, const char *prog) {
    fprintf(out,
            "usage: %s [options] CORPUS_DIR_OR_FILE...\n"
            "Replays every input file through the fuzz target, then mutates them.\n"
            "  --iterations N     run N mutated inputs (default 0)\n"
            "  --seconds S        stop mutating after S seconds (default 0: no time bound;\n"
            "                     with --seconds and no --iterations, mutate until the time is up)\n"
            "  --seed N           seed of the mutation loop (default 1)\n"
            "  --max-len N        longest mutated input in bytes (default 4096)\n"
            "  --dict FILE        libFuzzer-style dictionary of tokens to insert\n"
            "  --artifact-dir DIR where a crashing input is written (default .)\n"
            "  --slow-ms N        write inputs that take more than N ms to DIR/slow-... (default: off)\n"
            "  --verbose          name every replayed file\n"
            "  --help             this text\n"
            "Exit status: 0 when every input ran; a violated invariant aborts the process\n"
            "after writing the input to DIR/crash-<target>-<seed>-<iteration>.\n",
            prog);
}

/* ---- the input that is running, for the crash report ------------------------------- */

static const uint8_t *cur_data;
static size_t cur_len;
static const char *cur_file;   /* replaying this corpus file, or NULL */
static char crash_path[4096];  /* where a mutated input is written if it crashes */
static volatile sig_atomic_t dumped;

static void put(const char *s) {
    ssize_t rc = write(2, s, strlen(s));
    (void)rc;
}

/* Async-signal-safe: only write(2), open(2), close(2). */
static void dump_input(void) {
    if (dumped)
        return;
    dumped = 1;
    if (cur_file) {
        put("\n==driver== crash while replaying ");
        put(cur_file);
        put(" (that file is the reproducer)\n");
        return;
    }
    if (!cur_data && !crash_path[0])
        return;
    int fd = open(crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        size_t done = 0;
        while (done < cur_len) {
            ssize_t n = write(fd, cur_data + done, cur_len - done);
            if (n <= 0)
                break;
            done += (size_t)n;
        }
        close(fd);
        put("\n==driver== crash on a mutated input; reproducer written to ");
        put(crash_path);
        put("\n");
    } else {
        put("\n==driver== crash on a mutated input; could not write ");
        put(crash_path);
        put("\n");
    }
}

static void on_signal(int sig) {
    dump_input();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Sanitizers that stop the process without abort() call this first. */
extern void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

static void install_handlers(void) {
    static const int sigs[] = {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        signal(sigs[i], on_signal);
    if (__sanitizer_set_death_callback)
        __sanitizer_set_death_callback(dump_input);
}

/* ---- the corpus ------------------------------------------------------------------- */

typedef struct entry {
    char *name;
    uint8_t *data;
    size_t len;
} entry;

typedef struct corpus {
    entry *v;
    size_t n, cap;
} corpus;

static int read_file(const char *path, uint8_t **data, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            fclose(f);
            return -1;
        }
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        cap *= 2;
        uint8_t *b = realloc(buf, cap);
        if (!b)
            free(buf);
        buf = b;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        return -1;
    }
    *data = buf;
    *len = n;
    return 0;
}

static void corpus_add(corpus *c, const char *path) {
    uint8_t *data;
    size_t len;
    if (read_file(path, &data, &len) != 0) {
        fprintf(stderr, "driver: cannot read %s: %s\n", path, strerror(errno));
        exit(2);
    }
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 64;
        c->v = realloc(c->v, c->cap * sizeof(*c->v));
        if (!c->v) {
            fprintf(stderr, "driver: out of memory\n");
            exit(2);
        }
    }
    c->v[c->n].name = strdup(path);
    c->v[c->n].data = data;
    c->v[c->n].len = len;
    c->n++;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A file, or every regular file of a directory in name order (not recursive). */
static void corpus_load(corpus *c, const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "driver: %s: %s\n", path, strerror(errno));
        exit(2);
    }
    if (!S_ISDIR(st.st_mode)) {
        corpus_add(c, path);
        return;
    }
    DIR *d = opendir(path);
    if (!d) {
        fprintf(stderr, "driver: %s: %s\n", path, strerror(errno));
        exit(2);
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            names = realloc(names, cap * sizeof(*names));
        }
        size_t len = strlen(path) + strlen(e->d_name) + 2;
        names[n] = malloc(len);
        snprintf(names[n], len, "%s/%s", path, e->d_name);
        n++;
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof(*names), cmp_names);
    for (size_t i = 0; i < n; i++) {
        if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode))
            corpus_add(c, names[i]);
        free(names[i]);
    }
    free(names);
}

/* ---- the dictionary --------------------------------------------------------------- */

typedef struct token {
    uint8_t bytes[64];
    size_t len;
} token;

static token *dict;
static size_t ndict;

static int hexval(int c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* libFuzzer's format: lines `name="value"` or `"value"`, with \\, \" and
 * \xNN escapes; '#' starts a comment. */
static void dict_load(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "driver: cannot read dictionary %s: %s\n", path, strerror(errno));
        exit(2);
    }
    char line[1024];
    size_t cap = 0, lineno = 0;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '#' || *p == '\n' || *p == '\0')
            continue;
        char *q = strchr(p, '"');
        if (!q) {
            fprintf(stderr, "driver: %s:%zu: no quoted token\n", path, lineno);
            exit(2);
        }
        token t = {{0}, 0};
        for (q++; *q && *q != '"' && t.len < sizeof(t.bytes); q++) {
            int c = (unsigned char)*q;
            if (c == '\\' && q[1] == 'x' && hexval(q[2]) >= 0 && hexval(q[3]) >= 0) {
                c = hexval(q[2]) * 16 + hexval(q[3]);
                q += 3;
            } else if (c == '\\' && q[1]) {
                c = (unsigned char)*++q;
            }
            t.bytes[t.len++] = (uint8_t)c;
        }
        if (ndict == cap) {
            cap = cap ? cap * 2 : 64;
            dict = realloc(dict, cap * sizeof(*dict));
        }
        dict[ndict++] = t;
    }
    fclose(f);
}

/* ---- mutation ---------------------------------------------------------------------- */

static uint64_t rng_state;
static uint64_t rnd(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static size_t below(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

static const uint8_t interesting[] = {0, 1, 0x7f, 0x80, 0xff, 0xfe, '0', '1', '9', ',', ';', '=', ':', '.', ' ',
                                      '\n', '#', '-', '+', 'x', 'a', 'f', 'e', 'B', 'k', 'M', 'G', 'T'};

/* Insert len bytes (src, or random ones when NULL) at `at`, within cap. */
static size_t insert_bytes(uint8_t *buf, size_t n, size_t cap, size_t at, const uint8_t *src, size_t len) {
    if (n + len > cap)
        len = cap - n;
    memmove(buf + at + len, buf + at, n - at);
    for (size_t i = 0; i < len; i++)
        buf[at + i] = src ? src[i] : (uint8_t)rnd();
    return n + len;
}

static size_t mutate_once(uint8_t *buf, size_t n, size_t cap, const corpus *c) {
    switch (below(11)) {
    case 0: /* flip a bit */
        if (n)
            buf[below(n)] ^= (uint8_t)(1u << below(8));
        return n;
    case 1: /* set a byte to an interesting value */
        if (n)
            buf[below(n)] = interesting[below(sizeof(interesting))];
        return n;
    case 2: /* add a small number to a byte */
        if (n)
            buf[below(n)] += (uint8_t)(below(33) - 16);
        return n;
    case 3: /* insert random bytes */
        return insert_bytes(buf, n, cap, below(n + 1), NULL, 1 + below(8));
    case 4: { /* delete a range */
        if (!n)
            return n;
        size_t at = below(n), len = 1 + below(n - at < 16 ? n - at : 16);
        memmove(buf + at, buf + at + len, n - at - len);
        return n - len;
    }
    case 5: { /* copy a range of the input over another place */
        if (n < 2)
            return n;
        size_t from = below(n), to = below(n), len = 1 + below(n - (from > to ? from : to));
        memmove(buf + to, buf + from, len);
        return n;
    }
    case 6: { /* duplicate a range (insert a copy of it) */
        if (!n)
            return n;
        size_t from = below(n), len = 1 + below(n - from < 64 ? n - from : 64);
        uint8_t tmp[64];
        memcpy(tmp, buf + from, len);
        return insert_bytes(buf, n, cap, below(n + 1), tmp, len);
    }
    case 7: { /* splice: our prefix, another entry's suffix */
        if (!c->n)
            return n;
        const entry *o = &c->v[below(c->n)];
        size_t keep = below(n + 1), from = below(o->len + 1), len = o->len - from;
        if (keep + len > cap)
            len = cap - keep;
        memcpy(buf + keep, o->data + from, len);
        return keep + len;
    }
    case 10: { /* insert a slice of another entry (programs grow this way) */
        if (!c->n)
            return n;
        const entry *o = &c->v[below(c->n)];
        size_t from = below(o->len + 1), len = below(o->len - from + 1);
        return insert_bytes(buf, n, cap, below(n + 1), o->data + from, len > 256 ? 256 : len);
    }
    case 8: /* insert a dictionary token */
        if (ndict) {
            const token *t = &dict[below(ndict)];
            return insert_bytes(buf, n, cap, below(n + 1), t->bytes, t->len);
        }
        return insert_bytes(buf, n, cap, below(n + 1), &interesting[below(sizeof(interesting))], 1);
    default: { /* overwrite with a dictionary token, or insert a number */
        if (ndict && n) {
            const token *t = &dict[below(ndict)];
            size_t at = below(n), len = t->len < n - at ? t->len : n - at;
            memcpy(buf + at, t->bytes, len);
            return n;
        }
        char num[24];
        int len = snprintf(num, sizeof(num), "%llu", (unsigned long long)(rnd() >> below(64)));
        return insert_bytes(buf, n, cap, below(n + 1), (const uint8_t *)num, (size_t)len);
    }
    }
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* An input slower than --slow-ms: written next to the crash files, named on stderr. */
static void report_slow(const options *o, const char *target, unsigned long long iter, const uint8_t *data, size_t n,
                        double secs) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/slow-%s-%llu-%llu", o->artifact_dir, target, (unsigned long long)o->seed, iter);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, n, f);
        fclose(f);
    }
    fprintf(stderr, "driver: input %llu took %.3f s: %s\n", iter, secs, f ? path : "(could not write it)");
}

/* ---- main ------------------------------------------------------------------------- */

static const char *basename_of(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

int main(int argc, char **argv) {
    options o = {0, 0, 1, 4096, NULL, ".", 0, 0};
    corpus c = {NULL, 0, 0};
    const char **paths = calloc((size_t)argc, sizeof(*paths));
    size_t npaths = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout, argv[0]);
            free(paths);
            return 0;
        } else if (strcmp(a, "--verbose") == 0) {
            o.verbose = 1;
        } else if (a[0] == '-' && a[1] == '-') {
            static const char *const known[] = {"--iterations", "--seconds", "--seed", "--max-len",
                                                "--dict", "--slow-ms", "--artifact-dir"};
            int ok = 0;
            for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++)
                ok |= strcmp(a, known[k]) == 0;
            if (!ok) {
                fprintf(stderr, "driver: unknown option %s (try --help)\n", a);
                free(paths);
                return 2;
            }
            if (!v) {
                fprintf(stderr, "driver: %s needs a value\n", a);
                free(paths);
                return 2;
            }
            char *end;
            errno = 0;
            if (strcmp(a, "--iterations") == 0)
                o.iterations = strtoull(v, &end, 10);
            else if (strcmp(a, "--seconds") == 0)
                o.seconds = strtod(v, &end);
            else if (strcmp(a, "--seed") == 0)
                o.seed = strtoull(v, &end, 10);
            else if (strcmp(a, "--max-len") == 0)
                o.max_len = strtoull(v, &end, 10);
            else if (strcmp(a, "--dict") == 0)
                o.dict = v, end = (char *)v + strlen(v);
            else if (strcmp(a, "--slow-ms") == 0)
                o.slow_seconds = strtod(v, &end) / 1000;
            else if (strcmp(a, "--artifact-dir") == 0)
                o.artifact_dir = v, end = (char *)v + strlen(v);
            else {
                fprintf(stderr, "driver: unknown option %s (try --help)\n", a);
                free(paths);
                return 2;
            }
            if (*end || errno || end == v) {
                fprintf(stderr, "driver: bad value '%s' for %s\n", v, a);
                free(paths);
                return 2;
            }
            i++;
        } else {
            paths[npaths++] = a;
        }
    }
    if (o.max_len == 0) {
        fprintf(stderr, "driver: --max-len must be positive\n");
        free(paths);
        return 2;
    }
    for (size_t i = 0; i < npaths; i++)
        corpus_load(&c, paths[i]);
    free(paths);
    if (o.dict)
        dict_load(o.dict);
    install_handlers();
    const char *target = basename_of(argv[0]);
    double t0 = now();

    /* Replay. */
    for (size_t i = 0; i < c.n; i++) {
        if (o.verbose)
            fprintf(stderr, "driver: %s\n", c.v[i].name);
        cur_file = c.v[i].name;
        cur_data = c.v[i].data;
        cur_len = c.v[i].len;
        LLVMFuzzerTestOneInput(c.v[i].data, c.v[i].len);
    }
    cur_file = NULL;
    double t_replay = now() - t0;

    /* Mutate: each input starts from a corpus entry (or, half the time, from
     * the previous mutated input) and takes one to four mutations. */
    rng_state = o.seed;
    size_t cap = o.max_len;
    uint8_t *buf = malloc(cap), *prev = malloc(cap);
    size_t prev_len = 0;
    unsigned long long done = 0;
    double t1 = now();
    int timed = o.seconds > 0;
    unsigned long long limit = o.iterations ? o.iterations : timed ? ~0ull : 0;
    for (; done < limit; done++) {
        if (timed && now() - t1 >= o.seconds)
            break;
        size_t n;
        if (prev_len && rnd() % 2) {
            n = prev_len;
            memcpy(buf, prev, n);
        } else if (c.n) {
            const entry *e = &c.v[below(c.n)];
            n = e->len < cap ? e->len : cap;
            memcpy(buf, e->data, n);
        } else {
            n = 0;
        }
        for (size_t m = 1 + below(4); m > 0; m--)
            n = mutate_once(buf, n, cap, &c);
        snprintf(crash_path, sizeof(crash_path), "%s/crash-%s-%llu-%llu", o.artifact_dir, target,
                 (unsigned long long)o.seed, done);
        cur_data = buf;
        cur_len = n;
        double ts = o.slow_seconds > 0 ? now() : 0;
        LLVMFuzzerTestOneInput(buf, n);
        if (o.slow_seconds > 0 && now() - ts > o.slow_seconds)
            report_slow(&o, target, done, buf, n, now() - ts);
        memcpy(prev, buf, n);
        prev_len = n;
    }
    cur_data = NULL;
    crash_path[0] = '\0';
    double t_mut = now() - t1;
    printf("%s: replayed %zu inputs in %.2f s; %llu mutated inputs (seed %llu) in %.2f s; no invariant violated\n",
           target, c.n, t_replay, done, (unsigned long long)o.seed, t_mut);
    for (size_t i = 0; i < c.n; i++) {
        free(c.v[i].name);
        free(c.v[i].data);
    }
    free(c.v);
    free(buf);
    free(prev);
    free(dict);
    return 0;
}
