/*
 * models.cpp — an engine on ggml's CUDA backend with its memory from carve:
 * the worked example of the adapter (docs/integrations.md) and its check on
 * a GPU.
 *
 * The engine calls ggml_carve_init with a limit, then runs "models" one
 * after another, as a server swapping models would: each is a weight matrix
 * in a CUDA backend buffer (f16, computed in f32, so that ggml converts
 * operands in its pool) and a graph y = W x through a graph allocator. After each,
 * everything is freed and ggml_carve_empty_cache gives the memory back: the
 * arena holds nothing and the device's free memory is where it was. A model
 * larger than the limit is refused on ggml's own path (no buffer; ggml says
 * so) and the engine goes on with the next. ggml reports the limit as the
 * device's memory. Then CUDA graphs (build.sh builds ggml with
 * GGML_CUDA_GRAPHS): a small graph computed sixty times through
 * ggml_backend_graph_compute, which ggml captures after its warm-up call and
 * replays; the input changes between calls and every result is checked,
 * the captured pool allocations come from a carve graph pool
 * (ggml_carve_captured_allocations), and once everything is freed the
 * arena's allocated bytes are back where they were. Prints PASS/FAIL lines
 * and "N passed, N failed"; exits 0 only when all pass, 77 (skipped)
 * without a CUDA device.
 *
 * Usage: ggml-carve-models [LIMIT]   (default 2GiB)
 */
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cuda.h"
#include "ggml.h"

#include "ggml-carve.h"

#include <cuda_runtime_api.h>

namespace {

int passed = 0, failed = 0;

void check(bool ok, const std::string &what, const std::string &detail = "") {
    std::printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", what.c_str(), detail.empty() ? "" : ": ", detail.c_str());
    (ok ? passed : failed)++;
}

std::string mib(size_t b) { return std::to_string(b >> 20) + " MiB"; }

size_t device_free() {
    size_t f = 0, t = 0;
    carve_device_mem_info(0, &f, &t);
    return f;
}

struct Result {
    bool loaded = false;
    double max_err = 0;
    size_t peak_reserved = 0;
};

// A model of n x n f16 weights applied to k columns; everything freed after.
// The result is named after the model: ggml compares a graph's nodes, names
// included, with the last graph whose first node had the same address, and
// captures it into a CUDA graph on the second equal call; each model is
// computed once and stays uncaptured, so that its memory all goes back.
Result run_model(ggml_backend_t backend, const char *name, int64_t n, int64_t k) {
    Result r;
    ggml_init_params ip = {ggml_tensor_overhead() * 8 + ggml_graph_overhead(), nullptr, true};
    ggml_context *ctx = ggml_init(ip);
    ggml_tensor *w = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, n, n);
    ggml_tensor *x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n, k);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
    if (!buf) {
        ggml_free(ctx);
        return r;
    }
    r.loaded = true;
    // Small multiples of 1/64 and 1/4: exact in f16, and their products' sums exact in f32.
    std::vector<ggml_fp16_t> wh(n * n);
    std::vector<float> row(n), xs(n * k);
    for (int64_t i = 0; i < n; i++) {
        for (int64_t j = 0; j < n; j++)
            row[j] = (float)((i * 7 + j * 3) % 13 - 6) / 64.0f;
        ggml_fp32_to_fp16_row(row.data(), wh.data() + i * n, n);
    }
    for (int64_t c = 0; c < k; c++)
        for (int64_t j = 0; j < n; j++)
            xs[c * n + j] = (float)((j + 2 * c) % 5 - 2) / 4.0f;
    ggml_backend_tensor_set(w, wh.data(), 0, ggml_nbytes(w));
    ggml_backend_tensor_set(x, xs.data(), 0, ggml_nbytes(x));

    ggml_cgraph *gf = ggml_new_graph(ctx);
    ggml_tensor *y = ggml_mul_mat(ctx, w, x);
    ggml_mul_mat_set_prec(y, GGML_PREC_F32);  // sums of multiples of 1/256 stay exact in f32
    ggml_format_name(y, "y of model %s", name);
    ggml_build_forward_expand(gf, y);
    ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_get_default_buffer_type(backend));
    if (ggml_gallocr_alloc_graph(galloc, gf) && ggml_backend_graph_compute(backend, gf) == GGML_STATUS_SUCCESS) {
        std::vector<float> ys(n * k);
        ggml_backend_tensor_get(y, ys.data(), 0, ggml_nbytes(y));
        for (int64_t c = 0; c < k; c += k / 4 + 1) {
            for (int64_t i = 0; i < n; i += n / 64 + 1) {
                double want = 0;
                for (int64_t j = 0; j < n; j++)
                    want += (double)((i * 7 + j * 3) % 13 - 6) / 64.0 * (double)((j + 2 * c) % 5 - 2) / 4.0;
                r.max_err = std::fmax(r.max_err, std::fabs(ys[c * n + i] - want) / (1.0 + std::fabs(want)));
            }
        }
    } else {
        r.max_err = INFINITY;
    }
    carve_stats s;
    if (carve_get_stats(ggml_carve_arena(0), &s) == CARVE_OK)
        r.peak_reserved = s.reserved_bytes_peak;
    ggml_gallocr_free(galloc);
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
    return r;
}

