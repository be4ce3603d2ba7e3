/*
 * test_room.c — a request succeeds whenever it can be met, whatever came
 * before it.
 *
 * In the default (virtual-memory) mode that is whenever the granules live
 * buffers touch (with the whole of every mapping larger than a granule
 * they touch: the driver unmaps whole mappings only) plus the granules the
 * request needs fit under the limit: address space is never what runs out. In segments mode it is whenever a
 * free range of whole granules holds the request (or one of the stream's own
 * free blocks does), once the out-of-memory path has synchronized the device
 * and every stream has given back what it caches, the free room inside its
 * spans last. Regression sequences for the ways this failed (a region that
 * pinned address space with nothing mapped in it; another stream's span
 * that pinned free memory; an index search that gave up while a fitting
 * block existed; a free block of the other size class passed over), then
 * randomized histories at the limit with up to eight streams, checked
 * against a shadow of the live buffers, and threads at the limit (nothing
 * promised there, nothing may break). CARVE_TEST_SEED picks the seed,
 * CARVE_TEST_STEPS the operations per history.
 */
#include <pthread.h>

#include "engine/reclaim.h"
#include "engine/types.h"
#include "test_util.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define G (2 * MiB)

static carve_stream stream_n(unsigned i) { return (carve_stream)(uintptr_t)(0x1000 * (i + 1)); }

/* Limit 64 MiB, the default mode: S1's 60 MiB buffer and then its 1 MiB one
 * grow one region; with the 60 MiB freed and the cache emptied, the 1 MiB
 * buffer pins that whole region although nothing around it is mapped. S2's
 * 60 MiB then failed with "the arena's address space of 128.00 MiB has no
 * free range of 60.00 MiB" while only one granule was in use; now more
 * address space is reserved for it. */
