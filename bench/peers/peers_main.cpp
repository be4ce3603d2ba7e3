/*
 * peers_main.cpp — the native runner of the peer benchmark (carve_peers):
 * cudaMalloc, cudaMallocAsync, CUB's CachingDeviceAllocator (peer_cub.cu) and
 * carve, one allocator and one workload per process, so that nothing cached
 * by one run is seen by the next.
 *
 *   carve_peers --alloc NAME --workload pair|churn|threads|trace [options]
 *   carve_peers --convert TRACE OUT.bin    text trace -> the benchmark's binary form
 *   carve_peers --list                     allocator names
 *
 * Text traces (bench/traces, .csv or .csv.gz) are read with the carve_trace loader;
 * .gz files through `gzip -dc`.
 */
#include "peers.hpp"

#include <carve.h>

#include <sys/wait.h>

#include "carve_trace.h"

namespace peers {
Allocator *make_cub_allocator(int device, std::string *err); /* peer_cub.cu */
}

namespace {

using peers::Allocator;

/* ---- cudaMalloc / cudaFree ---------------------------------------------- */

class CudaMallocAllocator final : public Allocator {
    std::string err_;

  public:
    std::string name() const override { return "cudaMalloc"; }
    std::string describe() const override { return "cudaMalloc/cudaFree (no caching)"; }
    void *alloc(size_t size, cudaStream_t) override
    {
        void *p = nullptr;
        cudaError_t e = cudaMalloc(&p, size);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            err_ = cudaGetErrorString(e);
            return nullptr;
        }
        return p;
    }
    bool release(void *p, size_t, cudaStream_t) override { return cudaFree(p) == cudaSuccess; }
    std::string last_error() const override { return err_; }
};

/* ---- cudaMallocAsync on the default pool --------------------------------- */

class CudaMallocAsyncAllocator final : public Allocator {
    cudaMemPool_t pool_ = nullptr;
    std::string err_;

  public:
    bool init(int device, std::string *err)
    {
        if (cudaDeviceGetDefaultMemPool(&pool_, device) != cudaSuccess) {
            *err = std::string("cudaDeviceGetDefaultMemPool: ") +
                   cudaGetErrorString(cudaGetLastError());
            return false;
        }
        /* keep everything cached, like the other caching allocators */
        uint64_t thr = UINT64_MAX;
        if (cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &thr) != cudaSuccess) {
            *err = std::string("cudaMemPoolSetAttribute(ReleaseThreshold): ") +
                   cudaGetErrorString(cudaGetLastError());
            return false;
        }
        return true;
    }
    ~CudaMallocAsyncAllocator() override { trim(); }
    std::string name() const override { return "cudaMallocAsync"; }
    std::string describe() const override
    {
        return "cudaMallocAsync/cudaFreeAsync, default mempool, release threshold UINT64_MAX";
    }
    void *alloc(size_t size, cudaStream_t st) override
    {
        void *p = nullptr;
        cudaError_t e = cudaMallocAsync(&p, size, st);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            err_ = cudaGetErrorString(e);
            return nullptr;
        }
        return p;
    }
    bool release(void *p, size_t, cudaStream_t st) override
    {
        return cudaFreeAsync(p, st) == cudaSuccess;
    }
    void trim() override
    {
        (void)cudaDeviceSynchronize();
        (void)cudaMemPoolTrimTo(pool_, 0);
    }
    void begin_footprint() override
    {
        uint64_t zero = 0; /* the only value accepted: resets the high-water mark */
        (void)cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &zero);
    }
    bool reserved_peak(uint64_t *out) override
    {
        uint64_t v = 0;
        if (cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &v) != cudaSuccess) {
            (void)cudaGetLastError();
            return false;
        }
        *out = v;
        return true;
    }
    std::string reserved_method() const override { return "cudaMemPoolAttrReservedMemHigh"; }
    std::string last_error() const override { return err_; }
};

/* ---- carve --------------------------------------------------------------- */

class CarveAllocator final : public Allocator {
    carve_arena *arena_ = nullptr;
    std::string desc_;
    std::string name_;
    static thread_local std::string err_;

