/*
 * test_trace.c — the trace loader on good and malformed input: counts,
 * slots, peaks, and what diag says about each kind of problem; the compact
 * store the events are kept in (every range decodes to what was read);
 * input that is no trace at all; the writer, whose traces load clean; and
 * the replay functions given a carve_config of another carve.h's size.
 *
 * Inputs are strings opened with fmemopen, so each case reads as the text
 * it feeds. Ends with "N checks, M failed"; exit status 1 on any failure.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "carve_trace.h"

static unsigned long checks, failures;

#define CHECK(cond)                                                         \
    do {                                                                    \
        checks++;                                                           \
        if (!(cond)) {                                                      \
            failures++;                                                     \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                   \
    } while (0)

#define CHECK_DIAG(t, needle)                                                            \
    do {                                                                                 \
        checks++;                                                                        \
        if (!strstr((t)->diag, (needle))) {                                              \
            failures++;                                                                  \
            fprintf(stderr, "%s:%d: diag lacks \"%s\": \"%s\"\n", __FILE__, __LINE__,    \
                    (needle), (t)->diag);                                                \
        }                                                                                \
    } while (0)

/* Every event of t, decoded into an array (free it). */
static carve_trace_event *all_events(const carve_trace *t) {
    carve_trace_event *ev = malloc((t->n ? t->n : 1) * sizeof(*ev));
    if (!ev) {
        perror("malloc");
        exit(1);
    }
    size_t got = carve_trace_events(t, 0, ev, t->n);
    if (got != t->n) {
        fprintf(stderr, "carve_trace_events decoded %zu of %zu events\n", got, t->n);
        exit(1);
    }
    return ev;
}

static int same_event(const carve_trace_event *a, const carve_trace_event *b) {
    return a->slot == b->slot && a->stream == b->stream && a->size == b->size && a->op == b->op &&
           a->thread == b->thread;
}

/* Load a trace held in memory (len bytes, NUL bytes allowed). */
static int load_mem(const char *text, size_t len, carve_trace *t) {
    FILE *f = fmemopen((void *)(uintptr_t)text, len, "rb");
    if (!f) {
        perror("fmemopen");
        exit(1);
    }
    int rc = carve_trace_load(f, t, NULL, NULL);
    fclose(f);
    return rc;
}

static int load(const char *text, carve_trace *t) {
    /* fmemopen of zero bytes is not portable: feed empty input from a file. */
    if (!*text) {
        FILE *f = tmpfile();
        int rc = carve_trace_load(f, t, NULL, NULL);
        fclose(f);
        return rc;
    }
    return load_mem(text, strlen(text), t);
}

/* Every free matches the live allocation of its slot; slots are dense;
 * counts and the peak agree with a recount. */
static void check_clean(const carve_trace *t) {
    uint8_t *live = calloc(t->nslots + 1, 1);
    uint64_t *size = calloc(t->nslots + 1, sizeof(uint64_t));
    uint32_t *stream = calloc(t->nslots + 1, sizeof(uint32_t));
    size_t nlive = 0, peak_live = 0, na = 0, nf = 0;
    uint64_t sum = 0, peak = 0;
    carve_trace_event *ev = all_events(t);
    int ok = live && size && stream;
    for (size_t i = 0; ok && i < t->n; i++) {
        const carve_trace_event *e = &ev[i];
        if (e->slot >= t->nslots || e->stream >= t->nstreams) {
            ok = 0;
            break;
        }
        if (e->op == 'a') {
            ok = !live[e->slot];
            live[e->slot] = 1;
            size[e->slot] = e->size;
            stream[e->slot] = e->stream;
            if (++nlive > peak_live)
                peak_live = nlive;
            sum += e->size;
            if (sum > peak)
                peak = sum;
            na++;
        } else if (e->op == 'f') {
            ok = live[e->slot] && e->size == 0 && e->stream == stream[e->slot];
            live[e->slot] = 0;
            nlive--;
            sum -= size[e->slot];
            nf++;
        } else {
            ok = 0;
        }
    }
    CHECK(ok);
    CHECK(na == t->nallocs && nf == t->nfrees && na + nf == t->n);
    CHECK(peak_live == t->nslots);
    if (peak != UINT64_MAX && t->peak_requested != UINT64_MAX)
        CHECK(peak == t->peak_requested);
    free(ev);
    free(live);
    free(size);
    free(stream);
}

