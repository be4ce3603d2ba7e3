/*
 * stats.h — the arena's counters gathered into a carve_stats (stats.c), for
 * carve_get_stats, out-of-memory messages and snapshots.
 */
#ifndef CARVE_ENGINE_STATS_H
#define CARVE_ENGINE_STATS_H

#include "engine/types.h"

/* Fill *s, largest free block included. Not locked: no lock held on entry;
 * each pool's lock is taken in turn (its counters are read together), then
 * the heap lock. locked: the caller holds pools_lock, every pool lock and
 * the heap lock (the snapshot), so *s is one instant. */
void carve_stats_collect(const carve_arena *a, carve_stats *s, int locked) CARVE_INTERNAL;

#endif
