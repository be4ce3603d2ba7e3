/*
 * lookup.c — the ways a program finds driver functions without linking
 * them, each answered with the interposer's own function where it has one:
 * dlsym (every CUDA runtime, static or shared, dlopens libcuda.so.1 and
 * looks up cuGetProcAddress_v2; libraries look up driver functions by
 * name), and cuGetProcAddress / cuGetProcAddress_v2, through which the
 * runtime fetches every driver function it calls. The runtime's own
 * cudaGetDriverEntryPoint goes through that same cuGetProcAddress, so it
 * needs no hook of its own.
 *
 * The one idea: ask the real lookup first, then compare the function it
 * found with the driver's real entry points that the interposer replaces.
 * A match by address is exact whatever the symbol was called in the
 * request, whatever version was asked for and whichever default-stream
 * flavour (cuMemAllocAsync versus cuMemAllocAsync_ptsz are different
 * functions, so they match different replacements). Only when the driver
 * hands out an address it does not also export is the request's name (with
 * its version and flags) used instead.
 */
#include <string.h>

#include "preload/exports.h"
#include "preload/preload.h"

typedef struct replacement {
    const char *name;      /* the driver's exported name */
    void (*ours)(void);    /* the replacement (any function type fits here) */
    void *real;            /* the driver's function (found on first use) */
    int looked;
} replacement;

/* A function's address as data (ISO C has no direct conversion). */
static void *fn_addr(void (*f)(void)) {
    void *p;
    memcpy(&p, &f, sizeof(p));
    return p;
}
#define FN(f) (void (*)(void))(f)
static replacement table[] = {
    {"cuMemAlloc_v2", FN(cuMemAlloc_v2), NULL, 0},
    {"cuMemFree_v2", FN(cuMemFree_v2), NULL, 0},
    {"cuMemAllocAsync", FN(cuMemAllocAsync), NULL, 0},
    {"cuMemAllocAsync_ptsz", FN(cuMemAllocAsync_ptsz), NULL, 0},
    {"cuMemFreeAsync", FN(cuMemFreeAsync), NULL, 0},
    {"cuMemFreeAsync_ptsz", FN(cuMemFreeAsync_ptsz), NULL, 0},
    {"cuMemGetInfo_v2", FN(cuMemGetInfo_v2), NULL, 0},
    {"cuDeviceTotalMem_v2", FN(cuDeviceTotalMem_v2), NULL, 0},
    {"cuStreamCreate", FN(cuStreamCreate), NULL, 0},
    {"cuStreamCreateWithPriority", FN(cuStreamCreateWithPriority), NULL, 0},
    {"cuStreamDestroy_v2", FN(cuStreamDestroy_v2), NULL, 0},
    {"cuStreamDestroy", FN(cuStreamDestroy), NULL, 0},
    {"cuStreamBeginCapture", FN(cuStreamBeginCapture), NULL, 0},
    {"cuStreamBeginCapture_ptsz", FN(cuStreamBeginCapture_ptsz), NULL, 0},
    {"cuCtxDestroy", FN(cuCtxDestroy), NULL, 0},
    {"cuDevicePrimaryCtxReset", FN(cuDevicePrimaryCtxReset), NULL, 0},
    {"cuStreamBeginCapture_v2", FN(cuStreamBeginCapture_v2), NULL, 0},
    {"cuStreamBeginCapture_v2_ptsz", FN(cuStreamBeginCapture_v2_ptsz), NULL, 0},
    {"cuStreamBeginCaptureToGraph", FN(cuStreamBeginCaptureToGraph), NULL, 0},
    {"cuStreamBeginCaptureToGraph_ptsz", FN(cuStreamBeginCaptureToGraph_ptsz), NULL, 0},
    {"cuStreamEndCapture", FN(cuStreamEndCapture), NULL, 0},
    {"cuStreamEndCapture_ptsz", FN(cuStreamEndCapture_ptsz), NULL, 0},
    {"cuCtxDestroy_v2", FN(cuCtxDestroy_v2), NULL, 0},
    {"cuDevicePrimaryCtxReset_v2", FN(cuDevicePrimaryCtxReset_v2), NULL, 0},
    {"cuDevicePrimaryCtxRelease_v2", FN(cuDevicePrimaryCtxRelease_v2), NULL, 0},
    {"cuDevicePrimaryCtxRelease", FN(cuDevicePrimaryCtxRelease), NULL, 0},
    {"cuDevicePrimaryCtxRetain", FN(cuDevicePrimaryCtxRetain), NULL, 0},
    {"cuCtxEnablePeerAccess", FN(cuCtxEnablePeerAccess), NULL, 0},
    {"cuCtxCreate", FN(cuCtxCreate), NULL, 0},
    {"cuCtxCreate_v2", FN(cuCtxCreate_v2), NULL, 0},
    {"cuCtxCreate_v3", FN(cuCtxCreate_v3), NULL, 0},
    {"cuCtxCreate_v4", FN(cuCtxCreate_v4), NULL, 0},
    {"cuGreenCtxCreate", FN(cuGreenCtxCreate), NULL, 0},
    {"cuGreenCtxStreamCreate", FN(cuGreenCtxStreamCreate), NULL, 0},
    {"cuMemCreate", FN(cuMemCreate), NULL, 0},
    {"cuMemRelease", FN(cuMemRelease), NULL, 0},
    {"cuMemRetainAllocationHandle", FN(cuMemRetainAllocationHandle), NULL, 0},
    {"cuMemMap", FN(cuMemMap), NULL, 0},
    {"cuMemUnmap", FN(cuMemUnmap), NULL, 0},
    {"cuIpcGetMemHandle", FN(cuIpcGetMemHandle), NULL, 0},
    {"cuMemAllocPitch_v2", FN(cuMemAllocPitch_v2), NULL, 0},
    {"cuMemAllocFromPoolAsync", FN(cuMemAllocFromPoolAsync), NULL, 0},
    {"cuMemAllocFromPoolAsync_ptsz", FN(cuMemAllocFromPoolAsync_ptsz), NULL, 0},
    {"cuGetProcAddress", FN(cuGetProcAddress), NULL, 0},
    {"cuGetProcAddress_v2", FN(cuGetProcAddress_v2), NULL, 0},
};
#define NTABLE (sizeof(table) / sizeof(table[0]))

