/*
 * nocuda.c — built instead of cuda_common.c, cuda.c and cuda_vmm.c when carve is
 * configured without the CUDA toolkit: the CUDA backend and the import of
 * buffers from other processes report that there is no device, and the host
 * and virtual backends work as usual.
 */
#include "backend/leaves.h"

int carve_device_count(void) { return 0; }

int carve_driver_api_lookup(void *(*lookup)(const char *name, void *arg), void *arg) {
    (void)lookup;
    (void)arg;
    carve_backend_fail("carve was built without CUDA");
    return -1;
}

carve_status carve_cuda_mem_info(int device, size_t *free_bytes, size_t *total_bytes) {
    (void)device;
    *free_bytes = *total_bytes = 0;
    carve_backend_fail("carve was built without CUDA");
    return CARVE_ERR_NO_DEVICE;
}

static carve_status no_cuda(void) {
    carve_backend_fail("carve was built without CUDA");
    return CARVE_ERR_NO_DEVICE;
}

carve_status carve_backend_open_cuda_vmm(carve_be *be, const carve_config *cfg) {
    (void)be;
    (void)cfg;
    return no_cuda();
}

carve_status carve_backend_open_driver(carve_be *be, const carve_config *cfg) {
    (void)be;
    (void)cfg;
    return no_cuda();
}

carve_status carve_backend_open_cuda(carve_be *be, const carve_config *cfg) {
    (void)be;
    (void)cfg;
    return no_cuda();
}

carve_status carve_backend_import_fds(const carve_ipc_desc *desc, const int *fds, const size_t *sizes, int device,
                                      uintptr_t *base, size_t *len) {
    (void)desc;
    (void)fds;
    (void)sizes;
    (void)device;
    *base = 0;
    *len = 0;
    return no_cuda();
}

carve_status carve_backend_close_fds(int device, uintptr_t base, const size_t *sizes, size_t n) {
    (void)device;
    (void)base;
    (void)sizes;
    (void)n;
    return no_cuda();
}

carve_status carve_backend_import_cuda(const carve_ipc_desc *desc, int device, uintptr_t *base) {
    (void)desc;
    (void)device;
    *base = 0;
    return no_cuda();
}

carve_status carve_backend_close_cuda(int device, uintptr_t base) {
    (void)device;
    (void)base;
    return no_cuda();
}
