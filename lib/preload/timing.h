/*
 * timing.h — the time an exported function spends in carve, for --report:
 * one call in a few is timed (carve_ctx_sample decides, per thread) and
 * counted for all of them, so the other calls read no clock at all.
 */
#ifndef CARVE_PRELOAD_TIMING_H
#define CARVE_PRELOAD_TIMING_H

#include "preload/preload.h"

/* The start of a timed call, or 0 for a call that is not timed. */
static inline uint64_t carve_clock_in(void) {
    return CARVE_UNLIKELY(carve_run.report) && carve_ctx_sample() ? carve_session_now() : 0;
}

/* The end of a call served from context c (NULL: nothing to count). */
static inline void carve_clock_out(carve_ctx *c, uint64_t t0) {
    if (CARVE_UNLIKELY(t0) && c)
        carve_ctx_add_time(c, carve_session_now() - t0);
}

#endif
