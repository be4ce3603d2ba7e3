// _torch_shim.cpp — the C++ side of carve.torch: PyTorch's pluggable
// allocator calls these instead of libcarve's C entry points, so that a
// failure can be raised as PyTorch's own out-of-memory error.
//
// The one idea: PyTorch's CUDAPluggableAllocator hands whatever its alloc
// function returns to a tensor, NULL included, and only a C++ exception can
// stop it; C cannot throw one. carve.torch compiles this file against the
// installed torch's headers (once, cached) and hands PyTorch its functions:
// the allocation calls carve_route_alloc and, when carve runs out of memory
// (CARVE_ERR_OOM), throws c10::OutOfMemoryError with carve's explanation,
// which PyTorch turns into torch.cuda.OutOfMemoryError wherever the
// allocation happened (autograd's threads pass it on to the caller of
// backward). Any other failure (an arena retired under a routing block, no
// such device, a driver error) is not out of memory,
// and code that retries smaller after an OutOfMemoryError must not loop on
// it: it throws c10::Error (a RuntimeError in Python) with the status name
// and carve's explanation. The
// memory-fraction hook throws c10::Error when carve refuses the limit, so
// torch.cuda.set_per_process_memory_fraction raises instead of doing
// nothing. libcarve is not linked: carve_torch_shim_init finds its functions
// in the copy the carve package already loaded. Messages are formatted with
// snprintf and handed to c10 as one string: streaming numbers through the
// iostream code instantiated here crashed inside PyTorch 2.11's process (an
// H100 run), while c10's own formatting of a string is done in libc10.
//
// CUDA graphs: PyTorch's graph-pool hooks take a C++ std::function (the
// filter saying whether a stream is being captured by this graph), so they
// live here too. A PyTorch pool id (device, MempoolId_t) gets carve graph
// pools in the device's default arena, one per stream it captures on (carve
// routes one stream to a graph pool at a time). begin remembers the filter;
// an allocation on the device while a filter is active asks it about the
// allocation's stream and, when it says yes, routes that stream to a graph
// pool of the id (carve_graph_pool_begin, once per stream) and allocates
// from the default arena, whatever arena block the thread is in; an
// allocation the filter does not take routes its stream back first (carve
// routes streams, not allocations), so that it never finds the graph's
// memory. end routes every stream back (carve_graph_pool_end), and gives
// the pools back when the id's last release came during the capture;
// release, when the id's last
// user is gone, gives the pools' memory back (carve_graph_pool_release,
// which synchronizes the device; outside the lock, retried at the next
// release or end when a capture elsewhere refused it). A release hook must
// not throw (PyTorch calls it from a destructor): failures wait for a retry.
#include <c10/util/Exception.h>

#include <dlfcn.h>
#include <sys/types.h>

#include <atomic>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

// cudaStream_t is struct CUstream_st * (CUDA's driver_types.h): declared at
// global scope, so that the filter below is exactly PyTorch's
// std::function<bool(cudaStream_t)>.
struct CUstream_st;

