/*
 * runtime_floor.c — libdropin_floor.so, a measuring instrument for the
 * drop-in benchmark, not part of carve: what a CUDA runtime's
 * cudaMalloc+cudaFree costs by itself, with a driver behind it that does
 * (almost) nothing.
 *
 * Preloaded instead of carve's interposer (LD_PRELOAD=libdropin_floor.so
 * program), it answers the runtime's lookups of the driver the way the
 * interposer does: dlsym(handle, "cuGetProcAddress_v2") on the libcuda
 * handle the runtime opened, then cuGetProcAddress for each driver function.
 * What it hands back depends on DROPIN_FLOOR:
 *
 *   stand-in (the default)  cuMemAlloc_v2 and cuMemFree_v2 become a
 *                           one-buffer cache per thread: a free of the
 *                           buffer this thread allocated last keeps it, the
 *                           next allocation of that size gets it back. Timing
 *                           a loop of pairs then times the runtime's own
 *                           layer plus a few nanoseconds; carve-run's time
 *                           minus this one is carve's share.
 *   count                   every driver function the runtime takes from
 *                           cuGetProcAddress is wrapped in a counter (x86-64
 *                           only), and the counts are printed to stderr at
 *                           exit: which driver calls one cudaMalloc makes.
 *
 * Limits: dlsym(RTLD_NEXT, ...) called by the program is answered as if
 * from this library (the benchmark programs do not use it), and functions
 * are only seen when the runtime finds them through cuGetProcAddress (every
 * CUDA 12 runtime does).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr_t;
typedef CUresult (*gpa_fn)(const char *, void **, int, unsigned long long);
typedef CUresult (*gpa2_fn)(const char *, void **, int, unsigned long long, int *);
typedef CUresult (*alloc_fn)(CUdeviceptr_t *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr_t);
typedef void *(*dlsym_fn)(void *, const char *);

#define EXPORT __attribute__((visibility("default")))

static dlsym_fn real_dlsym(void) {
    static dlsym_fn fn;
    if (!fn) {
        void *p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!p)
            p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        memcpy(&fn, &p, sizeof(fn));
    }
    return fn;
}

static int mode(void) { /* 1: stand-in, 2: count */
    static int m;
    if (!m) {
        const char *e = getenv("DROPIN_FLOOR");
        m = e && strcmp(e, "count") == 0 ? 2 : 1;
    }
    return m;
}

/* ---- stand-in: a one-buffer cache per thread ------------------------------ */

static alloc_fn real_alloc;
static free_fn real_free;
static __thread CUdeviceptr_t last_ptr, kept_ptr;
static __thread size_t last_size, kept_size;
static unsigned long long served, passed;

static CUresult floor_alloc(CUdeviceptr_t *d, size_t n) {
    if (kept_ptr && kept_size == n && d) {
        *d = kept_ptr;
        kept_ptr = 0;
        last_ptr = *d;
        last_size = n;
        __atomic_add_fetch(&served, 1, __ATOMIC_RELAXED);
        return 0;
    }
    __atomic_add_fetch(&passed, 1, __ATOMIC_RELAXED);
    CUresult r = real_alloc(d, n);
    if (r == 0 && d) {
        last_ptr = *d;
        last_size = n;
    }
    return r;
}

static CUresult floor_free(CUdeviceptr_t p) {
    if (p && p == last_ptr && !kept_ptr) {
        kept_ptr = p;
        kept_size = last_size;
        last_ptr = 0;
        return 0;
    }
    if (p == last_ptr)
        last_ptr = 0;
    return real_free(p);
}

/* ---- count: a counting trampoline per driver function ----------------------- */

#define NCOUNT 2048
#if defined(__x86_64__) && defined(__ELF__)
unsigned long long dropin_floor_counts[NCOUNT] __attribute__((visibility("hidden")));
void *dropin_floor_reals[NCOUNT] __attribute__((visibility("hidden")));
extern char dropin_floor_tramps[] __attribute__((visibility("hidden")));
/* Trampoline i (16 bytes): count, then jump to the real function with every
 * argument register untouched. */
