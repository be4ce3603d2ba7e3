/*
 * graph.c — graph pools: memory private to the CUDA graphs captured into
 * it, valid for every replay until the program releases the pool.
 *
 * The one idea: a graph pool is an ordinary pool whose key is no stream
 * (streams.h), so that carve_alloc finds it only while the program routes a
 * stream to it (the route table, consulted by the pool lookup's slow path;
 * changing a route renames the arena for the threads' pool caches, so none
 * keeps the stream's old pool). Its memory never leaves it while it lives:
 * no span goes back to the heap, nothing is unmapped and no event is
 * recorded for it (pool.c, vmm.c, the event door in types.h), so what a
 * captured graph was given stays its own for every replay. Inside the
 * capture carve waits for the device, records and gives back nothing; a
 * graph pool brings in what it lacks (alloc.c pool_take; backend calls in
 * relaxed capture mode), which stays its own like the rest. A program that
 * runs its step once before capturing finds the memory already in the
 * pool, freed by that first run in the same order.
 */
#include <string.h>

#include "engine/error.h"
#include "engine/pool.h"
#include "engine/reclaim.h"

/* pools_lock held: g's pool if it is a graph pool of a (live or released),
 * else NULL. g is compared, never read, until found. */
static carve_pool *graph_of(carve_arena *a, carve_graph_pool *g) {
    for (carve_pool *p = a->pools; p; p = p->next_all)
        if ((void *)p == (void *)g && ((uintptr_t)p->stream & CARVE_KEY_MASK) == CARVE_KEY_GRAPH)
            return p;
    return NULL;
}

carve_status carve_graph_pool_create(carve_arena *a, carve_graph_pool **out) {
    if (out)
        *out = NULL;
    if (!a || !out)
        return carve_fail(a, CARVE_ERR_INVALID, "carve_graph_pool_create: NULL argument");
    carve_pool *p = carve_pool_lookup_slow(a, carve_graph_key());
    if (!p)
        return carve_fail_host(a, CARVE_ERR_OOM, 1, "carve_graph_pool_create: host memory exhausted");
    CARVE_STORE_REL(&p->graph, 1);
    *out = (carve_graph_pool *)(void *)p;
    return CARVE_OK;
}

carve_status carve_graph_pool_begin(carve_arena *a, carve_graph_pool *g, carve_stream stream) {
    if (!a || !g)
        return carve_fail(a, CARVE_ERR_INVALID, "carve_graph_pool_begin: NULL argument");
    carve_stream key = stream == CARVE_STREAM_PER_THREAD ? carve_thread_stream() : stream;
    const char *why = NULL;
    carve_mutex_lock(&a->pools_lock);
    carve_pool *p = graph_of(a, g);
    if (!p)
        why = "not a graph pool of this arena";
    else if (!CARVE_LOAD(&p->graph))
        why = "the graph pool was released";
    else if (p->routed)
        why = "the graph pool has a stream routed to it already";
    else if (a->nroutes == CARVE_MAX_ROUTES)
        why = "too many streams routed to graph pools at once (16)";
    for (unsigned i = 0; !why && i < a->nroutes; i++)
        if (a->routes[i].stream == key)
            why = "the stream is routed to a graph pool already";
    if (!why) {
        a->routes[a->nroutes].stream = key;
        a->routes[a->nroutes].pool = p;
        CARVE_STORE(&p->route, key);
        CARVE_STORE(&p->routed, 1);
        CARVE_STORE_REL(&a->nroutes, a->nroutes + 1);
        CARVE_STORE_REL(&a->cache_id, carve_cache_id()); /* no thread keeps the stream's own pool */
    }
    carve_mutex_unlock(&a->pools_lock);
    if (why)
        return carve_fail(a, CARVE_ERR_INVALID, "carve_graph_pool_begin(stream %p): %s", (void *)stream, why);
    return CARVE_OK;
}

