/*
 * stats.c — memory_allocated / memory_reserved and carve_get_stats.
 *
 * Current values are exact: each pool's counters are summed, read together
 * under that pool's lock, so within a stream they agree with one another
 * (its frees never outnumber its allocations, live = allocations - frees)
 * even while the stream allocates. Peaks are exact per pool; the arena-wide
 * peak is the larger of the biggest pool peak and the peak of the batched
 * arena-wide counters (exact with one stream; with several, low by at most
 * CARVE_STATS_BATCH per stream), which keeps the hot path free of shared
 * writes; no peak reads below its current value.
 *
 * The driver ledger is the backend's (backend/ledger.h): its counts are
 * copied out, and its modeled time computed from them, on each query.
 *
 * Resetting the peaks takes every lock at once, the way carve_check does,
 * and merges every stream's batch, so that the peaks restart exactly from
 * the current values:
 * the reserved bytes rise, in virtual-memory mode, under a pool's lock and
 * not the heap's (vmm.c), so a reset under the heap lock alone could store a
 * value read before a map that raised the peak meanwhile, and leave the peak
 * below what is reserved.
 */
#include "engine/stats.h"

#include <stddef.h>
#include <string.h>

#include "engine/error.h"
#include "engine/heap.h"
#include "engine/pool.h"

size_t carve_memory_allocated(const carve_arena *a) {
    size_t sum = 0;
    if (a)
        for (carve_pool *p = carve_pools_first(a); p; p = p->next_all)
            sum += CARVE_LOAD(&p->allocated);
    return sum;
}

size_t carve_memory_reserved(const carve_arena *a) { return a ? CARVE_LOAD(&a->heap.reserved) : 0; }

/* Pool lock held: the largest free block of p with memory behind it. The
 * block freed last is parked unmerged (the hot block) until the next free
 * or a search; it counts here as what it will be, merged with its free
 * neighbours. */
static size_t pool_largest(const carve_pool *p) {
    size_t largest = 0;
    for (int c = 0; c < 2; c++) {
        size_t l = carve_index_largest(&p->index[c]);
        largest = l > largest ? l : largest;
    }
    const carve_block *h = p->hot;
    if (h) {
        size_t l = h->size;
        if (h->prev && h->prev->state == CARVE_B_FREE)
            l += h->prev->size;
        if (h->next && h->next->state == CARVE_B_FREE)
            l += h->next->size;
        largest = l > largest ? l : largest;
    }
    return largest;
}

/* Pool lock held: add p's counters to s. */
static void add_pool(carve_stats *s, const carve_pool *p, size_t *apeak, size_t *rpeak, size_t *largest) {
    s->allocated_bytes += p->allocated;
    s->requested_bytes += p->requested;
    *apeak = p->allocated_peak > *apeak ? p->allocated_peak : *apeak;
    *rpeak = p->requested_peak > *rpeak ? p->requested_peak : *rpeak;
    s->num_allocs += p->nallocs;
    s->num_frees += p->nfrees;
    s->num_live += p->nallocs - p->nfrees;
    s->num_streams++;
    size_t l = pool_largest(p);
    *largest = l > *largest ? l : *largest;
}

void carve_stats_collect(const carve_arena *a, carve_stats *s, int locked) {
    carve_arena *m = (carve_arena *)a; /* locks are taken; nothing observable changes */
    memset(s, 0, sizeof(*s));
    size_t apeak = 0, rpeak = 0, largest = 0;
    for (carve_pool *p = carve_pools_first(a); p; p = p->next_all) {
        if (!locked)
            carve_spin_lock(&p->lock);
        add_pool(s, p, &apeak, &rpeak, &largest);
        if (!locked)
            carve_spin_unlock(&p->lock);
    }
    size_t ga = CARVE_LOAD(&a->g_alloc_peak), gr = CARVE_LOAD(&a->g_req_peak);
    s->allocated_bytes_peak = ga > apeak ? ga : apeak;
    s->requested_bytes_peak = gr > rpeak ? gr : rpeak;
    /* Peaks never read below the current values. */
    if (s->allocated_bytes_peak < s->allocated_bytes)
        s->allocated_bytes_peak = s->allocated_bytes;
    if (s->requested_bytes_peak < s->requested_bytes)
        s->requested_bytes_peak = s->requested_bytes;

    if (!locked)
        carve_mutex_lock(&m->heap.lock);
    s->reserved_bytes = CARVE_LOAD(&a->heap.reserved);
    s->reserved_bytes_peak = CARVE_LOAD(&a->heap.reserved_peak);
    s->num_segments = a->heap.nsegs;
    s->num_backend_allocs = CARVE_LOAD(&a->heap.nreserve);
    s->num_backend_frees = CARVE_LOAD(&a->heap.nrelease);
    s->num_syncs = CARVE_LOAD(&a->heap.nwaits);
    s->num_event_records = CARVE_LOAD(&a->heap.nrecords);
    s->num_event_queries = CARVE_LOAD(&a->heap.nqueries);
    if (!a->vmm) { /* in virtual-memory mode the heap's free ranges hold no memory */
        size_t l = carve_heap_largest_free(a);
        largest = l > largest ? l : largest;
    }
    if (!locked)
        carve_mutex_unlock(&m->heap.lock);
    if (s->reserved_bytes_peak < s->reserved_bytes) /* a map between the two reads (vmm.c needs no heap lock) */
        s->reserved_bytes_peak = s->reserved_bytes;
    s->largest_free_block = largest;
    s->limit_bytes = CARVE_LOAD(&a->limit);
    s->cached_bytes = s->reserved_bytes > s->allocated_bytes ? s->reserved_bytes - s->allocated_bytes : 0;
    s->num_ooms = CARVE_LOAD(&a->nooms);
    carve_ledger_read(&a->be.ledger, s->driver_calls, s->driver_mappings, s->driver_bytes);
    s->driver_model_ns = carve_ledger_model_ns(s->driver_calls, s->driver_mappings, s->driver_bytes);
    s->num_alloc_retries = CARVE_LOAD(&a->nretries);
}

