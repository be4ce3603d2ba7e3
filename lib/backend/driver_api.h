/*
 * driver_api.h — the CUDA driver functions carve calls itself, as one table
 * of pointers (driver_api.c), instead of linked symbols.
 *
 * The one idea: whoever stands between the program and the driver (the
 * carve-run interposer) hands carve the driver's real entry points with
 * carve_driver_api_lookup before any arena exists, so carve's own calls never
 * come back through the interposer; everyone else gets the table loaded
 * from libcuda.so.1 on first use. Nothing here needs cudart.
 */
#ifndef CARVE_BACKEND_DRIVER_API_H
#define CARVE_BACKEND_DRIVER_API_H

#include <cuda.h>

#include "base/util.h"

typedef struct carve_driver_api {
    CUresult (*Init)(unsigned int flags);
    CUresult (*DeviceGetCount)(int *count);
    CUresult (*DeviceGet)(CUdevice *dev, int ordinal);
    CUresult (*DeviceTotalMem)(size_t *bytes, CUdevice dev);          /* cuDeviceTotalMem_v2 */
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice dev);                /* _v2 */
    CUresult (*CtxGetCurrent)(CUcontext *ctx);
    CUresult (*CtxGetDevice)(CUdevice *dev);
    CUresult (*CtxPushCurrent)(CUcontext ctx);                        /* _v2 */
    CUresult (*CtxPopCurrent)(CUcontext *ctx);                        /* _v2 */
    CUresult (*CtxSynchronize)(void);
    CUresult (*MemAlloc)(CUdeviceptr *dptr, size_t bytes);            /* cuMemAlloc_v2 */
    CUresult (*MemFree)(CUdeviceptr dptr);                            /* cuMemFree_v2 */
    CUresult (*MemGetInfo)(size_t *free_bytes, size_t *total_bytes);  /* cuMemGetInfo_v2 */
    CUresult (*EventCreate)(CUevent *ev, unsigned int flags);
    CUresult (*EventRecord)(CUevent ev, CUstream stream);
    CUresult (*EventQuery)(CUevent ev);
    CUresult (*EventSynchronize)(CUevent ev);
    CUresult (*EventDestroy)(CUevent ev);                             /* _v2 */
    CUresult (*GetErrorName)(CUresult error, const char **name);
    /* Optional (NULL when the driver or the lookup has none): whether a
     * stream is being captured, and the calling thread's capture mode
     * exchanged. With the exchange, the calls that a capture in global mode
     * on another thread forbids (allocations, frees, event queries and
     * waits: "potentially unsafe" in the driver's words) are made in
     * relaxed mode (driver.c). */
    CUresult (*StreamIsCapturing)(CUstream stream, CUstreamCaptureStatus *status);
    CUresult (*ThreadExchangeStreamCaptureMode)(CUstreamCaptureMode *mode);
    /* Optional, from an interposer that watches graph captures: nonzero
     * while a stream capture is in progress anywhere in the process. The
     * backend then records no event, since recording on the legacy stream
     * would join (and break) the capture; carve treats it as an event it
     * could not record. */
    int (*CaptureActive)(void);
    /* Optional: the virtual-memory functions (NULL where the driver or the
     * interposer lacks one; virtual-memory mode then needs them all). */
    CUresult (*MemAddressReserve)(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr,
                                  unsigned long long flags);
    CUresult (*MemAddressFree)(CUdeviceptr ptr, size_t size);
    CUresult (*MemCreate)(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
                          unsigned long long flags);
    CUresult (*MemRelease)(CUmemGenericAllocationHandle h);
    CUresult (*MemMap)(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                       unsigned long long flags);
    CUresult (*MemUnmap)(CUdeviceptr ptr, size_t size);
    CUresult (*MemSetAccess)(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count);
    CUresult (*MemGetAllocationGranularity)(size_t *granularity, const CUmemAllocationProp *prop,
                                            CUmemAllocationGranularity_flags option);
    CUresult (*MemRetainAllocationHandle)(CUmemGenericAllocationHandle *h, void *addr);
    CUresult (*DeviceGetAttribute)(int *value, CUdevice_attribute attrib, CUdevice dev);
    /* Optional: which devices may be granted the arena's mapped memory
     * (virtual-memory mode with peers=auto; missing: the owner alone). */
    CUresult (*DeviceCanAccessPeer)(int *can, CUdevice dev, CUdevice peer);
} carve_driver_api;

/* Fill the table with lookup(name, arg) for each exported driver name (the
 * optional ones may be missing) and use it from now on. Call it before the first arena on the CUDA_DRIVER
 * backend is created. 0; -1 when a function is missing (carve_backend_msg()
 * names it) or the table was already in use. Thread-safe. */
int carve_driver_api_lookup(void *(*lookup)(const char *name, void *arg), void *arg) CARVE_INTERNAL;
/* The table in use, loaded from libcuda.so.1 on first call unless one was
 * given; NULL (carve_backend_msg() says why) when there is no driver.
 * Thread-safe. */
const carve_driver_api *carve_driver_api_get(void) CARVE_INTERNAL;

/* The calling thread's capture mode becomes relaxed for one potentially
 * unsafe call (allocating, mapping, unmapping, freeing, asking about or
 * waiting for an event): a capture in global mode on another thread forbids
 * such calls to threads in global mode, and breaks when one is made.
 * Returns the mode to restore with carve_driver_unrelax, or -1 when the
 * driver has no exchange (the call is made as it is). */
static inline int carve_driver_relax(const carve_driver_api *api) {
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (!api->ThreadExchangeStreamCaptureMode || api->ThreadExchangeStreamCaptureMode(&m) != CUDA_SUCCESS)
        return -1;
    return (int)m;
}

static inline void carve_driver_unrelax(const carve_driver_api *api, int old) {
    if (old >= 0) {
        CUstreamCaptureMode m = (CUstreamCaptureMode)old;
        (void)api->ThreadExchangeStreamCaptureMode(&m);
    }
}

#endif
