/*
 * carve_frameworks.h — entry points shaped for frameworks: PyTorch's
 * pluggable allocator, CuPy's C allocator, per-thread arena routing, and a
 * recorder that writes every allocation as a trace event.
 *
 * The one idea: a framework's allocator callback carries no arena, so the
 * arena comes from the calling thread. Each thread has a small stack of
 * arenas (carve_route_push / carve_route_pop); an allocation goes to the
 * arena on top of it, or, when the stack is empty, to the device's route
 * (carve_route_device: for the threads a framework starts itself, such as
 * PyTorch's autograd threads) or the device's default arena
 * (carve_device_arena). A free carries no arena either: carve finds the
 * owner among the arenas it has routed to (an O(1) lookup per arena) and the
 * default arenas that served allocations, so a buffer may be freed on any
 * thread, long after its block of code ended. An arena retired with
 * carve_route_retire is destroyed by the free of its last buffer, which is
 * how "close this model's arena once its tensors are gone" works.
 *
 * Conventions are carve.h's. In addition: after any failure of a function
 * here, carve_last_error(NULL) on the failing thread explains it (the
 * callbacks whose signatures a framework fixes return NULL or nothing, so
 * that is the only place the reason can go). Every function is thread-safe
 * unless it says otherwise; none synchronizes the device except where it
 * says so (creating or destroying an arena, carve_empty_cache).
 *
 * Include it after nothing in particular: it includes carve.h and
 * <sys/types.h> (for ssize_t, the size type PyTorch's callbacks use).
 */
#ifndef CARVE_FRAMEWORKS_H
#define CARVE_FRAMEWORKS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "carve.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Routing ----------------------------------------------------------------
 *
 * An arena given to carve_route_push, carve_route_alloc, carve_route_device
 * or carve_route_retire is registered: frees find their owner among the
 * registered arenas. An arena stays registered until carve_route_retire
 * destroys it or carve_route_forget drops it; a registered arena must be
 * destroyed only through those two. Each registration is told apart from
 * every other, even one of a later arena at the same address: a routing
 * stack that still names an arena after it was forgotten, or retired and
 * destroyed, gets CARVE_ERR_INVALID, never another arena's memory. An
 * arena handed to these functions must be live, or retired and not yet
 * destroyed; a destroyed one gets CARVE_ERR_INVALID as long as no new arena
 * has its address (carve cannot tell such a stale handle from the new arena).
 *
 * A device's default arena (carve_device_arena) is carve's, not the
 * caller's: it may be pushed, allocated from and made a device's route like
 * any arena, but it is never registered (frees find it among the default
 * arenas), and carve_route_retire and carve_route_forget refuse it; only
 * carve_device_arenas_release destroys it. A routing stack that still names
 * one after that gets CARVE_ERR_INVALID.
 */

/* Depth of the per-thread routing stack. */
#define CARVE_ROUTE_DEPTH 32

/* Send the calling thread's later routed allocations (carve_route_alloc with
 * arena NULL, carve_torch_alloc, carve_cupy_malloc) to arena, until the
 * matching carve_route_pop; registers arena. Returns CARVE_OK;
 * CARVE_ERR_INVALID for NULL, a retired arena, an arena that is not live, or
 * a full stack (CARVE_ROUTE_DEPTH pushes without pops); CARVE_ERR_OOM when
 * host memory for the registry or the thread's stack ran out. A CUDA arena of device d takes only requests for
 * device d; requests for other devices go to their default arenas. Other
 * backends (HOST, VIRTUAL: tests) take requests for every device.
 * Per-thread: other threads are not affected. A device's default arena is
 * pushed without being registered. Does not synchronize. */
CARVE_API carve_status carve_route_push(carve_arena *arena);

/* Undo the calling thread's latest carve_route_push. Returns CARVE_OK, or
 * CARVE_ERR_INVALID when the thread's stack is empty. */
CARVE_API carve_status carve_route_pop(void);

/* The arena on top of the calling thread's stack, NULL when it is empty. It
 * may have been retired or forgotten since it was pushed (allocations routed
 * to it then fail with CARVE_ERR_INVALID). The stack is freed when the thread
 * exits; a thread-exit destructor that runs later may still push, pop and ask
 * (it sees an empty stack). */
CARVE_API carve_arena *carve_route_current(void);

