/*
 * reclaim.h — giving cached memory back (reclaim.c): every pool returns its
 * empty spans to the heap, and optionally the heap returns fully free
 * segments to the backend. carve_empty_cache and the out-of-memory retry of
 * carve_alloc are its two callers.
 */
#ifndef CARVE_ENGINE_RECLAIM_H
#define CARVE_ENGINE_RECLAIM_H

#include "engine/types.h"

/* Every pool gives its empty spans back to the heap (unmapping free
 * granules in virtual-memory mode). With CARVE_RECLAIM_WAIT, all pools are
 * locked and the device synchronized first, so every stream's cached memory
 * can move; with CARVE_RECLAIM_ROOM as well, every pool then gives back the
 * free room inside its spans that still hold live buffers
 * (carve_pool_give_room), so that the heap's free ranges are all the free
 * room there is; with CARVE_RECLAIM_RELEASE, fully free segments then go
 * back to the backend. served: the stream (pool key) of the call being
 * served, NULL for none (carve_capture_underway). No lock held on entry. */
enum { CARVE_RECLAIM_WAIT = 1, CARVE_RECLAIM_RELEASE = 2, CARVE_RECLAIM_ROOM = 4 };
carve_status carve_reclaim(carve_arena *a, unsigned flags, carve_stream served) CARVE_INTERNAL;
/* 1 when the calling thread's last carve_reclaim with CARVE_RECLAIM_WAIT
 * did not synchronize the device because a stream capture was underway. */
int carve_reclaim_captured(void) CARVE_INTERNAL;

#endif
