// test_torch_shim.cpp — carve.torch's C++ shim (python/carve/_torch_shim.cpp)
// as PyTorch drives it, without PyTorch: built against a stand-in c10 header
// (torch_stub/), loaded with dlopen, its CUDA-graph hooks wrapped in
// std::function from their addresses the way torch's
// CUDAPluggableAllocator binding wraps them, over the devices' default
// arenas on the stand-in CUDA runtime (fake_cudart.c).
//
// The one idea: a graph's memory shows by address. A buffer the capture
// allocated and freed is the capture's again, never the stream's own after
// the capture ends, the graph's again for a second graph sharing the pool,
// and nothing is left live at the end. The stand-in runtime reports no
// stream as captured, so the engine's behaviour inside a real capture (it
// maps nothing then) is not exercised here.
#include <c10/util/Exception.h>
#include <dlfcn.h>
#include <sys/types.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <utility>

struct CUstream_st;
using stream_t = CUstream_st *;
using pool_id = std::pair<unsigned long long, unsigned long long>; // c10::cuda::MempoolId_t
using begin_fn = void(int, pool_id, std::function<bool(stream_t)>);
using end_fn = void(int, pool_id);

static int failures;
#define CHECK(c)                                                                                                    \
    do {                                                                                                            \
        if (!(c)) {                                                                                                 \
            std::printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #c);                                                \
            failures++;                                                                                             \
        }                                                                                                           \
    } while (0)

