/*
 * svg.h — a picture of an arena over time, drawn from a recording replay.
 */
#ifndef CARVE_SVG_H
#define CARVE_SVG_H

#include <stdio.h>

#include "replay.h"
#include "trace.h"

#define SVG_COLS 1200  /* time columns of the picture (and of replay_rec) */

typedef struct svg_info {
    const char *trace_name;
    const char *backend;
    double footprint_ratio;       /* <= 0: unknown */
    uint64_t reserved_peak;
    int color_by_stream;          /* 0: colour buffers by size class */
} svg_info;

/* Write the SVG for t and its recording rec (made with ncols = SVG_COLS) to
 * out. Returns 0, or -1 when host memory ran out or writing failed. */
int svg_write(FILE *out, const carve_trace *t, const replay_rec *rec, const svg_info *info);

#endif
