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
 *
 * CUDA graphs (ggml built with GGML_CUDA_GRAPHS): ggml captures a graph's
 * evaluation on its stream, pool allocations and frees included, and
 * replays it. What a capture allocates must stay the graph's for every
 * replay, so a stream seen capturing is routed to a carve graph pool of its
 * own while the buffers it allocated in the capture are live ("CUDA graphs"
 * below).
 */
#include "ggml-carve.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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
#ifdef GGML_CARVE_TEST_BACKEND /* tests/integrations: the adapter's logic on a backend with no GPU */
            cfg.backend = GGML_CARVE_TEST_BACKEND;
#endif
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

/* ---- CUDA graphs --------------------------------------------------------
 *
 * While ggml captures a stream, carve must serve the stream's allocations
 * from a graph pool (include/carve.h, "CUDA graphs"): a captured stream of
 * the arena's own takes only what its pool holds free, memory freed in the
 * capture is not reused until the device is synchronized, and after the
 * capture the memory could go to other allocations while the graph still
 * writes it at every replay. So a stream seen capturing is routed to a
 * graph pool, one per device and stream, created at the stream's first
 * capture (carve_graph_pool_create), from the first allocation seen
 * capturing (carve_graph_pool_begin) to the free of the last buffer it
 * allocated in the capture, or to the first allocation or free on the
 * stream seen no longer capturing, whichever comes first
 * (carve_graph_pool_end). ggml's pool buffers live within one operation, so
 * in a capture the route ends after each operation and begins again at the
 * next one's first allocation: the memory freed meanwhile stays in the
 * graph pool and serves the capture's next operations. Ending the route
 * with the capture's last buffer matters: after the capture ggml may
 * destroy the stream (ggml_backend_free) with no further allocation on it,
 * and carve asks the driver about the streams routed to its graph pools.
 *
 * All graphs ggml captures on one stream are replayed one after another on
 * that stream, never at once, so they share the stream's graph pool (which
 * then holds the largest capture's temporaries, in carve's granules, as
 * ggml's own pools keep their largest). ggml may replay a graph as long as
 * its backend lives and the adapter cannot see that end, so a graph pool is
 * never released: it keeps its memory until the process ends, out of reach
 * of carve_empty_cache and of every other stream. */

typedef struct graph_stream {
    int device;
    void *stream;
    carve_graph_pool *pool;
    int routed;            /* carve_graph_pool_begin made, not yet ended */
    void **live;           /* buffers allocated in a capture, not yet freed */
    size_t nlive, cap;
} graph_stream;

static pthread_mutex_t graph_lock = PTHREAD_MUTEX_INITIALIZER;
static graph_stream *graph_streams; /* under graph_lock; entries never go */
static size_t graph_nstreams, graph_cap;
/* Routed streams plus live captured buffers (atomic): while 0, the free path
 * and the allocation path of a stream not being captured skip the table. */
static unsigned graph_busy;
static uint64_t captured_allocs[GGML_CARVE_MAX_DEVICES]; /* atomic */

/* cudaStreamIsCapturing: the runtime reads the stream's capture state from
 * the driver; no device work and no synchronization. Its cost, expected
 * well under a microsecond beside the kernel launches each pool allocation
 * comes with (the one that fills it, the one that reads it), is measured
 * by ggml-carve-models (an INFO line).
 * A stream whose capture was invalidated still counts as captured: its
 * allocations are part of the capture until ggml ends it. */
static int stream_capturing(void *stream) {
    enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing((cudaStream_t)stream, &status) != cudaSuccess) {
        (void)cudaGetLastError(); /* so that ggml's next error check does not see it */
        return 0;
    }
    return status != cudaStreamCaptureStatusNone;
}

/* graph_lock held: the entry of (device, stream), added (with its graph
 * pool) when add is set; NULL when absent or on failure (error_text set). */
static graph_stream *graph_find(carve_arena *a, int device, void *stream, int add) {
    for (size_t i = 0; i < graph_nstreams; i++)
        if (graph_streams[i].device == device && graph_streams[i].stream == stream)
            return &graph_streams[i];
    if (!add)
        return NULL;
    if (graph_nstreams == graph_cap) {
        size_t cap = graph_cap ? 2 * graph_cap : 8;
        graph_stream *t = realloc(graph_streams, cap * sizeof(*t));
        if (!t) {
            set_error("device %d: no host memory for a CUDA graph's stream", device);
            return NULL;
        }
        graph_streams = t;
        graph_cap = cap;
    }
    graph_stream *g = &graph_streams[graph_nstreams];
    memset(g, 0, sizeof(*g));
    if (carve_graph_pool_create(a, &g->pool) != CARVE_OK) {
        set_error("device %d: no graph pool for a CUDA graph captured on stream %p: %s", device, stream,
                  carve_last_error(a));
        return NULL;
    }
    g->device = device;
    g->stream = stream;
    graph_nstreams++;
    return g;
}

/* graph_lock held: allocations on g's stream come from its own pool again. */
static void graph_unroute(carve_arena *a, graph_stream *g) {
    if (carve_graph_pool_end(a, g->pool, (carve_stream)g->stream) != CARVE_OK)
        fprintf(stderr, "ggml-carve: device %d: %s\n", g->device, carve_last_error(a));
    g->routed = 0;
    __atomic_sub_fetch(&graph_busy, 1, __ATOMIC_RELEASE);
}

