/*
 * route.c — which arena a framework's allocation goes to, and which arena a
 * free comes back to: the per-thread routing stack, the registry of routed
 * arenas, and retired arenas destroyed by the free of their last buffer.
 *
 * The one idea: every arena a routed call may touch is in one registry under
 * a reader-writer lock. Allocations and frees hold it for reading across
 * their carve_alloc / carve_free, so they run in parallel; registering,
 * retiring, forgetting and destroying take it for writing, which waits for
 * every call in flight. An arena can therefore be destroyed by whichever
 * thread frees its last buffer without any other thread still holding it.
 * Default arenas never die while routed calls run, so calls that reach only
 * them skip the lock (and when the registry is empty, skip the search).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "carve_frameworks.h"
#include "config/conf.h"
#include "engine/error.h"
#include "frameworks/record.h"

typedef struct route_entry {
    carve_arena *arena;
    int cuda;    /* a CUDA backend: takes only requests for its own device */
    int device;
    int retired; /* destroyed when its last buffer is freed */
} route_entry;

/* Writer-preferring, so that a stream of allocations cannot starve a retire. */
static pthread_rwlock_t g_lock = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
static route_entry *g_ent;
static size_t g_n, g_cap; /* under g_lock; g_n also read without it, as a hint */
static uint64_t g_used;   /* atomic: bit d = device d's default arena served an allocation */

/* The routing stack lives on the heap, one per thread that pushes, found
 * through one thread-local pointer: libcarve's thread-local block must stay
 * small, since an interpreter that dlopens it (Python's ctypes) has only a
 * few hundred bytes of static TLS to spare. A key's destructor frees it. */
typedef struct route_stack {
    int depth;
    carve_arena *a[CARVE_ROUTE_DEPTH];
} route_stack;

static __thread route_stack *tls_route;
static pthread_key_t g_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

static void stack_free(void *p) { free(p); }
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

/* The failure of a call on arena a, re-tagged so that carve_last_error(NULL)
 * explains it (a framework's callback has no arena to ask about). */
static carve_status retag(const carve_arena *a, carve_status st) {
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s", carve_last_error(a));
    return carve_fail(NULL, st, "%s", msg);
}

/* Lock held (either way). */
static route_entry *find(const carve_arena *a) {
    for (size_t i = 0; i < g_n; i++)
        if (g_ent[i].arena == a)
            return &g_ent[i];
    return NULL;
}

/* Write lock held. */
static void drop(route_entry *e) {
    *e = g_ent[g_n - 1];
    CARVE_STORE(&g_n, g_n - 1);
}

/* Write lock held. A new entry for a, or NULL when host memory ran out. */
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
    e->cuda = c.backend == CARVE_BACKEND_CUDA || c.backend == CARVE_BACKEND_CUDA_DRIVER;
    e->device = c.device;
    e->retired = 0;
    CARVE_STORE(&g_n, g_n + 1);
    return e;
}

/* Register a if it is not yet; *retired tells whether it is retired. */
static carve_status ensure_registered(carve_arena *a, const char *fn, int *retired) {
    pthread_rwlock_rdlock(&g_lock);
    route_entry *e = find(a);
    *retired = e && e->retired;
    pthread_rwlock_unlock(&g_lock);
    if (e)
        return CARVE_OK;
    pthread_rwlock_wrlock(&g_lock);
    e = find(a);
    if (!e)
        e = add(a);
    *retired = e && e->retired;
    pthread_rwlock_unlock(&g_lock);
    return e ? CARVE_OK : carve_fail(NULL, CARVE_ERR_OOM, "%s: host memory for the arena registry ran out", fn);
}

/* Destroy a if it is still registered, retired and empty. */
static void reap(carve_arena *a) {
    pthread_rwlock_wrlock(&g_lock);
    route_entry *e = find(a);
    int gone = e && e->retired && carve_memory_allocated(a) == 0;
    if (gone)
        drop(e);
    pthread_rwlock_unlock(&g_lock);
    if (gone)
        carve_arena_destroy(a);
}

