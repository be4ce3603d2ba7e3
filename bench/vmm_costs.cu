/*
 * vmm_costs.cu — what the CUDA virtual-memory calls cost on this device, so
 * that the virtual-memory mode's design rests on measured numbers: creating
 * and releasing 2 MiB physical handles, mapping them (one cuMemMap per
 * handle), granting access (per granule and over a run), unmapping (per
 * granule and a run at once), mapping a handle at a second address while it
 * stays mapped at the first (an alias: no unmap needed to reuse physical
 * memory elsewhere), and whether any of these wait for kernels running on
 * the device. Also an event record + synchronize and a device synchronize,
 * for comparison. Every figure is the median of many repetitions, in
 * microseconds. Needs a CUDA device; links the driver (-lcuda).
 *
 * Build: nvcc -O2 -arch=sm_90 bench/vmm_costs.cu -lcuda -o vmm_costs
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <algorithm>
#include <vector>

#define CK(x)                                                                     \
    do {                                                                          \
        CUresult r_ = (x);                                                        \
        if (r_ != CUDA_SUCCESS) {                                                 \
            const char *n_ = "?";                                                 \
            cuGetErrorName(r_, &n_);                                              \
            fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #x, n_);     \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

static double now_us() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

static void report(const char *what, const std::vector<double> &v) {
    std::vector<double> s = v;
    std::sort(s.begin(), s.end());
    printf("%-58s median %9.2f us   p10 %9.2f   p90 %9.2f   (n=%zu)\n", what, median(v), s[s.size() / 10],
           s[s.size() * 9 / 10], s.size());
}

__global__ void spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}

__global__ void fill(unsigned *p, size_t n, unsigned v) {
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        p[i] = v + (unsigned)i;
}

__global__ void check(const unsigned *p, size_t n, unsigned v, unsigned *bad) {
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        if (p[i] != v + (unsigned)i)
            atomicAdd(bad, 1u);
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 200;
    CK(cuInit(0));
    cudaSetDevice(0);
    cudaFree(0); /* primary context current */
    CUdevice dev;
    CK(cuCtxGetDevice(&dev));
    char name[128];
    CK(cuDeviceGetName(name, sizeof(name), dev));
    int drv = 0;
    CK(cuDriverGetVersion(&drv));
    printf("device: %s, driver API %d, %d repetitions\n", name, drv, reps);

    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    CUmemAccessDesc acc;
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    size_t gmin = 0, grec = 0;
    CK(cuMemGetAllocationGranularity(&gmin, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CK(cuMemGetAllocationGranularity(&grec, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    printf("granularity: minimum %zu, recommended %zu\n", gmin, grec);
    const size_t G = 2u << 20;
    const int N = reps;

    CUdeviceptr va = 0, va2 = 0;
    CK(cuMemAddressReserve(&va, (size_t)N * 16 * G, G, 0, 0));
    CK(cuMemAddressReserve(&va2, (size_t)N * 16 * G, G, 0, 0));
    std::vector<CUmemGenericAllocationHandle> h(N * 16);
    std::vector<double> t;

    /* Handles. */
    t.clear();
    for (int i = 0; i < N; i++) {
        double t0 = now_us();
        CK(cuMemCreate(&h[i], G, &prop, 0));
        t.push_back(now_us() - t0);
    }
    report("cuMemCreate 2 MiB", t);

    /* Map, access, unmap: one granule each. */
    t.clear();
    for (int i = 0; i < N; i++) {
        double t0 = now_us();
        CK(cuMemMap(va + (size_t)i * 2 * G, G, 0, h[i], 0));
        t.push_back(now_us() - t0);
    }
    report("cuMemMap 2 MiB", t);
    t.clear();
    for (int i = 0; i < N; i++) {
        double t0 = now_us();
        CK(cuMemSetAccess(va + (size_t)i * 2 * G, G, &acc, 1));
        t.push_back(now_us() - t0);
    }
    report("cuMemSetAccess 2 MiB", t);
    t.clear();
    for (int i = 0; i < N; i++) {
        double t0 = now_us();
        CK(cuMemUnmap(va + (size_t)i * 2 * G, G));
        t.push_back(now_us() - t0);
    }
    report("cuMemUnmap 2 MiB", t);

    /* The whole remap of one granule as the mode does it today. */
    t.clear();
    for (int i = 0; i < N; i++) {
        double t0 = now_us();
        CK(cuMemMap(va + (size_t)i * 2 * G, G, 0, h[i], 0));
        CK(cuMemSetAccess(va + (size_t)i * 2 * G, G, &acc, 1));
        CK(cuMemUnmap(va + (size_t)i * 2 * G, G));
        t.push_back(now_us() - t0);
    }
    report("map + access + unmap, 2 MiB", t);

    /* Runs of 16 granules: access over the run, unmap per granule / at once. */
    const int R = 16;
    std::vector<double> tm, ta, tu1, tu16;
    for (int i = 0; i < N * R; i++)
        if (i >= N)
            CK(cuMemCreate(&h[i], G, &prop, 0));
    for (int k = 0; k < N / 4; k++) {
        CUdeviceptr base = va + (size_t)k * R * G;
        double t0 = now_us();
        for (int j = 0; j < R; j++)
            CK(cuMemMap(base + (size_t)j * G, G, 0, h[k * R + j], 0));
        tm.push_back(now_us() - t0);
        t0 = now_us();
        CK(cuMemSetAccess(base, R * G, &acc, 1));
        ta.push_back(now_us() - t0);
        t0 = now_us();
        if (k % 2 == 0) {
            for (int j = 0; j < R; j++)
                CK(cuMemUnmap(base + (size_t)j * G, G));
            tu1.push_back(now_us() - t0);
        } else {
            CK(cuMemUnmap(base, R * G));
            tu16.push_back(now_us() - t0);
        }
    }
    report("16 x cuMemMap 2 MiB (one run)", tm);
    report("cuMemSetAccess over 32 MiB (16 mappings)", ta);
    report("16 x cuMemUnmap 2 MiB", tu1);
    report("cuMemUnmap of 32 MiB covering 16 mappings", tu16);

    /* Alias: a handle mapped at a second address while still mapped at the
     * first, checked by a kernel writing through one and reading the other. */
    t.clear();
    std::vector<double> tua;
    for (int i = 0; i < N; i++) {
        CK(cuMemMap(va + (size_t)i * G, G, 0, h[i], 0));
        CK(cuMemSetAccess(va + (size_t)i * G, G, &acc, 1));
    }
    for (int i = 0; i < N; i++) {
        double t0 = now_us();
        CK(cuMemMap(va2 + (size_t)i * G, G, 0, h[i], 0));
        CK(cuMemSetAccess(va2 + (size_t)i * G, G, &acc, 1));
        t.push_back(now_us() - t0);
    }
    report("alias: map + access of a handle mapped elsewhere", t);
    unsigned *bad = nullptr;
    cudaMalloc(&bad, 4);
    cudaMemset(bad, 0, 4);
    size_t words = G / 4;
    fill<<<64, 256>>>((unsigned *)(va + 3 * G), words, 12345u);
    check<<<64, 256>>>((const unsigned *)(va2 + 3 * G), words, 12345u, bad);
    unsigned nbad = 1;
    cudaMemcpy(&nbad, bad, 4, cudaMemcpyDeviceToHost);
    printf("alias coherence: %u mismatches of %zu words (%s)\n", nbad, words,
           cudaGetErrorString(cudaGetLastError()));
    for (int i = 0; i < N; i++) {
        double t0 = now_us();
        CK(cuMemUnmap(va + (size_t)i * G, G));
        tua.push_back(now_us() - t0);
    }
    report("unmap one alias (the other stays)", tua);
    for (int i = 0; i < N; i++)
        CK(cuMemUnmap(va2 + (size_t)i * G, G));

    /* A 32 MiB handle in one mapping. */
    {
        std::vector<double> tc, tmb, tab, tub, tr;
        for (int i = 0; i < N / 4; i++) {
            CUmemGenericAllocationHandle hb;
            double t0 = now_us();
            CK(cuMemCreate(&hb, 16 * G, &prop, 0));
            tc.push_back(now_us() - t0);
            t0 = now_us();
            CK(cuMemMap(va, 16 * G, 0, hb, 0));
            tmb.push_back(now_us() - t0);
            t0 = now_us();
            CK(cuMemSetAccess(va, 16 * G, &acc, 1));
            tab.push_back(now_us() - t0);
            t0 = now_us();
            CK(cuMemUnmap(va, 16 * G));
            tub.push_back(now_us() - t0);
            t0 = now_us();
            CK(cuMemRelease(hb));
            tr.push_back(now_us() - t0);
        }
        report("cuMemCreate 32 MiB", tc);
        report("cuMemMap 32 MiB (one handle)", tmb);
        report("cuMemSetAccess 32 MiB (one mapping)", tab);
        report("cuMemUnmap 32 MiB (one mapping)", tub);
        report("cuMemRelease 32 MiB", tr);
    }

    /* Synchronization, for scale. */
    {
        CUstream s;
        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CUevent e;
        CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
        t.clear();
        for (int i = 0; i < N; i++) {
            double t0 = now_us();
            CK(cuEventRecord(e, s));
            CK(cuEventSynchronize(e));
            t.push_back(now_us() - t0);
        }
        report("event record + synchronize, idle stream", t);
        t.clear();
        for (int i = 0; i < N; i++) {
            double t0 = now_us();
            CK(cuEventRecord(e, s));
            CK(cuEventQuery(e) == CUDA_ERROR_NOT_READY ? CUDA_SUCCESS : CUDA_SUCCESS);
            t.push_back(now_us() - t0);
        }
        report("event record + query, idle stream", t);
        t.clear();
        for (int i = 0; i < N; i++) {
            double t0 = now_us();
            CK(cuCtxSynchronize());
            t.push_back(now_us() - t0);
        }
        report("cuCtxSynchronize, idle device", t);

        /* Do the calls wait for a kernel running elsewhere on the device? A
         * kernel of ~2 ms on stream s, then each call on an unrelated granule. */
        int clk_khz = 0;
        cuDeviceGetAttribute(&clk_khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev);
        long long cyc = (long long)clk_khz * 2; /* ~2 ms */
        const char *names[] = {"cuMemMap", "cuMemSetAccess", "cuMemUnmap", "cuMemCreate", "cuMemRelease"};
        std::vector<double> busy[5];
        int M = N < 50 ? N : 50;
        for (int i = 0; i < M; i++) {
            CUmemGenericAllocationHandle hx;
            spin<<<1, 1, 0, (cudaStream_t)s>>>(cyc);
            double t0 = now_us();
            CK(cuMemCreate(&hx, G, &prop, 0));
            busy[3].push_back(now_us() - t0);
            t0 = now_us();
            CK(cuMemMap(va + 5 * G, G, 0, hx, 0));
            busy[0].push_back(now_us() - t0);
            t0 = now_us();
            CK(cuMemSetAccess(va + 5 * G, G, &acc, 1));
            busy[1].push_back(now_us() - t0);
            t0 = now_us();
            CK(cuMemUnmap(va + 5 * G, G));
            busy[2].push_back(now_us() - t0);
            t0 = now_us();
            CK(cuMemRelease(hx));
            busy[4].push_back(now_us() - t0);
            CK(cuStreamSynchronize(s));
        }
        for (int k = 0; k < 5; k++) {
            char label[96];
            snprintf(label, sizeof(label), "%s while a 2 ms kernel runs", names[k]);
            report(label, busy[k]);
        }
        cuEventDestroy(e);
        cuStreamDestroy(s);
    }
    for (int i = 0; i < N * R; i++)
        CK(cuMemRelease(h[i]));
    CK(cuMemAddressFree(va, (size_t)N * 16 * G));
    CK(cuMemAddressFree(va2, (size_t)N * 16 * G));
    cudaFree(bad);
    printf("done\n");
    return 0;
}
