/*
 * thread_text.h — the per-thread text buffers the library explains itself
 * in (the last error, the note of why the heap could not grow, the backend's
 * message), kept on the heap (thread_text.c).
 *
 * The one idea: thread-local storage of a library that uses the
 * initial-exec model (carve's fast path does, for its one-entry pool cache)
 * must all fit in the small static TLS area glibc keeps for libraries
 * loaded with dlopen — which is how Python loads libcarve. So only a pointer
 * per thread lives in TLS; the buffers are allocated on first use and freed
 * when the thread exits (and made again, and freed again, for a carve call
 * from another key's destructor that runs after that: thread_text.c).
 */
#ifndef CARVE_BASE_THREAD_TEXT_H
#define CARVE_BASE_THREAD_TEXT_H

#include <stddef.h>

#include "base/util.h"

enum { CARVE_TEXT_ERROR, CARVE_TEXT_NOTE, CARVE_TEXT_BACKEND, CARVE_TEXT_COUNT };
#define CARVE_TEXT_LEN 1024

/* The calling thread's buffer `which` (CARVE_TEXT_LEN bytes, NUL-terminated,
 * "" until written). Never NULL: if host memory runs out, a shared fallback
 * buffer is returned (messages of concurrent threads may then mix). */
char *carve_thread_text(unsigned which) CARVE_INTERNAL;

#endif
