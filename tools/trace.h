/*
 * trace.h — allocation traces: the text format of docs/trace-format.md read
 * into an array of clean events that a replay can run without checks.
 *
 * The one idea: trace ids are arbitrary 64-bit integers, but at any moment
 * only a few of them are live, so the loader maps each live id to a dense
 * slot (taken from a free list, given back at the free). A replay then keeps
 * its buffers in a plain array indexed by slot, of length nslots = the peak
 * number of live ids, and never hashes anything while it is being timed.
 *
 * Every problem in the input (malformed line, free of an unknown id,
 * allocation of an id already live) is counted, the first few are described
 * in diag with their line numbers, and the line is skipped: what remains is
 * a trace in which every free matches an earlier allocation of its slot.
 */
#ifndef CARVE_TRACE_H
#define CARVE_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Stream numbers are small: a line naming a stream at or above this is malformed. */
#define CARVE_TRACE_MAX_STREAMS 1024u

typedef struct carve_trace_event {
    uint32_t slot;    /* dense buffer slot: 0 .. nslots-1, reused after the free */
    uint32_t stream;  /* trace stream number */
    uint64_t size;    /* bytes, for allocations; 0 for frees */
    uint8_t  op;      /* 'a' or 'f' */
} carve_trace_event;

typedef struct carve_trace {
    carve_trace_event *ev; size_t n;   /* clean events: every f matches an earlier a of the same slot */
    size_t nslots;                     /* peak number of simultaneously live ids */
    uint32_t nstreams;                 /* 1 + largest stream number seen (1 for an empty trace) */
    uint64_t peak_requested;           /* peak of the sum of live sizes (saturates at UINT64_MAX) */
    uint64_t total_alloc_bytes;        /* sum of all allocation sizes (saturates) */
    size_t nallocs, nfrees;
    size_t nbad;                       /* malformed or skipped lines */
    char diag[512];                    /* summary of problems (first few with line numbers) */
} carve_trace;

/* Read a whole trace from f; progress (may be NULL) is called every ~1M lines with the line count.
 * Returns 0 on success (even with skipped lines, counted in nbad), -1 on I/O or host-memory failure (diag says why).
 * On failure *t holds no memory (carve_trace_free is still safe). Not thread-safe on the same t. */
int carve_trace_load(FILE *f, carve_trace *t, void (*progress)(size_t lines, void *arg), void *arg);

/* Release the events of t and zero it. NULL is a no-op. */
void carve_trace_free(carve_trace *t);

#ifdef __cplusplus
}
#endif

#endif /* CARVE_TRACE_H */