/* Nonzero when arena is registered (pushed or allocated from through this
 * header, and not yet destroyed or forgotten), 0 otherwise, for NULL and for
 * a device's default arena (never registered). A retired arena is
 * registered until its last buffer is freed. For tests and diagnostics: a
 * destroyed arena's address may be reused by a new one. */
CARVE_API int carve_route_known(const carve_arena *arena);

/*
 * Stop routing to arena and destroy it as soon as it holds no live buffer:
 * now if it holds none, else in the carve_route_free (or carve_torch_free,
 * carve_cupy_free) of its last buffer, on whichever thread that runs. Until
 * then its buffers stay valid and may be freed, and further allocations
 * routed to it fail with CARVE_ERR_INVALID. *destroyed (may be NULL) is set
 * to 1 when the arena was destroyed by this call, 0 when that is deferred.
 * An arena not yet registered is registered first. The caller gives its
 * handle up: once the arena may be destroyed, only its buffers may still be
 * passed here. Threads that still have it pushed get CARVE_ERR_INVALID for
 * their routed allocations (pop it from every stack). Returns CARVE_OK;
 * CARVE_ERR_INVALID for NULL, an arena already retired, one that is not
 * live, one on the calling thread's stack, a device's route, or a device's
 * default arena (carve's: see above); CARVE_ERR_OOM
 * when host memory ran out (nothing changed). Waits for routed calls in
 * flight on other threads. Synchronizes when it destroys (as
 * carve_arena_destroy).
 */
CARVE_API carve_status carve_route_retire(carve_arena *arena, int *destroyed);

/* Unregister arena without destroying it, waiting for routed calls in flight
 * on other threads; afterwards the caller may destroy it (its buffers can no
 * longer be freed through this header, and routing stacks that still name it
 * get CARVE_ERR_INVALID). Returns CARVE_OK, or CARVE_ERR_INVALID for NULL, an
 * arena not registered, a retired one (which carve owns), a device's
 * default arena (carve's too), or a device's route. Does not synchronize. */
CARVE_API carve_status carve_route_forget(carve_arena *arena);

/*
 * The route of device: allocations for device from threads whose routing
 * stack is empty (or names a CUDA arena of another device) go to arena
 * instead of device's default arena; arena NULL goes back to the default.
 * For the threads a framework runs itself: PyTorch computes backward on
 * autograd threads of its own, one per device, which push nothing. The
 * change is made only when device's route is expected now (NULL: none), so
 * nested or concurrent users find out: each saves what it replaced and puts
 * it back. arena is registered (a default arena is not); a CUDA arena must
 * serve device, and a default arena must be device's own. While an arena
 * is a device's route it cannot be retired or forgotten. Returns CARVE_OK;
 * CARVE_ERR_INVALID for a device outside 0 .. 63, a route other than
 * expected, a retired arena, an arena that is not live or serves another
 * device; CARVE_ERR_OOM when host memory for the registry ran out.
 * Does not synchronize.
 */
CARVE_API carve_status carve_route_device(int device, carve_arena *expected, carve_arena *arena);

/* device's route (carve_route_device), NULL when none is set or device is out
 * of range. */
CARVE_API carve_arena *carve_route_device_current(int device);

/*
 * Allocate size bytes for stream on device: from arena when it is not NULL
 * (registering it), else from the arena the calling thread routes to (see
 * carve_route_push), else from device's route (carve_route_device), else
 * from device's default arena (created on first use, as carve_device_arena).
 * The allocation is recorded when a recorder is set. size 0 gives CARVE_OK
 * with *out NULL. Returns the statuses of carve_alloc; CARVE_ERR_INVALID
 * also when out is NULL, arena is retired or not live, or the arena the
 * thread routes to was retired or forgotten; CARVE_ERR_NO_DEVICE and the others of
 * carve_device_arena when the default arena is used and cannot be created.
 * Thread-safe. Does not synchronize on the fast path (as carve_alloc).
 */
CARVE_API carve_status carve_route_alloc(carve_arena *arena, size_t size, int device, carve_stream stream,
                                         void **out);

/*
 * Free ptr, a buffer from carve_route_alloc (or the torch and cupy entry
 * points below), wherever it was allocated: carve finds its arena among the
 * registered arenas, then the default arenas that served allocations
 * (device's first). If that arena is retired and ptr was its last buffer,
 * the arena is destroyed. The free is recorded when a recorder is set.
 * free(NULL) is CARVE_OK. Returns CARVE_ERR_BAD_POINTER when no such arena
 * holds ptr as a live buffer (nothing changes), or the statuses of
 * carve_free (a buffer whose free failed stays live and may be freed
 * again). Thread-safe. Does not synchronize, except when it destroys a
 * retired arena.
 */
