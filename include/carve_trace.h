/*
 * carve_trace.h — allocation traces: read them, replay them through an
 * arena, find the smallest block that holds them, report on them and draw
 * them. The fragmentation laboratory as a library: carve-replay, carve-run
 * and the Python package are front ends over these functions.
 *
 * A trace is a text file of allocation and free events (docs/trace-format.md):
 *   a,<id>,<size>[,<stream>]     an allocation of size bytes, named id
 *   f,<id>                       the free of id
 * with '#' comment lines. Ids are arbitrary 64-bit integers; streams are
 * small integers (0 = the default stream).
 *
 * Conventions are carve.h's: functions that can fail return a status (or -1
 * for the loader, whose carve_trace.diag explains), output structures are
 * defined on every return, the library never prints (progress and messages
 * go to callbacks the caller provides) and never exits. None of these
 * functions is thread-safe on the same carve_trace or result object; on
 * different objects they are. None synchronizes a device except a replay on
 * the CUDA backend (through its arena, as carve.h says).
 */
#ifndef CARVE_TRACE_H
#define CARVE_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "carve.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Traces in memory ------------------------------------------------------
 *
 * The loader maps each live id to a dense slot (taken from a free list,
 * given back at the free), so a replay keeps its buffers in a plain array of
 * nslots pointers and never hashes anything while it is timed. Every
 * problem in the input (malformed line, free of an unknown id, allocation
 * of an id already live) is counted in nbad, the first few are described in
 * diag with their line numbers, and the line is skipped: what remains is a
 * trace in which every free matches an earlier allocation of its slot.
 *
 * The events are kept compact (a few bytes each, not sizeof(carve_trace_event)):
 * carve_trace_events decodes any range of them into an array the caller
 * provides, so a program walks a trace of any length in chunks.
 */

/* Stream numbers are small: a line naming a stream at or above this is malformed. */
#define CARVE_TRACE_MAX_STREAMS 1024u
/* Thread numbers too: a "#thread,<k>" tag at or above this is malformed. */
#define CARVE_TRACE_MAX_THREADS 4096u

typedef struct carve_trace_event {
    uint32_t slot;    /* dense buffer slot: 0 .. nslots-1, reused after the free */
    uint32_t stream;  /* trace stream number */
    uint64_t size;    /* bytes, for allocations; 0 for frees */
    uint8_t  op;      /* 'a' or 'f' */
    uint16_t thread;  /* trace thread number (0 in a trace with no "#thread" tags) */
} carve_trace_event;

typedef struct carve_trace {
    struct carve_trace_store *store;   /* the events, encoded (read them with carve_trace_events) */
    size_t n;                          /* clean events: every f matches an earlier a of the same slot */
    size_t nslots;                     /* peak number of simultaneously live ids */
    uint32_t nstreams;                 /* 1 + largest stream number seen (1 for an empty trace) */
    uint32_t nthreads;                 /* 1 + largest thread number of an event (1 with no tags) */
    uint64_t peak_requested;           /* peak of the sum of live sizes (saturates at UINT64_MAX) */
    uint64_t total_alloc_bytes;        /* sum of all allocation sizes (saturates) */
    size_t nallocs, nfrees;
    size_t nbad;                       /* malformed or skipped lines */
    char diag[512];                    /* summary of problems (first few with line numbers) */
} carve_trace;

/* Read a whole trace from f. progress (may be NULL) is called every ~1M
 * lines with the line count. Returns 0 on success (even with skipped lines,
 * counted in nbad), -1 on an I/O or host-memory failure, or when the first
 * CARVE_TRACE_PROBE_BYTES of the input hold no line that reads as an event
 * (binary data, /dev/zero: not a trace, and read to no end); diag says why.
 * On failure *t holds no memory (carve_trace_free is still safe). */
CARVE_API int carve_trace_load(FILE *f, carve_trace *t, void (*progress)(size_t lines, void *arg),
                               void *arg);

