/*
 * test_vmm.c — virtual-memory mode on the virtual backend: reserved bytes
 * count mapped granules, free granules are unmapped before the mapped total
 * passes its allowance (the peak of touched granules plus 2%), mapped
 * granules are reused before fresh ones are mapped, a program that repeats
 * its steps stops mapping, one stream's free granules are unmapped for
 * another, the limit caps what is mapped, empty_cache unmaps everything
 * free, requests of changing sizes land where memory is mapped, free space
 * is taken lowest address first (by the hot slot too), the automatic mode picks virtual memory
 * where it can, the host backend refuses the mode, and free granules are
 * unmapped only once the device is done with them, with a wait only where
 * the alternative maps too much; huge limits and buffers of 2^52 bytes
 * cost no host memory in proportion; carve_alloc_flags serves from what the
 * arena holds only (HELD), or maps in place of free granules where the
 * arena's peak would grow (REPLACE).
 */
#include "test_util.h"

#define MiB ((size_t)1 << 20)

static carve_arena *vmm_arena(size_t limit, int growth, size_t initial) {
    return test_arena_conf(CARVE_BACKEND_VIRTUAL, growth, initial, limit, "vmm=1");
}

static void test_counts_mapped(void) {
    carve_arena *a = vmm_arena(0, 1, 0);
    CHECK(carve_memory_reserved(a) == 0); /* address space holds no memory */
    void *p;
    CHECK_OK(a, carve_alloc(a, 5 * MiB, NULL, &p)); /* touches 3 granules */
    CHECK(carve_memory_reserved(a) == 6 * MiB);
    void *q;
    CHECK_OK(a, carve_alloc(a, 1000, NULL, &q)); /* lowest address: right after p, in its last granule */
    CHECK((char *)q == (char *)p + 5 * MiB);
    CHECK(carve_memory_reserved(a) == 6 * MiB);
    void *r;
    CHECK_OK(a, carve_alloc(a, 2 * MiB, NULL, &r)); /* one granule more */
    CHECK(carve_memory_reserved(a) == 8 * MiB);
    CHECK_OK(a, carve_free(a, p));
    CHECK(carve_memory_reserved(a) == 8 * MiB); /* unmapping is lazy */
    CHECK_ARENA(a);
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 4 * MiB); /* q's and r's granules stay */
    CHECK_ARENA(a);
    CHECK_OK(a, carve_free(a, q));
    CHECK_OK(a, carve_free(a, r));
    CHECK_OK(a, carve_empty_cache(a));
    carve_stats s;
    carve_get_stats(a, &s);
    CHECK(s.reserved_bytes == 0 && s.num_segments == 0 && s.reserved_bytes_peak == 8 * MiB);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

