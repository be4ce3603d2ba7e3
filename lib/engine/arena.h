/*
 * arena.h — the rules a configuration's sizes obey (arena.c), shared by
 * carve_arena_create and the per-device setters (device.c), so that a
 * setter refuses exactly the values creation would refuse.
 */
#ifndef CARVE_ENGINE_ARENA_H
#define CARVE_ENGINE_ARENA_H

#include "engine/types.h"

/* A fraction of device memory must lie in (0, 1]. CARVE_OK, or
 * CARVE_ERR_INVALID with a message naming fn and what. */
carve_status carve_fraction_check(const char *fn, const char *what, double fraction) CARVE_INTERNAL;

/* A limit of limit bytes (given as they are, or as fraction of total bytes
 * when fraction > 0, which the message then quotes) must hold one 2 MiB
 * granule once rounded down to it. CARVE_OK, or CARVE_ERR_INVALID with a
 * message naming fn. */
carve_status carve_limit_check(const char *fn, size_t limit, double fraction, size_t total) CARVE_INTERNAL;

#endif
