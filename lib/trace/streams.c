/*
 * streams.c — the stream handles a replay runs on: real CUDA streams, one
 * per trace stream number, for the CUDA backend, and distinct fake handles
 * for the backends that never look behind a handle.
 */
#include <stdlib.h>
#include <string.h>

#include "carve_trace.h"
#include "engine/error.h"

#ifdef CARVE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

carve_status carve_replay_streams_open(carve_replay_streams *rs, uint32_t n, carve_backend backend,
                                       int device) {
    if (!rs)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_replay_streams_open: rs is NULL");
    memset(rs, 0, sizeof(*rs));
    if (n == 0)
        n = 1;
    if (n > CARVE_TRACE_MAX_STREAMS)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_replay_streams_open: %u streams (at most %u)", n,
                          CARVE_TRACE_MAX_STREAMS);
    rs->s = calloc(n, sizeof(*rs->s));
    if (!rs->s)
        return carve_fail_host(NULL, CARVE_ERR_OOM, 1, "carve_replay_streams_open: host memory exhausted");
    rs->n = n;
    if (backend != CARVE_BACKEND_CUDA && backend != CARVE_BACKEND_CUDA_DRIVER) {
        /* Any distinct non-NULL values will do: HOST and VIRTUAL never look
         * behind a stream handle. */
        for (uint32_t i = 1; i < n; i++)
            rs->s[i] = (carve_stream)(uintptr_t)(0x1000u + 0x100u * i);
        return CARVE_OK;
    }
#ifdef CARVE_HAVE_CUDA
    cudaError_t e = cudaSetDevice(device);
    for (uint32_t i = 0; e == cudaSuccess && i < n; i++) {
        cudaStream_t s = NULL;
        e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        rs->s[i] = (carve_stream)s;
    }
    rs->real = 1;
    if (e != cudaSuccess) {
        carve_status st = e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorInvalidDevice
                              ? CARVE_ERR_NO_DEVICE
                              : CARVE_ERR_BACKEND;
        carve_fail(NULL, st, "carve_replay_streams_open: cannot create CUDA streams on device %d: %s", device,
                   cudaGetErrorString(e));
        (void)cudaGetLastError();
        carve_replay_streams_close(rs);
        return st;
    }
    return CARVE_OK;
#else
    (void)device;
    free(rs->s);
    memset(rs, 0, sizeof(*rs));
    return carve_fail(NULL, CARVE_ERR_NO_DEVICE, "carve_replay_streams_open: carve was built without CUDA");
#endif
}

void carve_replay_streams_close(carve_replay_streams *rs) {
    if (!rs)
        return;
#ifdef CARVE_HAVE_CUDA
    if (rs->real)
        for (uint32_t i = 0; i < rs->n; i++)
            if (rs->s[i])
                cudaStreamDestroy((cudaStream_t)rs->s[i]);
#endif
    free(rs->s);
    memset(rs, 0, sizeof(*rs));
}
