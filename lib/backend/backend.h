/*
 * backend.h — the narrow layer under the engine: where segments and events
 * come from.
 *
 * A backend reserves and releases segments (address ranges with memory
 * behind them), and records and queries events on streams so the engine can
 * tell when work queued before a free has completed. commit/decommit are
 * optional: a backend that reserves address space apart from physical memory
 * (a virtual-memory backend mapping granules with cuMemMap, say) provides
 * them, and the engine then maps and unmaps granules inside a segment
 * instead of releasing whole segments; backends without them leave them NULL.
 *
 * This room's files, bottom up: ledger.c (the driver ledger and its cost
 * table, driver_costs.h); this interface (and backend.c, the message
 * buffer); sim.c (simulated events, shared by host and virtual) and
 * cuda_common.c (device guard, error mapping, events, shared by the two CUDA
 * backends); the leaves host.c, virtual.c, cuda.c, cuda_vmm.c (or nocuda.c),
 * each depending only on what is below it; and open.c on top, the
 * dispatcher that picks a leaf. Backends report failures as statuses and
 * write a message with carve_backend_fail; they never print.
 */
#ifndef CARVE_BACKEND_BACKEND_H
#define CARVE_BACKEND_BACKEND_H

#include <stdio.h>

#include "backend/ledger.h"
#include "base/util.h"
#include "carve.h"

struct carve_be;

/* One mapping: [addr, addr+size), one physical allocation behind it. */
typedef struct carve_be_piece {
    uintptr_t addr;
    size_t size;
} carve_be_piece;