// Whether ggml's CUDA backend was built with GGML_CUDA_GRAPHS (its feature list says USE_GRAPHS).
bool ggml_has_graphs() {
    ggml_backend_reg_t reg = ggml_backend_cuda_reg();
    auto features = (ggml_backend_get_features_t)ggml_backend_reg_get_proc_address(reg, "ggml_backend_get_features");
    for (ggml_backend_feature *f = features ? features(reg) : nullptr; f && f->name; f++)
        if (std::strcmp(f->name, "USE_GRAPHS") == 0)
            return true;
    return false;
}

// CUDA graphs: y = W x with f16 weights and an f32 input of N columns, which
// ggml computes with cuBLAS in f16 where the GPU has fast f16 (an H100): it
// converts x to f16 and takes the f16 result in its pool, and converts that
// to f32 (ggml_cuda_mul_mat_cublas_impl; N > 16 keeps it off the mmf and
// mmvf kernels). Computed CALLS times with the same tensors through
// ggml_backend_graph_compute: the first call runs directly, the second is
// captured into a CUDA graph (its node properties did not change) and
// launched, the rest replay it. x changes between calls; every result is
// checked in full. The values are multiples of 1/64 and 1/4 with K terms
// small enough that every partial sum is exact even in f16.
void check_graphs() {
    const int64_t K = 128, M = 512, N = 32;
    const int CALLS = 60;
    const size_t allocated_before = ggml_carve_memory_allocated(0);
    const uint64_t captured_before = ggml_carve_captured_allocations(0);
    // A backend of its own, freed at the end as an engine frees its
    // context: the stream its graphs were captured on is destroyed with it.
    ggml_backend_t backend = ggml_backend_cuda_init(0);
    if (!backend) {
        check(false, "CUDA graphs: a second CUDA backend");
        return;
    }
    ggml_init_params ip = {ggml_tensor_overhead() * 8 + ggml_graph_overhead(), nullptr, true};
    ggml_context *ctx = ggml_init(ip);
    ggml_tensor *w = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, K, M);
    ggml_tensor *x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, N);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
    ggml_cgraph *gf = ggml_new_graph(ctx);
    ggml_tensor *y = ggml_mul_mat(ctx, w, x);  // default precision: f16 on a GPU with fast f16
    ggml_set_name(y, "y of the graphs check");
    ggml_build_forward_expand(gf, y);
    ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_get_default_buffer_type(backend));
    int wrong_calls = 0, first_wrong = -1;
    double worst = 0;
    if (!buf || !ggml_gallocr_alloc_graph(galloc, gf)) {
        wrong_calls = CALLS;
    } else {
        std::vector<float> wf(K * M), xs(K * N), ys(M * N);
        std::vector<ggml_fp16_t> wh(K * M);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < K; j++)
                wf[i * K + j] = (float)((i * 7 + j * 3) % 13 - 6) / 64.0f;
        ggml_fp32_to_fp16_row(wf.data(), wh.data(), K * M);
        ggml_backend_tensor_set(w, wh.data(), 0, ggml_nbytes(w));
        for (int call = 0; call < CALLS; call++) {
            for (int64_t c = 0; c < N; c++)
                for (int64_t j = 0; j < K; j++)
                    xs[c * K + j] = (float)((j + 2 * c + call) % 5 - 2) / 4.0f;
            ggml_backend_tensor_set(x, xs.data(), 0, ggml_nbytes(x));
            bool ok = ggml_backend_graph_compute(backend, gf) == GGML_STATUS_SUCCESS;
            ggml_backend_tensor_get(y, ys.data(), 0, ggml_nbytes(y));
            for (int64_t c = 0; ok && c < N; c++)
                for (int64_t i = 0; i < M; i++) {
                    double want = 0;
                    for (int64_t j = 0; j < K; j++)
                        want += (double)wf[i * K + j] * (double)xs[c * K + j];
                    const double err = std::fabs(ys[c * M + i] - want);
                    worst = std::fmax(worst, err);
                    ok &= err <= 1e-3;  // exact in f16 by construction; a wrong buffer is off by far more
                }
            if (!ok) {
                wrong_calls++;
                if (first_wrong < 0)
                    first_wrong = call;
            }
        }
    }
    check(wrong_calls == 0,
          "CUDA graphs: y = W x right on all " + std::to_string(CALLS) + " calls, the input changed between them",
          wrong_calls ? std::to_string(wrong_calls) + " wrong, the first call " + std::to_string(first_wrong) +
                            ", largest error " + std::to_string(worst)
                      : "largest error " + std::to_string(worst));
    const uint64_t captured = ggml_carve_captured_allocations(0) - captured_before;
    std::string why;
    if (!ggml_has_graphs())
        why = "ggml was built without GGML_CUDA_GRAPHS (build.sh turns them on unless GGML_CARVE_GRAPHS=OFF)";
    else if (std::getenv("GGML_CUDA_DISABLE_GRAPHS"))
        why = "GGML_CUDA_DISABLE_GRAPHS is set";
    else
        why = std::to_string(captured) + " pool allocations captured";
    check(captured > 0, "CUDA graphs: ggml captured the graph, its pool allocations served from a carve graph pool",
          why);
    ggml_gallocr_free(galloc);
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
    ggml_backend_free(backend);
    check(ggml_carve_empty_cache() == CARVE_OK && ggml_carve_memory_allocated(0) == allocated_before,
          "CUDA graphs: everything freed, the arena's allocated bytes back where they were",
          mib(ggml_carve_memory_allocated(0)) + " allocated, " + mib(allocated_before) + " before");
    std::printf("INFO CUDA graphs: the graph pool keeps %s reserved until the process ends\n",
                mib(ggml_carve_memory_reserved(0)).c_str());
}

