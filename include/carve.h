/*
 * carve.h — a caching, stream-ordered GPU memory allocator.
 *
 * This header is the manual. carve hands out device memory from arenas. An
 * arena reserves large blocks from a backend (cudaMalloc for CUDA, real host
 * memory for HOST, bare addresses for VIRTUAL), carves them into buffers for
 * carve_alloc, and keeps freed buffers cached for reuse so that the hot path
 * never calls the driver. carve_empty_cache gives cached memory back to the
 * driver; carve_arena_destroy gives back all of it.
 *
 * Conventions used throughout:
 *  - Every function that can fail returns a carve_status. Output parameters
 *    are set on every call: to the result on success, to NULL / 0 on failure
 *    (unless the function says otherwise: carve_config_parse leaves the
 *    configuration unchanged, carve_conf_parse writes the defaults).
 *  - After a failure, carve_last_error() gives a one-paragraph explanation
 *    for the calling thread (requested, allocated, reserved, limit, largest
 *    free block for an out-of-memory failure). The library never prints,
 *    never aborts on user error and never exits.
 *  - "Thread-safe" means any number of threads may call the function on the
 *    same arena at once. "Synchronizes" says whether the call may block the
 *    host until device work completes.
 *  - Sizes are in bytes. Every buffer is aligned to CARVE_ALIGNMENT bytes.
 *
 * Stream ordering: a buffer belongs to the stream it was allocated on. Work
 * on that stream may use it until carve_free; after carve_free, work queued
 * before the free may still run, so the memory is handed again at once only
 * to later allocations on the same stream, and to other streams only after
 * that work has completed (tracked with events recorded on the stream while
 * it is in use, or a device synchronization). A buffer also used on a second
 * stream must be declared with carve_record_stream before it is freed. A
 * stream may be destroyed once its buffers are freed, and the buffers it
 * was named for with carve_record_stream (their free records an event on
 * it); carve never records work on it afterwards.
 *
 * carve knows a stream by its handle. A handle the driver gives out again
 * after cudaStreamDestroy is, to carve, the old stream: the new stream
 * takes the memory the old one freed at once, with no wait, although its
 * work is not ordered after the old one's. So the work of a destroyed
 * stream must be done before a stream with the same handle allocates:
 * synchronize the stream before destroying it, or the device (e.g.
 * carve_empty_cache) before a handle can come back.
 *
 * The header needs no CUDA headers: carve_stream is the same type as
 * cudaStream_t and CUstream. It needs C99 or later, or C++ (it has static
 * inline functions; C89 compilers are not supported).
 */
#ifndef CARVE_H
#define CARVE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(CARVE_BUILDING_SHARED)
#define CARVE_API __declspec(dllexport)
#elif defined(__GNUC__) && defined(CARVE_BUILDING)
#define CARVE_API __attribute__((visibility("default")))
#else
#define CARVE_API
#endif

/* The version of this header. The major number is the ABI number, the
 * soname's (libcarve.so.1): docs/api.md, "ABI". */
#define CARVE_VERSION_MAJOR 1
#define CARVE_VERSION_MINOR 0
#define CARVE_VERSION_PATCH 0

/* Alignment of every buffer, and the granularity sizes are rounded up to. */
#define CARVE_ALIGNMENT 256u

/* Version string of the linked library, e.g. "1.0.0". Thread-safe. */
CARVE_API const char *carve_version(void);

/* A stream handle: the same type as cudaStream_t. NULL is the default stream. */
typedef struct CUstream_st *carve_stream;

/* cudaStreamPerThread / CU_STREAM_PER_THREAD: the calling thread's per-thread
 * default stream. carve resolves it on the calling thread: buffers allocated
 * on it by one thread belong to that thread's stream, apart from every other
 * thread's (carve_alloc). */
#define CARVE_STREAM_PER_THREAD ((carve_stream)(uintptr_t)0x2)

/* An event handle: the same type as cudaEvent_t and CUevent. */
typedef struct CUevent_st *carve_event;

typedef enum carve_status {
    CARVE_OK = 0,
    CARVE_ERR_INVALID,      /* bad argument or configuration */
    CARVE_ERR_OOM,          /* the request does not fit under the limit or in the device, or host
                               memory ran out (carve_last_error_info's host_memory says which) */
    CARVE_ERR_BAD_POINTER,  /* pointer not from this arena, interior, or already freed */
    CARVE_ERR_BACKEND,      /* the backend (driver) failed; carve_last_error names the error,
                               carve_last_error_info gives its code */
    CARVE_ERR_NO_DEVICE     /* no CUDA driver, no device, or no such device index */
} carve_status;

/* Short name of a status, e.g. "CARVE_ERR_OOM"; "unknown status" for other
 * values. Thread-safe; the string is static. */
CARVE_API const char *carve_status_str(carve_status status);

typedef enum carve_backend {
    CARVE_BACKEND_CUDA = 0, /* device memory from cudaMalloc on config.device */
    CARVE_BACKEND_HOST,     /* real host memory: buffers can be written by the CPU (tests) */
    CARVE_BACKEND_VIRTUAL,  /* unique aligned addresses with no memory behind them:
                               simulate any size on any machine; never dereference */
    CARVE_BACKEND_CUDA_DRIVER /* device memory through the CUDA driver API (libcuda.so.1,
                               loaded at run time; no cudart needed), in the CUDA context
                               current on the creating thread if it is on config.device,
                               else in the device's primary context: segments from
                               cuMemAlloc, or in virtual-memory mode (vmm below; granted
                               to the owning device only, no export) granules from
                               cuMemCreate mapped with cuMemMap. What carve-run's
                               interposer uses. */
} carve_backend;

/* Name of a backend: "cuda", "host", "virtual", "cuda_driver". */
CARVE_API const char *carve_backend_str(carve_backend backend);

/* A byte count as people read it, in powers of 1024 with two decimals
 * ("1.50 GiB", "512 B"; "unlimited" for SIZE_MAX), written into buf (len
 * bytes, truncated if short); returns buf. Thread-safe. */
CARVE_API char *carve_format_bytes(char *buf, size_t len, size_t bytes);

/*
 * Arena configuration. Fill with carve_config_init, then change fields.
 *
 * Memory is reserved from the backend in segments (in virtual-memory mode,
 * the default where the device supports it, see vmm below: address space,
 * with memory mapped into it granule by granule). With growth on, segments
 * are reserved on demand, never past limit_bytes. With growth off, the arena
 * holds one segment of initial_bytes (reserved at create, and again on demand
 * if carve_empty_cache gave it back; in virtual-memory mode, it maps at most
 * initial_bytes, on use). Segment sizes are multiples of
 * CARVE_SEGMENT_GRANULE.
 */
#define CARVE_SEGMENT_GRANULE ((size_t)2 << 20) /* 2 MiB */
#define CARVE_VMM_AUTO (-1) /* carve_config.vmm: virtual-memory mode where it is supported */

#define CARVE_PEERS_AUTO (-1) /* carve_config.peers: see there */
#define CARVE_PEERS_NONE 0
#define CARVE_PEERS_ALL 1
#define CARVE_PEERS_LIST 2
#define CARVE_IPC_AUTO (-1) /* carve_config.ipc: see there */

