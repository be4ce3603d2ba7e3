/*
 * gen_events.c — a synthetic trace of any length, fast, on stdout: for the
 * replay memory test (test_replay_memory.py), which pipes 100 million events
 * into carve-replay without writing them to disk.
 *
 * usage: gen_events EVENTS [SEED] [LIVE]
 *
 * The one idea: a churn around LIVE live buffers (default 1000), as in a
 * long-running server: each step frees a random live buffer or allocates a
 * new one, log-uniform from 256 B to 64 MiB (three in four a multiple of
 * 512 bytes), on stream 0 or 1; ids are a counter times an odd constant, so
 * they look like arbitrary 64-bit values and never collide. Writes exactly
 * EVENTS lines; the same seed gives the same bytes. Python's gen_trace.py
 * draws a more realistic training loop, at about a millionth of the speed.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t state;

static uint64_t rng(void) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double uniform(void) { return (double)(rng() >> 11) / 9007199254740992.0; }

static int parse(const char *s, unsigned long long *out) {
    char *end;
    if (!*s || *s < '0' || *s > '9')
        return -1;
    *out = strtoull(s, &end, 10);
    return *end ? -1 : 0;
}

int main(int argc, char **argv) {
    unsigned long long events, seed = 1, live_target = 1000;
    if (argc < 2 || argc > 4 || parse(argv[1], &events) || (argc > 2 && parse(argv[2], &seed)) ||
        (argc > 3 && (parse(argv[3], &live_target) || live_target == 0 || live_target > 100000000))) {
        fprintf(stderr, "usage: gen_events EVENTS [SEED] [LIVE]\n");
        return 2;
    }
    state = seed;
    static char out[1 << 20];
    setvbuf(stdout, out, _IOFBF, sizeof(out));
    uint64_t *live = malloc(2 * live_target * sizeof(*live));
    if (!live) {
        fprintf(stderr, "gen_events: host memory exhausted\n");
        return 1;
    }
    size_t nlive = 0;
    uint64_t counter = 0;
    const double lo = log(256.0), hi = log(64.0 * 1048576.0);
    for (unsigned long long i = 0; i < events; i++) {
        /* Free with probability nlive / (2 * target): the live count hovers
         * around the target, and is never above twice it. */
        if (nlive && rng() % (2 * live_target) < nlive) {
            size_t k = (size_t)(rng() % nlive);
            printf("f,%" PRIu64 "\n", live[k]);
            live[k] = live[--nlive];
            continue;
        }
        uint64_t id = ++counter * 0x9E3779B97F4A7C15ull;
        uint64_t size = (uint64_t)exp(lo + uniform() * (hi - lo));
        if (rng() % 4)
            size = (size + 511) / 512 * 512;
        unsigned stream = (unsigned)(rng() % 8 == 0);
        if (stream)
            printf("a,%" PRIu64 ",%" PRIu64 ",1\n", id, size);
        else
            printf("a,%" PRIu64 ",%" PRIu64 "\n", id, size);
        live[nlive++] = id;
    }
    free(live);
    return fflush(stdout) == 0 ? 0 : 1;
}
