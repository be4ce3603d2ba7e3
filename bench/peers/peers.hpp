/*
 * peers.hpp — workloads, timing and footprint accounting of the peer
 * benchmark, shared by the native runner (peers_main.cpp: cudaMalloc,
 * cudaMallocAsync, CUB, carve) and the PyTorch extension (torch_peer.cpp).
 *
 * The one idea: every workload is a list of allocate/free operations on
 * buffer slots, fixed before anything is timed (synthetic workloads are
 * generated from a seed, traces are loaded), so the timed loop does nothing
 * but call the allocator, and every allocator sees exactly the same requests.
 *
 * Each workload runs first cold, several times: right after the allocator
 * has given its whole cache back (trim), every operation of the workload
 * timed, the filling of a churn's live set included, so the driver work of
 * growing from nothing is in the figure (the median is reported as
 * cold_ns_per_op). Then once more cold with footprint accounting (live
 * requested bytes, the allocator's reserved peak, the driver's view sampled
 * with cudaMemGetInfo), whose time is not a speed figure. Then warm, several
 * times, with no accounting at all, and the median warm time per operation
 * is reported; warm passes time only the steady part of a workload (for
 * churn, not the filling of the live set). Freeing what is left at the end
 * of a pass is never timed. The loops launch no kernels and
 * never synchronize the device; whatever waiting happens is the allocator's.
 *
 * Results are JSON objects, one per line, appended to --out (see
 * summarize.py for the table).
 */
#ifndef CARVE_PEERS_HPP
#define CARVE_PEERS_HPP

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace peers {

/* ---- Operations ---------------------------------------------------------- */

/* One operation: allocate `size` bytes into `slot` on trace stream `stream`,
 * or free the buffer in `slot` (size == kFree). 16 bytes, so that a million
 * operations stay in cache-friendly arrays. */
struct Op {
    uint32_t slot;
    uint32_t stream;
    uint64_t size;
};
static_assert(sizeof(Op) == 16, "Op must stay 16 bytes (it is also the .bin record)");
constexpr uint64_t kFree = UINT64_MAX;

/* One thread's operation list. Operations [0, setup) prepare the live set and
 * are not timed. */
struct OpList {
    std::vector<Op> ops;
    size_t setup = 0;
    uint32_t nslots = 0;
    uint32_t nstreams = 1;
};

/* Peak of the sum of live requested bytes over the list. */
inline uint64_t peak_requested(const OpList &l)
{
    std::vector<uint64_t> sz(l.nslots, 0);
    uint64_t live = 0, peak = 0;
    for (const Op &o : l.ops) {
        if (o.size == kFree) {
            live -= sz[o.slot];
            sz[o.slot] = 0;
        } else {
            sz[o.slot] = o.size;
            live += o.size;
            peak = std::max(peak, live);
        }
    }
    return peak;
}

/* Deterministic generator (splitmix64): the same seed gives the same workload
 * in every process and with every standard library. */
struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed) {}
    uint64_t next()
    {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    double uniform() { return (double)(next() >> 11) * (1.0 / 9007199254740992.0); }
    uint64_t below(uint64_t n) { return next() % n; }
    /* log-uniform in [lo, hi] */
    uint64_t log_uniform(uint64_t lo, uint64_t hi)
    {
        double l = std::log((double)lo), h = std::log((double)hi);
        uint64_t v = (uint64_t)std::exp(l + uniform() * (h - l));
        return std::min(hi, std::max(lo, v));
    }
};

/* Churn: fill `live` slots with log-uniform sizes in [lo, hi] (untimed), then
 * `steps` times free a random slot and allocate a new log-uniform size in it. */
inline OpList make_churn(uint64_t seed, uint32_t live, size_t steps, uint64_t lo, uint64_t hi)
{
    Rng r(seed);
    OpList l;
    l.nslots = live;
    l.nstreams = 1;
    l.ops.reserve(live + 2 * steps);
    for (uint32_t i = 0; i < live; i++)
        l.ops.push_back(Op{i, 0, r.log_uniform(lo, hi)});
    l.setup = l.ops.size();
    for (size_t s = 0; s < steps; s++) {
        uint32_t v = (uint32_t)r.below(live);
        l.ops.push_back(Op{v, 0, kFree});
        l.ops.push_back(Op{v, 0, r.log_uniform(lo, hi)});
    }
    return l;
}

/* ---- Trace files in the benchmark's binary form --------------------------
 *
 * The text traces of bench/traces are parsed by the carve_trace
 * loader in the native runner, which writes them in this form (--convert) so
 * that the PyTorch extension, which cannot link that loader, replays exactly
 * the same operations. Layout: the 8 bytes "CRVPEER1", u64 count, u32 slots,
 * u32 streams, u64 peak requested, then count Op records; host byte order. */
constexpr char kBinMagic[8] = {'C', 'R', 'V', 'P', 'E', 'E', 'R', '1'};

