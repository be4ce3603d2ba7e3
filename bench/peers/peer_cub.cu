/*
 * peer_cub.cu — CUB's cub::CachingDeviceAllocator as a peer.
 *
 * Configuration: bins grow by 2 from 2^8 = 256 B up to 2^30 = 1 GiB (larger
 * requests go straight to cudaMalloc and are not cached), no limit on cached
 * bytes, cleanup at destruction. Compiled by nvcc because the CUB headers
 * expect it.
 *
 * The current-device entry points are used, as an application would: with an
 * explicit device, CUB calls cudaGetDevice and cudaSetDevice in every
 * DeviceFree. The benchmark's threads all run on the device under test.
 *
 * Reserved bytes: CUB keeps, per device, the bytes of live and of cached
 * blocks (cached_bytes[device].live + .free: everything it holds from
 * cudaMalloc). Reserved memory only grows inside DeviceAllocate, so reading
 * the sum under CUB's own mutex after each allocation of the cold pass gives
 * the exact peak.
 */
#include "peers.hpp"

#include <cub/util_allocator.cuh>

namespace {

class CubAllocator final : public peers::Allocator {
    static constexpr unsigned kGrowth = 2, kMinBin = 8, kMaxBin = 30;
    cub::CachingDeviceAllocator cub_;
    int device_;
    std::atomic<bool> track_{false};
    uint64_t peak_ = 0; /* guarded by cub_.mutex */
    static thread_local std::string err_;

    uint64_t held_locked()
    {
        auto it = cub_.cached_bytes.find(device_);
        return it == cub_.cached_bytes.end() ? 0 : (uint64_t)(it->second.free + it->second.live);
    }

  public:
    explicit CubAllocator(int device)
        : cub_(kGrowth, kMinBin, kMaxBin, cub::CachingDeviceAllocator::INVALID_SIZE, false),
          device_(device)
    {
    }
    ~CubAllocator() override { (void)cub_.FreeAllCached(); }
    std::string name() const override { return "cub"; }
    std::string describe() const override
    {
        char b[200];
        std::snprintf(b, sizeof b,
                      "cub::CachingDeviceAllocator (CCCL %d.%d.%d): bin_growth %u, min_bin %u "
                      "(256 B), max_bin %u (1 GiB), max_cached_bytes unbounded",
                      CCCL_MAJOR_VERSION, CCCL_MINOR_VERSION, CCCL_PATCH_VERSION, kGrowth, kMinBin,
                      kMaxBin);
        return b;
    }
    void *alloc(size_t size, cudaStream_t st) override
    {
        void *p = nullptr;
        cudaError_t e = cub_.DeviceAllocate(&p, size, st);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            err_ = cudaGetErrorString(e);
            return nullptr;
        }
        if (track_.load(std::memory_order_relaxed)) {
            std::lock_guard<std::mutex> g(cub_.mutex);
            peak_ = std::max(peak_, held_locked());
        }
        return p;
    }
    bool release(void *p, size_t, cudaStream_t) override
    {
        return cub_.DeviceFree(p) == cudaSuccess;
    }
    void trim() override
    {
        (void)cudaDeviceSynchronize();
        (void)cub_.FreeAllCached();
    }
    void begin_footprint() override
    {
        std::lock_guard<std::mutex> g(cub_.mutex);
        peak_ = held_locked();
        track_.store(true);
    }
    void end_footprint() override { track_.store(false); }
    bool reserved_peak(uint64_t *out) override
    {
        std::lock_guard<std::mutex> g(cub_.mutex);
        *out = peak_;
        return true;
    }
    std::string reserved_method() const override
    {
        return "CUB cached_bytes live+free, read after every allocation";
    }
    std::string last_error() const override { return err_; }
};
thread_local std::string CubAllocator::err_;

} /* namespace */

namespace peers {
Allocator *make_cub_allocator(int device, std::string *err)
{
    (void)err;
    return new CubAllocator(device);
}
} /* namespace peers */