typedef struct carve_backend_ops {
    /* Reserve size bytes (a multiple of CARVE_SEGMENT_GRANULE); *base gets an
     * address aligned to the granule where the backend can (the engine
     * trims otherwise). CARVE_ERR_OOM when the memory is not there. */
    carve_status (*reserve)(struct carve_be *be, size_t size, uintptr_t *base);
    carve_status (*release)(struct carve_be *be, uintptr_t base, size_t size);
    /* Optional: map memory into / unmap it from whole granules of a
     * reserved segment. The engine says where each mapping starts and ends
     * (the driver unmaps whole mappings only, and a mapping costs the same
     * whatever its size): commit maps [addr, addr+size), none of it mapped,
     * as size / piece mappings of piece bytes each (piece a multiple of
     * CARVE_SEGMENT_GRANULE, as is size), and one more of the rest where
     * piece does not divide size, all of them or, failing, none; decommit
     * unmaps [addr, addr+size), whole mappings of piece bytes (piece divides
     * size) as commit made them, in address order, and at a refusal stops:
     * *done gets the bytes unmapped before it (all of size on success), and
     * the rest stays mapped. The backend keeps no record per mapping it does not
     * need: what is mapped where is the engine's to know. */
    carve_status (*commit)(struct carve_be *be, uintptr_t addr, size_t size, size_t piece);
    carve_status (*decommit)(struct carve_be *be, uintptr_t addr, size_t size, size_t piece, size_t *done);
    /* Optional, with commit: recycle(be, 1) opens a window in which the
     * backend may keep the physical memory of what decommit unbacks, to
     * back the next commits with it instead of creating new memory;
     * recycle(be, 0) closes it and gives back what was not reused. Memory
     * is kept only inside the window, so between windows every byte the
     * backend holds is mapped where the engine counts it. */
    void (*recycle)(struct carve_be *be, int on);
    /* Record an event on stream: *ev is an opaque handle. */
    carve_status (*event_record)(struct carve_be *be, carve_stream stream, void **ev);
    /* 1 when the work before the event has completed, 0 when not yet or
     * when the question cannot be asked now (a stream capture refuses it,
     * or asking would break one), negative on any other error (treated as
     * completed after the error is noted). */
    int (*event_query)(struct carve_be *be, void *ev);
    /* Waits for the work before the event. Fails (CARVE_ERR_BACKEND) when
     * the wait cannot be made now (a capture refuses it, or waiting would
     * break one): the engine then keeps whatever waited on the event. */
    carve_status (*event_sync)(struct carve_be *be, void *ev);
    /* Optional: *ev gets an event of this backend that completes once the
     * work before the program's event `user` (as last recorded when this is
     * called) has completed, so that the program may record `user` again or
     * destroy it at once (carve_free_after_event). NULL: not supported. */
    carve_status (*event_follow)(struct carve_be *be, void *user, void **ev);
    /* Optional: 1 when stream is being captured into a CUDA graph, 0 when
     * not. No event is then recorded on it or asked about, nothing waits
     * for the device, and nothing is mapped or reserved for it (graph.c). */
    int (*capturing)(struct carve_be *be, carve_stream stream);
    /* Optional: 1 when the backend sees a stream capture underway in its
     * context, on any thread, that a wait for the whole device or work on
     * the legacy stream would break (a blocking stream captured, as
     * cuStreamIsCapturing on the legacy stream tells; under carve-run, any
     * capture), 0 when not. The engine then neither synchronizes the device
     * nor gives memory back to the driver, and records nothing on the
     * legacy stream (types.h, reclaim.c).
     * Every backend makes its driver calls that the driver calls
     * "potentially unsafe" during a capture (allocating, freeing, mapping
     * and unmapping memory, asking about and waiting for events) with the
     * calling thread's capture mode exchanged for relaxed and restored
     * after, so that a capture in global mode on another thread neither
     * refuses them nor is broken by them. */
    int (*context_capturing)(struct carve_be *be);
    /* Wait for all work queued on the device (every stream) to complete. */
    carve_status (*device_sync)(struct carve_be *be);
    void (*event_release)(struct carve_be *be, void *ev);
    /* Free the backend's own state (not the segments: the engine releases those). */
    void (*destroy)(struct carve_be *be);
    /* Optional: describe [addr, addr+size), one live buffer, for another
     * process (carve_ipc_export): fill *desc and, for CARVE_IPC_FDS, *fds
     * (malloc'd: desc->num_fds new descriptors). NULL when the backend's
     * memory cannot be shared; be->ipc then says 0. */
    carve_status (*export_buffer)(struct carve_be *be, uintptr_t addr, size_t size, carve_ipc_desc *desc, int **fds);
    /* Optional, for memory the engine maps (commit): *fds gets (malloc'd) one
     * new descriptor for each of the n mappings, the physical allocation
     * behind it whole (the engine knows where its mappings begin and end;
     * the description around them is the caller's). NULL when the backend's
     * memory cannot be shared; be->ipc then says 0. */
    carve_status (*export_pieces)(struct carve_be *be, const carve_be_piece *pieces, size_t n, int **fds);
    /* Optional: what the arena changes outside itself, in the whole process
     * (enabling peer access, for the cudaMalloc backend). Opening the
     * backend only checks that it can be done; carve_arena_create calls
     * grant once, after everything else has been judged and reserved, so
     * that a creation that fails leaves the process as it was. A grant that
     * fails takes back what it did. */
    carve_status (*grant)(struct carve_be *be);
    /* Optional: the CUDA context the backend's memory was taken in is gone,
     * and the driver freed only what belongs to it; what does not
     * (virtual-memory mappings and address ranges, which belong to no
     * context) goes back in two stages, without touching an event of that
     * context. Stage 0: every later call that takes memory (reserve,
     * commit) fails, while decommit and release still act, so that the
     * engine can unmap what its records say is mapped. Stage 1: every range
     * still reserved is freed, and from then on decommit and release do
     * nothing (the addresses may be another's). Only the driver backend's
     * virtual-memory mode has it (carve-run's interposer calls it through
     * carve_arena_abandon); thread-safe. */
    void (*abandon)(struct carve_be *be, int stage);
} carve_backend_ops;