/* A pool allocation on a stream being captured, or on any stream while a
 * route or a captured buffer exists somewhere. NULL on failure, with the
 * reason on stderr. */
static void *graph_alloc(carve_arena *a, int device, size_t size, void *stream, int capturing) {
    void *p = NULL;
    pthread_mutex_lock(&graph_lock);
    graph_stream *g = graph_find(a, device, stream, capturing);
    if (!capturing) {
        if (g && g->routed) /* the first allocation seen after the capture */
            graph_unroute(a, g);
        if (carve_alloc(a, size, (carve_stream)stream, &p) != CARVE_OK)
            fprintf(stderr, "ggml-carve: %s\n", carve_last_error(a));
    } else if (!g) {
        fprintf(stderr, "ggml-carve: %s\n", error_text);
    } else if (!g->routed && carve_graph_pool_begin(a, g->pool, (carve_stream)stream) != CARVE_OK) {
        fprintf(stderr, "ggml-carve: device %d: stream %p is being captured into a CUDA graph but cannot be "
                "routed to its graph pool: %s\n", device, stream, carve_last_error(a));
    } else {
        if (!g->routed) {
            g->routed = 1;
            __atomic_add_fetch(&graph_busy, 1, __ATOMIC_RELEASE);
        }
        void **t = g->nlive < g->cap ? g->live : realloc(g->live, (g->cap ? 2 * g->cap : 16) * sizeof(void *));
        if (!t) {
            fprintf(stderr, "ggml-carve: device %d: no host memory to track a captured allocation\n", device);
        } else {
            if (t != g->live) {
                g->live = t;
                g->cap = g->cap ? 2 * g->cap : 16;
            }
            if (carve_alloc(a, size, (carve_stream)stream, &p) != CARVE_OK)
                fprintf(stderr, "ggml-carve: %s\n", carve_last_error(a));
            else if (p) {
                g->live[g->nlive++] = p;
                __atomic_add_fetch(&graph_busy, 1, __ATOMIC_RELEASE);
                __atomic_add_fetch(&captured_allocs[device], 1, __ATOMIC_RELAXED);
            }
        }
        if (g->nlive == 0) /* nothing of the capture live: no route left behind */
            graph_unroute(a, g);
    }
    pthread_mutex_unlock(&graph_lock);
    return p;
}

/* A pool free while a route or a captured buffer exists somewhere. A graph
 * pool's buffer goes back into that pool whatever the route (carve_free). */
static carve_status graph_free(carve_arena *a, int device, void *ptr, void *stream) {
    pthread_mutex_lock(&graph_lock);
    graph_stream *g = graph_find(a, device, stream, 0);
    for (size_t i = 0; g && i < g->nlive; i++)
        if (g->live[i] == ptr) {
            g->live[i] = g->live[--g->nlive];
            __atomic_sub_fetch(&graph_busy, 1, __ATOMIC_RELEASE);
            break;
        }
    carve_status st = carve_free(a, ptr);
    if (g && g->routed && (g->nlive == 0 || !stream_capturing(stream)))
        graph_unroute(a, g);
    pthread_mutex_unlock(&graph_lock);
    return st;
}

uint64_t ggml_carve_captured_allocations(int device) {
    return device >= 0 && device < GGML_CARVE_MAX_DEVICES
               ? __atomic_load_n(&captured_allocs[device], __ATOMIC_RELAXED)
               : 0;
}

/* ---- the hook ---------------------------------------------------------- */

static void *on_alloc(void *user, int device, size_t size, void *stream) {
    (void)user;
    carve_arena *a = ggml_carve_arena(device);
    if (!a) {
        fprintf(stderr, "ggml-carve: %s\n", error_text);
        return NULL;
    }
    void *p = NULL;
    if (stream) {
        /* A pool allocation outside any capture, with no route anywhere:
         * the capture question and one atomic load beside carve_alloc. */
        int capturing = stream_capturing(stream);
        if (capturing || __atomic_load_n(&graph_busy, __ATOMIC_ACQUIRE))
            return graph_alloc(a, device, size, stream, capturing);
    }
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
    carve_status st = stream && __atomic_load_n(&graph_busy, __ATOMIC_ACQUIRE) ? graph_free(a, device, ptr, stream)
                                                                               : carve_free(a, ptr);
    if (st != CARVE_OK)
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
        unsigned long long captured = (unsigned long long)ggml_carve_captured_allocations(d);
        fprintf(f,
                "ggml-carve: device %d: peak requested %s, peak allocated %s, peak reserved %s, limit %s, "
                "%llu out of memory, %llu pool allocations captured into CUDA graphs; peak_reserved_bytes=%zu "
                "peak_requested_bytes=%zu captured_allocations=%llu\n",
                d, carve_format_bytes(b1, sizeof(b1), s.requested_bytes_peak),
                carve_format_bytes(b2, sizeof(b2), s.allocated_bytes_peak),
                carve_format_bytes(b3, sizeof(b3), s.reserved_bytes_peak), carve_format_bytes(b4, sizeof(b4), s.limit_bytes),
                (unsigned long long)s.num_ooms, captured, s.reserved_bytes_peak, s.requested_bytes_peak, captured);
    }
}
