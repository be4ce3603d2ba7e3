/*
 * preload.h — how the interposer's files talk to each other. The exported
 * CUDA symbols (hooks.c, lookup.c) include only cutypes.h, so nothing here
 * names a type of <cuda.h>: pointers travel as uintptr_t, streams as
 * carve_stream (the same type as CUstream), results as int (CUresult).
 *
 * Files, bottom up: captures.c counts the graph captures in progress;
 * faults.c numbers the program's allocation calls and picks those that
 * fail on purpose; real.c finds the real functions (libc's dlsym, the
 * driver's entry points); meter.c counts every byte of device memory the
 * program takes against the cap and hands libcarve its driver table,
 * metered; pending.c marks the
 * buffers that wait to go back; quarantine.c holds a context's frees that
 * name no stream until the device is done with them; contexts.c keeps one
 * carve arena per CUDA context and serves allocations and frees, with each
 * thread's batch of frees; signals.c stands in front of the program's
 * dispositions of SIGINT and SIGTERM while a trace is written (and exports
 * sigaction and signal for them); session.c is the run (options from the
 * environment, trace, report at exit, fork); hooks.c, counted.c,
 * runtime.c and lookup.c are the exported CUDA symbols.
 */
#ifndef CARVE_PRELOAD_PRELOAD_H
#define CARVE_PRELOAD_PRELOAD_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/util.h"
#include "carve.h"

/* ---- captures.c ---- */
/* A capture began, or ended, on stream s (thread-safe). */
void carve_capture_begin(carve_stream s) CARVE_INTERNAL;
void carve_capture_end(carve_stream s) CARVE_INTERNAL;
/* In a child after fork: the lock may have been held by a thread that does
 * not exist there. */
void carve_capture_forked(void) CARVE_INTERNAL;
/* Graph captures in progress in the process (begun minus ended). */
extern int carve_captures CARVE_INTERNAL;
static inline int carve_capture_active(void) { return __atomic_load_n(&carve_captures, __ATOMIC_ACQUIRE) > 0; }
/* Whether an event may be recorded now: no capture in progress. Asked right
 * before recording, by a thread that has said it is inside carve (contexts.c)
 * or holds a quarantine's lock: the full fence pairs with the one in
 * carve_ctx_capture_fence, so that either the capture's beginning waits for
 * this thread, or this thread sees the capture. */
static inline int carve_capture_may_record(void) {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return !carve_capture_active();
}

/* A sanitizer's runtime looks up the functions it wraps with dlsym while it
 * starts, before it can check any access, and this library's dlsym answers:
 * the functions on that path are never instrumented (a sanitized test build
 * preloads the runtime in front of the interposer). */
#define CARVE_NOT_SANITIZED __attribute__((no_sanitize("address", "undefined", "thread")))

/* ---- faults.c ---- */
/* Nonzero when failures are to be injected (set once, by carve_faults_init,
 * before any call is served). */
extern int carve_faults_armed CARVE_INTERNAL;
/* Read CARVE_RUN_FAIL_EVERY and CARVE_RUN_FAIL_AT (once; a bad value is
 * said on stderr and injects nothing). Thread-safe. */
void carve_faults_init(void) CARVE_INTERNAL;
/* A driver hook's allocation call of the program: 1 when it is to fail
 * (with the driver's out-of-memory error, before anything is allocated).
 * Takes the note a runtime export left on this thread, or numbers the call. */
int carve_fault_next(void) CARVE_INTERNAL;
/* For a runtime export: number its call (1: to fail), and leave the driver
 * hook the call reaches next on this thread a note that it is numbered
 * already (fail: that it is to fail); clear the note once the call returns. */
int carve_fault_number(void) CARVE_INTERNAL;
void carve_fault_note(int fail) CARVE_INTERNAL;
void carve_fault_note_clear(void) CARVE_INTERNAL;
/* Failures injected so far. */
unsigned long long carve_faults_injected(void) CARVE_INTERNAL;

/* ---- real.c ---- */
/* Find the real functions (once; thread-safe). 0 when the CUDA driver is
 * there, -1 when it is not (every hook then passes calls through). */
