/*
 * fuzz_api.c — fuzz target for the public allocator API: the input is a
 * small program of operations (alloc, free, bad frees, record_stream,
 * empty_cache, statistics, peak resets, snapshots, edge cases, destroy and
 * re-create) on up to 3 arenas and 4 streams.
 *
 * The one idea: a model of the live buffers is the oracle. The target keeps
 * its own list of every live buffer (address, sizes, stream, id) per arena,
 * and after every operation the library must agree with it: statistics equal
 * the model's sums, new buffers are aligned and overlap nothing live, bad
 * pointers change nothing, the JSON snapshot lists exactly the model's
 * buffers, and carve_check passes. On HOST arenas buffers are real memory:
 * each carries a pattern derived from its id at both ends, verified before
 * its free, so an overlap or a stray write by the allocator shows up.
 *
 * Input format (docs in README.md): byte 0 picks the arena count, then 3
 * bytes per arena pick its configuration (4 with injected faults), then
 * each operation is an opcode byte and its argument bytes; a missing byte
 * reads as 0. CARVE_FUZZ_COUNT=1 prints the operations executed at exit,
 * CARVE_FUZZ_VERBOSE=1 prints every operation.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "carve.h"
#include "fuzz_common.h"

#define MAX_ARENAS 3
#define NSTREAMS 4
#define MAX_LIVE 256
#define NFREED 16
#define MiB ((size_t)1 << 20)
#define GRANULE CARVE_SEGMENT_GRANULE
#define BATCH ((size_t)16 << 20) /* per-stream slack of the peaks, carve.h */
#define PATTERN_EDGE 64

/* ---- counters and switches ------------------------------------------------------ */

static unsigned long long n_ops;    /* operations of the programs executed */
static unsigned long long n_calls;  /* carve_* calls those operations made */
static unsigned long long n_inputs;
static int verbose, counting;

static void print_counts(void) {
    fprintf(stderr, "fuzz_api: %llu inputs, %llu API operations, %llu API calls\n", n_inputs, n_ops, n_calls);
}

