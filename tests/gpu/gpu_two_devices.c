/*
 * gpu_two_devices.c — two GPUs: each device's default arena keeps its own
 * limit, and buffers carved from both feed an NCCL all-reduce.
 *
 * Limits: device 0's default arena is capped at 1 GiB and device 1's at
 * 4 GiB (carve_device_set_limit before first use). Each fills with 64 MiB
 * buffers until CARVE_ERR_OOM; reserved bytes must equal the limit, and the
 * driver's count on each device must agree, whatever the current device.
 *
 * NCCL: one communicator per device (ncclCommInitAll in this one process),
 * float buffers from each device's arena on a per-device stream; device d
 * contributes (d+1) * ramp, so the sum is 3 * ramp on both. Buffers are
 * allocated and freed around every round, so the allocator's stream-ordered
 * reuse is mixed with NCCL's traffic. NVLink multicast (NVLS) is switched
 * off: it must stay off on the machines this runs on.
 *
 * Skips (77) with fewer than two devices. Built only where NCCL is found.
 */
#include "gpu_util.h"

/* nccl.h is written for C++ and C89 alike; keep its style out of our warnings. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wundef"
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

#define NCCL_CHECK(expr)                                                                            \
    do {                                                                                            \
        ncclResult_t r_ = (expr);                                                                   \
        if (r_ != ncclSuccess) {                                                                    \
            fprintf(stderr, "FATAL %s:%d: %s: %s\n", __FILE__, __LINE__, #expr, ncclGetErrorString(r_)); \
            exit(1);                                                                                \
        }                                                                                           \
    } while (0)

static const size_t limits[2] = {1 * GiB, 4 * GiB};
static cudaStream_t streams[2];

static void case_per_device_limits(void) {
    const size_t chunk = 64 * MiB;
    gpu_mark m[2];
    carve_arena *a[2] = {NULL, NULL};
    static void *p[2][128];
    size_t n[2] = {0, 0};
    for (int d = 0; d < 2; d++) {
        gpu_mark_take(&m[d], d);
        CHECK_OK(NULL, carve_device_arena(d, &a[d]));
        if (!a[d])
            return;
        carve_config c;
        CHECK_OK(a[d], carve_arena_get_config(a[d], &c));
        CHECK(c.device == d && c.limit_bytes == limits[d]);
    }
    /* Device 0 current throughout: the arenas find their own devices. */
    for (int d = 0; d < 2; d++) {
        while (n[d] < 128) {
            carve_status st = carve_alloc(a[d], chunk, streams[d], &p[d][n[d]]);
            if (st == CARVE_ERR_OOM)
                break;
            CHECK_OK(a[d], st);
            if (st != CARVE_OK)
                break;
            n[d]++;
        }
        CHECK(n[d] == limits[d] / chunk);
        carve_stats s = gpu_stats(a[d]);
        CHECK(s.reserved_bytes == limits[d]);
        CHECK(s.num_ooms == 1);
        CHECK(strstr(carve_last_error(a[d]), "limit") != NULL);
        char b1[32];
        printf("  device %d: %zu x 64 MiB until OOM, %s reserved\n", d, n[d],
               gpu_fmt(b1, sizeof(b1), s.reserved_bytes));
        GPU_CHECK_USAGE(&m[d], s.reserved_bytes, s.num_segments, "a full default arena");
    }
    /* Device 0 being full does not stop device 1, and the other way round. */
    void *q = NULL;
    CHECK_ST(a[0], carve_alloc(a[0], chunk, streams[0], &q), CARVE_ERR_OOM);
    CHECK_OK(a[1], carve_free(a[1], p[1][--n[1]]));
    CHECK_OK(a[1], carve_alloc(a[1], chunk, streams[1], &p[1][n[1]++]));
    CHECK_ST(a[0], carve_alloc(a[0], chunk, streams[0], &q), CARVE_ERR_OOM);
    CHECK(gpu_get_device() == 0);

    /* Every buffer holds its own pattern on its own device. */
    for (int d = 0; d < 2; d++) {
        gpu_set_device(d);
        gpu_counter c = gpu_counter_of(d, 3);
        for (size_t i = 0; i < n[d]; i++)
            gpu_fill(p[d][i], chunk, (uint64_t)d << 32 | i, streams[d]);
        for (size_t i = 0; i < n[d]; i++)
            gpu_verify(p[d][i], chunk, (uint64_t)d << 32 | i, c.dev, streams[d]);
        CHECK(gpu_counter_take(c, streams[d]) == 0);
    }
    gpu_set_device(0);
    for (int d = 0; d < 2; d++) {
        for (size_t i = 0; i < n[d]; i++)
            CHECK_OK(a[d], carve_free(a[d], p[d][i]));
        CHECK_OK(a[d], carve_empty_cache(a[d]));
        CHECK(carve_memory_reserved(a[d]) == 0);
        CHECK_ARENA(a[d]);
    }
}

