/*
 * cuda_runtime_api.h — a stand-in for the CUDA runtime's header, for
 * test_ggml_graphs.c: the runtime calls ggml-carve.c makes, renamed to
 * functions the test defines (stub_cuda*), so that the test answers
 * cudaStreamIsCapturing as the driver would during ggml's graph captures
 * and counts what the adapter asks, with no GPU and no clash with the real
 * runtime that libcarve may link. Only what ggml-carve.c uses.
 */
#pragma once

typedef int cudaError_t;
#define cudaSuccess 0
#define cudaErrorInvalidResourceHandle 400

typedef struct CUstream_st *cudaStream_t;

enum cudaStreamCaptureStatus {
    cudaStreamCaptureStatusNone = 0,
    cudaStreamCaptureStatusActive = 1,
    cudaStreamCaptureStatusInvalidated = 2
};

#define cudaStreamIsCapturing stub_cudaStreamIsCapturing
#define cudaGetLastError stub_cudaGetLastError
#define cudaGetDevice stub_cudaGetDevice
#define cudaSetDevice stub_cudaSetDevice
#define cudaDeviceSynchronize stub_cudaDeviceSynchronize

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *status);
cudaError_t cudaGetLastError(void);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaDeviceSynchronize(void);
