/* kernel_common.cu — argument and error checks shared by the kernels. */
#include "kernel_common.h"

namespace carve_k {

carve_status check_device_present(const char *fn) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        (void)cudaGetLastError();
        return carve_fail(nullptr, CARVE_ERR_NO_DEVICE, "%s: no CUDA device (%s)", fn,
                          e != cudaSuccess ? cudaGetErrorName(e) : "0 devices");
    }
    return CARVE_OK;
}

carve_status check_device_ptr(const void *p, const char *fn, const char *what) {
    if (!p)
        return carve_fail(nullptr, CARVE_ERR_INVALID, "%s: %s is NULL", fn, what);
    cudaPointerAttributes attr;
    cudaError_t e = cudaPointerGetAttributes(&attr, p);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return carve_fail(nullptr, CARVE_ERR_INVALID, "%s: %s (%p) is not a pointer the driver knows (%s)", fn,
                          what, p, cudaGetErrorName(e));
    }
    if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)
        return carve_fail(nullptr, CARVE_ERR_INVALID, "%s: %s (%p) is not device memory", fn, what, p);
    int dev = 0;
    if (cudaGetDevice(&dev) == cudaSuccess && attr.type == cudaMemoryTypeDevice && attr.device != dev)
        return carve_fail(nullptr, CARVE_ERR_INVALID, "%s: %s (%p) lives on device %d, the current device is %d",
                          fn, what, p, attr.device, dev);
    return CARVE_OK;
}

carve_status launch_status(cudaError_t e, const char *fn) {
    if (e == cudaSuccess)
        return CARVE_OK;
    (void)cudaGetLastError();
    return carve_fail(nullptr, CARVE_ERR_BACKEND, "%s: %s (%s)", fn, cudaGetErrorName(e), cudaGetErrorString(e));
}

}  // namespace carve_k
