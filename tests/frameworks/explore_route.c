/*
 * explore_route.c — a randomized schedule explorer over the routing layer
 * (lib/frameworks/route.c): threads push and pop routes, set and clear a
 * device's route, allocate through their routes and with explicit arenas
 * (retired ones too), free each other's buffers, record streams, empty the
 * caches, retire and forget arenas, and exit with routes still pushed, while
 * a recorder checks that every free it hears of frees a live allocation.
 *
 * The one idea: the test keeps its own model of every arena (a slot: live,
 * retired or empty, and a serial number per arena it made) under one
 * reader-writer lock per slot, so that each thread knows, at the moment of
 * each call, what the routing layer must answer: an allocation through a
 * route pushed before that arena was retired or forgotten must fail with
 * CARVE_ERR_INVALID, one through a live route must land in exactly that
 * arena (told by its name, not its address), a buffer keeps the pattern
 * written into it until it is freed, and when a round ends every arena is
 * gone. The slots' locks order what the model needs to know and nothing
 * else; the routing layer's own calls run concurrently across slots and
 * threads, and each thread yields at random points, so the seeds explore
 * different interleavings. On failure the seed is printed.
 *
 * Knobs: CARVE_TEST_SEED (first seed), CARVE_EXPLORE_SEEDS (rounds, one seed
 * each; default 6), CARVE_EXPLORE_OPS (operations per thread and round;
 * default 3000). A long run: CARVE_EXPLORE_SEEDS=200 CARVE_EXPLORE_OPS=20000.
 */
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "carve_frameworks.h"
#include "test_util.h"

enum { NT = 4, NSLOTS = 6, POOL = 2048, MYDEPTH = 8 };
enum { EMPTY, LIVE, RETIRED };

typedef struct slot {
    pthread_rwlock_t lk;
    carve_arena *a;
    unsigned serial; /* of the arena in it (unique per round) */
    int state;
    int live;        /* atomic: buffers of this arena not yet freed */
} slot;

typedef struct buf {
    void *p;
    size_t size;
    uint64_t tag;
    int slot;
    unsigned serial;
} buf;

typedef struct ref {
    int slot;
    unsigned serial;
    carve_arena *a;
} ref;

static slot g_slots[NSLOTS];
static pthread_mutex_t g_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static buf g_pool[POOL];
static int g_npool;
static pthread_rwlock_t g_dev_lock = PTHREAD_RWLOCK_INITIALIZER; /* before any slot lock */
/* Creating an arena takes this for writing; a free (until its slot is
 * settled) and a use of a retired arena's handle take it for reading. So a
 * retired arena that its last free destroyed has no successor at its address
 * while the model still calls it retired: a handle of it is then stale, and
 * the routing layer must refuse it (no new arena can be mistaken for it). */
static pthread_rwlock_t g_create_lock = PTHREAD_RWLOCK_INITIALIZER; /* before any slot lock */
static int g_dev_slot = -1;
static unsigned g_dev_serial;
static unsigned g_next_serial; /* atomic */
static unsigned long g_errors; /* atomic */
static uint64_t g_seed;
static carve_arena *g_made[4096];
static int g_nmade; /* atomic */
static unsigned long g_counts[16]; /* atomic: operations by kind */
static unsigned long g_stale;      /* atomic: allocations refused for a retired arena's handle */

/* The recorder's shadow: ids live now (its callbacks are serialized). */
static uint64_t g_shadow[8192];
static int g_nshadow;
static unsigned long g_rec_errors;

static void fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "explore_route (seed %llu): %s\n", (unsigned long long)g_seed, msg);
    __atomic_add_fetch(&g_errors, 1, __ATOMIC_RELAXED);
}

static carve_status rec_alloc(void *ctx, uint64_t id, uint64_t size, uint32_t stream, uint64_t t) {
    (void)ctx, (void)size, (void)stream, (void)t;
    for (int i = 0; i < g_nshadow; i++)
        if (g_shadow[i] == id)
            g_rec_errors++; /* allocated twice without a free between */
    if (g_nshadow < 8192)
        g_shadow[g_nshadow++] = id;
    return CARVE_OK;
}

static carve_status rec_free(void *ctx, uint64_t id, uint64_t t) {
    (void)ctx, (void)t;
    for (int i = 0; i < g_nshadow; i++)
        if (g_shadow[i] == id) {
            g_shadow[i] = g_shadow[--g_nshadow];
            return CARVE_OK;
        }
    g_rec_errors++; /* a free of something not live: twice, or never allocated */
    return CARVE_OK;
}

