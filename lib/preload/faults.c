/*
 * faults.c — allocation failures injected on purpose (carve-run
 * --fail-every N and --fail-at N; CARVE_RUN_FAIL_EVERY, CARVE_RUN_FAIL_AT),
 * so that what a program does when memory runs out can be tested without
 * filling a GPU.
 *
 * The one idea: the program's allocation calls are numbered from 1 in the
 * process, whichever interposed entry point they come through (the
 * driver's cuMemAlloc, cuMemAllocAsync, cuMemAllocPitch, cuMemCreate,
 * cuMemAllocFromPoolAsync and their per-thread forms; the shared runtime's
 * cudaMalloc and cudaMallocAsync, which the interposer exports), and the
 * chosen ones fail before anything is allocated, with the error the driver
 * gives when memory runs out. A call that the runtime export passes on to
 * the real runtime reaches a driver hook next on the same thread: the
 * export numbers it and leaves a note for that hook, so each call of the
 * program is numbered once; and an injected failure of the export goes
 * through the runtime itself, which records it for cudaGetLastError as it
 * would a real one. Calls carve makes for its own arenas are never
 * numbered. Without the options, the hooks pay one load of a flag.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preload/preload.h"

int carve_faults_armed;
static unsigned long long fail_every, fail_at;
static unsigned long long calls, injected; /* atomic */
static __thread int note;                  /* FAULT_NOTE_*: what the runtime export left for the driver hook */
static pthread_once_t once = PTHREAD_ONCE_INIT;

enum { FAULT_NOTE_NONE, FAULT_NOTE_NUMBERED, FAULT_NOTE_FAIL };

/* A whole number from 1 in the variable name (0: not set); -1 when it is
 * set to anything else. */
static int read_count(const char *name, unsigned long long *out) {
    const char *v = getenv(name);
    *out = 0;
    if (!v || !*v)
        return 0;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (*v < '0' || *v > '9' || *end || errno || n == 0)
        return -1;
    *out = n;
    return 0;
}

static void say_bad(const char *name) {
    const char *q = getenv("CARVE_RUN_QUIET");
    if (q && *q && strcmp(q, "0") != 0)
        return;
    char buf[256];
    int n = snprintf(buf, sizeof(buf), "carve-run: %s='%s' is not a whole number from 1; no failures are injected\n",
                     name, getenv(name));
    if (n > 0)
        (void)!write(STDERR_FILENO, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

static void init_once(void) {
    int bad_every = read_count("CARVE_RUN_FAIL_EVERY", &fail_every);
    int bad_at = read_count("CARVE_RUN_FAIL_AT", &fail_at);
    if (bad_every)
        say_bad("CARVE_RUN_FAIL_EVERY");
    if (bad_at)
        say_bad("CARVE_RUN_FAIL_AT");
    if (bad_every || bad_at)
        fail_every = fail_at = 0;
    __atomic_store_n(&carve_faults_armed, fail_every || fail_at, __ATOMIC_RELEASE);
}

void carve_faults_init(void) { pthread_once(&once, init_once); }

int carve_fault_number(void) {
    unsigned long long k = __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
    return (fail_at && k == fail_at) || (fail_every && k % fail_every == 0);
}

int carve_fault_next(void) {
    int n = note;
    note = FAULT_NOTE_NONE;
    int fail = n == FAULT_NOTE_FAIL || (n == FAULT_NOTE_NONE && carve_fault_number());
    if (fail)
        __atomic_add_fetch(&injected, 1, __ATOMIC_RELAXED);
    return fail;
}

void carve_fault_note(int fail) { note = fail ? FAULT_NOTE_FAIL : FAULT_NOTE_NUMBERED; }

void carve_fault_note_clear(void) { note = FAULT_NOTE_NONE; }

unsigned long long carve_faults_injected(void) { return __atomic_load_n(&injected, __ATOMIC_RELAXED); }