const char *carve_driver_op_name(int op) { return carve_ledger_name(op); }

uint64_t carve_driver_model_ns(const uint64_t *calls, const uint64_t *mappings, const uint64_t *bytes) {
    return carve_ledger_model_ns(calls, mappings, bytes);
}

const char *carve_driver_costs_source(void) { return carve_ledger_source(); }

/* carve_stats begins with ABI 1.0's layout, field for field. */
_Static_assert(offsetof(carve_stats, num_event_queries) == offsetof(carve_stats_1_0, num_event_queries) &&
                   offsetof(carve_stats, num_syncs) == offsetof(carve_stats_1_0, num_syncs) &&
                   offsetof(carve_stats, num_streams) == offsetof(carve_stats_1_0, num_streams) &&
                   sizeof(carve_stats_1_0) == offsetof(carve_stats, num_event_queries) + sizeof(uint64_t),
               "carve_stats must begin with carve_stats_1_0");

carve_status carve_get_stats_sized(const carve_arena *a, carve_stats *out, size_t size) {
    int size_ok = size >= CARVE_STATS_SIZE_MIN && size <= CARVE_STATS_SIZE_MAX;
    if (out && size_ok)
        memset(out, 0, size);
    if (!a || !out || !size_ok)
        return carve_fail(a, CARVE_ERR_INVALID, "carve_get_stats: NULL argument or a size of %zu (between %zu and %zu)",
                          size, (size_t)CARVE_STATS_SIZE_MIN, (size_t)CARVE_STATS_SIZE_MAX);
    carve_stats s;
    carve_stats_collect(a, &s, 0);
    memcpy(out, &s, size < sizeof(s) ? size : sizeof(s)); /* the caller's fields; the rest stays zero */
    return CARVE_OK;
}

/* carve_get_stats as carve 1.0 exported it (carve.h now has it inline over
 * the sized call): programs built against that header pass a
 * carve_stats_1_0. The C name differs from carve.h's inline one; the
 * exported name is the old one. */
CARVE_API carve_status carve_get_stats_1_0(const carve_arena *a, carve_stats_1_0 *out) __asm__("carve_get_stats");
carve_status carve_get_stats_1_0(const carve_arena *a, carve_stats_1_0 *out) {
    return carve_get_stats_sized(a, (carve_stats *)(void *)out, sizeof(*out));
}

carve_status carve_get_stream_stats_sized(const carve_arena *a, carve_stream stream, carve_stream_stats *out,
                                         size_t size) {
    int size_ok = size >= sizeof(size_t) && size <= CARVE_STREAM_STATS_SIZE_MAX;
    if (out && size_ok)
        memset(out, 0, size);
    if (!a || !out || !size_ok)
        return carve_fail(a, CARVE_ERR_INVALID,
                          "carve_get_stream_stats: NULL argument or a size of %zu (between %zu and %zu)", size,
                          sizeof(size_t), (size_t)CARVE_STREAM_STATS_SIZE_MAX);
    carve_stream_stats s = {.size = size, .stream = stream};
    carve_pool *p = carve_pool_find(a, stream == CARVE_STREAM_PER_THREAD ? carve_thread_stream() : stream);
    if (p) { /* read together, under the pool's lock, as carve_get_stats reads them */
        carve_spin_lock(&p->lock);
        s.num_allocs = p->nallocs;
        s.num_frees = p->nfrees;
        s.num_live = p->nallocs - p->nfrees;
        s.allocated_bytes = p->allocated;
        s.allocated_bytes_peak = p->allocated_peak;
        s.requested_bytes = p->requested;
        s.requested_bytes_peak = p->requested_peak;
        carve_spin_unlock(&p->lock);
    }
    memcpy(out, &s, size < sizeof(s) ? size : sizeof(s));
    out->size = size;
    return CARVE_OK;
}

void carve_reset_peak_stats(carve_arena *a) {
    if (!a)
        return;
    /* Every lock, in the order of types.h: nothing is reserved, mapped or
     * flushed meanwhile, so every peak restarts from one instant. */
    carve_mutex_lock(&a->pools_lock);
    carve_pool *first = carve_pools_first(a);
    for (carve_pool *p = first; p; p = p->next_all)
        carve_spin_lock(&p->lock);
    carve_mutex_lock(&a->heap.lock);
    for (carve_pool *p = first; p; p = p->next_all) {
        /* Each stream's batch merged first: the arena-wide counters are then
         * exact, and so is the peak they restart from (left as they were, a
         * stream's unflushed frees would keep it up to a batch above). */
        if (CARVE_LOAD(&a->multi))
            carve_pool_flush(a, p);
        CARVE_STORE(&p->allocated_peak, p->allocated);
        CARVE_STORE(&p->requested_peak, p->requested);
    }
    CARVE_STORE(&a->g_alloc_peak, CARVE_LOAD(&a->g_alloc));
    CARVE_STORE(&a->g_req_peak, CARVE_LOAD(&a->g_req));
    CARVE_STORE(&a->heap.reserved_peak, CARVE_LOAD(&a->heap.reserved));
    carve_mutex_unlock(&a->heap.lock);
    for (carve_pool *p = first; p; p = p->next_all)
        carve_spin_unlock(&p->lock);
    carve_mutex_unlock(&a->pools_lock);
}