static void fill(void *p, size_t n, uint64_t tag) {
    uint64_t *w = p;
    for (size_t i = 0; i < n / 8 && i < 32; i++)
        w[i] = tag ^ i;
}

static int intact(const void *p, size_t n, uint64_t tag) {
    const uint64_t *w = p;
    for (size_t i = 0; i < n / 8 && i < 32; i++)
        if (w[i] != (tag ^ i))
            return 0;
    return 1;
}

/* The serial number carve was told at creation (the arena's name, "x<serial>"). */
static unsigned serial_of(const carve_arena *a) {
    carve_config c;
    if (carve_arena_get_config(a, &c) != CARVE_OK || !c.name || c.name[0] != 'x')
        return 0;
    return (unsigned)strtoul(c.name + 1, NULL, 10);
}

static void pool_put(const buf *b) {
    pthread_mutex_lock(&g_pool_lock);
    if (g_npool < POOL)
        g_pool[g_npool++] = *b;
    else
        fail("buffer pool full");
    pthread_mutex_unlock(&g_pool_lock);
}

/* Take a random buffer out of the pool (0 when it is empty). */
static int pool_take(test_rng *r, buf *out) {
    pthread_mutex_lock(&g_pool_lock);
    int ok = g_npool > 0;
    if (ok) {
        int i = (int)test_rng_below(r, (uint64_t)g_npool);
        *out = g_pool[i];
        g_pool[i] = g_pool[--g_npool];
    }
    pthread_mutex_unlock(&g_pool_lock);
    return ok;
}

typedef struct worker {
    int me;
    long ops;
    test_rng rng;
    ref stack[MYDEPTH];
    int depth;
} worker;

static carve_stream stream_of(worker *w) { return (carve_stream)(uintptr_t)(0x100 * (1 + test_rng_below(&w->rng, 3))); }

/* Slot lock held (read) and the slot live: the new buffer p of the arena in
 * slot s checked, patterned and pooled. */
static void keep(worker *w, int s, void *p, size_t n) {
    carve_arena *owner = NULL;
    if (carve_route_owner(p, 0, &owner) != CARVE_OK || owner != g_slots[s].a ||
        serial_of(owner) != g_slots[s].serial) {
        fail("a buffer meant for arena x%u landed in %p (x%u)", g_slots[s].serial, (void *)owner,
             owner ? serial_of(owner) : 0);
        return;
    }
    buf b = {p, n, test_rng_next(&w->rng), s, g_slots[s].serial};
    fill(p, n, b.tag);
    __atomic_add_fetch(&g_slots[s].live, 1, __ATOMIC_RELAXED);
    pool_put(&b);
}

static int ok_failure(carve_status st) { return st == CARVE_ERR_OOM || st == CARVE_ERR_BACKEND; }

static void op_create(worker *w) {
    int s = (int)test_rng_below(&w->rng, NSLOTS);
    slot *sl = &g_slots[s];
    if (pthread_rwlock_trywrlock(&g_create_lock) != 0)
        return;
    if (pthread_rwlock_trywrlock(&sl->lk) != 0) {
        pthread_rwlock_unlock(&g_create_lock);
        return;
    }
    if (sl->state == EMPTY) {
        unsigned serial = __atomic_add_fetch(&g_next_serial, 1, __ATOMIC_RELAXED);
        char name[32];
        snprintf(name, sizeof(name), "x%u", serial);
        carve_config c;
        carve_config_init(&c);
        c.backend = CARVE_BACKEND_HOST;
        c.name = name;
        c.limit_bytes = test_rng_below(&w->rng, 3) ? 0 : 8u << 20;
        if (test_rng_below(&w->rng, 4) == 0) { /* every fifth backend call fails */
            c.fail_backend_every = 5;
            c.fail_backend_status = CARVE_ERR_BACKEND;
        }
        carve_arena *a = NULL;
        if (carve_arena_create(&c, &a) != CARVE_OK) {
            fail("creating x%u: %s", serial, carve_last_error(NULL));
            pthread_rwlock_unlock(&sl->lk);
            pthread_rwlock_unlock(&g_create_lock);
            return;
        }
        int n = __atomic_fetch_add(&g_nmade, 1, __ATOMIC_RELAXED);
        if (n < 4096)
            g_made[n] = a;
        sl->a = a;
        sl->serial = serial;
        sl->state = LIVE;
        __atomic_store_n(&sl->live, 0, __ATOMIC_RELAXED);
    }
    pthread_rwlock_unlock(&sl->lk);
    pthread_rwlock_unlock(&g_create_lock);
}

