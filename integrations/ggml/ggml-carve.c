/*
 * ggml-carve.c — the adapter: ggml's CUDA allocations from carve arenas.
 *
 * The one idea: ggml asks its allocator for memory in two ways, which map
 * onto carve's stream-ordered arena directly. Pool memory comes with the
 * pool's stream: carve_alloc and carve_free on that stream, reused at once
 * by later work on it, as ggml's own pools do. Backend buffers come with no
 * stream (any stream may use them): carve_alloc on the default stream, and
 * at their free a device synchronization first, which is what cudaFree did
 * for them. One arena per device, created at its first allocation from the
 * configuration given to ggml_carve_init; the pointer is published with a
 * release store, so the allocation path reads it without a lock.
 */
#include "ggml-carve.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "ggml-cuda-allocator.h"

#define GGML_CARVE_MAX_DEVICES 64

static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;
static char conf_text[4096];
static int installed;
static carve_arena *arenas[GGML_CARVE_MAX_DEVICES];
static _Thread_local char error_text[1024];

static void set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_text, sizeof(error_text), fmt, ap);
    va_end(ap);
}

const char *ggml_carve_error(void) { return error_text; }

carve_arena *ggml_carve_arena(int device) {
    if (device < 0 || device >= GGML_CARVE_MAX_DEVICES) {
        set_error("device %d: the adapter serves devices 0 to %d", device, GGML_CARVE_MAX_DEVICES - 1);
        return NULL;
    }
    carve_arena *a = __atomic_load_n(&arenas[device], __ATOMIC_ACQUIRE);
    if (a)
        return a;
    pthread_mutex_lock(&create_lock);
    a = arenas[device];
    if (!a && !installed) {
        set_error("ggml_carve_init has not been called");
    } else if (!a) {
        carve_config cfg;
        char name[32];
        carve_status st = carve_conf_parse(conf_text, device, &cfg);
        if (st == CARVE_OK) {
            snprintf(name, sizeof(name), "ggml cuda%d", device);
            cfg.device = device;
            cfg.name = name;
            st = carve_arena_create(&cfg, &a);
        }
        if (st != CARVE_OK)
            set_error("device %d: no carve arena: %s", device, carve_last_error(NULL));
        else
            __atomic_store_n(&arenas[device], a, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&create_lock);
    return a;
}

static void *on_alloc(void *user, int device, size_t size, void *stream) {
    (void)user;
    carve_arena *a = ggml_carve_arena(device);
    if (!a) {
        fprintf(stderr, "ggml-carve: %s\n", error_text);
        return NULL;
    }
    void *p = NULL;
    carve_status st = carve_alloc(a, size, (carve_stream)stream, &p);
    if (st != CARVE_OK) {
        /* ggml says what it could not allocate; carve says why. */
        fprintf(stderr, "ggml-carve: %s\n", carve_last_error(a));
        return NULL;
    }
    return p;
}

static void on_free(void *user, int device, void *ptr, void *stream) {
    (void)user;
    carve_arena *a = ggml_carve_arena(device);
    if (!a || !ptr)
        return;
    if (!stream) {
        /* A backend buffer: work on any stream may still read it. */
        int prev = device;
        (void)cudaGetDevice(&prev);
        (void)cudaSetDevice(device);
        (void)cudaDeviceSynchronize();
        (void)cudaSetDevice(prev);
    }
    if (carve_free(a, ptr) != CARVE_OK)
        fprintf(stderr, "ggml-carve: device %d: %s\n", device, carve_last_error(a));
}

/* What ggml (and llama.cpp's planning) sees: the limit as the device's
 * total, and as free what the arena may still reserve under it (and the
 * device has) plus what it holds cached. */
static void on_get_memory(void *user, int device, size_t *free_bytes, size_t *total_bytes) {
    (void)user;
    carve_arena *a = ggml_carve_arena(device);
    carve_stats s;
    if (!a || carve_get_stats(a, &s) != CARVE_OK)
        return;
    size_t headroom = s.limit_bytes > s.reserved_bytes ? s.limit_bytes - s.reserved_bytes : 0;
    size_t cached = s.reserved_bytes > s.allocated_bytes ? s.reserved_bytes - s.allocated_bytes : 0;
    *free_bytes = (headroom < *free_bytes ? headroom : *free_bytes) + cached;
    if (s.limit_bytes < *total_bytes)
        *total_bytes = s.limit_bytes;
}

int ggml_carve_init(const char *conf) {
    if (!conf)
        conf = "";
    if (installed) {
        set_error("ggml_carve_init was already called");
        return -1;
    }
    if (strlen(conf) >= sizeof(conf_text)) {
        set_error("the configuration is longer than %zu bytes", sizeof(conf_text) - 1);
        return -1;
    }
    carve_config cfg;
    if (carve_conf_parse(conf, 0, &cfg) != CARVE_OK || carve_config_check(&cfg) != CARVE_OK) {
        set_error("configuration '%s': %s", conf, carve_last_error(NULL));
        return -1;
    }
    strcpy(conf_text, conf);
    struct ggml_backend_cuda_allocator alloc = {on_alloc, on_free, on_get_memory, NULL};
    if (!ggml_backend_cuda_set_allocator(&alloc)) {
        set_error("ggml refused the allocator: call ggml_carve_init before the first CUDA backend or buffer");
        return -1;
    }
    installed = 1;
    return 0;
}

size_t ggml_carve_memory_allocated(int device) {
    return device >= 0 && device < GGML_CARVE_MAX_DEVICES
               ? carve_memory_allocated(__atomic_load_n(&arenas[device], __ATOMIC_ACQUIRE))
               : 0;
}

size_t ggml_carve_memory_reserved(int device) {
    return device >= 0 && device < GGML_CARVE_MAX_DEVICES
               ? carve_memory_reserved(__atomic_load_n(&arenas[device], __ATOMIC_ACQUIRE))
               : 0;
}

carve_status ggml_carve_empty_cache(void) {
    carve_status first = CARVE_OK;
    for (int d = 0; d < GGML_CARVE_MAX_DEVICES; d++) {
        carve_arena *a = __atomic_load_n(&arenas[d], __ATOMIC_ACQUIRE);
        if (!a)
            continue;
        carve_status st = carve_empty_cache(a);
        if (st != CARVE_OK && first == CARVE_OK) {
            set_error("device %d: %s", d, carve_last_error(a));
            first = st;
        }
    }
    return first;
}

void ggml_carve_report(FILE *f) {
    for (int d = 0; d < GGML_CARVE_MAX_DEVICES; d++) {
        carve_arena *a = __atomic_load_n(&arenas[d], __ATOMIC_ACQUIRE);
        carve_stats s;
        if (!a || carve_get_stats(a, &s) != CARVE_OK)
            continue;
        char b1[32], b2[32], b3[32], b4[32];
        fprintf(f,
                "ggml-carve: device %d: peak requested %s, peak allocated %s, peak reserved %s, limit %s, "
                "%llu out of memory; peak_reserved_bytes=%zu peak_requested_bytes=%zu\n",
                d, carve_format_bytes(b1, sizeof(b1), s.requested_bytes_peak),
                carve_format_bytes(b2, sizeof(b2), s.allocated_bytes_peak),
                carve_format_bytes(b3, sizeof(b3), s.reserved_bytes_peak), carve_format_bytes(b4, sizeof(b4), s.limit_bytes),
                (unsigned long long)s.num_ooms, s.reserved_bytes_peak, s.requested_bytes_peak);
    }
}
