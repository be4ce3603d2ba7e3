/*
 * route.c — which arena a framework's allocation goes to, and which arena a
 * free comes back to: the per-thread routing stack, the per-device route of
 * threads that route nowhere, the registry of routed arenas, and retired
 * arenas destroyed by the free of their last buffer.
 *
 * The one idea: every arena a routed call may touch is in one registry under
 * a reader-writer lock. Allocations and frees hold it for reading across
 * their carve_alloc / carve_free, so they run in parallel; registering,
 * retiring, forgetting and destroying take it for writing, which waits for
 * every call in flight. An arena can therefore be destroyed by whichever
 * thread frees its last buffer without any other thread still holding it.
 * Each registration gets a number that is never reused (its generation), and
 * a routing stack remembers the generation it pushed, not only the address:
 * an arena forgotten, or retired and gone, is never confused with a newer
 * arena that malloc put at the same address. Default arenas (carve_device_arena)
 * are carve's and never die while routed calls run, so they are never
 * registered: a routing stack or a device route names one with generation
 * 0, calls that reach only them skip the lock (and when the registry is
 * empty, skip the search), and retiring or forgetting one is refused.
 *
 * Whether the last buffer of a retired arena is gone is decided under the
 * write lock, when no free is in flight, so two threads freeing its last two
 * buffers cannot each see the other's buffer as still live. An arena is
 * destroyed outside the lock (destroying may wait for the device), so while
 * that runs its address is listed as dying, and registering that address
 * waits until the destruction is over: only then can carve tell whether a
 * new arena lives there.
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "carve_frameworks.h"
#include "config/conf.h"
#include "device/device.h"
#include "engine/alloc.h"
#include "engine/error.h"
#include "engine/live.h"
#include "frameworks/record.h"

typedef struct route_entry {
    carve_arena *arena;
    uint64_t gen; /* this registration's number: never reused */
    int cuda;     /* a CUDA backend: takes only requests for its own device */
    int device;
    int retired;  /* destroyed when its last buffer is freed */
} route_entry;

/* An arena as a routing stack or a device route names it; gen 0 (never given
 * to a registration) names a device's default arena, which is not
 * registered. */
typedef struct route_ref {
    carve_arena *arena;
    uint64_t gen;
} route_ref;

/* Writer-preferring, so that a stream of allocations cannot starve a retire. */
static pthread_rwlock_t g_lock = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
static route_entry *g_ent;
static size_t g_n, g_cap; /* under g_lock; g_n also read without it, as a hint */
static uint64_t g_gen;    /* under the write lock: the last generation given */
static uint64_t g_used;   /* atomic: bit d = device d's default arena served an allocation */
static route_ref g_dev[CARVE_MAX_DEVICES]; /* under g_lock: the device routes */

/* An arena being destroyed outside the lock; the node lives on the
 * destroying thread's stack. */
typedef struct dying {
    const carve_arena *arena;
    struct dying *next;
} dying;
static dying *g_dying; /* under g_lock */
static int g_ndev;        /* atomic hint: device routes set */

/* The routing stack lives on the heap, one per thread that pushes, found
 * through one thread-local pointer: libcarve's thread-local block must stay
 * small, since an interpreter that dlopens it (Python's ctypes) has only a
 * few hundred bytes of static TLS to spare. A key's destructor frees it at
 * thread exit and clears the pointer, so a thread-exit destructor that runs
 * later and routes gets a fresh stack (freed in the next round of
 * destructors), never the freed one. */
typedef struct route_stack {
    int depth;
    route_ref a[CARVE_ROUTE_DEPTH];
} route_stack;

static __thread route_stack *tls_route;
static pthread_key_t g_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

static void stack_free(void *p) {
    if (tls_route == p)
        tls_route = NULL;
    free(p);
}

static void key_init(void) { (void)pthread_key_create(&g_key, stack_free); }

