/*
 * format.c — the trace loader: a chunked line reader, a strict field parser,
 * and the id -> slot map that turns ids into dense array indexes.
 *
 * Live ids sit in a hash table (idmap.h) as small as the live set. Slots
 * come from a free list, so the slot count is the
 * peak number of live ids. Lines are cut from a read buffer with memchr and
 * parsed in place: a 10-million-event trace loads in about two seconds. The
 * events go to a compact store (store.c), a few bytes each. A "#thread,<k>"
 * tag, a comment to readers that do not know it, says which thread made the
 * events after it.
 */
#include "carve_trace.h"
#include "trace/idmap.h"
#include "trace/store.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define READ_CHUNK ((size_t)64 << 10)   /* first size of the read buffer */
#define MAX_LINE ((size_t)1 << 20)      /* the buffer grows to this: the longest line */
#define PROGRESS_EVERY ((size_t)1 << 20)
#define NOTED 4                          /* problems described per kind */

/* ---- problem notes ----------------------------------------------------- */

typedef struct problems {
    size_t count;
    size_t line[NOTED];
    const char *why[NOTED];
} problems;

static void note(problems *p, size_t line, const char *why) {
    if (p->count < NOTED) {
        p->line[p->count] = line;
        p->why[p->count] = why;
    }
    p->count++;
}

typedef struct loader {
    carve_trace *t;
    id_map map;
    uint32_t *free_slots;     /* stack of slots given back */
    size_t nfree_slots;
    size_t parsed;            /* lines that read as events (kept or skipped) */
    uint64_t live_lo, live_hi; /* sum of live sizes, 128 bits wide */
    uint64_t *slot_size;      /* size of the buffer in each slot */
    uint32_t *slot_stream;    /* and its stream */
    size_t cap_slots;
    uint32_t max_stream;
    uint32_t thread;          /* the thread of the events read now (the last tag's) */
    uint32_t max_thread;      /* the largest of an event */
    problems malformed, unknown_free, dup_alloc;
} loader;

/* ---- field parsing ----------------------------------------------------- */

static inline int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

/* Parse one numeric field of [*pp, e): optional blanks, digits (or 0x and
 * hex digits when hex), optional blanks, then the end or a comma (consumed).
 * Returns NULL on success, else the reason the field is bad. */
static const char *parse_field(const char **pp, const char *e, int hex, uint64_t *out) {
    const char *p = *pp;
    while (p < e && is_blank(*p))
        p++;
    if (p == e || *p == ',')
        return "empty field";
    if (*p == '-')
        return "negative number";
    if (*p == '+')
        p++;
    uint64_t v = 0;
    const char *digits = p;
    if (hex && e - p > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        p += 2;
        digits = p;
        for (; p < e; p++) {
            unsigned d;
            if (*p >= '0' && *p <= '9')
                d = (unsigned)(*p - '0');
            else if (*p >= 'a' && *p <= 'f')
                d = (unsigned)(*p - 'a' + 10);
            else if (*p >= 'A' && *p <= 'F')
                d = (unsigned)(*p - 'A' + 10);
            else
                break;
            if (v >> 60)
                return "number too large";
            v = v << 4 | d;
        }
    } else {
        for (; p < e && *p >= '0' && *p <= '9'; p++) {
            unsigned d = (unsigned)(*p - '0');
            if (v > (UINT64_MAX - d) / 10)
                return "number too large";
            v = v * 10 + d;
        }
    }
    if (p == digits)
        return "not a number";
    while (p < e && is_blank(*p))
        p++;
    if (p < e) {
        if (*p != ',')
            return "not a number";
        p++;
    }
    *pp = p;
    *out = v;
    return NULL;
}

/* ---- events ------------------------------------------------------------ */

