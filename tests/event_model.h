/*
 * event_model.h — a deterministic device for tests, and an oracle that
 * checks carve's stream-order promise against it (event_model.c).
 *
 * The device. em_attach puts the model in front of an arena's backend (host
 * or virtual, either mode), the way the fault layer does: segments and
 * mappings still come from the real backend, but every event and every wait
 * goes to the model. Each stream is a queue of work items numbered 1, 2, ...
 * (em_enqueue adds one); an event recorded on a stream stands for the work
 * queued there so far; the device has done a stream's work up to a position
 * that moves only when the test says so (em_advance, em_complete, em_finish)
 * or when carve waits. A stream's work is done in order, streams in any
 * order. A wait calls the test's callback at the moment of waiting, before
 * the device catches up, so that a test can place another thread's calls
 * inside carve's wait; a device synchronization then completes only the
 * work queued before it began.
 *
 * The oracle keeps its own shadow of what the program did: the live
 * buffers, and for every freed buffer the last use of it on each stream it
 * was used on (its own and those named by carve_record_stream: a kernel on
 * that stream, queued just before the free). It fails the test (test_fail,
 * with the word "violation") when carve
 *  - hands out memory that overlaps a live buffer, or a freed buffer whose
 *    last use on another stream the device has not done (stream order);
 *  - unmaps or releases memory that a live buffer or unfinished work uses
 *    (unmapping is not stream-ordered);
 *  - reports statistics that disagree with the shadow (em_check_stats);
 *  - answers CARVE_ERR_OOM to a request that fits (em_check_oom);
 *  - records an event on a stream marked captured (carve_sim_set_capturing,
 *    which the model passes through), or on the legacy stream while any
 *    stream is, or synchronizes the device then (refused, as the driver
 *    refuses it).
 *
 * Thread-safe: any thread may call carve while others do; the shadow takes
 * a mutex. em_allocated must follow carve_alloc and em_freeing precede
 * carve_free, so that the shadow never shows a buffer live after carve
 * may have given its memory to another thread.
 */
#ifndef CARVE_TEST_EVENT_MODEL_H
#define CARVE_TEST_EVENT_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "carve.h"

typedef struct em_model em_model;

/* Put the model in front of a's backend. Call right after
 * carve_arena_create, before any other call on a. em_destroy destroys the
 * arena and then the model: the arena gives live buffers back unchecked
 * (the program gave them up), but memory whose freed buffers' work the
 * device has not done is still a violation (carve_arena_destroy waits for
 * the device first). */
em_model *em_attach(carve_arena *a);
void em_destroy(em_model *m);

/* ---- the device ---- */

/* Queue one work item on s; returns its position. */
uint64_t em_enqueue(em_model *m, carve_stream s);
/* The device has done s's work up to pos (never goes back). */
void em_advance(em_model *m, carve_stream s, uint64_t pos);
/* Everything queued so far is done. */
void em_finish(em_model *m);
/* The position of s's last queued item, and of the last one done. */
uint64_t em_queued(em_model *m, carve_stream s);
uint64_t em_done(em_model *m, carve_stream s);

/* Events carve holds that have not completed: em_open_events writes up to
 * max of their numbers (in the order they were recorded) and returns how
 * many there are; em_complete(number) completes one (and with it every
 * earlier item of its stream). 0 when that event is gone or was done. */
size_t em_open_events(em_model *m, unsigned *numbers, size_t max);
int em_complete(em_model *m, unsigned number);
/* A device that also moves on its own: each time carve asks about an
 * event that has not completed, it completes (with the work before it on
 * its stream) with probability per_mille/1000, drawn from a generator
 * seeded with seed. Queries come in an order the schedule fixes, so a
 * seeded schedule stays reproducible. 0 (the default): never. */
void em_progress(em_model *m, unsigned per_mille, uint64_t seed);
/* Events recorded so far (all streams), and those recorded on s. */
unsigned long em_records(em_model *m);
unsigned long em_records_on(em_model *m, carve_stream s);

/* Called on the waiting thread each time carve waits, before the device
 * catches up: event (NULL for a device synchronization) and the stream the
 * event was recorded on. Carve's locks are held as the wait site holds
 * them. */
typedef void (*em_wait_fn)(void *arg, int device_wide, carve_stream s);
void em_on_wait(em_model *m, em_wait_fn fn, void *arg);

/* ---- the oracle ---- */

/* carve_alloc(size, s) returned p (not NULL): check it, then shadow it. */
void em_allocated(em_model *m, void *p, size_t size, carve_stream s);
/* carve_record_stream(p, s) succeeded. */
void em_record_stream(em_model *m, void *p, carve_stream s);
/* Just before carve_free(p): a last use of p is queued on each of its
 * streams, and p leaves the shadow's live set. */
void em_freeing(em_model *m, void *p);

/* With no carve call in flight: the arena's statistics against the shadow.
 * Counts, bytes and live buffers equal; peaks never below current values;
 * reserved within the limit and at least what is allocated; the largest
 * free block no larger than what is cached. */
void em_check_stats(em_model *m);

/* Classes of request that fails although it fits (em_check_oom). */
enum {
    EM_OOM_OK = 0,     /* legitimate: nothing that fits is free */
    EM_OOM_INDEX = 1,  /* a free block of the stream's pool fits, and the search gave up */
    EM_OOM_SPACE = 2,  /* default mode: room under the limit, no address space in one piece */
    EM_OOM_HEAP = 4,   /* segments mode: a free heap range the stream may use fits */
    EM_OOM_EXTEND = 8, /* segments mode: a span of the stream could have grown into the range after it */
    EM_OOM_GROW = 16,  /* room under the limit to reserve a segment that fits */
    EM_OOM_OTHER = 32  /* default mode: the granules fit under the limit; none of the above */
};
/* With no carve call in flight, right after carve_alloc(size, s) answered
 * CARVE_ERR_OOM (which reclaims and synchronizes first) with message why
 * (carve_last_error on the thread that called it): whether the request
 * fits. Default mode: the granules live buffers touch (with the whole of
 * every mapping larger than a granule they touch) plus those the request
 * needs fit under the limit. Segments mode: a free block of s's
 * pool, a free heap range s may use, a span of s that can grow into the
 * range after it, or room to reserve a segment holds it. (Free space in
 * other streams' spans is theirs: segments mode never moves it.) Returns
 * EM_OOM_* bits (0: legitimate); the test reports what it does not
 * expect. */
unsigned em_check_oom(em_model *m, size_t size, carve_stream s, const char *why);
const char *em_oom_name(unsigned cls);

/* Violations found so far (each also failed the test). */
unsigned long em_violations(em_model *m);

#endif