typedef struct carve_config {
    size_t size;             /* sizeof(carve_config) in the carve.h the program was built
                                with: set by carve_config_init, checked by every function
                                that takes a carve_config (see "Compatibility" below) */
    carve_backend backend;   /* default CARVE_BACKEND_CUDA */
    int device;              /* CUDA device ordinal; ignored by HOST and VIRTUAL (any value
                                goes there); default 0 */
    size_t initial_bytes;    /* segments mode: one segment reserved at create, rounded up
                                to the granule but never past the rounded limit.
                                Virtual-memory mode (vmm=1): nothing is mapped at create;
                                a stream keeps up to this much mapped before its free
                                memory is unmapped to make room (carve_empty_cache still
                                unmaps every free granule), and with growth off it is the
                                most the arena maps. Default 0 */
    size_t limit_bytes;      /* hard cap on reserved bytes, rounded down to the granule;
                                0 = the device's total memory for CUDA, unlimited otherwise.
                                Initial and limit are compared as given, before rounding:
                                equal sizes (or equal fractions) give one block of the
                                rounded limit. The cap counts blocks as the backend gave
                                them: where the driver returns a block not aligned to the
                                granule (cuMemAlloc promises 256 bytes), carve asks for one
                                granule more if that fits under the limit, else uses the
                                block's aligned part, a granule less (so a request of the
                                whole limit then fails). */
    int growth;              /* nonzero: reserve more segments on demand; default 1 */
    double initial_fraction; /* if > 0 (at most 1), initial_bytes = this fraction of the
                                device's total memory (CUDA only); default 0 */
    double limit_fraction;   /* if > 0 (at most 1), limit_bytes = this fraction of the
                                device's total memory (CUDA only); default 0 */
    size_t min_grow_bytes;   /* growth mode: smallest segment reserved at once, rounded
                                up to the granule; more than the rounded limit is the
                                rounded limit; 0 (default) = automatic: an eighth of
                                what is reserved, between 2 MiB and 64 MiB */
    int vmm;                 /* CARVE_VMM_AUTO (default), 1 or 0. 1: virtual-memory
                                mode. Address space is reserved (twice the limit, or
                                64 GiB when unlimited, and more whenever no free
                                range holds a request) and physical memory
                                is mapped into it in 2 MiB granules as buffers need
                                it; free granules are unmapped, longest unused first,
                                before a stream's mapped bytes pass the peak of the
                                granules its live buffers touched plus a slack (2%;
                                up to 25% for a stream that would otherwise remap more
                                than one granule per 256 allocations, since a remap
                                costs tens of microseconds of driver calls), so the
                                footprint follows the live data rather than
                                fragmentation.
                                reserved_bytes counts mapped bytes. Buffers are placed
                                lowest address first and where memory is already
                                mapped, so a program that repeats its steps stops
                                mapping after the first ones. Host bookkeeping
                                follows the buffers and the runs of free granules,
                                not the granules of address space or of mapped
                                memory (a buffer of 2^52 bytes costs a few records
                                and at most four 32 KiB nodes of the address map). CUDA
                                and CUDA_DRIVER (cuMemCreate/cuMemMap; devices that
                                support virtual memory management) and VIRTUAL backends.
                                0: segments mode: segments from cudaMalloc (or the
                                backend's reserve), cached whole and given back whole.
                                CARVE_VMM_AUTO: virtual-memory mode when growth is on,
                                nothing is to be reserved at creation (initial 0) and
                                the backend and device support it, else segments;
                                carve_arena_get_config reports which. */
    unsigned sim_event_polls;/* HOST and VIRTUAL: a simulated event reports "not done"
                                to this many queries before it completes, so that
                                stream-ordered reuse can be tested; default 0 */
    /* Fault injection, for testing what a program does when the driver fails.
     * The backend calls that can fail for real -- a reserve or a map, an event
     * record, a release or an unmap -- are numbered from 1 over the arena's
     * life; the chosen ones fail as a driver's would, before reaching the
     * driver, on every backend (CUDA included). Nothing already handed out is
     * affected: a failed reserve is an allocation that could not grow, a failed
     * event record delays reuse, a failed release keeps the segment. */
    unsigned long fail_backend_at;    /* call number N fails (once); 0 (default) = none */
    unsigned long fail_backend_every; /* every Nth call fails; 0 (default) = none */
    carve_status fail_backend_status; /* what a failed reserve or map returns: CARVE_ERR_OOM
                                         (default, as when memory runs out) or CARVE_ERR_BACKEND;
                                         0 (CARVE_OK) stands for CARVE_ERR_OOM, so that a
                                         structure zeroed before its fields are set works;
                                         failed events and releases give CARVE_ERR_BACKEND */
    const char *name;        /* label used in messages and snapshots (copied, up to 63
                                bytes, cut between UTF-8 characters); may be NULL */
    int peers;               /* which other devices may read and write the arena's memory:
                                CARVE_PEERS_AUTO (default): in virtual-memory mode every
                                device that can access config.device's memory
                                (cudaDeviceCanAccessPeer), so memory behaves as cudaMalloc
                                memory does in a program that enabled peer access; in
                                segments mode carve does nothing: cudaMalloc memory is
                                reachable from the devices the program enabled with
                                cudaDeviceEnablePeerAccess. CARVE_PEERS_NONE: in
                                virtual-memory mode the owning device only; in segments
                                mode nothing (carve cannot withdraw what the program
                                enabled). CARVE_PEERS_ALL: every device that can access it,
                                in both modes (segments mode: carve enables peer access
                                from each at creation). CARVE_PEERS_LIST: the devices in
                                peer_devices, in both modes; creation fails if one cannot
                                access config.device. Virtual-memory mode grants them on
                                every mapping (one cuMemSetAccess per run of granules with
                                one descriptor per device); each peer makes mapping and
                                unmapping a granule about half again as dear (measured in
                                docs/cuda.md), so a program that drives one GPU per
                                process may choose CARVE_PEERS_NONE. CARVE_PEERS_ALL and
                                CARVE_PEERS_LIST need the CUDA backend. */
    uint64_t peer_devices;   /* CARVE_PEERS_LIST: bit d grants device d (d < 64); the owning
                                device's own bit is allowed and changes nothing; default 0 */
    int ipc;                 /* whether buffers can be exported to other processes
                                (carve_ipc_export): CARVE_IPC_AUTO (default, -1): in
                                virtual-memory mode, granules are created with POSIX
                                file-descriptor handles where the device supports them; 1:
                                required (virtual-memory mode is used only where the device
                                supports them, so CARVE_VMM_AUTO picks segments elsewhere,
                                and vmm=1 fails there; the CUDA backend only: other
                                backends cannot export, and refuse it); 0: never (export
                                refused in virtual-memory mode). Segments mode exports
                                cudaMalloc segments with cudaIpcGetMemHandle whatever
                                this says. */
    /* New fields go here, after the last one, each one starting at or past the
     * previous sizeof(carve_config); carve_config_init gives each its default. */
} carve_config;

/*
 * Compatibility. A program built against an older carve.h passes a smaller
 * carve_config; carve reads the fields it has (config->size says how many
 * bytes), and gives the fields it lacks their defaults. A program built
 * against a newer carve.h than the library passes a larger one, which is
 * accepted when the fields this library does not know are all zero, and
 * refused with CARVE_ERR_INVALID otherwise. A size below
 * CARVE_CONFIG_SIZE_MIN or above CARVE_CONFIG_SIZE_MAX is no carve_config
 * (one filled by hand, or not at all) and is refused before anything past
 * it is read. carve_config_init,
 * carve_arena_get_config and carve_conf_parse are inline functions that pass
 * sizeof(carve_config) to the library (the _sized functions below, which
 * bindings through a foreign-function interface call with the size of their
 * own mirror of the structure).
 */

/* The smallest carve_config carve accepts: the first layout with a size
 * field ends with ipc. */
#define CARVE_CONFIG_SIZE_MIN (offsetof(carve_config, ipc) + sizeof(int))
/* The largest config->size carve accepts: far beyond any carve_config to
 * come, so that a size that is garbage (a structure filled by hand) is
 * refused rather than scanned. */
#define CARVE_CONFIG_SIZE_MAX ((size_t)4096)

/* Fill the first size bytes of *config (a carve_config as the caller's
 * header has it; size between CARVE_CONFIG_SIZE_MIN and
 * CARVE_CONFIG_SIZE_MAX) with the defaults above, and set config->size =
 * size; bytes past the library's own carve_config are zeroed. Nothing is
 * written for a NULL config or a size outside those bounds. Thread-safe. */
CARVE_API void carve_config_init_sized(carve_config *config, size_t size);

/* Fill *config with the defaults above (config->size = sizeof(carve_config)).
 * Thread-safe. */
static inline void carve_config_init(carve_config *config) { carve_config_init_sized(config, sizeof(carve_config)); }

/*
 * Apply a textual configuration to *config: comma-separated key=value pairs,
 * e.g. "growth=1,limit=4GiB,initial=1GiB". Keys:
 *   backend=cuda|host|virtual|cuda_driver      device=N        growth=0|1
 *   initial=SIZE|FRACTION       limit=SIZE|FRACTION
 *   min_grow=SIZE               sim_event_polls=N      vmm=auto|0|1
 *   fail_backend_at=N           fail_backend_every=N   fail_backend_status=oom|backend
 *   peers=auto|none|all|LIST    ipc=auto|0|1
 * LIST is device ordinals separated by ':', e.g. peers=1:3 (CARVE_PEERS_LIST).
 * SIZE is a decimal number with an optional suffix B, K/KiB, M/MiB, G/GiB,
 * T/TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000), case-insensitive,
 * with an optional space before it: "4GiB", "1.5 GB", "123". It must come to
 * whole bytes, whatever the suffix ("1.5KiB" is 1536; "1.5B", "1.0001K" and
 * "0.0001K" are refused rather than cut). Decimal only: no sign, no hexadecimal
 * (0x100), no exponent (1e9). A FRACTION is a decimal number with a point and
 * no suffix in (0, 1], with digits on both sides of the point, judged on
 * its digits (1.0 and 0.25 are fractions; .25 and 1.0000000000000000001 are
 * not), e.g. limit=0.5: that share of the device's total memory. Each key
 * may be given once. Keys not given keep their value in *config. Returns
 * CARVE_OK, or CARVE_ERR_INVALID (with *config unchanged) for NULL
 * arguments, a config->size outside CARVE_CONFIG_SIZE_MIN ..
 * CARVE_CONFIG_SIZE_MAX, an unknown key, a key given twice, a key whose
 * field the caller's carve_config does not have (built against an older
 * carve.h), or a bad value; carve_last_error(NULL) then names the offending
 * key and value. Thread-safe.
 */
CARVE_API carve_status carve_config_parse(carve_config *config, const char *text);

/*
 * Check config against the rules of carve_arena_create that need no device,
 * so that a front end can refuse, before anything runs, a configuration that
 * would give an arena that holds nothing: growth off needs an initial block;
 * a limit given in bytes must be at least one granule and at least an
 * initial block given in bytes (given both as fractions, the initial one
 * must not be the larger); fractions lie in [0, 1]. Rules that need the
 * device (a fraction of its memory below one granule) are left to
 * carve_arena_create. Returns CARVE_OK, or CARVE_ERR_INVALID (for NULL too,
 * and for a config->size the size rule above refuses)
 * with carve_last_error(NULL) naming the keys, their values and the rule.
 * Thread-safe.
 */
CARVE_API carve_status carve_config_check(const carve_config *config);

typedef struct carve_arena carve_arena;

