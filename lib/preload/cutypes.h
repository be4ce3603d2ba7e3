/*
 * cutypes.h — the few CUDA driver (and runtime) types and constants the
 * interposer's exported functions need, declared here rather than taken
 * from <cuda.h> and <cuda_runtime_api.h>: those rename functions with macros
 * (cuMemAlloc -> cuMemAlloc_v2, per-thread-stream variants) and declare
 * them, which would clash with definitions of those very symbols. The
 * values are the ABI's and do not change between CUDA versions.
 */
#ifndef CARVE_PRELOAD_CUTYPES_H
#define CARVE_PRELOAD_CUTYPES_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;                       /* enum cudaError_enum */
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphNode_st *CUgraphNode;
typedef uint64_t cuuint64_t;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct CUipcMemHandle_st {
    char reserved[64];
} CUipcMemHandle;

/* The start of CUmemAllocationProp, all the interposer reads of it: where
 * cuMemCreate puts the memory (the rest of the driver's struct follows and
 * is never touched here). */
typedef struct CUmemAllocationProp_head {
    int type;                 /* CUmemAllocationType */
    int requestedHandleTypes; /* CUmemAllocationHandleType */
    struct {
        int type;             /* CUmemLocationType: CU_MEM_LOCATION_TYPE_DEVICE for device memory */
        int id;               /* the device ordinal */
    } location;
} CUmemAllocationProp_head;
#define CU_MEM_LOCATION_TYPE_DEVICE 1

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_UNKNOWN = 999,
};

/* The runtime's names for the same things: a cudaStream_t is a CUstream,
 * cudaStreamLegacy and cudaStreamPerThread are the driver's two handles. */
typedef int cudaError_t;                    /* enum cudaError */
typedef CUstream cudaStream_t;
enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2, cudaErrorUnknown = 999 };

#define CU_STREAM_LEGACY ((CUstream)0x1)
#define CU_STREAM_PER_THREAD ((CUstream)0x2)
#define CU_STREAM_NON_BLOCKING 0x1u
#define CU_EVENT_DISABLE_TIMING 0x2u
#define CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM 0x2u
#define CU_STREAM_CAPTURE_STATUS_NONE 0
#define CU_STREAM_CAPTURE_MODE_RELAXED 2

#endif