static void test_good(void) {
    carve_trace t;
    const char *text =
        "# a comment\n"
        "\n"
        "a,1,100\n"
        "a,18446744073709551615,2000,3\n"   /* largest id, stream 3 */
        "  a , 7 , 50 , 1   \n"             /* blanks around fields */
        "f,1\n"
        "a,0x1f,0\n"                        /* hex id, zero size */
        "\t# indented comment\n"
        "f,18446744073709551615,2000,3\n"   /* a free may repeat size and stream */
        "a,1,300\n"                         /* an id may come back after its free */
        "f,31\n"                            /* 0x1f */
        "f,7";                              /* no newline at the end */
    CHECK(load(text, &t) == 0);
    CHECK(t.n == 9 && t.nallocs == 5 && t.nfrees == 4);
    CHECK(t.nbad == 0);
    CHECK(t.diag[0] == '\0');
    CHECK(t.nstreams == 4);
    CHECK(t.nthreads == 1); /* no thread tags: every event is thread 0's */
    CHECK(t.nslots == 3);
    CHECK(t.peak_requested == 2150);
    CHECK(t.total_alloc_bytes == 2450);
    carve_trace_event *ev = all_events(&t);
    int thread0 = 1;
    for (size_t i = 0; i < t.n; i++)
        thread0 &= ev[i].thread == 0;
    CHECK(thread0);
    CHECK(ev[0].op == 'a' && ev[0].size == 100 && ev[0].stream == 0);
    CHECK(ev[1].stream == 3 && ev[1].size == 2000);
    CHECK(ev[2].stream == 1 && ev[2].size == 50);
    CHECK(ev[3].op == 'f' && ev[3].slot == ev[0].slot && ev[3].size == 0);
    CHECK(ev[4].size == 0 && ev[4].slot == ev[0].slot); /* the freed slot is reused */
    CHECK(ev[5].op == 'f' && ev[5].stream == 3);
    /* Ranges decode alike from any first event; past the end, nothing. */
    carve_trace_event one;
    CHECK(carve_trace_events(&t, 5, &one, 1) == 1 && same_event(&one, &ev[5]));
    CHECK(carve_trace_events(&t, 9, &one, 1) == 0 && carve_trace_events(&t, 3, &one, 0) == 0);
    CHECK(carve_trace_events(NULL, 0, &one, 1) == 0 && carve_trace_events(&t, 0, NULL, 1) == 0);
    free(ev);
    check_clean(&t);
    carve_trace_free(&t);
    CHECK(t.store == NULL && t.n == 0);
    carve_trace_free(&t); /* twice is harmless */
    carve_trace_free(NULL);
}

static void test_crlf_and_blanks(void) {
    carve_trace t;
    CHECK(load("a,5,10\r\na,6,20 \t\r\n\r\n \r\nf,5\r\nf,6\r\n", &t) == 0);
    CHECK(t.n == 4 && t.nbad == 0 && t.peak_requested == 30 && t.nslots == 2);
    check_clean(&t);
    carve_trace_free(&t);
    /* A lone CR line ending is not a line ending: one malformed line. */
    CHECK(load("a,5,10\ra,6,20\n", &t) == 0);
    CHECK(t.n == 0 && t.nbad == 1);
    carve_trace_free(&t);
}

static void test_empty(void) {
    carve_trace t;
    CHECK(load("", &t) == 0);
    CHECK(t.n == 0 && t.nbad == 0 && t.nslots == 0 && t.nstreams == 1 && t.peak_requested == 0);
    CHECK(t.diag[0] == '\0');
    carve_trace_free(&t);
    CHECK(load("# only\n#comments\n\n", &t) == 0);
    CHECK(t.n == 0 && t.nbad == 0);
    carve_trace_free(&t);
    CHECK(load("\n", &t) == 0);
    CHECK(t.n == 0 && t.nbad == 0);
    carve_trace_free(&t);
}

static void test_unknown_free(void) {
    carve_trace t;
    CHECK(load("a,1,10\nf,2\nf,1\nf,1\nf,3\nf,4\nf,5\nf,6\n", &t) == 0);
    CHECK(t.n == 2 && t.nallocs == 1 && t.nfrees == 1);
    CHECK(t.nbad == 6);
    CHECK_DIAG(&t, "6 frees of unknown ids");
    CHECK_DIAG(&t, "lines 2, 4, 5, 6, ...");
    check_clean(&t);
    carve_trace_free(&t);
    CHECK(load("f,9\n", &t) == 0);
    CHECK(t.nbad == 1);
    CHECK_DIAG(&t, "1 free of an unknown id (line 1)");
    carve_trace_free(&t);
}

static void test_duplicate_live(void) {
    carve_trace t;
    CHECK(load("a,1,10\na,1,20\nf,1\nf,1\n", &t) == 0);
    CHECK(t.n == 2 && t.nbad == 2);
    CHECK(t.peak_requested == 10 && t.total_alloc_bytes == 10);
    CHECK_DIAG(&t, "1 allocation of an id already live (line 2)");
    CHECK_DIAG(&t, "1 free of an unknown id (line 4)");
    check_clean(&t);
    carve_trace_free(&t);
}

