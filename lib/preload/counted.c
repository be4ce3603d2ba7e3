/*
 * counted.c — the driver's ways of taking device memory that carve does not
 * serve, passed through to the driver and counted against the cap
 * (meter.c): physical memory from cuMemCreate (with cuMemRelease, cuMemMap,
 * cuMemUnmap and cuMemRetainAllocationHandle, which decide when it is
 * gone), pitched allocations (cuMemAllocPitch, behind cudaMallocPitch and
 * cudaMalloc3D) and pool allocations (cuMemAllocFromPoolAsync, behind
 * cudaMallocFromPoolAsync). Their frees (cuMemFree, cuMemFreeAsync) are
 * hooks.c's, which give the bytes back.
 *
 * The one idea: the bytes are taken from the device's budget before the
 * driver is asked, so that past the cap each entry point answers with the
 * driver's own out-of-memory error and the program's handling of it runs
 * (PyTorch's expandable segments size their address range from the capped
 * total memory and count on cuMemCreate failing before the range is full).
 * A refusal first has carve give back what it holds cached or waiting in
 * the quarantine on that device, and says once why it refused. Calls carve's own virtual-memory backend makes
 * through these hooks count as carve's and are refused silently: carve
 * handles a full device itself.
 */
#include <stdio.h>

#include "preload/exports.h"
#include "preload/preload.h"

static struct {
    CUresult (*Create)(CUmemGenericAllocationHandle *, size_t, const void *, unsigned long long);
    CUresult (*Release)(CUmemGenericAllocationHandle);
    CUresult (*Map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*Unmap)(CUdeviceptr, size_t);
    CUresult (*Retain)(CUmemGenericAllocationHandle *, void *);
    CUresult (*AllocPitch)(CUdeviceptr *, size_t *, size_t, size_t, unsigned);
    CUresult (*AllocFromPool)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
    CUresult (*AllocFromPool_ptsz)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
} real;
static int resolved; /* atomic */

static void resolve_all(void) {
    carve_faults_init();
    carve_session_init(); /* carve_run.ready: 0 from here on only in a forked child */
#define R(field, name) CARVE_SET_FN(real.field, carve_real_driver(name))
    R(Create, "cuMemCreate");
    R(Release, "cuMemRelease");
    R(Map, "cuMemMap");
    R(Unmap, "cuMemUnmap");
    R(Retain, "cuMemRetainAllocationHandle");
    R(AllocPitch, "cuMemAllocPitch_v2");
    R(AllocFromPool, "cuMemAllocFromPoolAsync");
    R(AllocFromPool_ptsz, "cuMemAllocFromPoolAsync_ptsz");
#undef R
    __atomic_store_n(&resolved, 1, __ATOMIC_RELEASE);
}

/* Resolve; then whether the call is to be counted: not in the child of a
 * process that used CUDA (nothing is served or counted there, and the
 * meter is the parent's). */
static int resolve(void) {
    if (CARVE_UNLIKELY(!__atomic_load_n(&resolved, __ATOMIC_ACQUIRE)))
        resolve_all();
    return __atomic_load_n(&carve_run.ready, __ATOMIC_ACQUIRE) != 0;
}

#define NOT_SUPPORTED 801 /* CUDA_ERROR_NOT_SUPPORTED: the driver lacks the function */
#define CALL_REAL(fn, ...) (real.fn ? real.fn(__VA_ARGS__) : NOT_SUPPORTED)

void carve_counted_explain(int dev, char *why, size_t len) {
    carve_meter_view v;
    carve_meter_get(dev, &v);
    char b1[32], b2[32], b3[32];
    int n = snprintf(why, len, "the cap of %s holds %s already (", carve_format_bytes(b1, sizeof(b1), v.cap),
                     carve_format_bytes(b2, sizeof(b2), v.bytes));
    for (int k = 0, first = 1; k < CARVE_METER_KINDS && n > 0 && (size_t)n < len; k++)
        if (v.kind[k].bytes) {
            n += snprintf(why + n, len - (size_t)n, "%s%s %s", first ? "" : ", ", carve_meter_kind_name(k),
                          carve_format_bytes(b3, sizeof(b3), v.kind[k].bytes));
            first = 0;
        }
    if (n > 0 && (size_t)n < len)
        snprintf(why + n, len - (size_t)n, ")");
}

/* What the cap holds on the device, for the message of a refusal. */
static void explain(int dev, size_t size, int kind) {
    char why[512], held[448];
    carve_counted_explain(dev, held, sizeof(held));
    snprintf(why, sizeof(why), "%s refused: %s", carve_meter_kind_name(kind), held);
    carve_session_oom(dev, size, why);
}