inline bool write_bin(const char *path, const OpList &l, std::string *err)
{
    FILE *f = std::fopen(path, "wb");
    if (!f) {
        *err = std::string("cannot create ") + path + ": " + std::strerror(errno);
        return false;
    }
    uint64_t n = l.ops.size(), peak = peak_requested(l);
    bool ok = std::fwrite(kBinMagic, 8, 1, f) == 1 && std::fwrite(&n, 8, 1, f) == 1 &&
              std::fwrite(&l.nslots, 4, 1, f) == 1 && std::fwrite(&l.nstreams, 4, 1, f) == 1 &&
              std::fwrite(&peak, 8, 1, f) == 1 &&
              (n == 0 || std::fwrite(l.ops.data(), sizeof(Op), n, f) == n);
    ok = (std::fclose(f) == 0) && ok;
    if (!ok)
        *err = std::string("write failed: ") + path;
    return ok;
}

inline bool read_bin(const char *path, OpList *l, std::string *err)
{
    FILE *f = std::fopen(path, "rb");
    if (!f) {
        *err = std::string("cannot open ") + path + ": " + std::strerror(errno);
        return false;
    }
    char magic[8];
    uint64_t n = 0, peak = 0;
    bool ok = std::fread(magic, 8, 1, f) == 1 && std::memcmp(magic, kBinMagic, 8) == 0 &&
              std::fread(&n, 8, 1, f) == 1 && std::fread(&l->nslots, 4, 1, f) == 1 &&
              std::fread(&l->nstreams, 4, 1, f) == 1 && std::fread(&peak, 8, 1, f) == 1 &&
              n < ((uint64_t)1 << 32);
    if (ok) {
        l->ops.resize(n);
        ok = n == 0 || std::fread(l->ops.data(), sizeof(Op), n, f) == n;
    }
    std::fclose(f);
    if (!ok) {
        *err = std::string(path) + ": not a peer-benchmark trace (.bin) or truncated";
        return false;
    }
    l->setup = 0;
    if (l->nstreams == 0)
        l->nstreams = 1;
    for (const Op &o : l->ops) {
        if (o.slot >= l->nslots || o.stream >= l->nstreams) {
            *err = std::string(path) + ": operation out of range";
            return false;
        }
    }
    return true;
}

/* ---- Allocators ---------------------------------------------------------- */

/* What every peer implements. alloc returns nullptr on failure; release
 * returns false if the allocator refused the pointer. size and stream are
 * those of the allocation (some allocators need them back). */
class Allocator {
  public:
    virtual ~Allocator() = default;
    virtual std::string name() const = 0;
    /* One line: library version and configuration. */
    virtual std::string describe() const = 0;
    virtual void *alloc(size_t size, cudaStream_t stream) = 0;
    virtual bool release(void *p, size_t size, cudaStream_t stream) = 0;
    /* Give every cached byte with no live buffer back to the driver. */
    virtual void trim() {}
    /* Around the cold pass: reset the allocator's reserved high-water mark
     * (nothing is live then), and stop any tracking afterwards. */
    virtual void begin_footprint() {}
    virtual void end_footprint() {}
    /* Peak reserved bytes since begin_footprint from the allocator's own
     * accounting; false when it keeps none (the driver's view is used). */
    virtual bool reserved_peak(uint64_t *out)
    {
        (void)out;
        return false;
    }
    /* How reserved_peak is obtained, for the output. */
    virtual std::string reserved_method() const
    {
        return "driver: cudaMemGetInfo used bytes, sampled";
    }
    /* Explanation of the last failure, if the allocator gives one. */
    virtual std::string last_error() const { return ""; }
    /* Running totals of the driver work the allocator did (named counts:
     * maps, unmaps, event records, ...); false when it keeps none. The
     * output gives them per operation of the cold pass (cold_per_op, setup
     * included: the cold pass runs it) and per timed operation of the warm
     * repetitions (per_op). */
    virtual bool counters(std::vector<std::pair<std::string, uint64_t>> *out)
    {
        (void)out;
        return false;
    }
};

/* ---- Time, device, statistics -------------------------------------------- */

inline double now_s()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

inline uint64_t driver_used_bytes()
{
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return (uint64_t)(tot - fr);
}

inline double median(std::vector<double> v)
{
    if (v.empty())
        return NAN;
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline void atomic_max(std::atomic<uint64_t> &a, uint64_t v)
{
    uint64_t c = a.load(std::memory_order_relaxed);
    while (v > c && !a.compare_exchange_weak(c, v, std::memory_order_relaxed)) {
    }
}

inline std::string json_str(const std::string &s)
{
    std::string o = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            o += '\\';
            o += (char)c;
        } else if (c < 0x20) {
            char b[8];
            std::snprintf(b, sizeof b, "\\u%04x", c);
            o += b;
        } else {
            o += (char)c;
        }
    }
    return o + "\"";
}

inline std::string json_num(double v)
{
    if (!std::isfinite(v))
        return "null";
    char b[64];
    std::snprintf(b, sizeof b, "%.6g", v);
    return b;
}