static void *by_address(void *fn) {
    for (size_t i = 0; i < NTABLE; i++) {
        replacement *r = &table[i];
        if (!__atomic_load_n(&r->looked, __ATOMIC_ACQUIRE)) {
            __atomic_store_n(&r->real, carve_real_driver(r->name), __ATOMIC_RELAXED);
            __atomic_store_n(&r->looked, 1, __ATOMIC_RELEASE);
        }
        if (fn == __atomic_load_n(&r->real, __ATOMIC_RELAXED))
            return fn_addr(r->ours);
    }
    return NULL;
}

static void *by_exact_name(const char *name) {
    for (size_t i = 0; i < NTABLE; i++)
        if (strcmp(name, table[i].name) == 0)
            return fn_addr(table[i].ours);
    return NULL;
}

/* The exported name a cuGetProcAddress request means: the base name, its
 * "_v2" from the version that introduced it, "_ptsz" with the per-thread
 * flag for functions that take a stream. */
static void *by_request(const char *symbol, int version, cuuint64_t flags) {
    static const struct {
        const char *base;
        int v2_from;     /* version from which the request means base_v2; 0: never */
        int per_thread;  /* has a _ptsz form */
    } names[] = {
        {"cuMemAlloc", 3020, 0},          {"cuMemFree", 3020, 0},
        {"cuMemGetInfo", 3020, 0},        {"cuMemAllocAsync", 0, 1},
        {"cuDeviceTotalMem", 3020, 0},
        {"cuMemFreeAsync", 0, 1},         {"cuStreamCreate", 0, 0},
        {"cuStreamCreateWithPriority", 0, 0}, {"cuStreamDestroy", 4000, 0},
        {"cuStreamBeginCapture", 10010, 1}, {"cuStreamBeginCaptureToGraph", 0, 1},
        {"cuStreamEndCapture", 0, 1},     {"cuCtxDestroy", 4000, 0},
        {"cuDevicePrimaryCtxReset", 11000, 0}, {"cuDevicePrimaryCtxRelease", 11000, 0},
        {"cuGetProcAddress", 12000, 0},
        {"cuMemCreate", 0, 0},            {"cuMemRelease", 0, 0},
        {"cuMemRetainAllocationHandle", 0, 0}, {"cuMemMap", 0, 0},
        {"cuMemUnmap", 0, 0},             {"cuMemAllocPitch", 3020, 0},
        {"cuMemAllocFromPoolAsync", 0, 1}, {"cuIpcGetMemHandle", 0, 0},
        {"cuDevicePrimaryCtxRetain", 0, 0}, {"cuCtxEnablePeerAccess", 0, 0},
        {"cuGreenCtxCreate", 0, 0},       {"cuGreenCtxStreamCreate", 0, 0},
    };
    /* cuCtxCreate: _v4 from 12.5, _v3 from 11.4, _v2 from 3.2. */
    if (strcmp(symbol, "cuCtxCreate") == 0)
        return by_exact_name(version >= 12050 ? "cuCtxCreate_v4" : version >= 11040 ? "cuCtxCreate_v3"
                                                                   : version >= 3020  ? "cuCtxCreate_v2"
                                                                                      : "cuCtxCreate");
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(symbol, names[i].base) != 0)
            continue;
        /* below v2_from: the unversioned name (the first cuStreamBeginCapture, which took no mode, too) */
        char full[96];
        snprintf(full, sizeof(full), "%s%s%s", names[i].base,
                 names[i].v2_from && version >= names[i].v2_from ? "_v2" : "",
                 names[i].per_thread && (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ? "_ptsz" : "");
        return by_exact_name(full);
    }
    return NULL;
}

