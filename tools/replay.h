/*
 * replay.h — running a loaded trace through an arena: the timed replay, the
 * recording replay that feeds the SVG picture, the search for the smallest
 * single block that holds a trace, and the stream handles a replay uses.
 */
#ifndef CARVE_REPLAY_H
#define CARVE_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "carve.h"
#include "trace.h"

/* Stream handles for trace stream numbers 0 .. nstreams-1. */
typedef struct replay_streams {
    carve_stream *s;
    uint32_t n;
    int real;            /* created with cudaStreamCreate (destroy them at the end) */
} replay_streams;

/* Fill rs for backend: real CUDA streams for CARVE_BACKEND_CUDA (one per
 * trace stream number), otherwise distinct fake handles with stream 0 the
 * default stream (NULL). Returns 0, or -1 with a message in err. */
int replay_streams_open(replay_streams *rs, uint32_t nstreams, carve_backend backend, int device,
                        char *err, size_t errlen);
void replay_streams_close(replay_streams *rs);

typedef struct replay_result {
    carve_stats stats;   /* the arena's statistics after the last event */
    uint64_t nooms;      /* allocations that returned CARVE_ERR_OOM (skipped with their frees) */
    uint64_t nerrors;    /* allocations or frees that failed otherwise */
    size_t done;         /* events replayed (fewer than t->n only when stopped at an OOM) */
    double seconds;      /* wall time of the replay loop alone */
    size_t initial_bytes;/* the arena's initial block as resolved (granule-aligned) */
    char error[256];     /* carve_last_error after the replay, when nerrors > 0 */
} replay_result;

enum {
    REPLAY_STOP_AT_OOM = 1,  /* stop at the first OOM (capacity probes) */
    REPLAY_PROGRESS = 2,     /* report progress on stderr every ~1M events */
};

/* Replay t on a fresh arena made from cfg. slots is scratch space of
 * t->nslots pointers. Returns CARVE_OK, or the status of carve_arena_create
 * (the arena's message then in carve_last_error(NULL)). */
carve_status replay_run(const carve_trace *t, const carve_config *cfg, const replay_streams *rs,
                        void **slots, unsigned flags, replay_result *res);

/* What the picture needs: the address of every allocation and, per time
 * column (ncols columns spread evenly over the events), the largest
 * requested, allocated and reserved byte counts seen in that column. */
typedef struct replay_rec {
    uintptr_t *addr;      /* t->n entries; 0 for frees and failed allocations */
    uint64_t *requested;  /* ncols entries each */
    uint64_t *allocated;
    uint64_t *reserved;
    size_t ncols;
} replay_rec;

/* Replay t like replay_run (untimed), filling rec (allocated here; release
 * with replay_rec_free). Returns CARVE_OK, the status of carve_arena_create,
 * or CARVE_ERR_OOM when host memory for rec ran out. */
carve_status replay_record(const carve_trace *t, const carve_config *cfg, const replay_streams *rs,
                           size_t ncols, replay_rec *rec, replay_result *res);
void replay_rec_free(replay_rec *rec);

typedef struct capacity_result {
    size_t bytes;        /* smallest capacity found with no OOM; 0 when none up to the search cap */
    size_t lower_bound;  /* the peak requested bytes rounded up to the granule */
    unsigned probes;     /* replays run */
} capacity_result;

/* Find by bisection, at CARVE_SEGMENT_GRANULE granularity, the smallest
 * single block (growth off, initial = limit = X) on the virtual backend that
 * replays t without an OOM (other fields of base, sim_event_polls and
 * min_grow, are kept; the streams are fake handles). When bytes > lower_bound, bytes - granule was
 * probed and ran out of memory. Progress on stderr unless quiet. Returns
 * CARVE_OK or a status of carve_arena_create other than CARVE_ERR_OOM. */
carve_status replay_min_capacity(const carve_trace *t, const carve_config *base, void **slots,
                                 int quiet, capacity_result *out);

/* Seconds on CLOCK_MONOTONIC. */
double replay_now(void);

/* Human-readable byte count ("1.50 GiB", "512 B") into buf; returns buf. */
char *replay_fmt_bytes(char *buf, size_t len, uint64_t bytes);

#endif