int carve_real_init(void) CARVE_INTERNAL;
/* Nonzero on the thread that is loading the driver right now. */
int carve_real_busy(void) CARVE_INTERNAL;
/* libc's own dlsym (ours shadows it). */
void *carve_real_dlsym(void *handle, const char *name) CARVE_INTERNAL;
/* libc's dlsym itself, as a data pointer (NULL if it cannot be found). */
void *carve_real_dlsym_fn(void) CARVE_INTERNAL;
/* The driver's exported function of that exact name; NULL if absent. */
void *carve_real_driver(const char *name) CARVE_INTERNAL;
/* Store a function found by name into *slot, a function pointer of any type
 * (ISO C converts object to function pointers only through memory). */
#define CARVE_SET_FN(slot, found)                   \
    do {                                            \
        void *found_ = (found);                     \
        memcpy(&(slot), &found_, sizeof(found_));   \
    } while (0)

/* ---- meter.c ---- */
/* What the program's device memory is, by who allocated it. */
enum {
    CARVE_METER_CARVE,   /* segments and granules carve reserves for its arenas */
    CARVE_METER_VMM,     /* physical memory from cuMemCreate */
    CARVE_METER_PITCHED, /* cuMemAllocPitch (cudaMallocPitch, cudaMalloc3D) */
    CARVE_METER_POOL,    /* cuMemAllocFromPoolAsync (cudaMallocFromPoolAsync) */
    CARVE_METER_DRIVER,  /* cuMemAlloc[Async] passed to the driver (graph nodes, contexts carve does not serve) */
    CARVE_METER_KINDS
};
typedef struct carve_meter_view {
    int seen;                /* anything counted or refused on the device */
    size_t cap;              /* SIZE_MAX: no cap */
    size_t bytes, peak;      /* counted now, and at most */
    struct {
        size_t bytes, peak;
        uint64_t calls;      /* allocations counted */
        uint64_t refused;    /* refused: past the cap */
    } kind[CARVE_METER_KINDS];
} carve_meter_view;
/* Find the driver (carve_real_init) and hand libcarve its driver table, with
 * cuMemAlloc and cuMemFree metered (once; before any arena exists). 0, or
 * -1 without a driver. Thread-safe. */
int carve_meter_init(void) CARVE_INTERNAL;
/* The device's cap in bytes (from CARVE_CONF, granule-rounded), SIZE_MAX
 * when none is set. */
size_t carve_meter_cap(int device) CARVE_INTERNAL;
/* Take bytes of kind on device before the driver is asked: 0, or -1 when
 * that would pass the cap (counted as refused if last_try). A device out
 * of range counts nothing and returns 0. Give it back with
 * carve_meter_untake when the driver then fails. */
int carve_meter_take(int device, size_t bytes, int kind, int last_try) CARVE_INTERNAL;
void carve_meter_untake(int device, size_t bytes, int kind) CARVE_INTERNAL;
/* The allocation at p, for which taken bytes were taken, holds size bytes
 * (the difference is counted too) of ctx's memory. */
void carve_meter_add_ptr(uintptr_t p, size_t taken, size_t size, int device, int kind, void *ctx) CARVE_INTERNAL;
/* p was freed: 1 if it had been counted (its bytes are given back). */
int carve_meter_forget_ptr(uintptr_t p) CARVE_INTERNAL;
/* Context ctx is destroyed: the driver freed the memory of its pointers
 * (those added with their context: cuMemAlloc's, cuMemAllocPitch's and
 * carve's segments; stream-ordered and pool allocations, added with ctx
 * NULL, outlive their context, as cuMemCreate's memory does). */
void carve_meter_ctx_gone(void *ctx) CARVE_INTERNAL;
/* cuMemCreate's handle h holds size bytes (taken already); release,
 * retain, map and unmap as the driver does: the bytes are given back once
 * the handle is released and no mapping of it is left. */
void carve_meter_add_handle(uint64_t h, size_t size, int device, int kind) CARVE_INTERNAL;
void carve_meter_release_handle(uint64_t h) CARVE_INTERNAL;
void carve_meter_retain_handle(uint64_t h) CARVE_INTERNAL;
void carve_meter_mapped(uintptr_t va, size_t size, uint64_t h) CARVE_INTERNAL;
void carve_meter_unmapped(uintptr_t va, size_t size) CARVE_INTERNAL;
/* The device's counts: 1, or 0 (*out zeroed) when nothing was seen there. */
int carve_meter_get(int device, carve_meter_view *out) CARVE_INTERNAL;
const char *carve_meter_kind_name(int kind) CARVE_INTERNAL;
/* The calling thread's current context and its device: 0, or -1 (*device
 * -1) when none is current. Two driver calls. */
