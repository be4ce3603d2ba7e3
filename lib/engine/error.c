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
/* ... and what carve_last_error_info says of it. */
static __thread struct {
    carve_status status;
    int api, code, host;
} tls_err;

static __thread int tls_note_host; /* the note is about host memory */

static carve_status fail(const carve_arena *a, carve_status st, int host, const char *fmt, va_list ap) {
    char *msg = carve_thread_text(CARVE_TEXT_ERROR);
    vsnprintf(msg, CARVE_TEXT_LEN, fmt, ap);
    tls_err_arena = a ? a->id : 0;
    /* The driver's code belongs to failures the driver can cause; taken
     * either way, so that it is never quoted by a later failure. */
    int code = 0, api = carve_backend_code_take(&code);
    if (st != CARVE_ERR_BACKEND && st != CARVE_ERR_NO_DEVICE && st != CARVE_ERR_OOM)
        api = code = 0;
    tls_err.status = st;
    tls_err.api = api;
    tls_err.code = code;
    tls_err.host = st == CARVE_ERR_OOM && !api && host;
    return st;
}

carve_status carve_fail(const carve_arena *a, carve_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fail(a, st, 0, fmt, ap);
    va_end(ap);
    return st;
}

carve_status carve_fail_host(const carve_arena *a, carve_status st, int host, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fail(a, st, host, fmt, ap);
    va_end(ap);
    return st;
}

const char *carve_last_error(const carve_arena *a) {
    return tls_err_arena == (a ? a->id : 0) ? carve_thread_text(CARVE_TEXT_ERROR) : "";
}

carve_status carve_last_error_info_sized(const carve_arena *a, carve_error_info *out, size_t size) {
    if (!out || size < sizeof(size_t) || size > CARVE_ERROR_INFO_SIZE_MAX)
        return CARVE_ERR_INVALID; /* (not recorded: the last error stays the one asked about) */
    memset(out, 0, size);
    carve_error_info e = {.size = size, .status = CARVE_OK};
    if (tls_err_arena == (a ? a->id : 0) && carve_thread_text(CARVE_TEXT_ERROR)[0]) {
        e.status = tls_err.status;
        e.driver_api = tls_err.api;
        e.driver_error = tls_err.code;
        e.host_memory = tls_err.host;
    }
    memcpy(out, &e, size < sizeof(e) ? size : sizeof(e));
    out->size = size;
    return CARVE_OK;
}

void carve_note(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(carve_thread_text(CARVE_TEXT_NOTE), CARVE_TEXT_LEN, fmt, ap);
    va_end(ap);
    tls_note_host = 0;
}

void carve_note_host(int host, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(carve_thread_text(CARVE_TEXT_NOTE), CARVE_TEXT_LEN, fmt, ap);
    va_end(ap);
    tls_note_host = host;
}

const char *carve_note_get(void) { return carve_thread_text(CARVE_TEXT_NOTE); }

int carve_note_is_host(void) { return tls_note_host; }
