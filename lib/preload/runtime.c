/*
 * runtime.c — the CUDA runtime's allocation functions (cudaMalloc, cudaFree,
 * cudaMallocAsync, cudaFreeAsync and the per-thread-default-stream forms of
 * the last two), exported for programs linked to the shared runtime
 * (PyTorch, CuPy, nvcc -cudart shared), so that their calls skip the
 * runtime's own layer on the way to carve.
 *
 * The one idea: answer only the plain case directly, and exactly as the
 * runtime would have once the driver hooks served it: a context is current
 * (the runtime has started on this thread) and carve serves it, a size
 * carve serves, no graph capture in progress, and success. A successful
 * runtime call leaves the runtime's last error alone, so answering it here
 * changes nothing the program can see. Everything else goes to the real
 * runtime function, which reaches the driver hooks as before: no context
 * current yet (the runtime starts its primary context lazily), a capture,
 * a pointer carve did not hand out, size 0 or a NULL pointer, and every
 * failure (out of memory, a second free), so that cudaGetLastError and
 * cudaPeekAtLastError report what the runtime reports. The default streams
 * map as in the driver hooks: NULL, cudaStreamLegacy and cudaStreamPerThread
 * name no particular stream (unordered), any other stream orders the call.
 *
 * The real function is the one the caller would have reached: a process
 * can hold two runtimes (the program's, and libcarve's own), so it is
 * looked up in the calling library's own dependencies first (a Python
 * extension loaded with RTLD_LOCAL has its runtime only there), then as the
 * next definition after the interposer; when that is libcarve's own runtime
 * and another one is loaded, the other one. Found once per call site.
 *
 * With failures injected (faults.c), an allocation is numbered here; one
 * that is to fail goes to the real runtime with a note for the driver hook
 * it reaches, which fails it, so the runtime records the error itself.
 */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "preload/exports.h"
#include "preload/preload.h"
#include "preload/timing.h"

enum { MALLOC, FREE, MALLOC_ASYNC, MALLOC_ASYNC_PTSZ, FREE_ASYNC, FREE_ASYNC_PTSZ, NFN };
static const char *const names[NFN] = {"cudaMalloc",           "cudaFree",      "cudaMallocAsync",
                                       "cudaMallocAsync_ptsz", "cudaFreeAsync", "cudaFreeAsync_ptsz"};

/* ---- the real runtime's functions --------------------------------------- */

static void *addr_of(void (*f)(void)) {
    void *p;
    memcpy(&p, &f, sizeof(p));
    return p;
}

/* Whether fn is one of this file's exports (never the real one). */
static int ours(void *fn) {
    return fn == addr_of((void (*)(void))cudaMalloc) || fn == addr_of((void (*)(void))cudaFree) ||
           fn == addr_of((void (*)(void))cudaMallocAsync) || fn == addr_of((void (*)(void))cudaMallocAsync_ptsz) ||
           fn == addr_of((void (*)(void))cudaFreeAsync) || fn == addr_of((void (*)(void))cudaFreeAsync_ptsz);
}

/* name as the object holding addr and its dependencies define it. */
static void *in_scope_of(const void *addr, const char *name) {
    Dl_info info;
    if (!dladdr(addr, &info) || !info.dli_fname || !strchr(info.dli_fname, '/'))
        return NULL; /* the main program has no scope but the global one */
    void *h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return NULL;
    void *fn = carve_real_dlsym(h, name);
    dlclose(h);
    return fn && !ours(fn) ? fn : NULL;
}

/* The loaded objects' names (for one look at each, outside the loader's lock). */
typedef struct objects {
    char **name;
    size_t n, cap;
} objects;

static int add_object(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    objects *o = arg;
    if (!info->dlpi_name || !strchr(info->dlpi_name, '/'))
        return 0;
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 64;
        char **bigger = realloc(o->name, cap * sizeof(char *));
        if (!bigger)
            return 1;
        o->name = bigger;
        o->cap = cap;
    }
    if ((o->name[o->n] = strdup(info->dlpi_name)))
        o->n++;
    return 0;
}

/* The one definition of name in the process other than ours and not_this;
 * NULL when there is none or more than one. */