static void op_push(worker *w) {
    if (w->depth == MYDEPTH)
        return;
    int s = (int)test_rng_below(&w->rng, NSLOTS);
    slot *sl = &g_slots[s];
    pthread_rwlock_rdlock(&g_create_lock);
    pthread_rwlock_rdlock(&sl->lk);
    if (sl->state == LIVE) {
        carve_status st = carve_route_push(sl->a);
        if (st != CARVE_OK)
            fail("push of live arena x%u: %s: %s", sl->serial, carve_status_str(st), carve_last_error(NULL));
        else
            w->stack[w->depth++] = (ref){s, sl->serial, sl->a};
    } else if (sl->state == RETIRED) {
        /* Retired, perhaps destroyed meanwhile by another thread's free
         * (and no new arena at its address): refused. */
        carve_status st = carve_route_push(sl->a);
        if (st == CARVE_OK) {
            fail("push of retired x%u succeeded", sl->serial);
            (void)carve_route_pop();
        } else if (st != CARVE_ERR_INVALID) {
            fail("push of retired arena: %s", carve_status_str(st));
        }
    }
    pthread_rwlock_unlock(&sl->lk);
    pthread_rwlock_unlock(&g_create_lock);
}

static void op_pop(worker *w) {
    if (!w->depth)
        return;
    carve_status st = carve_route_pop();
    w->depth--;
    carve_arena *want = w->depth ? w->stack[w->depth - 1].a : NULL;
    if (st != CARVE_OK || carve_route_current() != want)
        fail("pop: %s, current %p, want %p", carve_status_str(st), (void *)carve_route_current(), (void *)want);
}

/* An allocation of a thread with nothing pushed: the device's route. */
static void op_alloc_unrouted(worker *w, size_t n) {
    pthread_rwlock_rdlock(&g_dev_lock);
    int s = g_dev_slot;
    if (s >= 0) {
        slot *sl = &g_slots[s];
        pthread_rwlock_rdlock(&sl->lk);
        void *p = NULL;
        carve_status st = carve_route_alloc(NULL, n, 0, stream_of(w), &p);
        if (st == CARVE_OK)
            keep(w, s, p, n);
        else if (!ok_failure(st))
            fail("allocation through device 0's route (x%u): %s: %s", sl->serial, carve_status_str(st),
                 carve_last_error(NULL));
        pthread_rwlock_unlock(&sl->lk);
    }
    pthread_rwlock_unlock(&g_dev_lock);
}

static void op_alloc_routed(worker *w) {
    size_t n = test_rng_loguniform(&w->rng, 64, 64 << 10);
    if (!w->depth) {
        op_alloc_unrouted(w, n);
        return;
    }
    ref t = w->stack[w->depth - 1];
    slot *sl = &g_slots[t.slot];
    pthread_rwlock_rdlock(&sl->lk);
    int live = sl->state == LIVE && sl->serial == t.serial;
    void *p = NULL;
    carve_status st = carve_route_alloc(NULL, n, 0, stream_of(w), &p);
    if (live) {
        if (st == CARVE_OK)
            keep(w, t.slot, p, n);
        else if (!ok_failure(st))
            fail("allocation through the route to live x%u: %s: %s", t.serial, carve_status_str(st),
                 carve_last_error(NULL));
    } else if (st != CARVE_ERR_INVALID) {
        fail("allocation through a route to x%u, %s since: %s (into %p)", t.serial,
             sl->serial == t.serial ? "retired" : "gone", carve_status_str(st), p);
    }
    pthread_rwlock_unlock(&sl->lk);
}

