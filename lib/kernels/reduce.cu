/*
 * reduce.cu — carve_reduce_sum_f32: CUB's DeviceReduce::Sum with its
 * temporary storage carved from an arena.
 *
 * The usual pattern (cudaMalloc the temp storage, reduce, cudaFree) costs a
 * driver round trip and a device synchronization per call. Here the storage
 * comes from the arena on the same stream and is freed back in stream order
 * right after the launch: the next call on that stream gets the same bytes
 * back from the pool's cache, with no driver call at all.
 */
#include <cub/device/device_reduce.cuh>

#include "carve_kernels.h"
#include "kernel_common.h"

extern "C" carve_status carve_reduce_sum_f32(carve_arena *arena, carve_stream s, const float *x, size_t n,
                                             float *out) {
    const char *fn = "carve_reduce_sum_f32";
    if (!arena)
        return carve_fail(nullptr, CARVE_ERR_INVALID, "%s: arena is NULL", fn);
    carve_config cfg;
    carve_arena_get_config(arena, &cfg);
    if (cfg.backend != CARVE_BACKEND_CUDA)
        return carve_fail(nullptr, CARVE_ERR_INVALID, "%s: the arena's backend is %s, not cuda", fn,
                          carve_backend_str(cfg.backend));
    if (n == 0)
        return carve_fail(nullptr, CARVE_ERR_INVALID, "%s: n is 0 (the sum of nothing has no device result)", fn);
    carve_status st = carve_k::check_device_present(fn);
    if (st != CARVE_OK)
        return st;
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
    size_t temp_bytes = 0;
    cudaError_t e = cub::DeviceReduce::Sum(nullptr, temp_bytes, x, out, n, stream);
    if (e != cudaSuccess)
        return carve_k::launch_status(e, fn);
    void *temp = nullptr;
    st = carve_alloc(arena, temp_bytes ? temp_bytes : 1, s, &temp);
    if (st != CARVE_OK)
        return st; /* carve_alloc recorded the explanation */
    e = cub::DeviceReduce::Sum(temp, temp_bytes, x, out, n, stream);
    /* Stream-ordered free: only later work on this stream can get the
     * storage back, and it runs after this reduction. */
    carve_free(arena, temp);
    return carve_k::launch_status(e, fn);
}
