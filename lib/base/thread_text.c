/*
 * thread_text.c — per-thread text buffers on the heap, one pointer in TLS
 * (thread_text.h says why), freed by a thread-specific-data destructor when
 * the thread exits.
 *
 * The one idea: the destructor also forgets the buffers, so a carve call
 * made after it by a destructor of another key (a program's key created
 * after carve's runs later in the same round) finds no buffers and makes
 * new ones, registered again; POSIX then runs the destructors once more
 * (up to PTHREAD_DESTRUCTOR_ITERATIONS rounds), which frees them. Only a
 * call made after the last round (from a destructor that set its own key
 * again in every round before) keeps its buffers for good: a leak of
 * 3 KiB, never a write into freed memory.
 */
#include "base/thread_text.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct texts {
    char text[CARVE_TEXT_COUNT][CARVE_TEXT_LEN];
} texts;

static __thread texts *mine;
static pthread_key_t key;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int have_key;
static texts fallback; /* when host memory ran out */

/* Runs on the exiting thread itself, so `mine` is that thread's. */
static void drop(void *p) {
    if (mine == p)
        mine = NULL;
    free(p);
}

static void make_key(void) { have_key = pthread_key_create(&key, drop) == 0; }

char *carve_thread_text(unsigned which) {
    if (which >= CARVE_TEXT_COUNT)
        which = CARVE_TEXT_ERROR;
    if (CARVE_UNLIKELY(!mine)) {
        pthread_once(&once, make_key);
        texts *t = calloc(1, sizeof(*t));
        if (!t)
            return fallback.text[which];
        if (have_key)
            pthread_setspecific(key, t);
        mine = t;
    }
    return mine->text[which];
}
