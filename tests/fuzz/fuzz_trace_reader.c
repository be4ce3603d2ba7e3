/*
 * fuzz_trace_reader.c — fuzz target for the trace reader: the input is a
 * trace file, given to carve_trace_load through fmemopen.
 *
 * The one idea: two readers of one format must agree. Next to the guarantees
 * of include/carve_trace.h (load succeeds, slots and streams in range, every
 * free matches the live allocation of its slot, counts, saturating peak and
 * total, diag terminated), the input is read a second time by a small,
 * deliberately naive reader written from docs/trace-format.md (split lines,
 * split fields, a linear list of live ids), and the two must keep the same
 * events, skip the same number of lines, and map ids to slots consistently.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "carve_trace.h"
#include "fuzz_common.h"

/* ---- the reference reader ----------------------------------------------------- */

typedef struct ref_event {
    uint64_t id, size;
    uint32_t stream;
    uint8_t op;
} ref_event;

typedef struct ref_trace {
    ref_event *ev;
    size_t n, cap;
    uint64_t *live_id;   /* ids live now, in no order */
    uint64_t *live_size;
    size_t nlive, cap_live, peak_live;
    size_t malformed, unknown_free, dup_alloc;
    int too_long;        /* a line of 1 MiB or more: the reference does not judge those */
} ref_trace;

static int blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

static void *grow(void *p, size_t *cap, size_t elem) {
    size_t c = *cap ? *cap * 2 : 64;
    void *q = realloc(p, c * elem);
    FUZZ_CHECK(q != NULL, "host memory");
    *cap = c;
    return q;
}

/* One field, already cut at its commas and trimmed of blanks: an optional
 * '+', then decimal digits, or (ids only) 0x and hexadecimal digits.
 * 0 when it is no number or does not fit in 64 bits. */