int carve_meter_where(int *device, void **ctx) CARVE_INTERNAL;
/* Whether a return address lies in libcarve's code (a call carve makes for
 * its own arena, through the interposer's hooks). */
int carve_meter_from_carve(const void *ret) CARVE_INTERNAL;
/* Around fork: stage 0 takes the meter's lock, 1 and 2 (parent, child)
 * give it back. */
void carve_meter_fork(int stage) CARVE_INTERNAL;

/* ---- pending.c: see pending.h ---- */

/* ---- quarantine.c ---- */
/* The unordered frees of one context waiting for the device (every call
 * thread-safe; takes the quarantine's lock). */
typedef struct carve_quarantine carve_quarantine;
struct CUctx_st;
/* NULL when the driver lacks event functions or memory is short. */
carve_quarantine *carve_q_create(carve_arena *arena, struct CUctx_st *ctx) CARVE_INTERNAL;
/* n freed buffers, marked pending, bytes in all, join the open epoch. With
 * may_record, a full epoch is closed (events recorded) and completed ones
 * given back; without, no driver function is called. */
void carve_q_join(carve_quarantine *q, const uintptr_t *ptr, size_t n, size_t bytes, int may_record) CARVE_INTERNAL;
/* n freed buffers, marked pending, bytes in all, that the freeing thread
 * keeps itself join the open epoch: they count towards closing it, and may
 * be reused once carve_q_done reaches the number returned (0: the context
 * is gone, the buffers only lose their marks). may_record as above. */
uint64_t carve_q_join_kept(carve_quarantine *q, size_t n, size_t bytes, int may_record) CARVE_INTERNAL;
/* Every epoch up to this number has completed (lock-free). */
uint64_t carve_q_done(const carve_quarantine *q) CARVE_INTERNAL;
/* A buffer that cannot be marked: wait for the device, then free it. */
void carve_q_free_now(carve_quarantine *q, uintptr_t ptr) CARVE_INTERNAL;
/* Whether anything waits (a hint, read without the lock). */
int carve_q_busy(const carve_quarantine *q) CARVE_INTERNAL;
/* Give back what has completed, if the lock is free (an event query). */
void carve_q_poll(carve_quarantine *q) CARVE_INTERNAL;
/* Close the open epoch and wait for every epoch (synchronizes). */
void carve_q_drain(carve_quarantine *q) CARVE_INTERNAL;
/* The arena would grow for an allocation: give back the closed epochs
 * that have completed, or, when none has and they hold more than slack
 * bytes, wait for the oldest and give it back. 1 when an epoch went back
 * (try the allocation again), 0 when nothing did (grow). */
int carve_q_make_room(carve_quarantine *q, size_t slack) CARVE_INTERNAL;
/* Bytes waiting; epochs closed, waits, waits for room (carve_q_make_room)
 * so far, and the most bytes waiting at once. */
size_t carve_q_held(carve_quarantine *q) CARVE_INTERNAL;
void carve_q_counts(carve_quarantine *q, uint64_t *epochs, uint64_t *ordered, uint64_t *drains,
                    uint64_t *room_waits, size_t *held_peak) CARVE_INTERNAL;
/* Ordered reuse (quarantine.c) ends for good: another context, a peer
 * access or a stream carve cannot see may run work on carve's memory that
 * waits for no legacy-stream event. Waits for every context's barrier.
 * Thread-safe; a driver wait, once. why: what ended it (a string
 * constant; the first is kept for the report). */
void carve_q_mark_unordered(const char *why) CARVE_INTERNAL;
/* What ended ordered reuse for q, first (the call's name, "a non-blocking
 * stream", "--no-ordered-reuse", ...), or NULL while it holds. */
const char *carve_q_unordered_why(carve_quarantine *q) CARVE_INTERNAL;
/* Wait for every context's barrier (thread-safe). */
void carve_q_settle_all(void) CARVE_INTERNAL;
/* In a child of a process with contexts (carve_ctx_fork): the two above do
 * nothing from now on (the parent's locks may be held for good). */
void carve_q_forked(void) CARVE_INTERNAL;
extern int carve_q_unordered CARVE_INTERNAL;
/* A non-blocking stream is about to be made in q's context (before the
 * driver makes it): reuse stops being ordered and the barrier is waited
 * for first, so that when the stream exists the work before every buffer
 * reused in order has completed. Once per quarantine. */