/* The calling thread's stack, made on first use; NULL when host memory ran out. */
static route_stack *my_stack(void) {
    if (CARVE_LIKELY(tls_route != NULL))
        return tls_route;
    pthread_once(&g_key_once, key_init);
    route_stack *s = calloc(1, sizeof(*s));
    if (s && pthread_setspecific(g_key, s) != 0) {
        free(s);
        s = NULL;
    }
    tls_route = s;
    return s;
}

/* The top of the calling thread's stack, or NULL. */
static const route_ref *top(void) {
    route_stack *rs = tls_route;
    return rs && rs->depth ? &rs->a[rs->depth - 1] : NULL;
}

/* The failure of a call on arena a, re-tagged so that carve_last_error(NULL)
 * explains it (a framework's callback has no arena to ask about). */
static carve_status retag(const carve_arena *a, carve_status st) {
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s", carve_last_error(a));
    carve_error_info e;
    carve_last_error_info(a, &e);
    return carve_fail_host(NULL, st, e.host_memory, "%s", msg);
}

/* Lock held (either way). */
static route_entry *find(const carve_arena *a) {
    for (size_t i = 0; i < g_n; i++)
        if (g_ent[i].arena == a)
            return &g_ent[i];
    return NULL;
}

/* Lock held. The entry of that registration, NULL when it is gone. */
static route_entry *find_ref(const route_ref *r) {
    route_entry *e = find(r->arena);
    return e && e->gen == r->gen ? e : NULL;
}

/* Lock held. The device whose route names e, or -1. */
static int device_route_of(const route_entry *e) {
    if (!CARVE_LOAD(&g_ndev))
        return -1;
    for (int d = 0; d < CARVE_MAX_DEVICES; d++)
        if (g_dev[d].arena == e->arena && g_dev[d].gen == e->gen)
            return d;
    return -1;
}

/* Write lock held. */
static void drop(route_entry *e) {
    *e = g_ent[g_n - 1];
    CARVE_STORE(&g_n, g_n - 1);
}

/* Write lock held. A new entry for the live arena a, or NULL when host memory
 * ran out. */
static route_entry *add(carve_arena *a) {
    if (g_n == g_cap) {
        size_t cap = g_cap ? 2 * g_cap : 8;
        route_entry *n = realloc(g_ent, cap * sizeof(*n));
        if (!n)
            return NULL;
        g_ent = n;
        g_cap = cap;
    }
    carve_config c;
    carve_arena_get_config(a, &c);
    route_entry *e = &g_ent[g_n];
    e->arena = a;
    e->gen = ++g_gen;
    e->cuda = c.backend == CARVE_BACKEND_CUDA || c.backend == CARVE_BACKEND_CUDA_DRIVER;
    e->device = c.device;
    e->retired = 0;
    CARVE_STORE(&g_n, g_n + 1);
    return e;
}

static carve_status not_live(const char *fn, const carve_arena *a) {
    return carve_fail(NULL, CARVE_ERR_INVALID,
                      "%s: %p is not a live arena (destroyed, or retired and gone with its last buffer)", fn,
                      (const void *)a);
}

static carve_status retired_arena(const char *fn, const carve_arena *a) {
    return carve_fail(NULL, CARVE_ERR_INVALID, "%s: arena %p is retired", fn, (const void *)a);
}

static carve_status default_arena(const char *fn, const carve_arena *a, int device) {
    return carve_fail(NULL, CARVE_ERR_INVALID,
                      "%s: arena %p is device %d's default arena, which carve owns (carve_device_arenas_release "
                      "destroys it)", fn, (const void *)a, device);
}

/* Lock held. 1 when a is being destroyed right now. */
static int is_dying(const carve_arena *a) {
    for (dying *d = g_dying; d; d = d->next)
        if (d->arena == a)
            return 1;
    return 0;
}

/* Write lock held. a's entry, registering it if it is a live arena; NULL with
 * the failure set when it is not live or host memory ran out, NULL with
 * *st CARVE_OK while a is being destroyed (drop the lock, yield, try again). */