static void test_pinned_address_space(void) {
    carve_arena *a = test_arena(CARVE_BACKEND_VIRTUAL, 1, 0, 64 * MiB);
    carve_config c;
    CHECK_OK(a, carve_arena_get_config(a, &c));
    CHECK(c.vmm == 1);
    carve_stream s1 = stream_n(0), s2 = stream_n(1);
    void *big, *small, *other;
    CHECK_OK(a, carve_alloc(a, 60 * MiB, s1, &big));
    CHECK_OK(a, carve_alloc(a, 1 * MiB, s1, &small));
    CHECK_OK(a, carve_free(a, big));
    CHECK_OK(a, carve_empty_cache(a));
    carve_stats s;
    carve_get_stats(a, &s);
    CHECK(s.reserved_bytes == 2 * MiB && s.allocated_bytes == 1 * MiB);
    CHECK_OK(a, carve_alloc(a, 60 * MiB, s2, &other));
    carve_get_stats(a, &s);
    CHECK(s.reserved_bytes == 62 * MiB && s.num_segments == 2);
    CHECK_ARENA(a);
    CHECK_OK(a, carve_free(a, other));
    CHECK_OK(a, carve_free(a, small));
    CHECK_OK(a, carve_empty_cache(a));
    carve_get_stats(a, &s);
    CHECK(s.reserved_bytes == 0 && s.num_segments == 0);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* The region pinned at both ends: 1 MiB buffers below and above a freed
 * 60 MiB one on S1. S2's 60 MiB request needs address space beyond the
 * first reservation; S1 then asks for 1 MiB more, which fits beside one of
 * the small ones (a granule more would pass the limit). The GPU suite runs
 * the same sequence (gpu_vmm). */
static void test_pinned_both_ends(void) {
    carve_arena *a = test_arena(CARVE_BACKEND_VIRTUAL, 1, 0, 64 * MiB);
    carve_stream s1 = stream_n(0), s2 = stream_n(1);
    void *lo, *big, *hi, *other, *more;
    CHECK_OK(a, carve_alloc(a, 1 * MiB, s1, &lo));
    CHECK_OK(a, carve_alloc(a, 60 * MiB, s1, &big));
    CHECK_OK(a, carve_alloc(a, 1 * MiB, s1, &hi));
    CHECK_OK(a, carve_free(a, big));
    CHECK_OK(a, carve_alloc(a, 60 * MiB, s2, &other));
    carve_stats s;
    carve_get_stats(a, &s);
    CHECK(s.reserved_bytes == 64 * MiB && s.num_segments == 2);
    CHECK_OK(a, carve_alloc(a, 1 * MiB, s1, &more));
    CHECK(carve_memory_reserved(a) == 64 * MiB);
    CHECK_ARENA(a);
    CHECK_OK(a, carve_free(a, other));
    CHECK_OK(a, carve_free(a, more));
    CHECK_OK(a, carve_free(a, lo));
    CHECK_OK(a, carve_free(a, hi));
    CHECK_OK(a, carve_empty_cache(a));
    carve_get_stats(a, &s);
    CHECK(s.reserved_bytes == 0 && s.num_segments == 0);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* The out-of-memory path's last retry, called directly (the default mode
 * reaches it only when the driver refuses more address space): with every
 * pool's room given back, S1's region keeps only the granules its live
 * buffers touch, cut in two around the 58 MiB between them and cut short
 * after the second, and S2's 60 MiB fits in the address space reserved at
 * first. */
static void test_room_reclaim(void) {
    carve_arena *a = test_arena(CARVE_BACKEND_VIRTUAL, 1, 0, 64 * MiB);
    carve_stream s1 = stream_n(0), s2 = stream_n(1);
    void *lo, *big, *hi, *other;
    CHECK_OK(a, carve_alloc(a, 1 * MiB, s1, &lo));
    CHECK_OK(a, carve_alloc(a, 60 * MiB, s1, &big));
    CHECK_OK(a, carve_alloc(a, 1 * MiB, s1, &hi));
    CHECK_OK(a, carve_free(a, big));
    CHECK_OK(a, carve_reclaim(a, CARVE_RECLAIM_WAIT | CARVE_RECLAIM_ROOM, NULL));
    CHECK_ARENA(a);
    CHECK_OK(a, carve_alloc(a, 60 * MiB, s2, &other));
    carve_stats s;
    carve_get_stats(a, &s);
    CHECK(s.reserved_bytes == 64 * MiB && s.num_segments == 1);
    CHECK((char *)other > (char *)hi); /* in the room after S1's region, which the cut freed */
    CHECK_ARENA(a);
    void *more; /* S1 takes room again: its region grows anew */
    CHECK_OK(a, carve_free(a, other));
    CHECK_OK(a, carve_alloc(a, 40 * MiB, s1, &more));
    CHECK_ARENA(a);
    CHECK_OK(a, carve_free(a, more));
    CHECK_OK(a, carve_free(a, lo));
    CHECK_OK(a, carve_free(a, hi));
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* The default mode: before reserving more address space, a stream gives
 * back what its own region holds with nothing mapped. S0's 30 MiB region
 * comes first, S1's (20 MiB, then 1 MiB more, which grows it by 20) next,
 * S2's fills the rest of the 128 MiB; S0, S1 and S2 free their large
 * buffers and the cache is emptied, so S0's region goes back whole and S1's
 * first 20 MiB hold nothing mapped. S1's 45 MiB request fits neither its own
 * room nor the 30 MiB before it, but both together: the address space
 * reserved at first is enough. */
static void test_own_room(void) {
    carve_arena *a = test_arena(CARVE_BACKEND_VIRTUAL, 1, 0, 64 * MiB);
    carve_stream s0 = stream_n(0), s1 = stream_n(1), s2 = stream_n(2);
    void *x0, *x1, *y1, *x2, *y2, *z;
    CHECK_OK(a, carve_alloc(a, 30 * MiB, s0, &x0));
    CHECK_OK(a, carve_alloc(a, 20 * MiB, s1, &x1));
    CHECK_OK(a, carve_alloc(a, 1 * MiB, s1, &y1));
    CHECK_OK(a, carve_alloc(a, 10 * MiB, s2, &x2));
    CHECK_OK(a, carve_alloc(a, 1 * MiB, s2, &y2));
    CHECK((char *)x0 < (char *)x1 && (char *)x1 < (char *)x2); /* the layout the test is about */
    CHECK_OK(a, carve_free(a, x0));
    CHECK_OK(a, carve_free(a, x1));
    CHECK_OK(a, carve_free(a, x2));
    CHECK_OK(a, carve_empty_cache(a));
    carve_stats s;
    carve_get_stats(a, &s);
    CHECK(s.num_segments == 1);
    CHECK_OK(a, carve_alloc(a, 45 * MiB, s1, &z));
    carve_get_stats(a, &s);
    CHECK(s.num_segments == 1 && s.reserved_bytes <= 64 * MiB);
    CHECK((char *)z < (char *)y1);
    CHECK_ARENA(a);
    CHECK_OK(a, carve_free(a, z));
    CHECK_OK(a, carve_free(a, y1));
    CHECK_OK(a, carve_free(a, y2));
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* One 2 MiB segment, growth off: a 16640-byte buffer, then nine of 16384
 * bytes, each after a 256-byte spacer, the rest filled; the 16640 is freed first,
 * then the nine. All ten free blocks share a size class, and the 16640 one
 * is tenth in its list: a search that looked at the first eight only
 * answered CARVE_ERR_OOM, "largest free block 16.25 KiB". */
static void exact_fit_case(const char *conf) {
    carve_arena *a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 0, G, 0, conf);
    enum { NINE = 9, MAXFILL = 256 };
    void *first, *nine[NINE], *spacer[NINE], *fill[MAXFILL];
    CHECK_OK(a, carve_alloc(a, 16640, NULL, &first));
    for (int i = 0; i < NINE; i++) { /* each after a spacer, so no two merge */
        CHECK_OK(a, carve_alloc(a, 256, NULL, &spacer[i]));
        CHECK_OK(a, carve_alloc(a, 16384, NULL, &nine[i]));
    }
    int nfill = 0;
    size_t step = 64 * KiB;
    while (nfill < MAXFILL && step >= 256) { /* fill the rest, down to the last 256 bytes */
        if (carve_alloc(a, step, NULL, &fill[nfill]) == CARVE_OK)
            nfill++;
        else
            step /= 2;
    }
    void *x;
    CHECK_ST(a, carve_alloc(a, 256, NULL, &x), CARVE_ERR_OOM); /* full */
    CHECK_OK(a, carve_free(a, first));
    for (int i = 0; i < NINE; i++)
        CHECK_OK(a, carve_free(a, nine[i]));
    carve_stats s;
    carve_get_stats(a, &s);
    CHECK(s.reserved_bytes == G);
    void *again;
    CHECK_OK(a, carve_alloc(a, 16640, NULL, &again));
    CHECK(again == first);
    CHECK_ARENA(a);
    CHECK_OK(a, carve_free(a, again));
    for (int i = 0; i < NINE; i++)
        CHECK_OK(a, carve_free(a, spacer[i]));
    for (int i = 0; i < nfill; i++)
        CHECK_OK(a, carve_free(a, fill[i]));
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* With growth on, the same miss made the arena reserve (or map) more memory
 * instead: the first granule is filled exactly, and the free 16640-byte
 * block must be taken with nothing grown. */
static void exact_fit_growth(size_t initial, const char *conf) {
    carve_arena *a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, initial, 0, conf);
    enum { NINE = 9 };
    void *first, *nine[NINE], *spacer[NINE], *fill[2];
    CHECK_OK(a, carve_alloc(a, 16640, NULL, &first));
    for (int i = 0; i < NINE; i++) {
        CHECK_OK(a, carve_alloc(a, 256, NULL, &spacer[i]));
        CHECK_OK(a, carve_alloc(a, 16384, NULL, &nine[i]));
    }
    size_t rest = G - 16640 - NINE * (256 + 16384);
    CHECK_OK(a, carve_alloc(a, 1 * MiB, NULL, &fill[0])); /* small requests both (segments mode) */
    CHECK_OK(a, carve_alloc(a, rest - 1 * MiB, NULL, &fill[1]));
    CHECK(carve_memory_reserved(a) == G);
    CHECK_OK(a, carve_free(a, first));
    for (int i = 0; i < NINE; i++)
        CHECK_OK(a, carve_free(a, nine[i]));
    carve_stats s;
    carve_get_stats(a, &s);
    uint64_t reserves = s.num_backend_allocs;
    void *again;
    CHECK_OK(a, carve_alloc(a, 16640, NULL, &again));
    CHECK(again == first);
    carve_get_stats(a, &s);
    CHECK(s.num_backend_allocs == reserves && s.reserved_bytes == G);
    CHECK_ARENA(a);
    CHECK_OK(a, carve_free(a, again));
    for (int i = 0; i < NINE; i++)
        CHECK_OK(a, carve_free(a, spacer[i]));
    CHECK_OK(a, carve_free(a, fill[0]));
    CHECK_OK(a, carve_free(a, fill[1]));
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

static void test_exact_fit(void) {
    exact_fit_case("vmm=0");
    exact_fit_case("vmm=1");
    exact_fit_growth(G, "vmm=0");
    exact_fit_growth(0, "vmm=1");
}

/* Segments mode, one 64 MiB block, growth off: S1's 30 MiB buffer, then a
 * 5 MiB one that grows S1's span by 20 MiB; the 30 MiB one freed. S2's
 * 20 MiB request fits in the room S1's span holds (30 MiB of whole free
 * granules), which the out-of-memory path gives back once the device is
 * synchronized; before, only empty spans went back, and S2 got
 * CARVE_ERR_OOM with 58 MiB free. */
static void test_segments_room(void) {
    carve_arena *a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 0, 64 * MiB, 0, "vmm=0");
    carve_stream s1 = stream_n(0), s2 = stream_n(1), s3 = stream_n(2);
    void *big, *mid, *other, *third;
    CHECK_OK(a, carve_alloc(a, 30 * MiB, s1, &big));
    CHECK_OK(a, carve_alloc(a, 5 * MiB, s1, &mid));
    CHECK_OK(a, carve_free(a, big));
    CHECK_OK(a, carve_alloc(a, 20 * MiB, s2, &other));
    CHECK((char *)other + 20 * MiB <= (char *)mid || (char *)other >= (char *)mid + 5 * MiB);
    CHECK_ARENA(a);
    /* what is left: 10 MiB below mid's granules, 24 above (the rest of S1's
     * span and the block's free tail, merged) */
    CHECK_OK(a, carve_alloc(a, 24 * MiB, s3, &third));
    CHECK_ST(a, carve_alloc(a, 12 * MiB, s3, &big), CARVE_ERR_OOM);
    CHECK_ARENA(a);
    CHECK_OK(a, carve_free(a, third));
    CHECK_OK(a, carve_free(a, other));
    CHECK_OK(a, carve_free(a, mid));
    CHECK_OK(a, carve_alloc(a, 64 * MiB, s3, &big)); /* all of it again, for any stream */
    CHECK_OK(a, carve_free(a, big));
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* Segments mode, one 2 MiB block: a 256-byte buffer makes it a span for
 * small requests; a 1.5 MiB request (a large one) then fits in that span's
 * free block, and takes it rather than fail for want of a span of its own
 * class. */
static void test_other_class(void) {
    carve_arena *a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 0, G, 0, "vmm=0");
    void *small, *large;
    CHECK_OK(a, carve_alloc(a, 256, NULL, &small));
    CHECK_OK(a, carve_alloc(a, 3 * MiB / 2, NULL, &large));
    CHECK_ARENA(a);
    CHECK_OK(a, carve_free(a, large));
    CHECK_OK(a, carve_free(a, small));
    CHECK_OK(a, carve_alloc(a, 2 * MiB, NULL, &large)); /* all of it, once both are gone */
    CHECK_OK(a, carve_free(a, large));
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* ---- randomized histories at the limit ---------------------------------- */

typedef struct live {
    uintptr_t addr;
    size_t size;
} live;

typedef struct history {
    carve_arena *a;
    int vmm;
    size_t limit;       /* mapped bytes (default mode) or the one block (segments mode) */
    uintptr_t base;     /* segments mode: the block's address */
    live *bufs;
    size_t n, cap;
    uint64_t seed;
    unsigned long allocs, promised, refused;
} history;

static size_t granules(uintptr_t addr, size_t size) { return (addr + size - 1) / G - addr / G + 1; }

/* Mark the granules live buffers touch; the count of them. */
static size_t touched(const history *h, unsigned char *mark, size_t nmark, uintptr_t base) {
    memset(mark, 0, nmark);
    size_t t = 0;
    for (size_t i = 0; i < h->n; i++)
        for (uintptr_t g = h->bufs[i].addr / G; g <= (h->bufs[i].addr + h->bufs[i].size - 1) / G; g++) {
            size_t k = (size_t)(g - base / G);
            if (k < nmark && !mark[k]) {
                mark[k] = 1;
                t++;
            }
        }
    return t;
}

/* The granules of every mapping larger than a granule (engine/maps.h)
 * that a marked granule lies in, marked too; the count of those newly
 * marked. The driver unmaps whole mappings only: a live buffer keeps all
 * of its mapping mapped. */
static size_t pinned(const history *h, unsigned char *mark, size_t nmark, uintptr_t base) {
    carve_maps *m = &h->a->maps;
    size_t t = 0;
    carve_mutex_lock(&m->lock);
    for (size_t i = 0; i < m->n; i++) {
        uintptr_t g0 = m->v[i].addr / G, g1 = (m->v[i].addr + m->v[i].size) / G;
        int held = 0;
        for (uintptr_t g = g0; g < g1 && !held; g++)
            held = g >= base / G && g - base / G < nmark && mark[g - base / G];
        for (uintptr_t g = g0; g < g1 && held; g++)
            if (g >= base / G && g - base / G < nmark && !mark[g - base / G]) {
                mark[g - base / G] = 1;
                t++;
            }
    }
    carve_mutex_unlock(&m->lock);
    return t;
}

/* Whether the request of size bytes must succeed. Default mode: the
 * granules live buffers touch, with the whole of every larger mapping they
 * touch, and the granules it needs fit under the limit (addresses: any;
 * the arena reserves address space as it needs).
 * Segments mode: a run of free whole granules of the block holds it. */
static int must_fit(const history *h, size_t size) {
    size_t rs = (size + 255) / 256 * 256, need = (rs + G - 1) / G, nmark;
    static unsigned char mark[1 << 16];
    if (h->vmm) {
        /* granule numbers relative to the lowest live buffer: the span of
         * addresses live buffers cover is what the marks must hold */
        uintptr_t lo = UINTPTR_MAX, hi = 0;
        for (size_t i = 0; i < h->n; i++) {
            lo = h->bufs[i].addr < lo ? h->bufs[i].addr : lo;
            hi = h->bufs[i].addr + h->bufs[i].size > hi ? h->bufs[i].addr + h->bufs[i].size : hi;
        }
        size_t t = 0;
        if (h->n) {
            nmark = (size_t)((hi - 1) / G - lo / G + 1);
            if (nmark > sizeof(mark)) { /* too spread out to mark: count per buffer (an upper bound) */
                for (size_t i = 0; i < h->n; i++)
                    t += granules(h->bufs[i].addr, h->bufs[i].size);
                carve_mutex_lock(&h->a->maps.lock); /* and every larger mapping whole */
                for (size_t i = 0; i < h->a->maps.n; i++)
                    t += h->a->maps.v[i].size / G;
                carve_mutex_unlock(&h->a->maps.lock);
            } else {
                t = touched(h, mark, nmark, lo / G * G) + pinned(h, mark, nmark, lo / G * G);
            }
        }
        return t + need <= h->limit / G;
    }
    nmark = h->limit / G;
    touched(h, mark, nmark, h->base);
    size_t run = 0;
    for (size_t k = 0; k < nmark; k++) {
        run = mark[k] ? 0 : run + 1;
        if (run >= need)
            return 1;
    }
    return 0;
}
static void shadow_add(history *h, void *p, size_t size) {
    uintptr_t x = (uintptr_t)p;
    for (size_t i = 0; i < h->n; i++) /* no overlap with anything live */
        if (x < h->bufs[i].addr + h->bufs[i].size && h->bufs[i].addr < x + size) {
            fprintf(stderr, "history seed %llu: %p (%zu bytes) overlaps a live buffer\n",
                    (unsigned long long)h->seed, p, size);
            CHECK(0);
            return;
        }
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 256;
        h->bufs = realloc(h->bufs, h->cap * sizeof(*h->bufs));
    }
    h->bufs[h->n++] = (live){x, size};
}

/* A request size: mostly log-uniform up to a quarter of the limit, some
 * near half of it (they need long runs of free granules), some whole
 * granules exactly. */
static size_t pick_size(test_rng *r, size_t limit) {
    unsigned k = (unsigned)test_rng_below(r, 16);
    if (k == 0)
        return limit / 2 - test_rng_below(r, 4) * G - test_rng_below(r, 1 << 20);
    if (k < 3)
        return (1 + test_rng_below(r, 6)) * G;
    return test_rng_loguniform(r, 256, limit / 4);
}

/* steps operations on streams streams: allocations (while the live bytes
 * are under the limit, mostly), frees of random live buffers (some used on
 * a second stream first), now and then carve_empty_cache; events complete
 * only after a few queries. Every allocation that must_fit promises has to
 * succeed. */
static void history_run(int vmm, int growth, unsigned streams, long steps, uint64_t seed) {
    history h = {0};
    h.vmm = vmm;
    h.limit = 64 * MiB;
    h.seed = seed;
    if (vmm)
        h.a = test_arena_conf(CARVE_BACKEND_VIRTUAL, growth, growth ? 0 : h.limit, growth ? h.limit : 0,
                              "vmm=1,sim_event_polls=3");
    else
        h.a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 0, h.limit, 0, "vmm=0,sim_event_polls=3");
    carve_arena *a = h.a;
    if (!vmm) { /* where the block lies */
        void *all;
        CHECK_OK(a, carve_alloc(a, h.limit, stream_n(0), &all));
        h.base = (uintptr_t)all;
        CHECK_OK(a, carve_free(a, all));
    }
    test_rng r;
    test_rng_seed(&r, seed);
    size_t live_bytes = 0;
    for (long step = 0; step < steps; step++) {
        unsigned op = (unsigned)test_rng_below(&r, 1000);
        int want_alloc = h.n == 0 || (live_bytes < h.limit * 7 / 8 ? op < 600 : op < 300);
        if (op == 999) {
            CHECK_OK(a, carve_empty_cache(a));
        } else if (want_alloc) {
            size_t size = pick_size(&r, h.limit);
            carve_stream s = stream_n((unsigned)test_rng_below(&r, streams));
            int promise = must_fit(&h, size);
            void *p = NULL;
            carve_status st = carve_alloc(a, size, s, &p);
            h.allocs++;
            h.promised += promise;
            if (st == CARVE_OK) {
                shadow_add(&h, p, size);
                live_bytes += size;
                if (test_rng_below(&r, 8) == 0) /* used on another stream too */
                    CHECK_OK(a, carve_record_stream(a, p, stream_n((unsigned)test_rng_below(&r, streams))));
            } else {
                h.refused++;
                if (st != CARVE_ERR_OOM || promise) {
                    fprintf(stderr, "history seed %llu (%s, growth %d, %u streams), step %ld: %zu bytes on "
                            "stream %p refused, %zu live bytes in %zu buffers: %s\n",
                            (unsigned long long)seed, vmm ? "default mode" : "segments mode", growth, streams,
                            step, size, (void *)s, live_bytes, h.n, carve_last_error(a));
                    CHECK(0);
                    break;
                }
            }
        } else {
            size_t i = (size_t)test_rng_below(&r, h.n);
            CHECK_OK(a, carve_free(a, (void *)h.bufs[i].addr));
            live_bytes -= h.bufs[i].size;
            h.bufs[i] = h.bufs[--h.n];
        }
        if (step % 512 == 0)
            CHECK_ARENA(a);
    }
    CHECK_ARENA(a);
    /* the histories must reach the limit, or they test nothing */
    CHECK(h.refused > 0 && h.promised > h.allocs / 8);
    carve_stats st;
    carve_get_stats(a, &st);
    printf("history seed %llu (%s, growth %d, %u streams): %lu allocations, %lu promised, %lu refused; "
           "%zu address space reservations now\n",
           (unsigned long long)seed, vmm ? "default mode" : "segments mode", growth, streams, h.allocs, h.promised,
           h.refused, st.num_segments);
    while (h.n)
        CHECK_OK(a, carve_free(a, (void *)h.bufs[--h.n].addr));
    CHECK_OK(a, carve_empty_cache(a));
    carve_get_stats(a, &st);
    CHECK(st.reserved_bytes == 0 && st.num_segments == 0); /* extra address space went back too */
    CHECK_ARENA(a);
    free(h.bufs);
    carve_arena_destroy(a);
}

static void test_histories(void) {
    long steps = getenv("CARVE_TEST_STEPS") ? atol(getenv("CARVE_TEST_STEPS")) : 8000;
    uint64_t seed = test_seed(21);
    for (unsigned streams = 1; streams <= 8; streams *= 2) {
        history_run(1, 1, streams, steps, seed + streams);
        history_run(1, 0, streams, steps, seed + 100 + streams);
        history_run(0, 0, streams, steps, seed + 200 + streams);
    }
}

/* ---- threads at the limit ------------------------------------------------ */

/* Four threads on their own streams (and a shared one) allocate, fill,
 * check and free buffers of random sizes in one arena held at its limit,
 * so that the out-of-memory path runs all the time, cutting spans of
 * pools whose threads are freeing into them meanwhile. Host backend,
 * segments mode (real memory: a buffer handed out twice shows as a broken
 * pattern), and the virtual backend in the default mode. No promise is
 * checked (other threads take room meanwhile); what is checked is that
 * nothing breaks. */
enum { TH = 4, TH_LIVE = 24 };

typedef struct th_arg {
    carve_arena *a;
    int index, real;
    long steps;
    unsigned long errors, ooms;
} th_arg;

static void th_fill(void *p, size_t n, uint64_t tag, int real) {
    for (size_t i = 0; real && i < n / 8; i += 509)
        ((uint64_t *)p)[i] = tag ^ i;
}

static int th_intact(const void *p, size_t n, uint64_t tag, int real) {
    for (size_t i = 0; real && i < n / 8; i += 509)
        if (((const uint64_t *)p)[i] != (tag ^ i))
            return 0;
    return 1;
}

static void *th_worker(void *arg) {
    th_arg *t = arg;
    test_rng r;
    test_rng_seed(&r, test_seed(21) * 7 + (uint64_t)t->index);
    void *ptr[TH_LIVE] = {0};
    size_t size[TH_LIVE] = {0};
    uint64_t tag[TH_LIVE] = {0};
    for (long step = 0; step < t->steps; step++) {
        int i = (int)test_rng_below(&r, TH_LIVE);
        if (ptr[i]) {
            t->errors += !th_intact(ptr[i], size[i], tag[i], t->real);
            t->errors += carve_free(t->a, ptr[i]) != CARVE_OK;
            ptr[i] = NULL;
        }
        size[i] = test_rng_loguniform(&r, 256, 12 * MiB);
        tag[i] = test_rng_next(&r);
        carve_stream s = step % 4 == 0 ? stream_n(TH) : stream_n((unsigned)t->index);
        carve_status st = carve_alloc(t->a, size[i], s, &ptr[i]);
        if (st != CARVE_OK) {
            t->errors += st != CARVE_ERR_OOM;
            t->ooms++;
            ptr[i] = NULL;
            continue;
        }
        th_fill(ptr[i], size[i], tag[i], t->real);
        if (t->index == 0 && step % 1024 == 512)
            t->errors += carve_check(t->a) != CARVE_OK || carve_empty_cache(t->a) != CARVE_OK;
    }
    for (int i = 0; i < TH_LIVE; i++)
        if (ptr[i]) {
            t->errors += !th_intact(ptr[i], size[i], tag[i], t->real);
            t->errors += carve_free(t->a, ptr[i]) != CARVE_OK;
        }
    return NULL;
}

static void test_threads_at_limit(void) {
    long steps = getenv("CARVE_TEST_STEPS") ? atol(getenv("CARVE_TEST_STEPS")) : 2000;
    for (int real = 1; real >= 0; real--) {
        carve_arena *a = real ? test_arena_conf(CARVE_BACKEND_HOST, 0, 64 * MiB, 0, "vmm=0,sim_event_polls=2")
                              : test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, 0, 24 * MiB, "vmm=1,sim_event_polls=2");
        pthread_t th[TH];
        th_arg ta[TH];
        for (int i = 0; i < TH; i++) {
            ta[i] = (th_arg){a, i, real, steps, 0, 0};
            pthread_create(&th[i], NULL, th_worker, &ta[i]);
        }
        unsigned long ooms = 0;
        for (int i = 0; i < TH; i++) {
            pthread_join(th[i], NULL);
            CHECK(ta[i].errors == 0);
            ooms += ta[i].ooms;
        }
        CHECK(ooms > 0); /* at the limit, or it tests nothing */
        CHECK_ARENA(a);
        CHECK(carve_memory_allocated(a) == 0);
        CHECK_OK(a, carve_empty_cache(a));
        CHECK(carve_memory_reserved(a) == 0);
        printf("threads at the limit (%s): %d threads x %ld steps, %lu refused\n",
               real ? "host, segments mode" : "virtual, default mode", TH, steps, ooms);
        carve_arena_destroy(a);
    }
}

int main(void) {
    test_pinned_address_space();
    test_pinned_both_ends();
    test_own_room();
    test_room_reclaim();
    test_exact_fit();
    test_segments_room();
    test_other_class();
    test_histories();
    test_threads_at_limit();
    return test_finish();
}