inline std::string json_u64(uint64_t v)
{
    char b[32];
    std::snprintf(b, sizeof b, "%" PRIu64, v);
    return b;
}

/* ---- Options ------------------------------------------------------------- */

struct Options {
    std::string alloc;            /* allocator name */
    std::string describe;         /* overrides Allocator::describe() when set */
    std::string workload;         /* pair | churn | threads | trace */
    std::string trace;            /* trace path (.bin here; the native runner also reads text) */
    std::string label;            /* trace label; default: file name without extensions */
    std::string out;              /* JSON lines appended here; "" = stdout */
    uint64_t seed = 42;
    uint32_t live = 1000;         /* churn: live buffers (per thread for threads) */
    size_t steps = 50000;         /* churn: free+alloc steps per repetition */
    size_t thread_steps = 20000;  /* threads: steps per thread per repetition */
    uint32_t threads = 8;
    uint64_t lo = 256, hi = 16ull << 20;
    int min_reps = 3, max_reps = 15;
    double target_s = 0.5;        /* stop repeating after this much timed work (and min_reps) */
    double cap_s = 6.0;           /* ...or after this much wall time (and one repetition) */
    int pair_reps = 7;
    double pair_min_s = 0.01;     /* each pair repetition runs at least this long */
    int sample_every = 64;        /* accounted cold pass: cudaMemGetInfo every this many operations */
    int cold_reps = 3;            /* timed cold passes (each after a trim); the median is reported */
    int device = 0;
    bool quick = false;
};

inline void usage_options(FILE *f)
{
    std::fprintf(f,
        "  --alloc NAME        allocator\n"
        "  --workload W        pair | churn | threads | trace\n"
        "  --trace PATH        trace to replay (workload trace)\n"
        "  --label NAME        name of the trace in the output\n"
        "  --out PATH          append JSON lines here (default stdout)\n"
        "  --seed N --live N --steps N --thread-steps N --threads N\n"
        "  --min-reps N --max-reps N --target-s X --cap-s X\n"
        "  --cold-reps N       timed cold passes, each after the cache is given back (default 3)\n"
        "  --quick             fewer steps and repetitions (a smoke run)\n");
}

/* Parse argv[first..]; returns false (with *err) on a bad or unknown option.
 * Unknown options are left to the caller when `rest` is not null. */
inline bool parse_options(int argc, char **argv, int first, Options *o, std::string *err,
                          std::vector<std::string> *rest)
{
    for (int i = first; i < argc; i++) {
        std::string a = argv[i];
        auto val = [&](const char **v) {
            if (i + 1 >= argc) {
                *err = a + " needs a value";
                return false;
            }
            *v = argv[++i];
            return true;
        };
        const char *v = nullptr;
        char *end = nullptr;
        auto num = [&](double *d) {
            if (!val(&v))
                return false;
            errno = 0;
            *d = std::strtod(v, &end);
            if (errno || end == v || *end || !(*d >= 0)) {
                *err = a + ": bad number '" + v + "'";
                return false;
            }
            return true;
        };
        double d = 0;
        if (a == "--alloc") {
            if (!val(&v)) return false;
            o->alloc = v;
        } else if (a == "--describe") {
            if (!val(&v)) return false;
            o->describe = v;
        } else if (a == "--workload") {
            if (!val(&v)) return false;
            o->workload = v;
        } else if (a == "--trace") {
            if (!val(&v)) return false;
            o->trace = v;
        } else if (a == "--label") {
            if (!val(&v)) return false;
            o->label = v;
        } else if (a == "--out") {
            if (!val(&v)) return false;
            o->out = v;
        } else if (a == "--seed") {
            if (!num(&d)) return false;
            o->seed = (uint64_t)d;
        } else if (a == "--live") {
            if (!num(&d)) return false;
            o->live = (uint32_t)std::max(1.0, d);
        } else if (a == "--steps") {
            if (!num(&d)) return false;
            o->steps = (size_t)d;
        } else if (a == "--thread-steps") {
            if (!num(&d)) return false;
            o->thread_steps = (size_t)d;
        } else if (a == "--threads") {
            if (!num(&d)) return false;
            o->threads = (uint32_t)std::max(1.0, d);
        } else if (a == "--min-reps") {
            if (!num(&d)) return false;
            o->min_reps = (int)std::max(1.0, d);
        } else if (a == "--max-reps") {
            if (!num(&d)) return false;
            o->max_reps = (int)std::max(1.0, d);
        } else if (a == "--target-s") {
            if (!num(&d)) return false;
            o->target_s = d;
        } else if (a == "--cap-s") {
            if (!num(&d)) return false;
            o->cap_s = d;
        } else if (a == "--cold-reps") {
            if (!num(&d)) return false;
            o->cold_reps = (int)std::max(1.0, d);
        } else if (a == "--quick") {
            o->quick = true;
        } else if (rest) {
            rest->push_back(a);
        } else {
            *err = "unknown option " + a;
            return false;
        }
    }
    if (o->quick) {
        o->steps = std::max<size_t>(1, o->steps / 5);
        o->thread_steps = std::max<size_t>(1, o->thread_steps / 5);
        o->min_reps = 1;
        o->max_reps = std::min(o->max_reps, 3);
        o->target_s = std::min(o->target_s, 0.1);
        o->cap_s = std::min(o->cap_s, 2.0);
        o->pair_reps = 3;
        o->pair_min_s = 0.003;
    }
    if (o->max_reps < o->min_reps)
        o->max_reps = o->min_reps;
    return true;
}