static void op_alloc_explicit(worker *w) {
    int s = (int)test_rng_below(&w->rng, NSLOTS);
    slot *sl = &g_slots[s];
    size_t n = test_rng_loguniform(&w->rng, 64, 16 << 10);
    pthread_rwlock_rdlock(&g_create_lock);
    pthread_rwlock_rdlock(&sl->lk);
    void *p = NULL;
    if (sl->state == LIVE) {
        carve_status st = carve_route_alloc(sl->a, n, 0, stream_of(w), &p);
        if (st == CARVE_OK)
            keep(w, s, p, n);
        else if (!ok_failure(st))
            fail("explicit allocation in live x%u: %s", sl->serial, carve_status_str(st));
    } else if (sl->state == RETIRED) {
        /* The handle of a retired arena, which another thread's free may
         * destroy at any moment: refused, never read after it is gone. */
        carve_status st = carve_route_alloc(sl->a, n, 0, stream_of(w), &p);
        if (st == CARVE_OK) {
            fail("explicit allocation in retired x%u succeeded", sl->serial);
            (void)carve_route_free(p, 0);
        } else if (st != CARVE_ERR_INVALID) {
            fail("explicit allocation in retired x%u: %s", sl->serial, carve_status_str(st));
        }
        __atomic_add_fetch(&g_stale, 1, __ATOMIC_RELAXED);
    }
    pthread_rwlock_unlock(&sl->lk);
    pthread_rwlock_unlock(&g_create_lock);
}

/* Slot lock not held: a retired slot whose last buffer went is empty now. */
static void settle(int s, unsigned serial) {
    slot *sl = &g_slots[s];
    pthread_rwlock_wrlock(&sl->lk);
    if (sl->serial == serial && sl->state == RETIRED && __atomic_load_n(&sl->live, __ATOMIC_RELAXED) == 0)
        sl->state = EMPTY;
    pthread_rwlock_unlock(&sl->lk);
}

static void op_free(worker *w) {
    buf b;
    if (!pool_take(&w->rng, &b))
        return;
    slot *sl = &g_slots[b.slot];
    pthread_rwlock_rdlock(&g_create_lock);
    pthread_rwlock_rdlock(&sl->lk);
    if (sl->serial != b.serial || sl->state == EMPTY) {
        pthread_rwlock_unlock(&sl->lk); /* forgotten and destroyed with its buffers */
        pthread_rwlock_unlock(&g_create_lock);
        return;
    }
    if (!intact(b.p, b.size, b.tag))
        fail("buffer %p of x%u was overwritten while live", b.p, b.serial);
    carve_status st = carve_route_free(b.p, 0);
    int gone = 0;
    if (st == CARVE_OK) {
        gone = __atomic_sub_fetch(&sl->live, 1, __ATOMIC_RELAXED) == 0;
    } else if (st == CARVE_ERR_BACKEND) {
        pool_put(&b); /* an injected failure: still live, freed again later */
    } else {
        fail("free of a live buffer of x%u: %s: %s", b.serial, carve_status_str(st), carve_last_error(NULL));
    }
    pthread_rwlock_unlock(&sl->lk);
    if (gone)
        settle(b.slot, b.serial);
    pthread_rwlock_unlock(&g_create_lock);
}

static void op_record_stream(worker *w) {
    buf b;
    if (!pool_take(&w->rng, &b))
        return;
    slot *sl = &g_slots[b.slot];
    pthread_rwlock_rdlock(&sl->lk);
    if (sl->serial == b.serial && sl->state != EMPTY) {
        carve_status st = carve_route_record_stream(b.p, 0, stream_of(w));
        if (st != CARVE_OK && !ok_failure(st))
            fail("record_stream on a live buffer of x%u: %s", b.serial, carve_status_str(st));
        pool_put(&b);
    }
    pthread_rwlock_unlock(&sl->lk);
}

static int on_my_stack(worker *w, int s, unsigned serial) {
    for (int i = 0; i < w->depth; i++)
        if (w->stack[i].slot == s && w->stack[i].serial == serial)
            return 1;
    return 0;
}

static void op_retire(worker *w) {
    int s = (int)test_rng_below(&w->rng, NSLOTS);
    slot *sl = &g_slots[s];
    pthread_rwlock_rdlock(&g_dev_lock);
    pthread_rwlock_wrlock(&sl->lk);
    if (sl->state == LIVE) {
        int destroyed = -1;
        int refuse = on_my_stack(w, s, sl->serial) || g_dev_slot == s;
        carve_status st = carve_route_retire(sl->a, &destroyed);
        if (refuse) {
            if (st != CARVE_ERR_INVALID)
                fail("retire of x%u, pushed here or a device's route: %s", sl->serial, carve_status_str(st));
        } else if (st != CARVE_OK) {
            fail("retire of live x%u: %s: %s", sl->serial, carve_status_str(st), carve_last_error(NULL));
        } else {
            sl->state = destroyed ? EMPTY : RETIRED;
            if (destroyed && __atomic_load_n(&sl->live, __ATOMIC_RELAXED) != 0)
                fail("retire destroyed x%u with %d buffers live", sl->serial, sl->live);
            if (!destroyed && __atomic_load_n(&sl->live, __ATOMIC_RELAXED) == 0)
                sl->state = EMPTY; /* the last free ran meanwhile: it destroyed the arena */
        }
    }
    pthread_rwlock_unlock(&sl->lk);
    pthread_rwlock_unlock(&g_dev_lock);
}