static void allreduce_round(ncclComm_t *comms, carve_arena **a, size_t count, int round) {
    float *send[2], *recv[2], *inplace[2];
    for (int d = 0; d < 2; d++) {
        CHECK_OK(a[d], carve_alloc(a[d], count * sizeof(float), streams[d], (void **)&send[d]));
        CHECK_OK(a[d], carve_alloc(a[d], count * sizeof(float), streams[d], (void **)&recv[d]));
        CHECK_OK(a[d], carve_alloc(a[d], count * sizeof(float), streams[d], (void **)&inplace[d]));
        if (!send[d] || !recv[d] || !inplace[d])
            exit(1);
        gpu_set_device(d);
        gpu_fill_ramp(send[d], count, (float)(d + 1), streams[d]);
        gpu_fill_ramp(inplace[d], count, (float)(2 * (d + 1)), streams[d]);
    }
    NCCL_CHECK(ncclGroupStart());
    for (int d = 0; d < 2; d++)
        NCCL_CHECK(ncclAllReduce(send[d], recv[d], count, ncclFloat, ncclSum, comms[d], streams[d]));
    NCCL_CHECK(ncclGroupEnd());
    NCCL_CHECK(ncclGroupStart());
    for (int d = 0; d < 2; d++)
        NCCL_CHECK(ncclAllReduce(inplace[d], inplace[d], count, ncclFloat, ncclSum, comms[d], streams[d]));
    NCCL_CHECK(ncclGroupEnd());
    for (int d = 0; d < 2; d++) {
        gpu_set_device(d);
        gpu_counter c = gpu_counter_of(d, 4);
        gpu_verify_ramp(recv[d], count, 3.0f, c.dev, streams[d]);
        gpu_verify_ramp(inplace[d], count, 6.0f, c.dev, streams[d]);
        unsigned long long bad = gpu_counter_take(c, streams[d]);
        if (bad)
            fprintf(stderr, "  round %d, device %d: %llu wrong sums\n", round, d, bad);
        CHECK(bad == 0);
    }
    gpu_set_device(0);
    /* Freed right away: the next round's buffers reuse them in stream order. */
    for (int d = 0; d < 2; d++) {
        CHECK_OK(a[d], carve_free(a[d], send[d]));
        CHECK_OK(a[d], carve_free(a[d], recv[d]));
        CHECK_OK(a[d], carve_free(a[d], inplace[d]));
    }
}

static void case_nccl_allreduce(void) {
    carve_arena *a[2] = {NULL, NULL};
    float *warm[2];
    for (int d = 0; d < 2; d++) {
        CHECK_OK(NULL, carve_device_arena(d, &a[d]));
        if (!a[d])
            return;
    }
    ncclComm_t comms[2];
    int devs[2] = {0, 1};
    NCCL_CHECK(ncclCommInitAll(comms, 2, devs));
    /* NCCL allocates some of its own buffers lazily, at the first collective:
     * run one on plain cudaMalloc memory before taking the marks. */
    for (int d = 0; d < 2; d++) {
        gpu_set_device(d);
        float *w = NULL;
        CUDA_CHECK(cudaMalloc((void **)&w, 1 << 20));
        warm[d] = w;
    }
    NCCL_CHECK(ncclGroupStart());
    for (int d = 0; d < 2; d++)
        NCCL_CHECK(ncclAllReduce(warm[d], warm[d], (1 << 20) / sizeof(float), ncclFloat, ncclSum, comms[d],
                                 streams[d]));
    NCCL_CHECK(ncclGroupEnd());
    for (int d = 0; d < 2; d++) {
        gpu_set_device(d);
        CUDA_CHECK(cudaStreamSynchronize(streams[d]));
        CUDA_CHECK(cudaFree(warm[d]));
    }
    gpu_set_device(0);
    /* NCCL's own memory stays put until the communicators go; from here on
     * every byte must come back. */
    gpu_mark m[2];
    for (int d = 0; d < 2; d++)
        gpu_mark_take(&m[d], d);
    size_t count = (size_t)gpu_scale(16 << 20, 1 << 20);
    int rounds = (int)gpu_scale(8, 2);
    double t0 = gpu_now();
    for (int r = 0; r < rounds; r++)
        allreduce_round(comms, a, count, r);
    char b1[32];
    printf("  %d rounds of two all-reduces of %s per device: %.1f ms\n", rounds,
           gpu_fmt(b1, sizeof(b1), count * sizeof(float)), (gpu_now() - t0) * 1e3);
    for (int d = 0; d < 2; d++) {
        carve_stats s = gpu_stats(a[d]);
        CHECK(s.num_live == 0);
        CHECK(s.reserved_bytes <= limits[d]);
        CHECK_OK(a[d], carve_empty_cache(a[d]));
        GPU_CHECK_BACK(&m[d], "carve buffers used by NCCL, given back");
        CHECK_ARENA(a[d]);
    }
    for (int d = 0; d < 2; d++)
        NCCL_CHECK(ncclCommDestroy(comms[d]));
    gpu_set_device(0);
}

int main(void) {
    /* Before anything touches NCCL or the default arenas. */
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    unsetenv("CARVE_CONF");
    gpu_start("gpu_two_devices", 2);
    for (int d = 0; d < 2; d++) {
        CHECK_OK(NULL, carve_device_set_limit(d, limits[d]));
        gpu_set_device(d);
        streams[d] = gpu_stream_new();
    }
    gpu_set_device(0);
    GPU_CASE(case_per_device_limits);
    /* NCCL keeps some device memory for its own use after its communicators
     * are destroyed, so this case checks its own marks (taken after
     * ncclCommInitAll) instead of the whole-case leak check. */
    gpu_run_case_opt("case_nccl_allreduce", case_nccl_allreduce, 0);
    for (int d = 0; d < 2; d++) {
        gpu_set_device(d);
        gpu_stream_free(streams[d]);
    }
    gpu_set_device(0);
    carve_device_arenas_release();
    return gpu_finish();
}
