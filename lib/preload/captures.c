/*
 * captures.c — how many graph captures are in progress in the process.
 *
 * The one idea: while any stream is being captured, nothing may be recorded
 * on the legacy default stream (it would join the capture and break it), so
 * every part of the interposer that records events — its own quarantine and
 * carve's driver backend, through carve_cuda_driver_lookup — asks this one
 * counter first. hooks.c moves it as captures begin and end.
 */
#include "preload/preload.h"

int carve_captures; /* atomic */

void carve_capture_add(int delta) { __atomic_add_fetch(&carve_captures, delta, __ATOMIC_ACQ_REL); }
