/*
 * real.c — the functions the interposer stands in front of, found for real.
 *
 * The interposer exports dlsym, so its own calls to dlsym would come back to
 * itself: libc's dlsym is found once with dlvsym (which the interposer does
 * not shadow), under the symbol versions glibc has used for it on 64-bit
 * Linux. The driver is opened with dlopen("libcuda.so.1") and its functions
 * looked up through that real dlsym, so they are the driver's own, never
 * the interposer's exports. Before any arena exists, libcarve is handed the
 * same lookup (carve_cuda_driver_lookup): carve's backend then allocates
 * with the real cuMemAlloc and never re-enters the interposer.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "preload/preload.h"

typedef void *(*dlsym_fn)(void *, const char *);

static dlsym_fn real_dlsym;
static void *libcuda;
static __thread int in_init; /* the driver's constructors may call dlsym meanwhile */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int driver_ok;

CARVE_NOT_SANITIZED static void find_dlsym(void) {
    static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0"};
    for (size_t i = 0; !real_dlsym && i < sizeof(versions) / sizeof(versions[0]); i++)
        CARVE_SET_FN(real_dlsym, dlvsym(RTLD_NEXT, "dlsym", versions[i]));
}

/* The driver's functions by name, and carve's own question about captures. */
static int capture_active(void) { return !carve_capture_may_record(); }

static void *lookup_real(const char *name, void *handle) {
    if (strcmp(name, "carve_capture_active") == 0) {
        void *p;
        int (*f)(void) = capture_active;
        memcpy(&p, &f, sizeof(p));
        return p;
    }
    return real_dlsym(handle, name);
}

static void init_once(void) {
    find_dlsym();
    if (!real_dlsym)
        return;
    in_init = 1;
    libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    in_init = 0;
    if (!libcuda)
        return;
    driver_ok = carve_cuda_driver_lookup(lookup_real, libcuda) == CARVE_OK;
}

CARVE_NOT_SANITIZED int carve_real_busy(void) { return in_init; }

int carve_real_init(void) {
    pthread_once(&once, init_once);
    return driver_ok ? 0 : -1;
}

CARVE_NOT_SANITIZED void *carve_real_dlsym_fn(void) {
    if (!real_dlsym)
        find_dlsym();
    void *p;
    memcpy(&p, &real_dlsym, sizeof(p));
    return p;
}

CARVE_NOT_SANITIZED void *carve_real_dlsym(void *handle, const char *name) {
    if (!real_dlsym)
        find_dlsym(); /* dlsym may be called before anything else, from a constructor */
    return real_dlsym ? real_dlsym(handle, name) : NULL;
}

void *carve_real_driver(const char *name) {
    carve_real_init();
    return libcuda ? carve_real_dlsym(libcuda, name) : NULL;
}
