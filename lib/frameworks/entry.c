/*
 * entry.c — the callbacks PyTorch's pluggable allocator and CuPy's C
 * allocator call, with exactly the C signatures those frameworks fix.
 *
 * The one idea: a framework's callback carries a device and (for PyTorch) a
 * stream but no arena and no way to report a reason, so each callback is a
 * thin shim over the routed calls of route.c, which pick the arena from the
 * calling thread and leave the reason for a failure in
 * carve_last_error(NULL).
 */
#include "carve_frameworks.h"
#include "engine/error.h"

void *carve_torch_alloc(ssize_t size, int device, carve_stream stream) {
    if (size < 0) {
        carve_fail(NULL, CARVE_ERR_INVALID, "carve_torch_alloc: negative size %lld", (long long)size);
        return NULL;
    }
    void *p = NULL;
    (void)carve_route_alloc(NULL, (size_t)size, device, stream, &p);
    return p;
}

/* Frees the callbacks could not make: the framework believes the memory
 * given back, carve still counts it live. */
static unsigned long long failed_frees;

unsigned long long carve_frameworks_failed_frees(void) { return __atomic_load_n(&failed_frees, __ATOMIC_RELAXED); }

void carve_torch_free(void *ptr, ssize_t size, int device, carve_stream stream) {
    (void)size;
    (void)stream;
    if (carve_route_free(ptr, device) != CARVE_OK)
        __atomic_add_fetch(&failed_frees, 1, __ATOMIC_RELAXED);
}

void carve_torch_empty_cache(void) { (void)carve_route_empty_caches(); }

void carve_torch_set_memory_fraction(double fraction, int device) {
    (void)carve_device_set_limit_fraction(device, fraction);
}

void carve_torch_record_stream(void *ptr, carve_stream stream) {
    (void)carve_route_record_stream(ptr, -1, stream);
}

void *carve_cupy_malloc(void *param, size_t size, int device_id) {
    void *p = NULL;
    (void)carve_route_alloc(NULL, size, device_id, (carve_stream)param, &p);
    return p;
}

void carve_cupy_free(void *param, void *ptr, int device_id) {
    (void)param;
    if (carve_route_free(ptr, device_id) != CARVE_OK)
        __atomic_add_fetch(&failed_frees, 1, __ATOMIC_RELAXED);
}
