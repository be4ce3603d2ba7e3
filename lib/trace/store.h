/*
 * store.h — a loaded trace's events, kept compact (store.c): the loader
 * appends, carve_trace_events (carve_trace.h) decodes.
 */
#ifndef CARVE_TRACE_STORE_H
#define CARVE_TRACE_STORE_H

#include "base/util.h"
#include "carve_trace.h"

/* Every CARVE_STORE_MARK_EVERY-th event starts afresh (its stream written
 * out) at a byte offset kept in marks, so a range of events is decoded from
 * the mark before it. */
#define CARVE_STORE_MARK_EVERY 4096u

struct carve_trace_store {
    uint8_t *bytes;
    size_t len, cap;
    uint64_t *marks;    /* byte offset of event k * CARVE_STORE_MARK_EVERY */
    size_t nmarks, cap_marks;
    size_t n;           /* events appended */
    uint32_t stream;    /* stream of the last event appended (UINT32_MAX: none yet, or a mark) */
    struct carve_thread_run {
        size_t first;   /* the run's first event */
        uint32_t thread;
    } *runs;            /* where the thread changes (none while it is 0) */
    size_t nruns, cap_runs;
    uint32_t thread;    /* thread of the last event appended */
};

/* A new, empty store; NULL when host memory ran out. */
struct carve_trace_store *carve_store_new(void) CARVE_INTERNAL;
/* Append one event (its thread included); 0, or -1 when host memory ran
 * out (the store is then unchanged). */
int carve_store_push(struct carve_trace_store *s, const carve_trace_event *e) CARVE_INTERNAL;
/* Give back the slack of the doubling buffers. */
void carve_store_shrink(struct carve_trace_store *s) CARVE_INTERNAL;
/* Free the store. NULL is a no-op. */
void carve_store_free(struct carve_trace_store *s) CARVE_INTERNAL;

#endif
