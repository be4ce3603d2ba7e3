/*
 * ggml-carve.h — ggml's CUDA memory from carve: the adapter an engine links.
 *
 * ggml's CUDA backend takes device memory in two places: backend buffers
 * (weights, KV cache, compute buffers; cudaMalloc) and per-stream pools for
 * temporary memory inside operations (its legacy pool of cudaMalloc'd blocks
 * or its virtual-memory pool). With the hook that ggml-carve.patch adds to
 * ggml (ggml_backend_cuda_set_allocator, include/ggml-cuda-allocator.h),
 * ggml_carve_init routes both into one carve arena per device that the
 * engine configures: a hard limit, carve_memory_allocated / reserved, and
 * carve_empty_cache between models. ggml's pools become carve allocations
 * stream-ordered on the pool's stream; a backend buffer is freed after the
 * device is idle, as cudaFree is. What ggml reports as a device's free and
 * total memory (ggml_backend_dev_memory, which llama.cpp sizes its offload
 * and KV cache from) is held to the limit.
 *
 * CUDA graphs (ggml built with GGML_CUDA_GRAPHS, as llama.cpp is): what
 * ggml allocates from its pool while it captures a stream comes from a
 * carve graph pool of that stream (carve.h, "CUDA graphs"), memory that
 * stays the graph's for every replay. One graph pool per device and stream
 * ever captured, shared by that stream's graphs; each keeps the largest
 * capture's temporaries until the process ends (ggml_carve_empty_cache
 * leaves them), since ggml may replay a graph as long as its backend lives.
 *
 * Still from cudaMalloc: cuBLAS's workspace (a few MiB per stream, allocated
 * once in ggml-cuda/common.cuh) and multi-GPU all-reduce scratch.
 *
 * Not thread-safe against ggml_carve_init; everything else may be called
 * from any thread. docs/integrations.md is the guide.
 */
#ifndef GGML_CARVE_H
#define GGML_CARVE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <carve.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Install carve as ggml's CUDA allocator. conf configures the arenas in
 * CARVE_CONF's syntax ("limit=8GiB,initial=1GiB;device1:limit=4GiB", the
 * keys of carve_config_parse; NULL or "" for carve's defaults: growth on,
 * the limit the device's memory); each device's arena is created at its
 * first allocation. Call before the first CUDA backend or device buffer.
 * Returns 0, or -1 with the reason in ggml_carve_error(): a configuration
 * carve refuses, a second call, or ggml refusing the allocator (too late,
 * or a ggml without the hook). Synchronizes nothing. */
int ggml_carve_init(const char *conf);

/* The arena serving device, created now if need be; NULL when it cannot
 * be created (ggml_carve_error says why) or before ggml_carve_init.
 * Thread-safe. */
carve_arena *ggml_carve_arena(int device);

/* carve_memory_allocated / carve_memory_reserved of device's arena; 0 when
 * it does not exist. Thread-safe, lock-free. */
size_t ggml_carve_memory_allocated(int device);
size_t ggml_carve_memory_reserved(int device);

/* Pool allocations of device that a CUDA graph capture made, served from
 * the capturing stream's graph pool, since the program started; 0 for a
 * device out of range. A program can tell from it that ggml captured
 * graphs. Thread-safe, lock-free. */
uint64_t ggml_carve_captured_allocations(int device);

/* Give each arena's cached memory back to the driver (carve_empty_cache):
 * call it after a model's buffers are freed and before the next model is
 * loaded. The graph pools keep theirs (above). CARVE_OK, or the first
 * failure. Thread-safe. Synchronizes. */
carve_status ggml_carve_empty_cache(void);

/* One line per device arena into f: peak requested, allocated and reserved
 * bytes, the limit, the out-of-memory answers, the captured allocations.
 * Thread-safe. */
void ggml_carve_report(FILE *f);

/* Why the last call of the adapter on this thread failed; "" if none. */
const char *ggml_carve_error(void);

#ifdef __cplusplus
}
#endif

#endif /* GGML_CARVE_H */