  public:
    /* mode: carve's configuration value for vmm (CARVE_VMM_AUTO: the
     * default, virtual-memory mode where the device supports it; 0:
     * cudaMalloc segments; 1: virtual-memory mode). */
    bool init(int device, int mode, const std::string &name, std::string *err)
    {
        carve_config c;
        carve_config_init(&c);
        c.backend = CARVE_BACKEND_CUDA;
        c.device = device;
        c.vmm = mode;
        name_ = name;
        c.name = "peers";
        carve_status s = carve_arena_create(&c, &arena_);
        if (s != CARVE_OK) {
            *err = std::string("carve_arena_create: ") + carve_status_str(s) + ": " +
                   carve_last_error(nullptr);
            return false;
        }
        carve_config e;
        if (carve_arena_get_config(arena_, &e) == CARVE_OK) {
            char b[256];
            std::snprintf(b, sizeof b,
                          "carve %s, CUDA backend, %s (growth %d, initial %zu, "
                          "limit %zu, min_grow %zu)",
                          carve_version(),
                          mode == CARVE_VMM_AUTO ? (e.vmm ? "default config: virtual-memory mode" : "default config: segments")
                          : mode ? "vmm=1" : "segments mode (vmm=0)",
                          e.growth, e.initial_bytes, e.limit_bytes, e.min_grow_bytes);
            desc_ = b;
        } else {
            desc_ = std::string("carve ") + carve_version() + ", CUDA backend, default config";
        }
        return true;
    }
    ~CarveAllocator() override { carve_arena_destroy(arena_); }
    std::string name() const override { return name_; }
    std::string describe() const override { return desc_; }
    void *alloc(size_t size, cudaStream_t st) override
    {
        void *p = nullptr;
        if (carve_alloc(arena_, size, st, &p) != CARVE_OK) {
            err_ = carve_last_error(arena_);
            return nullptr;
        }
        return p;
    }
    bool release(void *p, size_t, cudaStream_t) override
    {
        if (carve_free(arena_, p) != CARVE_OK) {
            err_ = carve_last_error(arena_);
            return false;
        }
        return true;
    }
    void trim() override { (void)carve_empty_cache(arena_); }
    void begin_footprint() override { carve_reset_peak_stats(arena_); }
    bool reserved_peak(uint64_t *out) override
    {
        carve_stats st;
        if (carve_get_stats(arena_, &st) != CARVE_OK)
            return false;
        *out = st.reserved_bytes_peak;
        return true;
    }
    std::string reserved_method() const override { return "carve_get_stats reserved_bytes_peak"; }
    std::string last_error() const override { return err_; }
    bool counters(std::vector<std::pair<std::string, uint64_t>> *out) override
    {
        carve_stats st;
        if (carve_get_stats(arena_, &st) != CARVE_OK)
            return false;
        *out = {{"backend_allocs", st.num_backend_allocs}, {"backend_frees", st.num_backend_frees},
                {"event_records", st.num_event_records}, {"event_queries", st.num_event_queries},
                {"syncs", st.num_syncs}};
        /* The driver ledger: what was called, by function, and what the cost
         * table says it took (held against the time measured, it checks the
         * model; per row, it says where the time went). */
        for (int k = 0; k < CARVE_DRV_KINDS; k++)
            out->emplace_back(std::string("calls_") + carve_driver_op_name(k), st.driver_calls[k]);
        out->emplace_back("driver_model_ns", st.driver_model_ns);
        return true;
    }
};
thread_local std::string CarveAllocator::err_;

/* ---- Text traces through carve_trace -------------------------------------- */

void no_progress(size_t, void *) {}