static void test_malformed(void) {
    static const char *const bad[] = {
        "hello",                        /* unknown operation */
        "a",                            /* missing fields */
        "a,",                           /* empty field */
        "a,1",                          /* missing size */
        "a,1,",                         /* empty field */
        "a,1,x",                        /* not a number */
        "a,x,1",
        "x,1,2",
        "A,1,2",                        /* operations are lower case */
        "aa,1,2",
        "a,1,2,3,4",                    /* too many fields */
        "f,1,2,3,4",
        "f",
        "f,",
        "f,,",
        "a,-1,5",                       /* negative id */
        "a,1,-5",                       /* negative size */
        "a,1,5,-1",                     /* negative stream */
        "a,1,18446744073709551616",     /* 2^64 */
        "a,1,99999999999999999999999",
        "a,0x10000000000000000,1",      /* 65-bit hex id */
        "a,1,5,1024",                   /* stream too large */
        "a,1,5,4294967296",
        "a,1 2,5",
        "a,,5",
        "a,1,0x10",                     /* hex only for ids */
        "a,1,5x",
        "a;1;5",
        ",1,5",
        "f,1 a",
    };
    size_t nbad = sizeof(bad) / sizeof(bad[0]);
    char text[4096] = "";
    for (size_t i = 0; i < nbad; i++) {
        strcat(text, bad[i]);
        strcat(text, "\n");
    }
    strcat(text, "a,1,18446744073709551615\nf,1\n"); /* the largest size is fine */
    carve_trace t;
    CHECK(load(text, &t) == 0);
    CHECK(t.nbad == nbad);
    CHECK(t.n == 2 && t.nallocs == 1 && t.peak_requested == UINT64_MAX);
    char want[64];
    snprintf(want, sizeof(want), "%zu malformed lines (", nbad);
    CHECK_DIAG(&t, want);
    CHECK_DIAG(&t, "line 1: unknown operation");
    CHECK_DIAG(&t, "line 2: missing fields");
    CHECK_DIAG(&t, "line 3: empty field");
    CHECK_DIAG(&t, "line 4: missing size");
    CHECK_DIAG(&t, ", ...)");
    check_clean(&t);
    carve_trace_free(&t);

    /* One of each reason, each alone, with its message. */
    static const struct {
        const char *line, *why;
    } reasons[] = {
        {"a,-1,5", "line 1: negative number"},
        {"a,1,18446744073709551616", "line 1: number too large"},
        {"a,1,5,1024", "line 1: stream number too large"},
        {"a,1,5x", "line 1: not a number"},
        {"a,1,2,3,4", "line 1: too many fields"},
        {"b,1,2", "line 1: unknown operation"},
    };
    for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++) {
        CHECK(load(reasons[i].line, &t) == 0);
        CHECK(t.n == 0 && t.nbad == 1);
        CHECK_DIAG(&t, "1 malformed line (");
        CHECK_DIAG(&t, reasons[i].why);
        carve_trace_free(&t);
    }
}

static void test_nul_bytes(void) {
    static const char text[] = "a,1,10\na,2\0,5\nf,1\n\0\0\0\nf,2\n";
    carve_trace t;
    CHECK(load_mem(text, sizeof(text) - 1, &t) == 0);
    CHECK(t.n == 2 && t.nbad == 3); /* the NUL lines, and the free of id 2 never made */
    check_clean(&t);
    carve_trace_free(&t);
}

static void test_huge_sizes(void) {
    carve_trace t;
    /* Two live buffers of 2^63 bytes each: the peak saturates, never wraps. */
    CHECK(load("a,1,9223372036854775808\na,2,9223372036854775808\nf,1\nf,2\na,3,7\n", &t) == 0);
    CHECK(t.nbad == 0 && t.n == 5);
    CHECK(t.peak_requested == UINT64_MAX);
    CHECK(t.total_alloc_bytes == UINT64_MAX);
    carve_trace_free(&t);
    /* After the huge ones are freed, the live sum is exact again. */
    CHECK(load("a,1,9223372036854775808\na,2,9223372036854775808\nf,1\nf,2\na,3,7\nf,3\n", &t) == 0);
    CHECK(t.n == 6 && t.nslots == 2);
    carve_trace_free(&t);
}

static void test_long_line(void) {
    /* A 3 MiB line of garbage between good lines: reported, and the lines
     * after it still count. */
    size_t big = (size_t)3 << 20;
    char *text = malloc(big + 64);
    strcpy(text, "a,1,10\n");
    size_t len = strlen(text);
    memset(text + len, 'z', big);
    len += big;
    strcpy(text + len, "\nf,1\na,2,5\n");
    len += strlen(text + len);
    carve_trace t;
    CHECK(load_mem(text, len, &t) == 0);
    CHECK(t.n == 3 && t.nbad == 1);
    CHECK_DIAG(&t, "line 2: line too long");
    carve_trace_free(&t);
    /* The same at the very end, without a newline. */
    len = 7 + big;
    CHECK(load_mem(text, len, &t) == 0);
    CHECK(t.n == 1 && t.nbad == 1);
    CHECK_DIAG(&t, "line 2: line too long");
    carve_trace_free(&t);
    free(text);
}

/* A long random trace written with every line-ending style crosses the
 * loader's read chunks; every event must come back as written. */
