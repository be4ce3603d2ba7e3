/*
 * test_pdl_order.cu — what carve_gemm's launches rely on when a call's first
 * kernel is launched with programmatic dependent launch (gemm_tc_common.cuh,
 * carve_tc_pdl_attr: by default where it is the decode or the streaming
 * kernel): that its griddepcontrol.wait, made before it touches memory,
 * waits for all the work queued before it, whatever that work is and however
 * it was launched. No CUDA document promises this for every case; this test
 * checks it on the device, in the cases where it might not hold:
 *
 *   - the kernel just before was itself launched with the attribute and
 *     never waited, after a kernel that let its dependents start at once and
 *     then ran for tens of milliseconds (does the wait cover the kernel
 *     before the one before?), directly, then through an event record or a
 *     copy, and captured into a graph;
 *   - the work just before is not a kernel: a device-to-device copy, a
 *     host-to-device copy, a memset, a host function;
 *   - the work comes from another stream joined by an event (one kernel, or
 *     two joined into the reader: a kernel on each stream), directly and in a
 *     captured graph; from the legacy stream to a blocking stream and to the
 *     per-thread stream; from a blocking stream to the legacy stream; a graph
 *     whose first node is the reader, launched after the work;
 *   - the reader is a cluster of two blocks, or one block on every SM reading
 *     through the non-coherent path (__ldg, as the streaming kernel reads)
 *     while another stream keeps the word's sector in every SM's L1.
 *
 * In each case writers spin for about 50 ms, then store 1; the reader,
 * launched with the attribute, waits and reads, in every block. It must read
 * what the writers stored (1, or 2 where it adds two words), every block,
 * every repetition. Controls show that the probe can see an overlap at all:
 * the same chains with a reader that does not wait must read 0 (the reader
 * ran before the writer was done), on one stream, in a graph and across
 * streams. Where a control reads anything else (kernels serialized: a
 * sanitizer, CUDA_LAUNCH_BLOCKING=1), the test cannot judge and says so
 * (exit 77, skipped). Exits 77 as well without a device of compute
 * capability 9.0 or later that runs this build's kernels.
 */
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