inline std::string trace_label(const std::string &path)
{
    std::string b = path.substr(path.find_last_of('/') == std::string::npos ? 0
                                                                             : path.find_last_of('/') + 1);
    for (const char *ext : {".gz", ".csv", ".txt", ".bin"}) {
        size_t n = std::strlen(ext);
        if (b.size() > n && b.compare(b.size() - n, n, ext) == 0)
            b.resize(b.size() - n);
    }
    return b;
}

/* ---- Results ------------------------------------------------------------- */

struct Result {
    std::string workload;       /* row name: pair_256B, churn, threads8, trace:NAME */
    std::string kind;           /* pair | churn | threads | trace */
    std::string params;         /* JSON object text */
    double ns_per_op = NAN;     /* median over warm repetitions (ns per pair for pair) */
    double mops = NAN;          /* aggregate million operations per second (threads) */
    std::vector<double> reps;   /* per repetition: ns per op (threads: M ops/s) */
    uint64_t ops_timed = 0;     /* timed operations in one repetition */
    uint64_t ops_total = 0;     /* operations in one repetition, untimed ones included */
    uint64_t peak_requested = 0;
    uint64_t peak_requested_list = 0; /* computed from the operation lists (deterministic) */
    uint64_t peak_reserved = 0;
    bool have_footprint = false;
    std::string reserved_method;
    uint64_t driver_used_peak = 0; /* cudaMemGetInfo used bytes above the baseline */
    double cold_s = NAN;        /* wall time of the accounted cold pass (accounting included) */
    double cold_ns_per_op = NAN; /* median over the timed cold passes: ns per operation, all of them */
    std::vector<double> cold_reps; /* per timed cold pass: ns per operation */
    uint64_t cold_ops = 0;      /* operations in one cold pass (setup included) */
    std::vector<std::pair<std::string, double>> per_op; /* Allocator::counters per warm timed op */
    std::vector<std::pair<std::string, double>> cold_per_op; /* ... per op of the cold pass */
    std::string error;
};

struct Context {
    Options opt;
    std::string device_name;
    size_t device_total = 0;
    int runtime_version = 0, driver_version = 0;
};

