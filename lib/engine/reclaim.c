/*
 * reclaim.c — moving cached memory back: every pool's empty spans to the
 * heap, then (when asked) fully free segments to the backend.
 *
 * The one idea: a span can change streams only when its stream's work is
 * known to be done. Without waiting, that is only spans whose own stream
 * recorded an event when they emptied; waiting, every pool is locked first
 * so nothing is freed meanwhile, and one device synchronization proves the
 * work of every stream done, destroyed streams included, without recording
 * anything on them. Asked to (the last retry before an out-of-memory
 * answer), not only empty spans move: every whole free granule inside a span
 * that still holds live buffers goes back to the heap too (the span shrinks,
 * or is cut in two), so that the heap's free ranges are then all the free
 * room there is, for any stream.
 *
 * While a stream capture is underway (carve_capture_underway, types.h),
 * nothing waits for the whole device and nothing goes back to the driver:
 * either would break the capture. Only what is known free without that
 * wait moves (spans whose own events completed; events are asked about
 * and waited for in relaxed capture mode), and the memory stays reserved
 * until a call made after the capture gives it back.
 */
#include "engine/reclaim.h"

#include <string.h>

#include "engine/error.h"
#include "engine/heap.h"
#include "engine/pool.h"
#include "engine/vmm.h"

/* Whether the calling thread's last waiting reclaim found a capture
 * underway, and so waited for nothing. */
static __thread int tls_captured;

int carve_reclaim_captured(void) { return tls_captured; }

carve_status carve_reclaim(carve_arena *a, unsigned flags, carve_stream served) {
    int release = (flags & CARVE_RECLAIM_RELEASE) != 0, wait = (flags & CARVE_RECLAIM_WAIT) != 0;
    /* Waiting: take every pool's lock first, so that nothing is freed from
     * here on, then synchronize the device once. Everything cached was freed
     * before the sync, so its work is done and every stream's empty spans
     * can move, with no event recorded on streams that may no longer exist.
     * Not waiting: pools one at a time, and only spans whose own stream
     * recorded an event when they emptied. */
    carve_pool *first = NULL;
    int synced = 0;
    /* Whether a capture is underway: decided once, with every pool locked
     * when waiting (carve_sim_set_capturing marks one under pools_lock), and
     * a wait the device refused because one began meanwhile counts as one
     * (nothing was synchronized, and nothing may go back). */
    int captured = !wait && release && carve_capture_underway(a, served);
    tls_captured = 0;
    carve_mutex_lock(&a->heap.lock);
    uint64_t unmap_failed = CARVE_LOAD(&a->heap.nunmap_failed);
    uint64_t unmap_nohost = CARVE_LOAD(&a->heap.nunmap_nohost);
    carve_mutex_unlock(&a->heap.lock);
    if (wait) {
        carve_mutex_lock(&a->pools_lock);
        first = carve_pools_first(a);
        for (carve_pool *p = first; p; p = p->next_all)
            carve_spin_lock(&p->lock);
        captured = carve_capture_underway(a, served);
        synced = !captured && carve_wait_device(a, served) == CARVE_OK;
        if (!synced && !captured)
            captured = carve_capture_underway(a, served);
        tls_captured = captured;
    } else {
        first = carve_pools_first(a);
    }
    for (carve_pool *p = first; p; p = p->next_all) {
        if (!wait)
            carve_spin_lock(&p->lock);
        if (p->pending_head)
            carve_pool_poll_pending(p, synced ? CARVE_PENDING_SYNCED : wait ? CARVE_PENDING_WAIT : CARVE_PENDING_POLL, 0);
        carve_mutex_lock(&a->heap.lock);
        carve_pool_return_empty(p, synced ? CARVE_RETURN_SYNCED : CARVE_RETURN_OTHER);
        carve_mutex_unlock(&a->heap.lock);
        if (a->vmm && synced) { /* unmapping is safe only once the device is done */
            carve_vmm_fences_synced(a, p);
            carve_vmm_trim_pool(a, p, SIZE_MAX, NULL, p->vdone);
        }
        if (synced && (flags & CARVE_RECLAIM_ROOM)) {
            /* Free room inside spans that still hold live buffers goes back
             * too, so any stream can use it: address space with nothing
             * mapped, and in segments mode free memory (the device is done
             * with it). */
            carve_mutex_lock(&a->heap.lock);
            carve_pool_give_room(p, !a->vmm, 0);
            carve_mutex_unlock(&a->heap.lock);
        }
        if (!wait)
            carve_spin_unlock(&p->lock);
    }
    carve_mutex_lock(&a->heap.lock);
    if (wait)
        carve_heap_sync(a);
    if (a->vmm && release) { /* what is mapped now is what live buffers need */
        size_t held = CARVE_LOAD(&a->heap.reserved);
        CARVE_STORE(&a->heap.target, held > a->initial ? held : a->initial);
        size_t now = 0;
        for (carve_pool *q = CARVE_LOAD_ACQ(&a->pools); q; q = q->next_all) {
            __atomic_store_n(&q->touched_peak, __atomic_load_n(&q->touched, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
            if (wait) { /* (its lock is held) the sizes that came back start again too */
                memset(q->vrepeat, 0, sizeof(q->vrepeat));
                q->vrepeat_added = 0;
            }
            now += __atomic_load_n(&q->touched, __ATOMIC_RELAXED);
        }
        __atomic_store_n(&a->heap.vpeak, now * CARVE_SEGMENT_GRANULE, __ATOMIC_RELAXED);
    }
    /* In virtual-memory mode the address space stays reserved (it holds no
     * memory) unless the arena is being emptied. */
    carve_status st = release && !captured ? carve_heap_release_free(a) : CARVE_OK;
    /* What could not go back stays reserved and usable; a caller asking for
     * memory back hears that not all of it came (during a capture, nothing
     * was meant to). */
    if (release && st == CARVE_OK && wait && !synced && !captured) {
        carve_note("synchronizing the device failed, so cached memory of other streams stayed: %s",
                   carve_backend_msg());
        st = CARVE_ERR_BACKEND;
    }
    if (release && st == CARVE_OK && CARVE_LOAD(&a->heap.nunmap_failed) != unmap_failed) {
        carve_note("the %s backend refused to unmap %llu granule(s), which stay mapped: %s",
                   carve_backend_str(a->be.kind), (unsigned long long)(CARVE_LOAD(&a->heap.nunmap_failed) - unmap_failed),
                   carve_backend_msg());
        st = CARVE_ERR_BACKEND;
    }
    if (release && st == CARVE_OK && CARVE_LOAD(&a->heap.nunmap_nohost) != unmap_nohost) {
        char b[32];
        carve_note_host(1, "host memory for carve's block records ran out, so free memory stayed mapped (%s mapped in all)",
                   carve_format_bytes(b, sizeof(b), CARVE_LOAD(&a->heap.reserved)));
        st = CARVE_ERR_OOM;
    }
    carve_mutex_unlock(&a->heap.lock);
    if (wait) {
        for (carve_pool *p = first; p; p = p->next_all)
            carve_spin_unlock(&p->lock);
        carve_mutex_unlock(&a->pools_lock);
    }
    return st;
}