static void *only_other(const char *name, void *not_this) {
    objects o = {NULL, 0, 0};
    dl_iterate_phdr(add_object, &o);
    void *found = NULL;
    int several = 0;
    for (size_t i = 0; i < o.n; i++) {
        void *h = dlopen(o.name[i], RTLD_LAZY | RTLD_NOLOAD);
        void *fn = h ? carve_real_dlsym(h, name) : NULL;
        if (h)
            dlclose(h);
        if (fn && fn != not_this && !ours(fn)) {
            several |= found && fn != found;
            found = fn;
        }
        free(o.name[i]);
    }
    free(o.name);
    return several ? NULL : found;
}

static void *find_real(int which, const void *caller) {
    const char *name = names[which];
    void *fn = in_scope_of(caller, name);
    if (fn)
        return fn;
    fn = carve_real_dlsym(RTLD_NEXT, name);
    if (fn && ours(fn))
        fn = NULL;
    /* The runtime libcarve itself is linked to is in the global scope before
     * any runtime the program loads later (Python extensions): the program's
     * calls mean the program's runtime. */
    void *carves = in_scope_of(addr_of((void (*)(void))carve_alloc), name);
    if (fn && fn != carves)
        return fn;
    void *other = only_other(name, carves);
    return other ? other : fn;
}

/* Call sites seen, with the real function each one means. */
#define SITES 64
static struct {
    const void *caller;
    void *fn;
} sites[NFN][SITES];
static unsigned nsites[NFN]; /* atomic: entries published */
static pthread_mutex_t sites_lock = PTHREAD_MUTEX_INITIALIZER;

/* A child forked while another thread held sites_lock must not find it
 * taken: every call there goes to the real runtime, through real_fn. */
static void sites_lock_take(void) { pthread_mutex_lock(&sites_lock); }
static void sites_lock_give(void) { pthread_mutex_unlock(&sites_lock); }
__attribute__((constructor)) static void sites_fork_safe(void) {
    pthread_atfork(sites_lock_take, sites_lock_give, sites_lock_give);
}