namespace {

__global__ void writer(volatile int *x, long long spin, int trigger) {
#if __CUDA_ARCH__ >= 900
    if (trigger)
        asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    const long long t0 = clock64();
    while (clock64() - t0 < spin) {
    }
    if (threadIdx.x == 0) {
        *x = 1;
        __threadfence_system();
    }
}

/* Launched with the attribute; never waits (a kernel that does not depend on
 * the one before it may do so). */
__global__ void no_wait(int trigger) {
#if __CUDA_ARCH__ >= 900
    if (trigger)
        asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* out[block] = x + y (y may be NULL), read after the wait (wait) through a
 * volatile load, or through the non-coherent path (ldg). */
__global__ void reader(const int *x, const int *y, int *out, int wait, int ldg) {
#if __CUDA_ARCH__ >= 900
    if (wait)
        asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    const int a = ldg ? __ldg(x) : *(const volatile int *)x;
    const int b = !y ? 0 : ldg ? __ldg(y) : *(const volatile int *)y;
    if (threadIdx.x == 0)
        out[blockIdx.x] = a + b;
}

/* Keeps x's 32-byte sector in the L1 of every SM it runs on while the writer
 * spins (it reads the word next to x). */
__global__ void polluter(const int *x, long long spin, int *sink) {
    const long long t0 = clock64();
    int s = 0;
    while (clock64() - t0 < spin)
        s += __ldg(x + 1) + *(const int *)(x + 1);
    if (s == 12345)
        *sink = s;
}

void host_nop(void *) {}

#define CU(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));        \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

template <typename... A>
cudaError_t launch(void (*k)(A...), cudaStream_t s, bool pdl, int cluster, int grid, A... args) {
    cudaLaunchConfig_t c = {};
    c.gridDim = dim3(grid);
    c.blockDim = dim3(32);
    c.stream = s;
    cudaLaunchAttribute attr[2];
    int n = 0;
    if (cluster > 1) {
        attr[n].id = cudaLaunchAttributeClusterDimension;
        attr[n].val.clusterDim.x = (unsigned)cluster;
        attr[n].val.clusterDim.y = 1;
        attr[n].val.clusterDim.z = 1;
        n++;
    }
    if (pdl) {
        attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[n].val.programmaticStreamSerializationAllowed = 1;
        n++;
    }
    c.attrs = attr;
    c.numAttrs = n;
    return cudaLaunchKernelEx(&c, k, args...);
}

/* The graph captured on cap, instantiated (the graph itself freed). */
cudaGraphExec_t end_capture(cudaStream_t cap) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CU(cudaStreamEndCapture(cap, &g));
    CU(cudaGraphInstantiate(&ge, g, 0));
    CU(cudaGraphDestroy(g));
    return ge;
}

/* Launch ge on s, after what s holds; wait for it; free it. */
void run_graph(cudaGraphExec_t ge, cudaStream_t s) {
    CU(cudaGraphLaunch(ge, s));
    CU(cudaStreamSynchronize(s));
    CU(cudaGraphExecDestroy(ge));
}

enum Case {
    PDL_NO_WAIT_TRIGGERED,
    PDL_NO_WAIT,
    PDL_NO_WAIT_EVENT,
    PDL_NO_WAIT_COPY,
    COPY,
    COPY_FROM_HOST,
    MEMSET,
    HOST_FUNCTION,
    OTHER_STREAM,
    JOIN_TWO,
    LEGACY_TO_BLOCKING,
    BLOCKING_TO_LEGACY,
    LEGACY_TO_PER_THREAD,
    GRAPH_PDL_NO_WAIT,
    GRAPH_FORK_JOIN,
    GRAPH_JOIN_TWO,
    GRAPH_FIRST_NODE,
    CLUSTER_READER,
    EVERY_SM_LDG,
    CONTROL_SAME_STREAM, /* the controls come last */
    CONTROL_GRAPH,
    CONTROL_OTHER_STREAM,
    NCASES
};

struct Desc {
    const char *name;
    int want;
};

const Desc cases[NCASES] = {
    {"writer, a kernel with the attribute that never waits (it lets the next start), reader", 1},
    {"writer, a kernel with the attribute that never waits, reader", 1},
    {"writer, a kernel with the attribute that never waits, an event record, reader", 1},
    {"writer, a kernel with the attribute that never waits, a copy, reader reads the copy", 1},
    {"writer, a device-to-device copy, reader reads the copy", 1},
    {"writer, a host-to-device copy of 1 into y, reader reads x + y", 2},
    {"writer, a memset of another word, reader", 1},
    {"writer, a host function, reader", 1},
    {"writer on another stream, joined by an event, reader", 1},
    {"a writer on each of two streams, joined by an event, reader reads x + y", 2},
    {"writer on the legacy stream, reader on a blocking stream", 1},
    {"writer on a blocking stream, reader on the legacy stream", 1},
    {"writer on the legacy stream, reader on the per-thread stream", 1},
    {"graph: writer, a kernel with the attribute that never waits, reader", 1},
    {"graph: writer on a forked stream, joined back, reader", 1},
    {"graph: a writer on the stream and one on a forked stream, joined, reader reads x + y", 2},
    {"graph whose first node is the reader, launched after the writer", 1},
    {"writer, a kernel with the attribute that never waits, reader as a cluster of 2 blocks", 1},
    {"writer, ..., reader on every SM through __ldg, x's sector held in every L1 meanwhile", 1},
    {"control: writer, a kernel with the attribute that never waits, reader without the wait", 0},
    {"control: the same in a graph", 0},
    {"control: writer on another stream, nothing joining, reader without the wait", 0},
};

} // namespace