static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void test_random_roundtrip(void) {
    enum { NEV = 200000, MAXLIVE = 500 };
    size_t cap = (size_t)NEV * 64, len = 0;
    char *text = malloc(cap);
    uint64_t live_id[MAXLIVE], live_size[MAXLIVE];
    uint32_t live_stream[MAXLIVE];
    size_t nlive = 0;
    char *want_op = malloc(NEV);
    uint64_t *want_size = malloc(NEV * sizeof(uint64_t));
    uint64_t *want_id = malloc(NEV * sizeof(uint64_t));
    uint32_t *want_stream = malloc(NEV * sizeof(uint32_t));
    static const char *const eol[] = {"\n", "\r\n", " \n", "\t\r\n"};
    uint64_t next = 1;
    for (size_t i = 0; i < NEV; i++) {
        int do_alloc = nlive == 0 || (nlive < MAXLIVE && rnd() % 2);
        if (do_alloc) {
            uint64_t id = next++ * 0x9E3779B97F4A7C15ull; /* a bijection: ids never repeat */
            uint64_t size = rnd() % ((uint64_t)1 << (rnd() % 36));
            uint32_t stream = (uint32_t)(rnd() % 4);
            live_id[nlive] = id;
            live_size[nlive] = size;
            live_stream[nlive] = stream;
            nlive++;
            want_op[i] = 'a';
            want_size[i] = size;
            want_id[i] = id;
            want_stream[i] = stream;
            if (stream)
                len += (size_t)sprintf(text + len, "a,%llu,%llu,%u%s", (unsigned long long)id,
                                       (unsigned long long)size, stream, eol[rnd() % 4]);
            else
                len += (size_t)sprintf(text + len, "a,%llu,%llu%s", (unsigned long long)id,
                                       (unsigned long long)size, eol[rnd() % 4]);
        } else {
            size_t k = (size_t)(rnd() % nlive);
            want_op[i] = 'f';
            want_size[i] = 0;
            want_id[i] = live_id[k];
            want_stream[i] = live_stream[k];
            if (rnd() % 3 == 0)
                len += (size_t)sprintf(text + len, "f,0x%llx%s", (unsigned long long)live_id[k],
                                       eol[rnd() % 4]);
            else
                len += (size_t)sprintf(text + len, "f,%llu%s", (unsigned long long)live_id[k],
                                       eol[rnd() % 4]);
            live_id[k] = live_id[nlive - 1];
            live_size[k] = live_size[nlive - 1];
            live_stream[k] = live_stream[nlive - 1];
            nlive--;
        }
        if (rnd() % 50 == 0)
            len += (size_t)sprintf(text + len, "# note %zu\n", i);
    }
    carve_trace t;
    CHECK(len > ((size_t)2 << 20)); /* crosses at least two read chunks */
    CHECK(load_mem(text, len, &t) == 0);
    CHECK(t.n == NEV && t.nbad == 0);
    CHECK(t.nslots <= MAXLIVE);
    /* Same ops, sizes and streams; slots consistent with ids. */
    int same = t.n == NEV;
    uint64_t *slot_id = calloc(MAXLIVE + 1, sizeof(uint64_t));
    carve_trace_event *ev = all_events(&t);
    for (size_t i = 0; same && i < NEV; i++) {
        const carve_trace_event *e = &ev[i];
        same = e->op == want_op[i] && e->size == want_size[i] && e->stream == want_stream[i] &&
               e->slot < t.nslots;
        if (!same)
            break;
        if (e->op == 'a')
            slot_id[e->slot] = want_id[i];
        else
            same = slot_id[e->slot] == want_id[i];
    }
    CHECK(same);
    /* Any range decodes to the same events, from every offset in a mark's
     * run of 4096 and across marks. */
    carve_trace_event part[5000];
    int ranges = 1;
    for (size_t first = 0; first < t.n; first += 4093 + rnd() % 3000) {
        size_t want = t.n - first < 5000 ? t.n - first : 5000;
        ranges &= carve_trace_events(&t, first, part, 5000) == want;
        for (size_t k = 0; k < want; k++)
            ranges &= same_event(&part[k], &ev[first + k]);
    }
    CHECK(ranges);
    free(ev);
    check_clean(&t);
    carve_trace_free(&t);
    free(slot_id);
    free(text);
    free(want_op);
    free(want_size);
    free(want_id);
    free(want_stream);
}

static void count_progress(size_t lines, void *arg) {
    size_t *calls = arg;
    calls[0]++;
    calls[1] = lines;
}

static void test_progress(void) {
    size_t nlines = ((size_t)2 << 20) + 10;
    char *text = malloc(nlines * 2);
    for (size_t i = 0; i < nlines; i++) {
        text[2 * i] = '#';
        text[2 * i + 1] = '\n';
    }
    FILE *f = fmemopen(text, nlines * 2, "rb");
    size_t calls[2] = {0, 0};
    carve_trace t;
    CHECK(carve_trace_load(f, &t, count_progress, calls) == 0);
    CHECK(calls[0] == 2 && calls[1] == ((size_t)2 << 20));
    fclose(f);
    carve_trace_free(&t);
    free(text);
}

