/*
 * heap.h — the arena heap (heap.c): segments from the backend, cut into
 * spans for the pools at 2 MiB granularity. The heap lock is held on entry
 * unless a function says otherwise.
 */
#ifndef CARVE_ENGINE_HEAP_H
#define CARVE_ENGINE_HEAP_H

#include "engine/types.h"

carve_status carve_heap_init(carve_arena *a) CARVE_INTERNAL;
/* Release every segment (no lock: the arena is being destroyed). */
void carve_heap_destroy(carve_arena *a) CARVE_INTERNAL;
/* Take a span of class cls of at least need bytes (want if a free range
 * has it) for pool p from a range p may use now. Large spans come from the
 * low end of a range, small ones from the high end, so a stream's large
 * spans stay contiguous and can grow with carve_heap_extend. NULL when
 * none; *st says CARVE_OK (nothing eligible) or CARVE_ERR_OOM (host
 * metadata). */
carve_block *carve_heap_take(carve_arena *a, carve_pool *p, unsigned cls, size_t want, size_t need,
                             carve_status *st) CARVE_INTERNAL;
/* Give [lo, hi) of span back as a free range: whole granules at its front,
 * at its back or inside it, never all of it, in which no pool block is live
 * and which holds nothing another stream could still be using (no memory,
 * in virtual-memory mode; after a device synchronization, in segments
 * mode). The range is clean: any stream may take it at once. Cut from the
 * inside, span keeps the part before the range and the part after it
 * becomes a new span of the same pool, returned in *right (its first, last
 * and nlive are the caller's to set, as are the blocks of both). 0 on
 * success; -1 when host memory ran out for the records (nothing changed). */
int carve_heap_cut(carve_arena *a, carve_block *span, uintptr_t lo, uintptr_t hi, carve_block **right) CARVE_INTERNAL;
/* Virtual-memory mode: the whole granules [lo, hi) of span, mapped, free
 * (in no pool block's use) and done with by the device (every granule a
 * completed fence of span's stream covers), become a new span of pool to
 * as they are, still mapped: memory moves to another stream with no driver
 * call. Cut as carve_heap_cut cuts (never all of span; *right likewise).
 * The new span's blocks are the caller's to set; its pool's lock and
 * span's pool's lock are held. NULL when host memory ran out (nothing
 * changed). */
carve_block *carve_heap_move(carve_arena *a, carve_block *span, uintptr_t lo, uintptr_t hi, carve_pool *to,
                             carve_block **right) CARVE_INTERNAL;
/* Grow span into the free range right after it, if its stream may use that
 * range and it has at least need bytes (want preferred). Returns the bytes
 * added (0: none). */
size_t carve_heap_extend(carve_arena *a, carve_block *span, size_t need, size_t want) CARVE_INTERNAL;
/* Give an empty span back; ev (owned by the heap from now on, NULL when the
 * span is clean) completes when work queued on the span's stream before
 * the return has completed, and span->u.r.seq is its number (pool.c
 * numbers an empty-span event when it records it). */
void carve_heap_give(carve_arena *a, carve_block *span, void *ev) CARVE_INTERNAL;
/* Reserve a new segment to fit need bytes (want preferred); in
 * virtual-memory mode, another piece of address space (never refused for
 * the limit: only mapping counts against it). Segments mode gives fully
 * free segments back first where the new one would raise the reserved peak,
 * unless a stream capture is underway (carve_capture_underway, served: the
 * stream of the call, or NULL). Drops and retakes the heap lock around the
 * backend call. */
carve_status carve_heap_grow(carve_arena *a, size_t want, size_t need, carve_stream served) CARVE_INTERNAL;
/* Wait for every pending free range's event; the ranges become usable by
 * every stream and merge with their neighbours. A range whose wait the
 * backend refuses (during a stream capture) keeps its event. */
void carve_heap_sync(carve_arena *a) CARVE_INTERNAL;
/* Give fully free segments back to the backend; drops the heap lock around
 * backend calls. CARVE_ERR_BACKEND if one release failed (that segment is
 * kept). */
carve_status carve_heap_release_free(carve_arena *a) CARVE_INTERNAL;
size_t carve_heap_largest_free(const carve_arena *a) CARVE_INTERNAL;

#endif
