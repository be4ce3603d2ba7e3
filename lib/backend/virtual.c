/*
 * virtual.c — addresses with nothing behind them.
 *
 * Segments are carved from one address space shared by every virtual arena
 * of the process, starting at 2^44, so every address handed out is unique
 * among live segments (across arenas too) and aligned, and an 80 GB trace
 * simulates on a laptop. Nothing may dereference them; the engine never
 * does. Released ranges are kept in a list and handed out again (first
 * fit, lowest address first), so a long simulation that reserves and
 * releases segments over and over keeps reusing the same few addresses:
 * its address space, and the engine's address maps that cover it, stay as
 * large as its peak instead of growing with every reservation.
 */
#include "backend/leaves.h"
#include "backend/sim.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define VIRTUAL_BASE ((uintptr_t)1 << 44)
#define VIRTUAL_END ((uintptr_t)1 << 56)

typedef struct hole {
    uintptr_t base;
    size_t size; /* including the one-granule gap after it */
    struct hole *next;
} hole;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t next_address = VIRTUAL_BASE;
static hole *holes; /* released ranges, by address */

static carve_status virtual_reserve(carve_be *be, size_t size, uintptr_t *base) {
    (void)be;
    /* A one-granule gap between segments keeps them from ever looking
     * adjacent. */
    if (size > VIRTUAL_END - VIRTUAL_BASE - CARVE_SEGMENT_GRANULE) {
        carve_backend_fail("virtual address space exhausted");
        return CARVE_ERR_OOM;
    }
    uintptr_t step = size + CARVE_SEGMENT_GRANULE;
    carve_status st = CARVE_OK;
    pthread_mutex_lock(&lock);
    hole **pp = &holes;
    while (*pp && (*pp)->size < step)
        pp = &(*pp)->next;
    if (*pp) { /* reuse a released range, its low end */
        hole *h = *pp;
        *base = h->base;
        h->base += step;
        h->size -= step;
        if (!h->size) {
            *pp = h->next;
            free(h);
        }
    } else if (next_address > VIRTUAL_END - step) {
        carve_backend_fail("virtual address space exhausted");
        st = CARVE_ERR_OOM;
    } else {
        *base = next_address;
        next_address += step;
    }
    pthread_mutex_unlock(&lock);
    return st;
}

static carve_status virtual_release(carve_be *be, uintptr_t base, size_t size) {
    (void)be;
    hole *n = malloc(sizeof(*n));
    if (!n) /* the range is simply not reused */
        return CARVE_OK;
    n->base = base;
    n->size = size + CARVE_SEGMENT_GRANULE;
    pthread_mutex_lock(&lock);
    hole **pp = &holes;
    while (*pp && (*pp)->base < base)
        pp = &(*pp)->next;
    n->next = *pp;
    *pp = n;
    /* Merge with the neighbours it touches. */
    if (n->next && n->base + n->size == n->next->base) {
        hole *x = n->next;
        n->size += x->size;
        n->next = x->next;
        free(x);
    }
    hole *prev = NULL;
    for (hole *h = holes; h && h != n; h = h->next)
        prev = h;
    if (prev && prev->base + prev->size == n->base) {
        prev->size += n->size;
        prev->next = n->next;
        free(n);
    }
    pthread_mutex_unlock(&lock);
    return CARVE_OK;
}

/* Mapping is bookkeeping only, and the engine keeps it: nothing is
 * recorded here, whatever the size. */
static carve_status virtual_commit(carve_be *be, uintptr_t addr, size_t size, size_t piece) {
    (void)be;
    (void)addr;
    (void)size;
    (void)piece;
    return CARVE_OK;
}

static carve_status virtual_decommit(carve_be *be, uintptr_t addr, size_t size, size_t piece, size_t *done) {
    (void)be;
    (void)addr;
    (void)piece;
    *done = size;
    return CARVE_OK;
}

static void virtual_destroy(carve_be *be) { (void)be; }

static const carve_backend_ops virtual_ops = {
    .reserve = virtual_reserve,
    .release = virtual_release,
    .commit = virtual_commit,
    .decommit = virtual_decommit,
    .event_record = carve_sim_event_record,
    .event_query = carve_sim_event_query,
    .event_sync = carve_sim_event_sync,
    .event_follow = carve_sim_event_follow,
    .capturing = carve_sim_capturing,
    .device_sync = carve_sim_device_sync,
    .event_release = carve_sim_event_release,
    .destroy = virtual_destroy,
};

carve_status carve_backend_open_virtual(carve_be *be) {
    be->ops = &virtual_ops;
    return CARVE_OK;
}