inline void emit(const Context &cx, Allocator &A, const Result &r)
{
    std::string s = "{";
    s += "\"allocator\":" + json_str(A.name());
    s += ",\"describe\":" + json_str(cx.opt.describe.empty() ? A.describe() : cx.opt.describe);
    s += ",\"workload\":" + json_str(r.workload);
    s += ",\"kind\":" + json_str(r.kind);
    s += ",\"params\":" + (r.params.empty() ? std::string("{}") : r.params);
    s += ",\"ns_per_op\":" + json_num(r.ns_per_op);
    s += ",\"mops\":" + json_num(r.mops);
    s += ",\"reps\":[";
    for (size_t i = 0; i < r.reps.size(); i++)
        s += (i ? "," : "") + json_num(r.reps[i]);
    s += "]";
    s += ",\"ops_timed\":" + json_u64(r.ops_timed);
    s += ",\"ops_total\":" + json_u64(r.ops_total);
    if (r.have_footprint) {
        s += ",\"peak_requested\":" + json_u64(r.peak_requested);
        s += ",\"peak_requested_list\":" + json_u64(r.peak_requested_list);
        s += ",\"peak_reserved\":" + json_u64(r.peak_reserved);
        s += ",\"footprint\":" +
             json_num(r.peak_requested ? (double)r.peak_reserved / (double)r.peak_requested : NAN);
        s += ",\"reserved_method\":" + json_str(r.reserved_method);
        s += ",\"driver_used_peak\":" + json_u64(r.driver_used_peak);
        s += ",\"driver_footprint\":" +
             json_num(r.peak_requested ? (double)r.driver_used_peak / (double)r.peak_requested
                                       : NAN);
        s += ",\"cold_s\":" + json_num(r.cold_s);
    }
    if (!r.cold_reps.empty()) {
        s += ",\"cold_ns_per_op\":" + json_num(r.cold_ns_per_op);
        s += ",\"cold_ops\":" + json_u64(r.cold_ops);
        s += ",\"cold_reps\":[";
        for (size_t i = 0; i < r.cold_reps.size(); i++)
            s += (i ? "," : "") + json_num(r.cold_reps[i]);
        s += "]";
    }
    if (!r.per_op.empty()) {
        s += ",\"per_op\":{";
        for (size_t i = 0; i < r.per_op.size(); i++)
            s += (i ? "," : "") + json_str(r.per_op[i].first) + ":" + json_num(r.per_op[i].second);
        s += "}";
    }
    if (!r.cold_per_op.empty()) {
        s += ",\"cold_per_op\":{";
        for (size_t i = 0; i < r.cold_per_op.size(); i++)
            s += (i ? "," : "") + json_str(r.cold_per_op[i].first) + ":" + json_num(r.cold_per_op[i].second);
        s += "}";
    }
    s += ",\"device\":" + json_str(cx.device_name);
    s += ",\"device_total\":" + json_u64(cx.device_total);
    s += ",\"cuda_runtime\":" + json_u64((uint64_t)cx.runtime_version);
    s += ",\"cuda_driver\":" + json_u64((uint64_t)cx.driver_version);
    s += ",\"time\":" + json_u64((uint64_t)std::time(nullptr));
    s += ",\"error\":" + (r.error.empty() ? std::string("null") : json_str(r.error));
    s += "}\n";
    FILE *f = cx.opt.out.empty() ? stdout : std::fopen(cx.opt.out.c_str(), "a");
    if (!f) {
        std::fprintf(stderr, "peers: cannot append to %s: %s\n", cx.opt.out.c_str(),
                     std::strerror(errno));
        f = stdout;
    }
    std::fputs(s.c_str(), f);
    if (f != stdout)
        std::fclose(f);
    /* and one human line on stderr */
    if (!r.error.empty())
        std::fprintf(stderr, "  %-16s %-24s FAILED: %s\n", A.name().c_str(), r.workload.c_str(),
                     r.error.c_str());
    else if (r.kind == "threads")
        std::fprintf(stderr, "  %-16s %-24s %9.2f M ops/s  footprint %.3f\n", A.name().c_str(),
                     r.workload.c_str(), r.mops,
                     r.peak_requested ? (double)r.peak_reserved / (double)r.peak_requested : NAN);
    else if (r.have_footprint)
        std::fprintf(stderr, "  %-16s %-24s %9.1f ns/op cold %9.1f warm   footprint %.3f\n",
                     A.name().c_str(), r.workload.c_str(), r.cold_ns_per_op, r.ns_per_op,
                     r.peak_requested ? (double)r.peak_reserved / (double)r.peak_requested : NAN);
    else
        std::fprintf(stderr, "  %-16s %-24s %9.1f ns/pair\n", A.name().c_str(), r.workload.c_str(),
                     r.ns_per_op);
}

/* ---- Replay -------------------------------------------------------------- */

/* Buffers of one thread: pointer, requested size and stream per slot. */
struct Slots {
    std::vector<void *> ptr;
    std::vector<uint64_t> size;
    std::vector<cudaStream_t> stream;
    explicit Slots(uint32_t n) : ptr(n, nullptr), size(n, 0), stream(n, nullptr) {}
};

/* Footprint accounting of the cold pass, shared by its threads. */
struct Tracker {
    std::atomic<uint64_t> live{0};
    std::atomic<uint64_t> peak{0};
    std::atomic<uint64_t> sampled_peak{0}; /* live bytes at the last peak-triggered sample */
    std::atomic<uint64_t> used_peak{0};    /* driver used bytes, absolute */
    int every = 64;
    void sample() { atomic_max(used_peak, driver_used_bytes()); }
};

/* Run ops [begin, end) of l. With Track, account live bytes and sample the
 * driver every `every` operations and whenever live bytes pass the last
 * sampled peak by 1/64 (the allocator's growth happens there). Returns the
 * index of a failed operation, or end. */
template <bool Track>
size_t replay(Allocator &A, const OpList &l, size_t begin, size_t end, Slots &s,
              const std::vector<cudaStream_t> &streams, Tracker *tr)
{
    const Op *ops = l.ops.data();
    for (size_t i = begin; i < end; i++) {
        const Op &o = ops[i];
        if (o.size == kFree) {
            void *p = s.ptr[o.slot];
            if (p && !A.release(p, s.size[o.slot], s.stream[o.slot]))
                return i;
            s.ptr[o.slot] = nullptr;
            if (Track)
                tr->live.fetch_sub(s.size[o.slot], std::memory_order_relaxed);
            s.size[o.slot] = 0;
        } else {
            cudaStream_t st = streams[o.stream];
            void *p = o.size ? A.alloc(o.size, st) : nullptr;
            if (!p && o.size)
                return i;
            s.ptr[o.slot] = p;
            s.size[o.slot] = o.size;
            s.stream[o.slot] = st;
            if (Track) {
                uint64_t now = tr->live.fetch_add(o.size, std::memory_order_relaxed) + o.size;
                atomic_max(tr->peak, now);
                uint64_t sp = tr->sampled_peak.load(std::memory_order_relaxed);
                if (now > sp + sp / 64) {
                    tr->sampled_peak.store(now, std::memory_order_relaxed);
                    tr->sample();
                }
            }
        }
        if (Track && (i % (size_t)tr->every) == 0)
            tr->sample();
    }
    return end;
}