int main(int argc, char **argv) {
    if (argc != 3) {
        std::printf("usage: test_torch_shim LIBCARVE SHIM\n");
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    void *shim = lib ? dlopen(argv[2], RTLD_NOW) : nullptr;
    if (!shim) {
        std::printf("FAIL: dlopen: %s\n", dlerror());
        return 1;
    }
    auto devices = reinterpret_cast<int (*)(void)>(dlsym(lib, "carve_device_count"));
    if (!dlsym(RTLD_DEFAULT, "fake_cudart_devices") || devices() != 2) {
        std::printf("SKIP: needs the fake CUDA runtime (LD_LIBRARY_PATH=<build>/tests/frameworks, CARVE_CONF=vmm=0)\n");
        return 77;
    }
    auto init = reinterpret_cast<int (*)(const char *)>(dlsym(shim, "carve_torch_shim_init"));
    auto alloc = reinterpret_cast<void *(*)(ssize_t, int, stream_t)>(dlsym(shim, "carve_torch_shim_alloc"));
    auto release_buf = reinterpret_cast<void (*)(void *, ssize_t, int, stream_t)>(dlsym(shim, "carve_torch_shim_free"));
    auto allocated = reinterpret_cast<size_t (*)(void *)>(dlsym(lib, "carve_memory_allocated"));
    auto device_arena = reinterpret_cast<int (*)(int, void **)>(dlsym(lib, "carve_device_arena"));
    if (!init || !alloc || !release_buf || !allocated || !device_arena || init(argv[1]) != 0) {
        std::printf("FAIL: the shim's or libcarve's functions are missing\n");
        return 1;
    }
    // As torch's binding makes them: std::function over the raw address.
    std::function<begin_fn> begin = reinterpret_cast<begin_fn *>(dlsym(shim, "carve_torch_shim_begin_pool"));
    std::function<end_fn> end = reinterpret_cast<end_fn *>(dlsym(shim, "carve_torch_shim_end_pool"));
    std::function<end_fn> release = reinterpret_cast<end_fn *>(dlsym(shim, "carve_torch_shim_release_pool"));

    void *d0 = nullptr;
    CHECK(device_arena(0, &d0) == 0);
    const ssize_t MiB = 1 << 20;
    stream_t s1 = reinterpret_cast<stream_t>(0x1000), s2 = reinterpret_cast<stream_t>(0x2000);
    const pool_id id{7, 0};

    // Capture on s1: only the stream the filter accepts goes to the pool.
    int asked = 0;
    begin(0, id, [&](stream_t s) {
        asked++;
        return s == s1;
    });
    bool refused = false;
    try {
        begin(0, id, [](stream_t) { return false; });
    } catch (const c10::Error &e) {
        refused = std::strstr(e.what(), "already") != nullptr;
    }
    CHECK(refused); // one filter per pool id at a time
    void *g = alloc(MiB, 0, s1);
    void *other = alloc(MiB, 0, s2);
    CHECK(g && other && asked == 2);
    release_buf(g, MiB, 0, s1); // freed inside the capture: the capture's again
    void *again = alloc(MiB, 0, s1);
    CHECK(again == g);
    release_buf(again, MiB, 0, s1);
    end(0, id);

    // After the capture, s1's own allocations never land on the graph's memory.
    void *after[8];
    for (auto &p : after) {
        p = alloc(MiB, 0, s1);
        CHECK(p && p != g);
    }
    for (auto &p : after)
        release_buf(p, MiB, 0, s1);

    // A second graph sharing the pool id finds the same memory.
    begin(0, id, [&](stream_t s) { return s == s1; });
    void *out = alloc(MiB, 0, s1); // the second graph's output, live after its capture
    CHECK(out == g);
    end(0, id);
    release(0, id); // the first graph goes: the second still uses the pool
    release_buf(out, MiB, 0, s1);
    void *still = alloc(MiB, 0, s1); // freed into the graph pool, still private
    CHECK(still && still != g);
    release(0, id); // the last user: the pool's memory goes back to the arena
    release(0, id); // an id no longer known: nothing happens
    release_buf(still, MiB, 0, s1);
    release_buf(other, MiB, 0, s2);
    CHECK(allocated(d0) == 0);

    // A filter that throws (torch's does when the driver fails) fails the
    // allocation with that exception, and the pool id stays usable.
    const pool_id id2{8, 0};
    begin(0, id2, [](stream_t) -> bool { throw c10::Error("capture info failed"); });
    bool thrown = false;
    try {
        (void)alloc(MiB, 0, s1);
    } catch (const c10::Error &e) {
        thrown = std::strcmp(e.what(), "capture info failed") == 0;
    }
    CHECK(thrown);
    end(0, id2);
    void *plain = alloc(MiB, 0, s1); // no filter active: the ordinary path
    CHECK(plain != nullptr);
    release_buf(plain, MiB, 0, s1);
    release(0, id2);
    CHECK(allocated(d0) == 0);

    // A filter that takes only some allocations on a stream (PyTorch's
    // thread-keyed warm-up filter, here a flag): once the stream was routed
    // for one it took, an allocation it does not take gets the stream's own
    // memory, not what the capture freed into the graph's pool.
    const pool_id id3{9, 0};
    bool mine = true;
    begin(0, id3, [&](stream_t s) { return mine && s == s1; });
    void *graph_buf = alloc(MiB, 0, s1);
    release_buf(graph_buf, MiB, 0, s1); // freed inside the capture: the capture's
    mine = false;
    void *foreign = alloc(MiB, 0, s1);
    CHECK(foreign && foreign != graph_buf);
    release_buf(foreign, MiB, 0, s1);
    mine = true;
    void *back = alloc(MiB, 0, s1); // taken again: the same pool, its memory
    CHECK(back == graph_buf);
    release_buf(back, MiB, 0, s1);
    end(0, id3);
    release(0, id3);
    CHECK(allocated(d0) == 0);

    // The last releasePool of an id while a capture into it is underway:
    // endAllocateToPool gives the pool back (s1's own allocations may then
    // take its memory, as after any release).
    const pool_id id4{10, 0};
    begin(0, id4, [&](stream_t s) { return s == s1; });
    void *b4 = alloc(8 * MiB, 0, s1);
    release_buf(b4, 8 * MiB, 0, s1);
    release(0, id4); // the last user, during the capture
    end(0, id4);     // the pool is released here
    void *after4 = alloc(8 * MiB, 0, s1);
    CHECK(after4 == b4);
    release_buf(after4, 8 * MiB, 0, s1);
    release(0, id4); // an id no longer known: nothing happens
    CHECK(allocated(d0) == 0);

    std::printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
