/*
 * test_pagemap.c — the address-to-span map (lib/engine/pagemap.h) against
 * a shadow: seeded random sequences of what the heap does to it (a span
 * taken from a free range, extended into the free range after it, cut in
 * two around a free middle, given back), over 2^27 granules (256 TiB) with
 * ends at every alignment, so that spans cover whole root and middle
 * entries (tagged) as often as parts of them. After every step each piece
 * of the shadow maps exactly to its span (carve_pagemap_covers and probes
 * of carve_pagemap_get at its ends and inside), no entry names a span
 * outside its range, and every node is in the tree or on a spare list.
 * A span of 2^52 bytes costs a handful of nodes, and once every span is
 * given back no node is left in the tree. CARVE_TEST_PAGEMAP_STEPS
 * sets the steps (default 2000).
 */
#include "engine/pagemap.h"
#include "test_util.h"

#define G ((uintptr_t)CARVE_SEGMENT_GRANULE)
#define BASE ((uintptr_t)1 << 23)  /* first granule of the window (address 2^44) */
#define WIDTH ((uintptr_t)1 << 27) /* granules in the window */
#define MAXP 512

typedef struct piece {
    uintptr_t lo, hi;  /* granules */
    carve_block *span; /* NULL: free */
} piece;

static piece pcs[MAXP];
static unsigned npcs;
static carve_block spans[4096];
static unsigned nspans;

static carve_block *new_span(uintptr_t lo, uintptr_t hi) {
    CHECK(nspans < 4096);
    carve_block *s = &spans[nspans++ % 4096];
    memset(s, 0, sizeof(*s));
    s->state = CARVE_B_SPAN;
    s->addr = lo * G;
    s->size = (hi - lo) * G;
    return s;
}

static void insert_at(unsigned i, piece p) {
    memmove(&pcs[i + 1], &pcs[i], (npcs - i) * sizeof(piece));
    pcs[i] = p;
    npcs++;
}

static void remove_at(unsigned i) {
    memmove(&pcs[i], &pcs[i + 1], (npcs - i - 1) * sizeof(piece));
    npcs--;
}

/* Free neighbours merge, as the heap's free ranges do. */
static void merge_free(void) {
    for (unsigned i = 0; i + 1 < npcs;)
        if (!pcs[i].span && !pcs[i + 1].span) {
            pcs[i].hi = pcs[i + 1].hi;
            remove_at(i + 1);
        } else {
            i++;
        }
}

/* A random point in [lo, hi), aligned down to a random power of two (not below lo). */
static uintptr_t point(test_rng *r, uintptr_t lo, uintptr_t hi) {
    uintptr_t x = lo + test_rng_below(r, hi - lo);
    uintptr_t al = (uintptr_t)1 << test_rng_below(r, 26);
    uintptr_t y = x / al * al;
    return y >= lo ? y : x;
}

static int entry_ok(const carve_block *span, uintptr_t addr, size_t size, void *arg) {
    (void)arg;
    return span < spans || span >= spans + 4096 || addr < span->addr || addr + size > span->addr + span->size;
}

static void verify(carve_pagemap *pm, test_rng *r, int walk) {
    for (unsigned i = 0; i < npcs; i++) {
        piece *p = &pcs[i];
        CHECK(carve_pagemap_covers(pm, p->lo * G, (p->hi - p->lo) * G, p->span));
        uintptr_t probe[3] = {p->lo, p->hi - 1, p->lo + test_rng_below(r, p->hi - p->lo)};
        for (unsigned k = 0; k < 3; k++)
            CHECK(carve_pagemap_get(pm, probe[k] * G + test_rng_below(r, G)) == p->span);
    }
    if (!walk)
        return;
    size_t reached[2], spares[2];
    CHECK(carve_pagemap_walk(pm, entry_ok, NULL, reached, spares) == 0);
    for (unsigned l = 0; l < 2; l++)
        CHECK(reached[l] + spares[l] == pm->nodes[l]);
}