/* Free whatever is live (untimed). Returns false if the allocator refused. */
inline bool release_all(Allocator &A, Slots &s, Tracker *tr)
{
    bool ok = true;
    for (size_t i = 0; i < s.ptr.size(); i++) {
        if (!s.ptr[i])
            continue;
        ok = A.release(s.ptr[i], s.size[i], s.stream[i]) && ok;
        if (tr)
            tr->live.fetch_sub(s.size[i], std::memory_order_relaxed);
        s.ptr[i] = nullptr;
        s.size[i] = 0;
    }
    return ok;
}

inline std::string fail_text(Allocator &A, const OpList &l, size_t at)
{
    char b[160];
    const Op &o = l.ops[at];
    if (o.size == kFree)
        std::snprintf(b, sizeof b, "free of slot %u refused at operation %zu", o.slot, at);
    else
        std::snprintf(b, sizeof b, "allocation of %" PRIu64 " bytes failed at operation %zu", o.size,
                      at);
    std::string e = b, why = A.last_error();
    if (!why.empty())
        e += ": " + why;
    return e;
}

/* A small reusable barrier (C++17 has none). */
class Barrier {
    std::mutex m_;
    std::condition_variable cv_;
    unsigned n_, waiting_ = 0, gen_ = 0;

  public:
    explicit Barrier(unsigned n) : n_(n) {}
    void wait()
    {
        std::unique_lock<std::mutex> lk(m_);
        unsigned g = gen_;
        if (++waiting_ == n_) {
            waiting_ = 0;
            gen_++;
            cv_.notify_all();
        } else {
            cv_.wait(lk, [&] { return gen_ != g; });
        }
    }
};

/* One pass over one or several operation lists (one thread each): setup,
 * barrier, timed part, barrier, release. Returns the wall time of the timed
 * part (first start to last end); *err set on failure. With whole, the
 * setup is timed too (barrier, setup and the rest, barrier): a cold pass. */
template <bool Track>
double run_pass(const Context &cx, Allocator &A, const std::vector<OpList> &lists,
                const std::vector<std::vector<cudaStream_t>> &streams, Tracker *tr,
                std::string *err, bool whole = false)
{
    size_t nt = lists.size();
    std::vector<double> t0(nt, 0), t1(nt, 0);
    std::vector<std::string> errs(nt);
    auto body = [&](size_t t, Barrier *bar) {
        (void)cudaSetDevice(cx.opt.device);
        const OpList &l = lists[t];
        Slots s(l.nslots);
        if (whole && bar)
            bar->wait();
        if (whole)
            t0[t] = now_s();
        size_t at = replay<Track>(A, l, 0, l.setup, s, streams[t], tr);
        if (at != l.setup)
            errs[t] = fail_text(A, l, at);
        if (bar && !whole)
            bar->wait();
        if (!whole)
            t0[t] = now_s();
        if (errs[t].empty()) {
            at = replay<Track>(A, l, l.setup, l.ops.size(), s, streams[t], tr);
            if (at != l.ops.size())
                errs[t] = fail_text(A, l, at);
        }
        t1[t] = now_s();
        if (bar)
            bar->wait();
        if (!release_all(A, s, tr) && errs[t].empty())
            errs[t] = "release of a live buffer refused";
    };
    (void)cudaDeviceSynchronize();
    if (nt == 1) {
        body(0, nullptr);
    } else {
        Barrier bar((unsigned)nt);
        std::vector<std::thread> th;
        for (size_t t = 0; t < nt; t++)
            th.emplace_back(body, t, &bar);
        for (auto &x : th)
            x.join();
    }
    for (auto &e : errs)
        if (!e.empty() && err->empty())
            *err = e;
    double a = *std::min_element(t0.begin(), t0.end());
    double b = *std::max_element(t1.begin(), t1.end());
    return b - a;
}

