/*
 * gpu_util.h — what the GPU tests share: skipping when there is no device,
 * fatal checks for CUDA calls in the test scaffolding, pattern kernels that
 * prove buffers never overlap, a "late writer" that keeps writing a buffer
 * long after the host moved on, and a leak check on the driver's own count of
 * free memory.
 *
 * The one idea: every buffer a test hands out is filled on the GPU with a
 * 64-bit pattern derived from (buffer id, word index) and verified on the GPU
 * before it is freed. If the allocator ever gave two live buffers
 * overlapping memory, or reused memory while a kernel could still write it,
 * some verification counts a mismatch.
 *
 * Leak check: gpu_run_case records cudaMemGetInfo's free bytes for every
 * device before a case and requires them back afterwards within gpu_slack()
 * (8 MiB unless CARVE_TEST_MEM_SLACK_MIB says otherwise): the driver keeps
 * small internal pools (events, streams, module data) that may grow by a
 * 2 MiB page now and then, and those are not leaks of carve's. Checks of
 * "device usage equals what carve reserved" allow gpu_tolerance(n) = slack +
 * 2 MiB per segment, the driver's page size for cudaMalloc.
 *
 * Environment:
 *   CARVE_TEST_QUICK=1          fewer steps and shorter sleeps (for
 *                               compute-sanitizer, which slows kernels 10-100x)
 *   CARVE_TEST_SEED=N           seed of the random tests
 *   CARVE_TEST_MEM_SLACK_MIB=N  leak-check slack in MiB (default 8)
 *
 * The helpers are C (test files are C); the kernels are in gpu_kernels.cu
 * (declared in gpu_kernels.h, included here).
 */
#ifndef CARVE_GPU_UTIL_H
#define CARVE_GPU_UTIL_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu_kernels.h"
#include "test_util.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GPU_SKIP 77
#define GPU_MAX_DEVICES 8
#define GPU_COUNTERS 16 /* mismatch counters per device */
#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

/* A request's size as carve rounds it (what it counts as allocated). */
static inline size_t gpu_rounded(size_t n) { return (n + CARVE_ALIGNMENT - 1) & ~(size_t)(CARVE_ALIGNMENT - 1); }

/* A failed CUDA call in the scaffolding ends the test (exit 1) with the
 * call, its error name and where. */
#define CUDA_CHECK(expr)                                        \
    do {                                                        \
        cudaError_t e_ = (expr);                                \
        if (e_ != cudaSuccess)                                  \
            gpu_die(__FILE__, __LINE__, #expr, (int)e_);        \
    } while (0)
void gpu_die(const char *file, int line, const char *what, int err) __attribute__((noreturn));

/* Start a GPU test: print its name; exit 77 ("SKIP: no CUDA device") when
 * fewer than min_devices devices are usable; create every device's context,
 * load the kernels and the counters once (so that none of that shows up in a
 * leak check). Returns the number of devices. */
int gpu_start(const char *test, int min_devices);
/* End a GPU test: free what gpu_start made (so that compute-sanitizer's
 * leak check sees nothing left) and return test_finish(). */
int gpu_finish(void);
/* Nonzero when CARVE_TEST_QUICK is set (to anything but "0"). */
int gpu_quick(void);
/* Pick n normally, quick_n under CARVE_TEST_QUICK. */
long gpu_scale(long n, long quick_n);
/* Monotonic seconds. */
double gpu_now(void);
/* Make dev current (fatal on failure). */
void gpu_set_device(int dev);

/* A CUDA arena on device with the given growth, initial and limit (0: the
 * defaults) and name; exits the test if it cannot be created. */
carve_arena *gpu_arena(int device, int growth, size_t initial, size_t limit, const char *name);
/* The same from a carve_config_parse string (e.g. "growth=0,initial=4GiB"). */
carve_arena *gpu_arena_conf(const char *conf, const char *name);
/* The calling thread's current device. */
int gpu_get_device(void);
/* A non-blocking stream on the current device: no implicit synchronisation
 * with the legacy default stream, so tests see the allocator's ordering and
 * nothing else. */
cudaStream_t gpu_stream_new(void);
void gpu_stream_free(cudaStream_t s);

/* ---- mismatch counters ----
 * GPU_COUNTERS device-memory counters per device, made by gpu_start (outside
 * every leak check). A counter may be used by one stream at a time. */
typedef struct gpu_counter {
    unsigned long long *dev;  /* device memory, for gpu_verify */
    unsigned long long *host; /* pinned mirror */
} gpu_counter;
gpu_counter gpu_counter_of(int device, int slot);
/* Wait for stream s, return the count and zero it (on s). */
unsigned long long gpu_counter_take(gpu_counter c, cudaStream_t s);
/* Verify buf on s now and return its mismatch count (uses counter c). */
unsigned long long gpu_mismatches(gpu_counter c, const void *buf, size_t bytes, uint64_t id, cudaStream_t s);

/* ---- device memory accounting ---- */
typedef struct gpu_mark {
    int device;
    size_t free_bytes, total_bytes;
} gpu_mark;
/* Synchronise device and record its free memory (current device kept). */
void gpu_mark_take(gpu_mark *m, int device);
/* Bytes of device memory taken since the mark (0 if more is free now). */
size_t gpu_mark_used(const gpu_mark *m);
/* Free bytes of device now (after synchronising it). */
size_t gpu_free_now(int device);
size_t gpu_slack(void);
size_t gpu_tolerance(size_t nsegments);
/* CHECK that device's free memory is back to the mark within gpu_slack(). */
#define GPU_CHECK_BACK(mark, what) gpu_check_back((mark), (what), __FILE__, __LINE__)
void gpu_check_back(const gpu_mark *m, const char *what, const char *file, int line);
/* CHECK that device usage since the mark matches reserved bytes of carve
 * within gpu_tolerance(nsegments): the driver really holds what carve says it
 * reserved, and no more. */
#define GPU_CHECK_USAGE(mark, reserved, nsegs, what) \
    gpu_check_usage((mark), (reserved), (nsegs), (what), __FILE__, __LINE__)
void gpu_check_usage(const gpu_mark *m, size_t reserved, size_t nsegments, const char *what, const char *file,
                     int line);

/* Run one named case: leak marks on every device before, and afterwards a
 * check that every device's memory is back, that cudaGetLastError is
 * cudaSuccess (carve leaves no error behind) and that the current device is
 * still 0. Prints the case's name, time and result. */
void gpu_run_case(const char *name, void (*fn)(void));
#define GPU_CASE(fn) gpu_run_case(#fn, fn)
/* The same, with the device-memory check left to the case when leak_check
 * is 0 (for cases where a third party keeps memory, like NCCL). */
void gpu_run_case_opt(const char *name, void (*fn)(void), int leak_check);

/* Byte count as "12.50 MiB" into buf. */
const char *gpu_fmt(char *buf, size_t len, size_t bytes);

/* carve_get_stats, CHECKed. */
carve_stats gpu_stats(const carve_arena *a);

#ifdef __cplusplus
}
#endif

#endif