namespace {

using stream_t = CUstream_st *;
using pool_id = std::pair<unsigned long long, unsigned long long>; // c10::cuda::MempoolId_t
using capture_filter = std::function<bool(stream_t)>;

int (*c_route_alloc)(void *, size_t, int, stream_t, void **);
int (*c_device_arena)(int, void **);
int (*c_graph_create)(void *, void **);
int (*c_graph_begin)(void *, void *, stream_t);
int (*c_graph_end)(void *, void *, stream_t);
int (*c_graph_release)(void *, void *);
void (*c_free)(void *, ssize_t, int, stream_t);
const char *(*c_last_error)(const void *);
int (*c_set_fraction)(int, double);
const char *(*c_status_str)(int);

std::string shim_reason() {
    const char *m = c_last_error ? c_last_error(nullptr) : nullptr;
    return m && *m ? std::string(m) : std::string("no reason recorded");
}

std::string oom_message(ssize_t size, int device) {
    char head[160];
    snprintf(head, sizeof(head), "CUDA out of memory (carve). Tried to allocate %lld bytes on device %d. ",
             (long long)size, device);
    return std::string(head) + shim_reason();
}

std::string alloc_error_message(ssize_t size, int device, int st) {
    char head[160];
    snprintf(head, sizeof(head), "carve cannot allocate %lld bytes on device %d: ", (long long)size, device);
    return std::string(head) + shim_reason() + " [" + (c_status_str ? c_status_str(st) : "?") + "]";
}

constexpr int kOom = 2; // CARVE_ERR_OOM (carve.h)

std::string fraction_message(double fraction, int device, int st) {
    char head[160];
    snprintf(head, sizeof(head), "carve cannot apply set_per_process_memory_fraction(%g, %d): ", fraction, device);
    return std::string(head) + shim_reason() + " [" + (c_status_str ? c_status_str(st) : "?") + "]";
}

// ---- CUDA graphs ----

// One carve graph pool of a PyTorch pool id: one stream routed at a time.
struct graph_pool {
    void *g;
    stream_t stream;  // the stream routed to it now, or the one routed last
    bool routed;
};

// A PyTorch pool id on a device.
struct pool_entry {
    int device;
    pool_id id;
    void *arena;                   // the device's default arena
    int uses;                      // begins not yet matched by a release
    std::vector<graph_pool> pools;
    capture_filter filter;         // set from begin to end
};

std::mutex g_graph_mu;                 // guards g_entries and g_deferred
std::vector<pool_entry> g_entries;
std::vector<std::pair<void *, void *>> g_deferred; // (arena, pool) whose release was refused
std::atomic<int> g_filters{0};          // entries with a filter set: the alloc's one check

pool_entry *find_entry(int device, const pool_id &id) {
    for (auto &e : g_entries)
        if (e.device == device && e.id == id)
            return &e;
    return nullptr;
}

std::string graph_message(const char *what, int device, int st) {
    char head[160];
    snprintf(head, sizeof(head), "carve cannot %s for a CUDA graph on device %d: ", what, device);
    return std::string(head) + shim_reason() + " [" + (c_status_str ? c_status_str(st) : "?") + "]";
}

// g_graph_mu held. e's graph pool for stream, routed to it now: the one
// routed to it already, else one that served stream last, else any other
// not routed, else a new one. Throws c10::Error when carve refuses.
void route_stream(pool_entry &e, stream_t stream) {
    graph_pool *free_one = nullptr;
    for (auto &p : e.pools) {
        if (p.routed && p.stream == stream)
            return;
        if (!p.routed && (!free_one || p.stream == stream))
            free_one = &p;
    }
    if (!free_one) {
        void *g = nullptr;
        int st = c_graph_create(e.arena, &g);
        if (st != 0) {
            const std::string msg = graph_message("make a graph pool", e.device, st);
            TORCH_CHECK(false, msg.c_str());
        }
        e.pools.push_back(graph_pool{g, stream, false});
        free_one = &e.pools.back();
    }
    int st = c_graph_begin(e.arena, free_one->g, stream);
    if (st != 0) {
        const std::string msg = graph_message("route a capture stream to a graph pool", e.device, st);
        TORCH_CHECK(false, msg.c_str());
    }
    free_one->stream = stream;
    free_one->routed = true;
}

// g_graph_mu held. stream goes back to its own pool where e routed it (for
// an earlier allocation its filter took): carve routes a stream, not an
// allocation, so one the filter does not take (another thread's, under a
// filter that looks at the thread) must not find the graph's pool. A later
// allocation the filter takes routes it again, to the same pool.
void unroute_stream(pool_entry &e, stream_t stream) {
    for (auto &p : e.pools)
        if (p.routed && p.stream == stream) {
            (void)c_graph_end(e.arena, p.g, stream); // routed by route_stream: cannot be refused
            p.routed = false;
        }
}

// The arena an allocation on (device, stream) must come from because a
// graph captures it (its stream routed to the graph's pool now), or nullptr
// (the stream then routed to no graph pool of an active filter).
void *capture_arena(int device, stream_t stream) {
    std::lock_guard<std::mutex> lock(g_graph_mu);
    void *arena = nullptr;
    for (auto &e : g_entries) {
        if (e.device != device || !e.filter)
            continue;
        if (!arena && e.filter(stream)) {
            route_stream(e, stream);
            arena = e.arena;
        } else {
            unroute_stream(e, stream);
        }
    }
    return arena;
}

// g_graph_mu held: take e (its last user gone, no capture into it) out of
// the table; its graph pools and arena go to the caller, to be released
// outside the lock.
void take_entry(pool_entry *e, std::vector<graph_pool> &pools, void *&arena) {
    pools.swap(e->pools);
    arena = e->arena;
    if (e != &g_entries.back())
        *e = std::move(g_entries.back());
    g_entries.pop_back();
}

// Release pools of arena (carve_graph_pool_release synchronizes the device;
// one refused because a capture is underway waits for the next release or
// end). Never throws.
void release_pools(void *arena, std::vector<graph_pool> &pools) noexcept {
    std::vector<std::pair<void *, void *>> refused;
    for (auto &p : pools)
        if (c_graph_release(arena, p.g) != 0)
            refused.emplace_back(arena, p.g);
    if (!refused.empty()) {
        std::lock_guard<std::mutex> lock(g_graph_mu);
        g_deferred.insert(g_deferred.end(), refused.begin(), refused.end());
    }
}

// Release what a capture elsewhere kept from being released; what is
// refused again stays for the next try. Never throws.
void retry_deferred() noexcept {
    std::vector<std::pair<void *, void *>> todo;
    {
        std::lock_guard<std::mutex> lock(g_graph_mu);
        todo.swap(g_deferred);
    }
    std::vector<std::pair<void *, void *>> again;
    for (auto &ag : todo)
        if (c_graph_release(ag.first, ag.second) != 0)
            again.push_back(ag);
    if (!again.empty()) {
        std::lock_guard<std::mutex> lock(g_graph_mu);
        g_deferred.insert(g_deferred.end(), again.begin(), again.end());
    }
}

} // namespace