/* Cold pass with accounting, then warm repetitions. */
inline Result run_lists(const Context &cx, Allocator &A, const std::string &workload,
                        const std::string &kind, const std::string &params,
                        const std::vector<OpList> &lists)
{
    const Options &o = cx.opt;
    Result r;
    r.workload = workload;
    r.kind = kind;
    r.params = params;
    for (const OpList &l : lists) {
        r.ops_timed += l.ops.size() - l.setup;
        r.ops_total += l.ops.size();
        r.peak_requested_list += peak_requested(l);
    }

    std::vector<std::vector<cudaStream_t>> streams(lists.size());
    for (size_t t = 0; t < lists.size(); t++) {
        for (uint32_t i = 0; i < lists[t].nstreams; i++) {
            cudaStream_t st = nullptr;
            if (cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess) {
                r.error = std::string("cudaStreamCreate: ") + cudaGetErrorString(cudaGetLastError());
                return r;
            }
            streams[t].push_back(st);
        }
    }

    /* timed cold passes: the whole workload from an empty cache */
    std::string err;
    for (const OpList &l : lists)
        r.cold_ops += l.ops.size();
    for (int c = 0; c < o.cold_reps; c++) {
        A.trim();
        (void)cudaDeviceSynchronize();
        double dt = run_pass<false>(cx, A, lists, streams, nullptr, &err, true);
        if (!err.empty()) {
            r.error = "cold pass " + std::to_string(c) + ": " + err;
            return r;
        }
        r.cold_reps.push_back(dt * 1e9 / (double)std::max<uint64_t>(1, r.cold_ops));
    }
    r.cold_ns_per_op = median(r.cold_reps);

    /* accounted cold pass: the footprint */
    A.trim();
    (void)cudaDeviceSynchronize();
    Tracker tr;
    tr.every = std::max(1, o.sample_every);
    uint64_t base = driver_used_bytes();
    A.begin_footprint();
    std::vector<std::pair<std::string, uint64_t>> k0, k1;
    bool cold_counted = A.counters(&k0);
    double c0 = now_s();
    run_pass<true>(cx, A, lists, streams, &tr, &err);
    r.cold_s = now_s() - c0;
    if (cold_counted && A.counters(&k1) && k1.size() == k0.size())
        for (size_t i = 0; i < k0.size(); i++)
            r.cold_per_op.emplace_back(k0[i].first, (double)(k1[i].second - k0[i].second) /
                                                        (double)std::max<uint64_t>(1, r.ops_total));
    tr.sample();
    A.end_footprint();
    r.have_footprint = true;
    r.peak_requested = tr.peak.load();
    uint64_t used = tr.used_peak.load();
    r.driver_used_peak = used > base ? used - base : 0;
    uint64_t rp = 0;
    if (A.reserved_peak(&rp)) {
        r.peak_reserved = rp;
        r.reserved_method = A.reserved_method();
    } else {
        r.peak_reserved = r.driver_used_peak;
        r.reserved_method = "driver: cudaMemGetInfo used bytes above the baseline, sampled every " +
                            std::to_string(tr.every) + " operations and at new requested peaks";
    }
    if (!err.empty()) {
        r.error = "cold pass: " + err;
        return r;
    }

    /* warm repetitions */
    double spent = 0, wall0 = now_s();
    std::vector<std::pair<std::string, uint64_t>> n0, n1;
    bool counted = A.counters(&n0);
    int done_reps = 0;
    for (int rep = 0; rep < o.max_reps; rep++) {
        double dt = run_pass<false>(cx, A, lists, streams, nullptr, &err);
        if (!err.empty()) {
            r.error = "repetition " + std::to_string(rep) + ": " + err;
            break;
        }
        spent += dt;
        done_reps++;
        if (kind == "threads")
            r.reps.push_back((double)r.ops_timed / dt * 1e-6);
        else
            r.reps.push_back(dt * 1e9 / (double)std::max<uint64_t>(1, r.ops_timed));
        bool enough = rep + 1 >= o.min_reps && spent >= o.target_s;
        bool too_long = now_s() - wall0 >= o.cap_s;
        if (enough || too_long)
            break;
    }
    if (kind == "threads") {
        r.mops = median(r.reps);
        r.ns_per_op = r.mops > 0 ? 1e3 / r.mops : NAN;
    } else {
        r.ns_per_op = median(r.reps);
    }
    if (counted && done_reps > 0 && A.counters(&n1) && n1.size() == n0.size())
        for (size_t i = 0; i < n0.size(); i++)
            r.per_op.emplace_back(n0[i].first, (double)(n1[i].second - n0[i].second) /
                                                   ((double)r.ops_timed * done_reps));
    (void)cudaDeviceSynchronize();
    for (auto &v : streams)
        for (cudaStream_t st : v)
            (void)cudaStreamDestroy(st);
    return r;
}

/* Pair latency: allocate and free one size on one stream, many times. */
inline Result run_pair(const Context &cx, Allocator &A, uint64_t size, cudaStream_t st)
{
    const Options &o = cx.opt;
    Result r;
    char name[32];
    if (size >= (1u << 20))
        std::snprintf(name, sizeof name, "pair_%" PRIu64 "MiB", size >> 20);
    else if (size >= 1024)
        std::snprintf(name, sizeof name, "pair_%" PRIu64 "KiB", size >> 10);
    else
        std::snprintf(name, sizeof name, "pair_%" PRIu64 "B", size);
    r.workload = name;
    r.kind = "pair";
    r.params = "{\"size\":" + json_u64(size) + ",\"min_rep_s\":" + json_num(o.pair_min_s) + "}";
    const int batch = 32;
    auto pairs = [&](int n) {
        for (int i = 0; i < n; i++) {
            void *p = A.alloc(size, st);
            if (!p)
                return false;
            if (!A.release(p, size, st))
                return false;
        }
        return true;
    };
    if (!pairs(64)) {
        r.error = "allocation of " + json_u64(size) + " bytes failed: " + A.last_error();
        return r;
    }
    (void)cudaDeviceSynchronize();
    for (int rep = 0; rep < o.pair_reps; rep++) {
        uint64_t n = 0;
        double t0 = now_s(), t1;
        do {
            if (!pairs(batch)) {
                r.error = "allocation of " + json_u64(size) + " bytes failed: " + A.last_error();
                return r;
            }
            n += batch;
            t1 = now_s();
        } while (t1 - t0 < o.pair_min_s);
        r.reps.push_back((t1 - t0) * 1e9 / (double)n);
        r.ops_timed = std::max<uint64_t>(r.ops_timed, 2 * n);
    }
    r.ns_per_op = median(r.reps);
    return r;
}