static void test_io_error(void) {
    carve_trace t;
    FILE *f = fopen("/dev/null", "w"); /* reading a write-only stream fails */
    if (f) {
        CHECK(carve_trace_load(f, &t, NULL, NULL) == -1);
        CHECK_DIAG(&t, "read error");
        CHECK(t.store == NULL && t.n == 0);
        carve_trace_free(&t);
        fclose(f);
    }
    CHECK(carve_trace_load(NULL, &t, NULL, NULL) == -1);
    CHECK(carve_trace_load(stdin, NULL, NULL, NULL) == -1);
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
/* An endless trace of allocations that are never freed, made on the fly. */
typedef struct endless {
    unsigned long long next;
    char line[48];
    size_t len, pos;
} endless;

static ssize_t endless_read(void *cookie, char *buf, size_t size) {
    endless *g = cookie;
    size_t n = 0;
    while (n < size) {
        if (g->pos == g->len) {
            g->len = (size_t)snprintf(g->line, sizeof(g->line), "a,%llu,4096\n", g->next++);
            g->pos = 0;
        }
        size_t k = g->len - g->pos < size - n ? g->len - g->pos : size - n;
        memcpy(buf + n, g->line + g->pos, k);
        g->pos += k;
        n += k;
    }
    return (ssize_t)n;
}

#endif

/* Host memory runs out (address space capped in a child process): the load
 * fails cleanly with -1 and says why. Sanitizers need the address space, so
 * the case is left out under them. */
static void test_out_of_memory(void) {
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = {(rlim_t)128 << 20, (rlim_t)128 << 20};
        if (setrlimit(RLIMIT_AS, &rl) != 0)
            _exit(0); /* cannot test here */
        endless g;
        memset(&g, 0, sizeof(g));
        cookie_io_functions_t io = {endless_read, NULL, NULL, NULL};
        FILE *f = fopencookie(&g, "r", io);
        carve_trace t;
        int rc = f ? carve_trace_load(f, &t, NULL, NULL) : -2;
        int ok = rc == -1 && strstr(t.diag, "host memory exhausted") && t.store == NULL && t.n == 0;
        if (!ok)
            fprintf(stderr, "out of memory: rc %d, diag \"%s\"\n", rc, rc == -2 ? "" : t.diag);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
#endif
}

/* Sizes of every magnitude (aligned or not, up to 2^64 - 1), streams
 * switching, slots up to tens of thousands: each event comes back as read.
 * (What an event costs is measured by test_replay_memory.py.) */
static void test_store(void) {
    enum { N = 20000 };
    size_t cap = (size_t)N * 48, len = 0;
    char *text = malloc(cap);
    uint64_t *want_size = malloc(N * sizeof(uint64_t));
    uint32_t *want_stream = malloc(N * sizeof(uint32_t));
    for (size_t i = 0; i < N; i++) {
        unsigned shift = (unsigned)(rnd() % 64);
        uint64_t size = rnd() >> shift;
        if (rnd() % 3 == 0)
            size &= ~(uint64_t)511;
        if (i == 7)
            size = UINT64_MAX;
        uint32_t stream = rnd() % 4 ? 0 : (uint32_t)(rnd() % CARVE_TRACE_MAX_STREAMS);
        want_size[i] = size;
        want_stream[i] = stream;
        len += (size_t)snprintf(text + len, cap - len, "a,%zu,%llu,%u\n", i, (unsigned long long)size, stream);
    }
    carve_trace t;
    CHECK(load_mem(text, len, &t) == 0 && t.n == N && t.nslots == N && t.nbad == 0);
    carve_trace_event *ev = all_events(&t);
    int same = 1;
    for (size_t i = 0; i < N; i++)
        same &= ev[i].op == 'a' && ev[i].size == want_size[i] && ev[i].stream == want_stream[i] && ev[i].slot == i;
    CHECK(same);
    free(ev);
    carve_trace_free(&t);
    free(text);
    free(want_size);
    free(want_stream);
    carve_trace_free(&t);
}

/* Input that is no trace (here: NUL bytes and no newline, as from
 * /dev/zero) is given up after CARVE_TRACE_PROBE_BYTES; a real trace with
 * garbage after its events is not. */
static void test_not_a_trace(void) {
    size_t n = CARVE_TRACE_PROBE_BYTES + ((size_t)1 << 20);
    char *zeros = calloc(n, 1);
    carve_trace t;
    CHECK(load_mem(zeros, n, &t) == -1);
    CHECK_DIAG(&t, "not a trace");
    CHECK(t.store == NULL && t.n == 0);
    carve_trace_free(&t);
    memcpy(zeros, "a,1,10\n", 7);
    CHECK(load_mem(zeros, n, &t) == 0 && t.n == 1 && t.nbad == 1);
    carve_trace_free(&t);
    free(zeros);
}

/* Make an empty file at path (a mkstemp template, filled in): 1 when made. */
static int temp_file(char *path) {
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return 0;
    close(fd);
    return 1;
}

/* The file f (NULL: none) read again from its start into text (cap bytes,
 * NUL-terminated), and closed. */
static void read_back(FILE *f, char *text, size_t cap) {
    if (!f)
        return;
    rewind(f);
    size_t got = fread(text, 1, cap - 1, f);
    text[got] = '\0';
    fclose(f);
}

/* The writer: a free of an id it never wrote an allocation for is left out,
 * an allocation of an id still live gets its missed free first, and the
 * trace loads clean. */
static void test_writer(void) {
    char path[] = "/tmp/carve-test-writer-XXXXXX";
    if (!temp_file(path))
        return;
    carve_trace_writer *w;
    CHECK(carve_trace_writer_open(path, "test", &w) == CARVE_OK);
    CHECK(carve_trace_writer_free(w, 0x77, 1) == CARVE_OK);          /* never allocated: left out */
    CHECK(carve_trace_writer_alloc(w, 0x10, 100, 0, 2) == CARVE_OK);
    CHECK(carve_trace_writer_alloc(w, 0x10, 200, 1, 3) == CARVE_OK); /* still live: its free first */
    CHECK(carve_trace_writer_free(w, 0x10, 4) == CARVE_OK);
    CHECK(carve_trace_writer_free(w, 0x10, 5) == CARVE_OK);          /* freed already: left out */
    CHECK(carve_trace_writer_alloc(w, 0x10, 300, 0, 6) == CARVE_OK); /* again, after its free */
    CHECK(carve_trace_writer_alloc(w, 0, 1, 0, 7) == CARVE_OK);      /* id 0 is an id like any */
    CHECK(carve_trace_writer_free(w, 0, 8) == CARVE_OK);
    CHECK(carve_trace_writer_close(w) == CARVE_OK);
    FILE *f = fopen(path, "rb");
    carve_trace t;
    CHECK(f && carve_trace_load(f, &t, NULL, NULL) == 0);
    CHECK(t.nbad == 0 && t.nallocs == 4 && t.nfrees == 3);
    CHECK(t.peak_requested == 301);
    carve_trace_free(&t);
    char text[2048] = "";
    read_back(f, text, sizeof(text));
    CHECK(strstr(text, "2 frees of ids never allocated in this trace left out") != NULL);
    CHECK(strstr(text, "1 frees written before an allocation of an id still live") != NULL);
    unlink(path);
}

/* "#thread,<k>" tags: the events after one are thread k's, the first ones
 * thread 0's; a comment that only looks like a tag is a comment; a bad tag
 * is a malformed line that changes nothing. */
static void test_threads(void) {
    carve_trace t;
    const char *text =
        "a,1,100\n"              /* thread 0: no tag yet */
        "#thread,2\n"
        "a,2,200\n"
        "f,1\n"                  /* thread 2 frees thread 0's buffer */
        "# thread,5\n"           /* a comment */
        "#threads,5\n"           /* a comment */
        "#thread,x\n"            /* not a number: skipped */
        "#thread,4096\n"         /* past CARVE_TRACE_MAX_THREADS: skipped */
        "#thread,1,2\n"          /* too many fields: skipped */
        "#thread,0x1\n"          /* decimal only: skipped */
        "a,3,300\n"              /* still thread 2 */
        "  #thread, 1 \n"        /* blanks are allowed as around any field */
        "f,2,@77\n"
        "#thread,0\n"
        "#thread,7\n"            /* a tag with no event after it counts for nothing */
        "f,3\n";
    CHECK(load(text, &t) == 0);
    CHECK(t.n == 6 && t.nbad == 4);
    CHECK_DIAG(&t, "line 7: not a number");
    CHECK_DIAG(&t, "line 8: thread number too large");
    CHECK_DIAG(&t, "line 9: too many fields");
    CHECK(t.nthreads == 8);
    carve_trace_event *ev = all_events(&t);
    if (t.n == 6) {
        CHECK(ev[0].thread == 0 && ev[1].thread == 2 && ev[2].thread == 2 && ev[3].thread == 2);
        CHECK(ev[4].thread == 1 && ev[5].thread == 7);
    }
    free(ev);
    check_clean(&t);
    carve_trace_free(&t);

    /* A tag at the end changes nothing counted. */
    CHECK(load("a,1,5\n#thread,3\n", &t) == 0 && t.n == 1 && t.nthreads == 1 && t.nbad == 0);
    carve_trace_free(&t);

    /* Threads that change every few events, over many store marks: any
     * range decodes the threads a whole decode gives. */
    enum { N = 3 * 4096 + 77 };
    size_t cap = (size_t)N * 40, len = 0;
    char *big = malloc(cap);
    uint16_t *want = malloc(N * sizeof(*want));
    uint32_t th = 0;
    for (size_t i = 0; i < N; i++) {
        if (rnd() % 5 == 0) {
            th = (uint32_t)(rnd() % 3 ? rnd() % 4 : rnd() % CARVE_TRACE_MAX_THREADS);
            len += (size_t)snprintf(big + len, cap - len, "#thread,%u\n", th);
        }
        want[i] = (uint16_t)th;
        len += (size_t)snprintf(big + len, cap - len, "a,%zu,%zu\n", i, i * 512);
    }
    CHECK(load_mem(big, len, &t) == 0 && t.n == N && t.nbad == 0);
    ev = all_events(&t);
    int same = 1;
    uint32_t most = 0;
    for (size_t i = 0; i < N; i++) {
        same &= ev[i].thread == want[i];
        if (want[i] > most)
            most = want[i];
    }
    CHECK(same);
    CHECK(t.nthreads == most + 1);
    static const size_t firsts[] = {0, 1, 4095, 4096, 4097, 8191, 9000, N - 1};
    for (size_t j = 0; j < sizeof(firsts) / sizeof(firsts[0]); j++) {
        carve_trace_event part[300];
        size_t got = carve_trace_events(&t, firsts[j], part, 300);
        int ok = got == (N - firsts[j] < 300 ? N - firsts[j] : 300);
        for (size_t i = 0; i < got; i++)
            ok &= same_event(&part[i], &ev[firsts[j] + i]);
        CHECK(ok);
    }
    free(ev);
    carve_trace_free(&t);
    free(big);
    free(want);
}

/* The writer numbers threads in the order of their first event and tags
 * an event of another thread than the last; one thread writes no tag. */
typedef struct writer_job {
    carve_trace_writer *w;
    uint64_t id;
} writer_job;

static void *writer_thread(void *arg) {
    writer_job *j = arg;
    carve_trace_writer_free(j->w, j->id, 10);
    carve_trace_writer_alloc(j->w, j->id + 1, 64, 0, 11);
    return NULL;
}

static void test_writer_threads(void) {
    char path[] = "/tmp/carve-test-writer-XXXXXX";
    if (!temp_file(path))
        return;
    carve_trace_writer *w;
    CHECK(carve_trace_writer_open(path, "threads", &w) == CARVE_OK);
    CHECK(carve_trace_writer_alloc(w, 0x100, 512, 0, 1) == CARVE_OK);
    CHECK(carve_trace_writer_alloc(w, 0x200, 1024, 0, 2) == CARVE_OK);
    writer_job a = {w, 0x100}, b = {w, 0x200};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, writer_thread, &a) == 0 && pthread_join(th, NULL) == 0);
    CHECK(pthread_create(&th, NULL, writer_thread, &b) == 0 && pthread_join(th, NULL) == 0);
    CHECK(carve_trace_writer_free(w, 0x101, 3) == CARVE_OK);
    CHECK(carve_trace_writer_close(w) == CARVE_OK);
    FILE *f = fopen(path, "rb");
    carve_trace t;
    CHECK(f && carve_trace_load(f, &t, NULL, NULL) == 0);
    CHECK(t.nbad == 0 && t.n == 7 && t.nthreads == 3);
    if (t.n == 7) {
        carve_trace_event *ev = all_events(&t);
        static const uint16_t want[7] = {0, 0, 1, 1, 2, 2, 0};
        int ok = 1;
        for (int i = 0; i < 7; i++)
            ok &= ev[i].thread == want[i];
        CHECK(ok);
        free(ev);
    }
    carve_trace_free(&t);
    char text[2048] = "";
    read_back(f, text, sizeof(text));
    CHECK(strstr(text, "#thread,0\n") && strstr(text, "#thread,1\n") && strstr(text, "#thread,2\n"));
    unlink(path);

    /* One thread: no tag at all, as traces were before threads were written. */
    memcpy(path + sizeof(path) - 7, "XXXXXX", 6);
    if (!temp_file(path))
        return;
    CHECK(carve_trace_writer_open(path, NULL, &w) == CARVE_OK);
    CHECK(carve_trace_writer_alloc(w, 1, 8, 0, 1) == CARVE_OK && carve_trace_writer_free(w, 1, 2) == CARVE_OK);
    CHECK(carve_trace_writer_close(w) == CARVE_OK);
    text[0] = '\0';
    read_back(fopen(path, "rb"), text, sizeof(text));
    CHECK(text[0] && !strstr(text, "#thread"));
    unlink(path);

    /* One thread writing to two writers in turn keeps its number in each:
     * no tag in either (it was given a new number at every switch). */
    char pa[] = "/tmp/carve-test-writer-XXXXXX", pb[] = "/tmp/carve-test-writer-XXXXXX";
    if (!temp_file(pa) || !temp_file(pb))
        return;
    carve_trace_writer *wa, *wb;
    CHECK(carve_trace_writer_open(pa, "A", &wa) == CARVE_OK && carve_trace_writer_open(pb, "B", &wb) == CARVE_OK);
    for (uint64_t i = 1; i <= 3; i++) {
        CHECK(carve_trace_writer_alloc(wa, 0x1000 * i, 4096, 0, i) == CARVE_OK);
        CHECK(carve_trace_writer_alloc(wb, 0x1000 * i, 4096, 0, i) == CARVE_OK);
    }
    CHECK(carve_trace_writer_close(wa) == CARVE_OK && carve_trace_writer_close(wb) == CARVE_OK);
    const char *both[2] = {pa, pb};
    for (int i = 0; i < 2; i++) {
        f = fopen(both[i], "rb");
        CHECK(f && carve_trace_load(f, &t, NULL, NULL) == 0);
        CHECK(t.n == 3 && t.nthreads == 1);
        carve_trace_free(&t);
        if (f)
            fclose(f);
        unlink(both[i]);
    }
}