/* Read the trace in the file at path, gzip-compressed or not ("-" is the
 * standard input); compressed input is read through `gzip -dc`, which must
 * be on PATH. Returns 0 or -1 as carve_trace_load; diag also names a file
 * that cannot be opened or a corrupt compressed stream. */
CARVE_API int carve_trace_load_path(const char *path, carve_trace *t,
                                    void (*progress)(size_t lines, void *arg), void *arg);

/* Input read without finding one event line: the loader gives up there. */
#define CARVE_TRACE_PROBE_BYTES ((size_t)16 << 20)

/* Decode the events first .. first+max-1 of t (fewer at the end) into out;
 * returns how many were decoded (0 when first >= t->n or an argument is
 * NULL). Costs a few ns per event, plus up to 4095 skipped events when first
 * is not a multiple of 4096; walking a trace in chunks of a multiple of 4096
 * skips none. Thread-safe on one trace (it only reads). */
CARVE_API size_t carve_trace_events(const carve_trace *t, size_t first, carve_trace_event *out, size_t max);

/* Release the events of t and zero it. NULL is a no-op. */
CARVE_API void carve_trace_free(carve_trace *t);

/* ---- Writing traces ---------------------------------------------------------
 *
 * A writer appends events to a trace file as a program runs (carve-run's
 * capture uses it). Lines are buffered and written whole, so the file always
 * ends with complete lines; a path ending in ".gz" is compressed through a
 * `gzip -c` child process. All functions are thread-safe on one writer.
 */
typedef struct carve_trace_writer carve_trace_writer;

/* Create (truncate) the trace at path and write a header comment line with
 * `title` (may be NULL). Returns CARVE_OK; CARVE_ERR_INVALID for NULL
 * arguments; CARVE_ERR_BACKEND when the file cannot be created or gzip not
 * started (carve_last_error(NULL) says why). *out is NULL on failure. */
CARVE_API carve_status carve_trace_writer_open(const char *path, const char *title, carve_trace_writer **out);

/* Append "a,0x<id>,<size>,<stream>,@<t_ns>" / "f,0x<id>,@<t_ns>" / "# text";
 * t_ns is the event's time in nanoseconds since the recording began (the
 * trace format's @<ns>; the routing layer's recorder passes exactly that).
 * An event is the calling thread's: threads are numbered in the order of
 * their first event written (0, 1, ...; past CARVE_TRACE_MAX_THREADS - 1
 * they share the last number), and an event of another thread than the
 * last one written is preceded by a "#thread,<k>" tag line.
 * What is written always loads clean: a free of an id with no allocation
 * written before it (and none since its last free) is left out, and an
 * allocation of an id still live is preceded by the free it missed (its
 * memory went back without one: an arena destroyed with live buffers, a
 * context reset); the close counts both in a comment line. Returns CARVE_OK
 * (also for a free left out), CARVE_ERR_INVALID (NULL writer, stream >=
 * CARVE_TRACE_MAX_STREAMS) or CARVE_ERR_BACKEND once a write failed (the
 * writer then drops further events). */
CARVE_API carve_status carve_trace_writer_alloc(carve_trace_writer *w, uint64_t id, uint64_t size, uint32_t stream,
                                                uint64_t t_ns);
CARVE_API carve_status carve_trace_writer_free(carve_trace_writer *w, uint64_t id, uint64_t t_ns);
CARVE_API carve_status carve_trace_writer_comment(carve_trace_writer *w, const char *text);

/* Write out what is buffered. carve_trace_writer_flush_now does it without
 * taking the writer's lock, using only write(2): it is the one function that
 * may be called from a signal handler (a line being appended at that instant
 * by another thread may be missing). */
CARVE_API carve_status carve_trace_writer_flush(carve_trace_writer *w);
CARVE_API void carve_trace_writer_flush_now(carve_trace_writer *w);

/* Write out what is buffered, close the file and wait for gzip, with
 * write(2), close(2) and waitpid(2) only: for a signal handler that is about
 * to end the process. The writer must not be used afterwards (not even
 * closed). NULL is a no-op. */
