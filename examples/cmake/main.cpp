/*
 * main.cpp — carve from C++ through its CMake package (examples/cmake).
 *
 * An arena with a hard limit on the HOST backend (real host memory, so the
 * program runs anywhere and can write into its buffers; CARVE_BACKEND_CUDA
 * and a stream are all that change on a GPU), owned by a small RAII wrapper
 * as an engine would hold it: buffers written and read back, a request past
 * the limit refused with carve's explanation, the statistics, the cache
 * given back. Prints "carve <version>: ..." and exits 0, or says what went
 * wrong and exits 1.
 *
 * Usage: carve_cmake_example [host|virtual]   (virtual: addresses only, no
 * writes; the limit and statistics are checked the same way)
 */
#include <carve.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct ArenaDeleter {
    void operator()(carve_arena *a) const { carve_arena_destroy(a); }
};
using Arena = std::unique_ptr<carve_arena, ArenaDeleter>;

Arena make_arena(carve_backend backend, const char *conf) {
    carve_config cfg;
    carve_config_init(&cfg);
    cfg.backend = backend;
    cfg.name = "example";
    if (carve_config_parse(&cfg, conf) != CARVE_OK)
        throw std::runtime_error(std::string("config: ") + carve_last_error(nullptr));
    carve_arena *a = nullptr;
    if (carve_arena_create(&cfg, &a) != CARVE_OK)
        throw std::runtime_error(std::string("arena: ") + carve_last_error(nullptr));
    return Arena(a);
}

int run(carve_backend backend) {
    Arena arena = make_arena(backend, "limit=64MiB");
    const bool writable = backend == CARVE_BACKEND_HOST;

    std::vector<void *> bufs;
    for (size_t i = 0; i < 8; i++) {  // 1 + 2 + ... + 8 MiB = 36 MiB, under the limit
        void *p = nullptr;
        if (carve_alloc(arena.get(), (i + 1) << 20, nullptr, &p) != CARVE_OK)
            throw std::runtime_error(std::string("alloc: ") + carve_last_error(arena.get()));
        if (writable)
            std::memset(p, static_cast<int>(i), (i + 1) << 20);
        bufs.push_back(p);
    }
    for (size_t i = 0; writable && i < bufs.size(); i++) {
        const unsigned char *b = static_cast<const unsigned char *>(bufs[i]);
        if (b[0] != i || b[((i + 1) << 20) - 1] != i)
            throw std::runtime_error("a buffer did not keep what was written into it");
    }
    if (carve_memory_allocated(arena.get()) < (36u << 20) || carve_memory_reserved(arena.get()) > (64u << 20))
        throw std::runtime_error("the statistics do not add up");

    void *big = nullptr;  // more than the limit: refused at once, with the reason
    carve_status st = carve_alloc(arena.get(), 128u << 20, nullptr, &big);
    if (st != CARVE_ERR_OOM || big != nullptr)
        throw std::runtime_error("a request past the limit was not refused");
    std::string why = carve_last_error(arena.get());

    for (void *p : bufs)
        if (p && carve_free(arena.get(), p) != CARVE_OK)
            throw std::runtime_error(std::string("free: ") + carve_last_error(arena.get()));
    if (carve_memory_allocated(arena.get()) != 0)
        throw std::runtime_error("memory still allocated after every free");
    const size_t cached = carve_memory_reserved(arena.get());
    if (carve_empty_cache(arena.get()) != CARVE_OK || carve_memory_reserved(arena.get()) != 0)
        throw std::runtime_error("empty_cache kept memory");
    if (carve_check(arena.get()) != CARVE_OK)
        throw std::runtime_error(std::string("check: ") + carve_last_error(arena.get()));

    std::printf("carve %s: %s backend, %zu MiB reserved before empty_cache, 0 after; past the limit: %.60s...\n",
                carve_version(), carve_backend_str(backend), cached >> 20, why.c_str());
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    carve_backend backend = CARVE_BACKEND_HOST;
    if (argc > 1 && std::strcmp(argv[1], "virtual") == 0)
        backend = CARVE_BACKEND_VIRTUAL;
    else if (argc > 1 && std::strcmp(argv[1], "host") != 0) {
        std::fprintf(stderr, "usage: %s [host|virtual]\n", argv[0]);
        return 2;
    }
    try {
        return run(backend);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "carve_cmake_example: %s\n", e.what());
        return 1;
    }
}