static void test_peak_bounded(void) {
    /* Fill ~240 MiB with 4 MiB + 4 KiB buffers, free every other one (each
     * hole holds at least one whole granule), then ask for 6 MiB buffers: the
     * holes cannot hold them, but their granules can be unmapped, so the
     * mapped total stays at its peak instead of growing as it would with
     * plain segments. */
    carve_arena *a = vmm_arena(0, 1, 0);
    enum { N = 60 };
    void *p[N];
    for (int i = 0; i < N; i++)
        CHECK_OK(a, carve_alloc(a, 4 * MiB + 4096, NULL, &p[i]));
    carve_stats s0;
    carve_get_stats(a, &s0);
    for (int i = 0; i < N; i += 2)
        CHECK_OK(a, carve_free(a, p[i]));
    void *q[10];
    for (int i = 0; i < 10; i++)
        CHECK_OK(a, carve_alloc(a, 6 * MiB, NULL, &q[i]));
    carve_stats s1;
    carve_get_stats(a, &s1);
    /* Live data fell by ~120 MiB and rose by 60 MiB: the peak must not grow
     * by more than a few granules. */
    CHECK(s1.reserved_bytes_peak <= s0.reserved_bytes_peak + 8 * MiB);
    CHECK(s1.reserved_bytes <= s1.reserved_bytes_peak);
    CHECK_ARENA(a);
    for (int i = 1; i < N; i += 2)
        CHECK_OK(a, carve_free(a, p[i]));
    for (int i = 0; i < 10; i++)
        CHECK_OK(a, carve_free(a, q[i]));
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* A free block whose front granules are unmapped and whose back is mapped:
 * a request that fits in the mapped part is placed there, no map. */
static void test_place_on_mapped(void) {
    carve_arena *a = vmm_arena(0, 1, 0);
    void *p1, *p2, *p3, *r;
    CHECK_OK(a, carve_alloc(a, 4 * MiB, NULL, &p1));
    CHECK_OK(a, carve_alloc(a, 6 * MiB, NULL, &p2));
    CHECK_OK(a, carve_alloc(a, 4 * MiB, NULL, &p3));
    size_t before = carve_memory_reserved(a);
    CHECK_OK(a, carve_free(a, p1));
    /* past the allowance (touched peak 14 MiB): p1's granules, the free
     * ones let go longest ago, are unmapped to make room */
    CHECK_OK(a, carve_alloc(a, 8 * MiB, NULL, &r));
    CHECK(carve_memory_reserved(a) == before + 4 * MiB);
    CHECK_OK(a, carve_free(a, p2)); /* p1+p2: one free block, front unmapped */
    carve_stats s0, s1;
    carve_get_stats(a, &s0);
    void *q;
    CHECK_OK(a, carve_alloc(a, 5 * MiB, NULL, &q)); /* another size: no cached block of p2's */
    carve_get_stats(a, &s1);
    CHECK(q == p2);
    CHECK(s1.num_backend_allocs == s0.num_backend_allocs);
    CHECK(carve_memory_reserved(a) == before + 4 * MiB);
    CHECK_ARENA(a);
    CHECK_OK(a, carve_free(a, q));
    CHECK_OK(a, carve_free(a, p3));
    CHECK_OK(a, carve_free(a, r));
    carve_arena_destroy(a);
}

/* The same step run over and over (sizes that do not tile granules, freed
 * in another order than allocated): after the first steps nothing more is
 * mapped or unmapped, and mapped bytes stay near the touched peak. */
static void test_steady_state(void) {
    carve_arena *a = vmm_arena(0, 1, 0);
    static const size_t sz[] = {3 * MiB + 512, 700 << 10, 9 * MiB, 5 * MiB + 100, 64 << 10, 2 * MiB, 13 * MiB};
    enum { K = sizeof(sz) / sizeof(sz[0]) };
    carve_stats s;
    uint64_t maps3 = 0, unmaps3 = 0;
    for (int step = 0; step < 12; step++) {
        void *p[K];
        for (int i = 0; i < K; i++)
            CHECK_OK(a, carve_alloc(a, sz[i], NULL, &p[i]));
        for (int i = 0; i < K; i++) /* 0, 3, 6, 2, 5, 1, 4 */
            CHECK_OK(a, carve_free(a, p[(3 * i) % K]));
        carve_get_stats(a, &s);
        if (step == 3) {
            maps3 = s.num_backend_allocs;
            unmaps3 = s.num_backend_frees;
        }
    }
    CHECK(s.num_backend_allocs == maps3 && s.num_backend_frees == unmaps3);
    size_t live = 0;
    for (int i = 0; i < K; i++)
        live += sz[i];
    /* every buffer may touch one granule more than its size needs */
    CHECK(s.reserved_bytes_peak <= live + K * 2 * MiB + 2 * MiB);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* Stream 1 leaves 64 MiB mapped and free; stream 2 then needs 64 MiB of
 * other sizes: once the arena maps a quarter more than the most touched at
 * once, stream 1's granules are unmapped for it, so the mapped total stays
 * near that instead of doubling. */
static void test_trim_other_stream(void) {
    carve_arena *a = vmm_arena(0, 1, 0);
    carve_stream s1 = (carve_stream)(uintptr_t)0x1000, s2 = (carve_stream)(uintptr_t)0x2000;
    void *p[16];
    for (int i = 0; i < 16; i++)
        CHECK_OK(a, carve_alloc(a, 4 * MiB, s1, &p[i]));
    for (int i = 0; i < 16; i++)
        CHECK_OK(a, carve_free(a, p[i]));
    CHECK(carve_memory_reserved(a) == 64 * MiB);
    void *q[8];
    for (int i = 0; i < 8; i++)
        CHECK_OK(a, carve_alloc(a, 8 * MiB, s2, &q[i]));
    carve_stats s;
    carve_get_stats(a, &s);
    /* the most touched at once (64 MiB, plus a granule where blocks do not
     * start on one) and a quarter; without trimming stream 1's granules the
     * total would pass 120 MiB */
    size_t allow = (64 * MiB + 2 * MiB) / 4 * 5 + 2 * MiB;
    CHECK(s.reserved_bytes_peak <= allow);
    CHECK(s.reserved_bytes <= allow);
    CHECK_ARENA(a);
    for (int i = 0; i < 8; i++)
        CHECK_OK(a, carve_free(a, q[i]));
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0);
    carve_arena_destroy(a);
}

static void test_limit(void) {
    carve_arena *a = vmm_arena(64 * MiB, 1, 0);
    void *p[40];
    int n = 0;
    while (n < 40 && carve_alloc(a, 3 * MiB, NULL, &p[n]) == CARVE_OK)
        n++;
    CHECK(n >= 16 && n < 40);
    CHECK(carve_memory_reserved(a) <= 64 * MiB);
    CHECK(strstr(carve_last_error(a), "limit") != NULL);
    CHECK_OK(a, carve_free(a, p[0]));
    CHECK_OK(a, carve_alloc(a, 3 * MiB, NULL, &p[0])); /* keeps working */
    for (int i = 0; i < n; i++)
        CHECK_OK(a, carve_free(a, p[i]));
    CHECK_ARENA(a);
    carve_arena_destroy(a);

    /* growth off: the initial amount is the cap on mapped bytes, and nothing
     * is mapped at creation (carve.h, initial_bytes) */
    a = vmm_arena(0, 0, 32 * MiB);
    CHECK(carve_memory_reserved(a) == 0);
    void *x, *y;
    CHECK_OK(a, carve_alloc(a, 20 * MiB, NULL, &x));
    CHECK_ST(a, carve_alloc(a, 20 * MiB, NULL, &y), CARVE_ERR_OOM);
    CHECK(carve_memory_reserved(a) <= 32 * MiB);
    CHECK_OK(a, carve_free(a, x));
    CHECK_OK(a, carve_alloc(a, 30 * MiB, NULL, &y));
    CHECK_OK(a, carve_free(a, y));
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* Requests whose sizes change from one round to the next (a server seeing
 * other batch sizes): once the biggest round has been seen, later rounds are
 * placed where memory is mapped already, and nothing is mapped or unmapped. */
static void test_changing_shapes(void) {
    carve_arena *a = vmm_arena(0, 1, 0);
    carve_stats s;
    uint64_t maps = 0, unmaps = 0;
    void *w;
    CHECK_OK(a, carve_alloc(a, 40 * MiB + 12345, NULL, &w)); /* weights, kept */
    for (int round = 0; round < 40; round++) {
        size_t batch = 1 + (size_t)(round * 7 % 16); /* 1..16, in a scrambled order */
        void *p[12];
        for (int i = 0; i < 12; i++) /* activations: alloc, and free the one before last */
            CHECK_OK(a, carve_alloc(a, batch * (300 << 10) * (size_t)(1 + i % 3) + 4096 * (size_t)i, NULL, &p[i]));
        for (int i = 0; i < 12; i++)
            CHECK_OK(a, carve_free(a, p[(5 * i) % 12]));
        carve_get_stats(a, &s);
        if (round == 15) { /* every batch size has been seen */
            maps = s.num_backend_allocs;
            unmaps = s.num_backend_frees;
        }
    }
    CHECK(s.num_backend_allocs == maps && s.num_backend_frees == unmaps);
    /* the largest round: 16 * 300 KiB * (4 * (1 + 2 + 3)) = 112.5 MiB + 264 KiB, plus the weights */
    size_t peak = 40 * MiB + 12345 + 16 * (300 << 10) * 24 + 4096 * 66;
    CHECK(s.reserved_bytes_peak <= peak + peak / 50 + 4 * MiB);
    CHECK_ARENA(a);
    CHECK_OK(a, carve_free(a, w));
    carve_arena_destroy(a);
}

/* Free space is taken lowest address first. */
static void test_address_order(void) {
    carve_arena *a = vmm_arena(0, 1, 0);
    void *p[8];
    for (int i = 0; i < 8; i++)
        CHECK_OK(a, carve_alloc(a, 3 * MiB, NULL, &p[i]));
    CHECK_OK(a, carve_free(a, p[6]));
    CHECK_OK(a, carve_free(a, p[1]));
    CHECK_OK(a, carve_free(a, p[4]));
    void *q;
    CHECK_OK(a, carve_alloc(a, 2 * MiB, NULL, &q)); /* holes at 1, 4, 6: the first */
    CHECK(q == p[1]);
    CHECK_OK(a, carve_alloc(a, 1 * MiB, NULL, &q)); /* the rest of hole 1 */
    CHECK((char *)q == (char *)p[1] + 2 * MiB);
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* The hot slot (the last block freed, handed back to the next request of
 * its size without a search) keeps the lowest-address rule: once a lower
 * free block of the size enters the index (here a pending free whose event
 * completes while the hot block cycles), the next request takes that one. */
static void test_hot_lowest(void) {
    carve_arena *a = vmm_arena(0, 1, 0);
    carve_stream s2 = (carve_stream)(uintptr_t)0x2000;
    void *p[4], *q = NULL;
    for (int i = 0; i < 4; i++)
        CHECK_OK(a, carve_alloc(a, 3 * MiB, NULL, &p[i]));
    CHECK_OK(a, carve_record_stream(a, p[0], s2));
    CHECK_OK(a, carve_free(a, p[2]));
    for (int i = 0; i < 3; i++) { /* hot, and the lowest free place */
        CHECK_OK(a, carve_alloc(a, 3 * MiB, NULL, &q));
        CHECK(q == p[2]);
        CHECK_OK(a, carve_free(a, q));
    }
    CHECK_OK(a, carve_free(a, p[0])); /* pending until stream 2's event completes */
    int n = 0;
    for (; n < 1000; n++) {
        CHECK_OK(a, carve_alloc(a, 3 * MiB, NULL, &q));
        CHECK_ARENA(a);
        if (q != p[2])
            break;
        CHECK_OK(a, carve_free(a, q));
    }
    CHECK(n < 1000 && q == p[0]);
    CHECK_OK(a, carve_alloc(a, 3 * MiB, NULL, &p[0])); /* then the hot one */
    CHECK(p[0] == p[2]);
    CHECK_OK(a, carve_free(a, p[0]));
    CHECK_OK(a, carve_free(a, q));
    CHECK_OK(a, carve_free(a, p[1]));
    CHECK_OK(a, carve_free(a, p[3]));
    CHECK_ARENA(a);
    carve_arena_destroy(a);
}

/* The automatic mode: virtual memory where the backend maps granules and
 * the arena grows; segments for one fixed block and on the host backend. */
static void test_auto(void) {
    carve_config c, eff;
    carve_config_init(&c);
    CHECK(c.vmm == CARVE_VMM_AUTO);
    carve_arena *a = test_arena(CARVE_BACKEND_VIRTUAL, 1, 0, 0);
    CHECK_OK(a, carve_arena_get_config(a, &eff));
    CHECK(eff.vmm == 1);
    carve_arena_destroy(a);
    a = test_arena(CARVE_BACKEND_VIRTUAL, 0, 64 * MiB, 0);
    CHECK_OK(a, carve_arena_get_config(a, &eff));
    CHECK(eff.vmm == 0);
    carve_arena_destroy(a);
    a = test_arena(CARVE_BACKEND_VIRTUAL, 1, 8 * MiB, 0); /* memory held from the start: a segment */
    CHECK_OK(a, carve_arena_get_config(a, &eff));
    CHECK(eff.vmm == 0 && carve_memory_reserved(a) == 8 * MiB);
    carve_arena_destroy(a);
    a = test_arena(CARVE_BACKEND_HOST, 1, 0, 0);
    CHECK_OK(a, carve_arena_get_config(a, &eff));
    CHECK(eff.vmm == 0);
    carve_arena_destroy(a);
    a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, 0, 0, "vmm=0");
    CHECK_OK(a, carve_arena_get_config(a, &eff));
    CHECK(eff.vmm == 0);
    carve_arena_destroy(a);
    CHECK_OK(NULL, carve_config_parse(&c, "vmm=0"));
    CHECK_OK(NULL, carve_config_parse(&c, "vmm=auto"));
    CHECK(c.vmm == CARVE_VMM_AUTO);
    CHECK_ST(NULL, carve_config_parse(&c, "vmm=2"), CARVE_ERR_INVALID);
    c.vmm = 7;
    c.backend = CARVE_BACKEND_VIRTUAL;
    CHECK_ST(NULL, carve_arena_create(&c, &a), CARVE_ERR_INVALID);
}

static void test_refused(void) {
    carve_config c;
    carve_config_init(&c);
    c.backend = CARVE_BACKEND_HOST;
    c.vmm = 1;
    carve_arena *a = (carve_arena *)1;
    CHECK_ST(NULL, carve_arena_create(&c, &a), CARVE_ERR_INVALID);
    CHECK(a == NULL && strstr(carve_last_error(NULL), "virtual-memory") != NULL);
    CHECK_OK(NULL, carve_config_parse(&c, "vmm=1,backend=virtual"));
    CHECK(c.vmm == 1);
}

/* Huge limits: the address space reserved at creation (twice the limit)
 * and a buffer of CARVE_MAX_ALLOC cost a few records, so creation never
 * fails for host memory; where the backend has no such address space, it
 * fails in the backend's words. Unlimited arenas reserve 64 GiB a piece and
 * take a 2^52-byte buffer too. */
static void test_huge_limits(void) {
    carve_config c;
    carve_config_init(&c);
    c.backend = CARVE_BACKEND_VIRTUAL;
    c.vmm = 1;
    c.limit_bytes = (size_t)1 << 54; /* 2^55 bytes of address space at creation */
    carve_arena *a = NULL;
    CHECK_OK(NULL, carve_arena_create(&c, &a));
    if (a) {
        void *p = NULL, *q = NULL;
        CHECK_OK(a, carve_alloc(a, (size_t)1 << 52, NULL, &p));
        CHECK_OK(a, carve_alloc(a, 3 * MiB + 7, (carve_stream)(uintptr_t)0x700, &q));
        CHECK(carve_memory_reserved(a) == ((size_t)1 << 52) + 4 * MiB);
        CHECK_ARENA(a);
        CHECK_OK(a, carve_free(a, p));
        CHECK_OK(a, carve_free(a, q));
        CHECK_OK(a, carve_empty_cache(a));
        CHECK(carve_memory_reserved(a) == 0);
        CHECK_ARENA(a);
        carve_arena_destroy(a);
    }
    c.limit_bytes = SIZE_MAX - 1; /* twice that is more than the backend has */
    a = (carve_arena *)1;
    CHECK_ST(NULL, carve_arena_create(&c, &a), CARVE_ERR_OOM);
    CHECK(a == NULL && strstr(carve_last_error(NULL), "virtual address space exhausted") != NULL &&
          strstr(carve_last_error(NULL), "host memory") == NULL);
    c.limit_bytes = 0; /* unlimited */
    CHECK_OK(NULL, carve_arena_create(&c, &a));
    if (a) {
        void *p = NULL;
        CHECK_OK(a, carve_alloc(a, (size_t)1 << 52, NULL, &p));
        CHECK_ARENA(a);
        CHECK_OK(a, carve_free(a, p));
        carve_arena_destroy(a);
    }
}

/* Unmapping is not stream-ordered, so a free granule is unmapped only once
 * an event recorded after its free has completed, and the host waits for
 * one only when no completed event covers enough granules. Simulated
 * events complete after `polls` queries, or when waited for. */
static void fences_case(unsigned polls, int want_sync) {
    char conf[64];
    snprintf(conf, sizeof(conf), "vmm=1,sim_event_polls=%u", polls);
    carve_arena *a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, 0, 0, conf);
    void *w, *p1, *p2, *r;
    CHECK_OK(a, carve_alloc(a, 60 * MiB, NULL, &w));
    CHECK_OK(a, carve_alloc(a, 4 * MiB, NULL, &p1));
    CHECK_OK(a, carve_alloc(a, 4 * MiB, NULL, &p2)); /* touched: 68 MiB; allowance 70 MiB */
    CHECK_OK(a, carve_free(a, p1));
    carve_stats s0, s1;
    carve_get_stats(a, &s0);
    CHECK_OK(a, carve_alloc(a, 6 * MiB, NULL, &r)); /* no room in p1's hole: mapped after p2 */
    carve_get_stats(a, &s1);
    CHECK(s1.reserved_bytes == (68 - 4 + 6) * MiB); /* p1's granules made room */
    CHECK((s1.num_syncs > s0.num_syncs) == want_sync);
    CHECK_ARENA(a);
    CHECK_OK(a, carve_free(a, r));
    CHECK_OK(a, carve_free(a, p2));
    CHECK_OK(a, carve_free(a, w));
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0);
    carve_arena_destroy(a);
}

