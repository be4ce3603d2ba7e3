/*
 * app_runtime.cu — a CUDA runtime program that knows nothing of carve, for
 * the drop-in tests: built with nvcc's defaults (static cudart) and again
 * with -cudart shared, and run with and without carve-run.
 *
 * The one idea: every buffer the program holds carries a pattern of its own
 * (a kernel writes it on the buffer's stream, another verifies it before the
 * free), and a "late writer" — a kernel that sleeps, then writes a buffer —
 * is left running when the buffer is freed with cudaFree, while another
 * non-blocking stream immediately allocates and writes. If the allocator
 * handed the memory out again before the late writer finished, some
 * verification counts a mismatch. Each mode prints "OK <mode> ..." or
 * "FAIL ..." and exits non-zero.
 *
 * Usage: app_runtime MODE [ROUNDS]   (streams threads late destroyed info oom
 *                                     foreign capture fork faults bench bench-small;
 *                                     ROUNDS for destroyed, default 100)
 */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int failures;
#define CHECK(x)                                                     \
    do {                                                             \
        if (!(x)) {                                                  \
            printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #x);     \
            failures++;                                              \
        }                                                            \
    } while (0)
#define CU(x)                                                                                \
    do {                                                                                     \
        cudaError_t e_ = (x);                                                                \
        if (e_ != cudaSuccess) {                                                             \
            printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorName(e_));   \
            failures++;                                                                      \
        }                                                                                    \
    } while (0)

__device__ __host__ static inline uint64_t pattern(uint64_t id, uint64_t i) {
    uint64_t z = id * 0x9E3779B97F4A7C15ull + i * 0xD1B54A32D192ED03ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    return z ^ (z >> 31);
}

__global__ void k_fill(uint64_t *p, size_t n, uint64_t id, unsigned delay_us) {
    if (delay_us && threadIdx.x == 0) { /* the late writer: sleep, then write */
        unsigned long long t0 = clock64();
        while (clock64() - t0 < (unsigned long long)delay_us * 1500ull) {
        }
    }
    __syncthreads();
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = pattern(id, i);
}

__global__ void k_verify(const uint64_t *p, size_t n, uint64_t id, unsigned long long *bad) {
    unsigned long long b = 0;
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        b += p[i] != pattern(id, i);
    if (b)
        atomicAdd(bad, b);
}

static void fill(void *p, size_t bytes, uint64_t id, cudaStream_t s, unsigned delay_us = 0) {
    size_t n = bytes / 8;
    unsigned blocks = delay_us ? 4 : (unsigned)((n + 255) / 256 < 1024 ? (n + 255) / 256 + 1 : 1024);
    k_fill<<<blocks, 256, 0, s>>>((uint64_t *)p, n, id, delay_us);
    CU(cudaGetLastError());
}

static void verify(const void *p, size_t bytes, uint64_t id, unsigned long long *bad, cudaStream_t s) {
    size_t n = bytes / 8;
    unsigned blocks = (unsigned)((n + 255) / 256 < 1024 ? (n + 255) / 256 + 1 : 1024);
    k_verify<<<blocks, 256, 0, s>>>((const uint64_t *)p, n, id, bad);
    CU(cudaGetLastError());
}

static unsigned long long *counter(void) {
    unsigned long long *c = NULL;
    CU(cudaMallocManaged(&c, sizeof(*c)));
    *c = 0;
    return c;
}

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Random buffers on three streams (two non-blocking, plus the legacy
 * default stream), plain and stream-ordered, every one verified. */
