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
 *
 * Nothing is behind the addresses, but the driver ledger (ledger.h) counts
 * the calls the CUDA backends would make for the same work, call for call:
 * a reservation is cuMemAddressReserve in virtual-memory mode and cudaMalloc
 * in segments mode; a commit is, per mapping, cuMemCreate (or a handle kept
 * from a recycle window, for a granule), cuMemMap and cuMemRelease, then one
 * cuMemSetAccess over the run, whatever the mappings' sizes; a decommit one cuMemUnmap per mapping, and
 * inside a recycle window a cuMemRetainAllocationHandle first; closing the
 * last window releases the handles not reused (cuda_vmm.c does exactly
 * this). So a replay here says what the driver would cost on a GPU.
 */
#include "backend/leaves.h"
#include "backend/sim.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/lock.h"

#define VIRTUAL_BASE ((uintptr_t)1 << 44)
#define VIRTUAL_END ((uintptr_t)1 << 56)

typedef struct hole {
    uintptr_t base;
    size_t size; /* including the one-granule gap after it */
    struct hole *next;
} hole;

/* One arena's recycle windows, as cuda_vmm.c keeps them: what it would
 * hold is only counted. */
typedef struct virtual_ctx {
    carve_mutex lock;
    int recycling;  /* windows open */
    size_t nspare;  /* granule handles kept in them */
} virtual_ctx;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t next_address = VIRTUAL_BASE;
static hole *holes; /* released ranges, by address */

static carve_status virtual_reserve(carve_be *be, size_t size, uintptr_t *base) {
    carve_ledger_add(&be->ledger, be->maps ? CARVE_DRV_RESERVE : CARVE_DRV_MALLOC, 1, 0, size);
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
    carve_ledger_add(&be->ledger, be->maps ? CARVE_DRV_UNRESERVE : CARVE_DRV_FREE, 1, 0, size);
    (void)carve_sim_release_captured(be); /* counted: giving memory back would break the capture */
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
 * recorded here but the ledger, whatever the size. */
static carve_status virtual_commit(carve_be *be, uintptr_t addr, size_t size, size_t piece) {
    (void)addr;
    virtual_ctx *c = be->ctx;
    size_t rest = size % piece, n = size / piece + (rest != 0), reused = 0; /* the last mapping: what is left */
    /* Kept handles are a granule's: they back the mappings of one granule. */
    size_t granules = piece == CARVE_SEGMENT_GRANULE ? n : rest == CARVE_SEGMENT_GRANULE;
    if (granules) {
        carve_mutex_lock(&c->lock);
        reused = c->nspare < granules ? c->nspare : granules;
        c->nspare -= reused;
        carve_mutex_unlock(&c->lock);
    }
    carve_ledger_add(&be->ledger, CARVE_DRV_CREATE, n - reused, 0, size - reused * CARVE_SEGMENT_GRANULE);
    carve_ledger_add(&be->ledger, CARVE_DRV_MAP, n, n, size);
    carve_ledger_add(&be->ledger, CARVE_DRV_RELEASE, n, 0, size); /* each handle once mapped: the mapping holds it */
    carve_ledger_add(&be->ledger, CARVE_DRV_ACCESS, 1, n, size);
    return CARVE_OK;
}

static carve_status virtual_decommit(carve_be *be, uintptr_t addr, size_t size, size_t piece, size_t *done) {
    (void)addr;
    virtual_ctx *c = be->ctx;
    size_t n = size / piece;
    carve_mutex_lock(&c->lock);
    int keep = piece == CARVE_SEGMENT_GRANULE && c->recycling > 0;
    if (keep)
        c->nspare += n;
    carve_mutex_unlock(&c->lock);
    if (keep) /* each handle back from its address before the unmap would free it */
        carve_ledger_add(&be->ledger, CARVE_DRV_RETAIN, n, 0, 0);
    carve_ledger_add(&be->ledger, CARVE_DRV_UNMAP, n, n, size);
    *done = size;
    return CARVE_OK;
}

static void virtual_recycle(carve_be *be, int on) {
    virtual_ctx *c = be->ctx;
    size_t left = 0;
    carve_mutex_lock(&c->lock);
    c->recycling += on ? 1 : -1;
    if (c->recycling == 0) { /* the last window closed: the handles not reused go */
        left = c->nspare;
        c->nspare = 0;
    }
    carve_mutex_unlock(&c->lock);
    if (left)
        carve_ledger_add(&be->ledger, CARVE_DRV_RELEASE, left, 0, left * CARVE_SEGMENT_GRANULE);
}

static void virtual_destroy(carve_be *be) {
    virtual_ctx *c = be->ctx;
    if (c) {
        carve_mutex_destroy(&c->lock);
        free(c);
    }
}

static const carve_backend_ops virtual_ops = {
    .reserve = virtual_reserve,
    .release = virtual_release,
    .commit = virtual_commit,
    .decommit = virtual_decommit,
    .recycle = virtual_recycle,
    .event_record = carve_sim_event_record,
    .event_query = carve_sim_event_query,
    .event_sync = carve_sim_event_sync,
    .event_follow = carve_sim_event_follow,
    .capturing = carve_sim_capturing,
    .context_capturing = carve_sim_context_capturing,
    .device_sync = carve_sim_device_sync,
    .event_release = carve_sim_event_release,
    .destroy = virtual_destroy,
};

carve_status carve_backend_open_virtual(carve_be *be) {
    virtual_ctx *c = calloc(1, sizeof(*c));
    if (!c || carve_mutex_init(&c->lock) != 0) {
        free(c);
        carve_backend_fail_host("host memory exhausted");
        return CARVE_ERR_OOM;
    }
    be->ctx = c;
    be->ops = &virtual_ops;
    return CARVE_OK;
}