/* Frees record a fence now and then (every 64 frees that let 16 granules
 * go): a later trim finds those granules done without waiting, although
 * the fence it records itself is not done yet. */
static void test_fence_at_free(void) {
    carve_arena *a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, 0, 0, "vmm=1,sim_event_polls=1");
    enum { GROUPS = 8, PER = 16 };
    void *b[GROUPS][PER], *keep[GROUPS], *r;
    for (int g = 0; g < GROUPS; g++) { /* 8 MiB of buffers, then a small one that stays */
        for (int i = 0; i < PER; i++)
            CHECK_OK(a, carve_alloc(a, 512 << 10, NULL, &b[g][i]));
        CHECK_OK(a, carve_alloc(a, 4096, NULL, &keep[g]));
    }
    carve_stats sa, s0, s1;
    carve_get_stats(a, &sa);
    for (int g = 0; g < GROUPS; g++)
        for (int i = 0; i < PER; i++)
            CHECK_OK(a, carve_free(a, b[g][i]));
    carve_get_stats(a, &s0);
    CHECK(s0.num_event_records > sa.num_event_records); /* fences recorded by the frees */
    CHECK_OK(a, carve_alloc(a, 10 * MiB, NULL, &r)); /* fits no hole: mapped at the end */
    carve_get_stats(a, &s1);
    CHECK(s1.num_syncs == s0.num_syncs);
    CHECK(s1.num_event_queries > s0.num_event_queries); /* the fences were asked about */
    CHECK(s1.num_backend_frees > s0.num_backend_frees);  /* room was made ... */
    CHECK(s1.reserved_bytes <= s0.reserved_bytes_peak + 2 * MiB); /* ... within the allowance */
    CHECK_ARENA(a);
    CHECK_OK(a, carve_free(a, r));
    for (int g = 0; g < GROUPS; g++)
        CHECK_OK(a, carve_free(a, keep[g]));
    carve_arena_destroy(a);
}