CARVE_API void carve_trace_writer_finish_now(carve_trace_writer *w);

/* Flush, close the file (waiting for gzip to finish) and free the writer.
 * Returns CARVE_OK or CARVE_ERR_BACKEND when something could not be written.
 * NULL is a no-op. */
CARVE_API carve_status carve_trace_writer_close(carve_trace_writer *w);

/* ---- Replaying -------------------------------------------------------------*/

/* Called with a one-line progress message (no newline) during long runs. */
typedef void (*carve_progress_fn)(void *arg, const char *message);

/* Stream handles for trace stream numbers 0 .. n-1. */
typedef struct carve_replay_streams {
    carve_stream *s;
    uint32_t n;
    int real;            /* created with cudaStreamCreate (destroyed by close) */
} carve_replay_streams;

/* Fill *rs with n stream handles (at least 1) for backend: real non-blocking
 * CUDA streams on device for the cuda backends, otherwise distinct fake
 * handles, stream 0 being the default stream (NULL). Returns CARVE_OK,
 * CARVE_ERR_OOM, CARVE_ERR_NO_DEVICE (no CUDA, or carve built without it) or
 * CARVE_ERR_BACKEND, with carve_last_error(NULL) saying why; *rs then holds
 * nothing. */
CARVE_API carve_status carve_replay_streams_open(carve_replay_streams *rs, uint32_t n,
                                                 carve_backend backend, int device);
/* Destroy the streams (real ones with cudaStreamDestroy). NULL-safe. */
CARVE_API void carve_replay_streams_close(carve_replay_streams *rs);

typedef struct carve_replay_result {
    carve_stats_1_0 stats; /* the arena's statistics after the last event (the fields of ABI 1.0's
                              carve_stats: the structure keeps its layout) */
    uint64_t nooms;      /* allocations that returned CARVE_ERR_OOM (skipped with their frees) */
    uint64_t nerrors;    /* allocations or frees that failed otherwise */
    size_t done;         /* events replayed (fewer than t->n only when stopped at an OOM) */
    double seconds;      /* wall time of the replay loop alone */
    size_t initial_bytes;/* the arena's initial block as resolved (granule-aligned) */
    int vmm;             /* the arena ran in virtual-memory mode (as resolved from the config) */
    char error[256];     /* carve_last_error after the replay, when nerrors > 0 */
} carve_replay_result;

enum {
    CARVE_REPLAY_STOP_AT_OOM = 1  /* stop at the first OOM (capacity probes) */
};

/* Replay t on a fresh arena made from cfg, on the streams rs (at least
 * t->nstreams of them). slots is scratch space of t->nslots pointers. The
 * timed loop does nothing but carve_alloc, carve_free and one array store;
 * progress (may be NULL) is called between chunks of ~1M events, outside the
 * timed intervals. Returns CARVE_OK (failed allocations are counted in *res,
 * not returned), CARVE_ERR_INVALID for NULL arguments or too few streams, or
 * the status of carve_arena_create (its message in carve_last_error(NULL)). */
CARVE_API carve_status carve_replay_run(const carve_trace *t, const carve_config *cfg,
                                        const carve_replay_streams *rs, void **slots, unsigned flags,
                                        carve_progress_fn progress, void *arg,
                                        carve_replay_result *res);

/* Warm passes (carve_replay_run_warm): the trace replayed again on the
 * same arena, its cache kept, as a long-running program repeats its steps. */
typedef struct carve_replay_warm {
    unsigned passes;
    double seconds;               /* median wall time of one warm pass */
    uint64_t backend_allocs;      /* backend reservations (maps, in virtual-memory mode) over all warm passes */
    uint64_t backend_frees;       /* backend releases (unmaps) over all warm passes */
    uint64_t event_records;       /* events recorded over all warm passes (carve_stats.num_event_records) */
    uint64_t event_queries;       /* events asked about over all warm passes */
    uint64_t syncs;               /* host waits for the device over all warm passes */
    uint64_t reserved_peak_bytes; /* the arena's reserved peak after the last pass (cold pass included) */
    uint64_t nooms;               /* allocations that ran out of memory in the warm passes */
} carve_replay_warm;

