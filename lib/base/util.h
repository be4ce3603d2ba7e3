/*
 * util.h — small helpers shared by every room of the library: alignment and
 * bit arithmetic, atomics spelled once, and the tiered internal assertions.
 *
 * Assertion tiers follow the meson option `checks`:
 *   CARVE_CHECKS 0  none
 *   CARVE_CHECKS 1  CARVE_ASSERT: cheap checks on the API boundary's internals
 *   CARVE_CHECKS 2  CARVE_ASSERT_INTERNAL: data-structure consistency on hot paths
 *   CARVE_CHECKS 3  CARVE_CHECK_EXPENSIVE: run the integrity walker after every
 *                   mutating call (tests build with this tier)
 * A failed assertion is a bug in carve, never a user error: user errors are
 * returned as statuses.
 */
#ifndef CARVE_BASE_UTIL_H
#define CARVE_BASE_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef CARVE_CHECKS
#define CARVE_CHECKS 1
#endif

#define CARVE_LIKELY(x) __builtin_expect(!!(x), 1)
#define CARVE_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define CARVE_INTERNAL __attribute__((visibility("hidden")))

#define CARVE_PANIC(msg)                                                                 \
    do {                                                                                 \
        fprintf(stderr, "carve: internal error at %s:%d: %s\n", __FILE__, __LINE__, msg); \
        abort();                                                                         \
    } while (0)

#if CARVE_CHECKS >= 1
#define CARVE_ASSERT(x) do { if (CARVE_UNLIKELY(!(x))) CARVE_PANIC(#x); } while (0)
#else
#define CARVE_ASSERT(x) ((void)0)
#endif
#if CARVE_CHECKS >= 2
#define CARVE_ASSERT_INTERNAL(x) CARVE_ASSERT(x)
#else
#define CARVE_ASSERT_INTERNAL(x) ((void)0)
#endif

static inline size_t carve_align_up(size_t x, size_t a) { return (x + a - 1) & ~(a - 1); }
static inline size_t carve_align_down(size_t x, size_t a) { return x & ~(a - 1); }
static inline unsigned carve_msb(uint64_t x) { return 63u - (unsigned)__builtin_clzll(x); }
static inline unsigned carve_ctz(uint64_t x) { return (unsigned)__builtin_ctzll(x); }

/* Relaxed atomics for counters written under a lock and read without one. */
#define CARVE_LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define CARVE_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define CARVE_LOAD_ACQ(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define CARVE_STORE_REL(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define CARVE_ADD(p, v) __atomic_add_fetch((p), (v), __ATOMIC_RELAXED)

/* Raise *peak to v if v is larger (lock-free). */
static inline void carve_atomic_max(size_t *peak, size_t v) {
    size_t cur = CARVE_LOAD(peak);
    while (v > cur &&
           !__atomic_compare_exchange_n(peak, &cur, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

#endif