bool load_text(const char *path, peers::OpList *out, std::string *err)
{
    carve_trace t;
    if (carve_trace_load_path(path, &t, no_progress, nullptr) != 0) {
        *err = std::string(path) + ": " + t.diag;
        carve_trace_free(&t);
        return false;
    }
    if (t.nbad)
        std::fprintf(stderr, "peers: %s: %zu malformed lines skipped (%s)\n", path, t.nbad, t.diag);
    if (t.nslots > UINT32_MAX) {
        *err = std::string(path) + ": too many slots";
        carve_trace_free(&t);
        return false;
    }
    out->ops.clear();
    out->ops.reserve(t.n);
    out->nslots = (uint32_t)t.nslots;
    out->nstreams = t.nstreams ? t.nstreams : 1;
    out->setup = 0;
    bool ok = true;
    std::vector<carve_trace_event> chunk(1 << 16);
    for (size_t i = 0, got = 0, k = 0; i < t.n; i++, k++) {
        if (k == got) {
            got = carve_trace_events(&t, i, chunk.data(), chunk.size());
            k = 0;
        }
        const carve_trace_event &e = chunk[k];
        if (e.slot >= out->nslots || (e.op == 'a' && e.stream >= out->nstreams) ||
            (e.op != 'a' && e.op != 'f')) {
            ok = false;
            break;
        }
        /* a free keeps the stream of its allocation (the replay tracks it per slot) */
        out->ops.push_back(peers::Op{e.slot, e.op == 'a' ? e.stream : 0,
                                     e.op == 'a' ? e.size : peers::kFree});
    }
    uint64_t peak = t.peak_requested;
    carve_trace_free(&t);
    if (!ok) {
        *err = std::string(path) + ": loader returned an event out of range";
        return false;
    }
    uint64_t mine = peers::peak_requested(*out);
    if (peak && mine != peak)
        std::fprintf(stderr, "peers: %s: peak requested %" PRIu64 " here, %" PRIu64 " by the loader\n",
                     path, mine, peak);
    return true;
}

const char *const kAllocators[] = {"cudaMalloc", "cudaMallocAsync", "cub", "carve", "carve-segments"};

Allocator *make_allocator(const std::string &name, int device, std::string *err)
{
    if (name == "cudaMalloc")
        return new CudaMallocAllocator();
    if (name == "cudaMallocAsync") {
        auto *a = new CudaMallocAsyncAllocator();
        if (!a->init(device, err)) {
            delete a;
            return nullptr;
        }
        return a;
    }
    if (name == "cub")
        return peers::make_cub_allocator(device, err);
    if (name == "carve" || name == "carve-segments" || name == "carve-vmm") {
        auto *a = new CarveAllocator();
        int mode = name == "carve" ? CARVE_VMM_AUTO : name == "carve-vmm" ? 1 : 0;
        if (!a->init(device, mode, name, err)) {
            delete a;
            return nullptr;
        }
        return a;
    }
    *err = "unknown allocator '" + name + "' (see --list)";
    return nullptr;
}

void usage(FILE *f)
{
    std::fprintf(f,
                 "usage: carve_peers --alloc NAME --workload pair|churn|threads|trace [options]\n"
                 "       carve_peers --convert TRACE OUT.bin\n"
                 "       carve_peers --list\n");
    peers::usage_options(f);
}

} /* namespace */

int main(int argc, char **argv)
{
    if (argc >= 2 && std::strcmp(argv[1], "--list") == 0) {
        for (const char *n : kAllocators)
            std::printf("%s\n", n);
        return 0;
    }
    if (argc >= 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc >= 2 && std::strcmp(argv[1], "--convert") == 0) {
        if (argc != 4) {
            usage(stderr);
            return 2;
        }
        peers::OpList l;
        std::string err;
        if (!load_text(argv[2], &l, &err) || !peers::write_bin(argv[3], l, &err)) {
            std::fprintf(stderr, "carve_peers: %s\n", err.c_str());
            return 1;
        }
        std::fprintf(stderr, "carve_peers: %s: %zu events, %u slots, %u streams, peak requested %" PRIu64
                             " bytes\n",
                     argv[2], l.ops.size(), l.nslots, l.nstreams, peers::peak_requested(l));
        return 0;
    }

    peers::Context cx;
    std::string err;
    if (!peers::parse_options(argc, argv, 1, &cx.opt, &err, nullptr)) {
        std::fprintf(stderr, "carve_peers: %s\n", err.c_str());
        usage(stderr);
        return 2;
    }
    if (cx.opt.alloc.empty() || cx.opt.workload.empty()) {
        usage(stderr);
        return 2;
    }
    if (!peers::init_device(&cx, &err)) {
        std::fprintf(stderr, "carve_peers: %s\n", err.c_str());
        return 1;
    }
    Allocator *a = make_allocator(cx.opt.alloc, cx.opt.device, &err);
    if (!a) {
        std::fprintf(stderr, "carve_peers: %s\n", err.c_str());
        return 1;
    }
    peers::TraceLoader loader = load_text;
    int rc = peers::run_workload(cx, *a, loader);
    delete a;
    return rc;
}
