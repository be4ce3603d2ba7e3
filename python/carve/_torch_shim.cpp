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
#include <c10/util/Exception.h>

#include <dlfcn.h>
#include <sys/types.h>

#include <cstdio>
#include <string>

namespace {

struct CUstream_st;
using stream_t = CUstream_st *;

int (*c_route_alloc)(void *, size_t, int, stream_t, void **);
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
    return c_route_alloc && c_free && c_last_error && c_set_fraction && c_status_str ? 0 : -1;
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
    void *p = nullptr;
    int st = c_route_alloc(nullptr, (size_t)size, device, stream, &p);
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

} // extern "C"
