/*
 * record.c — reporting the framework entry points' allocations and frees to
 * a recorder (carve_route_set_recorder), numbering streams as a trace does.
 *
 * The one idea: one mutex serializes the callbacks and guards the recorder
 * itself, so replacing the recorder waits for any call in flight, and a
 * caller may close the old recorder's file the moment the swap returns.
 * A free holds the mutex across carve_free and is reported only when it
 * succeeded, before the mutex lets an allocation of the same memory be
 * reported; an allocation is reported after it came out. So the order of
 * events under the mutex is one that a replay can follow, whatever the
 * threads do, and a failed (then retried) free is reported once. Times
 * count from the moment the recorder was set, as a trace's @<ns> does.
 * While no recorder is set, the cost is one relaxed load of a flag.
 */
#include "frameworks/record.h"

#include <pthread.h>
#include <time.h>

#include "engine/error.h"

#define MAX_STREAMS 1024u /* CARVE_TRACE_MAX_STREAMS: numbers 0 .. 1023 */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_on; /* atomic: a recorder is set */
static carve_record_alloc_fn g_alloc;
static carve_record_free_fn g_free;
static void *g_ctx;
static carve_stream g_streams[MAX_STREAMS]; /* [0] is the default stream, NULL */
static uint32_t g_nstreams = 1;
static uint64_t g_t0; /* CLOCK_MONOTONIC when the recorder was set */

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Lock held. The trace number of stream: its place in order of appearance. */
static uint32_t stream_number(carve_stream s) {
    if (!s)
        return 0;
    for (uint32_t i = 1; i < g_nstreams; i++)
        if (g_streams[i] == s)
            return i;
    if (g_nstreams < MAX_STREAMS) {
        g_streams[g_nstreams] = s;
        return g_nstreams++;
    }
    return MAX_STREAMS - 1;
}

carve_status carve_route_set_recorder(carve_record_alloc_fn on_alloc, carve_record_free_fn on_free, void *ctx) {
    if (!on_alloc != !on_free)
        return carve_fail(NULL, CARVE_ERR_INVALID,
                          "carve_route_set_recorder: give both on_alloc and on_free, or neither");
    pthread_mutex_lock(&g_lock);
    g_alloc = on_alloc;
    g_free = on_free;
    g_ctx = on_alloc ? ctx : NULL;
    g_nstreams = 1;
    g_t0 = now_ns();
    CARVE_STORE(&g_on, on_alloc != NULL);
    pthread_mutex_unlock(&g_lock);
    return CARVE_OK;
}

void carve_fw_record_alloc(const void *ptr, size_t size, carve_stream stream) {
    if (CARVE_LIKELY(!CARVE_LOAD(&g_on)) || !ptr)
        return;
    pthread_mutex_lock(&g_lock);
    if (g_alloc)
        (void)g_alloc(g_ctx, (uint64_t)(uintptr_t)ptr, (uint64_t)size, stream_number(stream), now_ns() - g_t0);
    pthread_mutex_unlock(&g_lock);
}

int carve_fw_record_free_begin(void) {
    if (CARVE_LIKELY(!CARVE_LOAD(&g_on)))
        return 0;
    pthread_mutex_lock(&g_lock);
    return 1;
}

void carve_fw_record_free_end(int held, const void *ptr, int freed) {
    if (!held)
        return;
    if (freed && ptr && g_free)
        (void)g_free(g_ctx, (uint64_t)(uintptr_t)ptr, now_ns() - g_t0);
    pthread_mutex_unlock(&g_lock);
}
