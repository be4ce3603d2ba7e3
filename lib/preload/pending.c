/*
 * pending.c — which buffers are freed and waiting in a quarantine, so that a
 * second free of one is refused wherever the first one waits (in a thread's
 * batch or in a context's epochs).
 *
 * The one idea: carve's buffers begin on CARVE_ALIGNMENT (256-byte)
 * boundaries, so one bit per 256 bytes of address space can say "freed,
 * waiting". A free sets its bit with one atomic OR and learns from the old
 * value whether it was set already: no lock, no shared set to insert into
 * or delete from (the inline functions in preload.h). The bits live in
 * chunks of 512 KiB, one per GiB of address space that has held a waiting
 * buffer, made here on first use and kept; pages of a chunk that are never
 * written cost no memory.
 *
 * A quarantine gives a buffer back to carve first and clears its bit after,
 * both inside carve_pending_release_begin/end; a free that finds the bit set
 * asks again once no release is running (carve_pending_settle), so a buffer
 * carve handed out again in between is never refused, and a waiting one
 * never freed twice. A stream-ordered free marks its buffer too, and clears
 * the mark once carve has it back; contexts.c says how a free that meets
 * that mark waits for it.
 */
#include <pthread.h>
#include <stdlib.h>

#include "carve.h"
#include "preload/pending.h"

#define CHUNK_WORDS ((size_t)1 << (CARVE_PENDING_CHUNK - CARVE_PENDING_GRAIN - 6))

_Static_assert(((size_t)1 << CARVE_PENDING_GRAIN) == CARVE_ALIGNMENT, "one bit per possible buffer start");

uint64_t *carve_pending_chunks[(size_t)1 << CARVE_PENDING_TOP]; /* 2 MiB of zero pages until used */
static pthread_mutex_t releases = PTHREAD_MUTEX_INITIALIZER;

uint64_t *carve_pending_chunk_new(uintptr_t p) {
    uint64_t **slot = &carve_pending_chunks[p >> CARVE_PENDING_CHUNK];
    uint64_t *fresh = calloc(CHUNK_WORDS, sizeof(uint64_t));
    if (!fresh)
        return NULL;
    uint64_t *c = NULL;
    if (!__atomic_compare_exchange_n(slot, &c, fresh, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        free(fresh); /* another thread made it first */
        return c;
    }
    return fresh;
}

void carve_pending_release_begin(void) { pthread_mutex_lock(&releases); }
void carve_pending_release_end(void) { pthread_mutex_unlock(&releases); }

int carve_pending_settle(uintptr_t p, int mark) {
    pthread_mutex_lock(&releases);
    int r = carve_pending_test(p);
    if (!r && mark)
        r = carve_pending_mark(p);
    pthread_mutex_unlock(&releases);
    return r;
}