static void swap_in(void **pfn, const char *symbol, int version, cuuint64_t flags) {
    if (!pfn || !*pfn)
        return;
    void *ours = by_address(*pfn);
    if (!ours && symbol)
        ours = by_request(symbol, version, flags);
    if (ours)
        *pfn = ours;
}

/* ---- dlsym ---------------------------------------------------------------- */

/* Every lookup but RTLD_NEXT: the real answer, or the interposer's function
 * where it replaces the driver's. */
void *carve_dlsym_lookup(void *handle, const char *name) CARVE_INTERNAL;
CARVE_NOT_SANITIZED void *carve_dlsym_lookup(void *handle, const char *name) {
    void *fn = carve_real_dlsym(handle, name);
    /* Only driver functions are ever replaced, and they all begin with
     * "cu". Any other name is answered before anything else happens here:
     * tools preloaded in front of this library (compute-sanitizer's
     * injection libraries) look up dlopen and friends through this dlsym
     * while they initialize, and must not be made to re-enter themselves
     * through the driver lookup below. */
    if (!fn || !name || name[0] != 'c' || name[1] != 'u' || carve_real_busy())
        return fn;
    void *ours = by_exact_name(name);
    if (!ours)
        ours = by_address(fn);
    return ours ? ours : fn;
}

/* dlsym(RTLD_NEXT, name) means "the next definition after the object that
 * called dlsym", and libc tells the caller by its return address. Called
 * through a C function here, libc would count from this library instead: a
 * tool preloaded behind it that looks up its own wrapped function (dlopen,
 * say) with RTLD_NEXT would be handed itself. So on x86-64 dlsym is a
 * small assembly entry: RTLD_NEXT jumps to libc's dlsym with the
 * caller's return address still in place (the next definition is the
 * caller's business, never replaced), everything else goes to
 * carve_dlsym_lookup. Elsewhere, a C dlsym that answers RTLD_NEXT from here. */
#if defined(__x86_64__) && defined(__ELF__)
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        "dlsym:\n"
        "    cmpq $-1, %rdi\n" /* RTLD_NEXT is ((void *)-1) */
        "    jne carve_dlsym_lookup\n"
        "    pushq %rdi\n"
        "    pushq %rsi\n"
        "    subq $8, %rsp\n"
        "    call carve_real_dlsym_fn\n"
        "    addq $8, %rsp\n"
        "    popq %rsi\n"
        "    popq %rdi\n"
        "    testq %rax, %rax\n"
        "    jz 1f\n"
        "    jmp *%rax\n"
        "1:  ret\n"
        ".size dlsym, .-dlsym\n");
#else
void *dlsym(void *handle, const char *name) { return carve_dlsym_lookup(handle, name); }
#endif

/* ---- cuGetProcAddress ------------------------------------------------------ */

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*gpa2_fn)(const char *, void **, int, cuuint64_t, int *);

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
    static gpa_fn real;
    if (!real)
        CARVE_SET_FN(real, carve_real_driver("cuGetProcAddress"));
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = real(symbol, pfn, cudaVersion, flags);
    if (r == CUDA_SUCCESS)
        swap_in(pfn, symbol, cudaVersion, flags);
    return r;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags, int *status) {
    static gpa2_fn real;
    if (!real)
        CARVE_SET_FN(real, carve_real_driver("cuGetProcAddress_v2"));
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = real(symbol, pfn, cudaVersion, flags, status);
    if (r == CUDA_SUCCESS)
        swap_in(pfn, symbol, cudaVersion, flags);
    return r;
}