carve_status carve_route_push(carve_arena *a) {
    if (!a)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_route_push: arena is NULL");
    route_stack *rs = my_stack();
    if (!rs)
        return carve_fail(NULL, CARVE_ERR_OOM, "carve_route_push: host memory for the routing stack ran out");
    if (rs->depth >= CARVE_ROUTE_DEPTH)
        return carve_fail(NULL, CARVE_ERR_INVALID,
                          "carve_route_push: this thread already routes through %d arenas (the most); "
                          "pop one first", CARVE_ROUTE_DEPTH);
    int retired;
    carve_status st = ensure_registered(a, "carve_route_push", &retired);
    if (st != CARVE_OK)
        return st;
    if (retired)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_route_push: arena %p is retired", (void *)a);
    rs->a[rs->depth++] = a;
    return CARVE_OK;
}

carve_status carve_route_pop(void) {
    route_stack *rs = tls_route;
    if (!rs || rs->depth == 0)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_route_pop: this thread routes to no arena");
    rs->a[--rs->depth] = NULL;
    return CARVE_OK;
}

carve_arena *carve_route_current(void) {
    route_stack *rs = tls_route;
    return rs && rs->depth ? rs->a[rs->depth - 1] : NULL;
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
    for (int i = 0; tls_route && i < tls_route->depth; i++)
        if (tls_route->a[i] == a)
            return carve_fail(NULL, CARVE_ERR_INVALID,
                              "carve_route_retire: arena %p is still on this thread's routing stack; "
                              "pop it first", (void *)a);
    pthread_rwlock_wrlock(&g_lock);
    route_entry *e = find(a);
    if (e && e->retired) {
        pthread_rwlock_unlock(&g_lock);
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_route_retire: arena %p is already retired", (void *)a);
    }
    if (!e && !(e = add(a))) {
        pthread_rwlock_unlock(&g_lock);
        return carve_fail(NULL, CARVE_ERR_OOM, "carve_route_retire: host memory for the arena registry ran out");
    }
    e->retired = 1;
    int gone = carve_memory_allocated(a) == 0;
    if (gone)
        drop(e);
    pthread_rwlock_unlock(&g_lock);
    if (gone) {
        carve_arena_destroy(a);
        if (destroyed)
            *destroyed = 1;
    }
    return CARVE_OK;
}

carve_status carve_route_forget(carve_arena *a) {
    if (!a)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_route_forget: arena is NULL");
    pthread_rwlock_wrlock(&g_lock);
    route_entry *e = find(a);
    const char *why = !e ? "is not registered" : e->retired ? "is retired (carve destroys it)" : NULL;
    if (!why)
        drop(e);
    pthread_rwlock_unlock(&g_lock);
    if (why)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_route_forget: arena %p %s", (void *)a, why);
    return CARVE_OK;
}

/* Allocate from the default arena of device. */
static carve_status alloc_default(size_t size, int device, carve_stream stream, void **out) {
    carve_arena *d = NULL;
    carve_status st = carve_device_arena(device, &d);
    if (st != CARVE_OK)
        return st;
    if (device < CARVE_MAX_DEVICES && !(CARVE_LOAD(&g_used) & (1ull << device)))
        __atomic_fetch_or(&g_used, 1ull << device, __ATOMIC_RELEASE);
    st = carve_alloc(d, size, stream, out);
    if (st != CARVE_OK)
        return retag(d, st);
    carve_fw_record_alloc(*out, size, stream);
    return CARVE_OK;
}