/* Room taken from another stream: stream A frees 64 MiB in 128 buffers
 * (its frees record a fence after the first 64), then stream B, which
 * holds nothing mapped, maps 40 MiB, past the streams' shared allowance,
 * so some 12 MiB of A's free granules are unmapped for it, fewer than the
 * fence covers. Where A's fences already show them done (`polls` 0: the
 * device is done at once), that needs no wait; where they do not (busy),
 * one device synchronization. Either way B's buffer comes, and what stays
 * mapped stays within the allowance. */
static void fences_others_case(unsigned polls, int want_sync) {
    char conf[64];
    snprintf(conf, sizeof(conf), "vmm=1,sim_event_polls=%u", polls);
    carve_arena *a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, 0, 0, conf);
    carve_stream sa = (carve_stream)(uintptr_t)0xa00, sb = (carve_stream)(uintptr_t)0xb00;
    enum { N = 128 };
    void *b[N], *keep, *r;
    for (int i = 0; i < N; i++)
        CHECK_OK(a, carve_alloc(a, 512 << 10, sa, &b[i]));
    CHECK_OK(a, carve_alloc(a, 4096, sa, &keep));
    for (int i = 0; i < N; i++)
        CHECK_OK(a, carve_free(a, b[i]));
    carve_stats s0, s1;
    carve_get_stats(a, &s0);
    CHECK_OK(a, carve_alloc(a, 40 * MiB, sb, &r));
    carve_get_stats(a, &s1);
    CHECK(s1.num_backend_frees > s0.num_backend_frees); /* A's granules made room */
    CHECK(s1.reserved_bytes < s0.reserved_bytes + 40 * MiB);
    CHECK((s1.num_syncs > s0.num_syncs) == want_sync);
    CHECK_ARENA(a);
    CHECK_OK(a, carve_free(a, r));
    CHECK_OK(a, carve_free(a, keep));
    CHECK_OK(a, carve_empty_cache(a));
    CHECK(carve_memory_reserved(a) == 0);
    carve_arena_destroy(a);
}