static int g_record; /* this round records: no forgets (the recorder never hears of
                        * the frees carve_arena_destroy makes) */

static void op_forget(worker *w) {
    if (g_record)
        return;
    int s = (int)test_rng_below(&w->rng, NSLOTS);
    slot *sl = &g_slots[s];
    pthread_rwlock_rdlock(&g_dev_lock);
    pthread_rwlock_wrlock(&sl->lk);
    if (sl->state == LIVE) {
        int known = carve_route_known(sl->a); /* registered: pushed or allocated from (under our lock) */
        carve_status st = carve_route_forget(sl->a);
        if (g_dev_slot == s) {
            if (st != CARVE_ERR_INVALID)
                fail("forget of device 0's route x%u: %s", sl->serial, carve_status_str(st));
        } else if (st != (known ? CARVE_OK : CARVE_ERR_INVALID)) {
            fail("forget of live x%u (%s): %s", sl->serial, known ? "registered" : "never registered",
                 carve_status_str(st));
        } else {
            /* Its buffers can be freed only directly now; then it goes. */
            pthread_mutex_lock(&g_pool_lock);
            for (int i = 0; i < g_npool;) {
                if (g_pool[i].slot == s && g_pool[i].serial == sl->serial) {
                    if (!intact(g_pool[i].p, g_pool[i].size, g_pool[i].tag))
                        fail("buffer of x%u overwritten while live", sl->serial);
                    if (carve_route_free(g_pool[i].p, 0) != CARVE_ERR_BAD_POINTER)
                        fail("a buffer of forgotten x%u was freed through the routes", sl->serial);
                    g_pool[i] = g_pool[--g_npool];
                } else {
                    i++;
                }
            }
            pthread_mutex_unlock(&g_pool_lock);
            carve_arena_destroy(sl->a); /* frees whatever it held */
            sl->state = EMPTY;
            __atomic_store_n(&sl->live, 0, __ATOMIC_RELAXED); /* buffers taken out meanwhile went too */
        }
    }
    pthread_rwlock_unlock(&sl->lk);
    pthread_rwlock_unlock(&g_dev_lock);
}

static void op_device(worker *w) {
    pthread_rwlock_wrlock(&g_dev_lock);
    if (g_dev_slot >= 0) {
        slot *sl = &g_slots[g_dev_slot];
        carve_status st = carve_route_device(0, sl->a, NULL);
        if (st != CARVE_OK)
            fail("clearing device 0's route x%u: %s", sl->serial, carve_status_str(st));
        g_dev_slot = -1;
    } else {
        int s = (int)test_rng_below(&w->rng, NSLOTS);
        slot *sl = &g_slots[s];
        pthread_rwlock_rdlock(&sl->lk);
        if (sl->state == LIVE) {
            carve_status st = carve_route_device(0, NULL, sl->a);
            if (st != CARVE_OK)
                fail("device 0's route to live x%u: %s: %s", sl->serial, carve_status_str(st),
                     carve_last_error(NULL));
            else
                g_dev_slot = s, g_dev_serial = sl->serial;
        }
        pthread_rwlock_unlock(&sl->lk);
    }
    if (g_dev_slot >= 0 && carve_route_device_current(0) != g_slots[g_dev_slot].a)
        fail("device 0's route is not the one set");
    pthread_rwlock_unlock(&g_dev_lock);
}

static void *run(void *arg) {
    worker *w = arg;
    for (long i = 0; i < w->ops; i++) {
        uint64_t k = test_rng_below(&w->rng, 100);
        int kind = k < 4 ? 0 : k < 14 ? 1 : k < 22 ? 2 : k < 44 ? 3 : k < 52 ? 4 : k < 76 ? 5 : k < 79 ? 6 : k < 83 ? 7
                 : k < 86 ? 8 : k < 88 ? 9 : k < 90 ? 10 : 5;
        switch (kind) {
        case 0: op_create(w); break;
        case 1: op_push(w); break;
        case 2: op_pop(w); break;
        case 3: op_alloc_routed(w); break;
        case 4: op_alloc_explicit(w); break;
        case 5: op_free(w); break;
        case 6: op_record_stream(w); break;
        case 7: op_retire(w); break;
        case 8: op_forget(w); break;
        case 9: op_device(w); break;
        case 10: {
            carve_status st = carve_route_empty_caches();
            if (st != CARVE_OK && !ok_failure(st))
                fail("empty_caches: %s", carve_status_str(st));
            break;
        }
        }
        __atomic_add_fetch(&g_counts[kind], 1, __ATOMIC_RELAXED);
        uint64_t y = test_rng_below(&w->rng, 16);
        if (y == 0)
            sched_yield();
        else if (y == 1)
            for (volatile int spin = (int)test_rng_below(&w->rng, 2000); spin > 0; spin--)
                ;
    }
    return NULL; /* exits with its routes still pushed */
}