static route_entry *find_or_add(carve_arena *a, const char *fn, carve_status *st) {
    route_entry *e = find(a);
    if (e)
        return e;
    *st = CARVE_OK;
    if (is_dying(a))
        return NULL;
    if (!carve_arena_live(a)) {
        *st = not_live(fn, a);
        return NULL;
    }
    if (!(e = add(a)))
        *st = carve_fail_host(NULL, CARVE_ERR_OOM, 1, "%s: host memory for the arena registry ran out", fn);
    return e;
}

/* The registration of a (made now if there is none), in *ref; a device's
 * default arena gets {a, 0} and no registration. Fails for an arena that is
 * retired or not live. */
static carve_status registration(carve_arena *a, const char *fn, route_ref *ref) {
    if (carve_device_of_default(a) >= 0) {
        *ref = (route_ref){a, 0};
        return CARVE_OK;
    }
    pthread_rwlock_rdlock(&g_lock);
    route_entry *e = find(a);
    int retired = e && e->retired;
    if (e)
        *ref = (route_ref){a, e->gen};
    pthread_rwlock_unlock(&g_lock);
    if (e)
        return retired ? retired_arena(fn, a) : CARVE_OK;
    carve_status st = CARVE_OK;
    for (;;) {
        pthread_rwlock_wrlock(&g_lock);
        e = find_or_add(a, fn, &st);
        retired = e && e->retired;
        if (e)
            *ref = (route_ref){a, e->gen};
        pthread_rwlock_unlock(&g_lock);
        if (e || st != CARVE_OK)
            break;
        sched_yield(); /* a is being destroyed: then it is gone, or a new arena is there */
    }
    if (!e)
        return st;
    return retired ? retired_arena(fn, a) : CARVE_OK;
}

/* Write lock held, e just dropped: destroy its arena outside the lock, the
 * address listed as dying meanwhile. Returns with the lock released. */
static void destroy_unlocked(carve_arena *a) {
    dying me = {a, g_dying};
    g_dying = &me;
    pthread_rwlock_unlock(&g_lock);
    carve_arena_destroy(a);
    pthread_rwlock_wrlock(&g_lock);
    for (dying **d = &g_dying; *d; d = &(*d)->next)
        if (*d == &me) {
            *d = me.next;
            break;
        }
    pthread_rwlock_unlock(&g_lock);
}

/* Destroy the arena of registration r if it is still registered, retired
 * and empty. Under the write lock no free is in flight, so the count of
 * live buffers is exact. */
static void reap(route_ref r) {
    pthread_rwlock_wrlock(&g_lock);
    route_entry *e = find_ref(&r);
    if (e && e->retired && carve_memory_allocated(r.arena) == 0) {
        drop(e);
        destroy_unlocked(r.arena);
        return;
    }
    pthread_rwlock_unlock(&g_lock);
}

carve_status carve_route_push(carve_arena *a) {
    if (!a)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_route_push: arena is NULL");
    route_stack *rs = my_stack();
    if (!rs)
        return carve_fail_host(NULL, CARVE_ERR_OOM, 1, "carve_route_push: host memory for the routing stack ran out");
    if (rs->depth >= CARVE_ROUTE_DEPTH)
        return carve_fail(NULL, CARVE_ERR_INVALID,
                          "carve_route_push: this thread already routes through %d arenas (the most); "
                          "pop one first", CARVE_ROUTE_DEPTH);
    route_ref ref;
    carve_status st = registration(a, "carve_route_push", &ref);
    if (st != CARVE_OK)
        return st;
    rs->a[rs->depth++] = ref;
    return CARVE_OK;
}

carve_status carve_route_pop(void) {
    route_stack *rs = tls_route;
    if (!rs || rs->depth == 0)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_route_pop: this thread routes to no arena");
    rs->depth--;
    rs->a[rs->depth] = (route_ref){NULL, 0};
    return CARVE_OK;
}

carve_arena *carve_route_current(void) {
    const route_ref *t = top();
    return t ? t->arena : NULL;
}