void carve_q_nonblocking_coming(carve_quarantine *q) CARVE_INTERNAL;
/* Streams of the context, made and destroyed. Epochs record an event on
 * each non-blocking one; destroying any records its last event (every later
 * epoch waits for it) and gives back the epochs while the stream exists; a
 * new stream with the handle of a destroyed one whose work may still run
 * waits for that work first. */
void carve_q_stream_created(carve_quarantine *q, carve_stream s, int nonblocking) CARVE_INTERNAL;
void carve_q_stream_destroyed(carve_quarantine *q, carve_stream s) CARVE_INTERNAL;
/* Whether s is the handle of a new stream whose old stream's work may still
 * run (its tail could not be waited for, during a capture): its allocations
 * must not come from what carve cached for that handle. Waits for the tail
 * when it can. Worth asking only while carve_q_reused_handles (the number
 * of such handles in all quarantines, atomic) is not 0. */
int carve_q_handle_busy(carve_quarantine *q, carve_stream s) CARVE_INTERNAL;
extern int carve_q_reused_handles CARVE_INTERNAL;
/* The context is destroyed: drop everything (the marks too), give nothing back. */
void carve_q_gone(carve_quarantine *q) CARVE_INTERNAL;
/* Returns once whoever held the quarantine's lock has let it go: a recorder
 * that found no capture in progress has recorded by then. */
void carve_q_fence(carve_quarantine *q) CARVE_INTERNAL;

/* ---- contexts.c ---- */
typedef struct carve_ctx carve_ctx;
/* Per-context counters for the report. */
typedef struct carve_ctx_counts {
    uint64_t allocs, frees, async_allocs, async_frees, ooms, passthrough, epochs, ordered, drains, room_waits, ns_in_carve;
    size_t held_peak; /* the most bytes of unordered frees waiting at once */
    size_t live, live_peak; /* the program's own live bytes in the arena and their peak (under --report,
                               carve_ctx_count_live); live is 0 once the context is gone */
    const char *unordered_why; /* what ended ordered reuse, or NULL (carve_q_unordered_why) */
} carve_ctx_counts;

/* The state of the calling thread's current CUDA context, with its arena
 * (made on first use from CARVE_CONF); NULL when no context is current or
 * no arena can be made (the call then goes to the driver). One driver call
 * (cuCtxGetCurrent); the rest is cached per thread. */
carve_ctx *carve_ctx_current(void) CARVE_INTERNAL;
/* Whether the calling thread has had a context current (seen by
 * carve_ctx_current since any context last went away): the CUDA runtime
 * has started on this thread. */
int carve_ctx_thread_ready(void) CARVE_INTERNAL;
/* The context whose arena has ptr as a live buffer; NULL for pointers
 * carve did not hand out. */
carve_ctx *carve_ctx_owner(uintptr_t ptr) CARVE_INTERNAL;
/* Whether ptr lies in memory the arena of any live context holds (a live
 * buffer or not): a free of it must never reach the driver, which would
 * release a whole segment of carve's. O(contexts x segments). */
int carve_ctx_contains(uintptr_t ptr) CARVE_INTERNAL;
/* The device of the live context whose arena holds ptr in virtual-memory
 * mode (cuMemCreate granules, which legacy CUDA IPC cannot export); -1 when
 * no such arena holds it. O(contexts x segments). */
int carve_ctx_vmm_device(uintptr_t ptr) CARVE_INTERNAL;
/* Allocate size bytes (> 0) in the calling thread's current context, *c.
 * stream NULL: usable at once on any stream (cuMemAlloc); otherwise
 * stream-ordered on stream. Returns a CUresult, or CARVE_CTX_NOT_SERVED
 * when no context is current (*c NULL) or its arena could not be made.
 * Before the arena grows, the quarantine's oldest epochs may be waited for
 * (carve_q_make_room). try_only: on failure return at once, leaving nothing
 * recorded (no drain of the quarantine, no count, no message), for a
 * caller that will ask again another way. */
