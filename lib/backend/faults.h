/*
 * faults.h — injected backend failures (faults.c), for testing how the
 * engine and its callers survive a driver that fails: the configuration keys
 * fail_backend_at, fail_backend_every and fail_backend_status switch them
 * on, on every backend, CUDA included.
 */
#ifndef CARVE_BACKEND_FAULTS_H
#define CARVE_BACKEND_FAULTS_H

#include "backend/backend.h"

/* Put the fault layer in front of be's ops (be must be open): the counted
 * calls of kinds (CARVE_FAULT_*) numbered at .. at+times-1 (at 0: none) and
 * every every-th one (0: none) fail; a failed allocation returns status.
 * Calling it again changes the plan and keeps the count. */
void carve_backend_faults_on(carve_be *be, unsigned long at, unsigned long times, unsigned long every,
                             unsigned kinds, carve_status status) CARVE_INTERNAL;
/* Take the fault layer away again (before destroying the arena, whose
 * segments must all go back). No-op when it is off. */
void carve_backend_faults_off(carve_be *be) CARVE_INTERNAL;

#endif