/*
 * Create an arena and reserve its initial segment (segments mode, if
 * initial_bytes > 0) or its address space (virtual-memory mode, which maps
 * nothing until buffers need it).
 * Returns CARVE_OK; CARVE_ERR_INVALID for NULL arguments, a config->size
 * below CARVE_CONFIG_SIZE_MIN (not filled by carve_config_init), above
 * CARVE_CONFIG_SIZE_MAX, or above this library's carve_config with a field
 * it does not know set, an unknown backend, growth off with initial 0, a
 * limit below one granule or below initial, fractions outside (0, 1] or on
 * a backend other than the CUDA ones, vmm=1 on the host backend, bad vmm, peers, peer_devices or ipc values, peers=all or a list
 * on a backend other than CUDA, a device in peer_devices that does not
 * exist or cannot access config.device, ipc=1 on a backend other than
 * CUDA or with vmm=1 on a device without POSIX file-descriptor handles, a
 * fail_backend_status other than CARVE_ERR_OOM, CARVE_ERR_BACKEND and 0, or
 * a negative device on the CUDA backends; CARVE_ERR_OOM if the initial
 * segment cannot be reserved, or, in virtual-memory mode, the address space
 * (see vmm: twice the limit, which the backend may refuse for a limit of
 * petabytes) or the host memory for its first records (a few KiB, whatever
 * the size); CARVE_ERR_NO_DEVICE if a CUDA backend finds no driver or no such
 * device; CARVE_ERR_BACKEND for other driver failures (enabling peer access
 * included). Every refusal comes before anything changes outside the arena:
 * peer access (peers=all or a list in segments mode) is enabled last, and
 * taken back if that fails partway. *out is NULL on failure. Thread-safe.
 * Does not synchronize.
 */
CARVE_API carve_status carve_arena_create(const carve_config *config, carve_arena **out);

/*
 * Destroy an arena: every segment goes back to the backend, live buffers
 * included (they become invalid). NULL is a no-op. Must not race with other
 * calls on the same arena. Never for a device's default arena
 * (carve_device_arena; carve_device_arenas_release destroys those), nor for
 * an arena registered with the routing layer of carve_frameworks.h until
 * carve_route_forget dropped it. Synchronizes: when the arena holds any
 * memory, it first waits for all work queued on the device (every stream),
 * so that work queued before a free never runs on memory already given
 * back; a failed synchronization cannot be reported, and the memory goes
 * back regardless. While a stream capture is underway ("Captures on other
 * threads", under CUDA graphs), it first waits for the capture to end:
 * never call it on the capturing thread during its capture.
 */
CARVE_API void carve_arena_destroy(carve_arena *arena);

/* The arena's effective configuration (limit, initial and min_grow resolved
 * to bytes as the arena uses them, vmm and ipc resolved to 0 or 1,
 * fail_backend_status 0 to CARVE_ERR_OOM, name as given), written into the
 * first size bytes of *out (size between CARVE_CONFIG_SIZE_MIN and
 * CARVE_CONFIG_SIZE_MAX; out->size = size). ipc says whether buffers can be
 * exported now: with ipc automatic it turns 0 if the driver later refuses
 * file-descriptor handles for new granules. Returns CARVE_ERR_INVALID for
 * NULL arguments or a size outside those bounds; then the first size bytes
 * of *out are zeroed (out->size = size) when out is not NULL and size is
 * within them, and nothing is written otherwise. Thread-safe. */
CARVE_API carve_status carve_arena_get_config_sized(const carve_arena *arena, carve_config *out, size_t size);
/* carve_arena_get_config_sized with the program's sizeof(carve_config). */
static inline carve_status carve_arena_get_config(const carve_arena *arena, carve_config *out) {
    return carve_arena_get_config_sized(arena, out, sizeof(carve_config));
}

/*
 * Allocate size bytes for use on stream (NULL = default stream). The buffer
 * is aligned to CARVE_ALIGNMENT. size 0 gives CARVE_OK with *out = NULL.
 * Returns CARVE_OK; CARVE_ERR_INVALID for NULL arena or out; CARVE_ERR_OOM
 * at once for a request larger than the arena's limit (SIZE_MAX included),
 * and for any other only when it cannot be met even after releasing cached
 * memory and retrying:
 * in virtual-memory mode only when the 2 MiB granules live buffers touch
 * plus those the request needs would pass the limit, in segments mode only
 * when no free range of whole granules, nor a free block of the stream's
 * own, holds it and no segment can be added under the limit (or when the
 * driver refuses memory; other threads allocating meanwhile may take room);
 * CARVE_ERR_BACKEND for driver failures; CARVE_ERR_NO_DEVICE once the
 * arena was abandoned (carve_arena_abandon). *out is NULL on every failure.
 * CARVE_STREAM_PER_THREAD (cudaStreamPerThread) means the calling thread's
 * per-thread default stream, as it does to CUDA: each thread's buffers
 * belong to its own stream and are reused stream-ordered on it
 * (carve_buffer_info reports CARVE_STREAM_PER_THREAD). Free them from any
 * thread; only a thread's own calls record events on its per-thread
 * stream, so memory freed from another thread moves to other streams only
 * after a device synchronization. NULL is the legacy default stream, also
 * in a program built with per-thread default streams (nvcc
 * --default-stream per-thread changes what 0 means in the program's own
 * calls, not in carve's): such a program passes CARVE_STREAM_PER_THREAD.
 * Thread-safe; threads on different streams do not contend. Does not
 * synchronize on the fast path; when the request would otherwise fail (the
 * limit or the device is full), it synchronizes the device, so that memory
 * every stream has cached can be reused, and retries: twice at most, the
 * second time with the free room inside every stream's spans given back. In
 * virtual-memory mode, a request that maps granules past its allowance
 * (its stream's peak; with several streams, one budget for the arena) first
 * unmaps free ones that events show the device is done with; with one
 * stream it waits for such an event on its own stream only when none shows
 * enough, with several it synchronizes the device and unmaps free granules
 * of the other streams and its own instead (carve_stats.num_syncs counts
 * every wait).
 */
CARVE_API carve_status carve_alloc(carve_arena *arena, size_t size, carve_stream stream,
                                   void **out);

/* Flags of carve_alloc_flags. */
#define CARVE_ALLOC_HELD 1u    /* from the memory the arena holds only: where the request
                                  needs a new segment or (virtual-memory mode) granules
                                  mapped, fail with CARVE_ERR_OOM instead */