int carve_route_known(const carve_arena *a) {
    if (!a)
        return 0;
    pthread_rwlock_rdlock(&g_lock);
    int known = find(a) != NULL;
    pthread_rwlock_unlock(&g_lock);
    return known;
}

carve_status carve_route_retire(carve_arena *a, int *destroyed) {
    if (destroyed)
        *destroyed = 0;
    if (!a)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_route_retire: arena is NULL");
    int dflt = carve_device_of_default(a);
    if (dflt >= 0)
        return default_arena("carve_route_retire", a, dflt);
    carve_status st = CARVE_OK;
    const char *why = NULL;
    int dev = -1;
    route_entry *e;
    for (;;) {
        pthread_rwlock_wrlock(&g_lock);
        e = find_or_add(a, "carve_route_retire", &st); /* a fresh registration passes the checks below */
        if (e || st != CARVE_OK)
            break;
        pthread_rwlock_unlock(&g_lock);
        sched_yield();
    }
    if (e && e->retired)
        why = "is already retired";
    else if (e && (dev = device_route_of(e)) >= 0)
        why = "is the route of a device (carve_route_device): clear it first";
    for (int i = 0; !why && e && tls_route && i < tls_route->depth; i++)
        if (tls_route->a[i].arena == a && tls_route->a[i].gen == e->gen)
            why = "is still on this thread's routing stack; pop it first";
    if (!why && e) {
        e->retired = 1;
        if (carve_memory_allocated(a) == 0) {
            drop(e);
            destroy_unlocked(a);
            if (destroyed)
                *destroyed = 1;
            return CARVE_OK;
        }
    }
    pthread_rwlock_unlock(&g_lock);
    if (why)
        return dev >= 0 ? carve_fail(NULL, CARVE_ERR_INVALID, "carve_route_retire: arena %p %s (device %d)",
                                     (void *)a, why, dev)
                        : carve_fail(NULL, CARVE_ERR_INVALID, "carve_route_retire: arena %p %s", (void *)a, why);
    return e ? CARVE_OK : st;
}

carve_status carve_route_forget(carve_arena *a) {
    if (!a)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_route_forget: arena is NULL");
    int dflt = carve_device_of_default(a);
    if (dflt >= 0)
        return default_arena("carve_route_forget", a, dflt);
    pthread_rwlock_wrlock(&g_lock);
    route_entry *e = find(a);
    const char *why = !e            ? "is not registered"
                      : e->retired  ? "is retired (carve destroys it)"
                      : device_route_of(e) >= 0 ? "is the route of a device (carve_route_device): clear it first"
                                                : NULL;
    if (!why)
        drop(e);
    pthread_rwlock_unlock(&g_lock);
    if (why)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_route_forget: arena %p %s", (void *)a, why);
    return CARVE_OK;
}