extern "C" {

// Find libcarve's functions in the library at path, which the caller has
// loaded already. Returns 0, or -1 (then dlerror() says why).
__attribute__((visibility("default"))) int carve_torch_shim_init(const char *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        h = dlopen(path, RTLD_NOW);
    if (!h)
        return -1;
    c_route_alloc = reinterpret_cast<decltype(c_route_alloc)>(dlsym(h, "carve_route_alloc"));
    c_free = reinterpret_cast<decltype(c_free)>(dlsym(h, "carve_torch_free"));
    c_last_error = reinterpret_cast<decltype(c_last_error)>(dlsym(h, "carve_last_error"));
    c_set_fraction = reinterpret_cast<decltype(c_set_fraction)>(dlsym(h, "carve_device_set_limit_fraction"));
    c_status_str = reinterpret_cast<decltype(c_status_str)>(dlsym(h, "carve_status_str"));
    c_device_arena = reinterpret_cast<decltype(c_device_arena)>(dlsym(h, "carve_device_arena"));
    c_graph_create = reinterpret_cast<decltype(c_graph_create)>(dlsym(h, "carve_graph_pool_create"));
    c_graph_begin = reinterpret_cast<decltype(c_graph_begin)>(dlsym(h, "carve_graph_pool_begin"));
    c_graph_end = reinterpret_cast<decltype(c_graph_end)>(dlsym(h, "carve_graph_pool_end"));
    c_graph_release = reinterpret_cast<decltype(c_graph_release)>(dlsym(h, "carve_graph_pool_release"));
    return c_route_alloc && c_free && c_last_error && c_set_fraction && c_status_str && c_device_arena &&
                   c_graph_create && c_graph_begin && c_graph_end && c_graph_release
               ? 0
               : -1;
}

// PyTorch's alloc function: carve's buffer (NULL for size 0), or
// torch.cuda.OutOfMemoryError when carve ran out of memory, or a
// RuntimeError naming carve's status for any other failure.
__attribute__((visibility("default"))) void *carve_torch_shim_alloc(ssize_t size, int device, stream_t stream) {
    if (size < 0) {
        char msg[96];
        snprintf(msg, sizeof(msg), "carve cannot allocate a negative size (%lld bytes) [CARVE_ERR_INVALID]",
                 (long long)size);
        TORCH_CHECK(false, msg);
    }
    void *arena = nullptr; // the thread's route, unless a graph captures this allocation
    if (g_filters.load(std::memory_order_acquire) > 0)
        arena = capture_arena(device, stream);
    void *p = nullptr;
    int st = c_route_alloc(arena, (size_t)size, device, stream, &p);
    if (st == kOom) {
        const std::string msg = oom_message(size, device);
        TORCH_CHECK_WITH(OutOfMemoryError, false, msg.c_str());
    }
    if (st != 0) {
        const std::string msg = alloc_error_message(size, device, st);
        TORCH_CHECK(false, msg.c_str());
    }
    return p;
}

// PyTorch's free function (called from deleters: never throws).
__attribute__((visibility("default"))) void carve_torch_shim_free(void *ptr, ssize_t size, int device,
                                                                  stream_t stream) {
    c_free(ptr, size, device, stream);
}

// PyTorch's memory-fraction hook: carve's limit for device's default arena,
// or an error PyTorch raises (carve fixes a limit when the arena is made).
__attribute__((visibility("default"))) void carve_torch_shim_set_fraction(double fraction, int device) {
    int st = c_set_fraction(device, fraction);
    if (st != 0) {
        const std::string msg = fraction_message(fraction, device, st);
        TORCH_CHECK(false, msg.c_str());
    }
}

// PyTorch's beginAllocateToPool (CUDAGraph::capture_begin, before the
// capture starts; inductor's warm-up in a graph's pool): allocations on
// device whose stream filter accepts come from id's graph pools until
// end. Throws c10::Error when carve cannot make the device's default arena
// or when id is being allocated to already.
__attribute__((visibility("default"))) void carve_torch_shim_begin_pool(int device, pool_id id,
                                                                        capture_filter filter) {
    std::lock_guard<std::mutex> lock(g_graph_mu);
    pool_entry *e = find_entry(device, id);
    if (!e) {
        void *arena = nullptr;
        int st = c_device_arena(device, &arena);
        if (st != 0) {
            const std::string msg = graph_message("find the default arena", device, st);
            TORCH_CHECK(false, msg.c_str());
        }
        g_entries.push_back(pool_entry{device, id, arena, 0, {}, nullptr});
        e = &g_entries.back();
    }
    TORCH_CHECK(!e->filter, "carve: a CUDA graph pool is being allocated to already (beginAllocateToPool twice "
                            "without endAllocateToPool)");
    e->uses++;
    e->filter = std::move(filter);
    g_filters.fetch_add(1, std::memory_order_release);
}

// PyTorch's endAllocateToPool (CUDAGraph::capture_end, once the capture has ended): every stream
// routed for id goes back to its own pool; the filter is dropped (it names
// the graph, which may go away). Then releases refused earlier are retried.
// Never throws.
__attribute__((visibility("default"))) void carve_torch_shim_end_pool(int device, pool_id id) {
    std::vector<graph_pool> pools;
    void *arena = nullptr;
    {
        std::lock_guard<std::mutex> lock(g_graph_mu);
        pool_entry *e = find_entry(device, id);
        if (e && e->filter) {
            for (auto &p : e->pools)
                if (p.routed) {
                    (void)c_graph_end(e->arena, p.g, p.stream); // routed by route_stream: cannot be refused
                    p.routed = false;
                }
            e->filter = nullptr;
            g_filters.fetch_sub(1, std::memory_order_release);
            if (e->uses <= 0) // its last release came during the capture: given back now
                take_entry(e, pools, arena);
        }
    }
    retry_deferred();
    release_pools(arena, pools);
}

// PyTorch's releasePool (a graph of id reset or destroyed): when id's last
// user is gone, its graph pools give their memory back
// (carve_graph_pool_release synchronizes the device; a release refused
// because a capture is underway is retried at the next release or end).
// Never throws: PyTorch calls it from CUDAGraph's destructor.
__attribute__((visibility("default"))) void carve_torch_shim_release_pool(int device, pool_id id) {
    std::vector<graph_pool> pools;
    void *arena = nullptr;
    {
        std::lock_guard<std::mutex> lock(g_graph_mu);
        pool_entry *e = find_entry(device, id);
        if (!e || --e->uses > 0 || e->filter)
            return; // still used by another graph, or a capture into it is underway (end gives it back)
        take_entry(e, pools, arena);
    }
    retry_deferred();
    release_pools(arena, pools);
}

} // extern "C"
