/*
 * test_runs.c — virtual-memory mode's granule state, kept by blocks and runs
 * (lib/engine/vmm.c), against a reference that keeps it granule by granule
 * as the engine once did: a count of the live blocks touching each granule,
 * and a stamp from the pool's clock when the count falls to 0, given in
 * address order.
 *
 * A seeded random sequence of allocations (256 bytes to 12 MiB, so blocks
 * share granules at both ends) and frees runs on one stream of the virtual
 * backend; after each step the reference learns from the pool's blocks
 * which block became live and which one was released (the parked block is
 * released by the next free or by an allocation of another size), and then
 * the pool must agree with it: the granules it counts as touched, its
 * clock, and the stamp of every whole free granule, read from the runs of
 * the FREE blocks. Every few steps a trim is asked for, with random kept
 * ranges and a random limit on the stamps the device is done with, and the
 * granules it unmaps must be exactly the reference's longest unused among
 * those allowed, where a granule of a mapping larger than a granule
 * (engine/maps.h: untouched room comes in as one) is allowed only with all
 * of it, and goes with all of it. carve_check passes after every step. CARVE_TEST_RUNS_STEPS
 * sets the steps (default 3000).
 */
#include "engine/pool.h"
#include "engine/vmm.h"
#include "test_util.h"

#define G CARVE_SEGMENT_GRANULE
#define MiB ((size_t)1 << 20)
#define MAXG 32768 /* granules of the first reservation (64 GiB) */
#define NSLOT 48

typedef struct span_view {
    uintptr_t addr;
    size_t size;
} span_view;

static uint32_t refs[MAXG];
static uint64_t stamp[MAXG];
static uint64_t clock_;
static unsigned char mapped[MAXG];
static uintptr_t base;
static size_t whole_extra, whole_maps; /* granules trims took past want as whole larger mappings; those seen */

typedef struct live {
    uintptr_t addr;
    size_t size;
} live;

static live before[4 * NSLOT], after[4 * NSLOT];
static size_t nbefore, nafter;

static size_t gran(uintptr_t addr) { return (addr - base) / G; }

/* The pool's live blocks (USED and the parked one) and its mapped granules. */
static size_t read_pool(const carve_pool *p, live *out) {
    size_t n = 0;
    memset(mapped, 0, sizeof(mapped));
    for (const carve_block *span = p->spans; span; span = span->fnext)
        for (const carve_block *b = span->u.r.first; b; b = b->next) {
            if (b->state != CARVE_B_UNMAPPED)
                for (uintptr_t g = carve_align_down(b->addr, G); g < b->addr + b->size; g += G)
                    mapped[gran(g)] = 1;
            if (b->state == CARVE_B_USED || b->state == CARVE_B_HOT)
                out[n++] = (live){b->addr, b->size};
        }
    return n;
}

static int has(const live *v, size_t n, live x) {
    for (size_t i = 0; i < n; i++)
        if (v[i].addr == x.addr && v[i].size == x.size)
            return 1;
    return 0;
}

/* The reference follows one step: releases first (the engine releases the
 * parked block before it places a request), then the new live block. */
static void follow(const carve_pool *p) {
    nafter = read_pool(p, after);
    for (size_t i = 0; i < nbefore; i++)
        if (!has(after, nafter, before[i]))
            for (uintptr_t g = carve_align_down(before[i].addr, G); g < before[i].addr + before[i].size; g += G)
                if (--refs[gran(g)] == 0)
                    stamp[gran(g)] = ++clock_;
    for (size_t i = 0; i < nafter; i++)
        if (!has(before, nbefore, after[i]))
            for (uintptr_t g = carve_align_down(after[i].addr, G); g < after[i].addr + after[i].size; g += G)
                refs[gran(g)]++;
    memcpy(before, after, nafter * sizeof(live));
    nbefore = nafter;
}

static void agree(const carve_pool *p) {
    size_t touched = 0;
    for (size_t g = 0; g < MAXG; g++)
        touched += refs[g] != 0;
    CHECK(p->touched == touched);
    CHECK(p->vclock == clock_);
    size_t bad = 0;
    for (const carve_block *span = p->spans; span; span = span->fnext)
        for (const carve_block *b = span->u.r.first; b; b = b->next) {
            if (b->state != CARVE_B_FREE)
                continue;
            const carve_block *x = b;
            do {
                for (size_t i = 0; i < x->u.v.n; i++) {
                    size_t g = gran(x->u.v.at) + i;
                    bad += refs[g] != 0 || !mapped[g] || stamp[g] != x->u.v.stamp + i;
                }
                x = x->u.v.rnext;
            } while (x != b);
        }
    CHECK(bad == 0);
}

static int meets(uintptr_t at, const carve_keep *k) {
    return (at < k->hi[0] && at + G > k->lo[0]) || (at < k->hi[1] && at + G > k->lo[1]);
}

static int by_stamp(const void *x, const void *y) {
    uint64_t a = stamp[*(const size_t *)x], b = stamp[*(const size_t *)y];
    return a < b ? -1 : a > b;
}

/* A trim of want granules, with keep (random ranges, some empty or upside
 * down) and done: it must unmap the reference's oldest allowed granules. */
