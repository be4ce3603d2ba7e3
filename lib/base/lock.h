/*
 * lock.h — the two locks of the engine.
 *
 * carve_spin guards one stream's pool: it is taken on every alloc and free,
 * so it is one exchange to take and one store to drop; contended waiters spin
 * briefly, then yield (a pool's lock is also held across the rare slow path
 * that reserves memory, which can take milliseconds).
 * carve_mutex (a pthread mutex) guards the arena heap, reached only on slow
 * paths; carve_cond waits on one.
 */
#ifndef CARVE_BASE_LOCK_H
#define CARVE_BASE_LOCK_H

#include <pthread.h>
#include <sched.h>

typedef struct carve_spin {
    int v;
} carve_spin;

static inline void carve_spin_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static inline void carve_spin_lock(carve_spin *l) {
    if (__builtin_expect(!__atomic_exchange_n(&l->v, 1, __ATOMIC_ACQUIRE), 1))
        return;
    for (unsigned n = 0;; n++) {
        while (__atomic_load_n(&l->v, __ATOMIC_RELAXED)) {
            if (++n < 128)
                carve_spin_pause();
            else
                sched_yield();
        }
        if (!__atomic_exchange_n(&l->v, 1, __ATOMIC_ACQUIRE))
            return;
    }
}

/* 1 when the lock was free and is now held, 0 when someone holds it. */
static inline int carve_spin_trylock(carve_spin *l) {
    return !__atomic_load_n(&l->v, __ATOMIC_RELAXED) && !__atomic_exchange_n(&l->v, 1, __ATOMIC_ACQUIRE);
}

static inline void carve_spin_unlock(carve_spin *l) { __atomic_store_n(&l->v, 0, __ATOMIC_RELEASE); }

typedef pthread_mutex_t carve_mutex;
#define carve_mutex_init(m) pthread_mutex_init((m), NULL)
#define carve_mutex_destroy(m) pthread_mutex_destroy(m)
#define carve_mutex_lock(m) pthread_mutex_lock(m)
#define carve_mutex_unlock(m) pthread_mutex_unlock(m)

/* For the rare waits on a mutex-guarded condition (carve_set_oom_callback). */
typedef pthread_cond_t carve_cond;
#define carve_cond_init(c) pthread_cond_init((c), NULL)
#define carve_cond_destroy(c) pthread_cond_destroy(c)
#define carve_cond_wait(c, m) pthread_cond_wait((c), (m))
#define carve_cond_broadcast(c) pthread_cond_broadcast(c)

#endif
