/*
 * backend.c — the per-thread message buffer every backend writes its
 * failures into (backend.h), so that concurrent failures on different threads
 * keep their own explanations and the engine can quote them, and the CUDA
 * error code of the latest driver failure beside it.
 */
#include "backend/backend.h"

#include "base/thread_text.h"

char *carve_backend_msg(void) { return carve_thread_text(CARVE_TEXT_BACKEND); }

static __thread struct {
    int api, code;
} tls_code;

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
