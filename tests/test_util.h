/*
 * test_util.h — what every test shares: checks that report file:line and
 * keep going, a seeded PRNG, arena helpers.
 *
 * A test's main() ends with `return test_finish();`, which prints
 * "N checks, M failed" and returns 1 when anything failed.
 */
#ifndef CARVE_TEST_UTIL_H
#define CARVE_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "carve.h"

extern unsigned long test_checks, test_failures;

void test_fail(const char *file, int line, const char *what, const char *detail);

#define CHECK(cond)                                                        \
    do {                                                                   \
        test_checks++;                                                     \
        if (!(cond))                                                       \
            test_fail(__FILE__, __LINE__, #cond, NULL);                    \
    } while (0)

/* Check a status; on mismatch print both names and carve_last_error(arena). */
#define CHECK_ST(arena, expr, want)                                                    \
    do {                                                                               \
        carve_status st_ = (expr);                                                     \
        test_checks++;                                                                 \
        if (st_ != (want)) {                                                           \
            char d_[1400];                                                             \
            snprintf(d_, sizeof(d_), "got %s, want %s: %s", carve_status_str(st_),     \
                     carve_status_str(want), carve_last_error(arena));                 \
            test_fail(__FILE__, __LINE__, #expr, d_);                                  \
        }                                                                              \
    } while (0)

#define CHECK_OK(arena, expr) CHECK_ST(arena, expr, CARVE_OK)

/* carve_check must pass. */
#define CHECK_ARENA(arena) CHECK_ST(arena, carve_check(arena), CARVE_OK)

int test_finish(void);

/* xoshiro256** seeded by splitmix64: deterministic across platforms. */
typedef struct test_rng {
    uint64_t s[4];
} test_rng;
void test_rng_seed(test_rng *r, uint64_t seed);
uint64_t test_rng_next(test_rng *r);
/* Uniform in [0, n). */
uint64_t test_rng_below(test_rng *r, uint64_t n);
/* Log-uniform in [lo, hi]. */
size_t test_rng_loguniform(test_rng *r, size_t lo, size_t hi);

/* A new arena of backend with growth and limit as given; aborts the test
 * on failure. */
carve_arena *test_arena(carve_backend backend, int growth, size_t initial, size_t limit);
/* Same, configured by text for the remaining keys (carve_config_parse), e.g.
 * "sim_event_polls=3" or "vmm=1". */
carve_arena *test_arena_conf(carve_backend backend, int growth, size_t initial, size_t limit, const char *conf);

/* Seed from CARVE_TEST_SEED or the default. */
uint64_t test_seed(uint64_t dflt);

#endif