static void trim_case(carve_arena *a, carve_pool *p, test_rng *r) {
    static size_t cand[MAXG], want_un[MAXG];
    uintptr_t lo = base, hi = base;
    for (const carve_block *span = p->spans; span; span = span->fnext)
        hi = span->addr + span->size > hi ? span->addr + span->size : hi;
    carve_keep keep;
    for (int i = 0; i < 2; i++) {
        keep.lo[i] = lo + test_rng_below(r, hi - lo + 1);
        keep.hi[i] = keep.lo[i] + test_rng_below(r, 64 * MiB) - 8 * MiB;
    }
    int use_keep = (int)test_rng_below(r, 2);
    uint64_t done = clock_ - test_rng_below(r, clock_ / 4 + 1);
    static unsigned char allowed[MAXG], chosen[MAXG];
    static carve_map maps[MAXG];
    size_t n = 0;
    for (size_t g = 0; g < MAXG; g++)
        allowed[g] = mapped[g] && refs[g] == 0 && stamp[g] <= done && (!use_keep || !meets(base + g * G, &keep));
    /* The driver unmaps whole mappings: a granule of a larger mapping
     * (engine/maps.h) may go only with all of it. */
    carve_mutex_lock(&a->maps.lock);
    size_t nmaps = a->maps.n;
    if (nmaps)
        memcpy(maps, a->maps.v, nmaps * sizeof(*maps));
    carve_mutex_unlock(&a->maps.lock);
    for (size_t i = 0; i < nmaps; i++) {
        size_t g0 = (maps[i].addr - base) / G, g1 = g0 + maps[i].size / G, all = 1;
        for (size_t g = g0; g < g1; g++)
            all &= allowed[g];
        for (size_t g = g0; g < g1 && !all; g++)
            allowed[g] = 0;
    }
    for (size_t g = 0; g < MAXG; g++)
        if (allowed[g])
            cand[n++] = g;
    /* (A mapped granule no live block touches is a FREE block's whole
     * granule; one just mapped and never let go has no stamp: none here.) */
    qsort(cand, n, sizeof(*cand), by_stamp);
    size_t k = n ? test_rng_below(r, n + 1) : 0;
    /* The k oldest go, with the whole of every larger mapping they meet. */
    memset(chosen, 0, sizeof(chosen));
    for (size_t i = 0; i < k; i++)
        chosen[cand[i]] = 1;
    for (size_t i = 0; i < nmaps; i++) {
        size_t g0 = (maps[i].addr - base) / G, g1 = g0 + maps[i].size / G, any = 0;
        for (size_t g = g0; g < g1; g++)
            any |= chosen[g];
        for (size_t g = g0; g < g1 && any; g++)
            chosen[g] = 1;
    }
    size_t kk = 0;
    for (size_t g = 0; g < MAXG; g++)
        if (chosen[g])
            want_un[kk++] = g;
    carve_spin_lock(&p->lock);
    size_t got = carve_vmm_trim_pool(a, p, k * G, use_keep ? &keep : NULL, done);
    carve_spin_unlock(&p->lock);
    CHECK(got == kk * G);
    unsigned char was[MAXG];
    memcpy(was, mapped, sizeof(was));
    nafter = read_pool(p, after);
    size_t wrong = 0, unmapped = 0;
    for (size_t i = 0; i < kk; i++)
        wrong += mapped[want_un[i]] != 0;
    for (size_t g = 0; g < MAXG; g++)
        unmapped += was[g] && !mapped[g];
    CHECK(wrong == 0 && unmapped == kk);
    if (wrong || unmapped != kk)
        fprintf(stderr, "trim of %zu granules (%zu with the larger mappings they meet): %zu of those stayed, %zu "
                "unmapped\n", k, kk, wrong, unmapped);
    whole_extra += kk - k;
    whole_maps += nmaps;
}

static void sequence(uint64_t seed, unsigned steps) {
    carve_arena *a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, 0, 0, "vmm=1");
    const carve_stream s = (carve_stream)(uintptr_t)0x5000;
    test_rng r;
    test_rng_seed(&r, seed);
    memset(refs, 0, sizeof(refs));
    memset(stamp, 0, sizeof(stamp));
    clock_ = 0;
    nbefore = 0;
    base = a->heap.segs->base;
    void *slot[NSLOT] = {0};
    carve_pool *p = NULL;
    size_t trims = 0, extra_before = whole_extra;
    whole_maps = 0;
    for (unsigned step = 0; step < steps; step++) {
        unsigned i = (unsigned)test_rng_below(&r, NSLOT);
        if (slot[i]) {
            CHECK_OK(a, carve_free(a, slot[i]));
            slot[i] = NULL;
        } else {
            size_t size = test_rng_loguniform(&r, 256, 12 * MiB);
            CHECK_OK(a, carve_alloc(a, size, s, &slot[i]));
        }
        if (!p)
            for (p = a->pools; p && p->stream != s; p = p->next_all)
                ;
        CHECK(p && a->heap.nsegs == 1); /* (the reference indexes the first reservation) */
        if (!p || a->heap.nsegs != 1)
            break;
        follow(p);
        agree(p);
        if (step % 25 == 24) {
            trim_case(a, p, &r);
            trims++;
            nafter = read_pool(p, after); /* (mapped[] follows the trim) */
        }
        CHECK_ARENA(a);
    }
    /* The sequence must have met larger mappings, or the rule above was never tested. */
    CHECK(whole_maps > 0);
    printf("seed %llu: %u steps, %zu trims checked (larger mappings seen %zu times, %zu granules taken whole "
           "past want), clock %llu\n", (unsigned long long)seed, steps, trims, whole_maps, whole_extra - extra_before,
           (unsigned long long)clock_);
    for (unsigned i = 0; i < NSLOT; i++)
        if (slot[i])
            CHECK_OK(a, carve_free(a, slot[i]));
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

int main(void) {
    const char *env = getenv("CARVE_TEST_RUNS_STEPS");
    unsigned steps = env ? (unsigned)strtoul(env, NULL, 10) : 3000;
    uint64_t seed = test_seed(11);
    for (uint64_t k = 0; k < 3; k++)
        sequence(seed + k, steps);
    CHECK(whole_extra > 0); /* some trim took a larger mapping whole past what it was asked */
    return test_finish();
}
