/*
 * mock_api.h — what the drop-in's test programs declare of the CUDA driver
 * (as a program linked with -lcuda would, none of carve's headers) and of
 * the mock driver's counters, and the CHECK macro they report with. One
 * header, so that the programs stay programs that know nothing of carve
 * without each repeating the same declarations.
 */
#ifndef CARVE_TESTS_DROPIN_MOCK_API_H
#define CARVE_TESTS_DROPIN_MOCK_API_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef struct mock_ctx *CUcontext;
typedef struct mock_stream *CUstream;
typedef struct mock_event *CUevent;
#define CU_STREAM_LEGACY ((CUstream)0x1)
#define CU_STREAM_PER_THREAD ((CUstream)0x2)
typedef uint64_t cuuint64_t;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct mock_pool *CUmemoryPool;
/* The driver's structs of the virtual-memory functions, as in <cuda.h>. */
typedef struct CUmemAllocationProp {
    int type;                 /* CU_MEM_ALLOCATION_TYPE_PINNED = 1 */
    int requestedHandleTypes;
    struct {
        int type;             /* CU_MEM_LOCATION_TYPE_DEVICE = 1 */
        int id;
    } location;
    void *win32HandleMetaData;
    struct {
        unsigned char compressionType, gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
} CUmemAllocationProp;
typedef struct CUmemAccessDesc {
    struct {
        int type;
        int id;
    } location;
    int flags;                /* CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3 */
} CUmemAccessDesc;

/* The driver API. */
CUresult cuInit(unsigned flags);
CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, int dev);
CUresult cuDevicePrimaryCtxReset_v2(int dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuCtxGetCurrent(CUcontext *ctx);
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t size, CUstream s);
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s);
CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height, unsigned elem);
CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t size, unsigned flags);
CUresult cuMemGetInfo_v2(size_t *f, size_t *t);
CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr d);
typedef struct {
    char reserved[64];
} CUipcMemHandle;
CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr d);
CUresult cuDeviceTotalMem_v2(size_t *bytes, int dev);
CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr, unsigned long long flags);
CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size);
CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
                     unsigned long long flags);
CUresult cuMemRelease(CUmemGenericAllocationHandle h);
CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h, unsigned long long flags);
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size);
CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count);
CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *h, void *addr);
CUresult cuMemPoolCreate(CUmemoryPool *pool, const void *props);
CUresult cuMemPoolDestroy(CUmemoryPool pool);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream s);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream s);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream s);
CUresult cuStreamCreate(CUstream *s, unsigned flags);
CUresult cuStreamDestroy_v2(CUstream s);
CUresult cuStreamBeginCapture_v2(CUstream s, int mode);
CUresult cuStreamEndCapture(CUstream s, void **graph);
CUresult cuThreadExchangeStreamCaptureMode(int *mode);
CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, int mode);
CUresult cuStreamEndCapture_ptsz(CUstream s, void **graph);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream s);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s);
CUresult cuDevicePrimaryCtxRelease_v2(int dev);
CUresult cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *active);
CUresult cuCtxCreate_v2(CUcontext *ctx, unsigned flags, int dev);
CUresult cuCtxDestroy_v2(CUcontext ctx);
CUresult cuCtxSynchronize(void);
CUresult cuStreamSynchronize(CUstream s);
CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned flags);
CUresult cuEventCreate(CUevent *e, unsigned flags);
CUresult cuEventRecord(CUevent e, CUstream s);
CUresult cuEventQuery(CUevent e);
CUresult cuEventDestroy_v2(CUevent e);
CUresult cuGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags);
CUresult cuGraphLaunch(void *exec, CUstream s);
CUresult cuGraphDestroy(void *graph);

/* The mock driver's counters (mock_cuda.c). */
void mock_cuda_stats(unsigned long long *nalloc, unsigned long long *nfree, unsigned long long *bad, size_t *live);
unsigned long long mock_cuda_async_allocs(void);
int mock_cuda_broken_captures(void);
unsigned long long mock_cuda_event_waits(void);
void mock_cuda_churn(unsigned long long *maps, unsigned long long *unmaps, unsigned long long *waits);
unsigned long long mock_cuda_calls(void);
unsigned long long mock_cuda_mode_exchanges(void); /* of those calls, cuThreadExchangeStreamCaptureMode's */
void mock_cuda_event_serials(unsigned long long *recorded, unsigned long long *done_max);
void mock_cuda_memory_calls(unsigned long long *creates, unsigned long long *pool_allocs);
void mock_cuda_vmm_stats(size_t *reserved_now, size_t *mapped_now, size_t *peak_used, unsigned long long *faults);
int mock_cuda_stale_stream_uses(void);
unsigned long long mock_cuda_ctx_allocs(CUcontext ctx);
void mock_cuda_fail_destroys(int n);
/* fn runs once, inside the next cuStreamCreate, once the stream exists and
 * before the call returns: what another thread could do in that moment. */
void mock_cuda_on_stream_create(void (*fn)(void));
/* The device model: work queued on streams, completed on command, and the
 * oracle that checks every range handed out (mock_cuda.c). */
CUresult mock_cuda_launch(CUstream s, CUdeviceptr p, size_t n);
size_t mock_cuda_pending(void);
int mock_cuda_complete_one(unsigned long long r);
void mock_cuda_complete_all(void);
int mock_cuda_own(CUdeviceptr p, size_t n, CUstream s, int ordered);
void mock_cuda_disown(CUdeviceptr p);
void mock_cuda_disown_all(void);
unsigned long long mock_cuda_violations(char *text, size_t len);

/* A failed check prints where and counts; the program exits non-zero when
 * any failed (each program defines `failures`). */
#define CHECK(x)                                                          \
    do {                                                                  \
        if (!(x)) {                                                       \
            printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #x);          \
            failures++;                                                   \
        }                                                                 \
    } while (0)
#define CU(x) CHECK((x) == 0)

#endif