/* The driver ledger of a replay (carve_stats' driver_* fields): the cold
 * pass's (from the arena's creation to the end of the first pass) and the
 * warm passes' (the differences across them). It begins with its size, as
 * carve_config does, so that it can grow: set size to sizeof(carve_replay_driver)
 * (carve_replay_driver_init does); the library writes only the first size
 * bytes. */
typedef struct carve_replay_driver {
    size_t size;
    uint64_t cold_calls[CARVE_DRIVER_SLOTS];
    uint64_t cold_mappings[CARVE_DRIVER_SLOTS];
    uint64_t cold_bytes[CARVE_DRIVER_SLOTS];
    uint64_t cold_model_ns;
    uint64_t warm_calls[CARVE_DRIVER_SLOTS];     /* over all warm passes */
    uint64_t warm_mappings[CARVE_DRIVER_SLOTS];
    uint64_t warm_bytes[CARVE_DRIVER_SLOTS];
    uint64_t warm_model_ns;
} carve_replay_driver;

static inline void carve_replay_driver_init(carve_replay_driver *d) {
    memset(d, 0, sizeof(*d));
    d->size = sizeof(*d);
}

/* carve_replay_run, then warm_passes more passes on the same arena: after
 * each pass (the cold one included) the buffers it left live are freed,
 * untimed, and the next pass starts from the cache as it is. *res describes
 * the cold pass, *warm (needed when warm_passes > 0) the warm ones; failed
 * frees or allocations of any pass count in res->nerrors. Returns as
 * carve_replay_run. */
CARVE_API carve_status carve_replay_run_warm(const carve_trace *t, const carve_config *cfg,
                                             const carve_replay_streams *rs, void **slots, unsigned flags,
                                             unsigned warm_passes, carve_progress_fn progress, void *arg,
                                             carve_replay_result *res, carve_replay_warm *warm);
/* carve_replay_run_warm that also fills *drv (may be NULL) with the driver
 * ledger of the cold pass and of the warm passes. Returns as
 * carve_replay_run, and CARVE_ERR_INVALID for a drv whose size is below
 * sizeof(size_t) + the cold ledger or above 4096. */
CARVE_API carve_status carve_replay_run_driver(const carve_trace *t, const carve_config *cfg,
                                               const carve_replay_streams *rs, void **slots, unsigned flags,
                                               unsigned warm_passes, carve_progress_fn progress, void *arg,
                                               carve_replay_result *res, carve_replay_warm *warm,
                                               carve_replay_driver *drv);

/* What a picture needs: the address of every allocation and, per time
 * column (ncols columns spread evenly over the events), the largest
 * requested, allocated and reserved byte counts seen in that column. */
typedef struct carve_replay_rec {
    uintptr_t *addr;      /* t->nallocs entries, one per allocation in trace order; 0 when it failed */
    uint64_t *requested;  /* ncols entries each */
    uint64_t *allocated;
    uint64_t *reserved;
    size_t ncols;
} carve_replay_rec;

/* Replay t like carve_replay_run (untimed), filling *rec (allocated here;
 * release with carve_replay_rec_free). Returns CARVE_OK, CARVE_ERR_INVALID
 * as carve_replay_run, the status of carve_arena_create, or CARVE_ERR_OOM
 * when host memory for rec ran out (*rec then holds nothing). */
CARVE_API carve_status carve_replay_record(const carve_trace *t, const carve_config *cfg,
                                           const carve_replay_streams *rs, size_t ncols,
                                           carve_replay_rec *rec, carve_replay_result *res);
/* Release what carve_replay_record allocated. NULL-safe. */
CARVE_API void carve_replay_rec_free(carve_replay_rec *rec);