carve_status carve_route_device(int device, carve_arena *expected, carve_arena *arena) {
    if (device < 0 || device >= CARVE_MAX_DEVICES)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_route_device: device %d is not in 0 .. %d", device,
                          CARVE_MAX_DEVICES - 1);
    int dflt = carve_device_of_default(arena); /* a default arena: routed to unregistered, with gen 0 */
    carve_status st = CARVE_OK;
    route_ref *slot = &g_dev[device];
    carve_arena *cur; /* the route now, copied: find_or_add may move the registry */
    route_entry *e = NULL;
    int had = 0; /* arena was registered before: a failure leaves no registration behind */
    for (;;) {
        pthread_rwlock_wrlock(&g_lock);
        cur = slot->arena; /* registered (such an arena cannot go) or a default arena */
        had = arena && find(arena) != NULL;
        if (cur != expected || !arena || dflt >= 0 ||
            (e = find_or_add(arena, "carve_route_device", &st)) != NULL || st != CARVE_OK)
            break;
        pthread_rwlock_unlock(&g_lock);
        sched_yield();
    }
    if (cur != expected) {
        st = carve_fail(NULL, CARVE_ERR_INVALID, "carve_route_device: device %d routes to %p, not to %p", device,
                        (void *)cur, (void *)expected);
    } else if (dflt >= 0 && dflt != device) {
        st = carve_fail(NULL, CARVE_ERR_INVALID, "carve_route_device: arena %p is device %d's default arena, not "
                        "device %d's", (void *)arena, dflt, device);
    } else if (e) {
        if (e->retired)
            st = retired_arena("carve_route_device", arena);
        else if (e->cuda && e->device != device)
            st = carve_fail(NULL, CARVE_ERR_INVALID,
                            "carve_route_device: arena %p serves device %d, not device %d", (void *)arena,
                            e->device, device);
    }
    if (st != CARVE_OK && e && !had)
        drop(e);
    if (st == CARVE_OK) {
        if (!cur != !arena)
            CARVE_STORE(&g_ndev, CARVE_LOAD(&g_ndev) + (arena ? 1 : -1));
        *slot = !arena ? (route_ref){NULL, 0} : (route_ref){arena, dflt >= 0 ? 0 : e->gen};
    }
    pthread_rwlock_unlock(&g_lock);
    return st;
}

carve_arena *carve_route_device_current(int device) {
    if (device < 0 || device >= CARVE_MAX_DEVICES || !CARVE_LOAD(&g_ndev))
        return NULL;
    pthread_rwlock_rdlock(&g_lock);
    carve_arena *a = g_dev[device].arena;
    pthread_rwlock_unlock(&g_lock);
    return a;
}

/* A device's default arena, if one that served routed allocations exists:
 * never made by asking (after carve_device_arenas_release, g_used may still
 * name a device whose arena is gone). */
static carve_arena *used_default(int device) {
    return device >= 0 && device < CARVE_MAX_DEVICES && (CARVE_LOAD_ACQ(&g_used) & (1ull << device))
               ? carve_device_arena_made(device)
               : NULL;
}

carve_arena *carve_route_default_arena(int device) { return used_default(device); }

/* Allocate from d, the default arena of dev (recorded). */
static carve_status alloc_in_default(carve_arena *d, int dev, size_t size, carve_stream stream, void **out) {
    if (!(CARVE_LOAD(&g_used) & (1ull << dev)))
        __atomic_fetch_or(&g_used, 1ull << dev, __ATOMIC_RELEASE);
    carve_status st = carve_alloc(d, size, stream, out);
    if (st != CARVE_OK)
        return retag(d, st);
    carve_fw_record_alloc(*out, size, stream);
    return CARVE_OK;
}

/* Allocate from the default arena of device (made on first use). */
static carve_status alloc_default(size_t size, int device, carve_stream stream, void **out) {
    carve_arena *d = NULL;
    carve_status st = carve_device_arena(device, &d);
    if (st != CARVE_OK)
        return st;
    return alloc_in_default(d, device, size, stream, out);
}

/* Read lock held. Allocate from e's arena (recorded); a failure is re-tagged
 * under the lock, since a retired arena may go once it is dropped. */
static carve_status alloc_in(route_entry *e, size_t size, carve_stream stream, void **out) {
    carve_status st = carve_alloc(e->arena, size, stream, out);
    if (st == CARVE_OK)
        carve_fw_record_alloc(*out, size, stream);
    else
        st = retag(e->arena, st);
    return st;
}

/* An allocation of a thread that routes nowhere (for device): the device's
 * route when one is set, else the default arena. */
static carve_status alloc_unrouted(size_t size, int device, carve_stream stream, void **out) {
    if (CARVE_LOAD(&g_ndev) && device >= 0 && device < CARVE_MAX_DEVICES) {
        pthread_rwlock_rdlock(&g_lock);
        route_entry *e = g_dev[device].arena ? find_ref(&g_dev[device]) : NULL;
        if (e) {
            carve_status st = alloc_in(e, size, stream, out);
            pthread_rwlock_unlock(&g_lock);
            return st;
        }
        pthread_rwlock_unlock(&g_lock);
    }
    return alloc_default(size, device, stream, out);
}