CARVE_API carve_status carve_route_free(void *ptr, int device);

/* The arena whose live buffer ptr is, searched as carve_route_free does.
 * Returns CARVE_OK with *out the arena; CARVE_ERR_BAD_POINTER (with *out
 * NULL) when none holds it; CARVE_ERR_INVALID for NULL out. The arena may be
 * destroyed by a concurrent free of its last buffer if it is retired: use
 * the answer only while ptr is known to be live. Does not synchronize. */
CARVE_API carve_status carve_route_owner(const void *ptr, int device, carve_arena **out);

/* Declare that work on stream also uses the live buffer ptr (found as
 * carve_route_free finds it): carve_record_stream on its arena. Returns
 * CARVE_OK, CARVE_ERR_BAD_POINTER when no arena holds ptr, or the statuses of
 * carve_record_stream. Does not synchronize. */
CARVE_API carve_status carve_route_record_stream(void *ptr, int device, carve_stream stream);

/* device's default arena when a routed allocation has made it (so that it
 * exists), else NULL: unlike carve_device_arena it never creates the arena,
 * so asking for statistics does not fix the arena's configuration before the
 * program's first allocation. Thread-safe. Does not synchronize. */
CARVE_API carve_arena *carve_route_default_arena(int device);

/* carve_empty_cache on every registered arena (retired ones too: their cached
 * memory goes back before their last buffer does) and on every default arena
 * that served a routed allocation. Returns CARVE_OK or the first failure (the
 * others are still emptied). Synchronizes (as carve_empty_cache). It holds
 * the registry for reading: routed calls of other threads go on meanwhile,
 * except on the arena being emptied while it waits for the device (as with
 * carve_empty_cache); registering, retiring and forgetting arenas and
 * changing a device's route wait until the registered arenas are emptied,
 * and while one of those waits, so do routed calls that need the registry. */
CARVE_API carve_status carve_route_empty_caches(void);

/* ---- Recording --------------------------------------------------------------
 *
 * A recorder hears of every allocation and free made through this header,
 * in an order a replay can follow (a free is reported before the memory can
 * be handed out again, and only when it succeeded, so a free that failed
 * and was retried is reported once). Ids are the buffers' addresses; streams are numbered
 * 0 (the default stream, NULL) and up in order of first appearance, the
 * 1024th and later streams all sharing number 1023; times are nanoseconds
 * (CLOCK_MONOTONIC) since carve_route_set_recorder set this recorder, as a
 * trace's @<ns> counts from the start of its recording. carve_trace_writer_alloc and carve_trace_writer_free
 * (carve_trace.h) have exactly these shapes, with the writer as ctx, so a
 * trace writer records straight into a trace file.
 */
typedef carve_status (*carve_record_alloc_fn)(void *ctx, uint64_t id, uint64_t size, uint32_t stream,
                                              uint64_t t_ns);
typedef carve_status (*carve_record_free_fn)(void *ctx, uint64_t id, uint64_t t_ns);

/* Start sending events to on_alloc / on_free with ctx, replacing any
 * recorder set before and restarting the stream numbering; all three NULL
 * stops recording. When this returns, no call to the previous recorder is in
 * flight, so its ctx may be released. The callbacks run under a lock that
 * serializes them (they must not call this header). Returns CARVE_OK, or
 * CARVE_ERR_INVALID when only one of on_alloc and on_free is NULL. */
CARVE_API carve_status carve_route_set_recorder(carve_record_alloc_fn on_alloc, carve_record_free_fn on_free,
                                                void *ctx);

