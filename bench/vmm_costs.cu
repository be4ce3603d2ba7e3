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
 * Last, the cost table: every kind of driver call carve's driver ledger
 * counts (carve.h, carve_driver_op), each measured as carve's CUDA backends
 * make it (a handle released once mapped, so the unmap frees its memory;
 * access set over a run of mappings) at a few shapes, and fitted to what it
 * scales with: per call, per mapping the call covers, per MiB. With
 * --header, the table is printed on stdout in the form of
 * lib/backend/driver_costs.h (everything else on stderr), so that
 *
 *     ./vmm_costs 200 --header > lib/backend/driver_costs.h
 *
 * regenerates the table the modeled driver time is computed from, with
 * this device's name and this month's date in it.
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

static FILE *info; /* the measurements: stdout, or stderr under --header */

static void report(const char *what, const std::vector<double> &v) {
    std::vector<double> s = v;
    std::sort(s.begin(), s.end());
    fprintf(info, "%-58s median %9.2f us   p10 %9.2f   p90 %9.2f   (n=%zu)\n", what, median(v), s[s.size() / 10],
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

/* ---- the cost table ------------------------------------------------------ */

/* The kinds of carve.h's carve_driver_op, in its order, as driver_costs.h
 * names them. */
static const char *const kind_names[] = {
    "CARVE_DRV_CREATE",    "CARVE_DRV_RELEASE",   "CARVE_DRV_MAP",          "CARVE_DRV_ACCESS",
    "CARVE_DRV_UNMAP",     "CARVE_DRV_RETAIN",    "CARVE_DRV_RESERVE",      "CARVE_DRV_UNRESERVE",
    "CARVE_DRV_MALLOC",    "CARVE_DRV_FREE",      "CARVE_DRV_EVENT_RECORD", "CARVE_DRV_EVENT_QUERY",
    "CARVE_DRV_EVENT_SYNC", "CARVE_DRV_DEVICE_SYNC"};
enum { KINDS = sizeof(kind_names) / sizeof(kind_names[0]) };

struct cost {
    double call, mapping, mib; /* ns */
    char note[96];             /* the medians it was fitted from, us */
};

static double clamp0(double x) { return x < 0 ? 0 : x; }

/* A cost from one call covering one mapping of a MiB (t1), one covering k
 * mappings of a MiB each (tk; 0: not measured), and one covering one mapping
 * of b MiB (tb; 0: not measured), all in us. */
static cost fit(double t1, double a, int k, double tk, double b, double tb) {
    cost c = {};
    c.mib = tb > 0 ? clamp0((tb - t1) / (b - a)) * 1e3 : 0;
    c.mapping = k > 1 && tk > 0 ? clamp0((tk - t1 - (k - 1) * a * c.mib / 1e3) / (k - 1)) * 1e3 : 0;
    c.call = clamp0(t1 * 1e3 - c.mapping - a * c.mib);
    if (k > 1 && tk > 0)
        snprintf(c.note, sizeof(c.note), "1 x %.0f MiB %.2f, %d x %.0f MiB %.2f, 1 x %.0f MiB %.2f", a, t1, k, a, tk, b,
                 tb);
    else if (tb > 0)
        snprintf(c.note, sizeof(c.note), "%.0f MiB %.2f, %.0f MiB %.2f", a, t1, b, tb);
    else
        snprintf(c.note, sizeof(c.note), "%.2f", t1);
    return c;
}

/* Time f() reps times, the median in us. */
template <class F> static double timed(int reps, F f) {
    std::vector<double> t;
    for (int i = 0; i < reps; i++) {
        double t0 = now_us();
        f(i);
        t.push_back(now_us() - t0);
    }
    return median(t);
}

static void print_table(FILE *out, const char *device, int driver, const cost *c) {
    time_t now = time(nullptr);
    char date[16];
    strftime(date, sizeof(date), "%Y-%m", gmtime(&now));
    fprintf(out,
            "/*\n"
            " * driver_costs.h — what each kind of driver call costs: the one table the\n"
            " * modeled driver time is computed from (ledger.c; carve_stats.driver_model_ns).\n"
            " *\n"
            " * A cost is split by what it scales with, in nanoseconds: each call, each\n"
            " * mapping the call covers, each MiB it covers (a cuMemSetAccess over 16\n"
            " * mappings costs 16 mappings, whatever their size: the driver's cost is per\n"
            " * mapping). bench/vmm_costs.cu measures every entry on a GPU and prints this\n"
            " * file whole (`vmm_costs 200 --header > lib/backend/driver_costs.h`), so the\n"
            " * table is regenerated with one command on the device. The comment of each\n"
            " * entry says what it was fitted from (medians, us).\n"
            " */\n"
            "#ifndef CARVE_BACKEND_DRIVER_COSTS_H\n"
            "#define CARVE_BACKEND_DRIVER_COSTS_H\n\n"
            "#include \"carve.h\"\n\n"
            "#define CARVE_DRIVER_COSTS_FROM \"%s (driver API %d), bench/vmm_costs.cu, %s\"\n\n"
            "typedef struct carve_driver_cost {\n"
            "    uint32_t per_call_ns;    /* each call */\n"
            "    uint32_t per_mapping_ns; /* each mapping the call covers */\n"
            "    uint32_t per_mib_ns;     /* each MiB the call covers */\n"
            "} carve_driver_cost;\n\n"
            "static const carve_driver_cost carve_driver_costs[CARVE_DRV_KINDS] = {\n"
            "    /*                          call  mapping  MiB      fitted from */\n",
            device, driver, date);
    for (int k = 0; k < KINDS; k++) {
        char entry[96];
        snprintf(entry, sizeof(entry), "    [%s]%*s = {%.0f, %.0f, %.0f},", kind_names[k],
                 (int)(22 - strlen(kind_names[k])), "", c[k].call, c[k].mapping, c[k].mib);
        fprintf(out, "%-52s /* %s */\n", entry, c[k].note);
    }
    fprintf(out, "};\n\n#endif\n");
}

/* Every kind of the table, measured as carve makes the call. */
static void measure_table(FILE *out, CUdevice dev, const CUmemAllocationProp &prop, const CUmemAccessDesc &acc,
                          int reps) {
    const size_t M = 1u << 20, G = 2 * M, B = 32 * M;
    const int K = 16;
    int n = reps < 8 ? 8 : reps;
    cost c[KINDS];
    CUdeviceptr va = 0;
    const size_t span = (size_t)K * G > B ? (size_t)K * G : B;
    CK(cuMemAddressReserve(&va, span, G, 0, 0));
    CUmemGenericAllocationHandle h[K], hb;

    /* cuMemCreate and cuMemRelease of unmapped handles, 2 and 32 MiB. */
    std::vector<double> c2, c32, r2, r32;
    for (int i = 0; i < n; i++) {
        double t0 = now_us();
        CK(cuMemCreate(&h[0], G, &prop, 0));
        c2.push_back(now_us() - t0);
        t0 = now_us();
        CK(cuMemCreate(&hb, B, &prop, 0));
        c32.push_back(now_us() - t0);
        /* carve lets a handle go while its mapping holds the memory */
        CK(cuMemMap(va, G, 0, h[0], 0));
        t0 = now_us();
        CK(cuMemRelease(h[0]));
        r2.push_back(now_us() - t0);
        CK(cuMemUnmap(va, G));
        CK(cuMemMap(va, B, 0, hb, 0));
        t0 = now_us();
        CK(cuMemRelease(hb));
        r32.push_back(now_us() - t0);
        CK(cuMemUnmap(va, B));
    }
    c[0] = fit(median(c2), 2, 0, 0, 32, median(c32));
    c[1] = fit(median(r2), 2, 0, 0, 32, median(r32));

    /* cuMemMap, cuMemSetAccess over one mapping / K mappings / one large
     * one, cuMemUnmap likewise: each handle released once mapped, as carve
     * does, so the unmap frees the memory. */
    std::vector<double> m2, m32, a1, ak, ab, u1, uk, ub, rt;
    for (int i = 0; i < n; i++) {
        CK(cuMemCreate(&h[0], G, &prop, 0));
        double t0 = now_us();
        CK(cuMemMap(va, G, 0, h[0], 0));
        m2.push_back(now_us() - t0);
        CK(cuMemRelease(h[0]));
        t0 = now_us();
        CK(cuMemSetAccess(va, G, &acc, 1));
        a1.push_back(now_us() - t0);
        CUmemGenericAllocationHandle back;
        t0 = now_us();
        CK(cuMemRetainAllocationHandle(&back, (void *)va));
        rt.push_back(now_us() - t0);
        CK(cuMemRelease(back));
        t0 = now_us();
        CK(cuMemUnmap(va, G));
        u1.push_back(now_us() - t0);

        for (int j = 0; j < K; j++) {
            CK(cuMemCreate(&h[j], G, &prop, 0));
            CK(cuMemMap(va + j * G, G, 0, h[j], 0));
            CK(cuMemRelease(h[j]));
        }
        t0 = now_us();
        CK(cuMemSetAccess(va, K * G, &acc, 1));
        ak.push_back(now_us() - t0);
        t0 = now_us();
        CK(cuMemUnmap(va, K * G));
        uk.push_back(now_us() - t0);

        CK(cuMemCreate(&hb, B, &prop, 0));
        t0 = now_us();
        CK(cuMemMap(va, B, 0, hb, 0));
        m32.push_back(now_us() - t0);
        CK(cuMemRelease(hb));
        t0 = now_us();
        CK(cuMemSetAccess(va, B, &acc, 1));
        ab.push_back(now_us() - t0);
        t0 = now_us();
        CK(cuMemUnmap(va, B));
        ub.push_back(now_us() - t0);
    }
    c[2] = fit(median(m2), 2, 0, 0, 32, median(m32));
    c[3] = fit(median(a1), 2, K, median(ak), 32, median(ab));
    c[4] = fit(median(u1), 2, K, median(uk), 32, median(ub));
    c[5] = fit(median(rt), 2, 0, 0, 0, 0);
    CK(cuMemAddressFree(va, span));

    /* Address space: 2 MiB and 64 GiB. */
    std::vector<double> v2, v64, f2, f64;
    for (int i = 0; i < n; i++) {
        CUdeviceptr p;
        double t0 = now_us();
        CK(cuMemAddressReserve(&p, G, G, 0, 0));
        v2.push_back(now_us() - t0);
        t0 = now_us();
        CK(cuMemAddressFree(p, G));
        f2.push_back(now_us() - t0);
        t0 = now_us();
        CK(cuMemAddressReserve(&p, (size_t)64 << 30, G, 0, 0));
        v64.push_back(now_us() - t0);
        t0 = now_us();
        CK(cuMemAddressFree(p, (size_t)64 << 30));
        f64.push_back(now_us() - t0);
    }
    c[6] = fit(median(v2), 2, 0, 0, 65536, median(v64));
    c[7] = fit(median(f2), 2, 0, 0, 65536, median(f64));

    /* Segments: cudaMalloc and cudaFree, 2 and 64 MiB. */
    std::vector<double> s2, s64, x2, x64;
    for (int i = 0; i < n; i++) {
        void *p = nullptr, *q = nullptr;
        double t0 = now_us();
        cudaMalloc(&p, G);
        s2.push_back(now_us() - t0);
        t0 = now_us();
        cudaMalloc(&q, 64 * M);
        s64.push_back(now_us() - t0);
        t0 = now_us();
        cudaFree(p);
        x2.push_back(now_us() - t0);
        t0 = now_us();
        cudaFree(q);
        x64.push_back(now_us() - t0);
    }
    c[8] = fit(median(s2), 2, 0, 0, 64, median(s64));
    c[9] = fit(median(x2), 2, 0, 0, 64, median(x64));

    /* Events on an idle stream: a record alone, a query and a
     * synchronization of a completed event, a device synchronization. */
    cudaStream_t st;
    cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    cudaEvent_t ev;
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    c[10] = fit(timed(n, [&](int) { cudaEventRecord(ev, st); }), 2, 0, 0, 0, 0);
    cudaEventSynchronize(ev);
    c[11] = fit(timed(n, [&](int) { (void)cudaEventQuery(ev); }), 2, 0, 0, 0, 0);
    c[12] = fit(timed(n, [&](int) { cudaEventSynchronize(ev); }), 2, 0, 0, 0, 0);
    c[13] = fit(timed(n, [&](int) { cudaDeviceSynchronize(); }), 2, 0, 0, 0, 0);
    cudaEventDestroy(ev);
    cudaStreamDestroy(st);
    if (cudaGetLastError() != cudaSuccess) {
        fprintf(stderr, "vmm_costs: a runtime call of the table failed\n");
        exit(1);
    }

    char name[128];
    CK(cuDeviceGetName(name, sizeof(name), dev));
    int driver = 0;
    CK(cuDriverGetVersion(&driver));
    for (int k = 0; k < KINDS; k++)
        fprintf(info, "table %-24s %10.0f ns/call %10.0f ns/mapping %8.0f ns/MiB   (%s)\n", kind_names[k],
                c[k].call, c[k].mapping, c[k].mib, c[k].note);
    if (out)
        print_table(out, name, driver, c);
}

int main(int argc, char **argv) {
    int reps = 200, header = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--header"))
            header = 1;
        else if ((reps = atoi(argv[i])) <= 0) {
            fprintf(stderr, "usage: vmm_costs [REPETITIONS] [--header]\n");
            return 2;
        }
    }
    info = header ? stderr : stdout;
    CK(cuInit(0));
    cudaSetDevice(0);
    cudaFree(0); /* primary context current */
    CUdevice dev;
    CK(cuCtxGetDevice(&dev));
    char name[128];
    CK(cuDeviceGetName(name, sizeof(name), dev));
    int drv = 0;
    CK(cuDriverGetVersion(&drv));
    fprintf(info, "device: %s, driver API %d, %d repetitions\n", name, drv, reps);

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
    fprintf(info, "granularity: minimum %zu, recommended %zu\n", gmin, grec);
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
    fprintf(info, "alias coherence: %u mismatches of %zu words (%s)\n", nbad, words,
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
    measure_table(header ? stdout : nullptr, dev, prop, acc, reps);
    fprintf(info, "done\n");
    return 0;
}