/* ---- Entry ---------------------------------------------------------------- */

inline bool init_device(Context *cx, std::string *err)
{
    if (cudaSetDevice(cx->opt.device) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) {
        *err = std::string("no CUDA device: ") + cudaGetErrorString(cudaGetLastError());
        return false;
    }
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, cx->opt.device) == cudaSuccess) {
        cx->device_name = p.name;
        cx->device_total = p.totalGlobalMem;
    }
    (void)cudaRuntimeGetVersion(&cx->runtime_version);
    (void)cudaDriverGetVersion(&cx->driver_version);
    return true;
}

/* Run the workload named in cx.opt on A; `load` reads the trace (null: only
 * .bin traces). Emits one result per row; returns 0, or 1 if any failed. */
using TraceLoader = bool (*)(const char *path, OpList *out, std::string *err);

inline int run_workload(const Context &cx, Allocator &A, TraceLoader load)
{
    const Options &o = cx.opt;
    int rc = 0;
    auto finish = [&](const Result &r) {
        emit(cx, A, r);
        if (!r.error.empty())
            rc = 1;
    };
    char params[256];
    if (o.workload == "pair") {
        cudaStream_t st = nullptr;
        if (cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess) {
            std::fprintf(stderr, "peers: cudaStreamCreate failed\n");
            return 1;
        }
        for (uint64_t size : {(uint64_t)256, (uint64_t)64 << 10, (uint64_t)2 << 20,
                              (uint64_t)64 << 20}) {
            finish(run_pair(cx, A, size, st));
            A.trim();
        }
        (void)cudaStreamDestroy(st);
    } else if (o.workload == "churn") {
        std::snprintf(params, sizeof params,
                      "{\"live\":%u,\"steps\":%zu,\"lo\":%" PRIu64 ",\"hi\":%" PRIu64
                      ",\"seed\":%" PRIu64 "}",
                      o.live, o.steps, o.lo, o.hi, o.seed);
        std::vector<OpList> lists{make_churn(o.seed, o.live, o.steps, o.lo, o.hi)};
        finish(run_lists(cx, A, "churn", "churn", params, lists));
    } else if (o.workload == "threads") {
        std::snprintf(params, sizeof params,
                      "{\"threads\":%u,\"live_per_thread\":%u,\"steps_per_thread\":%zu,\"lo\":%" PRIu64
                      ",\"hi\":%" PRIu64 ",\"seed\":%" PRIu64 "}",
                      o.threads, o.live, o.thread_steps, o.lo, o.hi, o.seed);
        std::vector<OpList> lists;
        for (uint32_t t = 0; t < o.threads; t++)
            lists.push_back(make_churn(o.seed + 1000003ull * (t + 1), o.live, o.thread_steps, o.lo, o.hi));
        finish(run_lists(cx, A, "threads" + std::to_string(o.threads), "threads", params, lists));
    } else if (o.workload == "trace") {
        if (o.trace.empty()) {
            std::fprintf(stderr, "peers: --workload trace needs --trace PATH\n");
            return 2;
        }
        std::vector<OpList> lists(1);
        std::string err;
        size_t n = o.trace.size();
        bool is_bin = n > 4 && o.trace.compare(n - 4, 4, ".bin") == 0;
        bool ok = is_bin || !load ? read_bin(o.trace.c_str(), &lists[0], &err)
                                  : load(o.trace.c_str(), &lists[0], &err);
        std::string label = o.label.empty() ? trace_label(o.trace) : o.label;
        if (!ok) {
            Result r;
            r.workload = "trace:" + label;
            r.kind = "trace";
            r.error = err;
            finish(r);
            return rc;
        }
        std::string p = "{\"trace\":" + json_str(label) + ",\"events\":" +
                        json_u64(lists[0].ops.size()) + ",\"slots\":" + json_u64(lists[0].nslots) +
                        ",\"streams\":" + json_u64(lists[0].nstreams) + "}";
        finish(run_lists(cx, A, "trace:" + label, "trace", p, lists));
    } else {
        std::fprintf(stderr, "peers: unknown workload '%s' (pair, churn, threads, trace)\n",
                     o.workload.c_str());
        return 2;
    }
    return rc;
}

} /* namespace peers */

#endif /* CARVE_PEERS_HPP */