static void *real_fn(int which, const void *caller) {
    unsigned n = __atomic_load_n(&nsites[which], __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++)
        if (sites[which][i].caller == caller)
            return sites[which][i].fn;
    void *fn = find_real(which, caller);
    pthread_mutex_lock(&sites_lock);
    n = nsites[which];
    if (n < SITES && fn) {
        sites[which][n].caller = caller;
        sites[which][n].fn = fn;
        __atomic_store_n(&nsites[which], n + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&sites_lock);
    return fn;
}

typedef cudaError_t (*malloc_fn)(void **, size_t);
typedef cudaError_t (*free_fn)(void *);
typedef cudaError_t (*malloc_async_fn)(void **, size_t, cudaStream_t);
typedef cudaError_t (*free_async_fn)(void *, cudaStream_t);

/* ---- the exported functions ---------------------------------------------- */

/* Whether a call may be answered here at all. */
static inline int plain(void) {
    return CARVE_LIKELY(__atomic_load_n(&carve_run.ready, __ATOMIC_ACQUIRE)) && !carve_capture_active();
}

/* An allocation with failures to inject, before the options are read, or
 * while carve_run_serve has turned serving off: whether it may be served
 * here. Numbered here unless it goes to the real runtime for another reason
 * (its driver hook numbers it then, and passes it to the driver while
 * serving is off); one that is to fail goes to the runtime with a note that
 * fails its driver call. */
static __attribute__((noinline)) int may_serve_numbered(int ready) {
    if (ready != CARVE_READY_FAULTS || carve_capture_active())
        return 0;
    if (carve_fault_number()) {
        carve_fault_note(1);
        return 0;
    }
    return 1;
}

/* An allocation served by carve, or 0 (the real runtime is asked). */
static inline int served_alloc(void **devPtr, size_t size, cudaStream_t stream) {
    if (!devPtr || !size)
        return 0;
    int ready = __atomic_load_n(&carve_run.ready, __ATOMIC_ACQUIRE);
    if (CARVE_UNLIKELY(ready != 1) ? !may_serve_numbered(ready) : carve_capture_active())
        return 0;
    uint64_t t = carve_clock_in();
    carve_ctx *c = NULL;
    uintptr_t p = 0;
    carve_stream s = (uintptr_t)stream <= 2 ? NULL : (carve_stream)stream;
    if (carve_ctx_alloc(size, s, 1, &p, &c) != CUDA_SUCCESS) {
        if (CARVE_UNLIKELY(ready != 1))
            carve_fault_note(0); /* numbered here already: the driver hook does not number it again */
        return 0;
    }
    *devPtr = (void *)p;
    if (CARVE_UNLIKELY(carve_run.watching))
        carve_session_saw_alloc(c, p, size, s);
    carve_clock_out(c, t);
    return 1;
}

/* A free served by carve, or 0 (the real runtime is asked). */
static inline int served_free(void *devPtr, int ordered, cudaStream_t stream) {
    if (!devPtr || !plain() || !carve_ctx_thread_ready())
        return 0;
    uint64_t t = carve_clock_in();
    carve_ctx *c = NULL;
    int r = carve_ctx_free((uintptr_t)devPtr, ordered && (uintptr_t)stream > 2, (carve_stream)stream,
                           carve_run.watching ? carve_session_saw_free : NULL, &c);
    if (r != CUDA_SUCCESS)
        return 0; /* not carve's, or refused: the runtime asks the hooks, which say so again */
    carve_clock_out(c, t);
    return 1;
}

/* The real runtime started this thread's context: later frees may be served here. */
static void note_started(void) {
    if (!carve_ctx_thread_ready())
        (void)carve_ctx_current();
}

/* Return what the real runtime function which, of type, answers. */
#define CALL_REAL(which, type, ...)                                                    \
    do {                                                                               \
        type fn_;                                                                      \
        CARVE_SET_FN(fn_, real_fn(which, __builtin_return_address(0)));                \
        return fn_ ? fn_(__VA_ARGS__) : cudaErrorUnknown;                              \
    } while (0)

/* The same for an allocation, whose note for the driver hook (if any) ends
 * with the call. */
#define CALL_REAL_ALLOC(which, type, ...)                                              \
    do {                                                                               \
        type fn_;                                                                      \
        CARVE_SET_FN(fn_, real_fn(which, __builtin_return_address(0)));                \
        cudaError_t r_ = fn_ ? fn_(__VA_ARGS__) : cudaErrorUnknown;                    \
        if (CARVE_UNLIKELY(carve_faults_armed))                                        \
            carve_fault_note_clear();                                                  \
        return r_;                                                                     \
    } while (0)

cudaError_t cudaMalloc(void **devPtr, size_t size) {
    if (served_alloc(devPtr, size, NULL))
        return cudaSuccess;
    CALL_REAL_ALLOC(MALLOC, malloc_fn, devPtr, size);
}

cudaError_t cudaFree(void *devPtr) {
    if (served_free(devPtr, 0, NULL))
        return cudaSuccess;
    free_fn fn;
    CARVE_SET_FN(fn, real_fn(FREE, __builtin_return_address(0)));
    cudaError_t r = fn ? fn(devPtr) : cudaErrorUnknown;
    note_started(); /* cudaFree(NULL) is how programs start the runtime */
    return r;
}

cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream) {
    if (served_alloc(devPtr, size, hStream))
        return cudaSuccess;
    CALL_REAL_ALLOC(MALLOC_ASYNC, malloc_async_fn, devPtr, size, hStream);
}

cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream) {
    if (served_alloc(devPtr, size, hStream))
        return cudaSuccess;
    CALL_REAL_ALLOC(MALLOC_ASYNC_PTSZ, malloc_async_fn, devPtr, size, hStream);
}

cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream) {
    if (served_free(devPtr, 1, hStream))
        return cudaSuccess;
    CALL_REAL(FREE_ASYNC, free_async_fn, devPtr, hStream);
}

cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream) {
    if (served_free(devPtr, 1, hStream))
        return cudaSuccess;
    CALL_REAL(FREE_ASYNC_PTSZ, free_async_fn, devPtr, hStream);
}