carve_status carve_graph_pool_end(carve_arena *a, carve_graph_pool *g, carve_stream stream) {
    if (!a || !g)
        return carve_fail(a, CARVE_ERR_INVALID, "carve_graph_pool_end: NULL argument");
    carve_stream key = stream == CARVE_STREAM_PER_THREAD ? carve_thread_stream() : stream;
    int found = 0;
    carve_mutex_lock(&a->pools_lock);
    carve_pool *p = graph_of(a, g);
    for (unsigned i = 0; p && i < a->nroutes && !found; i++)
        if (a->routes[i].stream == key && a->routes[i].pool == p) {
            a->routes[i] = a->routes[a->nroutes - 1];
            CARVE_STORE_REL(&a->nroutes, a->nroutes - 1);
            CARVE_STORE(&p->routed, 0);
            CARVE_STORE_REL(&a->cache_id, carve_cache_id()); /* the stream's own pool again */
            found = 1;
        }
    carve_mutex_unlock(&a->pools_lock);
    if (!found)
        return carve_fail(a, CARVE_ERR_INVALID, "carve_graph_pool_end(stream %p): the stream is not routed to "
                          "this graph pool", (void *)stream);
    return CARVE_OK;
}

/* Why g cannot be released now, or NULL (pools_lock held). */
static const char *release_refused(carve_pool *p) {
    if (!p)
        return "not a graph pool of this arena";
    if (!CARVE_LOAD(&p->graph))
        return "released already";
    if (p->routed)
        return "a stream is still routed to it (carve_graph_pool_end first)";
    return NULL;
}

carve_status carve_graph_pool_release(carve_arena *a, carve_graph_pool *g) {
    if (!a || !g)
        return carve_fail(a, CARVE_ERR_INVALID, "carve_graph_pool_release: NULL argument");
    carve_mutex_lock(&a->pools_lock);
    const char *why = release_refused(graph_of(a, g));
    carve_mutex_unlock(&a->pools_lock);
    if (why)
        return carve_fail(a, CARVE_ERR_INVALID, "carve_graph_pool_release: %s", why);
    /* The replays queued before the release finish first, while the pool
     * is still a graph pool that no other stream takes memory from; only
     * then does it become an ordinary pool. */
    carve_status st = carve_wait_device(a, NULL);
    if (st != CARVE_OK)
        return carve_fail_host(a, st, carve_backend_host(), "carve_graph_pool_release: waiting for the device failed: %s",
                               carve_backend_msg());
    carve_mutex_lock(&a->pools_lock);
    carve_pool *p = graph_of(a, g);
    if (!(why = release_refused(p))) { /* an ordinary pool from now on, whose stream records nothing */
        carve_spin_lock(&p->lock);
        CARVE_STORE_REL(&p->graph, 0);
        carve_spin_unlock(&p->lock);
    }
    carve_mutex_unlock(&a->pools_lock);
    if (why)
        return carve_fail(a, CARVE_ERR_INVALID, "carve_graph_pool_release: %s", why);
    /* Its free memory goes back to the heap, for every stream. */
    st = carve_reclaim(a, CARVE_RECLAIM_WAIT, NULL);
    if (st != CARVE_OK)
        return carve_fail_host(a, st, carve_note_is_host(), "carve_graph_pool_release: %s", carve_note_get());
    return CARVE_OK;
}

carve_status carve_sim_set_capturing(carve_arena *a, carve_stream stream, int on) {
    if (!a)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_sim_set_capturing: arena is NULL");
    if (a->be.kind != CARVE_BACKEND_HOST && a->be.kind != CARVE_BACKEND_VIRTUAL)
        return carve_fail(a, CARVE_ERR_INVALID, "carve_sim_set_capturing: the %s backend asks the driver",
                          carve_backend_str(a->be.kind));
    carve_be *be = &a->be;
    carve_status st = CARVE_OK;
    carve_mutex_lock(&a->pools_lock);
    unsigned n = be->sim_ncapturing, i = 0;
    while (i < n && be->sim_capturing[i] != stream)
        i++;
    if (on && i == n) {
        if (n == sizeof(be->sim_capturing) / sizeof(be->sim_capturing[0]))
            st = CARVE_ERR_INVALID;
        else {
            CARVE_STORE(&be->sim_capturing[n], stream);
            CARVE_STORE_REL(&be->sim_ncapturing, n + 1);
        }
    } else if (!on && i < n) {
        CARVE_STORE(&be->sim_capturing[i], be->sim_capturing[n - 1]);
        CARVE_STORE_REL(&be->sim_ncapturing, n - 1);
    }
    carve_mutex_unlock(&a->pools_lock);
    if (st != CARVE_OK)
        return carve_fail(a, st, "carve_sim_set_capturing: 16 streams are marked already");
    return CARVE_OK;
}
