/*
 * test_thread_exit.c — carve calls made while a thread exits, from the
 * destructor of a thread-specific key the program created after carve's
 * own: they fail with their usual status and message, and never touch the
 * per-thread buffers carve freed a moment before (AddressSanitizer reported
 * a heap-use-after-free in carve_fail from carve_free here).
 *
 * The sequence: carve's key exists (a failed call on the main thread made
 * it); the program creates its key; a thread fails a carve call (so its
 * buffers exist), sets the program's key and exits. The thread's
 * destructors then run in key order: carve's frees the buffers, the
 * program's calls carve_free with a bad pointer and reads the message, and
 * sets its key again, so that it runs once more in the next round of
 * destructors and does the same there.
 */
#include <limits.h>
#include <pthread.h>

#include "test_util.h"

static carve_arena *g_arena;
static pthread_key_t g_key;

typedef struct late_calls {
    int rounds;               /* times the program's destructor ran */
    int status_ok;            /* every call returned CARVE_ERR_BAD_POINTER */
    int message_ok;           /* ... and explained itself */
} late_calls;
static late_calls g_late;

/* Run twice (POSIX repeats destructors whose keys were set again, up to
 * PTHREAD_DESTRUCTOR_ITERATIONS rounds): in the round carve's destructor
 * ran, and in the next. */
static void late(void *v) {
    g_late.rounds++;
    carve_status st = carve_free(g_arena, (void *)(uintptr_t)0x1000);
    g_late.status_ok &= st == CARVE_ERR_BAD_POINTER;
    g_late.message_ok &= strstr(carve_last_error(g_arena), "carve_free") != NULL;
    if (g_late.rounds < 2)
        pthread_setspecific(g_key, v);
}

static void *exiting(void *arg) {
    (void)arg;
    void *p = NULL;
    /* The thread's buffers exist before its destructors run. */
    if (carve_free(g_arena, (void *)(uintptr_t)0x2000) == CARVE_ERR_BAD_POINTER &&
        carve_alloc(g_arena, 1 << 20, NULL, &p) == CARVE_OK)
        carve_free(g_arena, p);
    pthread_setspecific(g_key, &g_late);
    return NULL;
}

static void test_call_from_later_destructor(void) {
    g_arena = test_arena(CARVE_BACKEND_HOST, 1, 0, 0);
    /* carve's key is made by the first failure of the process. */
    CHECK_ST(g_arena, carve_free(g_arena, (void *)(uintptr_t)0x3000), CARVE_ERR_BAD_POINTER);
    CHECK(pthread_key_create(&g_key, late) == 0);
    for (int i = 0; i < 3; i++) {
        g_late = (late_calls){0, 1, 1};
        pthread_t th;
        CHECK(pthread_create(&th, NULL, exiting, NULL) == 0);
        CHECK(pthread_join(th, NULL) == 0);
        CHECK(g_late.rounds == 2);
        CHECK(g_late.status_ok);
        CHECK(g_late.message_ok);
    }
    pthread_key_delete(g_key);
    CHECK_ARENA(g_arena);
    carve_arena_destroy(g_arena);
}

int main(void) {
    test_call_from_later_destructor();
    return test_finish();
}