#define CARVE_ALLOC_REPLACE 2u /* virtual-memory mode: where the request would raise
                                  the arena's peak of mapped memory, its stream keeps no
                                  more than a granule of free memory mapped beyond what is
                                  live now (not its usual allowance, which follows its
                                  peak), so that the granules it maps replace free ones
                                  (unmapped first, as past the allowance); those granules
                                  are mapped one by one, never as one larger mapping
                                  (which could only be unmapped whole). A request of
                                  the size of one that had to unmap before, back at
                                  the same peak (a loop's step), raises the peak
                                  instead (by 1/8 of it at most in all, never past
                                  the usual allowance) */

/*
 * carve_alloc with flags (0: carve_alloc itself). For a caller that holds
 * freed memory back as live buffers (an interposer's quarantine of frees
 * that name no stream): CARVE_ALLOC_HELD first, giving memory back and
 * trying again while it has some, then CARVE_ALLOC_REPLACE, so that
 * neither what it holds back nor the peak it made the arena see decides
 * what the arena holds. Returns what carve_alloc returns; CARVE_ERR_INVALID
 * for an unknown flag; with CARVE_ALLOC_HELD, CARVE_ERR_OOM (carve_last_error
 * saying so; not counted as an out of memory in the statistics) where the
 * arena would have to grow. Thread-safe. With CARVE_ALLOC_HELD never
 * synchronizes and never waits for an event; otherwise as carve_alloc.
 */
CARVE_API carve_status carve_alloc_flags(carve_arena *arena, size_t size, carve_stream stream,
                                         unsigned flags, void **out);

/*
 * carve_alloc with the buffer aligned to align bytes: a power of two up to
 * CARVE_SEGMENT_GRANULE (2 MiB); 0, 1 and anything up to CARVE_ALIGNMENT
 * give carve_alloc's alignment. The buffer is a buffer like any other:
 * carve_free, carve_free_on_stream, carve_record_stream, carve_buffer_info
 * (which reports size) and carve_ipc_export take the returned pointer. To
 * find an aligned place, a free block of size + align - CARVE_ALIGNMENT
 * bytes is looked for (what is around the buffer stays free), so the limit
 * and out-of-memory rules of carve_alloc apply to that many bytes. Returns
 * carve_alloc's statuses, and CARVE_ERR_INVALID for an alignment that is
 * not a power of two or above 2 MiB. *out is NULL on failure. Thread-safe.
 * Synchronizes only as carve_alloc does; slower than carve_alloc (no
 * reuse of the buffer freed last without a search).
 */
CARVE_API carve_status carve_alloc_aligned(carve_arena *arena, size_t size, size_t align, carve_stream stream,
                                           void **out);

/*
 * Free a buffer from carve_alloc. The memory is reusable at once by later
 * allocations on the buffer's stream, by other streams once work queued
 * before the free has completed. free(NULL) is CARVE_OK. Returns
 * CARVE_ERR_INVALID for a NULL arena; CARVE_ERR_BAD_POINTER for a pointer
 * that is not the start of a live buffer of this arena (interior, foreign,
 * already freed, misaligned), in which case nothing changes;
 * CARVE_ERR_BACKEND when recording an event on a stream declared with
 * carve_record_stream fails (the buffer stays live: free it again). A
 * record that a stream capture forbids is no failure ("Captures on other
 * threads", under CUDA graphs): the memory then waits until the capture is
 * over. The buffer's
 * stream must still exist: free buffers before destroying their stream.
 * Thread-safe. Does not synchronize.
 */
CARVE_API carve_status carve_free(carve_arena *arena, void *ptr);

/*
 * Free a buffer ordered on stream, as cudaFreeAsync(ptr, stream): the work
 * queued on stream before this call is the buffer's last use. On the
 * buffer's own stream this is carve_free. On another stream (which must
 * itself be ordered after the work on the buffer's own stream, as CUDA asks
 * of cudaFreeAsync) the memory is reused, by any stream, its own included,
 * only once that work has completed: an event is recorded on stream, as
 * carve_record_stream then carve_free would do. CARVE_STREAM_PER_THREAD is
 * the calling thread's per-thread stream. NULL ptr is CARVE_OK. Returns the
 * statuses of carve_free, and CARVE_ERR_OOM when host memory for the
 * record runs out. All or nothing: on failure (an event that cannot be
 * recorded, on stream -- such as one being captured -- or on a stream
 * carve_record_stream declared) the buffer stays live exactly as it was,
 * stream not added to its uses, and the message names carve_free_on_stream.
 * A declared stream's record that a capture forbids is no failure, as for
 * carve_free.
 * Thread-safe. Does not synchronize.
 */
CARVE_API carve_status carve_free_on_stream(carve_arena *arena, void *ptr, carve_stream stream);

/*
 * Free a buffer whose last use is work before event (a cudaEvent_t /
 * CUevent the program recorded; on the host and virtual backends any
 * non-NULL handle, which completes as carve's own simulated events do). The
 * memory is reused, by any stream, once that work has completed. carve
 * takes the event's current record at the call (a stream of its own waits
 * for it, cudaStreamWaitEvent, and records carve's event after the wait),
 * so the program may record the event again or destroy it right after
 * this call. Not for an event recorded inside a stream capture (a node of
 * the graph being built): the wait would draw carve's stream into that
 * capture, which then cannot end (not detected); free such a buffer with
 * carve_free or carve_free_on_stream. NULL ptr is CARVE_OK. Returns the statuses of carve_free;
 * CARVE_ERR_INVALID also for a NULL event or a backend that cannot wait
 * for one (cuda_driver); CARVE_ERR_BACKEND when the driver refuses the
 * wait or the record (not a declared stream's record that a capture
 * forbids, as for carve_free); CARVE_ERR_OOM when host memory runs out. All or
 * nothing: on failure the buffer stays live exactly as it was (carve's
 * event for this call released, not added to its uses). Thread-safe. Does
 * not synchronize.
 */
CARVE_API carve_status carve_free_after_event(carve_arena *arena, void *ptr, carve_event event);

/*
 * Declare that the live buffer ptr is also used by work on stream. When the
 * buffer is freed, its memory is not reused until the work queued on stream
 * before the free has completed (CARVE_STREAM_PER_THREAD: the calling
 * thread's per-thread stream; free such a buffer from that thread, since an
 * event on that stream can be recorded only there: from another thread
 * carve_free returns CARVE_ERR_BACKEND and the buffer stays live). Returns CARVE_OK, CARVE_ERR_INVALID for a
 * NULL arena, CARVE_ERR_BAD_POINTER as carve_free, CARVE_ERR_OOM when host
 * memory for the record runs out. Thread-safe. Does not synchronize.
 */
CARVE_API carve_status carve_record_stream(carve_arena *arena, void *ptr, carve_stream stream);

/*
 * What the arena knows of ptr: if it is the start of a live buffer of arena,
 * CARVE_OK with *size the bytes that were asked for and *stream the stream
 * it was allocated on (either output may be NULL). CARVE_ERR_BAD_POINTER for
 * any other pointer (interior, foreign, freed), CARVE_ERR_INVALID for a NULL
 * arena; outputs are then 0 / NULL. A program that did not allocate ptr
 * through this arena can ask safely: this is how an interposer tells its
 * buffers from others. Thread-safe (briefly takes the owning stream's lock);
 * O(1). Does not synchronize.
 */
CARVE_API carve_status carve_buffer_info(const carve_arena *arena, const void *ptr, size_t *size,
                                         carve_stream *stream);

/*
 * Tag the live buffer ptr with a 64-bit value of the program's (a request
 * id, a layer, an address of its own: carve never reads it); 0 removes the
 * tag. The tag lives as long as the buffer: freeing it drops the tag.
 * carve_snapshot_json writes it with the buffer ("tag"), so a program can
 * tell whose memory is where. Returns CARVE_OK, CARVE_ERR_INVALID for a NULL
 * arena, CARVE_ERR_BAD_POINTER as carve_free (nothing changes). Thread-safe
 * (the owning stream's lock, briefly); O(1). Does not synchronize.
 */
CARVE_API carve_status carve_set_tag(carve_arena *arena, void *ptr, uint64_t tag);

/* The tag of the live buffer ptr (0 when it has none) in *tag. Returns
 * CARVE_OK, CARVE_ERR_INVALID for NULL arena or tag, CARVE_ERR_BAD_POINTER
 * as carve_buffer_info; *tag is 0 on failure. Thread-safe; O(1). */
CARVE_API carve_status carve_get_tag(const carve_arena *arena, const void *ptr, uint64_t *tag);

/* Nonzero when addr lies in memory the arena holds from its backend (in a
 * live buffer or not), 0 otherwise (and for NULL). An interposer uses it to
 * refuse a stray free of carve memory rather than pass it to the driver,
 * which would release a whole segment. Thread-safe (takes the arena's heap
 * lock); O(segments). Does not synchronize. */
CARVE_API int carve_arena_contains(const carve_arena *arena, const void *addr);

/*
 * Give every cached segment with no live buffer back to the backend, so the
 * driver sees the memory free again (in virtual-memory mode, unmap every
 * granule no live buffer touches). Synchronizes the device first, so that
 * the memory of every stream, destroyed streams included, can go back.
 * Returns CARVE_OK, CARVE_ERR_INVALID for NULL,
 * CARVE_ERR_BACKEND if the driver failed (memory it did not take back stays
 * reserved and usable), CARVE_ERR_OOM if host memory for carve's records ran
 * out in virtual-memory mode (free memory that needed them to be unmapped
 * stays mapped and usable). Thread-safe. Synchronizes, except while a
 * stream capture is underway ("Captures on other threads", under CUDA
 * graphs): it then neither waits for the device nor gives anything back,
 * and returns CARVE_OK.
 */
CARVE_API carve_status carve_empty_cache(carve_arena *arena);

/*
 * Out-of-memory callback. When an allocation (carve_alloc,
 * carve_alloc_aligned) would return CARVE_ERR_OOM -- after carve's own
 * reclaiming and retries, or at once for a request above the limit -- the
 * arena's callback is called, on the allocating thread, with the request
 * and the arena's numbers. It may free memory (carve_free and the other
 * frees, carve_empty_cache, carve_set_limit: carve holds none of its locks
 * while the callback runs, so these cannot deadlock) and answer
 * CARVE_OOM_RETRY: the allocation is then tried once more (counted in
 * carve_stats.num_alloc_retries) and its answer returned, without calling
 * the callback again. CARVE_OOM_FAIL (0), or any other answer, returns
 * CARVE_ERR_OOM. Allocations on the same arena that the callback (or the
 * retry) makes and that run out of memory do not call it again (they
 * return CARVE_ERR_OOM); those on another arena call that arena's callback
 * as always. Other threads may allocate meanwhile and take what it freed.
 * Failures other than CARVE_ERR_OOM do not call it. A callback that calls
 * carve_empty_cache (or lowers the limit) while a stream is being captured
 * into a CUDA graph gets nothing back from it when carve sees the capture
 * ("Captures on other threads"), and synchronizes the device, which ends
 * the capture with an error, when it does not (a non-blocking stream the
 * arena does not serve, outside carve-run): inside a capture answer
 * CARVE_OOM_FAIL and let the program reclaim after it.
 */
#define CARVE_OOM_FAIL 0
#define CARVE_OOM_RETRY 1

typedef struct carve_oom_info {
    size_t size;               /* sizeof(carve_oom_info) in the library that calls: fields
                                  are only ever added at the end */
    size_t request_bytes;      /* the size asked for */
    size_t align;              /* the alignment asked for (CARVE_ALIGNMENT for carve_alloc) */
    carve_stream stream;       /* the stream asked for (CARVE_STREAM_PER_THREAD as given) */
    size_t allocated_bytes;    /* the arena's numbers when the allocation failed: as carve_stats */
    size_t reserved_bytes;
    size_t cached_bytes;
    size_t largest_free_block;
    size_t limit_bytes;
    uint64_t num_live;
} carve_oom_info;

typedef int (*carve_oom_fn)(carve_arena *arena, const carve_oom_info *info, void *user);

/* Set (fn non-NULL) or remove (fn NULL) the arena's out-of-memory
 * callback; user is passed to it. Returns CARVE_OK, CARVE_ERR_INVALID for a
 * NULL arena. Thread-safe: an allocation failing meanwhile calls the old or
 * the new callback. It waits until the calls of the old callback running on
 * other threads have returned, so that after it returns the old callback
 * and its user data are the caller's again: no call of it starts or runs,
 * except on the calling thread (a callback that replaces itself is not
 * waited for) and on a thread that is itself inside this function from
 * within the old callback (two callbacks replacing each other's at once do
 * not wait for each other). So do not call it holding a lock the callback
 * takes. Does not synchronize. */
CARVE_API carve_status carve_set_oom_callback(carve_arena *arena, carve_oom_fn fn, void *user);

/*
 * Change the arena's limit (limit_bytes as in carve_config: rounded down to
 * the granule; 0 = the device's memory for the CUDA backends, unlimited
 * otherwise); carve_arena_get_config and carve_stats report the new one.
 * Raising it lets the arena grow further at once. Lowering it below what
 * the arena reserves first gives cached memory back, as carve_empty_cache
 * does (so it synchronizes the device then); if live buffers still hold
 * more than the new limit, the limit applies to future growth: nothing live
 * is touched, no memory is reserved or mapped until frees bring the arena
 * under it, and allocations that need more fail with CARVE_ERR_OOM (or call
 * the out-of-memory callback) meanwhile. In segments mode (vmm off) memory
 * goes back whole segments at a time: with live buffers spread over every
 * segment, reserved stays above the new limit, by whole segments, until
 * frees empty some. Memory freed later stays cached,
 * as always, until carve reclaims it. Returns CARVE_OK; CARVE_ERR_INVALID
 * for a NULL arena, a limit below one granule, or an arena with growth off
 * (it holds its one block); CARVE_ERR_BACKEND when giving memory back
 * failed, or when lowering it below what is reserved while carve sees a
 * stream capture underway ("Captures on other threads": nothing may go
 * back then; call again after the capture), CARVE_ERR_OOM when host memory for carve's records ran out while
 * giving it back in virtual-memory mode (as carve_empty_cache; host_memory
 * says so): the limit is then unchanged. Thread-safe. Synchronizes only
 * when lowering below what is reserved, and never during a capture carve
 * sees.
 */
CARVE_API carve_status carve_set_limit(carve_arena *arena, size_t limit_bytes);

/* Bytes held by live buffers, as rounded by the arena; 0 for NULL.
 * Thread-safe, lock-free, O(streams). */
CARVE_API size_t carve_memory_allocated(const carve_arena *arena);

/* Bytes reserved from the backend; 0 for NULL. Thread-safe, lock-free. */
CARVE_API size_t carve_memory_reserved(const carve_arena *arena);

/*
 * Kinds of driver work, as the driver ledger of carve_stats counts them
 * (docs/design.md, "The driver's cost"). Each is one driver function; the
 * backend counts a call where it makes it (the virtual backend counts the
 * calls the CUDA backend would make for the same work), with the mappings
 * and bytes the call covers. The numbers are stable: new kinds are added
 * before CARVE_DRV_KINDS, never in between, and CARVE_DRIVER_SLOTS, the size
 * of the ledger's arrays, leaves room for them.
 */
typedef enum carve_driver_op {
    CARVE_DRV_CREATE = 0,     /* cuMemCreate: a physical handle (bytes: its size) */
    CARVE_DRV_RELEASE = 1,    /* cuMemRelease: a handle let go (a mapping may still hold its memory) */
    CARVE_DRV_MAP = 2,        /* cuMemMap: one mapping */
    CARVE_DRV_ACCESS = 3,     /* cuMemSetAccess over a run (mappings: those it covers) */
    CARVE_DRV_UNMAP = 4,      /* cuMemUnmap of whole mappings (mappings: those it covers) */
    CARVE_DRV_RETAIN = 5,     /* cuMemRetainAllocationHandle: a mapped handle taken back */
    CARVE_DRV_RESERVE = 6,    /* cuMemAddressReserve: address space */
    CARVE_DRV_UNRESERVE = 7,  /* cuMemAddressFree */
    CARVE_DRV_MALLOC = 8,     /* cudaMalloc: a segment (segments mode) */
    CARVE_DRV_FREE = 9,       /* cudaFree of a segment */
    CARVE_DRV_EVENT_RECORD = 10, /* cudaEventRecord */
    CARVE_DRV_EVENT_QUERY = 11,  /* cudaEventQuery */
    CARVE_DRV_EVENT_SYNC = 12,   /* cudaEventSynchronize: a host wait */
    CARVE_DRV_DEVICE_SYNC = 13,  /* cudaDeviceSynchronize: a host wait */
    CARVE_DRV_KINDS = 14
} carve_driver_op;
#define CARVE_DRIVER_SLOTS 16

/* The driver function a kind stands for ("cuMemCreate", ...); "unknown"
 * outside 0 .. CARVE_DRV_KINDS - 1. Thread-safe; the string is static. */
CARVE_API const char *carve_driver_op_name(int op);

/*
 * The driver time the cost table (lib/backend/driver_costs.h: per call, per
 * mapping and per MiB of each kind, measured on a GPU by bench/vmm_costs.cu)
 * gives to a ledger of calls, mappings and bytes by kind (arrays of
 * CARVE_DRIVER_SLOTS, as in carve_stats; NULL arrays count as zeros), in
 * nanoseconds. The model is linear, so the time of the work between two
 * statistics is the difference of their driver_model_ns. Thread-safe.
 */
CARVE_API uint64_t carve_driver_model_ns(const uint64_t *calls, const uint64_t *mappings, const uint64_t *bytes);

/* Where the cost table came from: "DEVICE, SOURCE, DATE" (static). Thread-safe. */
CARVE_API const char *carve_driver_costs_source(void);
/* carve_stats as ABI 1.0 laid it out: the first fields of carve_stats,
 * what carve_get_stats wrote before carve 1.1 (programs built against a 1.0
 * carve.h still get exactly this), and what carve_replay_result holds. */
typedef struct carve_stats_1_0 {
    size_t requested_bytes;       /* bytes asked for by live buffers (unrounded) */
    size_t requested_bytes_peak;
    size_t allocated_bytes;       /* bytes held by live buffers (rounded) */
    size_t allocated_bytes_peak;
    size_t reserved_bytes;        /* bytes reserved from the backend (virtual-memory mode:
                                     bytes mapped) */
    size_t reserved_bytes_peak;
    size_t limit_bytes;           /* the hard cap (SIZE_MAX when unlimited) */
    size_t cached_bytes;          /* reserved but not held by live buffers */
    size_t largest_free_block;    /* largest contiguous free range with memory behind it, in bytes */
    size_t num_segments;          /* segments reserved now (virtual-memory mode: address
                                     space reservations) */
    size_t num_streams;           /* streams the arena has seen */
    uint64_t num_live;            /* live buffers */
    uint64_t num_allocs;          /* successful carve_alloc calls with size > 0 */
    uint64_t num_frees;           /* successful carve_free calls with ptr != NULL */
    uint64_t num_backend_allocs;  /* segments reserved from the backend, ever (virtual-memory
                                     mode: address space reservations and granule maps) */
    uint64_t num_backend_frees;   /* segments given back, ever (virtual-memory mode:
                                     granule unmaps) */
    uint64_t num_ooms;            /* carve_alloc calls that returned CARVE_ERR_OOM */
    uint64_t num_syncs;           /* times carve made the host wait for the device (an event
                                     or device synchronization: before reusing another stream's
                                     memory at the limit, releasing, unmapping), ever */
    uint64_t num_event_records;   /* events carve recorded on streams, ever (each a driver call
                                     on a GPU: cross-stream frees, emptied spans, and in
                                     virtual-memory mode the fences that say which freed
                                     granules the device is done with) */
    uint64_t num_event_queries;   /* times carve asked whether an event had completed, ever */
} carve_stats_1_0;

typedef struct carve_stats {
    size_t requested_bytes;       /* bytes asked for by live buffers (unrounded) */
    size_t requested_bytes_peak;
    size_t allocated_bytes;       /* bytes held by live buffers (rounded) */
    size_t allocated_bytes_peak;
    size_t reserved_bytes;        /* bytes reserved from the backend (virtual-memory mode:
                                     bytes mapped) */
    size_t reserved_bytes_peak;
    size_t limit_bytes;           /* the hard cap (SIZE_MAX when unlimited) */
    size_t cached_bytes;          /* reserved but not held by live buffers */
    size_t largest_free_block;    /* largest contiguous free range with memory behind it, in bytes */
    size_t num_segments;          /* segments reserved now (virtual-memory mode: address
                                     space reservations) */
    size_t num_streams;           /* streams the arena has seen */
    uint64_t num_live;            /* live buffers */
    uint64_t num_allocs;          /* successful carve_alloc calls with size > 0 */
    uint64_t num_frees;           /* successful carve_free calls with ptr != NULL */
    uint64_t num_backend_allocs;  /* segments reserved from the backend, ever (virtual-memory
                                     mode: address space reservations and granule maps) */
    uint64_t num_backend_frees;   /* segments given back, ever (virtual-memory mode:
                                     granule unmaps and address space releases) */
    uint64_t num_ooms;            /* carve_alloc calls that returned CARVE_ERR_OOM */
    uint64_t num_syncs;           /* times carve made the host wait for the device (an event
                                     or device synchronization: before reusing another stream's
                                     memory at the limit, releasing, unmapping), ever */
    uint64_t num_event_records;   /* events carve recorded on streams, ever (each a driver call
                                     on a GPU: cross-stream frees, emptied spans, and in
                                     virtual-memory mode the fences that say which freed
                                     granules the device is done with) */
    uint64_t num_event_queries;   /* times carve asked whether an event had completed, ever */
    /* Added in 1.1 (carve_get_stats_sized zeroes what a caller's older
     * structure lacks; see carve_get_stats): */
    uint64_t num_alloc_retries;   /* allocations retried after the out-of-memory callback
                                     answered CARVE_OOM_RETRY (carve_set_oom_callback) */
    /* The driver ledger: every driver call the backend made for the arena,
     * ever, by kind (carve_driver_op), with the mappings and bytes the calls
     * covered, and the driver time the cost table gives them
     * (carve_driver_model_ns): on the virtual backend, what the same work
     * would have cost the CUDA backend on the table's GPU. Every backend
     * counts (the host backend its simulated events only; cuda_driver's
     * cuMemAlloc and cuMemFree count as cudaMalloc and cudaFree). */
    uint64_t driver_calls[CARVE_DRIVER_SLOTS];
    uint64_t driver_mappings[CARVE_DRIVER_SLOTS];
    uint64_t driver_bytes[CARVE_DRIVER_SLOTS];
    uint64_t driver_model_ns;
} carve_stats;

/*
 * Fill the first size bytes of *out (a carve_stats as the caller's carve.h
 * has it: size between CARVE_STATS_SIZE_MIN and CARVE_STATS_SIZE_MAX; bytes
 * past the library's own carve_stats are zeroed) with the arena's
 * statistics. carve_stats grows only at its end, so a program built against
 * an older carve.h reads the fields it knows. Peaks are exact when the arena is
 * used from one stream; with several streams, requested/allocated peaks are
 * off by at most 16 MiB per stream, either way (per-stream counters are
 * merged in batches so that streams do not contend: one stream's flushed
 * allocations may meet another's unflushed frees); no peak is ever below
 * its current value. largest_free_block counts the buffer freed last, which
 * is kept aside for reuse, as the free memory it is. Returns
 * CARVE_ERR_INVALID for NULL arguments or a size outside those bounds (the
 * first size bytes of *out zeroed when out is not NULL and size is within
 * them).
 * Thread-safe: each stream's counters are read together under its lock
 * (briefly, one stream at a time), so even while other threads allocate
 * num_frees <= num_allocs and num_live = num_allocs - num_frees; streams are
 * read one after another, not at one instant (carve_snapshot_json is one).
 */
CARVE_API carve_status carve_get_stats_sized(const carve_arena *arena, carve_stats *out, size_t size);
/* carve_get_stats_sized with the program's sizeof(carve_stats). (The
 * library also exports carve_get_stats itself, for programs built against
 * carve 1.0's header, where it was a function: it writes carve_stats_1_0.) */
static inline carve_status carve_get_stats(const carve_arena *arena, carve_stats *out) {
    return carve_get_stats_sized(arena, out, sizeof(carve_stats));
}

/* The smallest and largest size carve_get_stats_sized takes: ABI 1.0's
 * carve_stats, and a bound far past any to come. */
#define CARVE_STATS_SIZE_MIN sizeof(carve_stats_1_0)
#define CARVE_STATS_SIZE_MAX ((size_t)4096)

/* One stream's counters, as its pool keeps them (each stream's are kept
 * apart already, on the paths carve_alloc and carve_free take: reading them
 * costs those paths nothing). */
typedef struct carve_stream_stats {
    size_t size;                  /* sizeof(carve_stream_stats) as the caller has it (set by the call) */
    carve_stream stream;          /* the stream asked about (as given) */
    uint64_t num_allocs;          /* successful allocations on it (size > 0), ever */
    uint64_t num_frees;           /* frees of its buffers, ever */
    uint64_t num_live;            /* its live buffers: num_allocs - num_frees */
    size_t allocated_bytes;       /* bytes its live buffers hold (rounded) */
    size_t allocated_bytes_peak;  /* the most they held at once (since creation or the last peak reset) */
    size_t requested_bytes;       /* bytes asked for by its live buffers */
    size_t requested_bytes_peak;
} carve_stream_stats;

#define CARVE_STREAM_STATS_SIZE_MAX ((size_t)4096)

/* The counters of stream (CARVE_STREAM_PER_THREAD: the calling thread's)
 * in arena, written into the first size bytes of *out (out->size = size,
 * out->stream = stream); all zero for a stream the arena has not seen.
 * Returns CARVE_OK, or CARVE_ERR_INVALID for NULL arguments or a size below
 * sizeof(size_t) or above CARVE_STREAM_STATS_SIZE_MAX (the first size bytes
 * of *out zeroed when out is not NULL and size is within them).
 * Thread-safe: the stream's counters are read together under its lock
 * (num_frees <= num_allocs). O(1). Does not synchronize. */
CARVE_API carve_status carve_get_stream_stats_sized(const carve_arena *arena, carve_stream stream,
                                                    carve_stream_stats *out, size_t size);
/* carve_get_stream_stats_sized with the program's sizeof(carve_stream_stats). */
static inline carve_status carve_get_stream_stats(const carve_arena *arena, carve_stream stream,
                                                  carve_stream_stats *out) {
    return carve_get_stream_stats_sized(arena, stream, out, sizeof(carve_stream_stats));
}

/* Reset the peaks to the current values, exactly (every stream's batched
 * counters merged first), all at one instant. NULL is a no-op. Thread-safe (takes every lock at once, briefly, so that no peak
 * falls below its value while other threads allocate or map memory). */
CARVE_API void carve_reset_peak_stats(carve_arena *arena);

/*
 * Walk every invariant of the arena: buffers and free ranges tile every
 * segment exactly, nothing overlaps, free neighbours are merged, every index
 * entry is consistent, and the statistics equal a recount. Returns CARVE_OK
 * or CARVE_ERR_INVALID (carve_last_error says which invariant failed).
 * Thread-safe (takes every lock); O(blocks + runs of free granules + the
 * address map's nodes), whatever the bytes the arena reserves or maps.
 */
CARVE_API carve_status carve_check(const carve_arena *arena);

/*
 * Explanation of the calling thread's most recent failed call on arena (or
 * on carve_arena_create / carve_config_parse / device functions when arena is
 * NULL). "" when there is none. The string stays valid until the thread's
 * next failing carve call. Thread-safe (per-thread storage).
 */
CARVE_API const char *carve_last_error(const carve_arena *arena);

/* carve_error_info.driver_api: which CUDA API driver_error comes from. */
#define CARVE_DRIVER_ERROR_RUNTIME 1 /* a cudaError_t */
#define CARVE_DRIVER_ERROR_DRIVER 2  /* a CUresult */

/* What carve_last_error explains, as numbers. */
typedef struct carve_error_info {
    size_t size;           /* sizeof(carve_error_info) as the caller has it (set by the call) */
    carve_status status;   /* the status of that failure; CARVE_OK when there is none */
    int driver_api;        /* CARVE_DRIVER_ERROR_RUNTIME or _DRIVER when the failure is the CUDA
                              driver's (status CARVE_ERR_BACKEND, CARVE_ERR_NO_DEVICE, or
                              CARVE_ERR_OOM for the device's memory: cudaErrorMemoryAllocation,
                              CUDA_ERROR_OUT_OF_MEMORY); 0 otherwise */
    int driver_error;      /* that cudaError_t or CUresult as an int; 0 when driver_api is 0 */
    int host_memory;       /* 1 when the status is CARVE_ERR_OOM because host memory ran out
                              (carve's own records, not the device's memory, nor the limit) */
} carve_error_info;

#define CARVE_ERROR_INFO_SIZE_MAX ((size_t)4096)

/*
 * The calling thread's most recent failed call on arena (NULL: the calls
 * carve_last_error(NULL) explains), as numbers, written into the first size
 * bytes of *out (out->size = size): CARVE_ERR_OOM with host_memory 0 is the
 * device or the limit, with host_memory 1 host memory; driver_error is the
 * CUDA error code beside the text. status CARVE_OK and zeros when there is
 * none. Returns CARVE_OK, or CARVE_ERR_INVALID (nothing written, and the
 * last error unchanged) for a NULL out or a size below sizeof(size_t) or
 * above CARVE_ERROR_INFO_SIZE_MAX. Thread-safe (per-thread storage).
 */
CARVE_API carve_status carve_last_error_info_sized(const carve_arena *arena, carve_error_info *out, size_t size);
/* carve_last_error_info_sized with the program's sizeof(carve_error_info). */
static inline carve_status carve_last_error_info(const carve_arena *arena, carve_error_info *out) {
    return carve_last_error_info_sized(arena, out, sizeof(carve_error_info));
}

/*
 * A JSON snapshot of the arena: its configuration, statistics, and every
 * segment with every block (offset, size, state, stream), all of one
 * instant (the statistics agree with the blocks). The schema is in
 * docs/snapshot.md. *out is a NUL-terminated string to release with
 * carve_snapshot_free. Returns CARVE_OK, CARVE_ERR_INVALID for NULL
 * arguments, CARVE_ERR_OOM if host memory ran out (*out NULL on failure).
 * Thread-safe (takes every lock). Does not synchronize.
 */
CARVE_API carve_status carve_snapshot_json(const carve_arena *arena, char **out);
CARVE_API void carve_snapshot_free(char *json);

/* ---- CUDA graphs -----------------------------------------------------------
 *
 * While a stream is being captured into a CUDA graph (cudaStreamIsCapturing
 * says so; the host and virtual backends: carve_sim_set_capturing), carve's
 * calls on it neither synchronize, nor record or ask about events on it,
 * nor unmap memory; carve_free parks the memory in the pool. The memory a
 * graph uses must stay its own for every replay: a graph pool holds it.
 * A stream routed to a graph pool takes what the pool holds free and,
 * past that, brings memory in (allocated or mapped in relaxed capture mode,
 * which breaks no capture), which the pool keeps until its release; a
 * captured stream of the arena's own takes only what its pool holds free
 * and otherwise fails with CARVE_ERR_OOM (nothing changed), since memory
 * brought in would go back to the stream's cache after the capture.
 *
 *   carve_graph_pool_create(arena, &g);
 *   carve_graph_pool_begin(arena, g, s);   allocations on s now come from g
 *   step(s);                               once, uncaptured: g maps what it needs
 *                                          (optional: the capture maps too)
 *   cudaStreamBeginCapture(s, ...); step(s); cudaStreamEndCapture(s, &graph);
 *   carve_graph_pool_end(arena, g, s);     s has its own pool again
 *   ... cudaGraphLaunch(graph) any number of times ...
 *   cudaGraphDestroy(graph); carve_graph_pool_release(arena, g);
 *
 * The captured step repeats the first run's allocations and frees, so it
 * finds its memory free in g, in the same order. Memory freed inside the
 * capture is taken again only by later allocations of the same capture
 * (the graph's own order makes that safe), and none of g's memory goes to
 * other streams, to carve_empty_cache or back to the driver until the
 * release; buffers still live in g then are freed as any others. Several
 * graphs may share a pool when they are replayed one after another, never
 * at once (PyTorch's rule for shared pools). A capture that forks work onto
 * other streams routes each to a graph pool of its own. The arena's other
 * streams allocate as always meanwhile.
 *
 * Captures on other threads. A capture in global mode (the default of
 * cudaStreamBeginCapture and of torch.cuda.graph) forbids "potentially
 * unsafe" driver calls to every thread in global mode, and breaks when one
 * is made; in thread-local mode only the capturing thread is restricted;
 * in relaxed mode no thread is. carve makes each of its unsafe calls
 * (cudaMalloc/cuMemAlloc, cudaFree/cuMemFree, cuMemCreate, cuMemMap,
 * cuMemSetAccess, cuMemUnmap, cuMemRelease, cuMemAddressReserve/Free,
 * event queries and waits, and cudaMemGetInfo when an arena is created)
 * with the calling thread's capture mode
 * exchanged for relaxed and restored after (cuThreadExchangeStreamCaptureMode;
 * slow paths only), so carve_alloc and carve_free on one thread neither fail
 * nor break another thread's capture in any mode. What no mode allows --
 * waiting for the whole device, recording on the legacy stream while a
 * blocking stream is captured -- carve does not do while it sees a capture
 * underway: one on a stream routed to a graph pool, on the calling
 * thread's per-thread stream, on the stream of the call being served (an
 * allocation's), or one the backend sees in its context (a blocking stream
 * captured, which the driver tells when asked about the legacy stream;
 * under carve-run, any capture). carve asks about no other stream of its
 * pools: the program may have destroyed it once its buffers were freed. Meanwhile the
 * out-of-memory path reclaims only what is known free without that wait
 * (an allocation only a device synchronization could serve fails with
 * CARVE_ERR_OOM, and carve_last_error says a capture prevented the
 * synchronization), carve_empty_cache gives nothing back to the driver (it
 * returns CARVE_OK; memory stays cached until a call after the capture),
 * carve_graph_pool_release, and carve_set_limit lowering the limit below
 * what is reserved, are refused with CARVE_ERR_BACKEND (call again after
 * the capture; the limit stays) and carve_arena_destroy waits for the
 * capture to end (so never call it on the capturing thread during its
 * capture). A free whose buffer was declared used on the legacy stream, or
 * on a stream being captured (carve_record_stream), succeeds without the
 * event the capture forbids: the memory is reused by no stream, its own
 * included, until the capture is over -- on the legacy stream, until an
 * event carve records there at its first call after the capture has
 * completed; on a captured stream (which may be destroyed by then, so
 * nothing is recorded on it later), until a device synchronization made
 * after the capture (carve_empty_cache, or an allocation that must
 * reclaim). A carve_free_on_stream naming a stream being captured is
 * refused. A capture on any other non-blocking stream (one not routed to a
 * graph pool, not the calling thread's per-thread stream, not the stream of
 * the call), on another thread, is not seen outside carve-run, even when
 * the arena has a pool for that stream: carve_empty_cache, carve_set_limit,
 * carve_graph_pool_release, carve_arena_destroy and an allocation on
 * another stream that must reclaim may then synchronize the device and
 * break it. Route such a stream to a graph pool, or capture in relaxed
 * mode on a stream the program keeps out of those calls' way.
 */
typedef struct carve_graph_pool carve_graph_pool;

/* A new graph pool of arena in *g (NULL on failure). It holds nothing until
 * a stream routed to it allocates. Returns CARVE_OK; CARVE_ERR_INVALID for
 * NULL arguments; CARVE_ERR_OOM when host memory runs out. Thread-safe.
 * Does not synchronize. */
CARVE_API carve_status carve_graph_pool_create(carve_arena *arena, carve_graph_pool **g);

/* From now on, allocations on stream (CARVE_STREAM_PER_THREAD: the calling
 * thread's) come from g, from every thread, until carve_graph_pool_end;
 * buffers of g are freed into g whatever the stream. Call it before the
 * stream's allocations it should cover (not while other threads allocate on
 * stream). Returns CARVE_OK; CARVE_ERR_INVALID for NULL arguments, a g that
 * is not a live graph pool of arena, a g with a stream routed to it already,
 * a stream routed already, or 16 streams routed in the arena. Thread-safe.
 * Does not synchronize. */
CARVE_API carve_status carve_graph_pool_begin(carve_arena *arena, carve_graph_pool *g, carve_stream stream);

/* Allocations on stream come from its own pool again. Returns CARVE_OK;
 * CARVE_ERR_INVALID for NULL arguments or a stream not routed to g.
 * Thread-safe. Does not synchronize. */
CARVE_API carve_status carve_graph_pool_end(carve_arena *arena, carve_graph_pool *g, carve_stream stream);

/* Give g's memory back: the program says that no graph that used it will
 * be launched again. carve synchronizes the device (launches still queued
 * finish first), then g's free memory goes back to the arena for every
 * stream; g's buffers still live stay valid and are freed as any others. g
 * is no graph pool afterwards. Returns CARVE_OK; CARVE_ERR_INVALID for NULL
 * arguments, a g that is not a graph pool of arena or was released, or one
 * with a stream routed to it; CARVE_ERR_BACKEND when the synchronization
 * failed or was not made because a stream capture is underway (g stays a
 * graph pool, its memory private: call again). g is a
 * graph pool until the synchronization returned, so no stream takes its
 * memory while a launch may still use it. Thread-safe. Synchronizes. */
CARVE_API carve_status carve_graph_pool_release(carve_arena *arena, carve_graph_pool *g);

/* Host and virtual backends (tests): mark stream as being captured (on
 * nonzero) or not, as cudaStreamIsCapturing would say on a GPU. Returns
 * CARVE_OK; CARVE_ERR_INVALID for a NULL arena, a CUDA backend (the driver
 * says), or a 17th marked stream. Must not race with calls on the arena's
 * marked streams. */
CARVE_API carve_status carve_sim_set_capturing(carve_arena *arena, carve_stream stream, int on);

/* ---- Sharing buffers with other processes ---------------------------------
 *
 * carve_ipc_export describes a live buffer so that another process on the
 * same machine can map the same memory with carve_ipc_import. What goes
 * across is a carve_ipc_desc (plain bytes: send it as it is) and, in
 * virtual-memory mode, file descriptors (send them with SCM_RIGHTS over a
 * Unix socket; docs/cuda.md shows how):
 *  - virtual-memory mode (CARVE_IPC_FDS): one POSIX file descriptor per
 *    mapping the buffer lies in (cuMemExportToShareableHandle): a 2 MiB
 *    granule, or a larger mapping (what one request covered whole of
 *    untouched room, while the arena had one stream), so a buffer of N MiB
 *    needs at most about N/2 of them, within the process's limit on open
 *    files; the importer maps each of those allocations whole, so bytes of
 *    other buffers in them are within its reach. Needs an arena whose
 *    memory has such handles (ipc auto on a device that supports them, or
 *    ipc=1).
 *  - segments mode (CARVE_IPC_CUDA): a cudaIpcMemHandle_t of the cudaMalloc
 *    segment that holds the buffer, and the buffer's offset in it; the
 *    importer maps the whole segment, other buffers of it included.
 * The exporter keeps the buffer live while importers use it: after
 * carve_free its memory goes to other buffers (in virtual-memory mode the
 * importer's mapping keeps the physical memory, which may then hold them). Neither side
 * orders the other's work: make writes complete (cudaStreamSynchronize, or
 * an event shared with cudaIpcGetEventHandle) before telling the other
 * process to read.
 */
typedef enum carve_ipc_kind {
    CARVE_IPC_FDS = 1, /* virtual-memory mode: file descriptors, one per mapping */
    CARVE_IPC_CUDA = 2 /* segments mode: a cudaIpcMemHandle_t in cuda_handle */
} carve_ipc_kind;

#define CARVE_IPC_MAGIC 0x63766970u /* carve_ipc_desc.magic */

typedef struct carve_ipc_desc {
    uint32_t magic;          /* CARVE_IPC_MAGIC */
    uint32_t kind;           /* carve_ipc_kind */
    uint64_t size;           /* bytes of the buffer, as requested from carve_alloc */
    uint64_t offset;         /* of the buffer from the start of the first piece */
    uint64_t piece_bytes;    /* CARVE_IPC_FDS: bytes behind each descriptor where all are the
                                same (2 MiB, or a larger mapping's size); 0 where they differ:
                                then cuda_handle holds their sizes as up to 8 runs, each two
                                uint32_t in the machine's byte order (descriptors in the run, then
                                2 MiB granules behind each), a count of 0 ending them early;
                                CARVE_IPC_CUDA: bytes of the segment */
    uint32_t num_fds;        /* CARVE_IPC_FDS: descriptors that go with the description,
                                in address order; CARVE_IPC_CUDA: 0 */
    int32_t device;          /* the exporting process's ordinal of the device (information:
                                the importer names its own device) */
    unsigned char cuda_handle[64]; /* CARVE_IPC_CUDA: the cudaIpcMemHandle_t; CARVE_IPC_FDS with
                                      piece_bytes 0: the runs of sizes; zero otherwise */
} carve_ipc_desc;

/*
 * Describe the live buffer ptr of arena for carve_ipc_import in another
 * process. On success *desc is filled and, for CARVE_IPC_FDS, *fds is an
 * array of desc->num_fds new file descriptors owned by the caller (pass them
 * on, then release them with carve_ipc_fds_close); *fds is NULL for
 * CARVE_IPC_CUDA. Returns CARVE_OK; CARVE_ERR_INVALID for NULL arguments or
 * an arena that cannot export (host and virtual backends, the cuda_driver
 * backend, virtual-memory mode without file-descriptor handles: ipc=0, or a
 * device that lacks them; a buffer across mappings of more than 8 runs of
 * sizes, which a description cannot say); CARVE_ERR_BAD_POINTER when ptr is not the start
 * of a live buffer of arena; CARVE_ERR_BACKEND when the driver refuses (the
 * process's limit on open files included); CARVE_ERR_NO_DEVICE when the
 * arena's device cannot be made current (the driver is gone); CARVE_ERR_OOM
 * when host memory or the driver's own memory runs out. On failure *desc is
 * zeroed and *fds NULL. Thread-safe, but must not race with carve_free of
 * the same buffer. Does not synchronize.
 */
CARVE_API carve_status carve_ipc_export(carve_arena *arena, const void *ptr, carve_ipc_desc *desc, int **fds);

/* Close the n descriptors of fds (those carve_ipc_export gave, or those
 * received) and free the array; NULL is a no-op. Thread-safe. */
CARVE_API void carve_ipc_fds_close(int *fds, size_t n);

typedef struct carve_ipc_mapping carve_ipc_mapping;

/*
 * Map a buffer exported by another process (desc and, for CARVE_IPC_FDS,
 * desc->num_fds received descriptors in the order sent -- check that as many
 * arrived -- which stay the caller's: close them after this call) for use
 * by device (this process's ordinal); *ptr is the
 * buffer's address here and *map the mapping to close with carve_ipc_close.
 * CARVE_IPC_FDS mappings are readable and writable by device only;
 * CARVE_IPC_CUDA mappings by the devices that have peer access to it
 * (cudaIpcMemLazyEnablePeerAccess). A segment already mapped in this process
 * (another buffer of the same exported segment) is mapped once and shared.
 * Returns CARVE_OK; CARVE_ERR_INVALID for NULL arguments, a desc that is not
 * one (magic, kind, sizes and num_fds inconsistent) or a negative descriptor;
 * CARVE_ERR_NO_DEVICE when there is no CUDA driver, no such device, or carve
 * was built without CUDA; CARVE_ERR_BACKEND when the driver refuses (a
 * descriptor that is not a CUDA memory handle, say); CARVE_ERR_OOM when the
 * device's address space or memory (cudaIpcOpenMemHandle's
 * cudaErrorMemoryAllocation), or host memory, runs out. On failure *map and
 * *ptr are NULL. Thread-safe. Does not synchronize.
 */
CARVE_API carve_status carve_ipc_import(const carve_ipc_desc *desc, const int *fds, int device,
                                        carve_ipc_mapping **map, void **ptr);

/*
 * Unmap a mapping of carve_ipc_import; NULL is CARVE_OK. The memory stays
 * with the exporting process. Work that uses the mapping must have completed
 * (the driver may wait for it). Returns CARVE_OK; CARVE_ERR_BACKEND when the
 * driver refused to unmap (the mapping is forgotten all the same);
 * CARVE_ERR_NO_DEVICE when the mapping's device cannot be made current:
 * then nothing was unmapped and the mapping stays valid (close it again).
 * Thread-safe for different mappings. May synchronize (cuMemUnmap,
 * cudaIpcCloseMemHandle).
 */
CARVE_API carve_status carve_ipc_close(carve_ipc_mapping *map);

/* ---- Per-device default arenas -------------------------------------------
 *
 * One process-wide CUDA arena per device, created on first use. Their
 * configuration comes from the defaults (growth on, no initial block, limit =
 * the device's memory), then the environment variable CARVE_CONF, then the
 * setters below. CARVE_CONF holds ';'-separated sections; a section without a
 * prefix applies to every device, "deviceN:" to device N only, e.g.
 *   CARVE_CONF="growth=1,limit=4GiB,initial=1GiB;device1:limit=2GiB"
 * with the keys of carve_config_parse (backend and device are not allowed).
 * A key may appear once among the sections for all devices and once more in
 * a device's sections, which then wins for that device; any other repeat is
 * an error.
 */

/* The configuration that device's default arena would be created with from
 * the CARVE_CONF-style string conf (NULL = ""), before setters apply: the
 * defaults, then the all-device sections, then "deviceN:" sections, written
 * into the first size bytes of *out (out->size = size). Returns CARVE_OK, or
 * CARVE_ERR_INVALID naming the bad key or section (out then holds the
 * defaults), or for a NULL out, a bad device (out holds the defaults) or a
 * size outside CARVE_CONFIG_SIZE_MIN .. CARVE_CONFIG_SIZE_MAX (nothing
 * written). Needs no device. Thread-safe. */
CARVE_API carve_status carve_conf_parse_sized(const char *conf, int device, carve_config *out, size_t size);
/* carve_conf_parse_sized with the program's sizeof(carve_config). */
static inline carve_status carve_conf_parse(const char *conf, int device, carve_config *out) {
    return carve_conf_parse_sized(conf, device, out, sizeof(carve_config));
}

/* The default arena of device, created on first call. Returns CARVE_OK;
 * CARVE_ERR_NO_DEVICE if there is no such device; CARVE_ERR_INVALID if
 * CARVE_CONF is malformed (carve_last_error(NULL) names the bad key); the
 * statuses of carve_arena_create. *out is NULL on failure. Thread-safe. */
CARVE_API carve_status carve_device_arena(int device, carve_arena **out);

/* Set the limit / growth mode / initial block of device's default arena
 * before it is first created. Returns CARVE_ERR_INVALID if the arena already
 * exists (say so before first use, as tf.config requires) or the value is
 * bad, by the rule carve_arena_create applies, judged before the device: a
 * limit below one granule (2 MiB; limit_bytes 0 means the device's memory),
 * a fraction outside (0, 1] or one that leaves less than a granule of the
 * device's memory (the fraction setter asks the device its size, as
 * carve_device_mem_info does). Combinations (an initial block above the
 * limit, growth off with no initial block) are judged when the arena is
 * created. CARVE_ERR_NO_DEVICE for a bad device. Thread-safe. */
CARVE_API carve_status carve_device_set_limit(int device, size_t limit_bytes);
CARVE_API carve_status carve_device_set_limit_fraction(int device, double fraction);
CARVE_API carve_status carve_device_set_growth(int device, int growth);
CARVE_API carve_status carve_device_set_initial(int device, size_t initial_bytes);

/* Free and total memory of device as the driver sees it (cudaMemGetInfo).
 * Returns CARVE_ERR_NO_DEVICE or CARVE_ERR_BACKEND on failure (*free_bytes and
 * *total_bytes 0). Thread-safe. Does not synchronize. */
CARVE_API carve_status carve_device_mem_info(int device, size_t *free_bytes, size_t *total_bytes);

/* Number of CUDA devices visible (0 when there is no driver or device). */
CARVE_API int carve_device_count(void);

/* Destroy every default arena (for leak checks at exit). Must not race with
 * their use. Synchronizes, as carve_arena_destroy. A later
 * carve_device_arena makes a new one; routing stacks (carve_frameworks.h)
 * that still name a destroyed one get CARVE_ERR_INVALID for their
 * allocations. */
CARVE_API void carve_device_arenas_release(void);

/* For interposers of the CUDA driver (carve-run's): lookup(name, arg) finds
 * the driver's real function by its exported name (e.g. "cuMemAlloc_v2"),
 * for example with dlsym on a handle of libcuda.so.1, so that the
 * CUDA_DRIVER backend's own driver calls never come back through the
 * interposer. Call it before the first arena on that backend exists.
 * lookup may also answer the name "carve_capture_active" with a function
 * int (void) that is nonzero while a stream capture is in progress; carve
 * then records no event meanwhile (recording on the legacy stream would
 * break the capture), and treats the memory as it treats an event it could
 * not record. carve also asks lookup for "cuStreamIsCapturing" and
 * "cuThreadExchangeStreamCaptureMode" (optional: without the first the
 * backend cannot tell captures, without the second its calls keep the
 * thread's capture mode, so while the backend sees a capture in its
 * context it neither asks about nor waits for an event, and memory freed
 * with work still queued stays cached until the capture ends); with them
 * the backend keeps the rules of "CUDA graphs" above. An event query or
 * wait a capture refuses never counts as done.
 * Returns CARVE_OK; CARVE_ERR_INVALID for a NULL lookup or when such an
 * arena was already made; CARVE_ERR_NO_DEVICE when lookup misses a function
 * carve needs (carve_last_error(NULL) names it) or carve was built without
 * CUDA. Thread-safe. */
CARVE_API carve_status carve_cuda_driver_lookup(void *(*lookup)(const char *name, void *arg), void *arg);

/* For interposers of the CUDA driver: the CUDA context an arena on the
 * CUDA_DRIVER backend took its memory in has been destroyed or reset. The
 * driver freed what belonged to the context (cuMemAlloc segments), not the
 * virtual-memory mode's granules and address ranges, which belong to no
 * context: this unmaps the granules the arena's records say are mapped
 * (costing what is mapped, not the address space reserved) and frees the
 * ranges, without touching the arena's events (they died with the
 * context). Nothing more is served from the arena from then on: every
 * carve_alloc answers CARVE_ERR_NO_DEVICE (what it caches is unmapped),
 * while frees of earlier buffers are accepted; its records and statistics stay, and carve_arena_destroy is
 * still the way to free them. A second call does nothing; so does a call
 * for other backends and segments mode, or when arena is NULL. Thread-safe,
 * but a buffer the program still uses is unmapped under it (as the driver
 * frees a context's memory). Does not synchronize. */
CARVE_API void carve_arena_abandon(carve_arena *arena);

#ifdef __cplusplus
}
#endif

#endif /* CARVE_H */
