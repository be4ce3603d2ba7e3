/*
 * replay_app.c — a recorded program's allocations and frees, driven through
 * the driver's cuMemAlloc and cuMemFree (under carve-run: the interposer's),
 * for the footprint of carve-run's modes on the mock driver.
 *
 * The one idea: replay what a program asked for, in its order, with the
 * "GPU" running behind the CPU as it does on a real device: each buffer is
 * used by work queued on the legacy stream when it is allocated, and that
 * work completes only every LAG events, so unordered frees wait in the
 * quarantine as they would. The program counts what it asks for (requested
 * peak); the mock counts what the device gave (its peak of device memory
 * taken, carve's segments or granules). Prints both and their ratio. Every
 * buffer is handed to the mock's oracle, which counts a range handed out
 * while queued work still uses it (the run fails on any).
 *
 * Input (stdin): a carve trace, uncompressed: "a,KEY,SIZE[,...]" allocates,
 * "f,KEY[,...]" frees; KEY a number (decimal or 0x hex); '#' lines skipped,
 * except "#step", which ends a part of the replay (a training step, say):
 * the program prints what the driver did since the last one, on a line
 * "step N: ..." (cuMemMap and cuMemUnmap calls, cuMemAlloc and cuMemFree
 * calls carve made, cuMemCreate calls, device waits, bytes mapped now), so
 * that the churn of a mode shows step by step. "#thread,K" says that the
 * events after it were thread K's (docs/trace-format.md): each thread of
 * the trace replays its events on a thread of its own (thread 0 on the
 * main thread), in the recorded order, one event at a time: a turn counter
 * under a lock, and a thread waits on a condition variable until the next
 * event is its own. So whatever carve-run keeps per thread is kept as in
 * the recorded run. A trace without tags runs on one thread.
 *
 * With DROPIN_REPLAY_NONBLOCKING=1 the program first makes a non-blocking
 * stream (and never uses it), as cuDNN or NCCL do in a PyTorch process:
 * carve-run's quarantine then waits for its epochs' events (unordered
 * reuse), as it does for such a program on a GPU.
 *
 * Usage: dropin_replay [LAG]   (default 64)
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mock_api.h"

static int failures;

/* The driver's counters at the end of the last part. */
typedef struct counts {
    unsigned long long maps, unmaps, allocs, frees, creates, waits;
} counts;

static counts counts_now(void) {
    counts c;
    unsigned long long bad, pool_allocs;
    size_t live;
    mock_cuda_churn(&c.maps, &c.unmaps, &c.waits);
    mock_cuda_stats(&c.allocs, &c.frees, &bad, &live);
    mock_cuda_memory_calls(&c.creates, &pool_allocs);
    return c;
}

static void print_step(unsigned step, unsigned long long events, counts *last) {
    counts c = counts_now();
    size_t reserved_now, mapped_now, device_peak;
    unsigned long long faults;
    mock_cuda_vmm_stats(&reserved_now, &mapped_now, &device_peak, &faults);
    printf("step %u: %llu events, %llu cuMemMap, %llu cuMemUnmap, %llu cuMemAlloc, %llu cuMemFree, %llu cuMemCreate, "
           "%llu waits, %zu mapped\n",
           step, events, c.maps - last->maps, c.unmaps - last->unmaps, c.allocs - last->allocs, c.frees - last->frees,
           c.creates - last->creates, c.waits - last->waits, mapped_now);
    *last = c;
}

typedef struct slot {
    unsigned long long key;
    CUdeviceptr p;
    size_t size;
} slot;
static slot *tab;
static size_t cap = 1 << 16;

static slot *find(unsigned long long key, int make) {
    size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
    while (tab[i].p && tab[i].key != key)
        i = (i + 1) & (cap - 1);
    return tab[i].p || make ? &tab[i] : NULL;
}

/* The trace, read whole before the replay starts. */
typedef struct event {
    char op;                 /* 'a', 'f', or 's' (a "#step" line) */
    uint16_t thread;
    unsigned long long key;
    size_t size;
} event;
static event *evs;
static size_t nev;

static size_t live, peak, n, live_n;
static unsigned long long events, step_events;
static unsigned step;
static counts last;
static unsigned lag;

/* Whose turn it is: evs[turn] runs next, on the thread of evs[turn].thread. */
static pthread_mutex_t turn_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn_moved = PTHREAD_COND_INITIALIZER;
static size_t turn;
static CUcontext ctx;

static void read_trace(void) {
    char line[256];
    size_t cap_ev = 1 << 16;
    unsigned thread = 0, last_event_thread = 0;
    evs = malloc(cap_ev * sizeof(*evs));
    while (evs && fgets(line, sizeof(line), stdin)) {
        event e = {0, (uint16_t)thread, 0, 0};
        if (strncmp(line, "#step", 5) == 0) {
            e.op = 's';
            e.thread = (uint16_t)last_event_thread; /* runs in the turn of the event before it */
        } else if (strncmp(line, "#thread,", 8) == 0) {
            /* As the loader reads it (docs/trace-format.md): decimal
             * digits between optional blanks, below 4096; anything else is
             * a malformed line and the thread stays what it was. */
            const char *p = line + 8;
            while (*p == ' ' || *p == '\t')
                p++;
            if (*p == '+')
                p++;
            unsigned long k = 0;
            int digits = 0;
            while (*p >= '0' && *p <= '9' && k < 4096)
                k = k * 10 + (unsigned long)(*p++ - '0'), digits++;
            while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
                p++;
            if (digits && !*p && k < 4096)
                thread = (unsigned)k;
            continue;
        } else if ((line[0] == 'a' || line[0] == 'f') && line[1] == ',') {
            char *end;
            e.op = line[0];
            e.key = strtoull(line + 2, &end, 0);
            if (e.op == 'a')
                e.size = (size_t)strtoull(end + 1, NULL, 0);
            last_event_thread = thread;
        } else {
            continue;
        }
        if (nev == cap_ev) {
            cap_ev *= 2;
            event *more = realloc(evs, cap_ev * sizeof(*evs));
            if (!more) {
                free(evs);
                evs = NULL;
                break;
            }
            evs = more;
        }
        evs[nev++] = e;
    }
    if (!evs) {
        printf("FAIL out of host memory reading the trace\n");
        exit(1);
    }
}

