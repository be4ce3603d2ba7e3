/* test_util.c — see test_util.h. */
#include "test_util.h"

#include <math.h>

unsigned long test_checks, test_failures;

void test_fail(const char *file, int line, const char *what, const char *detail) {
    test_failures++;
    fprintf(stderr, "FAIL %s:%d: %s%s%s\n", file, line, what, detail ? ": " : "", detail ? detail : "");
}

int test_finish(void) {
    printf("%lu checks, %lu failed\n", test_checks, test_failures);
    return test_failures ? 1 : 0;
}

static uint64_t splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void test_rng_seed(test_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t test_rng_next(test_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t test_rng_below(test_rng *r, uint64_t n) { return n ? test_rng_next(r) % n : 0; }

size_t test_rng_loguniform(test_rng *r, size_t lo, size_t hi) {
    double u = (double)(test_rng_next(r) >> 11) / 9007199254740992.0;
    double v = exp(log((double)lo) + u * (log((double)hi) - log((double)lo)));
    size_t x = (size_t)v;
    return x < lo ? lo : x > hi ? hi : x;
}

carve_arena *test_arena(carve_backend backend, int growth, size_t initial, size_t limit) {
    return test_arena_conf(backend, growth, initial, limit, "");
}

carve_arena *test_arena_conf(carve_backend backend, int growth, size_t initial, size_t limit, const char *conf) {
    carve_config c;
    carve_config_init(&c);
    if (carve_config_parse(&c, conf) != CARVE_OK) {
        fprintf(stderr, "test_arena_conf: %s\n", carve_last_error(NULL));
        exit(1);
    }
    c.backend = backend;
    c.growth = growth;
    c.initial_bytes = initial;
    c.limit_bytes = limit;
    carve_arena *a = NULL;
    carve_status st = carve_arena_create(&c, &a);
    if (st != CARVE_OK) {
        fprintf(stderr, "test_arena: %s: %s\n", carve_status_str(st), carve_last_error(NULL));
        exit(1);
    }
    return a;
}

uint64_t test_seed(uint64_t dflt) {
    const char *s = getenv("CARVE_TEST_SEED");
    return s ? strtoull(s, NULL, 0) : dflt;
}
