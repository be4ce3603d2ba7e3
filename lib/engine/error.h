/*
 * error.h — how the engine explains failures: a per-thread last error tagged
 * with the arena it belongs to (carve_last_error reads it), and a per-thread
 * note of why the heap could not grow, quoted by out-of-memory messages.
 */
#ifndef CARVE_ENGINE_ERROR_H
#define CARVE_ENGINE_ERROR_H

#include "engine/types.h"

/* Record msg as the calling thread's last error for arena a (NULL for
 * arena-less calls) and return st. */
carve_status carve_fail(const carve_arena *a, carve_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4))) CARVE_INTERNAL;
/* The same; host (with st CARVE_ERR_OOM) says that host memory ran out, not
 * the device's or the limit (carve_error_info.host_memory). The failure
 * sites say so, never the message's words (an arena's name may hold any). */
carve_status carve_fail_host(const carve_arena *a, carve_status st, int host, const char *fmt, ...)
    __attribute__((format(printf, 4, 5))) CARVE_INTERNAL;
/* Per-thread note of why the heap could not grow, for OOM explanations;
 * carve_note_host's is about host memory running out when host is nonzero,
 * carve_note's never, and carve_note_is_host tells which the last was. */
void carve_note(const char *fmt, ...) __attribute__((format(printf, 1, 2))) CARVE_INTERNAL;
void carve_note_host(int host, const char *fmt, ...) __attribute__((format(printf, 2, 3))) CARVE_INTERNAL;
const char *carve_note_get(void) CARVE_INTERNAL;
int carve_note_is_host(void) CARVE_INTERNAL;

#endif