// What the adapter adds to each pool allocation outside a capture: one
// cudaStreamIsCapturing on a stream of the device (median of 5 rounds).
double capture_question_ns() {
    cudaStream_t s = nullptr;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
        return -1;
    const int calls = 100000;
    std::vector<double> rounds;
    for (int r = 0; r < 5; r++) {
        cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < calls; i++)
            (void)cudaStreamIsCapturing(s, &st);
        rounds.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
                         calls);
    }
    cudaStreamDestroy(s);
    std::sort(rounds.begin(), rounds.end());
    return rounds[2];
}

}  // namespace

int main(int argc, char **argv) {
    std::string limit = argc > 1 ? argv[1] : "2GiB";
    if (carve_device_count() == 0) {
        std::printf("SKIP: no CUDA device\n");
        return 77;
    }
    // 1. The engine configures the arena before ggml allocates anything.
    if (ggml_carve_init(("limit=" + limit).c_str()) != 0) {
        std::printf("FAIL ggml_carve_init: %s\n", ggml_carve_error());
        return 1;
    }
    ggml_backend_t backend = ggml_backend_cuda_init(0);
    if (!backend) {
        std::printf("FAIL ggml_backend_cuda_init(0)\n");
        return 1;
    }
    carve_stats s;
    carve_get_stats(ggml_carve_arena(0), &s);
    size_t f = 0, t = 0;
    ggml_backend_dev_memory(ggml_backend_get_device(backend), &f, &t);
    check(t == s.limit_bytes && f <= t, "ggml sees the limit as the device's memory",
          "total " + mib(t) + ", free " + mib(f) + ", limit " + mib(s.limit_bytes));
    const size_t free_cold = device_free();

    // 2. Models one after another, each given back with empty_cache.
    struct Model { const char *name; int64_t n, k; bool fits; };
    const Model models[] = {{"A", 4096, 64, true}, {"B", 16384, 32, true}, {"too large", 40000, 8, false},
                            {"C", 8192, 128, true}, {"A again", 4096, 64, true}};
    size_t free_warm = 0;
    for (const Model &m : models) {
        Result r = run_model(backend, m.name, m.n, m.k);
        const size_t weights = (size_t)(m.n * m.n) * 2;
        if (!m.fits) {
            check(!r.loaded && ggml_carve_memory_allocated(0) == 0,
                  std::string("model ") + m.name + " (" + mib(weights) + " of weights) refused under " + limit +
                      " through ggml's own path, nothing left allocated");
            continue;
        }
        check(r.loaded && r.max_err < 1e-4, std::string("model ") + m.name + " (" + mib(weights) + ") computes y = W x",
              r.loaded ? "largest relative error " + std::to_string(r.max_err) : "not loaded");
        check(ggml_carve_memory_allocated(0) == 0, std::string("model ") + m.name + ": nothing allocated once freed",
              mib(ggml_carve_memory_allocated(0)));
        check(ggml_carve_empty_cache() == CARVE_OK && ggml_carve_memory_reserved(0) == 0,
              std::string("model ") + m.name + ": ggml_carve_empty_cache gives back all " + mib(r.peak_reserved) +
                  " it reserved");
        const size_t now = device_free();
        if (!free_warm) {
            // cuBLAS's handle and workspace (from cudaMalloc, not carve) stay with the backend.
            free_warm = now;
            std::printf("INFO after the first model the device has %s less free than before it "
                        "(cuBLAS's handle and workspace, kept by ggml's backend)\n",
                        mib(free_cold > now ? free_cold - now : 0).c_str());
        } else {
            // Within what the driver may take meanwhile for kernels loaded on first use (lazy
            // module loading) and cuBLAS: tens of MiB at most, against the model's hundreds.
            const size_t diff = now > free_warm ? now - free_warm : free_warm - now;
            check(diff <= (64u << 20), std::string("model ") + m.name + ": the device's free memory back where it was",
                  mib(now) + " free, " + mib(free_warm) + " after the first model (" +
                      std::to_string(diff >> 10) + " KiB apart)");
        }
    }
    // 3. CUDA graphs, after the models: the graph pool keeps its memory.
    check_graphs();
    std::printf("INFO the adapter's capture question (cudaStreamIsCapturing) costs %.0f ns per pool allocation\n",
                capture_question_ns());
    ggml_backend_free(backend);
    ggml_carve_report(stdout);
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
