/*
 * error.c — the per-thread explanation of the last failure.
 *
 * Messages live in thread-local storage tagged with the arena's id, so
 * concurrent failures on different threads never overwrite each other and a
 * message is never attributed to the wrong arena.
 */
#include "engine/error.h"

#include <stdarg.h>
#include <string.h>

#define CARVE_MSG_LEN 1024

static __thread struct {
    uint64_t arena_id;
    char msg[CARVE_MSG_LEN];
} tls_err;

static __thread char tls_note[256];

carve_status carve_fail(const carve_arena *a, carve_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tls_err.msg, sizeof(tls_err.msg), fmt, ap);
    va_end(ap);
    tls_err.arena_id = a ? a->id : 0;
    return st;
}

const char *carve_last_error(const carve_arena *a) {
    return tls_err.arena_id == (a ? a->id : 0) ? tls_err.msg : "";
}

void carve_note(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tls_note, sizeof(tls_note), fmt, ap);
    va_end(ap);
}

const char *carve_note_get(void) { return tls_note; }
