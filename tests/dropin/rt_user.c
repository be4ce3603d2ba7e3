/*
 * rt_user.c — a library that allocates through the shared CUDA runtime it is
 * linked to (the mock one, mock_cudart.c), loaded by rt_app.c with
 * RTLD_LOCAL the way Python loads an extension module: that runtime is then
 * in the library's own scope only, not in the process's global one, and
 * the interposer's exported runtime functions must still reach it for
 * everything they do not answer themselves.
 *
 * Built with -fno-optimize-sibling-calls, so each call comes from here (a
 * tail call would come from the caller's caller); rt_tail.c is the same
 * calls as tail calls.
 */
#include <stddef.h>

#define EXPORT __attribute__((visibility("default")))

typedef struct mock_stream *cudaStream_t;
int cudaMalloc(void **p, size_t size);
int cudaFree(void *p);
int cudaMallocAsync(void **p, size_t size, cudaStream_t s);
int cudaMallocAsync_ptsz(void **p, size_t size, cudaStream_t s);
int cudaFreeAsync(void *p, cudaStream_t s);
int cudaFreeAsync_ptsz(void *p, cudaStream_t s);
int cudaGetLastError(void);
int cudaPeekAtLastError(void);
unsigned long long mock_cudart_calls(void);

EXPORT int rtu_malloc(void **p, size_t size) { return cudaMalloc(p, size); }
EXPORT int rtu_free(void *p) { return cudaFree(p); }
EXPORT int rtu_malloc_async(void **p, size_t size, cudaStream_t s) { return cudaMallocAsync(p, size, s); }
EXPORT int rtu_malloc_async_ptsz(void **p, size_t size, cudaStream_t s) { return cudaMallocAsync_ptsz(p, size, s); }
EXPORT int rtu_free_async(void *p, cudaStream_t s) { return cudaFreeAsync(p, s); }
EXPORT int rtu_free_async_ptsz(void *p, cudaStream_t s) { return cudaFreeAsync_ptsz(p, s); }
EXPORT int rtu_last_error(void) { return cudaGetLastError(); }
EXPORT int rtu_peek_error(void) { return cudaPeekAtLastError(); }
EXPORT unsigned long long rtu_runtime_calls(void) { return mock_cudart_calls(); }
