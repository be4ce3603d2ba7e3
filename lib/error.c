/*
 * error.c — status names and the per-thread explanation of the last failure.
 *
 * Messages live in thread-local storage tagged with the arena's id, so
 * concurrent failures on different threads never overwrite each other and a
 * message is never attributed to the wrong arena.
 */
#include "arena.h"

#include <stdarg.h>
#include <string.h>

#define CARVE_MSG_LEN 1024

static __thread struct {
    uint64_t arena_id;
    char msg[CARVE_MSG_LEN];
} tls_err;

static __thread char tls_note[256];

const char *carve_version(void) { return CARVE_VERSION_STRING; }

const char *carve_status_str(carve_status st) {
    switch (st) {
    case CARVE_OK: return "CARVE_OK";
    case CARVE_ERR_INVALID: return "CARVE_ERR_INVALID";
    case CARVE_ERR_OOM: return "CARVE_ERR_OOM";
    case CARVE_ERR_BAD_POINTER: return "CARVE_ERR_BAD_POINTER";
    case CARVE_ERR_BACKEND: return "CARVE_ERR_BACKEND";
    case CARVE_ERR_NO_DEVICE: return "CARVE_ERR_NO_DEVICE";
    }
    return "unknown status";
}

const char *carve_backend_str(carve_backend b) {
    switch (b) {
    case CARVE_BACKEND_CUDA: return "cuda";
    case CARVE_BACKEND_HOST: return "host";
    case CARVE_BACKEND_VIRTUAL: return "virtual";
    }
    return "unknown";
}

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

char *carve_fmt_bytes(char *buf, size_t len, size_t bytes) {
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes == SIZE_MAX) {
        snprintf(buf, len, "unlimited");
        return buf;
    }
    double v = (double)bytes;
    unsigned u = 0;
    while (v >= 1024.0 && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%zu B", bytes);
    else
        snprintf(buf, len, "%.2f %s", v, units[u]);
    return buf;
}
