/*
 * backend.c — the per-thread message buffer every backend writes its
 * failures into (backend.h), so that concurrent failures on different threads
 * keep their own explanations and the engine can quote them, and the CUDA
 * error code of the latest driver failure beside it (and whether the
 * message is about host memory).
 */
#include "backend/backend.h"

#include "base/thread_text.h"

char *carve_backend_msg(void) { return carve_thread_text(CARVE_TEXT_BACKEND); }

static __thread struct {
    int api, code;
} tls_code;

static __thread int tls_host; /* the message is about host memory */

void carve_backend_host_set(int host) { tls_host = host; }

int carve_backend_host(void) { return tls_host; }

void carve_backend_code(int api, int code) {
    tls_code.api = api;
    tls_code.code = api ? code : 0;
}

int carve_backend_code_take(int *code) {
    int api = tls_code.api;
    *code = tls_code.code;
    tls_code.api = tls_code.code = 0;
    return api;
}