static void mode_streams(void) {
    cudaStream_t s[3];
    s[0] = 0;
    CU(cudaStreamCreateWithFlags(&s[1], cudaStreamNonBlocking));
    CU(cudaStreamCreateWithFlags(&s[2], cudaStreamNonBlocking));
    unsigned long long *bad = counter();
    enum { N = 48 };
    void *p[N] = {0};
    size_t sz[N];
    uint64_t id[N];
    int st[N], async_[N];
    uint64_t next_id = 1;
    for (int step = 0; step < 3000; step++) {
        int i = (int)(rnd(&rng_state) % N);
        if (p[i]) {
            verify(p[i], sz[i], id[i], bad, s[st[i]]);
            if (async_[i])
                CU(cudaFreeAsync(p[i], s[st[i]]));
            else
                CU(cudaFree(p[i]));
            p[i] = NULL;
        } else {
            sz[i] = 256 + (rnd(&rng_state) % (8u << 20)) / 8 * 8;
            st[i] = (int)(rnd(&rng_state) % 3);
            async_[i] = (int)(rnd(&rng_state) % 2);
            id[i] = next_id++;
            if (async_[i])
                CU(cudaMallocAsync(&p[i], sz[i], s[st[i]]));
            else
                CU(cudaMalloc(&p[i], sz[i]));
            if (p[i])
                fill(p[i], sz[i], id[i], s[st[i]]);
        }
    }
    for (int i = 0; i < N; i++)
        if (p[i]) {
            verify(p[i], sz[i], id[i], bad, s[st[i]]);
            CU(async_[i] ? cudaFreeAsync(p[i], s[st[i]]) : cudaFree(p[i]));
        }
    CU(cudaDeviceSynchronize());
    CHECK(*bad == 0);
    printf("OK streams 3000 steps on 3 streams, %llu mismatched words\n", *bad);
    CU(cudaFree(bad));
    CU(cudaStreamDestroy(s[1]));
    CU(cudaStreamDestroy(s[2]));
}

/* Eight threads, each with its own non-blocking stream. */
static void *worker(void *arg) {
    uint64_t seed = 0x9E3779B97F4A7C15ull * ((uintptr_t)arg + 1);
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    unsigned long long *bad = counter();
    void *p[16] = {0};
    size_t sz[16];
    uint64_t id[16];
    for (int step = 0; step < 2000; step++) {
        int i = (int)(rnd(&seed) % 16);
        if (p[i]) {
            verify(p[i], sz[i], id[i], bad, s);
            CU(step % 2 ? cudaFree(p[i]) : cudaFreeAsync(p[i], s));
            p[i] = NULL;
        } else {
            sz[i] = 512 + (rnd(&seed) % (2u << 20)) / 8 * 8;
            id[i] = ((uintptr_t)arg << 32) | (uint64_t)step;
            CU(step % 3 ? cudaMalloc(&p[i], sz[i]) : cudaMallocAsync(&p[i], sz[i], s));
            if (p[i])
                fill(p[i], sz[i], id[i], s);
        }
    }
    for (int i = 0; i < 16; i++)
        if (p[i]) {
            verify(p[i], sz[i], id[i], bad, s);
            CU(cudaFree(p[i]));
        }
    CU(cudaStreamSynchronize(s));
    CHECK(*bad == 0);
    CU(cudaFree(bad));
    CU(cudaStreamDestroy(s));
    return NULL;
}

static void mode_threads(void) {
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    printf("OK threads 8 x 2000 steps\n");
}

/* cudaFree while a late writer still runs on a non-blocking stream; another
 * non-blocking stream allocates and writes at once. Nothing may collide. */
