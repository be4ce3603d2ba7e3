/*
 * backend.c — the per-thread message buffer every backend writes its
 * failures into (backend.h), so that concurrent failures on different threads
 * keep their own explanations and the engine can quote them.
 */
#include "backend/backend.h"

char *carve_backend_msg(void) {
    static __thread char msg[CARVE_BACKEND_MSG_LEN];
    return msg;
}