typedef struct carve_capacity_result {
    size_t bytes;        /* smallest capacity found with no OOM; 0 when none up to 4 PiB */
    size_t lower_bound;  /* the peak requested bytes rounded up to the granule */
    unsigned probes;     /* replays run */
} carve_capacity_result;

/* Find by galloping then bisection, at CARVE_SEGMENT_GRANULE granularity,
 * the smallest single block (growth off, initial = limit = X, segments
 * mode: one block is one segment, whatever base's vmm says) on the virtual
 * backend that replays t without an OOM. Other fields of base are kept
 * (sim_event_polls, min_grow, ...); streams are fake handles. When bytes >
 * lower_bound, bytes - granule was probed and ran out of memory. progress
 * (may be NULL) hears about every probe. Returns CARVE_OK, CARVE_ERR_INVALID
 * for NULL arguments, or a status of carve_arena_create other than
 * CARVE_ERR_OOM. */
CARVE_API carve_status carve_replay_min_capacity(const carve_trace *t, const carve_config *base,
                                                 void **slots, carve_progress_fn progress, void *arg,
                                                 carve_capacity_result *out);

/* ---- Reporting ------------------------------------------------------------ */

/* Everything a report on one trace says. Fill what you measured; fields
 * marked optional may be left 0 / NULL. */
typedef struct carve_replay_report {
    const char *trace_name;            /* file name, or "(standard input)" */
    const carve_trace *trace;
    const carve_config *cfg;           /* the arena's configuration as given */
    const carve_replay_result *result; /* the first replay */
    double seconds;                    /* the (median) replay time */
    double ns_per_op;                  /* seconds per event, in ns */
    unsigned repeat;                   /* replays the median is over (at least 1) */
    double load_seconds;               /* time to read the trace */
    const carve_capacity_result *capacity; /* optional: from carve_replay_min_capacity */
    const carve_replay_warm *warm;     /* optional: from carve_replay_run_warm */
    const char *svg_path;              /* optional: where the picture went */
    size_t svg_bytes;
} carve_replay_report;

/* Peak reserved bytes over the trace's peak requested bytes (0 when the
 * trace requested nothing). */
CARVE_API double carve_replay_footprint(const carve_replay_report *r);

/* Write the report to out as aligned text (json 0) or as one JSON object on
 * one line (json 1; the keys are listed in docs/replay.md). Returns 0, or -1
 * when writing failed or an argument is NULL. */
CARVE_API int carve_replay_report_write(FILE *out, const carve_replay_report *r, int json);
/* carve_replay_report_write with the driver ledger (may be NULL: then as
 * carve_replay_report_write): the modeled driver time and the calls by kind,
 * cold and warm, and modeled ns per event (host time measured plus driver
 * time modeled). */
CARVE_API int carve_replay_report_write_driver(FILE *out, const carve_replay_report *r,
                                               const carve_replay_driver *drv, int json);

/* ---- Pictures ------------------------------------------------------------- */

#define CARVE_SVG_COLS 1200  /* time columns of the picture (use as ncols of the recording) */

typedef struct carve_svg_info {
    const char *trace_name;
    const char *backend;
    double footprint_ratio;       /* <= 0: unknown */
    uint64_t reserved_peak;
    int color_by_stream;          /* 0: colour buffers by size class */
} carve_svg_info;

/* Write an SVG of the arena over time (x: event, y: address, compressed to
 * the ranges ever used; a strip on top charts requested, allocated and
 * reserved bytes) for t and its recording rec (made with ncols =
 * CARVE_SVG_COLS) to out. The file stays a few MB for any trace length.
 * Returns 0, or -1 when host memory ran out, writing failed or an argument
 * is NULL. */
CARVE_API int carve_svg_write(FILE *out, const carve_trace *t, const carve_replay_rec *rec,
                              const carve_svg_info *info);

#ifdef __cplusplus
}
#endif

#endif /* CARVE_TRACE_H */
