/*
 * streams.c — the keys of streams.h: counters, never reset, so that a key
 * is never reused by a later thread (whose per-thread stream is another
 * stream, while work of the first may still be queued) or graph pool.
 */
#include "engine/streams.h"

static uint64_t g_next_thread_key, g_next_graph_key, g_next_cache_id;
static __thread uintptr_t tls_key;

carve_stream carve_thread_stream(void) {
    if (CARVE_UNLIKELY(!tls_key)) {
        uint64_t n = __atomic_add_fetch(&g_next_thread_key, 1, __ATOMIC_RELAXED);
        tls_key = ((uintptr_t)n << 4) | CARVE_KEY_THREAD;
    }
    return (carve_stream)tls_key;
}

carve_stream carve_graph_key(void) {
    uint64_t n = __atomic_add_fetch(&g_next_graph_key, 1, __ATOMIC_RELAXED);
    return (carve_stream)(((uintptr_t)n << 4) | CARVE_KEY_GRAPH);
}

/* Arena ids count up from 1; these count down from the top bit. */
uint64_t carve_cache_id(void) {
    return ((uint64_t)1 << 63) | __atomic_add_fetch(&g_next_cache_id, 1, __ATOMIC_RELAXED);
}