static void sequence(uint64_t seed, unsigned steps) {
    static carve_pagemap pm;
    test_rng r;
    test_rng_seed(&r, seed);
    carve_pagemap_init(&pm);
    npcs = 0;
    nspans = 0;
    insert_at(0, (piece){BASE, BASE + WIDTH, NULL});
    size_t most_nodes = 0;
    for (unsigned step = 0; step < steps; step++) {
        unsigned i = (unsigned)test_rng_below(&r, npcs), op = (unsigned)test_rng_below(&r, 4);
        if (npcs > 64 && test_rng_below(&r, 2)) { /* many pieces: give back more often */
            while (!pcs[i].span)
                i = (i + 1) % npcs;
            op = 0;
        }
        piece *p = &pcs[i];
        if (!p->span && npcs + 2 < MAXP) { /* take a span from a free range */
            uintptr_t a = point(&r, p->lo, p->hi);
            uintptr_t n = test_rng_loguniform(&r, 1, p->hi - a);
            uintptr_t b = a + n;
            if (test_rng_below(&r, 2)) { /* an end on a power of two */
                uintptr_t al = (uintptr_t)1 << test_rng_below(&r, 26);
                uintptr_t c = (b + al - 1) / al * al;
                if (c <= p->hi)
                    b = c;
            }
            CHECK(carve_pagemap_prepare(&pm, a * G, (b - a) * G) == 0);
            carve_block *s = new_span(a, b);
            carve_pagemap_set(&pm, a * G, (b - a) * G, s, 0);
            piece q = *p;
            remove_at(i);
            if (b < q.hi)
                insert_at(i, (piece){b, q.hi, NULL});
            insert_at(i, (piece){a, b, s});
            if (q.lo < a)
                insert_at(i, (piece){q.lo, a, NULL});
        } else if (p->span && op == 0) { /* given back */
            carve_pagemap_set(&pm, p->lo * G, (p->hi - p->lo) * G, NULL, 0);
            p->span = NULL;
            merge_free();
        } else if (p->span && op == 1 && i + 1 < npcs && !pcs[i + 1].span) { /* extended */
            piece *f = &pcs[i + 1];
            uintptr_t take = test_rng_loguniform(&r, 1, f->hi - f->lo);
            CHECK(carve_pagemap_prepare(&pm, f->lo * G, take * G) == 0);
            carve_pagemap_set(&pm, f->lo * G, take * G, p->span, 0);
            p->span->size += take * G;
            p->hi += take;
            f->lo += take;
            if (f->lo == f->hi)
                remove_at(i + 1);
        } else if (p->span && op >= 2 && p->hi - p->lo >= 2 && npcs + 2 < MAXP) { /* cut */
            uintptr_t lo = point(&r, p->lo, p->hi - 1), hi = lo + test_rng_loguniform(&r, 1, p->hi - lo);
            if (lo == p->lo && hi == p->hi)
                hi--;
            uintptr_t end = p->hi;
            CHECK(carve_pagemap_prepare(&pm, lo * G, (hi - lo) * G) == 0);
            CHECK(carve_pagemap_prepare(&pm, hi * G, (end - hi) * G) == 0);
            carve_block *s = p->span, *right = NULL;
            if (lo > p->lo && hi < end) {
                right = new_span(hi, end);
                carve_pagemap_set(&pm, hi * G, (end - hi) * G, right, 1);
            }
            carve_pagemap_set(&pm, lo * G, (hi - lo) * G, NULL, 0);
            piece q = *p;
            remove_at(i);
            if (hi < end)
                insert_at(i, (piece){hi, end, right ? right : s});
            insert_at(i, (piece){lo, hi, NULL});
            if (q.lo < lo)
                insert_at(i, (piece){q.lo, lo, s});
            s->addr = (q.lo < lo ? q.lo : hi) * G;
            s->size = ((q.lo < lo ? lo : end) - s->addr / G) * G;
            merge_free();
        }
        verify(&pm, &r, step % 16 == 0 || step + 1 == steps);
        size_t nodes = pm.nodes[0] + pm.nodes[1];
        most_nodes = nodes > most_nodes ? nodes : most_nodes;
    }
    printf("seed %llu: %u steps, %u pieces at the end, at most %zu nodes (%zu KiB)\n", (unsigned long long)seed,
           steps, npcs, most_nodes, most_nodes * sizeof(carve_pm_node) >> 10);
    /* Every span given back: no node is left in the tree. */
    for (unsigned i = 0; i < npcs; i++)
        if (pcs[i].span) {
            carve_pagemap_set(&pm, pcs[i].lo * G, (pcs[i].hi - pcs[i].lo) * G, NULL, 0);
            pcs[i].span = NULL;
        }
    merge_free();
    verify(&pm, &r, 1);
    size_t reached[2], spares[2];
    carve_pagemap_walk(&pm, entry_ok, NULL, reached, spares);
    CHECK(npcs == 1 && reached[0] == 0 && reached[1] == 0);
    carve_pagemap_destroy(&pm);
}

/* One span of 2^52 bytes, then cut at odd places: a few nodes, not 2^31 entries. */
static void huge_span(void) {
    static carve_pagemap pm;
    carve_pagemap_init(&pm);
    uintptr_t a = (uintptr_t)1 << 44, n = (uintptr_t)1 << 52;
    npcs = 0;
    nspans = 0;
    CHECK(carve_pagemap_prepare(&pm, a + G, n) == 0);
    carve_block *s = new_span((a + G) / G, (a + G + n) / G);
    carve_pagemap_set(&pm, a + G, n, s, 0);
    CHECK(pm.nodes[0] + pm.nodes[1] <= 4);
    CHECK(carve_pagemap_get(&pm, a) == NULL && carve_pagemap_get(&pm, a + G) == s &&
          carve_pagemap_get(&pm, a + n) == s && carve_pagemap_get(&pm, a + n + G) == NULL &&
          carve_pagemap_get(&pm, a + n / 3) == s);
    CHECK(carve_pagemap_covers(&pm, a + G, n, s) && carve_pagemap_covers(&pm, a, G, NULL));
    /* Beyond the map: nothing, and no node for it. */
    CHECK(carve_pagemap_prepare(&pm, CARVE_PM_MAX_ADDR - G, 2 * G) == -1);
    CHECK(carve_pagemap_get(&pm, CARVE_PM_MAX_ADDR) == NULL && carve_pagemap_get(&pm, UINTPTR_MAX) == NULL);
    carve_pagemap_set(&pm, a + G, n, NULL, 0);
    CHECK(carve_pagemap_get(&pm, a + n / 3) == NULL && carve_pagemap_get(&pm, a + G) == NULL);
    carve_pagemap_destroy(&pm);
}

int main(void) {
    const char *env = getenv("CARVE_TEST_PAGEMAP_STEPS");
    unsigned steps = env ? (unsigned)strtoul(env, NULL, 10) : 2000;
    uint64_t seed = test_seed(1);
    huge_span();
    for (uint64_t k = 0; k < 4; k++)
        sequence(seed + k, steps);
    return test_finish();
}