/* An explicit arena: registered first when it is not yet (a default arena
 * never is). */
static carve_status alloc_explicit(carve_arena *a, size_t size, int device, carve_stream stream, void **out) {
    (void)device;
    pthread_rwlock_rdlock(&g_lock);
    route_entry *e = find(a);
    if (e && !e->retired) {
        carve_status st = alloc_in(e, size, stream, out);
        pthread_rwlock_unlock(&g_lock);
        return st;
    }
    pthread_rwlock_unlock(&g_lock);
    int dflt = e ? -1 : carve_device_of_default(a);
    if (dflt >= 0)
        return alloc_in_default(a, dflt, size, stream, out);
    route_ref ref;
    carve_status st = registration(a, "carve_route_alloc", &ref);
    if (st != CARVE_OK)
        return st;
    pthread_rwlock_rdlock(&g_lock);
    e = find_ref(&ref);
    if (e && !e->retired)
        st = alloc_in(e, size, stream, out);
    else
        st = carve_fail(NULL, CARVE_ERR_INVALID, "carve_route_alloc: arena %p was %s meanwhile", (void *)a,
                        e ? "retired" : "retired or forgotten");
    pthread_rwlock_unlock(&g_lock);
    return st;
}

carve_status carve_route_alloc(carve_arena *arena, size_t size, int device, carve_stream stream, void **out) {
    if (!out)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_route_alloc: out is NULL");
    *out = NULL;
    if (arena)
        return alloc_explicit(arena, size, device, stream, out);
    const route_ref *t = top();
    if (!t)
        return alloc_unrouted(size, device, stream, out);
    route_ref ref = *t;
    if (ref.gen == 0) { /* a default arena: serves its own device's requests */
        int dflt = carve_device_of_default(ref.arena);
        if (dflt == device)
            return alloc_in_default(ref.arena, dflt, size, stream, out);
        if (dflt >= 0)
            return alloc_unrouted(size, device, stream, out);
        return carve_fail(NULL, CARVE_ERR_INVALID,
                          "carve_route_alloc: the arena this thread routes to (%p) is no longer a device's default "
                          "arena (carve_device_arenas_release destroyed it); pop it from the routing stack",
                          (void *)ref.arena);
    }
    pthread_rwlock_rdlock(&g_lock);
    route_entry *e = find_ref(&ref);
    if (!e || e->retired) {
        pthread_rwlock_unlock(&g_lock);
        return carve_fail(NULL, CARVE_ERR_INVALID,
                          "carve_route_alloc: the arena this thread routes to (%p) is %s; "
                          "pop it from the routing stack", (void *)ref.arena,
                          e ? "retired" : "no longer registered (forgotten, or retired and gone)");
    }
    if (e->cuda && e->device != device) {
        pthread_rwlock_unlock(&g_lock);
        return alloc_unrouted(size, device, stream, out);
    }
    carve_status st = alloc_in(e, size, stream, out);
    pthread_rwlock_unlock(&g_lock);
    return st;
}

/* Lock held for reading. The registered arena holding ptr as a live buffer:
 * one lock-free pagemap lookup per arena (the owner's pool lock only for the
 * arena that holds the span). */
static route_entry *registered_owner(const void *ptr) {
    for (size_t i = 0; i < g_n; i++)
        if (carve_buffer_live(g_ent[i].arena, ptr))
            return &g_ent[i];
    return NULL;
}

/* The default arena (among those that served allocations) holding ptr as a
 * live buffer: device's first; every one when device is -1 or misses. */
static carve_arena *default_owner(const void *ptr, int device) {
    uint64_t used = CARVE_LOAD_ACQ(&g_used);
    for (int pass = 0; pass < 2 && used; pass++) {
        for (int d = pass ? 0 : device; d < CARVE_MAX_DEVICES; d++) {
            carve_arena *a = d >= 0 ? used_default(d) : NULL;
            if (a && (pass == 0 || d != device) && carve_buffer_live(a, ptr))
                return a;
            if (!pass)
                break;
        }
    }
    return NULL;
}