#define CARVE_CTX_NOT_SERVED (-2)
int carve_ctx_alloc(size_t size, carve_stream stream, int try_only, uintptr_t *out, carve_ctx **c) CARVE_INTERNAL;
/* Free ptr if carve handed it out. ordered 0: no stream named (cuMemFree):
 * the memory is reused only once all work queued before the free, on every
 * stream of its context, has completed. ordered 1: stream-ordered on stream.
 * Of two frees of one buffer, racing or not, ordered or not, exactly one is
 * accepted. Returns CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE (freed already
 * and waiting, or being freed by another call), or CARVE_CTX_NOT_OURS when
 * no arena has ptr as a live buffer.
 * saw (may be NULL) is called with the buffer's context, ptr and its size
 * once the free is accepted and before the memory can be reused; *owner is
 * the buffer's context. */
#define CARVE_CTX_NOT_OURS (-1)
int carve_ctx_free(uintptr_t ptr, int ordered, carve_stream stream, void (*saw)(carve_ctx *, uintptr_t, size_t),
                   carve_ctx **owner) CARVE_INTERNAL;
/* cuMemGetInfo on device as the program should see it from context c
 * (NULL: one carve does not serve): total = the cap (the driver's total
 * when it is smaller or no cap is set), free = what the program can still
 * obtain: what every kind counted on the device leaves under the cap (and
 * the driver has), plus what c's arena holds cached or waiting. Returns a
 * CUresult. */
int carve_ctx_mem_info(carve_ctx *c, int device, size_t *free_bytes, size_t *total_bytes) CARVE_INTERNAL;
/* The calling thread is about to make a stream with flags (before the
 * driver call): a non-blocking one ends ordered reuse in the current
 * context first (carve_q_nonblocking_coming). */
void carve_ctx_stream_creating(unsigned flags) CARVE_INTERNAL;
/* Streams the current context creates and destroys (non-blocking ones are
 * waited for by frees that name no stream). */
void carve_ctx_stream_created(carve_stream s, unsigned flags) CARVE_INTERNAL;
void carve_ctx_stream_destroyed(carve_stream s) CARVE_INTERNAL;
/* Visit every context (for the report at exit; takes the threads' batches
 * and adds in their counts, without calling the driver). */
void carve_ctx_each(void (*fn)(carve_arena *arena, int device, const carve_ctx_counts *n, void *arg),
                    void *arg) CARVE_INTERNAL;
/* A capture is about to begin (counted already): returns once every other
 * thread that was inside carve (where it may record events) when the count
 * went up has left, and every quarantine's recording that began before the
 * count has ended. */
void carve_ctx_capture_fence(void) CARVE_INTERNAL;
/* The driver is about to destroy, reset or release ctx (thread-safe):
 * until carve_ctx_settled(ctx), no arena is made for it (its allocations
 * go to the driver, which frees them with the context). With hide_now,
 * nothing more is served from its arena meanwhile (the driver frees its
 * memory); its waiting frees stay until the call is over. */
void carve_ctx_going(struct CUctx_st *ctx, int hide_now) CARVE_INTERNAL;
/* The driver's call is over. With freed (the driver freed the context's
 * memory), ctx is forgotten: its waiting frees are dropped, its arena's
 * virtual-memory granules and ranges go back (carve_arena_abandon), the
 * memory counted in it against the cap is given back
 * (carve_meter_ctx_gone), and the next arena for the same handle is a new
 * one. Without (the call failed, or a release left the context alive), a
 * hidden context is served again as before. */
void carve_ctx_settled(struct CUctx_st *ctx, int freed) CARVE_INTERNAL;
/* The context's device, its arena (NULL when it could not be made), and the
 * explanation of its last failure. */
carve_arena *carve_ctx_arena(const carve_ctx *c) CARVE_INTERNAL;
/* The program got (bytes > 0) or gave back (bytes < 0) a buffer of c's
 * arena: its live bytes and their peak (carve_ctx_counts.live, live_peak).
 * Thread-safe, lock-free. */
void carve_ctx_count_live(carve_ctx *c, ptrdiff_t bytes) CARVE_INTERNAL;
int carve_ctx_device(const carve_ctx *c) CARVE_INTERNAL;
const char *carve_ctx_last_error(const carve_ctx *c) CARVE_INTERNAL;
/* Time spent inside the hooks, with --report: carve_ctx_sample says whether
 * to time this call (one in every few), carve_ctx_add_time counts the ns
 * that call took for all of them. */