int main() {
    int ndev = 0, cc = 0, clock_khz = 0, sms = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("skip: no CUDA device\n");
        return 77;
    }
    CU(cudaDeviceGetAttribute(&cc, cudaDevAttrComputeCapabilityMajor, 0));
    if (cc < 9) {
        printf("skip: programmatic dependent launch needs compute capability 9.0 (this device: %d.x)\n", cc);
        return 77;
    }
    cudaFuncAttributes fa;
    if (cudaFuncGetAttributes(&fa, reader) != cudaSuccess) {
        printf("skip: this build's kernels do not run on this device (%s)\n", cudaGetErrorString(cudaGetLastError()));
        return 77;
    }
    CU(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    CU(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const long long spin = (long long)clock_khz * 50; /* about 50 ms */
    int *x, *y, *out, *sink, *host_one;
    CU(cudaMalloc(&x, 256));
    CU(cudaMalloc(&y, 256));
    CU(cudaMalloc(&out, 4096 * sizeof(int)));
    CU(cudaMalloc(&sink, sizeof(int)));
    CU(cudaHostAlloc(&host_one, sizeof(int), 0));
    *host_one = 1;
    cudaStream_t s, s2, blocking;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CU(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CU(cudaStreamCreate(&blocking));
    cudaEvent_t ev, ev2;
    CU(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CU(cudaEventCreateWithFlags(&ev2, cudaEventDisableTiming));
    volatile int *xv = x, *yv = y;
    const int *xr = x, *yr = y, *nul = nullptr;
    /* Every kernel launched once first: a module loaded lazily on a first
     * launch may synchronize, which would order that case by itself. */
    CU(launch(writer, s, false, 1, 1, xv, 0LL, 0));
    CU(launch(no_wait, s, true, 1, 1, 0));
    CU(launch(reader, s, true, 1, 1, xr, nul, out, 1, 0));
    CU(launch(reader, s, true, 2, 2, xr, nul, out, 1, 1));
    CU(launch(polluter, s, false, 1, 1, xr, 0LL, sink));
    CU(cudaDeviceSynchronize());

    const int reps = 3;
    int failures = 0, blind = 0;
    for (int c = 0; c < NCASES; c++) {
        int lo = 1 << 30, hi = -(1 << 30);
        for (int r = 0; r < reps; r++) {
            CU(cudaMemset(x, 0, 256));
            CU(cudaMemset(y, 0, 256));
            CU(cudaMemset(out, 0xff, 4096 * sizeof(int)));
            CU(cudaDeviceSynchronize());
            int blocks = 1;
            cudaGraphExec_t ge;
            switch (c) {
            case PDL_NO_WAIT_TRIGGERED:
            case PDL_NO_WAIT:
                CU(launch(writer, s, false, 1, 1, xv, spin, 1));
                CU(launch(no_wait, s, true, 1, 1, c == PDL_NO_WAIT_TRIGGERED ? 1 : 0));
                CU(launch(reader, s, true, 1, 1, xr, nul, out, 1, 0));
                break;
            case PDL_NO_WAIT_EVENT:
                CU(launch(writer, s, false, 1, 1, xv, spin, 1));
                CU(launch(no_wait, s, true, 1, 1, 1));
                CU(cudaEventRecord(ev, s));
                CU(launch(reader, s, true, 1, 1, xr, nul, out, 1, 0));
                break;
            case PDL_NO_WAIT_COPY:
                CU(launch(writer, s, false, 1, 1, xv, spin, 1));
                CU(launch(no_wait, s, true, 1, 1, 1));
                CU(cudaMemcpyAsync(y, x, sizeof(int), cudaMemcpyDeviceToDevice, s));
                CU(launch(reader, s, true, 1, 1, yr, nul, out, 1, 0));
                break;
            case COPY:
                CU(launch(writer, s, false, 1, 1, xv, spin, 1));
                CU(cudaMemcpyAsync(y, x, sizeof(int), cudaMemcpyDeviceToDevice, s));
                CU(launch(reader, s, true, 1, 1, yr, nul, out, 1, 0));
                break;
            case COPY_FROM_HOST:
                CU(launch(writer, s, false, 1, 1, xv, spin, 1));
                CU(cudaMemcpyAsync(y, host_one, sizeof(int), cudaMemcpyHostToDevice, s));
                CU(launch(reader, s, true, 1, 1, xr, yr, out, 1, 0));
                break;
            case MEMSET:
                CU(launch(writer, s, false, 1, 1, xv, spin, 1));
                CU(cudaMemsetAsync(y, 0, sizeof(int), s));
                CU(launch(reader, s, true, 1, 1, xr, nul, out, 1, 0));
                break;
            case HOST_FUNCTION:
                CU(launch(writer, s, false, 1, 1, xv, spin, 1));
                CU(cudaLaunchHostFunc(s, host_nop, nullptr));
                CU(launch(reader, s, true, 1, 1, xr, nul, out, 1, 0));
                break;
            case OTHER_STREAM:
                CU(launch(writer, s2, false, 1, 1, xv, spin, 1));
                CU(cudaEventRecord(ev, s2));
                CU(cudaStreamWaitEvent(s, ev, 0));
                CU(launch(reader, s, true, 1, 1, xr, nul, out, 1, 0));
                break;
            case JOIN_TWO:
                CU(launch(writer, s, false, 1, 1, xv, spin, 1));
                CU(launch(writer, s2, false, 1, 1, yv, spin, 1));
                CU(cudaEventRecord(ev, s2));
                CU(cudaStreamWaitEvent(s, ev, 0));
                CU(launch(reader, s, true, 1, 1, xr, yr, out, 1, 0));
                break;
            case LEGACY_TO_BLOCKING:
                CU(launch(writer, (cudaStream_t)0, false, 1, 1, xv, spin, 1));
                CU(launch(reader, blocking, true, 1, 1, xr, nul, out, 1, 0));
                break;
            case BLOCKING_TO_LEGACY:
                CU(launch(writer, blocking, false, 1, 1, xv, spin, 1));
                CU(launch(reader, (cudaStream_t)0, true, 1, 1, xr, nul, out, 1, 0));
                break;
            case LEGACY_TO_PER_THREAD:
                CU(launch(writer, (cudaStream_t)0, false, 1, 1, xv, spin, 1));
                CU(launch(reader, cudaStreamPerThread, true, 1, 1, xr, nul, out, 1, 0));
                break;
            case GRAPH_PDL_NO_WAIT:
            case CONTROL_GRAPH:
                CU(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
                CU(launch(writer, s, false, 1, 1, xv, spin, 1));
                CU(launch(no_wait, s, true, 1, 1, 1));
                CU(launch(reader, s, true, 1, 1, xr, nul, out, c == GRAPH_PDL_NO_WAIT ? 1 : 0, 0));
                run_graph(end_capture(s), s);
                break;
            case GRAPH_FORK_JOIN:
                CU(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
                CU(cudaEventRecord(ev, s));
                CU(cudaStreamWaitEvent(s2, ev, 0));
                CU(launch(writer, s2, false, 1, 1, xv, spin, 1));
                CU(cudaEventRecord(ev2, s2));
                CU(cudaStreamWaitEvent(s, ev2, 0));
                CU(launch(reader, s, true, 1, 1, xr, nul, out, 1, 0));
                run_graph(end_capture(s), s);
                break;
            case GRAPH_JOIN_TWO: /* the reader's node depends on two kernel nodes */
                CU(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
                CU(cudaEventRecord(ev, s));
                CU(cudaStreamWaitEvent(s2, ev, 0));
                CU(launch(writer, s, false, 1, 1, xv, spin, 1));
                CU(launch(writer, s2, false, 1, 1, yv, spin, 1));
                CU(cudaEventRecord(ev2, s2));
                CU(cudaStreamWaitEvent(s, ev2, 0));
                CU(launch(reader, s, true, 1, 1, xr, yr, out, 1, 0));
                run_graph(end_capture(s), s);
                break;
            case GRAPH_FIRST_NODE:
                CU(cudaStreamBeginCapture(s2, cudaStreamCaptureModeThreadLocal));
                CU(launch(reader, s2, true, 1, 1, xr, nul, out, 1, 0));
                ge = end_capture(s2);
                CU(launch(writer, s, false, 1, 1, xv, spin, 1));
                run_graph(ge, s);
                break;
            case CLUSTER_READER:
                blocks = 2;
                CU(launch(writer, s, false, 1, 1, xv, spin, 1));
                CU(launch(no_wait, s, true, 1, 1, 1));
                CU(launch(reader, s, true, 2, 2, xr, nul, out, 1, 0));
                break;
            case EVERY_SM_LDG:
                blocks = sms;
                CU(launch(writer, s, false, 1, 1, xv, spin, 1));
                CU(launch(polluter, s2, false, 1, sms, xr, spin + spin / 5, sink));
                CU(launch(no_wait, s, true, 1, 1, 1));
                CU(launch(reader, s, true, 1, sms, xr, nul, out, 1, 1));
                break;
            case CONTROL_SAME_STREAM:
                CU(launch(writer, s, false, 1, 1, xv, spin, 1));
                CU(launch(no_wait, s, true, 1, 1, 1));
                CU(launch(reader, s, true, 1, 1, xr, nul, out, 0, 0));
                break;
            case CONTROL_OTHER_STREAM:
                CU(launch(writer, s2, false, 1, 1, xv, spin, 1));
                CU(launch(reader, s, true, 1, 1, xr, nul, out, 0, 0));
                break;
            }
            CU(cudaDeviceSynchronize());
            static int h[4096];
            CU(cudaMemcpy(h, out, (size_t)blocks * sizeof(int), cudaMemcpyDeviceToHost));
            for (int b = 0; b < blocks; b++) {
                lo = h[b] < lo ? h[b] : lo;
                hi = h[b] > hi ? h[b] : hi;
            }
        }
        const int ok = lo == cases[c].want && hi == cases[c].want;
        const int control = c >= CONTROL_SAME_STREAM;
        if (!ok && control)
            blind++;
        else if (!ok)
            failures++;
        printf("%s %s: read %d..%d (want %d)\n", ok ? "ok  " : control ? "BLIND" : "FAIL", cases[c].name, lo, hi,
               cases[c].want);
    }
    CU(cudaEventDestroy(ev));
    CU(cudaEventDestroy(ev2));
    CU(cudaStreamDestroy(s));
    CU(cudaStreamDestroy(s2));
    CU(cudaStreamDestroy(blocking));
    CU(cudaFreeHost(host_one));
    CU(cudaFree(x));
    CU(cudaFree(y));
    CU(cudaFree(out));
    CU(cudaFree(sink));
    printf("%d checks, %d failed\n", (int)CONTROL_SAME_STREAM, failures);
    if (failures)
        return 1;
    if (blind) {
        printf("skip: %d control(s) did not overlap (kernels serialized?): the checks above cannot be judged\n", blind);
        return 77;
    }
    return 0;
}