static carve_status not_ours(const char *fn, const void *ptr) {
    return carve_fail(NULL, CARVE_ERR_BAD_POINTER,
                      "%s: %p is not a live buffer of any arena carve routes to (already freed, interior, "
                      "or allocated elsewhere)", fn, ptr);
}

/* carve_free, reported to the recorder only when it succeeded. */
static carve_status free_recorded(carve_arena *a, void *ptr) {
    int held = carve_fw_record_free_begin();
    carve_status st = carve_free(a, ptr);
    carve_fw_record_free_end(held, ptr, st == CARVE_OK);
    return st;
}

carve_status carve_route_free(void *ptr, int device) {
    if (!ptr)
        return CARVE_OK;
    if (CARVE_LOAD(&g_n)) {
        pthread_rwlock_rdlock(&g_lock);
        route_entry *e = registered_owner(ptr);
        if (e) {
            route_ref ref = {e->arena, e->gen};
            int retired = e->retired;
            carve_status st = free_recorded(ref.arena, ptr);
            if (st != CARVE_OK)
                st = retag(ref.arena, st);
            pthread_rwlock_unlock(&g_lock);
            if (st == CARVE_OK && retired)
                reap(ref); /* perhaps its last buffer: decided with no free in flight */
            return st;
        }
        pthread_rwlock_unlock(&g_lock);
    }
    carve_arena *d = default_owner(ptr, device);
    if (!d)
        return not_ours("carve_route_free", ptr);
    carve_status st = free_recorded(d, ptr);
    return st == CARVE_OK ? CARVE_OK : retag(d, st);
}

carve_status carve_route_owner(const void *ptr, int device, carve_arena **out) {
    if (!out)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_route_owner: out is NULL");
    *out = NULL;
    if (ptr && CARVE_LOAD(&g_n)) {
        pthread_rwlock_rdlock(&g_lock);
        route_entry *e = registered_owner(ptr);
        *out = e ? e->arena : NULL;
        pthread_rwlock_unlock(&g_lock);
    }
    if (!*out && ptr)
        *out = default_owner(ptr, device);
    return *out ? CARVE_OK : not_ours("carve_route_owner", ptr);
}

carve_status carve_route_record_stream(void *ptr, int device, carve_stream stream) {
    if (ptr && CARVE_LOAD(&g_n)) {
        pthread_rwlock_rdlock(&g_lock);
        route_entry *e = registered_owner(ptr);
        int found = e != NULL;
        carve_status st = e ? carve_record_stream(e->arena, ptr, stream) : CARVE_OK;
        if (st != CARVE_OK)
            st = retag(e->arena, st);
        pthread_rwlock_unlock(&g_lock);
        if (found)
            return st;
    }
    carve_arena *d = ptr ? default_owner(ptr, device) : NULL;
    if (!d)
        return not_ours("carve_route_record_stream", ptr);
    carve_status st = carve_record_stream(d, ptr, stream);
    return st == CARVE_OK ? CARVE_OK : retag(d, st);
}

carve_status carve_route_empty_caches(void) {
    carve_status first = CARVE_OK;
    pthread_rwlock_rdlock(&g_lock);
    for (size_t i = 0; i < g_n; i++) {
        carve_status st = carve_empty_cache(g_ent[i].arena);
        if (st != CARVE_OK && first == CARVE_OK)
            first = retag(g_ent[i].arena, st);
    }
    pthread_rwlock_unlock(&g_lock);
    for (int d = 0; d < CARVE_MAX_DEVICES; d++) {
        carve_arena *a = used_default(d);
        if (a) {
            carve_status st = carve_empty_cache(a);
            if (st != CARVE_OK && first == CARVE_OK)
                first = retag(a, st);
        }
    }
    return first;
}