/* Replay one event (its thread's turn). 0, or 1 when an allocation failed. */
static int replay_one(const event *e) {
    if (e->op == 's') {
        print_step(step++, events - step_events, &last);
        step_events = events;
        return 0;
    }
    if (e->op == 'a') {
        size_t size = e->size;
        if (!size || live_n * 2 >= cap)
            return 0;
        slot *s = find(e->key, 1);
        CUdeviceptr p = 0;
        CUresult r = cuMemAlloc_v2(&p, size);
        if (r) {
            printf("FAIL allocation %zu of %zu bytes: %d\n", n, size, r);
            return 1;
        }
        *s = (slot){e->key, p, size};
        live_n++;
        live += size;
        if (live > peak)
            peak = live;
        mock_cuda_own(p, size, NULL, 0);
        CU(mock_cuda_launch(CU_STREAM_LEGACY, p, size));
        n++;
    } else {
        slot *s = find(e->key, 0);
        if (!s)
            return 0;
        mock_cuda_disown(s->p);
        CU(cuMemFree_v2(s->p));
        live -= s->size;
        live_n--;
        /* remove, shifting back what probed past it */
        size_t i = (size_t)(s - tab), mask = cap - 1;
        tab[i].p = 0;
        for (size_t j = (i + 1) & mask; tab[j].p; j = (j + 1) & mask) {
            slot x = tab[j];
            tab[j].p = 0;
            *find(x.key, 1) = x;
        }
    }
    if (++events % lag == 0)
        mock_cuda_complete_all();
    return 0;
}

/* The replay of thread k's events: each waits for its turn. A failed
 * allocation ends the program, as it did with one thread. */
static void *replay_thread(void *arg) {
    unsigned k = (unsigned)(uintptr_t)arg;
    if (k)
        CU(cuCtxSetCurrent(ctx));
    pthread_mutex_lock(&turn_lock);
    for (;;) {
        while (turn < nev && evs[turn].thread != k)
            pthread_cond_wait(&turn_moved, &turn_lock);
        if (turn == nev)
            break;
        pthread_mutex_unlock(&turn_lock);
        if (replay_one(&evs[turn]))
            exit(1);
        pthread_mutex_lock(&turn_lock);
        turn++;
        if (turn == nev || evs[turn].thread != k)
            pthread_cond_broadcast(&turn_moved);
    }
    pthread_mutex_unlock(&turn_lock);
    return NULL;
}

int main(int argc, char **argv) {
    lag = argc > 1 ? (unsigned)atoi(argv[1]) : 64;
    if (!lag)
        lag = 1;
    CU(cuInit(0));
    CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU(cuCtxSetCurrent(ctx));
    const char *nb = getenv("DROPIN_REPLAY_NONBLOCKING");
    CUstream side = NULL;
    if (nb && strcmp(nb, "1") == 0)
        CU(cuStreamCreate(&side, 0x1 /* CU_STREAM_NON_BLOCKING */));
    tab = calloc(cap, sizeof(*tab));
    read_trace();
    unsigned nthreads = 1;
    for (size_t i = 0; i < nev; i++)
        if (evs[i].thread >= nthreads)
            nthreads = evs[i].thread + 1u;
    last = counts_now();
    pthread_t *th = calloc(nthreads, sizeof(*th));
    for (unsigned k = 1; k < nthreads; k++)
        if (pthread_create(&th[k], NULL, replay_thread, (void *)(uintptr_t)k) != 0) {
            printf("FAIL cannot start replay thread %u\n", k);
            return 1;
        }
    replay_thread(NULL);
    for (unsigned k = 1; k < nthreads; k++)
        pthread_join(th[k], NULL);
    free(th);
    free(evs);
    mock_cuda_complete_all();
    if (step)
        print_step(step, events - step_events, &last);
    size_t reserved_now, mapped_now, device_peak;
    unsigned long long faults;
    mock_cuda_vmm_stats(&reserved_now, &mapped_now, &device_peak, &faults);
    char why[512];
    unsigned long long bad = mock_cuda_violations(why, sizeof(why));
    if (bad)
        printf("FAIL %llu violations: %s\n", bad, why);
    unsigned long long creates, pool_allocs;
    mock_cuda_memory_calls(&creates, &pool_allocs);
    printf("%s replay %zu allocations, %u thread%s, requested peak %zu, device peak %zu, ratio %.4f, "
           "%llu violations, %llu cuMemCreate\n",
           failures || bad ? "FAIL" : "OK", n, nthreads, nthreads == 1 ? "" : "s", peak, device_peak,
           peak ? (double)device_peak / (double)peak : 0.0, bad, creates);
    return failures || bad ? 1 : 0;
}
