/*
 * test_ggml_adapter.c — the ggml adapter (integrations/ggml/ggml-carve.c)
 * against its contract, without ggml.
 *
 * The one idea: ggml's side of the hook is one function,
 * ggml_backend_cuda_set_allocator, declared in the header the patch adds
 * (taken from ggml-carve.patch when this builds, so the adapter and the
 * patch cannot drift apart); this test defines it, keeps the allocator the
 * adapter installs, and plays ggml by calling it. Everywhere: a
 * configuration carve refuses is refused before ggml is asked, ggml's
 * refusal (too late) is reported, a second init is refused, devices out of
 * range have no arena. Without a GPU: an allocation answers NULL (ggml's
 * out-of-memory path) and leaves everything alone. With one: buffers on
 * the default stream and pool memory on a stream, the limit seen through
 * get_memory, a request past it refused with carve's explanation counted,
 * the memory back after the frees and empty_cache.
 */
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "ggml-carve.h"
#include "ggml-cuda-allocator.h"

static struct ggml_backend_cuda_allocator installed;
static int set_calls;
static bool ggml_accepts = true;

bool ggml_backend_cuda_set_allocator(const struct ggml_backend_cuda_allocator *allocator) {
    set_calls++;
    if (ggml_accepts && allocator)
        installed = *allocator;
    return ggml_accepts;
}

static int failures;
#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            failures++;                                                                                                \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                                     \
            printf(__VA_ARGS__);                                                                                       \
            printf("\n");                                                                                              \
        }                                                                                                              \
    } while (0)

static void on_gpu(void) {
    void *(*alloc)(void *, int, size_t, void *) = installed.alloc;
    void *u = installed.user_data;
    size_t f = (size_t)-1, t = (size_t)-1;
    installed.get_memory(u, 0, &f, &t);
    CHECK(t == (1u << 30) && f <= t, "total %zu free %zu: the limit is the device's memory as ggml sees it", t, f);
    void *weights = alloc(u, 0, 300u << 20, NULL);
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
    void *tmp = alloc(u, 0, 64u << 20, s);
    CHECK(weights && tmp && ggml_carve_memory_allocated(0) >= (364u << 20), "allocated %zu",
          ggml_carve_memory_allocated(0));
    CHECK(cudaMemsetAsync(tmp, 1, 64u << 20, s) == cudaSuccess && cudaMemset(weights, 2, 300u << 20) == cudaSuccess,
          "the memory is the device's");
    CHECK(alloc(u, 0, 900u << 20, NULL) == NULL, "a request past the 1 GiB limit must be refused");
    carve_stats st;
    carve_get_stats(ggml_carve_arena(0), &st);
    CHECK(st.num_ooms == 1, "ooms %llu", (unsigned long long)st.num_ooms);
    installed.free(u, 0, tmp, s);
    installed.free(u, 0, weights, NULL);
    CHECK(ggml_carve_memory_allocated(0) == 0, "allocated %zu after the frees", ggml_carve_memory_allocated(0));
    CHECK(ggml_carve_empty_cache() == CARVE_OK && ggml_carve_memory_reserved(0) == 0, "reserved %zu after empty_cache",
          ggml_carve_memory_reserved(0));
    cudaStreamDestroy(s);
    ggml_carve_report(stdout);
}

int main(void) {
    CHECK(ggml_carve_arena(0) == NULL && strstr(ggml_carve_error(), "ggml_carve_init"), "%s", ggml_carve_error());
    CHECK(ggml_carve_init("limit=lots") == -1 && set_calls == 0 && strstr(ggml_carve_error(), "limit"), "%s",
          ggml_carve_error());
    CHECK(ggml_carve_init("growth=0") == -1 && set_calls == 0, "growth off without an initial block: %s",
          ggml_carve_error());
    ggml_accepts = false;
    CHECK(ggml_carve_init("limit=1GiB") == -1 && set_calls == 1 && strstr(ggml_carve_error(), "refused"), "%s",
          ggml_carve_error());
    ggml_accepts = true;
    CHECK(ggml_carve_init("limit=1GiB;device1:limit=512MiB") == 0 && set_calls == 2, "%s", ggml_carve_error());
    CHECK(installed.alloc && installed.free && installed.get_memory, "the allocator has every function");
    CHECK(ggml_carve_init("") == -1 && set_calls == 2 && strstr(ggml_carve_error(), "already"), "%s",
          ggml_carve_error());
    CHECK(ggml_carve_arena(-1) == NULL && ggml_carve_arena(64) == NULL && strstr(ggml_carve_error(), "device 64"),
          "%s", ggml_carve_error());
    if (carve_device_count() == 0) {
        CHECK(installed.alloc(installed.user_data, 0, 1u << 20, NULL) == NULL, "no device: NULL, ggml's OOM path");
        CHECK(strstr(ggml_carve_error(), "device 0: no carve arena"), "%s", ggml_carve_error());
        size_t f = 123, t = 456;
        installed.get_memory(installed.user_data, 0, &f, &t);
        CHECK(f == 123 && t == 456, "no arena: the driver's numbers stand (%zu, %zu)", f, t);
        installed.free(installed.user_data, 0, NULL, NULL);
        CHECK(ggml_carve_memory_allocated(0) == 0 && ggml_carve_memory_reserved(0) == 0, "nothing held");
        CHECK(ggml_carve_empty_cache() == CARVE_OK, "empty_cache with no arena");
        printf("no CUDA device: the allocation paths were checked on a GPU only as far as refusing\n");
    } else {
        on_gpu();
    }
    printf("%s\n", failures ? "FAILED" : "all checks passed");
    return failures ? 1 : 0;
}
