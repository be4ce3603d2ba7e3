/*
 * no_vmm.c — a measuring shim for ggml's legacy CUDA pool: preloaded, it
 * answers 0 when a program asks the driver (cuDeviceGetAttribute) whether
 * the device supports virtual memory management, and passes every other
 * question through. ggml's CUDA backend then takes its temporary memory
 * from its legacy pool of cudaMalloc'd blocks, as it does on a GPU without
 * VMM (its build option GGML_CUDA_NO_VMM makes the same choice at compile
 * time), with the program and ggml unchanged. The CUDA runtime reaches the
 * driver through cuGetProcAddress, so nothing else changes.
 *
 *   LD_PRELOAD=libggml_no_vmm.so gpt-2-backend ...
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
    static CUresult (*real)(int *, CUdevice_attribute, CUdevice);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "cuDeviceGetAttribute");
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = real(pi, attrib, dev);
    if (r == CUDA_SUCCESS && attrib == CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)
        *pi = 0;
    return r;
}
