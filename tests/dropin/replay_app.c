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
 * that the churn of a mode shows step by step.
 *
 * Usage: dropin_replay [LAG]   (default 64)
 */
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

int main(int argc, char **argv) {
    unsigned lag = argc > 1 ? (unsigned)atoi(argv[1]) : 64;
    CUcontext ctx;
    CU(cuInit(0));
    CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU(cuCtxSetCurrent(ctx));
    tab = calloc(cap, sizeof(*tab));
    char line[256];
    size_t live = 0, peak = 0, n = 0, live_n = 0;
    unsigned long long events = 0, step_events = 0;
    unsigned step = 0;
    counts last = counts_now();
    while (fgets(line, sizeof(line), stdin)) {
        if (strncmp(line, "#step", 5) == 0) {
            print_step(step++, events - step_events, &last);
            step_events = events;
            continue;
        }
        if (line[0] == '#' || (line[0] != 'a' && line[0] != 'f') || line[1] != ',')
            continue;
        char *end;
        unsigned long long key = strtoull(line + 2, &end, 0);
        if (line[0] == 'a') {
            size_t size = (size_t)strtoull(end + 1, NULL, 0);
            if (!size || live_n * 2 >= cap)
                continue;
            slot *s = find(key, 1);
            CUdeviceptr p = 0;
            CUresult r = cuMemAlloc_v2(&p, size);
            if (r) {
                printf("FAIL allocation %zu of %zu bytes: %d\n", n, size, r);
                return 1;
            }
            *s = (slot){key, p, size};
            live_n++;
            live += size;
            if (live > peak)
                peak = live;
            mock_cuda_own(p, size, NULL, 0);
            CU(mock_cuda_launch(CU_STREAM_LEGACY, p, size));
            n++;
        } else {
            slot *s = find(key, 0);
            if (!s)
                continue;
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
    }
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
    printf("%s replay %zu allocations, requested peak %zu, device peak %zu, ratio %.4f, %llu violations, "
           "%llu cuMemCreate\n",
           failures || bad ? "FAIL" : "OK", n, peak, device_peak, peak ? (double)device_peak / (double)peak : 0.0, bad,
           creates);
    return failures || bad ? 1 : 0;
}
