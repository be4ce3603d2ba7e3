/*
 * driver_api.c — the table of driver entry points (driver_api.h): given by
 * an interposer, or loaded once from libcuda.so.1 with dlopen and dlsym
 * under the versioned names that the driver's header maps its functions to.
 */
#include "backend/driver_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "backend/backend.h"

static carve_driver_api table;
static int state; /* 0 not yet, 1 ready, -1 no driver (atomic) */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char why[CARVE_BACKEND_MSG_LEN];

static const struct {
    const char *name;
    size_t offset;
} entries[] = {
    {"cuInit", offsetof(carve_driver_api, Init)},
    {"cuDeviceGetCount", offsetof(carve_driver_api, DeviceGetCount)},
    {"cuDeviceGet", offsetof(carve_driver_api, DeviceGet)},
    {"cuDeviceTotalMem_v2", offsetof(carve_driver_api, DeviceTotalMem)},
    {"cuDevicePrimaryCtxRetain", offsetof(carve_driver_api, DevicePrimaryCtxRetain)},
    {"cuDevicePrimaryCtxRelease_v2", offsetof(carve_driver_api, DevicePrimaryCtxRelease)},
    {"cuCtxGetCurrent", offsetof(carve_driver_api, CtxGetCurrent)},
    {"cuCtxGetDevice", offsetof(carve_driver_api, CtxGetDevice)},
    {"cuCtxPushCurrent_v2", offsetof(carve_driver_api, CtxPushCurrent)},
    {"cuCtxPopCurrent_v2", offsetof(carve_driver_api, CtxPopCurrent)},
    {"cuCtxSynchronize", offsetof(carve_driver_api, CtxSynchronize)},
    {"cuMemAlloc_v2", offsetof(carve_driver_api, MemAlloc)},
    {"cuMemFree_v2", offsetof(carve_driver_api, MemFree)},
    {"cuMemGetInfo_v2", offsetof(carve_driver_api, MemGetInfo)},
    {"cuEventCreate", offsetof(carve_driver_api, EventCreate)},
    {"cuEventRecord", offsetof(carve_driver_api, EventRecord)},
    {"cuEventQuery", offsetof(carve_driver_api, EventQuery)},
    {"cuEventSynchronize", offsetof(carve_driver_api, EventSynchronize)},
    {"cuEventDestroy_v2", offsetof(carve_driver_api, EventDestroy)},
    {"cuGetErrorName", offsetof(carve_driver_api, GetErrorName)},
};
#define NENTRIES (sizeof(entries) / sizeof(entries[0]))
/* Looked up too, and left NULL where missing: virtual-memory mode needs
 * the memory calls; a driver without the capture calls is still used. */
static const struct {
    const char *name;
    size_t offset;
} optional[] = {
    {"cuMemAddressReserve", offsetof(carve_driver_api, MemAddressReserve)},
    {"cuMemAddressFree", offsetof(carve_driver_api, MemAddressFree)},
    {"cuMemCreate", offsetof(carve_driver_api, MemCreate)},
    {"cuMemRelease", offsetof(carve_driver_api, MemRelease)},
    {"cuMemMap", offsetof(carve_driver_api, MemMap)},
    {"cuMemUnmap", offsetof(carve_driver_api, MemUnmap)},
    {"cuMemSetAccess", offsetof(carve_driver_api, MemSetAccess)},
    {"cuMemGetAllocationGranularity", offsetof(carve_driver_api, MemGetAllocationGranularity)},
    {"cuMemRetainAllocationHandle", offsetof(carve_driver_api, MemRetainAllocationHandle)},
    {"cuDeviceGetAttribute", offsetof(carve_driver_api, DeviceGetAttribute)},
    {"cuDeviceCanAccessPeer", offsetof(carve_driver_api, DeviceCanAccessPeer)},
    {"cuStreamIsCapturing", offsetof(carve_driver_api, StreamIsCapturing)},
    {"cuThreadExchangeStreamCaptureMode", offsetof(carve_driver_api, ThreadExchangeStreamCaptureMode)},
};
#define NOPTIONAL (sizeof(optional) / sizeof(optional[0]))

static void **slot(carve_driver_api *t, size_t i) { return (void **)((char *)t + entries[i].offset); }
static void **optional_slot(carve_driver_api *t, size_t i) { return (void **)((char *)t + optional[i].offset); }

int carve_driver_api_lookup(void *(*lookup)(const char *name, void *arg), void *arg) {
    carve_driver_api t;
    memset(&t, 0, sizeof(t));
    for (size_t i = 0; i < NENTRIES; i++)
        if (!(*slot(&t, i) = lookup(entries[i].name, arg))) {
            carve_backend_fail("the CUDA driver has no %s", entries[i].name);
            return -1;
        }
    for (size_t i = 0; i < NOPTIONAL; i++)
        *optional_slot(&t, i) = lookup(optional[i].name, arg);
    void *capture = lookup("carve_capture_active", arg); /* optional */
    memcpy(&t.CaptureActive, &capture, sizeof(capture));
    pthread_mutex_lock(&lock);
    int rc = -1;
    if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != 1) {
        table = t;
        __atomic_store_n(&state, 1, __ATOMIC_RELEASE);
        rc = 0;
    } else {
        carve_backend_fail("the driver's entry points are in use already (an arena on the cuda_driver backend exists)");
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

const carve_driver_api *carve_driver_api_get(void) {
    int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (s == 0) {
        pthread_mutex_lock(&lock);
        s = state;
        if (s == 0) {
            void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
            carve_driver_api t;
            memset(&t, 0, sizeof(t));
            s = 1;
            if (!h) {
                snprintf(why, sizeof(why), "cannot load the CUDA driver (libcuda.so.1): %s", dlerror());
                s = -1;
            }
            for (size_t i = 0; s == 1 && i < NENTRIES; i++)
                if (!(*slot(&t, i) = dlsym(h, entries[i].name))) {
                    snprintf(why, sizeof(why), "the CUDA driver has no %s", entries[i].name);
                    s = -1;
                }
            for (size_t i = 0; s == 1 && i < NOPTIONAL; i++)
                *optional_slot(&t, i) = dlsym(h, optional[i].name);
            if (s == 1)
                table = t; /* the handle stays open: the table points into it */
            else if (h)
                dlclose(h);
            __atomic_store_n(&state, s, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&lock);
    }
    if (s != 1) {
        carve_backend_fail("%s", why);
        return NULL;
    }
    return &table;
}