static int push_event(loader *L, uint32_t slot, uint32_t stream, uint64_t size, uint8_t op) {
    carve_trace_event e = {slot, stream, size, op, (uint16_t)L->thread};
    if (carve_store_push(L->t->store, &e) != 0)
        return -1;
    if (L->thread > L->max_thread)
        L->max_thread = L->thread;
    L->t->n++;
    return 0;
}

static int do_alloc(loader *L, size_t line, uint64_t id, uint64_t size, uint32_t stream) {
    carve_trace *t = L->t;
    L->parsed++;
    id_entry *e = id_map_find(&L->map, id);
    if (e->val1) {
        note(&L->dup_alloc, line, NULL);
        return 0;
    }
    uint32_t slot;
    if (L->nfree_slots) {
        slot = L->free_slots[--L->nfree_slots];
    } else {
        if (t->nslots >= UINT32_MAX - 1)
            return -1;
        if (t->nslots == L->cap_slots) {
            size_t cap = L->cap_slots ? L->cap_slots * 2 : 1024;
            uint64_t *ss = realloc(L->slot_size, cap * sizeof(*ss));
            if (!ss)
                return -1;
            L->slot_size = ss;
            uint32_t *fs = realloc(L->free_slots, cap * sizeof(*fs));
            if (!fs)
                return -1;
            L->free_slots = fs;
            uint32_t *st = realloc(L->slot_stream, cap * sizeof(*st));
            if (!st)
                return -1;
            L->slot_stream = st;
            L->cap_slots = cap;
        }
        slot = (uint32_t)t->nslots++;
    }
    if (push_event(L, slot, stream, size, 'a') != 0)
        return -1;
    e->id = id;
    e->val1 = slot + 1;
    L->slot_size[slot] = size;
    L->slot_stream[slot] = stream;
    if (++L->map.count * 2 > L->map.mask + 1 && id_map_grow(&L->map) != 0)
        return -1;

    uint64_t lo = L->live_lo + size;
    L->live_hi += lo < L->live_lo;
    L->live_lo = lo;
    uint64_t live = L->live_hi ? UINT64_MAX : lo;
    if (live > t->peak_requested)
        t->peak_requested = live;
    t->total_alloc_bytes = t->total_alloc_bytes > UINT64_MAX - size ? UINT64_MAX
                                                                    : t->total_alloc_bytes + size;
    if (stream > L->max_stream)
        L->max_stream = stream;
    t->nallocs++;
    return 0;
}

static int do_free(loader *L, size_t line, uint64_t id) {
    L->parsed++;
    id_entry *e = id_map_find(&L->map, id);
    if (!e->val1) {
        note(&L->unknown_free, line, NULL);
        return 0;
    }
    uint32_t slot = e->val1 - 1;
    /* The free's stream is the allocation's: a buffer belongs to one stream. */
    if (push_event(L, slot, L->slot_stream[slot], 0, 'f') != 0)
        return -1;
    id_map_remove(&L->map, e);
    L->free_slots[L->nfree_slots++] = slot;
    uint64_t size = L->slot_size[slot];
    L->live_hi -= L->live_lo < size;
    L->live_lo -= size;
    L->t->nfrees++;
    return 0;
}