/* Fault injection (faults.c): when on, the backend's counted calls --
 * allocations (reserve, commit), event records and releases (release, and
 * each mapping a decommit unmaps, as the driver is called once a mapping) --
 * are numbered from 1, and call number `at` (then the `times`-1
 * after it) and every `every`-th call fail instead of reaching the backend.
 * A failed allocation returns `status`; a failed event or release returns
 * CARVE_ERR_BACKEND. */
enum { CARVE_FAULT_ALLOC = 1, CARVE_FAULT_EVENT = 2, CARVE_FAULT_RELEASE = 4, CARVE_FAULT_ALL = 7 };
typedef struct carve_faults {
    const struct carve_backend_ops *leaf; /* the real backend's ops; NULL when off */
    unsigned long calls;     /* counted calls so far (atomic) */
    unsigned long failed;    /* calls made to fail so far (atomic) */
    unsigned long at;        /* 0: no single failure */
    unsigned long times;     /* failures starting at `at` (at least 1) */
    unsigned long every;     /* 0: no periodic failure */
    unsigned kinds;          /* CARVE_FAULT_* that count */
    carve_status status;     /* of a failed allocation: CARVE_ERR_OOM or CARVE_ERR_BACKEND */
} carve_faults;

typedef struct carve_be {
    const carve_backend_ops *ops;
    void *ctx;
    carve_backend kind;
    int device;
    size_t total_bytes;      /* device memory (CUDA), 0 when not meaningful */
    unsigned sim_event_polls;
    uint64_t sim_epoch;      /* simulated events: device syncs so far */
    /* Tests: streams the program has destroyed; an event recorded on one is
     * a bug in carve (the real driver could crash), counted here. */
    carve_stream sim_dead[8];
    unsigned sim_ndead;
    unsigned long sim_dead_records;
    /* Tests: streams marked as being captured (carve_sim_set_capturing). */
    carve_stream sim_capturing[16];
    unsigned sim_ncapturing;
    /* Tests: device synchronizations and releases made while a stream was
     * marked as captured (each would break a real capture), counted. */
    unsigned long sim_broken_captures;
    carve_faults faults;     /* injected failures (faults.c); off unless configured */
    int ipc;                 /* 1 when export_buffer can describe this backend's memory
                                (atomic: the CUDA virtual-memory backend may drop it to 0) */
    int maps;                /* set by the engine before the first reserve: 1 when it maps
                                memory into what it reserves (virtual-memory mode), so a
                                reservation is address space only */
    carve_ledger ledger;     /* the driver calls made for this arena (ledger.h) */
} carve_be;

/* Backends write the detail of a failure into a per-thread buffer, so that
 * concurrent failures on different threads keep their own messages. */
#define CARVE_BACKEND_MSG_LEN 256
char *carve_backend_msg(void) CARVE_INTERNAL;
#define carve_backend_fail(...) (carve_backend_host_set(0), snprintf(carve_backend_msg(), CARVE_BACKEND_MSG_LEN, __VA_ARGS__))
/* The same for a failure for want of host memory (the backend's own
 * records), which carve_last_error_info reports as host_memory. */
#define carve_backend_fail_host(...) \
    (carve_backend_host_set(1), snprintf(carve_backend_msg(), CARVE_BACKEND_MSG_LEN, __VA_ARGS__))
/* Whether the calling thread's latest backend message is about host memory. */
void carve_backend_host_set(int host) CARVE_INTERNAL;
int carve_backend_host(void) CARVE_INTERNAL;

/* Beside the message, the CUDA error code of the calling thread's latest
 * driver failure: api is CARVE_DRIVER_ERROR_RUNTIME (a cudaError_t) or
 * CARVE_DRIVER_ERROR_DRIVER (a CUresult), 0 for a failure that is not the
 * driver's (an injected one, say). The engine takes it, once, when it
 * reports a failure (carve_last_error_info). */
void carve_backend_code(int api, int code) CARVE_INTERNAL;
/* The noted code into *code and its api (0: none, *code 0); clears it. */
int carve_backend_code_take(int *code) CARVE_INTERNAL;

#endif
