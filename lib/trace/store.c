/*
 * store.c — a loaded trace's events in a few bytes each, decoded in chunks.
 *
 * The one idea: an event is a run of LEB128 varints. The first holds the
 * slot, the op and two flags (the stream differs from the last event's; the
 * size is a whole number of 512-byte units and is written in them), then
 * comes the stream when it changed and the size for an allocation. Slots
 * are small (a free list hands them out lowest-recycled first) and sizes are
 * mostly aligned, so a typical event takes 2 to 5 bytes instead of the 24 of
 * a carve_trace_event: a 100-million-event trace fits in a few hundred MB.
 * Every CARVE_STORE_MARK_EVERY-th event writes its stream out and has its
 * byte offset kept, so any range decodes from the mark before it; a replay
 * decodes a chunk into a small array, untimed, then times the chunk.
 * Threads change seldom (a trace of one thread never): they are kept apart,
 * as runs of events of one thread, found by bisection when a range starts.
 */
#include "trace/store.h"

#include <stdlib.h>
#include <string.h>

#define F_FREE 1u      /* the event is a free */
#define F_STREAM 2u    /* the stream follows (it differs from the last event's, or a mark starts here) */
#define F_UNITS 4u     /* the size follows in 512-byte units */
#define HDR_BITS 3
#define UNIT_SHIFT 9
#define MAX_EVENT_BYTES 25 /* three varints: 10 + 5 + 10 */

struct carve_trace_store *carve_store_new(void) {
    struct carve_trace_store *s = calloc(1, sizeof(*s));
    if (s)
        s->stream = UINT32_MAX;
    return s;
}

static inline uint8_t *put_varint(uint8_t *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline const uint8_t *get_varint(const uint8_t *p, uint64_t *out) {
    uint64_t v = 0;
    unsigned shift = 0;
    for (;;) {
        uint8_t b = *p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            break;
        shift += 7;
    }
    *out = v;
    return p;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem, size_t first) {
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : first;
    while (c < need) {
        if (c > SIZE_MAX / 2 / elem)
            return -1;
        c *= 2;
    }
    void *q = realloc(*p, c * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

int carve_store_push(struct carve_trace_store *s, const carve_trace_event *e) {
    int mark = s->n % CARVE_STORE_MARK_EVERY == 0;
    if (grow((void **)&s->bytes, &s->cap, s->len + MAX_EVENT_BYTES, 1, (size_t)1 << 16) != 0)
        return -1;
    if (e->thread != s->thread) {
        if (grow((void **)&s->runs, &s->cap_runs, s->nruns + 1, sizeof(*s->runs), 64) != 0)
            return -1;
        s->runs[s->nruns].first = s->n;
        s->runs[s->nruns++].thread = e->thread;
        s->thread = e->thread;
    }
    if (mark && grow((void **)&s->marks, &s->cap_marks, s->nmarks + 1, sizeof(*s->marks), 64) != 0)
        return -1;
    if (mark) {
        s->marks[s->nmarks++] = s->len;
        s->stream = UINT32_MAX;
    }
    int is_free = e->op != 'a';
    uint64_t flags = is_free ? F_FREE : 0;
    if (e->stream != s->stream)
        flags |= F_STREAM;
    uint64_t size = e->size;
    if (!is_free && size && (size & ((1u << UNIT_SHIFT) - 1)) == 0) {
        flags |= F_UNITS;
        size >>= UNIT_SHIFT;
    }
    uint8_t *p = s->bytes + s->len;
    p = put_varint(p, (uint64_t)e->slot << HDR_BITS | flags);
    if (flags & F_STREAM)
        p = put_varint(p, e->stream);
    if (!is_free)
        p = put_varint(p, size);
    s->len = (size_t)(p - s->bytes);
    s->stream = e->stream;
    s->n++;
    return 0;
}

void carve_store_shrink(struct carve_trace_store *s) {
    if (s->len && s->len < s->cap) {
        uint8_t *b = realloc(s->bytes, s->len);
        if (b) {
            s->bytes = b;
            s->cap = s->len;
        }
    }
    if (s->nruns && s->nruns < s->cap_runs) {
        struct carve_thread_run *r = realloc(s->runs, s->nruns * sizeof(*r));
        if (r) {
            s->runs = r;
            s->cap_runs = s->nruns;
        }
    }
    if (s->nmarks && s->nmarks < s->cap_marks) {
        uint64_t *m = realloc(s->marks, s->nmarks * sizeof(*m));
        if (m) {
            s->marks = m;
            s->cap_marks = s->nmarks;
        }
    }
}

void carve_store_free(struct carve_trace_store *s) {
    if (!s)
        return;
    free(s->bytes);
    free(s->marks);
    free(s->runs);
    free(s);
}

size_t carve_trace_events(const carve_trace *t, size_t first, carve_trace_event *out, size_t max) {
    if (!t || !out || !t->store || first >= t->n)
        return 0;
    const struct carve_trace_store *s = t->store;
    size_t n = t->n < s->n ? t->n : s->n;
    if (first >= n)
        return 0;
    if (max > n - first)
        max = n - first;
    size_t k = first / CARVE_STORE_MARK_EVERY * CARVE_STORE_MARK_EVERY;
    const uint8_t *p = s->bytes + s->marks[first / CARVE_STORE_MARK_EVERY];
    uint32_t stream = 0;
    /* The last run that starts at or before first (lo runs do), and the next. */
    size_t lo = 0, hi = s->nruns;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->runs[mid].first <= first)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint32_t thread = lo ? s->runs[lo - 1].thread : 0;
    size_t next_run = lo;
    size_t got = 0;
    for (; got < max; k++) {
        uint64_t hdr, v;
        p = get_varint(p, &hdr);
        if (hdr & F_STREAM) {
            p = get_varint(p, &v);
            stream = (uint32_t)v;
        }
        uint64_t size = 0;
        if (!(hdr & F_FREE)) {
            p = get_varint(p, &size);
            if (hdr & F_UNITS)
                size <<= UNIT_SHIFT;
        }
        if (k < first)
            continue;
        carve_trace_event *e = &out[got++];
        e->slot = (uint32_t)(hdr >> HDR_BITS);
        e->stream = stream;
        e->size = size;
        e->op = hdr & F_FREE ? 'f' : 'a';
        if (next_run < s->nruns && s->runs[next_run].first == k)
            thread = s->runs[next_run++].thread;
        e->thread = (uint16_t)thread;
    }
    return got;
}