/* The replay functions take the caller's carve_config by its size, as
 * carve_arena_create does: one from an older carve.h (CARVE_CONFIG_SIZE_MIN
 * bytes, allocated to the byte so that a read past it is caught under
 * AddressSanitizer) and one from a newer carve.h (64 bytes more, all zero)
 * give the result of this library's own; a newer one with a field set is
 * refused. carve_replay_min_capacity used to copy sizeof(carve_config)
 * bytes and keep the caller's size in the copy: a smaller structure was
 * read past its end, a larger one refused (its tail was the stack beyond
 * the copy). */
static void test_sized_config(void) {
    carve_trace t;
    CHECK(load("a,1,4096\na,2,3000000\nf,1\nf,2\n", &t) == 0);
    void *slots[8];
    const size_t sizes[] = {CARVE_CONFIG_SIZE_MIN, sizeof(carve_config), sizeof(carve_config) + 64};
    size_t want = 0;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        carve_config *cfg = calloc(1, sizes[i]);
        CHECK(cfg != NULL);
        if (!cfg)
            break;
        carve_config_init_sized(cfg, sizes[i]);
        cfg->backend = CARVE_BACKEND_VIRTUAL;
        carve_capacity_result cap;
        carve_status st = carve_replay_min_capacity(&t, cfg, slots, NULL, NULL, &cap);
        if (st != CARVE_OK)
            fprintf(stderr, "size %zu: %s: %s\n", sizes[i], carve_status_str(st), carve_last_error(NULL));
        CHECK(st == CARVE_OK && cap.bytes >= cap.lower_bound && cap.bytes > 0);
        if (i == 0)
            want = cap.bytes;
        CHECK(cap.bytes == want);
        carve_replay_streams rs;
        CHECK(carve_replay_streams_open(&rs, t.nstreams, CARVE_BACKEND_VIRTUAL, 0) == CARVE_OK);
        carve_replay_result res;
        CHECK(carve_replay_run(&t, cfg, &rs, slots, 0, NULL, NULL, &res) == CARVE_OK);
        CHECK(res.done == t.n && res.nooms == 0 && res.nerrors == 0);
        carve_replay_rec rec;
        CHECK(carve_replay_record(&t, cfg, &rs, 4, &rec, &res) == CARVE_OK);
        carve_replay_rec_free(&rec);
        if (sizes[i] > sizeof(carve_config)) { /* a field this library does not know, set */
            ((unsigned char *)cfg)[sizes[i] - 1] = 1;
            CHECK(carve_replay_min_capacity(&t, cfg, slots, NULL, NULL, &cap) == CARVE_ERR_INVALID);
            CHECK(strstr(carve_last_error(NULL), "newer carve.h") != NULL && cap.probes == 0);
            CHECK(carve_replay_run(&t, cfg, &rs, slots, 0, NULL, NULL, &res) == CARVE_ERR_INVALID);
        }
        carve_replay_streams_close(&rs);
        free(cfg);
    }
    /* No size at all (a structure filled by hand): refused, not read. */
    carve_config bare;
    memset(&bare, 0, sizeof(bare));
    bare.backend = CARVE_BACKEND_VIRTUAL;
    bare.growth = 1;
    carve_capacity_result cap;
    CHECK(carve_replay_min_capacity(&t, &bare, slots, NULL, NULL, &cap) == CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "carve_config_init") != NULL);
    carve_trace_free(&t);
}

int main(void) {
    test_good();
    test_crlf_and_blanks();
    test_empty();
    test_unknown_free();
    test_duplicate_live();
    test_malformed();
    test_nul_bytes();
    test_huge_sizes();
    test_long_line();
    test_random_roundtrip();
    test_store();
    test_not_a_trace();
    test_writer();
    test_threads();
    test_writer_threads();
    test_sized_config();
    test_progress();
    test_io_error();
    test_out_of_memory();
    printf("%lu checks, %lu failed\n", checks, failures);
    return failures ? 1 : 0;
}