static void test_fences(void) {
    fences_case(0, 0);    /* the device is done at once: no wait */
    fences_case(1000, 1); /* busy: the host waits for the fence after p1's free */
    test_fence_at_free();
    fences_others_case(0, 0);
    fences_others_case(1000, 1);
}

/* carve_alloc_flags: CARVE_ALLOC_HELD serves what the arena holds and
 * refuses, with nothing changed and no out of memory counted, what would
 * map more (virtual-memory mode) or reserve a segment (segments mode);
 * an unknown flag is refused. */
static void test_alloc_held(void) {
    for (int vmm = 1; vmm >= 0; vmm--) {
        carve_arena *a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, 0, 0, vmm ? "vmm=1" : "vmm=0");
        void *p, *q, *r = (void *)1;
        CHECK_OK(a, carve_alloc(a, 8 * MiB, NULL, &p));
        CHECK_OK(a, carve_alloc(a, 8 * MiB, NULL, &q));
        CHECK_OK(a, carve_free(a, p));
        carve_stats s0, s1;
        carve_get_stats(a, &s0);
        CHECK_OK(a, carve_alloc_flags(a, 6 * MiB, NULL, CARVE_ALLOC_HELD, &p)); /* in p's free memory */
        size_t want = 2 * (size_t)s0.reserved_bytes + 64 * MiB;                  /* more than the arena holds */
        CHECK_ST(a, carve_alloc_flags(a, want, NULL, CARVE_ALLOC_HELD, &r), CARVE_ERR_OOM);
        CHECK(r == NULL && strstr(carve_last_error(a), "holds") != NULL);
        carve_get_stats(a, &s1);
        CHECK(s1.reserved_bytes == s0.reserved_bytes && s1.num_backend_allocs == s0.num_backend_allocs &&
              s1.num_ooms == s0.num_ooms && s1.num_syncs == s0.num_syncs);
        CHECK_ARENA(a);
        CHECK_OK(a, carve_alloc_flags(a, want, NULL, 0, &r)); /* without the flag it grows */
        CHECK(carve_memory_reserved(a) > s0.reserved_bytes);
        void *x = (void *)1;
        CHECK_ST(a, carve_alloc_flags(a, 4096, NULL, 4u, &x), CARVE_ERR_INVALID);
        CHECK(x == NULL);
        CHECK_OK(a, carve_free(a, p));
        CHECK_OK(a, carve_free(a, q));
        CHECK_OK(a, carve_free(a, r));
        CHECK_ARENA(a);
        carve_arena_destroy(a);
    }
}

