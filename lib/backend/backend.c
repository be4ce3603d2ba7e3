/*
 * backend.c — the per-thread message buffer every backend writes its
 * failures into (backend.h), so that concurrent failures on different threads
 * keep their own explanations and the engine can quote them.
 */
#include "backend/backend.h"

#include "base/thread_text.h"

char *carve_backend_msg(void) { return carve_thread_text(CARVE_TEXT_BACKEND); }