/* Parse and apply one line (without its newline). -1 only on host-memory failure. */
static int do_line(loader *L, size_t line, const char *s, const char *e) {
    while (s < e && is_blank(*s))
        s++;
    while (e > s && is_blank(e[-1]))
        e--;
    if (s == e)
        return 0;
    if (*s == '#') {
        static const char tag[] = "#thread,";
        if ((size_t)(e - s) < sizeof(tag) - 1 || memcmp(s, tag, sizeof(tag) - 1) != 0)
            return 0; /* a comment */
        s += sizeof(tag) - 1;
        uint64_t k;
        const char *why = parse_field(&s, e, 0, &k);
        if (!why && (s != e || s[-1] == ','))
            why = "too many fields";
        if (!why && k >= CARVE_TRACE_MAX_THREADS)
            why = "thread number too large";
        if (why) {
            note(&L->malformed, line, why);
            return 0;
        }
        L->thread = (uint32_t)k;
        return 0;
    }
    char op = *s++;
    if (op != 'a' && op != 'f') {
        note(&L->malformed, line, "unknown operation");
        return 0;
    }
    while (s < e && is_blank(*s))
        s++;
    if (s == e) {
        note(&L->malformed, line, "missing fields");
        return 0;
    }
    if (*s != ',') {
        note(&L->malformed, line, "unknown operation");
        return 0;
    }
    s++;
    /* An optional last field "@<ns>" is the event's time (a compatible
     * extension written by carve-run's capture): checked, then set aside. */
    const char *lc = e;
    while (lc > s && lc[-1] != ',')
        lc--;
    const char *q = lc;
    while (q < e && is_blank(*q))
        q++;
    if (lc > s && q < e && *q == '@') {
        const char *d = ++q;
        while (q < e && *q >= '0' && *q <= '9')
            q++;
        if (q == d || q != e || q - d > 20) {
            note(&L->malformed, line, "bad timestamp");
            return 0;
        }
        e = lc - 1;
        while (e > s && is_blank(e[-1]))
            e--;
    }
    uint64_t f[4] = {0, 0, 0, 0};
    int nf = 0;
    while (s < e || nf == 0) {
        if (nf == 4) {
            note(&L->malformed, line, "too many fields");
            return 0;
        }
        const char *why = parse_field(&s, e, nf == 0, &f[nf]);
        if (why) {
            note(&L->malformed, line, why);
            return 0;
        }
        nf++;
        if (s == e && e[-1] == ',') {
            note(&L->malformed, line, "empty field");
            return 0;
        }
    }
    if (nf > 3) {
        note(&L->malformed, line, "too many fields");
        return 0;
    }
    if (op == 'a') {
        if (nf < 2) {
            note(&L->malformed, line, "missing size");
            return 0;
        }
        uint64_t stream = nf == 3 ? f[2] : 0;
        if (stream >= CARVE_TRACE_MAX_STREAMS) {
            note(&L->malformed, line, "stream number too large");
            return 0;
        }
        return do_alloc(L, line, f[0], f[1], (uint32_t)stream);
    }
    /* A free may repeat the size and stream of its allocation; they are ignored. */
    return do_free(L, line, f[0]);
}

/* ---- diagnostics ------------------------------------------------------- */

static void append(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t cap, const char *fmt, ...) {
    size_t len = strlen(buf);
    if (len + 1 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, cap - len, fmt, ap);
    va_end(ap);
}

static void describe(char *buf, size_t cap, const problems *p, const char *one, const char *many) {
    if (!p->count)
        return;
    if (buf[0])
        append(buf, cap, "; ");
    append(buf, cap, "%zu %s (", p->count, p->count == 1 ? one : many);
    size_t shown = p->count < NOTED ? p->count : NOTED;
    for (size_t i = 0; i < shown; i++) {
        if (p->why[i])
            append(buf, cap, "%sline %zu: %s", i ? "; " : "", p->line[i], p->why[i]);
        else if (i)
            append(buf, cap, ", %zu", p->line[i]);
        else
            append(buf, cap, "%s %zu", shown > 1 ? "lines" : "line", p->line[i]);
    }
    append(buf, cap, "%s)", p->count > shown ? ", ..." : "");
}

static void loader_release(loader *L) {
    free(L->map.e);
    free(L->free_slots);
    free(L->slot_size);
    free(L->slot_stream);
}

static int fail(loader *L, const char *why) {
    carve_trace *t = L->t;
    loader_release(L);
    carve_store_free(t->store);
    memset(t, 0, sizeof(*t));
    t->nstreams = 1;
    t->nthreads = 1;
    snprintf(t->diag, sizeof(t->diag), "%s", why);
    return -1;
}

/* ---- the reader -------------------------------------------------------- */

