/*
 * captures.c — the graph captures in progress in the process, and the
 * streams they are on.
 *
 * The one idea: while any stream is being captured, nothing may be recorded
 * on the legacy default stream (it would join the capture and break it), so
 * every part of the interposer that records events — its own quarantine and
 * carve's driver backend, through carve_cuda_driver_lookup — asks this one
 * counter first. hooks.c tells it as captures begin and end; a capture that
 * begins is counted once and ends once, matched by its stream handle (the
 * per-thread stream of every thread is CU_STREAM_PER_THREAD here: each
 * begin still has its own end).
 */
#include "preload/preload.h"

#define MAX_STREAMS 1024

int carve_captures; /* atomic */
static carve_stream streams[MAX_STREAMS];
static int nstreams, untracked; /* captures past the table: ended by any unmatched end */
static int lock;

static void take(void) {
    while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE)) {
    }
}
static void give(void) { __atomic_store_n(&lock, 0, __ATOMIC_RELEASE); }

void carve_capture_begin(carve_stream s) {
    take();
    if (nstreams < MAX_STREAMS)
        streams[nstreams++] = s;
    else
        untracked++;
    __atomic_add_fetch(&carve_captures, 1, __ATOMIC_ACQ_REL);
    give();
}

void carve_capture_end(carve_stream s) {
    take();
    int found = 0;
    for (int i = 0; i < nstreams && !found; i++)
        if (streams[i] == s) {
            streams[i] = streams[--nstreams];
            found = 1;
        }
    if (!found && untracked > 0) {
        untracked--;
        found = 1;
    }
    if (found)
        __atomic_sub_fetch(&carve_captures, 1, __ATOMIC_ACQ_REL);
    give();
}

void carve_capture_forked(void) { __atomic_store_n(&lock, 0, __ATOMIC_RELEASE); }
