/*
 * error.c — the per-thread explanation of the last failure.
 *
 * Messages live in per-thread buffers (base/thread_text.c) tagged with the
 * arena's id, so concurrent failures on different threads never overwrite
 * each other and a message is never attributed to the wrong arena.
 */
#include "engine/error.h"

#include <stdarg.h>
#include <string.h>

#include "base/thread_text.h"

static __thread uint64_t tls_err_arena; /* the arena the thread's last error is about */

carve_status carve_fail(const carve_arena *a, carve_status st, const char *fmt, ...) {
    char *msg = carve_thread_text(CARVE_TEXT_ERROR);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, CARVE_TEXT_LEN, fmt, ap);
    va_end(ap);
    tls_err_arena = a ? a->id : 0;
    return st;
}

const char *carve_last_error(const carve_arena *a) {
    return tls_err_arena == (a ? a->id : 0) ? carve_thread_text(CARVE_TEXT_ERROR) : "";
}

void carve_note(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(carve_thread_text(CARVE_TEXT_NOTE), CARVE_TEXT_LEN, fmt, ap);
    va_end(ap);
}

const char *carve_note_get(void) { return carve_thread_text(CARVE_TEXT_NOTE); }