int carve_trace_load(FILE *f, carve_trace *t, void (*progress)(size_t lines, void *arg), void *arg) {
    if (!t)
        return -1;
    memset(t, 0, sizeof(*t));
    t->nstreams = 1;
    t->nthreads = 1;
    if (!f) {
        snprintf(t->diag, sizeof(t->diag), "no input");
        return -1;
    }
    loader L;
    memset(&L, 0, sizeof(L));
    L.t = t;
    if (!(t->store = carve_store_new()) || id_map_init(&L.map, 1024) != 0)
        return fail(&L, "host memory exhausted");
    size_t cap = READ_CHUNK;
    char *buf = malloc(cap);
    if (!buf)
        return fail(&L, "host memory exhausted");

    size_t len = 0, pos = 0, line = 0, consumed = 0; /* bytes read before buf */
    int eof = 0, too_long = 0, out_of_memory = 0;
    for (;;) {
        /* Input that is no trace at all (binary data, /dev/zero) would be
         * read to its end, which may never come: give up at the probe size. */
        if (!L.parsed && consumed + pos >= CARVE_TRACE_PROBE_BYTES) {
            free(buf);
            char why[192];
            snprintf(why, sizeof(why), "not a trace: no allocation or free line in the first %zu MiB (%zu lines%s)",
                     CARVE_TRACE_PROBE_BYTES >> 20, line, too_long || L.malformed.count ? ", all malformed" : "");
            return fail(&L, why);
        }
        char *nl = memchr(buf + pos, '\n', len - pos);
        if (!nl) {
            if (eof) {
                if (pos < len || too_long) {
                    line++;
                    if (too_long)
                        note(&L.malformed, line, "line too long");
                    else
                        out_of_memory = do_line(&L, line, buf + pos, buf + len) != 0;
                }
                break;
            }
            memmove(buf, buf + pos, len - pos);
            consumed += pos;
            len -= pos;
            pos = 0;
            if (len == cap && cap < MAX_LINE) { /* a long line: make room */
                char *bigger = realloc(buf, cap * 2);
                if (!bigger) {
                    out_of_memory = 1;
                    break;
                }
                buf = bigger;
                cap *= 2;
            } else if (len == cap) { /* longer than any trace line: drop it */
                too_long = 1;
                consumed += len;
                len = 0;
            }
            errno = 0;
            size_t got = fread(buf + len, 1, cap - len, f);
            if (got == 0) {
                if (ferror(f)) {
                    int err = errno;
                    free(buf);
                    char why[128];
                    snprintf(why, sizeof(why), "read error after line %zu: %s", line,
                             err ? strerror(err) : "I/O error");
                    return fail(&L, why);
                }
                eof = 1;
            }
            len += got;
            continue;
        }
        line++;
        if (too_long) {
            note(&L.malformed, line, "line too long");
            too_long = 0;
        } else if (do_line(&L, line, buf + pos, nl) != 0) {
            out_of_memory = 1;
            break;
        }
        pos = (size_t)(nl - buf) + 1;
        if (progress && line % PROGRESS_EVERY == 0)
            progress(line, arg);
    }
    free(buf);
    if (out_of_memory)
        return fail(&L, "host memory exhausted");

    t->nstreams = L.max_stream + 1;
    t->nthreads = L.max_thread + 1;
    t->nbad = L.malformed.count + L.unknown_free.count + L.dup_alloc.count;
    describe(t->diag, sizeof(t->diag), &L.malformed, "malformed line", "malformed lines");
    describe(t->diag, sizeof(t->diag), &L.unknown_free, "free of an unknown id",
             "frees of unknown ids");
    describe(t->diag, sizeof(t->diag), &L.dup_alloc, "allocation of an id already live",
             "allocations of ids already live");
    loader_release(&L);
    carve_store_shrink(t->store); /* give back the doubling slack */
    return 0;
}

void carve_trace_free(carve_trace *t) {
    if (!t)
        return;
    carve_store_free(t->store);
    memset(t, 0, sizeof(*t));
}