__asm__(".text\n.balign 16\n.globl dropin_floor_tramps\n.hidden dropin_floor_tramps\n"
        "dropin_floor_tramps:\n"
        ".set i, 0\n.rept 2048\n"
        "lock incq dropin_floor_counts+8*i(%rip)\n"
        "jmp *dropin_floor_reals+8*i(%rip)\n"
        ".balign 16\n.set i, i+1\n.endr\n");
#define CAN_COUNT 1
#else
#define CAN_COUNT 0
#endif
static char *names[NCOUNT];
static int ncount;

static void report(void) {
#if CAN_COUNT
    fprintf(stderr, "dropin_floor: driver calls through cuGetProcAddress\n");
    for (int i = 0; i < ncount; i++)
        if (dropin_floor_counts[i])
            fprintf(stderr, "dropin_floor %12llu %s\n", dropin_floor_counts[i], names[i]);
#endif
}

static void stand_in_report(void) {
    fprintf(stderr, "dropin_floor: %llu allocations served by the stand-in, %llu passed to the driver\n",
            served, passed);
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags);
EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags,
                                    int *status);

/* Replace or wrap what the real cuGetProcAddress found for symbol. */
static void swap(const char *symbol, void **pfn, int version, unsigned long long flags) {
    static int once;
    if (!pfn || !*pfn || !symbol)
        return;
    if (!__atomic_exchange_n(&once, 1, __ATOMIC_ACQ_REL))
        atexit(mode() == 2 ? report : stand_in_report);
    if (strcmp(symbol, "cuGetProcAddress") == 0) { /* later lookups come here too */
        if (version >= 12000) {
            gpa2_fn f = cuGetProcAddress_v2;
            memcpy(pfn, &f, sizeof(*pfn));
        } else {
            gpa_fn f = cuGetProcAddress;
            memcpy(pfn, &f, sizeof(*pfn));
        }
        return;
    }
    if (mode() == 1) {
        if (strcmp(symbol, "cuMemAlloc") == 0) {
            memcpy(&real_alloc, pfn, sizeof(*pfn));
            alloc_fn f = floor_alloc;
            memcpy(pfn, &f, sizeof(*pfn));
        } else if (strcmp(symbol, "cuMemFree") == 0) {
            memcpy(&real_free, pfn, sizeof(*pfn));
            free_fn f = floor_free;
            memcpy(pfn, &f, sizeof(*pfn));
        }
        return;
    }
#if CAN_COUNT
    int i = __atomic_fetch_add(&ncount, 1, __ATOMIC_ACQ_REL);
    if (i >= NCOUNT)
        return;
    char buf[160];
    snprintf(buf, sizeof(buf), "%s%s", symbol, flags & 2 ? " (per-thread stream)" : "");
    names[i] = strdup(buf);
    dropin_floor_reals[i] = *pfn;
    *pfn = dropin_floor_tramps + 16 * i;
#else
    (void)flags;
#endif
}

static void *real_driver(const char *name) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    return h ? real_dlsym()(h, name) : NULL;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags) {
    gpa_fn real;
    void *p = real_driver("cuGetProcAddress");
    memcpy(&real, &p, sizeof(real));
    if (!real)
        return 3; /* CUDA_ERROR_NOT_INITIALIZED */
    CUresult r = real(symbol, pfn, version, flags);
    if (r == 0)
        swap(symbol, pfn, version, flags);
    return r;
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags,
                                    int *status) {
    gpa2_fn real;
    void *p = real_driver("cuGetProcAddress_v2");
    memcpy(&real, &p, sizeof(real));
    if (!real)
        return 3;
    CUresult r = real(symbol, pfn, version, flags, status);
    if (r == 0)
        swap(symbol, pfn, version, flags);
    return r;
}

EXPORT void *dlsym(void *handle, const char *name) {
    void *fn = real_dlsym()(handle, name);
    if (fn && strcmp(name, "cuGetProcAddress_v2") == 0) {
        gpa2_fn f = cuGetProcAddress_v2;
        memcpy(&fn, &f, sizeof(fn));
    } else if (fn && strcmp(name, "cuGetProcAddress") == 0) {
        gpa_fn f = cuGetProcAddress;
        memcpy(&fn, &f, sizeof(fn));
    }
    return fn;
}