static void setup_once(void) {
    static int done;
    if (done)
        return;
    done = 1;
    const char *v = getenv("CARVE_FUZZ_VERBOSE");
    verbose = v && strcmp(v, "1") == 0;
    v = getenv("CARVE_FUZZ_COUNT");
    counting = v && strcmp(v, "1") == 0;
    if (counting)
        atexit(print_counts);
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    if (!verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

#define CALL(x) (n_calls++, (x))
#define CALLV(x) do { n_calls++; x; } while (0)

/* ---- the model ------------------------------------------------------------------ */

typedef struct buf {
    uintptr_t addr;
    size_t size;     /* requested */
    size_t rounded;  /* as the arena counts it */
    int stream;      /* index into streams[] */
    uint64_t id;
} buf;

typedef struct fz_arena {
    carve_arena *a;       /* NULL: this slot has no arena (creation failed under faults) */
    carve_config cfg;     /* as created */
    char fault_text[160]; /* carve_config_parse text that switched faults on, or "" */
    int host, vmm, faults;
    size_t limit, initial, capacity; /* effective limit, initial block, most one buffer may get */
    buf live[MAX_LIVE];
    size_t nlive;
    size_t allocated, requested, alloc_peak, req_peak;
    uint64_t nallocs, nfrees, nooms;
    unsigned streams_used, streams_tried; /* bit per stream: successful / attempted allocations */
    uintptr_t freed[NFREED];              /* recently freed addresses */
    size_t nfreed;
} fz_arena;

static fz_arena arenas[MAX_ARENAS];
static int narenas;
static uint64_t next_id;

static carve_stream stream_handle(int k) { return (carve_stream)(uintptr_t)(0x1000 * (uintptr_t)k); }

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

static const char *const names[] = {"arena", "quote\"d", "back\\slash", "ctl\x01\x1f\n\t", "utf-8 \xc3\xa9\xe2\x9c\x93", "",
                                    "a,b;c=d", "{[}]"};

/* ---- reading the program --------------------------------------------------------- */

typedef struct reader {
    const uint8_t *p;
    size_t n, i;
} reader;

static uint8_t take(reader *r) { return r->i < r->n ? r->p[r->i++] : 0; }

/* ---- patterns ------------------------------------------------------------------- */

static uint8_t pattern_byte(uint64_t id, size_t i) {
    uint64_t x = (id + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)i * 0xC2B2AE3D27D4EB4Full;
    return (uint8_t)(x >> 56);
}

/* Write (verify 0) or check (verify 1) the pattern at both ends of b. */
static void pattern(const fz_arena *fa, const buf *b, int verify) {
    if (!fa->host)
        return;
    uint8_t *p = (uint8_t *)b->addr;
    size_t n = b->size;
    for (size_t i = 0; i < n; i++) {
        if (n > 2 * PATTERN_EDGE && i == PATTERN_EDGE)
            i = n - PATTERN_EDGE;
        if (verify)
            FUZZ_CHECK(p[i] == pattern_byte(b->id, i),
                       "buffer %llu at %p (%zu bytes): byte %zu is %#x, want %#x: overwritten (overlap?)",
                       (unsigned long long)b->id, (void *)p, n, i, p[i], pattern_byte(b->id, i));
        else
            p[i] = pattern_byte(b->id, i);
    }
}

static void verify_all(void) {
    for (int k = 0; k < narenas; k++)
        for (size_t i = 0; i < arenas[k].nlive; i++)
            pattern(&arenas[k], &arenas[k].live[i], 1);
}

/* ---- model queries --------------------------------------------------------------- */

static ptrdiff_t find_live(const fz_arena *fa, uintptr_t addr) {
    for (size_t i = 0; i < fa->nlive; i++)
        if (fa->live[i].addr == addr)
            return (ptrdiff_t)i;
    return -1;
}

/* A new buffer must not overlap a live one: in any arena of the same kind
 * (host memory is one address space, virtual addresses are never reused). */
static void check_no_overlap(const fz_arena *fa, uintptr_t addr, size_t rounded) {
    for (int k = 0; k < narenas; k++) {
        const fz_arena *o = &arenas[k];
        if (!o->a || o->host != fa->host)
            continue;
        for (size_t i = 0; i < o->nlive; i++) {
            const buf *b = &o->live[i];
            FUZZ_CHECK(addr + rounded <= b->addr || b->addr + b->rounded <= addr,
                       "new buffer [%#lx, +%zu) in arena %d overlaps live buffer %llu [%#lx, +%zu) of arena %d",
                       (unsigned long)addr, rounded, (int)(fa - arenas), (unsigned long long)b->id,
                       (unsigned long)b->addr, b->rounded, k);
        }
    }
}

static void model_add(fz_arena *fa, uintptr_t addr, size_t size, int stream) {
    buf *b = &fa->live[fa->nlive++];
    b->addr = addr;
    b->size = size;
    b->rounded = round_up(size, CARVE_ALIGNMENT);
    b->stream = stream;
    b->id = next_id++;
    fa->allocated += b->rounded;
    fa->requested += size;
    fa->alloc_peak = fa->allocated > fa->alloc_peak ? fa->allocated : fa->alloc_peak;
    fa->req_peak = fa->requested > fa->req_peak ? fa->requested : fa->req_peak;
    fa->nallocs++;
    fa->streams_used |= 1u << stream;
    pattern(fa, b, 0);
}

static void model_remove(fz_arena *fa, size_t i) {
    buf *b = &fa->live[i];
    fa->allocated -= b->rounded;
    fa->requested -= b->size;
    fa->nfrees++;
    fa->freed[fa->nfreed++ % NFREED] = b->addr;
    fa->live[i] = fa->live[--fa->nlive];
}

/* ---- checks ---------------------------------------------------------------------- */

static void check_arena(const fz_arena *fa) {
    carve_status st = carve_check(fa->a);
    FUZZ_CHECK(st == CARVE_OK, "carve_check(arena %d): %s: %s", (int)(fa - arenas), carve_status_str(st),
               carve_last_error(fa->a));
}

static void check_all(void) {
    for (int k = 0; k < narenas; k++)
        if (arenas[k].a)
            check_arena(&arenas[k]);
}

static int popcount(unsigned x) {
    int n = 0;
    for (; x; x &= x - 1)
        n++;
    return n;
}

/* The statistics against the model. */
static void check_stats(const fz_arena *fa, carve_stats *out) {
    carve_stats s;
    int k = (int)(fa - arenas);
    FUZZ_CHECK(carve_get_stats(fa->a, &s) == CARVE_OK, "carve_get_stats failed");
    if (out)
        *out = s;
    FUZZ_CHECK(s.allocated_bytes == fa->allocated, "arena %d: allocated_bytes %zu, model %zu", k, s.allocated_bytes,
               fa->allocated);
    FUZZ_CHECK(s.requested_bytes == fa->requested, "arena %d: requested_bytes %zu, model %zu", k, s.requested_bytes,
               fa->requested);
    FUZZ_CHECK(s.num_live == fa->nlive, "arena %d: num_live %llu, model %zu", k, (unsigned long long)s.num_live,
               fa->nlive);
    FUZZ_CHECK(s.num_allocs == fa->nallocs && s.num_frees == fa->nfrees,
               "arena %d: num_allocs %llu num_frees %llu, model %llu %llu", k, (unsigned long long)s.num_allocs,
               (unsigned long long)s.num_frees, (unsigned long long)fa->nallocs, (unsigned long long)fa->nfrees);
    FUZZ_CHECK(s.num_ooms == fa->nooms, "arena %d: num_ooms %llu, model %llu", k, (unsigned long long)s.num_ooms,
               (unsigned long long)fa->nooms);
    FUZZ_CHECK(s.limit_bytes == fa->limit, "arena %d: limit_bytes %zu, effective limit %zu", k, s.limit_bytes,
               fa->limit);
    FUZZ_CHECK(s.reserved_bytes <= s.limit_bytes, "arena %d: reserved %zu above the limit %zu", k, s.reserved_bytes,
               s.limit_bytes);
    FUZZ_CHECK(s.reserved_bytes >= s.allocated_bytes, "arena %d: reserved %zu below allocated %zu", k,
               s.reserved_bytes, s.allocated_bytes);
    FUZZ_CHECK(s.reserved_bytes % GRANULE == 0, "arena %d: reserved %zu is not a multiple of the granule", k,
               s.reserved_bytes);
    FUZZ_CHECK(s.cached_bytes == s.reserved_bytes - s.allocated_bytes, "arena %d: cached %zu != reserved - allocated",
               k, s.cached_bytes);
    FUZZ_CHECK(s.reserved_bytes == carve_memory_reserved(fa->a), "arena %d: carve_memory_reserved disagrees", k);
    FUZZ_CHECK(s.allocated_bytes == carve_memory_allocated(fa->a), "arena %d: carve_memory_allocated disagrees", k);
    FUZZ_CHECK(s.allocated_bytes_peak >= s.allocated_bytes && s.requested_bytes_peak >= s.requested_bytes &&
                   s.reserved_bytes_peak >= s.reserved_bytes,
               "arena %d: a peak below its current value (allocated %zu/%zu requested %zu/%zu reserved %zu/%zu)", k,
               s.allocated_bytes, s.allocated_bytes_peak, s.requested_bytes, s.requested_bytes_peak,
               s.reserved_bytes, s.reserved_bytes_peak);
    FUZZ_CHECK(s.reserved_bytes_peak <= s.limit_bytes, "arena %d: reserved peak %zu above the limit", k,
               s.reserved_bytes_peak);
    FUZZ_CHECK((int)s.num_streams >= popcount(fa->streams_used) && (int)s.num_streams <= popcount(fa->streams_tried),
               "arena %d: num_streams %zu, but allocations succeeded on %d streams and were tried on %d", k,
               s.num_streams, popcount(fa->streams_used), popcount(fa->streams_tried));
    /* Peaks: exact with one stream; with several, carve.h allows them to be
     * off by at most 16 MiB per stream, either way. */
    if (s.num_streams <= 1) {
        FUZZ_CHECK(s.allocated_bytes_peak == fa->alloc_peak && s.requested_bytes_peak == fa->req_peak,
                   "arena %d, one stream: peaks allocated %zu requested %zu, model %zu %zu", k,
                   s.allocated_bytes_peak, s.requested_bytes_peak, fa->alloc_peak, fa->req_peak);
    } else {
        size_t slack = BATCH * s.num_streams;
        FUZZ_CHECK(s.allocated_bytes_peak + slack >= fa->alloc_peak && s.requested_bytes_peak + slack >= fa->req_peak &&
                       s.allocated_bytes_peak <= fa->alloc_peak + slack && s.requested_bytes_peak <= fa->req_peak + slack,
                   "arena %d, %zu streams: peaks allocated %zu requested %zu, true peaks %zu %zu: off by more "
                   "than 16 MiB per stream", k, s.num_streams, s.allocated_bytes_peak, s.requested_bytes_peak,
                   fa->alloc_peak, fa->req_peak);
    }
    if (!fa->vmm) {
        FUZZ_CHECK(s.largest_free_block <= s.reserved_bytes, "arena %d: largest free block %zu above reserved %zu", k,
                   s.largest_free_block, s.reserved_bytes);
        FUZZ_CHECK(s.num_backend_allocs >= s.num_backend_frees &&
                       s.num_segments == s.num_backend_allocs - s.num_backend_frees,
                   "arena %d: %zu segments, %llu reserved and %llu released ever", k, s.num_segments,
                   (unsigned long long)s.num_backend_allocs, (unsigned long long)s.num_backend_frees);
        if (!fa->cfg.growth)
            FUZZ_CHECK(s.reserved_bytes == 0 || s.reserved_bytes == fa->initial,
                       "arena %d, growth off: reserved %zu, neither 0 nor the block of %zu", k, s.reserved_bytes,
                       fa->initial);
    }
}

/* ---- the snapshot: a small JSON reader ------------------------------------------- */

typedef struct jv {
    char type;                 /* o(bject) a(rray) s(tring) n(umber) t f z(null) */
    char *str;                 /* strings: unescaped */
    uint64_t num;              /* numbers: non-negative integers only */
    size_t n;                  /* members of objects and arrays */
    struct jv *items;
    char **keys;
} jv;

typedef struct jparser {
    const char *s;
    size_t i, len;
} jparser;

static void jskip(jparser *p) {
    while (p->i < p->len && (p->s[p->i] == ' ' || p->s[p->i] == '\n' || p->s[p->i] == '\t' || p->s[p->i] == '\r'))
        p->i++;
}

static char *jstring(jparser *p) {
    FUZZ_CHECK(p->i < p->len && p->s[p->i] == '"', "snapshot: string expected at %zu", p->i);
    p->i++;
    size_t end = p->i; /* find the closing quote first: the string is at most that long */
    while (end < p->len && p->s[end] != '"')
        end += p->s[end] == '\\' ? 2 : 1;
    char *out = malloc(end - p->i + 1);
    FUZZ_CHECK(out != NULL, "host memory");
    size_t o = 0;
    for (;;) {
        FUZZ_CHECK(p->i < p->len, "snapshot: unterminated string");
        unsigned char c = (unsigned char)p->s[p->i++];
        if (c == '"')
            break;
        FUZZ_CHECK(c >= 0x20, "snapshot: raw control character %#x in a string", c);
        if (c != '\\') {
            out[o++] = (char)c;
            continue;
        }
        FUZZ_CHECK(p->i < p->len, "snapshot: unterminated escape");
        c = (unsigned char)p->s[p->i++];
        switch (c) {
        case '"': case '\\': case '/': out[o++] = (char)c; break;
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'n': out[o++] = '\n'; break;
        case 'r': out[o++] = '\r'; break;
        case 't': out[o++] = '\t'; break;
        case 'u': {
            unsigned v = 0;
            for (int k = 0; k < 4; k++) {
                FUZZ_CHECK(p->i < p->len, "snapshot: short \\u escape");
                char h = p->s[p->i++];
                v = v * 16 + (unsigned)(h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                                       : h >= 'A' && h <= 'F' ? h - 'A' + 10 : 99);
                FUZZ_CHECK(v < 0x10000, "snapshot: bad \\u escape");
            }
            FUZZ_CHECK(v < 0x80, "snapshot: \\u%04x: this reader expects escapes of ASCII only", v);
            out[o++] = (char)v;
            break;
        }
        default: FUZZ_CHECK(0, "snapshot: bad escape \\%c", c);
        }
    }
    out[o] = '\0';
    return out;
}

static void jvalue(jparser *p, jv *v, int depth);

static void jcontainer(jparser *p, jv *v, int depth, char close) {
    size_t cap = 0;
    p->i++;
    jskip(p);
    if (p->i < p->len && p->s[p->i] == close) {
        p->i++;
        return;
    }
    for (;;) {
        if (v->n == cap) {
            cap = cap ? cap * 2 : 8;
            v->items = realloc(v->items, cap * sizeof(*v->items));
            v->keys = close == '}' ? realloc(v->keys, cap * sizeof(*v->keys)) : NULL;
            FUZZ_CHECK(v->items && (close != '}' || v->keys), "host memory");
        }
        jskip(p);
        if (close == '}') {
            v->keys[v->n] = jstring(p);
            jskip(p);
            FUZZ_CHECK(p->i < p->len && p->s[p->i] == ':', "snapshot: ':' expected at %zu", p->i);
            p->i++;
        }
        jvalue(p, &v->items[v->n++], depth + 1);
        jskip(p);
        FUZZ_CHECK(p->i < p->len, "snapshot: unterminated %s", close == '}' ? "object" : "array");
        char c = p->s[p->i++];
        if (c == close)
            return;
        FUZZ_CHECK(c == ',', "snapshot: ',' or '%c' expected at %zu, got '%c'", close, p->i - 1, c);
    }
}

static void jvalue(jparser *p, jv *v, int depth) {
    memset(v, 0, sizeof(*v));
    FUZZ_CHECK(depth < 32, "snapshot: nested too deep");
    jskip(p);
    FUZZ_CHECK(p->i < p->len, "snapshot: value expected at the end");
    char c = p->s[p->i];
    if (c == '{' || c == '[') {
        v->type = c == '{' ? 'o' : 'a';
        jcontainer(p, v, depth, c == '{' ? '}' : ']');
    } else if (c == '"') {
        v->type = 's';
        v->str = jstring(p);
    } else if (c >= '0' && c <= '9') {
        v->type = 'n';
        for (; p->i < p->len && p->s[p->i] >= '0' && p->s[p->i] <= '9'; p->i++) {
            __extension__ unsigned __int128 w = (unsigned __int128)v->num * 10 + (unsigned)(p->s[p->i] - '0');
            FUZZ_CHECK(w <= UINT64_MAX, "snapshot: number over 64 bits");
            v->num = (uint64_t)w;
        }
    } else if (strncmp(p->s + p->i, "true", 4) == 0) {
        v->type = 't', p->i += 4;
    } else if (strncmp(p->s + p->i, "false", 5) == 0) {
        v->type = 'f', p->i += 5;
    } else if (strncmp(p->s + p->i, "null", 4) == 0) {
        v->type = 'z', p->i += 4;
    } else {
        FUZZ_CHECK(0, "snapshot: unexpected '%c' at %zu", c, p->i);
    }
}

static void jfree(jv *v) {
    for (size_t i = 0; i < v->n; i++) {
        jfree(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
}

static const jv *jget(const jv *o, const char *key, char type) {
    FUZZ_CHECK(o->type == 'o', "snapshot: object expected around key '%s'", key);
    for (size_t i = 0; i < o->n; i++)
        if (strcmp(o->keys[i], key) == 0) {
            FUZZ_CHECK(type == 0 || o->items[i].type == type, "snapshot: '%s' has type %c, want %c", key,
                       o->items[i].type, type);
            return &o->items[i];
        }
    FUZZ_CHECK(0, "snapshot: key '%s' missing", key);
    return NULL;
}

static uint64_t jnum(const jv *o, const char *key) { return jget(o, key, 'n')->num; }

static uintptr_t jaddr(const jv *o, const char *key) {
    const char *s = jget(o, key, 's')->str;
    char *end;
    FUZZ_CHECK(s[0] == '0' && s[1] == 'x', "snapshot: address '%s' is not 0x-hexadecimal", s);
    uintptr_t a = (uintptr_t)strtoull(s, &end, 16);
    FUZZ_CHECK(*end == '\0', "snapshot: address '%s' is not 0x-hexadecimal", s);
    return a;
}

/* The brief's lexical checks, independent of the reader above. */
static void check_json_shape(const char *js) {
    size_t len = strlen(js);
    FUZZ_CHECK(len >= 3 && js[0] == '{' && js[len - 2] == '}' && js[len - 1] == '\n',
               "snapshot does not start with '{' and end with \"}\\n\"");
    long depth = 0;
    int in_str = 0;
    char stack[64];
    for (size_t i = 0; i < len; i++) {
        char c = js[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = 0;
            continue;
        }
        if (c == '"') {
            in_str = 1;
        } else if (c == '{' || c == '[') {
            FUZZ_CHECK(depth < 64, "snapshot nested too deep");
            stack[depth++] = c;
        } else if (c == '}' || c == ']') {
            FUZZ_CHECK(depth > 0 && stack[depth - 1] == (c == '}' ? '{' : '['), "snapshot: unbalanced '%c' at %zu", c,
                       i);
            depth--;
            FUZZ_CHECK(depth > 0 || i == len - 2, "snapshot: text after the top-level object at %zu", i);
        }
    }
    FUZZ_CHECK(depth == 0 && !in_str, "snapshot: unbalanced at the end (depth %ld, in string %d)", depth, in_str);
}

static const char *const stat_keys[] = {
    "requested_bytes", "requested_bytes_peak", "allocated_bytes", "allocated_bytes_peak", "reserved_bytes",
    "reserved_bytes_peak", "cached_bytes", "largest_free_block", "num_segments", "num_streams", "num_live",
    "num_allocs", "num_frees", "num_backend_allocs", "num_backend_frees", "num_ooms"};

static void check_snapshot(const fz_arena *fa) {
    carve_stats s;
    check_stats(fa, &s);
    char *js = (char *)&s; /* must be overwritten */
    carve_status st = CALL(carve_snapshot_json(fa->a, &js));
    FUZZ_CHECK(st == CARVE_OK && js != NULL, "carve_snapshot_json: %s: %s", carve_status_str(st),
               carve_last_error(fa->a));
    check_json_shape(js);

    jparser p = {js, 0, strlen(js)};
    jv root;
    jvalue(&p, &root, 0);
    jskip(&p);
    FUZZ_CHECK(p.i == p.len, "snapshot: text after the top-level value");
    FUZZ_CHECK(jnum(&root, "carve_snapshot") == 1, "snapshot: schema version is not 1");
    FUZZ_CHECK(strcmp(jget(&root, "version", 's')->str, carve_version()) == 0, "snapshot: version differs");
    const jv *ar = jget(&root, "arena", 'o');
    const char *want_name = fa->cfg.name ? fa->cfg.name : "arena";
    FUZZ_CHECK(strcmp(jget(ar, "name", 's')->str, want_name) == 0, "snapshot: arena name '%s', want '%s'",
               jget(ar, "name", 's')->str, want_name);
    FUZZ_CHECK(strcmp(jget(ar, "backend", 's')->str, fa->host ? "host" : "virtual") == 0, "snapshot: backend");
    FUZZ_CHECK(jget(ar, "growth", 0)->type == (fa->cfg.growth ? 't' : 'f'), "snapshot: growth");
    FUZZ_CHECK(jnum(ar, "limit_bytes") == fa->limit && jnum(ar, "initial_bytes") == fa->initial,
               "snapshot: limit or initial differs from carve_arena_get_config");
    FUZZ_CHECK(jnum(ar, "granule") == GRANULE && jnum(ar, "alignment") == CARVE_ALIGNMENT, "snapshot: granule");

    /* Statistics: the same as carve_get_stats just before (nothing ran between). */
    const jv *js_stats = jget(&root, "stats", 'o');
    const size_t sv[] = {s.requested_bytes, s.requested_bytes_peak, s.allocated_bytes, s.allocated_bytes_peak,
                         s.reserved_bytes, s.reserved_bytes_peak, s.cached_bytes, s.largest_free_block,
                         s.num_segments, s.num_streams, (size_t)s.num_live, (size_t)s.num_allocs,
                         (size_t)s.num_frees, (size_t)s.num_backend_allocs, (size_t)s.num_backend_frees,
                         (size_t)s.num_ooms};
    for (size_t i = 0; i < sizeof(stat_keys) / sizeof(stat_keys[0]); i++)
        FUZZ_CHECK(jnum(js_stats, stat_keys[i]) == sv[i], "snapshot: stats.%s %llu, carve_get_stats %zu",
                   stat_keys[i], (unsigned long long)jnum(js_stats, stat_keys[i]), sv[i]);

    /* Streams: one per stream seen; their live counts and bytes add up. */
    const jv *streams = jget(&root, "streams", 'a');
    FUZZ_CHECK(streams->n == s.num_streams, "snapshot: %zu streams, stats say %zu", streams->n, s.num_streams);
    uint64_t live = 0, alloc = 0;
    for (size_t i = 0; i < streams->n; i++) {
        live += jnum(&streams->items[i], "live");
        alloc += jnum(&streams->items[i], "allocated_bytes");
    }
    FUZZ_CHECK(live == fa->nlive && alloc == fa->allocated, "snapshot: streams hold %llu buffers, %llu bytes; model %zu, %zu",
               (unsigned long long)live, (unsigned long long)alloc, fa->nlive, fa->allocated);

    /* Segments: ranges tile each segment, blocks tile each span, and the
     * used blocks are exactly the model's live buffers. */
    const jv *segs = jget(&root, "segments", 'a');
    FUZZ_CHECK(segs->n == s.num_segments, "snapshot: %zu segments, stats say %zu", segs->n, s.num_segments);
    size_t used = 0;
    uint64_t reserved = 0;
    for (size_t g = 0; g < segs->n; g++) {
        const jv *seg = &segs->items[g];
        uintptr_t base = jaddr(seg, "address");
        uint64_t size = jnum(seg, "size");
        reserved += jnum(seg, "reserved_size");
        FUZZ_CHECK(base % GRANULE == 0 && size % GRANULE == 0, "snapshot: segment %#lx+%llu not granule-aligned",
                   (unsigned long)base, (unsigned long long)size);
        const jv *ranges = jget(seg, "ranges", 'a');
        uint64_t at = 0;
        for (size_t r = 0; r < ranges->n; r++) {
            const jv *rg = &ranges->items[r];
            uint64_t off = jnum(rg, "offset"), rsize = jnum(rg, "size");
            FUZZ_CHECK(off == at && rsize > 0, "snapshot: segment %zu: range at %llu (size %llu), want offset %llu", g,
                       (unsigned long long)off, (unsigned long long)rsize, (unsigned long long)at);
            at += rsize;
            const char *state = jget(rg, "state", 's')->str;
            if (strcmp(state, "free") == 0)
                continue;
            FUZZ_CHECK(strcmp(state, "span") == 0, "snapshot: range state '%s'", state);
            const jv *blocks = jget(rg, "blocks", 'a');
            uint64_t bat = off;
            for (size_t b = 0; b < blocks->n; b++) {
                const jv *bl = &blocks->items[b];
                uint64_t boff = jnum(bl, "offset"), bsize = jnum(bl, "size");
                FUZZ_CHECK(boff == bat && bsize > 0 && bsize % CARVE_ALIGNMENT == 0,
                           "snapshot: block at %llu (size %llu), want offset %llu", (unsigned long long)boff,
                           (unsigned long long)bsize, (unsigned long long)bat);
                bat += bsize;
                const char *bs = jget(bl, "state", 's')->str;
                FUZZ_CHECK(strcmp(bs, "used") == 0 || strcmp(bs, "free") == 0 || strcmp(bs, "cached") == 0 ||
                               strcmp(bs, "pending") == 0 || (fa->vmm && strcmp(bs, "unmapped") == 0),
                           "snapshot: block state '%s' is not in docs/snapshot.md", bs);
                if (strcmp(bs, "used") != 0)
                    continue;
                used++;
                uintptr_t addr = base + (uintptr_t)boff;
                ptrdiff_t m = find_live(fa, addr);
                FUZZ_CHECK(m >= 0, "snapshot: used block at %#lx is no live buffer of the model", (unsigned long)addr);
                FUZZ_CHECK(fa->live[m].rounded == bsize && fa->live[m].size == jnum(bl, "requested"),
                           "snapshot: used block at %#lx has size %llu requested %llu; model %zu %zu",
                           (unsigned long)addr, (unsigned long long)bsize, (unsigned long long)jnum(bl, "requested"),
                           fa->live[m].rounded, fa->live[m].size);
            }
            FUZZ_CHECK(bat == off + rsize, "snapshot: blocks of the span at %llu end at %llu, the span at %llu",
                       (unsigned long long)off, (unsigned long long)bat, (unsigned long long)(off + rsize));
        }
        FUZZ_CHECK(at == size, "snapshot: ranges of segment %zu end at %llu, the segment at %llu", g,
                   (unsigned long long)at, (unsigned long long)size);
    }
    FUZZ_CHECK(used == fa->nlive, "snapshot: %zu used blocks, model %zu live buffers", used, fa->nlive);
    if (!fa->vmm)
        FUZZ_CHECK(reserved == s.reserved_bytes, "snapshot: segments reserve %llu bytes, stats say %zu",
                   (unsigned long long)reserved, s.reserved_bytes);
    jfree(&root);
    CALLV(carve_snapshot_free(js));
}

/* ---- arenas ---------------------------------------------------------------------- */

/* Large blocks are rare: under ASan every host segment costs a shadow
 * poisoning of an eighth of its size, which would dominate the run time. */
static const size_t initial_choice[16] = {0,        2 * MiB,   4 * MiB,  8 * MiB,     16 * MiB, 32 * MiB,
                                          64 * MiB, 256 * MiB, 0,        2 * MiB,     3 * MiB + 1, 1,
                                          6 * MiB,  20 * MiB,  0,        12 * MiB + 5};
static const size_t limit_choice[16] = {2 * MiB,  4 * MiB,   8 * MiB,  16 * MiB,     32 * MiB,  64 * MiB,
                                        128 * MiB, 256 * MiB, 16 * MiB, 32 * MiB,     5 * MiB + 3, 64 * MiB,
                                        24 * MiB, 2 * MiB + 255, 100 * MiB, 256 * MiB};
static const size_t min_grow_choice[8] = {0, 0, 2 * MiB, 4 * MiB, 16 * MiB, 1, 64 * MiB, 300 * MiB};

/* Create arena slot k from its configuration; expects success unless
 * injected faults make the initial reservation fail. */
static void arena_open(fz_arena *fa) {
    int k = (int)(fa - arenas);
    carve_arena *a = (carve_arena *)fa; /* must be overwritten */
    carve_status st = CALL(carve_arena_create(&fa->cfg, &a));
    if (st != CARVE_OK) {
        FUZZ_CHECK(a == NULL, "carve_arena_create failed but *out is not NULL");
        FUZZ_CHECK(fa->faults && (st == CARVE_ERR_OOM || st == CARVE_ERR_BACKEND),
                   "carve_arena_create of arena %d: %s: %s", k, carve_status_str(st), carve_last_error(NULL));
        fa->a = NULL;
        say("arena %d: creation failed under injected faults", k);
        return;
    }
    fa->a = a;
    carve_config eff;
    FUZZ_CHECK(carve_arena_get_config(a, &eff) == CARVE_OK, "carve_arena_get_config");
    fa->limit = eff.limit_bytes;
    fa->initial = eff.initial_bytes;
    size_t want_limit = fa->cfg.limit_bytes / GRANULE * GRANULE;
    size_t want_initial = round_up(fa->cfg.initial_bytes, GRANULE);
    want_initial = want_initial > want_limit ? want_limit : want_initial;
    if (!fa->vmm || fa->cfg.growth)
        FUZZ_CHECK(fa->limit == want_limit, "arena %d: effective limit %zu, want %zu", k, fa->limit, want_limit);
    FUZZ_CHECK(fa->initial == want_initial, "arena %d: effective initial %zu, want %zu", k, fa->initial, want_initial);
    fa->capacity = fa->cfg.growth ? fa->limit : fa->initial;
    fa->nlive = 0;
    fa->allocated = fa->requested = fa->alloc_peak = fa->req_peak = 0;
    fa->nallocs = fa->nfrees = fa->nooms = 0;
    fa->streams_used = fa->streams_tried = 0;
    fa->nfreed = 0;
    if (!fa->vmm) {
        size_t want = fa->initial;
        FUZZ_CHECK(carve_memory_reserved(a) == want, "arena %d: %zu reserved at create, want the initial %zu", k,
                   carve_memory_reserved(a), want);
    }
}

static void arena_configure(fz_arena *fa, reader *r, int *have_virtual) {
    int k = (int)(fa - arenas);
    uint8_t b0 = take(r), b1 = take(r), b2 = take(r);
    carve_config *c = &fa->cfg;
    carve_config_init(c);
    int virt = (b0 & 3) == 3 && !*have_virtual;
    *have_virtual |= virt;
    c->backend = virt ? CARVE_BACKEND_VIRTUAL : CARVE_BACKEND_HOST;
    c->growth = (b0 >> 2) & 1;
    c->sim_event_polls = (b0 >> 3) & 3;
    c->vmm = virt && ((b0 >> 5) & 1);
    c->initial_bytes = initial_choice[b1 & 15];
    c->limit_bytes = limit_choice[b1 >> 4];
    c->min_grow_bytes = min_grow_choice[b2 & 7];
    c->name = names[(b2 >> 3) % (sizeof(names) / sizeof(names[0]))];
    fa->host = !virt;
    fa->vmm = c->vmm;
    fa->faults = 0;
    fa->fault_text[0] = '\0';
    if (((b0 >> 6) & 3) == 3) {
        /* Injected backend failures, through the text keys: where the
         * library has none, the parse fails and the arena runs without. */
        static const unsigned every[8] = {0, 3, 5, 11, 64, 2, 7, 0};
        uint8_t b3 = take(r);
        snprintf(fa->fault_text, sizeof(fa->fault_text), "fail_backend_at=%u,fail_backend_every=%u,fail_backend_status=%s",
                 b3 & 15, every[(b3 >> 5) & 7], b3 & 16 ? "backend" : "oom");
        carve_config probe = *c;
        if (carve_config_parse(&probe, fa->fault_text) == CARVE_OK &&
            ((b3 & 15) || every[(b3 >> 5) & 7])) {
            *c = probe;
            fa->faults = 1;
        } else {
            fa->fault_text[0] = '\0';
        }
    }
    int invalid = (!c->growth && c->initial_bytes == 0) || c->initial_bytes > c->limit_bytes;
    say("arena %d: %s growth=%d initial=%zu limit=%zu min_grow=%zu polls=%u vmm=%d %s%s", k,
        virt ? "virtual" : "host", c->growth, c->initial_bytes, c->limit_bytes, c->min_grow_bytes,
        c->sim_event_polls, c->vmm, fa->fault_text, invalid ? " (invalid: refused, then repaired)" : "");
    if (invalid) {
        carve_arena *a = (carve_arena *)fa;
        carve_status st = CALL(carve_arena_create(c, &a));
        FUZZ_CHECK(st == CARVE_ERR_INVALID && a == NULL, "carve_arena_create of an invalid configuration: %s",
                   carve_status_str(st));
        FUZZ_CHECK(carve_last_error(NULL)[0] != '\0', "carve_arena_create refused without a message");
        if (!c->growth && c->initial_bytes == 0)
            c->growth = 1;
        if (c->initial_bytes > c->limit_bytes)
            c->initial_bytes = c->limit_bytes;
    }
    arena_open(fa);
}

/* ---- operations ------------------------------------------------------------------ */

static unsigned touched; /* arenas the current operation used: carve_check runs on them after it */

static fz_arena *pick_arena(reader *r) {
    int k = take(r) % narenas;
    touched |= 1u << k;
    return arenas[k].a ? &arenas[k] : NULL;
}

/* The request an empty arena must be able to meet: its span fits the capacity. */
static int must_fit_empty(const fz_arena *fa, size_t size) {
    if (fa->faults || fa->nlive != 0 || size == 0 || size > fa->capacity)
        return 0;
    size_t rs = round_up(size, CARVE_ALIGNMENT);
    size_t need = rs <= MiB ? GRANULE : round_up(rs, GRANULE);
    return need <= fa->capacity;
}

/* carve_alloc with every documented outcome checked; the model follows. */
static void do_alloc(fz_arena *fa, size_t size, int stream) {
    int k = (int)(fa - arenas);
    if (fa->nlive == MAX_LIVE)
        return;
    void *p = (void *)fa; /* must be overwritten */
    int must = must_fit_empty(fa, size);
    if (size > 0 && size <= fa->limit)
        fa->streams_tried |= 1u << stream;
    carve_status st = CALL(carve_alloc(fa->a, size, stream_handle(stream), &p));
    say("alloc arena %d size %zu stream %d -> %s %p", k, size, stream, carve_status_str(st), p);
    if (st == CARVE_OK) {
        if (size == 0) {
            FUZZ_CHECK(p == NULL, "carve_alloc of 0 bytes returned %p", p);
            return;
        }
        FUZZ_CHECK(p != NULL && (uintptr_t)p % CARVE_ALIGNMENT == 0, "carve_alloc returned %p, not aligned to %u", p,
                   CARVE_ALIGNMENT);
        FUZZ_CHECK(find_live(fa, (uintptr_t)p) < 0, "carve_alloc returned %p, which is live", p);
        check_no_overlap(fa, (uintptr_t)p, round_up(size, CARVE_ALIGNMENT));
        model_add(fa, (uintptr_t)p, size, stream);
        return;
    }
    FUZZ_CHECK(p == NULL, "carve_alloc failed with %s but *out is %p", carve_status_str(st), p);
    FUZZ_CHECK(carve_last_error(fa->a)[0] != '\0', "carve_alloc failed with %s and no message", carve_status_str(st));
    FUZZ_CHECK(st == CARVE_ERR_OOM || (fa->faults && st == CARVE_ERR_BACKEND),
               "carve_alloc of %zu bytes failed with %s: %s", size, carve_status_str(st), carve_last_error(fa->a));
    if (st == CARVE_ERR_OOM)
        fa->nooms++;
    FUZZ_CHECK(!must,
               "carve_alloc of %zu bytes on an arena with no live buffer and room for it (capacity %zu) failed: %s",
               size, fa->capacity, carve_last_error(fa->a));
}

static void op_alloc(reader *r) {
    fz_arena *fa = pick_arena(r);
    int stream = take(r) % NSTREAMS;
    uint8_t e = take(r), m = take(r);
    size_t size = (((size_t)256 + m) << (e % 26)) >> 8;
    if ((e & 0xC0) == 0xC0)
        size = round_up(size, CARVE_ALIGNMENT);
    if (fa)
        do_alloc(fa, size, stream);
}

static void do_free(fz_arena *fa, size_t i) {
    int k = (int)(fa - arenas);
    buf b = fa->live[i];
    pattern(fa, &b, 1);
    carve_status st = CALL(carve_free(fa->a, (void *)b.addr));
    say("free arena %d %#lx (%zu bytes, buffer %llu) -> %s", k, (unsigned long)b.addr, b.size,
        (unsigned long long)b.id, carve_status_str(st));
    if (st != CARVE_OK) {
        /* Only an injected event-record failure may stop a free; the buffer stays live. */
        FUZZ_CHECK(fa->faults && st == CARVE_ERR_BACKEND, "carve_free of live buffer %#lx: %s: %s",
                   (unsigned long)b.addr, carve_status_str(st), carve_last_error(fa->a));
        return;
    }
    model_remove(fa, i);
}

static void op_free(reader *r) {
    fz_arena *fa = pick_arena(r);
    uint8_t i = take(r);
    if (fa && fa->nlive)
        do_free(fa, i % fa->nlive);
}

/* A pointer that is not the start of a live buffer: carve_free and
 * carve_record_stream refuse it and nothing changes. */
static void op_bad_pointer(reader *r) {
    fz_arena *fa = pick_arena(r);
    uint8_t kind = take(r) % 8, i = take(r), off = take(r), s = take(r);
    if (!fa)
        return;
    int k = (int)(fa - arenas);
    uintptr_t ptr = 0;
    const char *what;
    static int on_stack;
    switch (kind) {
    case 0: /* interior, aligned or not */
        if (!fa->nlive)
            return;
        {
            const buf *b = &fa->live[i % fa->nlive];
            if (b->rounded <= 1)
                return;
            size_t o; /* odd off: any interior byte; even: an aligned interior address */
            if (off & 1 || b->rounded == CARVE_ALIGNMENT)
                o = 1 + (size_t)off * 977 % (b->rounded - 1);
            else
                o = CARVE_ALIGNMENT * (1 + off % (b->rounded / CARVE_ALIGNMENT - 1));
            ptr = b->addr + o;
        }
        what = "interior";
        break;
    case 1: /* misaligned start */
        if (!fa->nlive)
            return;
        ptr = fa->live[i % fa->nlive].addr + 1 + off % (CARVE_ALIGNMENT - 1);
        what = "misaligned";
        break;
    case 2: { /* a live buffer of another arena */
        fz_arena *o = &arenas[(k + 1 + off % 2) % narenas];
        if (o == fa || !o->a || !o->nlive)
            return;
        ptr = o->live[i % o->nlive].addr;
        what = "foreign";
        break;
    }
    case 3: /* freed before */
        if (!fa->nfreed)
            return;
        ptr = fa->freed[i % (fa->nfreed < NFREED ? fa->nfreed : NFREED)];
        what = "already freed";
        break;
    case 4:
        ptr = 0;
        what = "NULL";
        break;
    case 5: /* wild: low addresses, the stack, the model itself */
        ptr = off % 3 == 0 ? (uintptr_t)0x1000 * (1 + i) : off % 3 == 1 ? (uintptr_t)&on_stack : (uintptr_t)fa;
        what = "wild";
        break;
    case 6: /* just past a live buffer */
        if (!fa->nlive)
            return;
        ptr = fa->live[i % fa->nlive].addr + fa->live[i % fa->nlive].rounded;
        what = "one past the end";
        break;
    default: /* far beyond anything: the end of the address space */
        ptr = UINTPTR_MAX - CARVE_ALIGNMENT * (uintptr_t)(1 + i) + 1;
        what = "top of the address space";
        break;
    }
    if (ptr && find_live(fa, ptr) >= 0)
        return; /* happens to be a live buffer of this arena: not a bad pointer */
    carve_stats before, after;
    FUZZ_CHECK(carve_get_stats(fa->a, &before) == CARVE_OK, "carve_get_stats");
    carve_status st = CALL(carve_free(fa->a, (void *)ptr));
    say("bad free (%s) arena %d %#lx -> %s", what, k, (unsigned long)ptr, carve_status_str(st));
    carve_status want = ptr ? CARVE_ERR_BAD_POINTER : CARVE_OK;
    FUZZ_CHECK(st == want, "carve_free of a %s pointer %#lx: %s, want %s", what, (unsigned long)ptr,
               carve_status_str(st), carve_status_str(want));
    if (ptr)
        FUZZ_CHECK(carve_last_error(fa->a)[0] != '\0', "carve_free refused %#lx without a message", (unsigned long)ptr);
    st = CALL(carve_record_stream(fa->a, (void *)ptr, stream_handle(s % NSTREAMS)));
    FUZZ_CHECK(st == CARVE_ERR_BAD_POINTER, "carve_record_stream of a %s pointer %#lx: %s, want CARVE_ERR_BAD_POINTER",
               what, (unsigned long)ptr, carve_status_str(st));
    FUZZ_CHECK(carve_get_stats(fa->a, &after) == CARVE_OK, "carve_get_stats");
    FUZZ_CHECK(memcmp(&before, &after, sizeof(before)) == 0, "a refused %s pointer changed the statistics", what);
}

static void op_record_stream(reader *r) {
    fz_arena *fa = pick_arena(r);
    uint8_t i = take(r), s = take(r);
    if (!fa || !fa->nlive)
        return;
    const buf *b = &fa->live[i % fa->nlive];
    carve_status st = CALL(carve_record_stream(fa->a, (void *)b->addr, stream_handle(s % NSTREAMS)));
    say("record_stream arena %d %#lx stream %d -> %s", (int)(fa - arenas), (unsigned long)b->addr, s % NSTREAMS,
        carve_status_str(st));
    FUZZ_CHECK(st == CARVE_OK, "carve_record_stream of live buffer %#lx: %s: %s", (unsigned long)b->addr,
               carve_status_str(st), carve_last_error(fa->a));
}

static void op_empty_cache(reader *r) {
    fz_arena *fa = pick_arena(r);
    if (!fa)
        return;
    verify_all();
    carve_status st = CALL(carve_empty_cache(fa->a));
    say("empty_cache arena %d -> %s (reserved now %zu)", (int)(fa - arenas), carve_status_str(st),
        carve_memory_reserved(fa->a));
    FUZZ_CHECK(st == CARVE_OK || (fa->faults && st == CARVE_ERR_BACKEND), "carve_empty_cache: %s: %s",
               carve_status_str(st), carve_last_error(fa->a));
    verify_all(); /* segments with live buffers must still be there */
    if (!fa->faults && fa->nlive == 0)
        FUZZ_CHECK(carve_memory_reserved(fa->a) == 0, "carve_empty_cache with no live buffer left %zu bytes reserved",
                   carve_memory_reserved(fa->a));
}

static void op_stats(reader *r) {
    fz_arena *fa = pick_arena(r);
    if (!fa)
        return;
    carve_stats s;
    n_calls++; /* carve_get_stats in check_stats */
    check_stats(fa, &s);
    verify_all();
    say("stats arena %d: allocated %zu reserved %zu peak %zu", (int)(fa - arenas), s.allocated_bytes, s.reserved_bytes,
        s.allocated_bytes_peak);
}

static void op_reset_peaks(reader *r) {
    fz_arena *fa = pick_arena(r);
    if (!fa)
        return;
    CALLV(carve_reset_peak_stats(fa->a));
    fa->alloc_peak = fa->allocated;
    fa->req_peak = fa->requested;
    carve_stats s;
    FUZZ_CHECK(carve_get_stats(fa->a, &s) == CARVE_OK, "carve_get_stats");
    FUZZ_CHECK(s.reserved_bytes_peak == s.reserved_bytes, "after a reset, reserved peak %zu != reserved %zu",
               s.reserved_bytes_peak, s.reserved_bytes);
    if (s.num_streams <= 1)
        FUZZ_CHECK(s.allocated_bytes_peak == s.allocated_bytes && s.requested_bytes_peak == s.requested_bytes,
                   "after a reset with one stream, peaks %zu %zu != current %zu %zu", s.allocated_bytes_peak,
                   s.requested_bytes_peak, s.allocated_bytes, s.requested_bytes);
    say("reset_peak_stats arena %d", (int)(fa - arenas));
}

static void op_snapshot(reader *r) {
    fz_arena *fa = pick_arena(r);
    if (!fa)
        return;
    say("snapshot arena %d", (int)(fa - arenas));
    check_snapshot(fa);
}

static void op_memory(reader *r) {
    fz_arena *fa = pick_arena(r);
    if (!fa)
        return;
    size_t al = CALL(carve_memory_allocated(fa->a)), rs = CALL(carve_memory_reserved(fa->a));
    FUZZ_CHECK(al == fa->allocated, "carve_memory_allocated %zu, model %zu", al, fa->allocated);
    FUZZ_CHECK(rs >= al && rs <= fa->limit, "carve_memory_reserved %zu: below allocated %zu or above the limit %zu", rs,
               al, fa->limit);
    FUZZ_CHECK(carve_memory_allocated(NULL) == 0 && carve_memory_reserved(NULL) == 0, "NULL arena: not 0 bytes");
}

/* Requests at the edges: 0 bytes, beyond any limit, the whole capacity,
 * cudaStreamPerThread, NULL arguments. */
static void op_alloc_edge(reader *r) {
    fz_arena *fa = pick_arena(r);
    uint8_t kind = take(r) % 8, s = take(r);
    if (!fa)
        return;
    int stream = s % NSTREAMS;
    void *p = (void *)fa;
    carve_status st;
    say("alloc edge %d arena %d", kind, (int)(fa - arenas));
    switch (kind) {
    case 0: do_alloc(fa, 0, stream); break;
    case 1: do_alloc(fa, SIZE_MAX, stream); break;
    case 2: do_alloc(fa, fa->limit + 1, stream); break;
    case 3: do_alloc(fa, fa->capacity, stream); break;
    case 4: do_alloc(fa, ((size_t)1 << 52) + 1, stream); break;
    case 5:
        /* the calling thread's own stream (bit 31 of the stream masks): a
         * buffer, or out of memory (or an injected backend fault); freed at
         * once from the same thread */
        if (fa->nlive >= MAX_LIVE)
            break;
        fa->streams_tried |= 1u << 31;
        st = CALL(carve_alloc(fa->a, 4096, (carve_stream)(uintptr_t)0x2, &p));
        FUZZ_CHECK((st == CARVE_OK && p != NULL) || (st == CARVE_ERR_OOM && p == NULL) ||
                       (fa->faults && st == CARVE_ERR_BACKEND && p == NULL),
                   "carve_alloc on cudaStreamPerThread: %s", carve_status_str(st));
        if (st == CARVE_OK) {
            model_add(fa, (uintptr_t)p, 4096, 31);
            do_free(fa, fa->nlive - 1); /* under injected faults the buffer may stay live */
        } else if (st == CARVE_ERR_OOM) {
            fa->nooms++;
        }
        break;
    case 6:
        st = CALL(carve_alloc(fa->a, 4096, stream_handle(stream), NULL));
        FUZZ_CHECK(st == CARVE_ERR_INVALID, "carve_alloc with out NULL: %s", carve_status_str(st));
        break;
    default:
        st = CALL(carve_alloc(NULL, 4096, stream_handle(stream), &p));
        FUZZ_CHECK(st == CARVE_ERR_INVALID && p == NULL, "carve_alloc on a NULL arena: %s", carve_status_str(st));
        break;
    }
}

/* The NULL arena everywhere: refused or a no-op, never a crash. */
static void null_arena_calls(void) {
    carve_stats s;
    memset(&s, 0x5A, sizeof(s));
    char *js = (char *)&s;
    int x;
    FUZZ_CHECK(CALL(carve_free(NULL, &x)) == CARVE_ERR_INVALID, "carve_free(NULL arena)");
    FUZZ_CHECK(CALL(carve_record_stream(NULL, &x, NULL)) == CARVE_ERR_INVALID, "carve_record_stream(NULL arena)");
    FUZZ_CHECK(CALL(carve_empty_cache(NULL)) == CARVE_ERR_INVALID, "carve_empty_cache(NULL)");
    FUZZ_CHECK(CALL(carve_get_stats(NULL, &s)) == CARVE_ERR_INVALID, "carve_get_stats(NULL)");
    carve_stats zero;
    memset(&zero, 0, sizeof(zero));
    FUZZ_CHECK(memcmp(&s, &zero, sizeof(s)) == 0, "carve_get_stats(NULL) did not zero *out");
    FUZZ_CHECK(CALL(carve_snapshot_json(NULL, &js)) == CARVE_ERR_INVALID && js == NULL, "carve_snapshot_json(NULL)");
    CALLV(carve_reset_peak_stats(NULL));
    CALLV(carve_arena_destroy(NULL));
}

static void op_misc(reader *r) {
    fz_arena *fa = pick_arena(r);
    uint8_t kind = take(r) % 8, x = take(r), y = take(r);
    if (!fa)
        return;
    int k = (int)(fa - arenas);
    switch (kind) {
    case 0: /* free everything, in an order from x */
        say("free all of arena %d", k);
        for (size_t n = fa->nlive; n > 0 && fa->nlive; n--)
            do_free(fa, (size_t)x % fa->nlive);
        break;
    case 1: /* free every buffer of one stream */
        say("free stream %d of arena %d", x % NSTREAMS, k);
        for (size_t i = fa->nlive; i-- > 0;)
            if (i < fa->nlive && fa->live[i].stream == x % NSTREAMS)
                do_free(fa, i);
        break;
    case 2: /* destroy with live buffers, then create again */
        say("destroy and re-create arena %d (%zu live buffers)", k, fa->nlive);
        verify_all();
        CALLV(carve_arena_destroy(fa->a));
        fa->a = NULL;
        fa->nlive = 0; /* they died with it */
        arena_open(fa);
        break;
    case 3: { /* the effective configuration */
        carve_config eff;
        FUZZ_CHECK(CALL(carve_arena_get_config(fa->a, &eff)) == CARVE_OK, "carve_arena_get_config");
        FUZZ_CHECK(eff.limit_bytes == fa->limit && eff.initial_bytes == fa->initial && eff.growth == fa->cfg.growth &&
                       eff.sim_event_polls == fa->cfg.sim_event_polls,
                   "carve_arena_get_config changed");
        FUZZ_CHECK(CALL(carve_arena_get_config(fa->a, NULL)) == CARVE_ERR_INVALID, "carve_arena_get_config(NULL)");
        break;
    }
    case 4: { /* a burst of one size, freed in reverse: the exact-size reuse path */
        size_t size = (size_t)1 + (size_t)y * 4099 % (4 * MiB);
        int stream = x % NSTREAMS, n = 2 + x % 8;
        size_t first = fa->nlive;
        say("burst of %d x %zu bytes on stream %d, arena %d", n, size, stream, k);
        for (int i = 0; i < n; i++)
            do_alloc(fa, size, stream);
        while (fa->nlive > first)
            do_free(fa, fa->nlive - 1);
        break;
    }
    case 5: { /* a buffer used on every stream, then freed */
        if (!fa->nlive)
            break;
        size_t i = x % fa->nlive;
        say("record_stream on every stream, then free, arena %d", k);
        for (int s = 0; s < NSTREAMS; s++)
            FUZZ_CHECK(CALL(carve_record_stream(fa->a, (void *)fa->live[i].addr, stream_handle(s))) == CARVE_OK,
                       "carve_record_stream");
        do_free(fa, i);
        break;
    }
    case 6:
        say("NULL-arena calls");
        null_arena_calls();
        break;
    default: /* alloc then free at once, on each stream */
        say("alloc and free on each stream, arena %d", k);
        for (int s = 0; s < NSTREAMS; s++) {
            size_t before = fa->nlive;
            do_alloc(fa, (size_t)1 + (size_t)y * 257 * (size_t)(s + 1), s);
            if (fa->nlive > before)
                do_free(fa, fa->nlive - 1);
        }
        break;
    }
}

/* ---- the target ------------------------------------------------------------------ */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    setup_once();
    n_inputs++;
    reader r = {data, size, 0};
    memset(arenas, 0, sizeof(arenas));
    next_id = 0;
    narenas = 1 + take(&r) % MAX_ARENAS;
    int have_virtual = 0;
    for (int k = 0; k < narenas; k++)
        arena_configure(&arenas[k], &r, &have_virtual);
    check_all();
    touched = 0;

    while (r.i < r.n) {
        uint8_t op = take(&r) % 16;
        unsigned long long calls = n_calls;
        switch (op) {
        case 0: case 1: case 2: case 3: op_alloc(&r); break;
        case 4: case 5: case 6: op_free(&r); break;
        case 7: op_bad_pointer(&r); break;
        case 8: op_record_stream(&r); break;
        case 9: op_empty_cache(&r); break;
        case 10: op_stats(&r); break;
        case 11: op_reset_peaks(&r); break;
        case 12: op_snapshot(&r); break;
        case 13: op_memory(&r); break;
        case 14: op_alloc_edge(&r); break;
        default: op_misc(&r); break;
        }
        n_ops += n_calls != calls; /* operations that reached the library */
        for (int k = 0; k < narenas; k++)
            if ((touched & (1u << k)) && arenas[k].a)
                check_arena(&arenas[k]);
        touched = 0;
    }

    /* The end: every buffer verified and freed, the books balance, every
     * byte goes back, the arenas are destroyed. */
    for (int k = 0; k < narenas; k++) {
        fz_arena *fa = &arenas[k];
        if (!fa->a)
            continue;
        check_stats(fa, NULL);
        while (fa->nlive) {
            size_t before = fa->nlive;
            do_free(fa, fa->nlive - 1);
            if (fa->nlive == before)
                break; /* an injected failure keeps it: destroy takes it */
        }
        check_arena(fa);
        if (!fa->faults) {
            check_stats(fa, NULL);
            FUZZ_CHECK(CALL(carve_empty_cache(fa->a)) == CARVE_OK, "carve_empty_cache at the end");
            FUZZ_CHECK(carve_memory_reserved(fa->a) == 0, "arena %d: %zu bytes reserved after freeing everything "
                       "and carve_empty_cache", k, carve_memory_reserved(fa->a));
        }
        CALLV(carve_arena_destroy(fa->a));
        fa->a = NULL;
    }
    return 0;
}