/* ---- PyTorch ----------------------------------------------------------------
 *
 * torch.cuda.memory.CUDAPluggableAllocator(path_to_libcarve,
 * "carve_torch_alloc", "carve_torch_free"), made current with
 * torch.cuda.memory.change_current_allocator before anything initializes
 * CUDA, with the hooks below set through the allocator's set_reset_fn,
 * set_memory_fraction_fn and set_record_stream_fn (C function addresses).
 * PyTorch does not check the alloc callback's result: a NULL becomes a
 * tensor with a NULL data pointer, and a hook cannot report a failure. Only
 * a C++ exception stops it, which C cannot throw; so the Python package
 * (carve.torch.enable) hands PyTorch a small C++ shim compiled against the
 * installed torch (python/carve/_torch_shim.cpp) that calls
 * carve_route_alloc and these functions and raises
 * torch.cuda.OutOfMemoryError for CARVE_ERR_OOM, a RuntimeError naming the
 * status for any other failure and for a refused memory fraction, with
 * carve_last_error(NULL)'s explanation. The CUDA-graph hooks PyTorch
 * declares with a C++ std::function parameter (set_begin_allocate_to_pool,
 * set_end_allocate_to_pool_fn, set_release_pool) are the shim's too: they
 * route a capture's streams to graph pools (carve.h, "CUDA graphs") of the
 * device's default arena with carve_device_arena and carve_graph_pool_*,
 * and allocate the captured requests there with carve_route_alloc(that
 * arena, ...); docs/python.md says what works. No base-allocation hook is
 * provided, so CUDA IPC of tensors (torch.multiprocessing sharing CUDA
 * tensors) is not supported under carve.
 */

/* PyTorch's alloc callback: carve_route_alloc(NULL, size, device, stream).
 * Returns the buffer, or NULL on failure (carve_last_error(NULL) on this
 * thread says why; see above for what PyTorch makes of NULL), and NULL for
 * size 0 and for a negative size (CARVE_ERR_INVALID). Thread-safe. Does not
 * synchronize on the fast path. */
CARVE_API void *carve_torch_alloc(ssize_t size, int device, carve_stream stream);

/* PyTorch's free callback: carve_route_free(ptr, device). size and stream
 * (those PyTorch recorded at allocation) are not needed: carve knows both.
 * A failure (a pointer carve never handed out) changes nothing and is left
 * in carve_last_error(NULL). Thread-safe. Does not synchronize, except when
 * it destroys a retired arena. */
CARVE_API void carve_torch_free(void *ptr, ssize_t size, int device, carve_stream stream);

/* PyTorch's reset hook, called by torch.cuda.empty_cache():
 * carve_route_empty_caches(). Synchronizes. */
CARVE_API void carve_torch_empty_cache(void);

/* PyTorch's memory-fraction hook, called by
 * torch.cuda.set_per_process_memory_fraction(fraction, device):
 * carve_device_set_limit_fraction(device, fraction). It takes effect only
 * before the device's default arena exists (before its first allocation;
 * carve_route_default_arena and the Python package's statistics do not make
 * it): carve's limits are fixed when an arena is made. Afterwards, and for a
 * fraction outside (0, 1], nothing changes and carve_last_error(NULL) says
 * why (this hook returns nothing; the Python package's shim raises). */
CARVE_API void carve_torch_set_memory_fraction(double fraction, int device);

/* PyTorch's record-stream hook, called by tensor.record_stream(stream):
 * carve_route_record_stream(ptr, -1, stream), searching every default arena
 * that served allocations. A failure is left in carve_last_error(NULL). */
CARVE_API void carve_torch_record_stream(void *ptr, carve_stream stream);

/* ---- CuPy -------------------------------------------------------------------
 *
 * cupy.cuda.CFunctionAllocator(param, carve_cupy_malloc address,
 * carve_cupy_free address, owner): CuPy's C allocator interface, with no
 * Python per call. Its callbacks carry no stream, so param is the stream to
 * allocate on (0 = the default stream), fixed when the allocator is made.
 * The Python package's default for CuPy is a Python callable that reads
 * CuPy's current stream on every call instead (carve.cupy.enable).
 */

/* carve_route_alloc(NULL, size, device_id, param as a stream). NULL on
 * failure (carve_last_error(NULL) says why) and for size 0. */
CARVE_API void *carve_cupy_malloc(void *param, size_t size, int device_id);

/* carve_route_free(ptr, device_id); a failure is left in carve_last_error(NULL). */
CARVE_API void carve_cupy_free(void *param, void *ptr, int device_id);

/* How many frees carve_torch_free and carve_cupy_free could not make since
 * the process started (each left its reason in carve_last_error(NULL) on
 * its thread): memory the framework believes given back that carve still
 * counts live. 0 in a healthy program. Thread-safe; never synchronizes. */
CARVE_API unsigned long long carve_frameworks_failed_frees(void);

#ifdef __cplusplus
}
#endif

#endif /* CARVE_FRAMEWORKS_H */