int carve_ctx_sample(void) CARVE_INTERNAL;
void carve_ctx_add_time(carve_ctx *c, uint64_t ns) CARVE_INTERNAL;
/* Count a call that went to the driver untouched. */
void carve_ctx_passthrough(carve_ctx *c) CARVE_INTERNAL;
/* Memory is short outside carve (the cap): every thread's frees of c join
 * the quarantine, which is waited for, and the arena gives its cached
 * memory back to the driver. 1 when there was anything to give back (then
 * it synchronizes), 0 else and during a capture. */
int carve_ctx_make_room(carve_ctx *c) CARVE_INTERNAL;
/* Around fork (pthread_atfork): stage 0 before (takes the locks), 1 in the
 * parent after, 2 in the child after (gives them back). In the child,
 * returns 1 when the parent had contexts: the child then serves nothing
 * (the caller makes every hook pass calls to the driver). */
int carve_ctx_fork(int stage) CARVE_INTERNAL;

/* ---- signals.c ---- */
/* Stand in front of the program's disposition of SIGINT and SIGTERM from
 * now on (once; thread-safe): a signal that would end the program calls
 * finish_trace (async-signal-safe) first; the program's later sigaction and
 * signal calls for them are recorded and answered as its own. */
void carve_signals_watch(void (*finish_trace)(void)) CARVE_INTERNAL;

/* ---- session.c ---- */
/* What carve_run.ready (and hooks.c's own copy) says an allocation of the
 * program meets. Every value but 0 lets frees be served (carve's pointers to
 * carve, others to the driver); the hooks take their likely path only at
 * CARVE_READY_SERVE, so the rarer states cost the fast path nothing. */
enum {
    CARVE_READY_NOT_YET = 0, /* options not read yet, or a forked child of a process that used CUDA:
                                every call passes to the driver */
    CARVE_READY_SERVE = 1,   /* carve serves */
    CARVE_READY_FAULTS = 2,  /* carve serves, failures are injected (faults.c) */
    CARVE_READY_PASS = 3,    /* carve_run_serve(0): new allocations go to the driver (counted against
                                the cap, failures injected as ever) until carve_run_serve(1) */
};
typedef struct carve_session {
    int ready;              /* CARVE_READY_*, atomic */
    int report;             /* --report given */
    int tracing;            /* --trace or --svg given */
    int watching;           /* tracing or report: the hooks tell of every call carve serves */
    int quiet;              /* no messages on stderr */
    uint64_t t0_ns;         /* start of the run (CLOCK_MONOTONIC) */
} carve_session;
extern carve_session carve_run CARVE_INTERNAL;
/* Read the options and set up trace, report and signal handling (once). */
void carve_session_init(void) CARVE_INTERNAL;
uint64_t carve_session_now(void) CARVE_INTERNAL;
/* Trace events (no-ops without --trace): stream is the CUstream handle. */
void carve_session_trace_alloc(uintptr_t ptr, size_t size, carve_stream stream) CARVE_INTERNAL;
void carve_session_trace_free(uintptr_t ptr) CARVE_INTERNAL;
/* A buffer of c's arena the program got (size bytes, as asked) or gave
 * back, while carve_run.watching: traced, and counted in the program's
 * live bytes of c's device under --report (the report's peak_live_bytes). */
void carve_session_saw_alloc(carve_ctx *c, uintptr_t ptr, size_t size, carve_stream stream) CARVE_INTERNAL;
void carve_session_saw_free(carve_ctx *c, uintptr_t ptr, size_t size) CARVE_INTERNAL;
/* A context whose arena could not be made: say why, once per device. */
void carve_session_warn(int device, const char *why) CARVE_INTERNAL;
/* An allocation the program did not get: say why, once per device. */
void carve_session_oom(int device, size_t size, const char *why) CARVE_INTERNAL;
/* cuIpcGetMemHandle refused on carve's virtual-memory memory: say so and
 * name --mode segments, once per device. */
void carve_session_ipc_refused(int device) CARVE_INTERNAL;

/* ---- counted.c ---- */
/* Take size bytes of kind on device for an allocation of the program that
 * goes to the driver: 0, or -1 past the cap, after giving back what carve
 * holds cached on the device and saying once why (carve_session_oom). */
int carve_counted_take(int device, size_t size, int kind) CARVE_INTERNAL;
/* What the cap holds on device, by kind, in words (for a message). */
void carve_counted_explain(int device, char *why, size_t len) CARVE_INTERNAL;

#endif
