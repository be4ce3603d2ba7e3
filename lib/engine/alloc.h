/*
 * alloc.h — what alloc.c offers the layers above besides carve.h's
 * allocation calls: a silent ownership question for callers that ask many
 * arenas about one pointer (the routing layer's frees).
 */
#ifndef CARVE_ENGINE_ALLOC_H
#define CARVE_ENGINE_ALLOC_H

#include "engine/types.h"

/* 1 when ptr is the start of a live buffer of a, else 0 (also for NULL):
 * carve_buffer_info's answer without its failure message, so that a miss
 * costs one lock-free pagemap lookup (the owning pool's lock is taken only
 * when a holds the span around ptr). Thread-safe. O(1). */
int carve_buffer_live(const carve_arena *a, const void *ptr) CARVE_INTERNAL;

#endif