static void mode_late(void) {
    cudaStream_t a, b;
    CU(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CU(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    unsigned long long *bad = counter();
    const size_t size = 4 << 20;
    int reused = 0;
    for (int round = 0; round < 40; round++) {
        void *x = NULL, *y = NULL;
        CU(cudaMalloc(&x, size));
        fill(x, size, 1000 + round, a, 20000); /* writes 20 ms from now */
        CU(cudaFree(x));                        /* while it is still running */
        CU(cudaMalloc(&y, size));
        reused += x == y;
        fill(y, size, 5000 + round, b);
        CU(cudaStreamSynchronize(a));
        CU(cudaStreamSynchronize(b));
        verify(y, size, 5000 + round, bad, b);
        CU(cudaStreamSynchronize(b));
        CU(cudaFree(y));
    }
    CHECK(*bad == 0);
    printf("OK late 40 rounds, %d reused the freed address, %llu mismatched words\n", reused, *bad);
    CU(cudaFree(bad));
    CU(cudaStreamDestroy(a));
    CU(cudaStreamDestroy(b));
}

/* Ordered reuse (carve-run with no non-blocking stream): cudaFree while a
 * late writer still runs on a blocking stream or the legacy one; the
 * address may come back while it runs (allocations and frees of the same
 * size until it does, at most 256), and the next writer, on another blocking
 * stream or the legacy one, must run after the late one (the legacy
 * stream's implicit synchronization, through the event carve-run records
 * there). Last, one round whose next writer is a non-blocking stream made
 * after the reuse: carve-run waits for the late writer when it is made. No
 * stream made here before that is non-blocking. */
static void mode_ordered(void) {
    cudaStream_t a, b;
    CU(cudaStreamCreate(&a)); /* blocking */
    CU(cudaStreamCreate(&b));
    unsigned long long *bad = counter();
    const size_t size = 4 << 20;
    const char *names[3] = {"blocking -> blocking", "blocking -> legacy", "legacy -> blocking"};
    cudaStream_t late[3] = {a, a, 0}, next[3] = {b, 0, b};
    int reused[4] = {0, 0, 0, 0};
    for (int c = 0; c < 3; c++)
        for (int round = 0; round < 20; round++) {
            void *x = NULL, *y = NULL;
            CU(cudaMalloc(&x, size));
            fill(x, size, 1000 + round, late[c], 20000); /* writes 20 ms from now */
            CU(cudaFree(x));                              /* while it is still running */
            CU(cudaMalloc(&y, size));
            for (int t = 0; y != x && t < 256; t++) {   /* until the address comes back, if it does */
                CU(cudaFree(y));
                CU(cudaMalloc(&y, size));
            }
            reused[c] += x == y;
            fill(y, size, 5000 + round, next[c]);
            CU(cudaDeviceSynchronize());
            verify(y, size, 5000 + round, bad, next[c]);
            CU(cudaDeviceSynchronize());
            CU(cudaFree(y));
        }
    void *x = NULL, *y = NULL;
    cudaStream_t nb;
    CU(cudaMalloc(&x, size));
    fill(x, size, 77, a, 20000);
    CU(cudaFree(x));
    CU(cudaMalloc(&y, size));
    for (int t = 0; y != x && t < 256; t++) {
        CU(cudaFree(y));
        CU(cudaMalloc(&y, size));
    }
    reused[3] = x == y;
    CU(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
    fill(y, size, 78, nb);
    CU(cudaDeviceSynchronize());
    verify(y, size, 78, bad, nb);
    CU(cudaDeviceSynchronize());
    CU(cudaFree(y));
    CHECK(*bad == 0);
    printf("OK ordered 3 x 20 rounds (%s: %d, %s: %d, %s: %d got the freed address back while its writer ran), then a "
           "non-blocking stream made after the reuse (%d); %llu mismatched words\n",
           names[0], reused[0], names[1], reused[1], names[2], reused[2], reused[3], *bad);
    CU(cudaFree(bad));
    CU(cudaStreamDestroy(nb));
    CU(cudaStreamDestroy(a));
    CU(cudaStreamDestroy(b));
}

/* Whether the work before e is still running (cudaEventQuery's "not ready"
 * is not left behind as the last error). */
static int running(cudaEvent_t e) {
    cudaError_t r = cudaEventQuery(e);
    if (r == cudaErrorNotReady)
        (void)cudaGetLastError();
    return r == cudaErrorNotReady;
}

/* The destroyed-stream sequence: a slow kernel on a non-blocking stream s
 * writes p; s is destroyed while it runs; cudaFree(p); then buffers of the
 * same size are allocated and freed while the kernel still runs. One that
 * is handed p's memory while the kernel still runs is written on another
 * stream and checked after the kernel has ended: if the allocator gave it
 * out too early, the kernel overwrote it. Without carve-run cudaFree waits
 * for the device, so no allocation happens while the kernel runs. */
static void mode_destroyed(int rounds) {
    const size_t size = 4 << 20;
    cudaStream_t b;
    CU(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    unsigned long long *bad = counter();
    int early = 0, overwritten = 0;
    long pairs = 0;
    for (int round = 0; round < rounds; round++) {
        cudaStream_t s;
        CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        void *p = NULL;
        CU(cudaMalloc(&p, size));
        fill(p, size, 1000 + round, s, 20000); /* writes p 20 ms from now */
        cudaEvent_t done;
        CU(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
        CU(cudaEventRecord(done, s));
        CU(cudaStreamDestroy(s));
        CU(cudaFree(p));
        for (long i = 0; i < 2000000 && running(done); i++, pairs++) {
            void *q = NULL;
            CU(cudaMalloc(&q, size));
            if (q == p && running(done)) { /* p's memory, while the kernel may still write it */
                unsigned long long before = *bad;
                fill(q, size, 5000 + round, b);
                CU(cudaStreamSynchronize(b));
                CU(cudaEventSynchronize(done));
                verify(q, size, 5000 + round, bad, b);
                CU(cudaStreamSynchronize(b));
                early++;
                overwritten += *bad != before;
            }
            CU(cudaFree(q));
        }
        CU(cudaEventSynchronize(done));
        CU(cudaEventDestroy(done));
    }
    CU(cudaDeviceSynchronize());
    CHECK(overwritten == 0);
    printf("OK destroyed %d rounds: %ld pairs while the kernel ran, %d got its memory, %d overwritten\n", rounds,
           pairs, early, overwritten);
    CU(cudaFree(bad));
    CU(cudaStreamDestroy(b));
}

static void mode_info(void) {
    size_t f = 0, t = 0;
    CU(cudaMemGetInfo(&f, &t));
    cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, 0));
    printf("OK info total %zu free %zu totalGlobalMem %zu\n", t, f, prop.totalGlobalMem);
}

static void mode_oom(void) {
    void *p[8192];
    int n = 0;
    cudaError_t e = cudaSuccess;
    while (n < 8192 && (e = cudaMalloc(&p[n], 64 << 20)) == cudaSuccess)
        n++;
    CHECK(e == cudaErrorMemoryAllocation);
    CHECK(cudaGetLastError() == cudaErrorMemoryAllocation); /* the runtime's last error says so too */
    CHECK(cudaGetLastError() == cudaSuccess);
    for (int i = 0; i < n; i++)
        CU(cudaFree(p[i]));
    void *q = NULL;
    CU(cudaMalloc(&q, 64 << 20));
    CU(cudaFree(q));
    printf("OK oom %d pieces of 64 MiB, then %s\n", n, cudaGetErrorName(e));
}

/* Allocation failures injected by carve-run --fail-every N: every
 * allocation either succeeds (its buffer written, verified and freed) or
 * fails with cudaErrorMemoryAllocation, which cudaGetLastError reports
 * once; the failures come every N calls, plain and stream-ordered alike,
 * and keep nothing: the free memory cudaMemGetInfo reports is what it was
 * before (within 1 MiB; the loop's buffers are 4-64 KiB, and it fails
 * about 280 times). Prints the calls made, the failures and their spacing. */
static void mode_faults(void) {
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    unsigned long long *bad = counter();
    void *warm = NULL; /* the kernels load before memory is measured */
    if (cudaMalloc(&warm, 4096) == cudaSuccess) {
        fill(warm, 4096, 1, 0);
        verify(warm, 4096, 1, bad, 0);
        CU(cudaFree(warm));
    } else {
        (void)cudaGetLastError();
    }
    CU(cudaDeviceSynchronize());
    size_t f0 = 0, f1 = 0, t = 0;
    CU(cudaMemGetInfo(&f0, &t));
    int calls = 1, failed = 0, first = 0, last = 0, gap = 0, even = 1;
    for (int i = 0; i < 2000; i++) {
        void *p = NULL;
        size_t bytes = (size_t)4096 << (i % 5);
        cudaError_t e = i % 2 ? cudaMalloc(&p, bytes) : cudaMallocAsync(&p, bytes, s);
        calls++;
        if (e != cudaSuccess) {
            CHECK(e == cudaErrorMemoryAllocation);
            CHECK(cudaGetLastError() == cudaErrorMemoryAllocation);
            CHECK(cudaGetLastError() == cudaSuccess);
            if (failed == 1)
                gap = calls - last;
            else if (failed > 1)
                even &= calls - last == gap;
            if (!failed)
                first = calls;
            last = calls;
            failed++;
            continue;
        }
        cudaStream_t on = i % 2 ? (cudaStream_t)0 : s;
        fill(p, bytes, (uint64_t)i, on);
        verify(p, bytes, (uint64_t)i, bad, on);
        if (i % 2)
            CU(cudaFree(p));
        else
            CU(cudaFreeAsync(p, s));
    }
    CU(cudaDeviceSynchronize());
    CU(cudaMemGetInfo(&f1, &t));
    unsigned long long wrong = *bad;
    CHECK(wrong == 0);
    CHECK(even);
    CHECK(f1 + (1 << 20) >= f0);
    CU(cudaStreamDestroy(s));
    CU(cudaFree(bad));
    printf("OK faults %d calls, %d failed, every %d from call %d, spaced evenly %d, %llu bad words, free before "
           "%zu after %zu\n", calls, failed, gap, first, even, wrong, f0, f1);
}

/* What carve does not hand out reaches the driver untouched; carved pointers
 * answer cudaPointerGetAttributes like any device pointer. */
static void mode_foreign(void) {
    void *pitched = NULL, *managed = NULL, *host = NULL, *mine = NULL;
    size_t pitch = 0;
    CU(cudaMallocPitch(&pitched, &pitch, 1000, 100));
    CU(cudaMallocManaged(&managed, 12345));
    CU(cudaMallocHost(&host, 4096));
    CU(cudaMalloc(&mine, 1 << 20));
    cudaPointerAttributes at;
    CU(cudaPointerGetAttributes(&at, mine));
    CHECK(at.type == cudaMemoryTypeDevice && at.device == 0 && at.devicePointer == mine);
    CU(cudaPointerGetAttributes(&at, (char *)mine + 4096));
    CHECK(at.type == cudaMemoryTypeDevice);
    CU(cudaMemset(pitched, 1, pitch * 100));
    CU(cudaFree(pitched));
    CU(cudaFree(managed));
    CU(cudaFreeHost(host));
    CU(cudaFree(mine));
    CHECK(cudaFree(mine) == cudaErrorInvalidValue); /* freed twice */
    CHECK(cudaPeekAtLastError() == cudaErrorInvalidValue); /* the runtime recorded it, */
    void *again = NULL;
    CU(cudaMalloc(&again, 4096)); /* a success leaves it, */
    CU(cudaFree(again));
    CHECK(cudaGetLastError() == cudaErrorInvalidValue); /* and reading clears it */
    CHECK(cudaGetLastError() == cudaSuccess);
    printf("OK foreign\n");
}

/* A captured graph with kernels and stream-ordered allocations, replayed. */
static void mode_capture(void) {
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    unsigned long long *bad = counter();
    void *keep = NULL;
    CU(cudaMalloc(&keep, 1 << 20)); /* an ordinary buffer the graph writes */
    cudaGraph_t g;
    CU(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    void *tmp = NULL;
    CU(cudaMallocAsync(&tmp, 1 << 20, s)); /* a graph allocation node */
    fill(tmp, 1 << 20, 77, s);
    fill(keep, 1 << 20, 78, s);
    CU(cudaFreeAsync(tmp, s));
    CU(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t ge;
    CU(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < 5; i++)
        CU(cudaGraphLaunch(ge, s));
    verify(keep, 1 << 20, 78, bad, s);
    CU(cudaStreamSynchronize(s));
    CHECK(*bad == 0);
    CU(cudaGraphExecDestroy(ge));
    CU(cudaGraphDestroy(g));
    CU(cudaFree(keep));
    CU(cudaFree(bad));
    CU(cudaStreamDestroy(s));
    printf("OK capture graph with allocation nodes replayed 5 times\n");
}

static void mode_fork(void) {
    void *p = NULL;
    CU(cudaMalloc(&p, 1 << 20));
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        exit(0); /* CUDA is not used in the child */
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CU(cudaFree(p));
    printf("OK fork\n");
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ns per cudaMalloc + cudaFree pair of one size, and per cudaMallocAsync +
 * cudaFreeAsync pair: warm-up, 21 repetitions, the median. nsizes: 3 for
 * 4 KiB, 1 MiB and 64 MiB ("bench"), 1 for 4 KiB only ("bench-small"). */
static void mode_bench(int nsizes) {
    const size_t sizes[] = {4096, 1 << 20, 64 << 20};
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int k = 0; k < nsizes; k++) {
        for (int async_ = 0; async_ < 2; async_++) {
            int iters = 2000;
            double t[21];
            void *p;
            for (int w = 0; w < 200; w++) { /* warm-up */
                CU(async_ ? cudaMallocAsync(&p, sizes[k], s) : cudaMalloc(&p, sizes[k]));
                CU(async_ ? cudaFreeAsync(p, s) : cudaFree(p));
            }
            for (int r = 0; r < 21; r++) {
                double t0 = now_ns();
                for (int i = 0; i < iters; i++) {
                    cudaError_t e1 = async_ ? cudaMallocAsync(&p, sizes[k], s) : cudaMalloc(&p, sizes[k]);
                    cudaError_t e2 = async_ ? cudaFreeAsync(p, s) : cudaFree(p);
                    if (e1 != cudaSuccess || e2 != cudaSuccess)
                        failures++;
                }
                t[r] = (now_ns() - t0) / iters;
            }
            qsort(t, 21, sizeof(double), cmp);
            printf("bench %s %zu B: %.1f ns per pair (median of 21 x %d)\n",
                   async_ ? "cudaMallocAsync+cudaFreeAsync" : "cudaMalloc+cudaFree", sizes[k], t[10], iters);
        }
    }
    CU(cudaStreamSynchronize(s));
    CU(cudaStreamDestroy(s));
    printf("OK bench\n");
}

int main(int argc, char **argv) {
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: app_runtime streams|threads|late|ordered|destroyed|info|oom|foreign|capture|fork|faults|"
                        "bench|bench-small [ROUNDS]\n");
        return 2;
    }
    const char *m = argv[1];
    CU(cudaFree(0)); /* the usual way to start the runtime */
    if (!strcmp(m, "streams"))
        mode_streams();
    else if (!strcmp(m, "threads"))
        mode_threads();
    else if (!strcmp(m, "late"))
        mode_late();
    else if (!strcmp(m, "ordered"))
        mode_ordered();
    else if (!strcmp(m, "destroyed"))
        mode_destroyed(argc == 3 ? atoi(argv[2]) : 100);
    else if (!strcmp(m, "info"))
        mode_info();
    else if (!strcmp(m, "oom"))
        mode_oom();
    else if (!strcmp(m, "foreign"))
        mode_foreign();
    else if (!strcmp(m, "capture"))
        mode_capture();
    else if (!strcmp(m, "fork"))
        mode_fork();
    else if (!strcmp(m, "faults"))
        mode_faults();
    else if (!strcmp(m, "bench"))
        mode_bench(3);
    else if (!strcmp(m, "bench-small"))
        mode_bench(1);
    else {
        fprintf(stderr, "app_runtime: unknown mode %s\n", m);
        return 2;
    }
    return failures ? 1 : 0;
}
