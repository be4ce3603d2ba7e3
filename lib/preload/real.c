/*
 * real.c — the functions the interposer stands in front of, found for real.
 *
 * The interposer exports dlsym, so its own calls to dlsym would come back to
 * itself: libc's dlsym is found once with dlvsym (which the interposer does
 * not shadow), under the symbol versions glibc has used for it on 64-bit
 * Linux. The driver is opened with dlopen("libcuda.so.1") and its functions
 * looked up through that real dlsym, so they are the driver's own, never
 * the interposer's exports. meter.c hands libcarve the same lookup, with
 * the functions that take memory metered (carve_cuda_driver_lookup), so
 * carve's backend never re-enters the interposer.
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

static void init_once(void) {
    find_dlsym();
    if (!real_dlsym)
        return;
    in_init = 1;
    libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    in_init = 0;
    driver_ok = libcuda != NULL;
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
