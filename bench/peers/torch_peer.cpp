/*
 * torch_peer.cpp — PyTorch's CUDA caching allocator as a peer of the peer
 * benchmark, built on the GPU machine by torch_peer.py with
 * torch.utils.cpp_extension.load.
 *
 * The workloads and the timed loops are those of peers.hpp, run in C++ with
 * the GIL released, so no Python is timed. Allocation goes through
 * c10::cuda::CUDACachingAllocator::raw_alloc_with_stream and raw_delete, the
 * entry points the allocator offers to C++ clients. Its statistics (reset
 * peak, reserved peak, empty cache) are taken through the Python callables
 * given to run(): torch.cuda.memory_stats() keys have stayed the same across
 * releases where the C++ statistics types have moved.
 */
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <c10/cuda/CUDACachingAllocator.h>

#include "peers.hpp"

namespace py = pybind11;

namespace {

class TorchAllocator final : public peers::Allocator {
    std::string name_;
    py::object reset_peak_, reserved_peak_, trim_;
    static thread_local std::string err_;

    /* Call a Python callable from C++ (GIL released by run()). */
    bool call(const py::object &fn, py::object *result)
    {
        py::gil_scoped_acquire gil;
        try {
            py::object r = fn();
            if (result)
                *result = r;
            return true;
        } catch (py::error_already_set &e) {
            err_ = e.what();
            return false;
        }
    }

  public:
    TorchAllocator(std::string name, py::object reset_peak, py::object reserved_peak,
                   py::object trim)
        : name_(std::move(name)), reset_peak_(std::move(reset_peak)),
          reserved_peak_(std::move(reserved_peak)), trim_(std::move(trim))
    {
    }
    std::string name() const override { return name_; }
    std::string describe() const override { return "PyTorch CUDA caching allocator"; }
    void *alloc(size_t size, cudaStream_t st) override
    {
        try {
            return c10::cuda::CUDACachingAllocator::raw_alloc_with_stream(size, st);
        } catch (const std::exception &e) {
            err_ = e.what();
            return nullptr;
        }
    }
    bool release(void *p, size_t, cudaStream_t) override
    {
        try {
            c10::cuda::CUDACachingAllocator::raw_delete(p);
            return true;
        } catch (const std::exception &e) {
            err_ = e.what();
            return false;
        }
    }
    void trim() override { (void)call(trim_, nullptr); }
    void begin_footprint() override { (void)call(reset_peak_, nullptr); }
    bool reserved_peak(uint64_t *out) override
    {
        py::gil_scoped_acquire gil;
        try {
            *out = reserved_peak_().cast<uint64_t>();
            return true;
        } catch (py::error_already_set &e) {
            err_ = e.what();
            return false;
        } catch (const py::cast_error &e) {
            err_ = e.what();
            return false;
        }
    }
    std::string reserved_method() const override
    {
        return "torch.cuda.memory_stats reserved_bytes.all.peak";
    }
    std::string last_error() const override { return err_; }
};
thread_local std::string TorchAllocator::err_;

/* run(argv, name, reset_peak, reserved_peak, trim) -> exit status.
 * argv are the peer-benchmark options (see peers.hpp), argv[0] ignored. */
int run(const std::vector<std::string> &args, const std::string &name, py::object reset_peak,
        py::object reserved_peak, py::object trim)
{
    std::vector<std::string> store(args);
    std::vector<char *> argv;
    for (auto &s : store)
        argv.push_back(&s[0]);
    argv.push_back(nullptr);

    peers::Context cx;
    std::string err;
    if (!peers::parse_options((int)store.size(), argv.data(), 1, &cx.opt, &err, nullptr)) {
        std::fprintf(stderr, "torch_peer: %s\n", err.c_str());
        return 2;
    }
    if (!peers::init_device(&cx, &err)) {
        std::fprintf(stderr, "torch_peer: %s\n", err.c_str());
        return 1;
    }
    TorchAllocator a(name, std::move(reset_peak), std::move(reserved_peak), std::move(trim));
    int rc;
    {
        py::gil_scoped_release nogil;
        rc = peers::run_workload(cx, a, nullptr);
        std::fflush(stdout);
        std::fflush(stderr);
    }
    return rc;
}

} /* namespace */

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)
{
    m.doc() = "carve peer benchmark: PyTorch's CUDA caching allocator";
    m.def("run", &run, "run one peer-benchmark workload through PyTorch's caching allocator",
          py::arg("argv"), py::arg("name"), py::arg("reset_peak"), py::arg("reserved_peak"),
          py::arg("trim"));
}
