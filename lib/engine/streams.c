/*
 * streams.c — the per-thread keys of streams.h: a counter, never reset, so
 * that a key is never reused by a later thread (whose per-thread stream is
 * another stream, while work of the first may still be queued).
 */
#include "engine/streams.h"

static uint64_t g_next_thread_key;
static __thread uintptr_t tls_key;

carve_stream carve_thread_stream(void) {
    if (CARVE_UNLIKELY(!tls_key)) {
        uint64_t n = __atomic_add_fetch(&g_next_thread_key, 1, __ATOMIC_RELAXED);
        tls_key = ((uintptr_t)n << 4) | CARVE_KEY_THREAD;
    }
    return (carve_stream)tls_key;
}
