/*
 * reduce.cu — carve_reduce_sum_f32: CUB's DeviceReduce::Sum with its
 * temporary storage carved from an arena.
 *
 * The usual pattern (cudaMalloc the temp storage, reduce, cudaFree) costs a
 * driver round trip and a device synchronization per call. Here the storage
 * comes from the arena on the same stream and is freed back in stream order
 * right after the launch: the next call on that stream gets the same bytes
 * back from the pool's cache, with no driver call at all.
 *
 * cudaStreamPerThread names a different stream on every thread, so no
 * arena pool can stand for it (carve_alloc refuses it). A call on it carves
 * its storage for the legacy default stream and declares the calling
 * thread's per-thread stream a user of it (carve_record_stream): the free
 * records an event there, in this thread, and the bytes go back to no one
 * before the reduction is done. They can be used on the per-thread stream
 * at once: it is a blocking stream, so it waits for all work queued earlier
 * on the legacy stream, where their earlier users ran.
 */
#include <cub/device/device_reduce.cuh>
#include <stdio.h>

#include "args.h"
#include "carve_kernels.h"
#include "kernel_common.h"

extern "C" carve_status carve_reduce_sum_f32(carve_arena *arena, carve_stream s, const float *x, size_t n,
                                             float *out) {
    const char *fn = "carve_reduce_sum_f32";
    /* What needs no device first (args.c, shared with the build without
     * CUDA), then the device and the pointers' memory. */
    carve_status st = carve_k_check_reduce(fn, arena, x, n, out);
    if (st != CARVE_OK)
        return st;
    if ((st = carve_k::check_device_present(fn)) != CARVE_OK)
        return st;
    carve_config cfg;
    carve_arena_get_config(arena, &cfg);
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev != cfg.device) {
        (void)cudaGetLastError();
        return carve_fail(nullptr, CARVE_ERR_INVALID, "%s: the current device (%d) is not the arena's (%d)", fn,
                          dev, cfg.device);
    }
    if ((st = carve_k::check_device_ptr(x, fn, "x")) != CARVE_OK ||
        (st = carve_k::check_device_ptr(out, fn, "out")) != CARVE_OK)
        return st;

    cudaStream_t stream = reinterpret_cast<cudaStream_t>(s);
    const bool per_thread = stream == cudaStreamPerThread;
    size_t temp_bytes = 0;
    cudaError_t e = cub::DeviceReduce::Sum(nullptr, temp_bytes, x, out, n, stream);
    if (e != cudaSuccess)
        return carve_k::launch_status(e, fn);
    void *temp = nullptr;
    st = carve_alloc(arena, temp_bytes ? temp_bytes : 1, per_thread ? (carve_stream)cudaStreamLegacy : s, &temp);
    if (st != CARVE_OK)
        return st; /* carve_alloc recorded the explanation */
    if (per_thread && (st = carve_record_stream(arena, temp, s)) != CARVE_OK) {
        carve_free(arena, temp);
        return st;
    }
    e = cub::DeviceReduce::Sum(temp, temp_bytes, x, out, n, stream);
    /* Stream-ordered free: only later work on this stream can get the
     * storage back, and it runs after this reduction (on the per-thread
     * stream, only once the event the free records there has completed). */
    carve_status freed = carve_free(arena, temp);
    st = carve_k::launch_status(e, fn);
    if (st == CARVE_OK && freed != CARVE_OK) { /* the event could not be recorded: the storage stays carved */
        char why[256];
        snprintf(why, sizeof why, "%s", carve_last_error(arena));
        return carve_fail(nullptr, freed, "%s: the sum is queued, but its %zu bytes of storage could not be freed (%s)",
                          fn, temp_bytes, why);
    }
    return st;
}
