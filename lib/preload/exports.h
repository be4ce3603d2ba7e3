/*
 * exports.h — every symbol the interposer exports in the driver's and the
 * runtime's names, with the driver ABI's signatures (hooks.c and lookup.c
 * define them), and carve-run's own measurement switch (carve_run.h). A
 * program or library that links, dlsym()s or cuGetProcAddress()es one of
 * these names gets carve's function.
 */
#ifndef CARVE_PRELOAD_EXPORTS_H
#define CARVE_PRELOAD_EXPORTS_H

#include "preload/cutypes.h"

#define CARVE_EXPORT __attribute__((visibility("default")))

/* hooks.c */
CARVE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
CARVE_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr);
CARVE_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CARVE_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CARVE_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream);
CARVE_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
CARVE_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes);
CARVE_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev);
CARVE_EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags);
CARVE_EXPORT CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority);
CARVE_EXPORT CUresult cuStreamDestroy_v2(CUstream hStream);
CARVE_EXPORT CUresult cuStreamDestroy(CUstream hStream);
CARVE_EXPORT CUresult cuStreamBeginCapture(CUstream hStream);
CARVE_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream hStream);
CARVE_EXPORT CUresult cuCtxDestroy(CUcontext ctx);
CARVE_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev);
CARVE_EXPORT CUresult cuStreamBeginCapture_v2(CUstream hStream, int mode);
CARVE_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, int mode);
CARVE_EXPORT CUresult cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph, const CUgraphNode *deps,
                                                  const void *data, size_t ndeps, int mode);
CARVE_EXPORT CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph, const CUgraphNode *deps,
                                                       const void *data, size_t ndeps, int mode);
CARVE_EXPORT CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph);
CARVE_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph);
CARVE_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx);
CARVE_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev);
CARVE_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
CARVE_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev);
CARVE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
CARVE_EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags);
CARVE_EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev);
CARVE_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
CARVE_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, void *params, int nparams, unsigned int flags, CUdevice dev);
CARVE_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, void *params, unsigned int flags, CUdevice dev);
CARVE_EXPORT CUresult cuGreenCtxCreate(void **phCtx, void *desc, CUdevice dev, unsigned int flags);
CARVE_EXPORT CUresult cuGreenCtxStreamCreate(CUstream *phStream, void *greenCtx, unsigned int flags, int priority);

/* hooks.c: the measurement switch (include/carve_run.h) */
CARVE_EXPORT int carve_run_serve(int on);

/* counted.c: passed through to the driver, counted against the cap */
CARVE_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const void *prop,
                                  unsigned long long flags);
CARVE_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle);
CARVE_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr);
CARVE_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                               unsigned long long flags);
CARVE_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size);
CARVE_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr);
CARVE_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t width, size_t height,
                                         unsigned elem);
CARVE_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                              CUstream hStream);
CARVE_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                                   CUstream hStream);

/* runtime.c: the shared CUDA runtime's allocation functions */
CARVE_EXPORT cudaError_t cudaMalloc(void **devPtr, size_t size);
CARVE_EXPORT cudaError_t cudaFree(void *devPtr);
CARVE_EXPORT cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream);
CARVE_EXPORT cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream);
CARVE_EXPORT cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream);
CARVE_EXPORT cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream);

/* lookup.c */
CARVE_EXPORT void *dlsym(void *handle, const char *name);
CARVE_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
CARVE_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                          int *symbolStatus);
#endif