static void round_of(uint64_t seed, long ops) {
    g_seed = seed;
    int record = seed % 2 == 0;
    g_record = record;
    g_nshadow = 0;
    if (record)
        CHECK_OK(NULL, carve_route_set_recorder(rec_alloc, rec_free, NULL));
    worker ws[NT];
    pthread_t t[NT];
    for (int i = 0; i < NT; i++) {
        memset(&ws[i], 0, sizeof(ws[i]));
        ws[i].me = i;
        ws[i].ops = ops;
        test_rng_seed(&ws[i].rng, seed * 7919 + (uint64_t)i);
        pthread_create(&t[i], NULL, run, &ws[i]);
    }
    for (int i = 0; i < NT; i++)
        pthread_join(t[i], NULL);

    /* Wind down: the device's route cleared, every buffer freed, every live
     * arena retired; then none may remain. */
    if (g_dev_slot >= 0)
        CHECK_OK(NULL, carve_route_device(0, g_slots[g_dev_slot].a, NULL));
    g_dev_slot = -1;
    for (int tries = 0; g_npool && tries < 100; tries++) {
        for (int i = 0; i < g_npool;) {
            buf *b = &g_pool[i];
            slot *sl = &g_slots[b->slot];
            carve_status st = sl->serial == b->serial ? carve_route_free(b->p, 0) : CARVE_OK;
            if (st == CARVE_OK) {
                sl->live--;
                *b = g_pool[--g_npool];
            } else {
                CHECK(st == CARVE_ERR_BACKEND);
                i++;
            }
        }
    }
    CHECK(g_npool == 0);
    for (int s = 0; s < NSLOTS; s++) {
        slot *sl = &g_slots[s];
        if (sl->state == LIVE)
            CHECK_OK(NULL, carve_route_retire(sl->a, NULL));
        CHECK(sl->live == 0);
        sl->state = EMPTY;
        sl->a = NULL;
    }
    int made = g_nmade < 4096 ? g_nmade : 4096;
    for (int i = 0; i < made; i++)
        if (carve_route_known(g_made[i])) {
            fail("arena %p outlived the round (retired, never destroyed)", (void *)g_made[i]);
            break;
        }
    g_nmade = 0;
    if (record) {
        CHECK_OK(NULL, carve_route_set_recorder(NULL, NULL, NULL));
        if (g_rec_errors || g_nshadow)
            fail("the recorder heard %lu frees of nothing live or allocations of live ids, and %d allocations "
                 "never freed", g_rec_errors, g_nshadow);
        g_rec_errors = 0;
    }
}

int main(void) {
    const char *e = getenv("CARVE_EXPLORE_SEEDS");
    int seeds = e ? atoi(e) : 6;
    e = getenv("CARVE_EXPLORE_OPS");
    long ops = e ? atol(e) : 3000;
    uint64_t first = test_seed(1);
    for (int s = 0; s < NSLOTS; s++)
        pthread_rwlock_init(&g_slots[s].lk, NULL);
    for (int i = 0; i < seeds; i++)
        round_of(first + (uint64_t)i, ops);
    static const char *names[] = {"create", "push", "pop", "alloc routed", "alloc explicit", "free", "record_stream",
                                  "retire", "forget", "device route", "empty_caches"};
    printf("explore_route: %d seeds from %llu, %ld ops per thread, %d threads:", seeds, (unsigned long long)first,
           ops, NT);
    for (int k = 0; k < 11; k++)
        printf(" %s %lu%s", names[k], g_counts[k], k < 10 ? "," : "\n");
    printf("explore_route: explicit allocations refused for retired arenas (perhaps destroyed): %lu\n", g_stale);
    CHECK(g_errors == 0);
    return test_finish();
}