carve_status carve_route_alloc(carve_arena *arena, size_t size, int device, carve_stream stream, void **out) {
    if (!out)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_route_alloc: out is NULL");
    *out = NULL;
    carve_arena *a = arena ? arena : carve_route_current();
    if (!a)
        return alloc_default(size, device, stream, out);
    if (arena) {
        int retired;
        carve_status st = ensure_registered(arena, "carve_route_alloc", &retired);
        if (st != CARVE_OK)
            return st;
    }
    pthread_rwlock_rdlock(&g_lock);
    route_entry *e = find(a);
    if (!e || e->retired) {
        pthread_rwlock_unlock(&g_lock);
        if (arena)
            return carve_fail(NULL, CARVE_ERR_INVALID, "carve_route_alloc: arena %p is %s", (void *)a,
                              e ? "retired" : "no longer registered");
        return carve_fail(NULL, CARVE_ERR_INVALID,
                          "carve_route_alloc: the arena this thread routes to (%p) is %s; "
                          "pop it from the routing stack", (void *)a, e ? "retired" : "no longer registered");
    }
    if (!arena && e->cuda && e->device != device) {
        pthread_rwlock_unlock(&g_lock);
        return alloc_default(size, device, stream, out);
    }
    carve_status st = carve_alloc(a, size, stream, out);
    if (st == CARVE_OK)
        carve_fw_record_alloc(*out, size, stream);
    else
        st = retag(a, st); /* under the lock: a retired arena may go once it is dropped */
    pthread_rwlock_unlock(&g_lock);
    return st;
}

/* Lock held for reading. The registered arena holding ptr as a live buffer. */
static route_entry *registered_owner(const void *ptr) {
    for (size_t i = 0; i < g_n; i++)
        if (carve_arena_contains(g_ent[i].arena, ptr))
            return carve_buffer_info(g_ent[i].arena, ptr, NULL, NULL) == CARVE_OK ? &g_ent[i] : NULL;
    return NULL;
}

/* The default arena (among those that served allocations) holding ptr as a
 * live buffer: device's first; every one when device is -1 or misses. */
static carve_arena *default_owner(const void *ptr, int device) {
    uint64_t used = CARVE_LOAD_ACQ(&g_used);
    for (int pass = 0; pass < 2 && used; pass++) {
        for (int d = pass ? 0 : device; d < CARVE_MAX_DEVICES; d++) {
            carve_arena *a = NULL;
            if (d >= 0 && (used & (1ull << d)) && carve_device_arena(d, &a) == CARVE_OK &&
                carve_arena_contains(a, ptr))
                return carve_buffer_info(a, ptr, NULL, NULL) == CARVE_OK ? a : NULL;
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

carve_status carve_route_free(void *ptr, int device) {
    if (!ptr)
        return CARVE_OK;
    if (CARVE_LOAD(&g_n)) {
        pthread_rwlock_rdlock(&g_lock);
        route_entry *e = registered_owner(ptr);
        if (e) {
            carve_arena *a = e->arena;
            carve_fw_record_free(ptr);
            carve_status st = carve_free(a, ptr);
            int last = st == CARVE_OK && e->retired && carve_memory_allocated(a) == 0;
            if (st != CARVE_OK)
                st = retag(a, st);
            pthread_rwlock_unlock(&g_lock);
            if (st != CARVE_OK)
                return st;
            if (last)
                reap(a);
            return CARVE_OK;
        }
        pthread_rwlock_unlock(&g_lock);
    }
    carve_arena *d = default_owner(ptr, device);
    if (!d)
        return not_ours("carve_route_free", ptr);
    carve_fw_record_free(ptr);
    carve_status st = carve_free(d, ptr);
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
        if (g_ent[i].retired)
            continue;
        carve_status st = carve_empty_cache(g_ent[i].arena);
        if (st != CARVE_OK && first == CARVE_OK)
            first = retag(g_ent[i].arena, st);
    }
    pthread_rwlock_unlock(&g_lock);
    uint64_t used = CARVE_LOAD_ACQ(&g_used);
    for (int d = 0; d < CARVE_MAX_DEVICES; d++) {
        carve_arena *a = NULL;
        if ((used & (1ull << d)) && carve_device_arena(d, &a) == CARVE_OK) {
            carve_status st = carve_empty_cache(a);
            if (st != CARVE_OK && first == CARVE_OK)
                first = retag(a, st);
        }
    }
    return first;
}
