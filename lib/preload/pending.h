/*
 * pending.h — the pending marks of freed buffers that wait in a quarantine
 * (pending.c): set, test and clear one bit per buffer start, lock-free and
 * inline, since every free that names no stream sets one.
 */
#ifndef CARVE_PRELOAD_PENDING_H
#define CARVE_PRELOAD_PENDING_H

#include <stddef.h>
#include <stdint.h>

#include "base/util.h"

/* One bit per CARVE_ALIGNMENT bytes of address space: set while the buffer
 * that begins there is freed and waiting to go back. The bits of each GiB
 * are a chunk made on first use (carve_pending_chunk_new). */
#define CARVE_PENDING_GRAIN 8  /* log2(CARVE_ALIGNMENT) */
#define CARVE_PENDING_CHUNK 30 /* log2(bytes of address space a chunk covers) */
#define CARVE_PENDING_TOP 18   /* 48-bit addresses: 2^18 chunks */
extern uint64_t *carve_pending_chunks[(size_t)1 << CARVE_PENDING_TOP] CARVE_INTERNAL;
uint64_t *carve_pending_chunk_new(uintptr_t p) CARVE_INTERNAL;

static inline uint64_t *carve_pending_word(uintptr_t p, int make) {
    uintptr_t top = p >> CARVE_PENDING_CHUNK;
    if (CARVE_UNLIKELY(top >> CARVE_PENDING_TOP))
        return NULL;
    uint64_t *c = __atomic_load_n(&carve_pending_chunks[top], __ATOMIC_ACQUIRE);
    if (CARVE_UNLIKELY(!c) && (!make || !(c = carve_pending_chunk_new(p))))
        return NULL;
    return &c[(p & (((uintptr_t)1 << CARVE_PENDING_CHUNK) - 1)) >> (CARVE_PENDING_GRAIN + 6)];
}
static inline uint64_t carve_pending_bit(uintptr_t p) { return (uint64_t)1 << ((p >> CARVE_PENDING_GRAIN) & 63); }

/* Mark the buffer at p as freed and waiting (p a multiple of CARVE_ALIGNMENT):
 * 0 when marked now, 1 when it was marked already, -1 when there is no
 * memory for the mark. Thread-safe, lock-free. */
static inline int carve_pending_mark(uintptr_t p) {
    uint64_t *w = carve_pending_word(p, 1);
    if (CARVE_UNLIKELY(!w))
        return -1;
    return (__atomic_fetch_or(w, carve_pending_bit(p), __ATOMIC_ACQ_REL) & carve_pending_bit(p)) != 0;
}
/* Whether p is marked. */
static inline int carve_pending_test(uintptr_t p) {
    uint64_t *w = carve_pending_word(p, 0);
    return w && (__atomic_load_n(w, __ATOMIC_ACQUIRE) & carve_pending_bit(p)) != 0;
}
static inline void carve_pending_clear(uintptr_t p) {
    uint64_t *w = carve_pending_word(p, 0);
    if (w)
        __atomic_fetch_and(w, ~carve_pending_bit(p), __ATOMIC_RELEASE);
}
/* Around giving waiting buffers back to carve and clearing their marks. */
void carve_pending_release_begin(void) CARVE_INTERNAL;
void carve_pending_release_end(void) CARVE_INTERNAL;
/* p was found marked: ask again while no buffers are being given back.
 * 1: it is waiting; 0: it is not (and, with mark, is marked now). */
int carve_pending_settle(uintptr_t p, int mark) CARVE_INTERNAL;

#endif
