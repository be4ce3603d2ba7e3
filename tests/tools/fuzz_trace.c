/*
 * fuzz_trace.c — the trace loader on random input: bytes from a biased
 * alphabet, and near-valid traces with random mutations. Whatever comes in,
 * the load must succeed and hand back a clean trace (every free matches the
 * live allocation of its slot, slots dense, counts and peak consistent).
 *
 * Deterministic: the seed is the first argument (default 1), the number of
 * inputs the second (default 4000).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "carve_trace.h"

static uint64_t state;
static uint64_t rnd(void) {
    /* splitmix64 */
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static unsigned long failures;

static void fail(const char *what, uint64_t seed, size_t iter) {
    failures++;
    fprintf(stderr, "fuzz_trace: %s (seed %llu, input %zu)\n", what, (unsigned long long)seed,
            iter);
}

static int validate(const carve_trace *t, size_t nlines) {
    uint8_t *live = calloc(t->nslots + 1, 1);
    uint64_t *size = calloc(t->nslots + 1, sizeof(uint64_t));
    if (!live || !size) {
        free(live);
        free(size);
        return 0;
    }
    size_t nlive = 0, peak_live = 0, na = 0, nf = 0;
    uint64_t lo = 0, hi = 0, peak = 0; /* 128-bit live sum */
    int ok = 1;
    for (size_t i = 0; ok && i < t->n; i++) {
        const carve_trace_event *e = &t->ev[i];
        if (e->slot >= t->nslots || e->stream >= t->nstreams || e->stream >= CARVE_TRACE_MAX_STREAMS) {
            ok = 0;
        } else if (e->op == 'a') {
            ok = !live[e->slot];
            live[e->slot] = 1;
            size[e->slot] = e->size;
            if (++nlive > peak_live)
                peak_live = nlive;
            uint64_t s = lo + e->size;
            hi += s < lo;
            lo = s;
            uint64_t v = hi ? UINT64_MAX : lo;
            if (v > peak)
                peak = v;
            na++;
        } else if (e->op == 'f') {
            ok = live[e->slot] && e->size == 0;
            live[e->slot] = 0;
            nlive--;
            hi -= lo < size[e->slot];
            lo -= size[e->slot];
            nf++;
        } else {
            ok = 0;
        }
    }
    ok = ok && na == t->nallocs && nf == t->nfrees && peak_live == t->nslots &&
         peak == t->peak_requested && t->n + t->nbad <= nlines && t->nstreams >= 1 &&
         memchr(t->diag, '\0', sizeof(t->diag)) != NULL && (t->nbad == 0) == (t->diag[0] == '\0');
    free(live);
    free(size);
    return ok;
}

/* Random bytes, mostly from the trace alphabet. */
static size_t gen_bytes(char *buf, size_t cap) {
    static const char alphabet[] = "af,,,0123456789\n\n\n#\r -x \t";
    size_t n = (size_t)(rnd() % cap);
    for (size_t i = 0; i < n; i++)
        buf[i] = rnd() % 8 ? alphabet[rnd() % (sizeof(alphabet) - 1)] : (char)(rnd() & 0xff);
    return n;
}

/* Mostly valid lines over a small id pool (so frees often match), then a
 * few random byte mutations. */
static size_t gen_trace(char *buf, size_t cap) {
    size_t len = 0;
    size_t lines = (size_t)(rnd() % 300);
    for (size_t i = 0; i < lines && len + 128 < cap; i++) {
        unsigned long long id = rnd() % 16;
        switch (rnd() % 8) {
        case 0: case 1: case 2:
            len += (size_t)snprintf(buf + len, cap - len, "a,%llu,%llu\n", id,
                                    (unsigned long long)(rnd() % ((uint64_t)1 << (rnd() % 64))));
            break;
        case 3:
            len += (size_t)snprintf(buf + len, cap - len, "a,%llu,%llu,%llu\r\n", id,
                                    (unsigned long long)(rnd() % 100000),
                                    (unsigned long long)(rnd() % 1100));
            break;
        case 4: case 5:
            len += (size_t)snprintf(buf + len, cap - len, "f,%llu\n", id);
            break;
        case 6:
            len += (size_t)snprintf(buf + len, cap - len, "a,%llu,%llu%s", (unsigned long long)rnd(),
                                    (unsigned long long)rnd(), rnd() % 2 ? "\n" : "  \n");
            break;
        default:
            len += (size_t)snprintf(buf + len, cap - len, "# %llu\n\n", id);
            break;
        }
    }
    size_t muts = len ? (size_t)(rnd() % 6) : 0;
    for (size_t i = 0; i < muts && len; i++) {
        size_t at = (size_t)(rnd() % len);
        switch (rnd() % 3) {
        case 0: buf[at] = (char)(rnd() & 0xff); break;
        case 1: buf[at] = "-,\n9x"[rnd() % 5]; break;
        default: /* cut the tail */
            len = at;
            break;
        }
    }
    return len;
}

static size_t count_lines(const char *buf, size_t len) {
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += buf[i] == '\n';
    return n + 1;
}

int main(int argc, char **argv) {
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 10) : 1;
    size_t iters = argc > 2 ? strtoull(argv[2], NULL, 10) : 4000;
    state = seed;
    size_t cap = 64 * 1024;
    char *buf = malloc(cap);
    size_t total_events = 0, total_bad = 0;
    for (size_t it = 0; it < iters; it++) {
        size_t len = it % 2 ? gen_bytes(buf, 4096) : gen_trace(buf, cap);
        carve_trace t;
        int rc;
        if (len == 0) {
            FILE *f = tmpfile();
            rc = carve_trace_load(f, &t, NULL, NULL);
            fclose(f);
        } else {
            FILE *f = fmemopen(buf, len, "rb");
            rc = carve_trace_load(f, &t, NULL, NULL);
            fclose(f);
        }
        if (rc != 0)
            fail("load failed", seed, it);
        else if (!validate(&t, count_lines(buf, len)))
            fail("trace not clean", seed, it);
        total_events += t.n;
        total_bad += t.nbad;
        carve_trace_free(&t);
    }
    free(buf);
    printf("%zu inputs, %zu events kept, %zu lines skipped, %lu failures\n", iters, total_events,
           total_bad, failures);
    return failures ? 1 : 0;
}