static int ref_number(const char *s, size_t len, int hex_ok, uint64_t *out) {
    size_t i = 0;
    if (i < len && s[i] == '+')
        i++;
    uint64_t v = 0;
    int base = 10;
    if (hex_ok && len - i > 2 && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X')) {
        base = 16;
        i += 2;
    }
    if (i == len)
        return 0;
    for (; i < len; i++) {
        int d;
        char c = s[i];
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (base == 16 && c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (base == 16 && c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return 0;
        /* v * base + d <= UINT64_MAX, checked in 128 bits */
        __extension__ unsigned __int128 w = (unsigned __int128)v * (unsigned)base + (unsigned)d;
        if (w > UINT64_MAX)
            return 0;
        v = (uint64_t)w;
    }
    *out = v;
    return 1;
}

static ptrdiff_t ref_find_live(const ref_trace *r, uint64_t id) {
    for (size_t i = 0; i < r->nlive; i++)
        if (r->live_id[i] == id)
            return (ptrdiff_t)i;
    return -1;
}

static void ref_push(ref_trace *r, uint8_t op, uint64_t id, uint64_t size, uint32_t stream) {
    if (r->n == r->cap)
        r->ev = grow(r->ev, &r->cap, sizeof(*r->ev));
    r->ev[r->n++] = (ref_event){id, size, stream, op};
}

/* One line, without its newline. */
static void ref_line(ref_trace *r, const char *s, size_t len) {
    while (len && blank(*s))
        s++, len--;
    while (len && blank(s[len - 1]))
        len--;
    if (len == 0)
        return;
    if (s[0] == '#') {
        /* A comment, but for a "#thread,<k>" tag (docs/trace-format.md),
         * which is malformed unless its one field is a number below
         * CARVE_TRACE_MAX_THREADS (the events' threads are not compared). */
        static const char tag[] = "#thread,";
        if (len < sizeof(tag) - 1 || memcmp(s, tag, sizeof(tag) - 1) != 0)
            return;
        const char *f = s + sizeof(tag) - 1;
        size_t fl = len - (sizeof(tag) - 1);
        while (fl && blank(*f))
            f++, fl--;
        while (fl && blank(f[fl - 1]))
            fl--;
        uint64_t k;
        if (fl == 0 || memchr(f, ',', fl) || !ref_number(f, fl, 0, &k) || k >= CARVE_TRACE_MAX_THREADS)
            r->malformed++;
        return;
    }
    char op = s[0];
    size_t i = 1;
    while (i < len && blank(s[i]))
        i++;
    if ((op != 'a' && op != 'f') || i == len || s[i] != ',') {
        r->malformed++;
        return;
    }
    i++;
    /* Fields: split at every comma, each trimmed of blanks. */
    size_t fa[6], fb[6];
    int nt = 0;
    for (;;) {
        size_t j = i;
        while (j < len && s[j] != ',')
            j++;
        size_t a = i, b = j;
        while (a < b && blank(s[a]))
            a++;
        while (b > a && blank(s[b - 1]))
            b--;
        if (nt == 6) {
            r->malformed++;
            return;
        }
        fa[nt] = a, fb[nt] = b, nt++;
        if (j == len)
            break;
        i = j + 1;
    }
    /* A last field (not the first) "@<1 to 20 digits>" is a timestamp: set aside. */
    if (nt > 1 && fb[nt - 1] > fa[nt - 1] && s[fa[nt - 1]] == '@') {
        size_t a = fa[nt - 1] + 1, b = fb[nt - 1], d = a;
        while (d < b && s[d] >= '0' && s[d] <= '9')
            d++;
        if (d == a || d != b || b - a > 20) {
            r->malformed++;
            return;
        }
        nt--;
    }
    /* 1 to 3 numbers; hexadecimal only in the first. */
    uint64_t f[3];
    int nf = 0;
    for (int k = 0; k < nt; k++) {
        if (nf == 3 || fa[k] == fb[k] || !ref_number(s + fa[k], fb[k] - fa[k], k == 0, &f[nf])) {
            r->malformed++;
            return;
        }
        nf++;
    }
    if (op == 'a') {
        if (nf < 2 || (nf == 3 && f[2] >= CARVE_TRACE_MAX_STREAMS)) {
            r->malformed++;
            return;
        }
        if (ref_find_live(r, f[0]) >= 0) {
            r->dup_alloc++;
            return;
        }
        if (r->nlive == r->cap_live) {
            size_t cap = r->cap_live;
            r->live_id = grow(r->live_id, &cap, sizeof(uint64_t));
            cap = r->cap_live;
            r->live_size = grow(r->live_size, &cap, sizeof(uint64_t));
            r->cap_live = cap;
        }
        r->live_id[r->nlive] = f[0];
        r->live_size[r->nlive] = f[1];
        if (++r->nlive > r->peak_live)
            r->peak_live = r->nlive;
        ref_push(r, 'a', f[0], f[1], nf == 3 ? (uint32_t)f[2] : 0);
    } else {
        ptrdiff_t k = ref_find_live(r, f[0]);
        if (k < 0) {
            r->unknown_free++;
            return;
        }
        r->live_id[k] = r->live_id[r->nlive - 1];
        r->live_size[k] = r->live_size[r->nlive - 1];
        r->nlive--;
        ref_push(r, 'f', f[0], 0, 0);
    }
}

static void ref_read(ref_trace *r, const uint8_t *data, size_t size) {
    memset(r, 0, sizeof(*r));
    size_t start = 0;
    while (start < size) {
        const uint8_t *nl = memchr(data + start, '\n', size - start);
        size_t end = nl ? (size_t)(nl - data) : size;
        if (end - start >= ((size_t)1 << 20) - 1)
            r->too_long = 1;
        ref_line(r, (const char *)data + start, end - start);
        start = end + 1;
    }
}

static void ref_free(ref_trace *r) {
    free(r->ev);
    free(r->live_id);
    free(r->live_size);
}

/* ---- the guarantees of carve_trace.h ------------------------------------------ */

static uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

/* Every event of t, decoded (free it). */
static carve_trace_event *decode_all(const carve_trace *t) {
    carve_trace_event *ev = malloc((t->n ? t->n : 1) * sizeof(*ev));
    FUZZ_CHECK(ev != NULL, "host memory");
    size_t got = carve_trace_events(t, 0, ev, t->n);
    FUZZ_CHECK(got == t->n, "carve_trace_events decoded %zu of %zu events", got, t->n);
    return ev;
}

static void check_trace(const carve_trace *t) {
    FUZZ_CHECK(t->n == 0 || t->store != NULL, "%zu events but no event store", t->n);
    FUZZ_CHECK(t->nallocs + t->nfrees == t->n, "nallocs %zu + nfrees %zu != n %zu", t->nallocs, t->nfrees, t->n);
    FUZZ_CHECK(t->nstreams >= 1 && t->nstreams <= CARVE_TRACE_MAX_STREAMS, "nstreams %u", t->nstreams);
    FUZZ_CHECK(memchr(t->diag, '\0', sizeof(t->diag)) != NULL, "diag is not NUL-terminated");
    FUZZ_CHECK((t->nbad == 0) == (t->diag[0] == '\0'), "nbad %zu but diag '%s'", t->nbad, t->diag);

    uint8_t *live = calloc(t->nslots + 1, 1);
    uint64_t *slot_size = calloc(t->nslots + 1, sizeof(uint64_t));
    uint32_t *slot_stream = calloc(t->nslots + 1, sizeof(uint32_t));
    FUZZ_CHECK(live && slot_size && slot_stream, "host memory");
    size_t na = 0, nf = 0, nlive = 0, peak_live = 0;
    uint64_t lo = 0, hi = 0, peak = 0, total = 0; /* the live sum in 128 bits */
    uint32_t max_stream = 0;
    carve_trace_event *ev = decode_all(t);
    for (size_t i = 0; i < t->n; i++) {
        const carve_trace_event *e = &ev[i];
        FUZZ_CHECK(e->slot < t->nslots, "event %zu: slot %u >= nslots %zu", i, e->slot, t->nslots);
        FUZZ_CHECK(e->stream < t->nstreams, "event %zu: stream %u >= nstreams %u", i, e->stream, t->nstreams);
        if (e->op == 'a') {
            FUZZ_CHECK(!live[e->slot], "event %zu: allocation into slot %u, which is live", i, e->slot);
            live[e->slot] = 1;
            slot_size[e->slot] = e->size;
            slot_stream[e->slot] = e->stream;
            if (++nlive > peak_live)
                peak_live = nlive;
            uint64_t s = lo + e->size;
            hi += s < lo;
            lo = s;
            uint64_t v = hi ? UINT64_MAX : lo;
            peak = v > peak ? v : peak;
            total = sat_add(total, e->size);
            max_stream = e->stream > max_stream ? e->stream : max_stream;
            na++;
        } else {
            FUZZ_CHECK(e->op == 'f', "event %zu: op %d", i, e->op);
            FUZZ_CHECK(live[e->slot], "event %zu: free of slot %u, which is not live", i, e->slot);
            FUZZ_CHECK(e->size == 0, "event %zu: a free of size %llu", i, (unsigned long long)e->size);
            FUZZ_CHECK(e->stream == slot_stream[e->slot], "event %zu: free on stream %u, allocation on %u", i,
                       e->stream, slot_stream[e->slot]);
            live[e->slot] = 0;
            nlive--;
            hi -= lo < slot_size[e->slot];
            lo -= slot_size[e->slot];
            nf++;
        }
    }
    FUZZ_CHECK(na == t->nallocs && nf == t->nfrees, "counted %zu allocs, %zu frees; the trace says %zu, %zu", na, nf,
               t->nallocs, t->nfrees);
    FUZZ_CHECK(peak_live == t->nslots, "peak live buffers %zu, nslots %zu", peak_live, t->nslots);
    FUZZ_CHECK(peak == t->peak_requested, "peak requested %llu, the trace says %llu", (unsigned long long)peak,
               (unsigned long long)t->peak_requested);
    FUZZ_CHECK(total == t->total_alloc_bytes, "total allocated %llu, the trace says %llu", (unsigned long long)total,
               (unsigned long long)t->total_alloc_bytes);
    FUZZ_CHECK(t->nstreams == max_stream + 1, "nstreams %u, largest stream %u", t->nstreams, max_stream);
    free(ev);
    free(live);
    free(slot_size);
    free(slot_stream);
}

/* The loader and the reference keep the same events; an id keeps its slot
 * from its allocation to its free. */
static void compare(const carve_trace *t, const ref_trace *r) {
    FUZZ_CHECK(t->n == r->n, "the loader kept %zu events, the reference %zu", t->n, r->n);
    size_t bad = r->malformed + r->unknown_free + r->dup_alloc;
    FUZZ_CHECK(t->nbad == bad, "the loader skipped %zu lines, the reference %zu (%zu malformed, %zu unknown frees, "
               "%zu duplicate allocations)", t->nbad, bad, r->malformed, r->unknown_free, r->dup_alloc);
    FUZZ_CHECK(t->nslots == r->peak_live, "nslots %zu, reference peak of live ids %zu", t->nslots, r->peak_live);
    /* slot -> id of the buffer in it, checked at every free */
    uint64_t *slot_id = calloc(t->nslots + 1, sizeof(uint64_t));
    FUZZ_CHECK(slot_id != NULL, "host memory");
    carve_trace_event *ev = decode_all(t);
    for (size_t i = 0; i < t->n; i++) {
        const carve_trace_event *e = &ev[i];
        const ref_event *x = &r->ev[i];
        FUZZ_CHECK(e->op == x->op, "event %zu: op '%c', the reference '%c'", i, e->op, x->op);
        if (e->op == 'a') {
            FUZZ_CHECK(e->size == x->size && e->stream == x->stream,
                       "event %zu: allocation of %llu bytes on stream %u; the reference: %llu on %u", i,
                       (unsigned long long)e->size, e->stream, (unsigned long long)x->size, x->stream);
            slot_id[e->slot] = x->id;
        } else {
            FUZZ_CHECK(slot_id[e->slot] == x->id, "event %zu: the free of id %llu uses slot %u, which holds id %llu",
                       i, (unsigned long long)x->id, e->slot, (unsigned long long)slot_id[e->slot]);
        }
    }
    free(slot_id);
    free(ev);
    /* diag counts each kind of problem, "N malformed line(s) (...". */
    if (strlen(t->diag) < sizeof(t->diag) - 64) {
        char want[96];
        if (r->malformed) {
            snprintf(want, sizeof(want), "%zu malformed line", r->malformed);
            FUZZ_CHECK(strstr(t->diag, want) != NULL, "diag '%s' lacks '%s'", t->diag, want);
        }
        if (r->unknown_free) {
            snprintf(want, sizeof(want), "%zu free", r->unknown_free);
            FUZZ_CHECK(strstr(t->diag, want) != NULL, "diag '%s' lacks '%s'", t->diag, want);
        }
        if (r->dup_alloc) {
            snprintf(want, sizeof(want), "%zu allocation", r->dup_alloc);
            FUZZ_CHECK(strstr(t->diag, want) != NULL, "diag '%s' lacks '%s'", t->diag, want);
        }
    }
}

static size_t progress_calls;
static void on_progress(size_t lines, void *arg) {
    (void)lines;
    (void)arg;
    progress_calls++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    carve_trace t;
    memset(&t, 0x5A, sizeof(t)); /* the loader must define every field */
    /* fmemopen refuses a zero-length buffer on some C libraries: read an
     * empty trace from a one-byte buffer opened for zero bytes instead. */
    static char empty[1];
    FILE *f = size ? fmemopen((void *)data, size, "rb") : fmemopen(empty, 1, "rb");
    if (!f)
        return 0;
    if (!size)
        fgetc(f); /* leave nothing to read */
    int rc = carve_trace_load(f, &t, on_progress, NULL);
    fclose(f);
    FUZZ_CHECK(rc == 0, "carve_trace_load failed on in-memory input: %s", t.diag);
    check_trace(&t);

    ref_trace r;
    ref_read(&r, data, size);
    if (!r.too_long)
        compare(&t, &r);
    ref_free(&r);

    carve_trace_free(&t);
    FUZZ_CHECK(t.store == NULL && t.n == 0, "carve_trace_free did not zero the trace");
    return 0;
}
