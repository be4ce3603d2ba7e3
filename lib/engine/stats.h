/*
 * stats.h — the arena's counters gathered into a carve_stats (stats.c), for
 * carve_get_stats, out-of-memory messages and snapshots.
 */
#ifndef CARVE_ENGINE_STATS_H
#define CARVE_ENGINE_STATS_H

#include "engine/types.h"

/* Fill *s; with_largest also finds the largest free block (takes every
 * pool lock briefly, then the heap lock). No lock held on entry. */
void carve_stats_collect(const carve_arena *a, carve_stats *s, int with_largest) CARVE_INTERNAL;

#endif