int carve_counted_take(int dev, size_t size, int kind) {
    if (carve_meter_take(dev, size, kind, 0) == 0)
        return 0;
    /* What carve holds cached or waiting on this device is the program's to have. */
    carve_ctx *c = carve_ctx_current();
    if (c && carve_ctx_device(c) == dev)
        carve_ctx_make_room(c);
    if (carve_meter_take(dev, size, kind, 1) == 0)
        return 0;
    explain(dev, size, kind);
    return -1;
}

/* ---- physical memory ---------------------------------------------------- */

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const void *prop, unsigned long long flags) {
    if (!resolve())
        return CALL_REAL(Create, handle, size, prop, flags);
    int carves = carve_meter_from_carve(__builtin_return_address(0));
    if (CARVE_UNLIKELY(carve_faults_armed) && !carves && handle && size && prop && carve_fault_next())
        return CUDA_ERROR_OUT_OF_MEMORY;
    const CUmemAllocationProp_head *p = prop;
    int dev = handle && size && p && p->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? p->location.id : -1;
    int kind = carves ? CARVE_METER_CARVE : CARVE_METER_VMM;
    if (dev >= 0 && (carves ? carve_meter_take(dev, size, kind, 1) : carve_counted_take(dev, size, kind)) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = CALL_REAL(Create, handle, size, prop, flags);
    if (dev >= 0) {
        if (r != CUDA_SUCCESS)
            carve_meter_untake(dev, size, kind);
        else
            carve_meter_add_handle(*handle, size, dev, kind);
    }
    return r;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    int counting = resolve();
    CUresult r = CALL_REAL(Release, handle);
    if (r == CUDA_SUCCESS && counting)
        carve_meter_release_handle(handle);
    return r;
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr) {
    int counting = resolve();
    /* A handle of a granule can be exported and mapped elsewhere, where no
     * work waits for this process's streams: ordered reuse (quarantine.c)
     * ends at the first one the program asks for. */
    carve_q_mark_unordered("cuMemRetainAllocationHandle");
    CUresult r = CALL_REAL(Retain, handle, addr);
    if (r == CUDA_SUCCESS && handle && counting)
        carve_meter_retain_handle(*handle);
    return r;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
    int counting = resolve();
    CUresult r = CALL_REAL(Map, ptr, size, offset, handle, flags);
    if (r == CUDA_SUCCESS && counting)
        carve_meter_mapped((uintptr_t)ptr, size, handle);
    return r;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    int counting = resolve();
    CUresult r = CALL_REAL(Unmap, ptr, size);
    if (r == CUDA_SUCCESS && counting)
        carve_meter_unmapped((uintptr_t)ptr, size);
    return r;
}

/* ---- pitched and pool allocations ------------------------------------------ */

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t width, size_t height, unsigned elem) {
    if (!resolve())
        return CALL_REAL(AllocPitch, dptr, pPitch, width, height, elem);
    if (CARVE_UNLIKELY(carve_faults_armed) && dptr && pPitch && width && height && carve_fault_next())
        return CUDA_ERROR_OUT_OF_MEMORY;
    int dev = -1;
    void *ctx = NULL;
    /* Taken at the pitch the driver most likely picks (rows of whole 512-byte
     * units), counted at the pitch it did pick. */
    size_t row = width <= SIZE_MAX - 511 ? (width + 511) / 512 * 512 : 0;
    size_t size = height && row <= SIZE_MAX / height ? row * height : 0;
    if (dptr && pPitch && size)
        carve_meter_where(&dev, &ctx);
    if (dev >= 0 && carve_counted_take(dev, size, CARVE_METER_PITCHED) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = CALL_REAL(AllocPitch, dptr, pPitch, width, height, elem);
    if (dev >= 0) {
        if (r != CUDA_SUCCESS)
            carve_meter_untake(dev, size, CARVE_METER_PITCHED);
        else
            carve_meter_add_ptr((uintptr_t)*dptr, size, *pPitch * height, dev, CARVE_METER_PITCHED, ctx);
    }
    return r;
}

static CUresult from_pool(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream stream, int ptsz) {
    int dev = -1, counting = resolve();
    void *ctx = NULL; /* a pool allocation outlives its context: counted without it */
    if (counting && CARVE_UNLIKELY(carve_faults_armed) && dptr && size && carve_fault_next())
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (counting && dptr && size)
        carve_meter_where(&dev, &ctx);
    if (dev >= 0 && carve_counted_take(dev, size, CARVE_METER_POOL) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = ptsz ? CALL_REAL(AllocFromPool_ptsz, dptr, size, pool, stream)
                      : CALL_REAL(AllocFromPool, dptr, size, pool, stream);
    if (dev >= 0) {
        if (r != CUDA_SUCCESS)
            carve_meter_untake(dev, size, CARVE_METER_POOL);
        else
            carve_meter_add_ptr((uintptr_t)*dptr, size, size, dev, CARVE_METER_POOL, NULL);
    }
    return r;
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
    return from_pool(dptr, bytesize, pool, hStream, 0);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
    return from_pool(dptr, bytesize, pool, hStream, 1);
}