/* CARVE_ALLOC_REPLACE: buffers held back as live (an interposer's
 * quarantine) raised the stream's peak, then went back as holes no new
 * request fits. A plain request maps more up to the allowance the inflated
 * peak gives; with the flag, the holes' granules are unmapped first and
 * the arena's peak does not grow by more than a granule. */
static size_t replace_case(unsigned flags) {
    carve_arena *a = vmm_arena(0, 1, 0);
    enum { N = 400, M = 24 };
    static void *p[N];
    void *q[M];
    for (int i = 0; i < N; i++)
        CHECK_OK(a, carve_alloc(a, 4 * MiB + 4096, NULL, &p[i]));
    for (int i = 0; i < N; i += 2)
        CHECK_OK(a, carve_free(a, p[i]));
    carve_stats s0, s1;
    carve_get_stats(a, &s0);
    for (int i = 0; i < M; i++)
        CHECK_OK(a, carve_alloc_flags(a, 6 * MiB, NULL, flags, &q[i]));
    carve_get_stats(a, &s1);
    CHECK_ARENA(a);
    for (int i = 1; i < N; i += 2)
        CHECK_OK(a, carve_free(a, p[i]));
    for (int i = 0; i < M; i++)
        CHECK_OK(a, carve_free(a, q[i]));
    carve_arena_destroy(a);
    return s1.reserved_bytes_peak - s0.reserved_bytes_peak;
}

static void test_alloc_replace(void) {
    size_t plain = replace_case(0), replace = replace_case(CARVE_ALLOC_REPLACE);
    CHECK(replace <= 2 * MiB);
    CHECK(plain > replace);
}

int main(void) {
    test_counts_mapped();
    test_peak_bounded();
    test_place_on_mapped();
    test_steady_state();
    test_trim_other_stream();
    test_limit();
    test_changing_shapes();
    test_address_order();
    test_hot_lowest();
    test_auto();
    test_refused();
    test_huge_limits();
    test_fences();
    test_alloc_held();
    test_alloc_replace();
    return test_finish();
}
