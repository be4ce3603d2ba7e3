/*
 * streams.h — the stream keys carve makes up (streams.c): a key of its own
 * for each thread's per-thread default stream (cudaStreamPerThread names a
 * different stream on every thread, so one pool for it would let one
 * thread reuse memory another thread's stream may still be using).
 *
 * A made-up key names a pool; the backend never sees it. Real stream
 * handles are pointers (8-byte aligned) or the small constants 0x1 (legacy)
 * and 0x2 (per-thread), so a key whose low four bits are 0x4 is none of
 * them. The event door (types.h) turns the calling thread's own key back
 * into cudaStreamPerThread, and refuses any other thread's: an event
 * recorded on cudaStreamPerThread from another thread would land on that
 * thread's stream. Graph pools (graph.c) are keyed the same way, with the
 * low four bits 0xC: no event is ever recorded for them.
 */
#ifndef CARVE_ENGINE_STREAMS_H
#define CARVE_ENGINE_STREAMS_H

#include "base/util.h"
#include "carve.h"

#define CARVE_KEY_MASK ((uintptr_t)0xF)
#define CARVE_KEY_THREAD ((uintptr_t)0x4)
#define CARVE_KEY_GRAPH ((uintptr_t)0xC) /* a graph pool's (graph.c): no stream at all */

/* Not a stream: a buffer's use that carve_free_after_event ordered by the
 * program's event (its entry holds the event already). Key 0 of the
 * per-thread kind, which carve_thread_stream never gives. */
#define CARVE_KEY_NONE ((carve_stream)CARVE_KEY_THREAD)

/* 1 when s is a key carve made up (never a real stream handle). */
static inline int carve_stream_made_up(carve_stream s) {
    return ((uintptr_t)s & 0x7) == CARVE_KEY_THREAD; /* the low nibble 0x4 or 0xC */
}

/* 1 when s is the legacy default stream: NULL, or cudaStreamLegacy (0x1). */
static inline int carve_stream_legacy(carve_stream s) { return (uintptr_t)s <= 1; }

/* The calling thread's key for its per-thread default stream: made on the
 * thread's first call and never given to another thread, even after this
 * one exits. Thread-safe. */
carve_stream carve_thread_stream(void) CARVE_INTERNAL;

/* A new key for a graph pool; never a thread's, never reused. */
carve_stream carve_graph_key(void) CARVE_INTERNAL;
/* A new value for an arena's cache_id (types.h), never an arena's id. */
uint64_t carve_cache_id(void) CARVE_INTERNAL;

/* The stream a pool key means to the program: cudaStreamPerThread for a
 * per-thread key, the key itself otherwise. */
static inline carve_stream carve_stream_public(carve_stream s) {
    return ((uintptr_t)s & CARVE_KEY_MASK) == CARVE_KEY_THREAD && s != CARVE_KEY_NONE ? CARVE_STREAM_PER_THREAD : s;
}

#endif
