/*
 * cpu_app.c — a driver-API program that knows nothing of carve, run by
 * test_dropin_cpu.py against the mock driver (mock_cuda.c), with and
 * without carve-run.
 *
 * The one idea: the mock counts what reaches the driver, and "device"
 * memory is host memory, so the program can prove by itself what the
 * interposer must guarantee: buffers never overlap (each holds its own
 * pattern, checked before its free), allocations are served from a few
 * large segments instead of one driver call each, foreign pointers still
 * reach the driver, stray frees of carved memory never do, a freed buffer
 * with no stream named is not handed out again while (mock) device work
 * could still use it, and a stream-ordered one is reused at once. Each mode
 * prints "OK <mode> ..." with its figures, or "FAIL ..." and exits 1.
 *
 * The modes expandable, vmm and kinds take memory the way frameworks do
 * it behind carve's back (the virtual-memory functions, pitched and pool
 * allocations), for the cap that counts every byte.
 *
 * The mode granules checks what virtual-memory mode (carve-run's default)
 * must keep on top: a granule two buffers share stays mapped while one of
 * them lives, a granule freed while queued work uses it is not unmapped
 * before that work ends, cuMemGetInfo's free memory can be had, and the
 * device never holds more than the cap. The mode ownctx: a context whose
 * destruction the driver refuses once stays served as it was, and its
 * destruction gives back every granule at a cost in proportion to what was
 * mapped.
 *
 * Usage: dropin_cpu_app MODE   (basic lookup foreign info oom quarantine
 *                               threads loop fork capture doublefree
 *                               batches reset vmm kinds granules ownctx ipc
 *                               dying)
 *        dropin_cpu_app expandable MIB
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mock_api.h"

static int failures;

static unsigned long long raw_allocs(void) {
    unsigned long long a, f, b;
    size_t live;
    mock_cuda_stats(&a, &f, &b, &live);
    return a;
}

static void fill(CUdeviceptr p, size_t n, uint64_t id) {
    uint64_t *w = (uint64_t *)(uintptr_t)p;
    for (size_t i = 0; i < n / 8; i++)
        w[i] = id * 0x9E3779B97F4A7C15ull + i;
}

static int intact(CUdeviceptr p, size_t n, uint64_t id) {
    const uint64_t *w = (const uint64_t *)(uintptr_t)p;
    for (size_t i = 0; i < n / 8; i++)
        if (w[i] != id * 0x9E3779B97F4A7C15ull + i)
            return 0;
    return 1;
}

static uint64_t rng = 0x1234567;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

#define MIB ((size_t)1 << 20)

static void start(void) {
    CUcontext ctx;
    CU(cuInit(0));
    CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU(cuCtxSetCurrent(ctx));
}

/* Many buffers of many sizes, every one checked before its free. */
static void mode_basic(void) {
    enum { N = 400 };
    static CUdeviceptr p[N];
    static size_t sz[N];
    unsigned long long before = raw_allocs();
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < N; i++) {
            sz[i] = 256 + (size_t)(next() % (4u << 20));
            CU(cuMemAlloc_v2(&p[i], sz[i]));
            fill(p[i], sz[i], (uint64_t)(round * N + i));
        }
        for (int i = 0; i < N; i++) {
            CHECK(intact(p[i], sz[i], (uint64_t)(round * N + i)));
            CU(cuMemFree_v2(p[i]));
        }
    }
    printf("OK basic %d allocations, %llu reached the driver\n", 5 * N, raw_allocs() - before);
}

/* The static runtime's way: dlopen the driver, ask cuGetProcAddress. */
static void mode_lookup(void) {
    typedef CUresult (*gpa2)(const char *, void **, int, cuuint64_t, int *);
    typedef CUresult (*gpa)(const char *, void **, int, cuuint64_t);
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    CHECK(h != NULL);
    gpa2 get2 = NULL;
    gpa get1 = NULL;
    void *s1 = dlsym(h, "cuGetProcAddress_v2"), *s2 = dlsym(h, "cuGetProcAddress");
    memcpy(&get2, &s1, sizeof(s1));
    memcpy(&get1, &s2, sizeof(s2));
    CHECK(get2 && get1);
    CUresult (*alloc)(CUdeviceptr *, size_t) = NULL, (*alloc_async_pt)(CUdeviceptr *, size_t, CUstream) = NULL;
    CUresult (*fre)(CUdeviceptr) = NULL, (*free_async_pt)(CUdeviceptr, CUstream) = NULL;
    void *fp = NULL;
    int status = -1;
    CU(get2("cuMemAlloc", &fp, 12000, 0, &status));
    memcpy(&alloc, &fp, sizeof(fp));
    CU(get1("cuMemFree", &fp, 12000, 0));
    memcpy(&fre, &fp, sizeof(fp));
    CU(get2("cuMemAllocAsync", &fp, 12000, 2 /* per-thread default stream */, &status));
    memcpy(&alloc_async_pt, &fp, sizeof(fp));
    CU(get2("cuMemFreeAsync", &fp, 12000, 2, &status));
    memcpy(&free_async_pt, &fp, sizeof(fp));
    unsigned long long before = raw_allocs();
    CUdeviceptr p[200];
    for (int i = 0; i < 200; i++) {
        CU(i % 2 ? alloc(&p[i], 1 << 20) : alloc_async_pt(&p[i], 1 << 20, NULL));
        fill(p[i], 1 << 20, (uint64_t)i);
    }
    for (int i = 0; i < 200; i++) {
        CHECK(intact(p[i], 1 << 20, (uint64_t)i));
        CU(i % 2 ? fre(p[i]) : free_async_pt(p[i], NULL));
    }
    printf("OK lookup 200 allocations through cuGetProcAddress, %llu reached the driver\n", raw_allocs() - before);
}

/* Memory carve did not hand out goes to the driver; a stray free of carved
 * memory must not (it would free a whole segment). */
static void mode_foreign(void) {
    unsigned long long a0, f0, b0, a1, f1, b1;
    size_t live;
    CUdeviceptr pitched, managed, mine;
    size_t pitch;
    CU(cuMemAlloc_v2(&mine, 1 << 20));
    fill(mine, 1 << 20, 7);
    CU(cuMemAllocPitch_v2(&pitched, &pitch, 1000, 100, 4));
    CU(cuMemAllocManaged(&managed, 12345, 1));
    mock_cuda_stats(&a0, &f0, &b0, &live);
    CU(cuMemFree_v2(pitched));
    CU(cuMemFree_v2(managed));
    mock_cuda_stats(&a1, &f1, &b1, &live);
    CHECK(f1 == f0 + 2); /* both reached the driver */
    CHECK(cuMemFree_v2(mine + 256) != 0); /* interior pointer: refused */
    CU(cuMemFree_v2(mine));
    CHECK(cuMemFree_v2(mine) != 0); /* double free: refused */
    unsigned long long a2, f2, b2;
    mock_cuda_stats(&a2, &f2, &b2, &live);
    printf("OK foreign %llu frees reached the driver after the stray ones (expect 0 under carve-run)\n", f2 - f1);
}

static void mode_info(void) {
    size_t f = 0, t = 0;
    CU(cuMemGetInfo_v2(&f, &t));
    CUdeviceptr p;
    CU(cuMemAlloc_v2(&p, 32 << 20));
    size_t f2 = 0, t2 = 0;
    CU(cuMemGetInfo_v2(&f2, &t2));
    CHECK(t2 == t && f2 <= f && f - f2 >= (32u << 20));
    CU(cuMemFree_v2(p));
    printf("OK info total %zu free %zu\n", t, f);
}

/* Legacy IPC on an allocation's handle, asked directly and through
 * cuGetProcAddress (the runtime's way, behind cudaIpcGetMemHandle): prints
 * what each answered (0 where the memory is cuMemAlloc's, 801
 * CUDA_ERROR_NOT_SUPPORTED on carve's virtual-memory granules). */
static void mode_ipc(void) {
    typedef CUresult (*gpa)(const char *, void **, int, cuuint64_t);
    typedef CUresult (*ipc_fn)(CUipcMemHandle *, CUdeviceptr);
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    CHECK(h != NULL);
    gpa get = NULL;
    void *s = dlsym(h, "cuGetProcAddress");
    memcpy(&get, &s, sizeof(s));
    CHECK(get != NULL);
    void *fp = NULL;
    CU(get("cuIpcGetMemHandle", &fp, 12000, 0));
    ipc_fn looked = NULL;
    memcpy(&looked, &fp, sizeof(fp));
    CHECK(looked != NULL);
    CUdeviceptr p;
    CU(cuMemAlloc_v2(&p, 1 << 20));
    CUipcMemHandle ih;
    CUresult direct = cuIpcGetMemHandle(&ih, p);
    CUresult via = looked ? looked(&ih, p + 0) : -1;
    CU(cuMemFree_v2(p));
    printf("OK ipc direct=%d lookup=%d\n", direct, via);
}

/* Allocate 16 MiB pieces until out of memory. */
static void mode_oom(void) {
    CUdeviceptr p[4096];
    int n = 0;
    CUresult r = 0;
    while (n < 4096 && (r = cuMemAlloc_v2(&p[n], 16 << 20)) == 0)
        n++;
    CHECK(r == 2); /* CUDA_ERROR_OUT_OF_MEMORY */
    for (int i = 0; i < n; i++)
        CU(cuMemFree_v2(p[i]));
    CUdeviceptr q;
    int room_again = cuMemAlloc_v2(&q, 16 << 20) == 0; /* what was freed can be had again */
    if (room_again)
        CU(cuMemFree_v2(q));
    printf("OK oom %d pieces of 16 MiB, then error %d; room_again=%d\n", n, r, room_again);
}

/* A free with no stream is not reused while device work could still touch
 * it; a stream-ordered free is reused at once by the same stream. */
static void mode_quarantine(void) {
    CUdeviceptr a, b;
    CU(cuMemAlloc_v2(&a, 1 << 20));
    CU(cuMemFree_v2(a));
    CU(cuMemAlloc_v2(&b, 1 << 20));
    int unordered_reused = a == b;
    CU(cuMemFree_v2(b));
    CUstream s;
    CU(cuStreamCreate(&s, 1 /* non-blocking */));
    CUdeviceptr c, d;
    CU(cuMemAllocAsync(&c, 1 << 20, s));
    CU(cuMemFreeAsync(c, s));
    CU(cuMemAllocAsync(&d, 1 << 20, s));
    int ordered_reused = c == d;
    CU(cuMemFreeAsync(d, s));
    CU(cuStreamDestroy_v2(s));
    printf("OK quarantine unordered_reused=%d ordered_reused=%d\n", unordered_reused, ordered_reused);
}

/* Frees with no stream named, one buffer live at a time in three sizes: an
 * address comes back (through the quarantine, or to the thread that freed
 * it) only after an event was recorded after its free -- on the legacy
 * stream, which orders every blocking stream's later work after every
 * earlier use -- and, once a non-blocking stream exists (nb: one is made
 * first), only after that event has completed: never while events do not
 * complete (MOCK_EVENT_POLLS). The buffers keep their patterns while live. */
static void mode_reuse(int nb) {
    enum { N = 4000 };
    static CUdeviceptr addr[N];
    static unsigned long long freed_at[N];
    int reused = 0, early = 0, undone = 0;
    CUstream s = NULL;
    if (nb)
        CU(cuStreamCreate(&s, 1 /* non-blocking */));
    for (int i = 0; i < N; i++) {
        CUdeviceptr p = 0;
        CU(cuMemAlloc_v2(&p, 4096 + (size_t)(i % 3) * 256));
        unsigned long long recorded, done;
        mock_cuda_event_serials(&recorded, &done);
        for (int k = i - 1; k >= 0; k--)
            if (addr[k] == p) {
                reused++;
                early += recorded <= freed_at[k];
                undone += done <= freed_at[k];
                break;
            }
        addr[i] = p;
        fill(p, 256, (uint64_t)i);
        CHECK(intact(p, 256, (uint64_t)i));
        mock_cuda_event_serials(&freed_at[i], &done); /* before: the free may record the events itself */
        CU(cuMemFree_v2(p));
    }
    if (s)
        CU(cuStreamDestroy_v2(s));
    printf("OK reuse %d of %d allocations got an address back, %d before an event was recorded after its free, "
           "%d before one completed\n", reused, N, early, undone);
}

/* Ordered reuse (lib/preload/quarantine.c): a buffer freed while a kernel
 * on a blocking stream still uses it comes back to a later allocation of
 * its size before that kernel completes, when every stream of the context
 * is blocking; whatever uses it next must still come after the kernel. how:
 * "legacy" (the next kernel on the legacy stream), "blocking" (on another
 * blocking stream: it waits for the legacy-stream event recorded after the
 * free), "nb-later" (on a non-blocking stream made after the reuse, which
 * waits for nothing: the interposer waits for that event when the stream
 * is made), "ctx-later" (in a context made after the reuse: likewise). The
 * mock counts a kernel queued on the buffer that does not wait for the old
 * one (mock_cuda_launch) and a hand-out it cannot justify (mock_cuda_own). */
static void mode_ordered(const char *how) {
    CUstream s1, s2 = NULL;
    CU(cuStreamCreate(&s1, 0)); /* blocking */
    CUdeviceptr p = 0, q = 0;
    CU(cuMemAlloc_v2(&p, MIB));
    CHECK(!mock_cuda_own(p, MIB, NULL, 0));
    CU(mock_cuda_launch(s1, p, MIB)); /* stays queued: nothing completes it */
    mock_cuda_disown(p);
    CU(cuMemFree_v2(p));
    int tries = 0;
    for (; tries < 1000 && q != p; tries++) {
        CU(cuMemAlloc_v2(&q, MIB));
        if (q != p)
            CU(cuMemFree_v2(q));
    }
    int reused = q == p;
    size_t pending_at_reuse = mock_cuda_pending();
    CUcontext prim = NULL, c2 = NULL;
    if (reused) {
        CHECK(!mock_cuda_own(q, MIB, NULL, 0));
        if (!strcmp(how, "legacy")) {
            CU(mock_cuda_launch(NULL, q, MIB));
        } else if (!strcmp(how, "blocking")) {
            CU(cuStreamCreate(&s2, 0));
            CU(mock_cuda_launch(s2, q, MIB));
        } else if (!strcmp(how, "nb-later")) {
            CU(cuStreamCreate(&s2, 1 /* non-blocking */));
            CU(mock_cuda_launch(s2, q, MIB));
        } else if (!strcmp(how, "ctx-later")) {
            CU(cuCtxGetCurrent(&prim));
            CU(cuCtxCreate_v2(&c2, 0, 0));
            CU(mock_cuda_launch(NULL, q, MIB)); /* c2's legacy stream */
        } else {
            fprintf(stderr, "ordered: unknown case %s\n", how);
            exit(2);
        }
    }
    char text[512] = "";
    unsigned long long bad = mock_cuda_violations(text, sizeof(text));
    size_t pending_after = mock_cuda_pending();
    mock_cuda_complete_all();
    if (c2) {
        CU(cuCtxDestroy_v2(c2));
        CU(cuCtxSetCurrent(prim));
    }
    if (reused) {
        mock_cuda_disown(q);
        CU(cuMemFree_v2(q));
    }
    if (s2)
        CU(cuStreamDestroy_v2(s2));
    CU(cuStreamDestroy_v2(s1));
    CHECK(bad == 0);
    printf("OK ordered %s reused=%d after %d allocations, kernels queued at the reuse %zu, after the next use %zu; "
           "%llu violations %s\n", how, reused, tries, pending_at_reuse, pending_after, bad, text);
}

static void start(void);

static void *worker(void *arg) {
    start(); /* a driver context is current per thread */
    uint64_t id = (uint64_t)(uintptr_t)arg * 1000000;
    CUdeviceptr p[64] = {0};
    size_t sz[64];
    uint64_t ids[64];
    uint64_t r = 0x9E3779B97F4A7C15ull * (id + 1);
    for (int step = 0; step < 20000; step++) {
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        int i = (int)(r % 64);
        if (p[i]) {
            CHECK(intact(p[i], sz[i] < 4096 ? sz[i] : 4096, ids[i]));
            CU(cuMemFree_v2(p[i]));
            p[i] = 0;
        } else {
            sz[i] = 256 + (size_t)(r >> 20) % (1 << 20);
            ids[i] = ++id;
            if (cuMemAlloc_v2(&p[i], sz[i]) != 0) {
                CHECK(!"allocation failed");
                p[i] = 0;
                continue;
            }
            fill(p[i], sz[i] < 4096 ? sz[i] : 4096, ids[i]);
        }
    }
    for (int i = 0; i < 64; i++)
        if (p[i]) {
            CHECK(intact(p[i], sz[i] < 4096 ? sz[i] : 4096, ids[i]));
            CU(cuMemFree_v2(p[i]));
        }
    return NULL;
}

static void mode_threads(void) {
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    printf("OK threads 8 x 20000 operations\n");
}

/* Allocate and free until killed, saying how far it got. */
static void mode_loop(void) {
    for (unsigned long i = 0;; i++) {
        CUdeviceptr p;
        CU(cuMemAlloc_v2(&p, 4096 + (i % 7) * 1000));
        CU(cuMemFree_v2(p));
        if (i % 1000 == 0) {
            printf("loop %lu\n", i);
            fflush(stdout);
        }
    }
}

static void mode_fork(void) {
    CUdeviceptr p;
    CU(cuMemAlloc_v2(&p, 1 << 20));
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        exit(0); /* the child does not trace or report */
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CU(cuMemFree_v2(p));
    CU(cuMemAlloc_v2(&p, 1 << 20));
    CU(cuMemFree_v2(p));
    printf("OK fork\n");
}

/* During a capture, an allocation on the captured stream is the driver's. */
static void mode_capture(void) {
    CUstream s;
    CU(cuStreamCreate(&s, 1));
    unsigned long long before = mock_cuda_async_allocs();
    CU(cuStreamBeginCapture_v2(s, 0));
    CUdeviceptr p, q;
    CU(cuMemAllocAsync(&p, 1 << 20, s));
    for (int i = 0; i < 600; i++) { /* unordered: served by carve; frees wait, no event recorded */
        CU(cuMemAlloc_v2(&q, 4096 + (size_t)(i % 5) * 100000));
        CU(cuMemFree_v2(q));
    }
    CU(cuMemFreeAsync(p, s));
    void *g;
    CU(cuStreamEndCapture(s, &g));
    for (int i = 0; i < 300; i++) { /* after the capture, epochs close again */
        CU(cuMemAlloc_v2(&q, 4096));
        CU(cuMemFree_v2(q));
    }
    CU(cuStreamDestroy_v2(s));
    CHECK(mock_cuda_broken_captures() == 0);
    printf("OK capture %llu captured allocation(s) reached the driver, %d captures broken\n",
           mock_cuda_async_allocs() - before, mock_cuda_broken_captures());
}

/* Frees of one buffer with no stream named, sequential and racing in
 * several threads: exactly one is accepted, a waiting buffer is refused by a
 * later free of any kind and from any thread, and once given back its
 * address is handed out again and freed as usual. Every buffer allocated
 * afterwards keeps its pattern (nothing was freed early). */
enum { RACED = 512, RACERS = 4 };
static CUdeviceptr raced[RACED];
static int accepted[RACED];
static pthread_barrier_t race_start;

static void *racer(void *arg) {
    (void)arg;
    start();
    pthread_barrier_wait(&race_start);
    for (int i = 0; i < RACED; i++)
        if (cuMemFree_v2(raced[i]) == 0)
            __atomic_add_fetch(&accepted[i], 1, __ATOMIC_RELAXED);
    return NULL;
}

static void *free_again(void *arg) {
    start();
    CUdeviceptr p = *(CUdeviceptr *)arg;
    *(CUdeviceptr *)arg = cuMemFree_v2(p) != 0; /* 1: refused */
    return NULL;
}

static void mode_doublefree(void) {
    CUstream s;
    CU(cuStreamCreate(&s, 1));
    CUdeviceptr p;
    CU(cuMemAlloc_v2(&p, 4096));
    CU(cuMemFree_v2(p));
    int refused_same = cuMemFree_v2(p) != 0;
    int refused_async = cuMemFreeAsync(p, s) != 0;
    CUdeviceptr q, arg;
    CU(cuMemAlloc_v2(&q, 4096));
    CU(cuMemFree_v2(q)); /* waits in this thread's batch */
    arg = q;
    pthread_t t;
    pthread_create(&t, NULL, free_again, &arg);
    pthread_join(t, NULL);
    int refused_other = arg == 1;
    CHECK(refused_same && refused_async && refused_other);

    pthread_barrier_init(&race_start, NULL, RACERS);
    for (int i = 0; i < RACED; i++)
        CU(cuMemAlloc_v2(&raced[i], 256 + (size_t)(i % 7) * 4096));
    pthread_t r[RACERS];
    for (int i = 0; i < RACERS; i++)
        pthread_create(&r[i], NULL, racer, NULL);
    for (int i = 0; i < RACERS; i++)
        pthread_join(r[i], NULL);
    int once = 0;
    for (int i = 0; i < RACED; i++)
        once += accepted[i] == 1;
    CHECK(once == RACED);

    /* Everything freed above goes back in time; none of it early. */
    enum { N = 3000 };
    static CUdeviceptr b[N];
    int reused = 0;
    for (int i = 0; i < N; i++) {
        b[i] = 0;
        CU(cuMemAlloc_v2(&b[i], 256 + (size_t)(i % 7) * 4096));
        if (!b[i])
            continue;
        fill(b[i], 256, (uint64_t)i);
        for (int k = 0; k < RACED && !reused; k++)
            reused = b[i] == raced[k];
    }
    for (int i = 0; i < N; i++)
        if (b[i]) {
            CHECK(intact(b[i], 256, (uint64_t)i));
            CU(cuMemFree_v2(b[i]));
        }
    int refused_later = 0; /* a correct program's frees are never refused */
    for (int i = 0; i < 20000; i++) {
        CUdeviceptr x;
        CU(cuMemAlloc_v2(&x, 4096 + (size_t)(i % 3) * 256));
        refused_later += cuMemFree_v2(x) != 0;
    }
    CHECK(refused_later == 0);
    CU(cuStreamDestroy_v2(s));
    printf("OK doublefree refused: same=%d async=%d other_thread=%d; racing frees accepted once: %d/%d; "
           "addresses reused=%d; later refusals %d\n",
           refused_same, refused_async, refused_other, once, RACED, reused, refused_later);
}

/* What threads hold in their batches of frees is not lost: another thread
 * short of memory takes it, a thread's exit hands it over, and destroying
 * a stream first waits for it (an epoch with an event on the stream). Run under
 * --limit 8MiB: as many 256 KiB buffers as the cap allows are allocated and
 * freed by another thread (its frees stay in its batch), then as many again
 * here. */
enum { HELD = 40, HELD_SIZE = 256 << 10 }; /* more than the cap holds */
static int held_n;
static pthread_barrier_t batch_step;

static void *holder(void *arg) {
    int stay = arg != NULL;
    start();
    CUdeviceptr p[HELD];
    for (int i = 0; i < held_n; i++)
        CU(cuMemAlloc_v2(&p[i], HELD_SIZE));
    for (int i = 0; i < held_n; i++)
        CU(cuMemFree_v2(p[i])); /* they stay in this thread's batch */
    if (stay) {
        pthread_barrier_wait(&batch_step); /* the frees are done */
        pthread_barrier_wait(&batch_step); /* main has allocated */
    }
    return NULL;
}

static int take_as_much(void) {
    CUdeviceptr p[HELD];
    int ok = 0;
    while (ok < HELD && cuMemAlloc_v2(&p[ok], HELD_SIZE) == 0)
        ok++;
    for (int i = 0; i < ok; i++)
        CU(cuMemFree_v2(p[i]));
    return ok;
}

static void mode_batches(void) {
    held_n = take_as_much(); /* what the cap holds */
    pthread_barrier_init(&batch_step, NULL, 2);
    pthread_t t;
    pthread_create(&t, NULL, holder, (void *)1);
    pthread_barrier_wait(&batch_step);
    int while_held = take_as_much(); /* the other thread is alive, its batch full of frees */
    pthread_barrier_wait(&batch_step);
    pthread_join(t, NULL);
    pthread_create(&t, NULL, holder, NULL);
    pthread_join(t, NULL);
    int after_exit = take_as_much(); /* that thread is gone: its batch was handed over */
    CUstream s;
    CU(cuStreamCreate(&s, 1));
    CUdeviceptr p;
    CU(cuMemAlloc_v2(&p, 4096));
    CU(cuMemFree_v2(p));
    unsigned long long waits = mock_cuda_event_waits();
    CU(cuStreamDestroy_v2(s));
    int waited = mock_cuda_event_waits() > waits;
    CHECK(held_n > 0 && held_n < HELD && while_held == held_n && after_exit == held_n && waited);
    int n = 5 * held_n + 1; /* allocations, and as many frees */
    printf("OK batches %d buffers fit; got them all again while_held=%d after_exit=%d; stream_waited=%d "
           "allocs=%d frees=%d\n", held_n, while_held == held_n, after_exit == held_n, waited, n, n);
}

/* The primary context is reset while frees wait (in this thread's batch
 * and in the quarantine): they are dropped with the context (the driver
 * frees its memory), and the context made current again gets a new arena
 * whose buffers are allocated, checked and freed as usual, none refused. */
static void mode_reset(void) {
    CUdeviceptr p[100];
    for (int i = 0; i < 100; i++)
        CU(cuMemAlloc_v2(&p[i], 4096 + (size_t)i * 512));
    for (int i = 0; i < 100; i += 2)
        CU(cuMemFree_v2(p[i]));
    CU(cuDevicePrimaryCtxReset_v2(0));
    start();
    enum { N = 500 };
    static CUdeviceptr q[N];
    int refused = 0;
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < N; i++) {
            CU(cuMemAlloc_v2(&q[i], 256 + (size_t)(i % 9) * 1024));
            fill(q[i], 256, (uint64_t)(round * N + i));
        }
        for (int i = 0; i < N; i++) {
            CHECK(intact(q[i], 256, (uint64_t)(round * N + i)));
            refused += cuMemFree_v2(q[i]) != 0;
        }
    }
    CHECK(refused == 0);
    printf("OK reset %d frees refused after the reset\n", refused);
}

/* ---- memory taken behind carve's back ---------------------------------- */


static CUmemAllocationProp device_prop(void) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = 1;          /* pinned */
    prop.location.type = 1; /* device 0 */
    prop.location.id = 0;
    return prop;
}

static size_t mem_free(void) {
    size_t f = 0, t = 0;
    CU(cuMemGetInfo_v2(&f, &t));
    return f;
}

/* PyTorch's expandable segments (c10/cuda/CUDACachingAllocator.cpp,
 * ExpandableSegment and try_allocate_expandable_block), as they take memory
 * for one large request when no segment holds it: a new segment reserves
 * address space for 9/8 of the device's total memory as reported, in 20 MiB
 * pages; the pages the request needs within it are created (on
 * CUDA_ERROR_OUT_OF_MEMORY those created are released: PyTorch's
 * out-of-memory error), then mapped. A request larger than the segment
 * maps the whole segment and goes on to the next block, which does not
 * exist: PyTorch dereferences a null pointer there. It counts on
 * cuMemCreate failing first, which holds when the total memory reported
 * is what cuMemCreate can take. */
static void mode_expandable(size_t request) {
    const size_t page = 20 * MIB;
    size_t total = 0;
    CU(cuDeviceTotalMem_v2(&total, 0));
    size_t npages = (total + total / 8 + page - 1) / page;
    size_t want = request < npages * page ? request : npages * page;
    size_t n = (want + page - 1) / page;
    size_t free_before = mem_free();
    CUdeviceptr base = 0;
    CU(cuMemAddressReserve(&base, npages * page, 0, 0, 0));
    CUmemAllocationProp prop = device_prop();
    CUmemGenericAllocationHandle *h = calloc(n, sizeof(*h));
    size_t made = 0;
    CUresult r = 0;
    while (made < n && (r = cuMemCreate(&h[made], page, &prop, 0)) == 0)
        made++;
    if (made < n) { /* PyTorch: out of memory, the pages of this request released */
        CHECK(r == 2);
        for (size_t i = 0; i < made; i++)
            CU(cuMemRelease(h[i]));
        size_t free_after = mem_free();
        CHECK(free_after == free_before);
        CU(cuMemAddressFree(base, npages * page));
        printf("OK expandable out of memory: CUDA_ERROR_OUT_OF_MEMORY (%d) from cuMemCreate after %zu of %zu pages "
               "of 20 MiB (total %zu, segment %zu pages); free before %zu after %zu\n",
               r, made, n, total, npages, free_before, free_after);
        free(h);
        return;
    }
    CUmemAccessDesc access = {{1, 0}, 3};
    for (size_t i = 0; i < n; i++)
        CU(cuMemMap(base + i * page, page, 0, h[i], 0));
    CU(cuMemSetAccess(base, n * page, &access, 1));
    if (n * page < request) {
        printf("the request (%zu bytes) is larger than the segment (%zu pages of 20 MiB, all mapped): PyTorch "
               "follows the missing block after it here\n", request, npages);
        fflush(stdout);
        raise(SIGSEGV);
    }
    for (size_t i = 0; i < n; i++)
        ((volatile char *)(uintptr_t)(base + i * page))[0] = 1;
    CU(cuMemUnmap(base, n * page));
    for (size_t i = 0; i < n; i++)
        CU(cuMemRelease(h[i]));
    CU(cuMemAddressFree(base, npages * page));
    printf("OK expandable allocated %zu pages of 20 MiB for %zu bytes (total %zu)\n", n, request, total);
    free(h);
}

/* The virtual-memory patterns of ggml's CUDA pool (each handle released
 * right after it is mapped: the memory stays until it is unmapped, with one
 * cuMemUnmap over every mapping at the end) and of NCCL (a handle retained
 * by address and released twice), then carve's memory and cuMemCreate
 * sharing the cap: a buffer carve served and that was freed gives way to
 * physical memory. Every figure is checked against cuMemGetInfo, which
 * must count all of it. Run under --limit. */
static void mode_vmm(void) {
    const size_t page = 2 * MIB, range = 256 * MIB;
    CUmemAllocationProp prop = device_prop();
    CUmemAccessDesc access = {{1, 0}, 3};
    size_t f0 = mem_free();

    CUdeviceptr base = 0;
    CU(cuMemAddressReserve(&base, range, 0, 0, 0));
    size_t pages = 0;
    CUresult r = 0;
    while (pages < range / page) {
        CUmemGenericAllocationHandle h = 0;
        if ((r = cuMemCreate(&h, page, &prop, 0)) != 0)
            break;
        CU(cuMemMap(base + pages * page, page, 0, h, 0));
        CU(cuMemRelease(h)); /* mapped: the memory stays */
        CU(cuMemSetAccess(base + pages * page, page, &access, 1));
        ((volatile char *)(uintptr_t)(base + pages * page))[0] = 1;
        pages++;
    }
    size_t f_full = mem_free();
    int ggml_ok = r == 2 && pages == f0 / page && f_full < page;
    CU(cuMemUnmap(base, pages * page)); /* every mapping at once */
    size_t f_back = mem_free();
    ggml_ok &= f_back == f0;
    CU(cuMemAddressFree(base, range));

    CUmemGenericAllocationHandle h = 0, again = 0;
    CU(cuMemCreate(&h, 8 * MIB, &prop, 0));
    CU(cuMemAddressReserve(&base, 8 * MIB, 0, 0, 0));
    CU(cuMemMap(base, 8 * MIB, 0, h, 0));
    CU(cuMemRetainAllocationHandle(&again, (void *)(uintptr_t)base));
    CU(cuMemRelease(again));
    size_t f_held = mem_free();
    CU(cuMemUnmap(base, 8 * MIB));
    size_t f_unmapped = mem_free(); /* the handle still holds it */
    CU(cuMemRelease(h));
    size_t f_released = mem_free();
    CU(cuMemAddressFree(base, 8 * MIB));
    int nccl_ok = again == h && f_held == f0 - 8 * MIB && f_unmapped == f_held && f_released == f0;

    CUdeviceptr b = 0;
    CU(cuMemAlloc_v2(&b, 32 * MIB));
    size_t f_carve = mem_free();
    CU(cuMemFree_v2(b));
    CUmemGenericAllocationHandle hs[512];
    size_t shared = 0;
    while (shared < 512 && cuMemCreate(&hs[shared], page, &prop, 0) == 0)
        shared++;
    for (size_t i = 0; i < shared; i++)
        CU(cuMemRelease(hs[i]));
    int shared_ok = f_carve <= f0 - 32 * MIB && shared == f0 / page && mem_free() == f0;

    CHECK(ggml_ok && nccl_ok && shared_ok);
    printf("OK vmm ggml_pages=%zu ggml_ok=%d nccl_ok=%d shared_pages=%zu shared_ok=%d free=%zu\n", pages, ggml_ok,
           nccl_ok, shared, shared_ok, f0);
}

/* Pitched and pool allocations until out of memory, each checked against
 * cuMemGetInfo, then freed (cuMemFree, cuMemFreeAsync): all of it comes
 * back. Run under --limit. */
static void mode_kinds(void) {
    enum { MAX = 1024 };
    static CUdeviceptr p[MAX];
    size_t f0 = mem_free(), pitch = 0;
    int npitched = 0, consistent = 1;
    CUresult r = 0;
    while (npitched < MAX && (r = cuMemAllocPitch_v2(&p[npitched], &pitch, 1000, 1000, 4)) == 0) {
        npitched++;
        consistent &= mem_free() + (size_t)npitched * pitch * 1000 == f0;
    }
    int pitched_oom = r == 2 && mem_free() < pitch * 1000;
    for (int i = 0; i < npitched; i++)
        CU(cuMemFree_v2(p[i]));
    int pitched_back = mem_free() == f0;

    CUmemoryPool pool = NULL;
    CUstream s = NULL;
    CU(cuMemPoolCreate(&pool, NULL));
    CU(cuStreamCreate(&s, 1));
    int npool = 0;
    while (npool < MAX && (r = (npool % 2 ? cuMemAllocFromPoolAsync_ptsz : cuMemAllocFromPoolAsync)(
                               &p[npool], 4 * MIB, pool, s)) == 0) {
        npool++;
        consistent &= mem_free() + (size_t)npool * 4 * MIB == f0;
    }
    int pool_oom = r == 2 && npool == (int)(f0 / (4 * MIB));
    for (int i = 0; i < npool; i++)
        CU(cuMemFreeAsync(p[i], s));
    int pool_back = mem_free() == f0;
    CU(cuStreamDestroy_v2(s));
    CU(cuMemPoolDestroy(pool));
    CHECK(consistent && pitched_oom && pitched_back && pool_oom && pool_back);
    printf("OK kinds pitched=%d pitch=%zu pitched_oom=%d pools=%d pool_oom=%d back=%d consistent=%d free=%zu\n",
           npitched, pitch, pitched_oom, npool, pool_oom, pitched_back && pool_back, consistent, f0);
}

/* Physical memory from cuMemCreate until the device (the cap) is full, each
 * granule mapped and written as PyTorch's expandable segments do; then all
 * of it given back. Under a cap this makes carve give back what it holds
 * cached or waiting. The granules made. */
static size_t fill_device(void) {
    enum { MAX = 512 };
    const size_t page = 2 * MIB;
    CUmemAllocationProp prop = device_prop();
    CUmemAccessDesc access = {{1, 0}, 3};
    CUdeviceptr base = 0;
    CU(cuMemAddressReserve(&base, MAX * page, 0, 0, 0));
    size_t n = 0;
    CUmemGenericAllocationHandle h;
    while (n < MAX && cuMemCreate(&h, page, &prop, 0) == 0) {
        CU(cuMemMap(base + n * page, page, 0, h, 0));
        CU(cuMemRelease(h));
        CU(cuMemSetAccess(base + n * page, page, &access, 1));
        fill(base + n * page, page, 1000 + n);
        n++;
    }
    for (size_t i = 0; i < n; i++)
        CHECK(intact(base + i * page, page, 1000 + i));
    if (n)
        CU(cuMemUnmap(base, n * page));
    CU(cuMemAddressFree(base, MAX * page));
    return n;
}

/* Run under --limit 32MiB. */
static void mode_granules(void) {
    const size_t cap = 32 * MIB;
    CUstream s = NULL;
    CU(cuStreamCreate(&s, 1)); /* non-blocking */
    /* Two small buffers in one granule; one freed, then the device filled
     * (carve gives back what it caches): the other stays mapped and whole. */
    CUdeviceptr a = 0, b = 0;
    CU(cuMemAlloc_v2(&a, 4096));
    CU(cuMemAlloc_v2(&b, 4096));
    int shared = a / (2 * MIB) == b / (2 * MIB);
    CHECK(!mock_cuda_own(a, 4096, NULL, 0) && !mock_cuda_own(b, 4096, NULL, 0));
    fill(a, 4096, 1);
    fill(b, 4096, 2);
    mock_cuda_disown(a);
    CU(cuMemFree_v2(a));
    size_t n1 = fill_device();
    int shared_ok = intact(b, 4096, 2);

    /* 8 MiB freed with no stream named while a kernel on s still writes it;
     * the device filled again: carve waits for the kernel before it unmaps
     * (the mock counts an unmap under queued work as a breach). */
    CUdeviceptr c = 0;
    CU(cuMemAlloc_v2(&c, 8 * MIB));
    CHECK(!mock_cuda_own(c, 8 * MIB, NULL, 0));
    CU(mock_cuda_launch(s, c, 8 * MIB));
    mock_cuda_disown(c);
    CU(cuMemFree_v2(c));
    size_t n2 = fill_device();
    int waited = mock_cuda_pending() == 0;

    /* The whole granules of what cuMemGetInfo says is free can be had in
     * one piece (the rest is the free part of b's granule); 2 MiB more
     * cannot. */
    size_t f2 = 0, t = 0;
    CU(cuMemGetInfo_v2(&f2, &t));
    size_t f = f2 / (2 * MIB) * (2 * MIB);
    CUdeviceptr d = 0, e = 0;
    CUresult r1 = cuMemAlloc_v2(&d, f);
    if (r1 == 0) {
        CHECK(!mock_cuda_own(d, f, NULL, 0));
        fill(d, f, 3);
    }
    CUresult r2 = cuMemAlloc_v2(&e, 2 * MIB);
    if (r1 == 0) {
        CHECK(intact(d, f, 3));
        mock_cuda_disown(d);
        CU(cuMemFree_v2(d));
    }
    if (r2 == 0)
        CU(cuMemFree_v2(e));

    size_t reserved_now, mapped_now, peak;
    unsigned long long faults;
    mock_cuda_vmm_stats(&reserved_now, &mapped_now, &peak, &faults);
    char text[512] = "";
    unsigned long long bad = mock_cuda_violations(text, sizeof(text));
    mock_cuda_disown(b);
    CU(cuMemFree_v2(b));
    CU(cuStreamDestroy_v2(s));
    CHECK(shared_ok && waited && r1 == 0 && r2 == 2 && t == cap && peak <= cap && bad == 0);
    printf("OK granules shared=%d shared_ok=%d filled %zu then %zu granules, waited=%d, free %zu MiB of %zu: "
           "all of it %d, 2 MiB more %d; peak %zu MiB of %zu; %llu violations %s\n",
           shared, shared_ok, n1, n2, waited, f / MIB, t / MIB, r1, r2, peak / MIB, cap / MIB, bad, text);
}

/* A context of its own, holding buffers live and freed while a kernel still
 * uses them, whose cuCtxDestroy the driver refuses once: everything stays as
 * it was (carve serves the context from the same arena, frees of its
 * buffers are accepted, never passed to the driver, nothing handed out
 * early). Then destroyed for good: every granule and range goes back, at a
 * cost (driver calls) in proportion to what was mapped, not to the address
 * space reserved. */
/* Ordered reuse ends before the first non-blocking stream exists: buffers
 * freed with work still queued on the legacy stream go back in order; an
 * allocation made in the moment the driver has made the stream but the
 * call has not returned (another thread's, in a real program) must not get
 * one of them while that work is queued, since the stream waits for no
 * legacy-stream event (the oracle checks). It once did: the barrier was
 * waited for only after the driver made the stream. */
static void nb_window_alloc(void) {
    CUdeviceptr p;
    CU(cuMemAlloc_v2(&p, 3 * MIB));
    CHECK(!mock_cuda_own(p, 3 * MIB, NULL, 0));
    mock_cuda_disown(p);
    CU(cuMemFree_v2(p));
}

static void mode_nb_window(void) {
    CUdeviceptr p[8];
    for (int i = 0; i < 8; i++) {
        CU(cuMemAlloc_v2(&p[i], 3 * MIB));
        CHECK(!mock_cuda_own(p[i], 3 * MIB, NULL, 0));
        CU(mock_cuda_launch(NULL, p[i], 3 * MIB)); /* queued, not completed */
    }
    for (int i = 0; i < 8; i++) {
        mock_cuda_disown(p[i]);
        CU(cuMemFree_v2(p[i]));
    }
    mock_cuda_on_stream_create(nb_window_alloc);
    CUstream s;
    CU(cuStreamCreate(&s, 0x1 /* CU_STREAM_NON_BLOCKING */));
    CU(cuStreamDestroy_v2(s));
    mock_cuda_complete_all();
    printf("%s nb-window\n", failures ? "FAIL" : "OK");
}

/* The report's live peak is per context: a context destroyed with 64 MiB
 * live (the driver frees it), then two contexts with 64 MiB live each at
 * once; every arena's peak_live_bytes is 64 MiB (test_dropin_cpu reads the
 * report). */
static void mode_livectx(void) {
    CUcontext prim = NULL, a = NULL, b = NULL, c = NULL;
    CUdeviceptr p, q, r;
    CU(cuCtxGetCurrent(&prim));
    CU(cuCtxCreate_v2(&a, 0, 0));
    CU(cuMemAlloc_v2(&p, 64 * MIB));
    CU(cuCtxDestroy_v2(a));
    CU(cuCtxCreate_v2(&b, 0, 0));
    CU(cuMemAlloc_v2(&q, 64 * MIB));
    CU(cuCtxCreate_v2(&c, 0, 0));
    CU(cuMemAlloc_v2(&r, 64 * MIB));
    CU(cuMemFree_v2(r));
    CU(cuCtxSetCurrent(b));
    CU(cuMemFree_v2(q));
    CU(cuCtxDestroy_v2(c));
    CU(cuCtxDestroy_v2(b));
    CU(cuCtxSetCurrent(prim));
    printf("%s livectx\n", failures ? "FAIL" : "OK");
}

static void mode_ownctx(void) {
    CUcontext prim = NULL, mine = NULL;
    CU(cuCtxGetCurrent(&prim));
    CU(cuCtxCreate_v2(&mine, 0, 0));
    enum { N = 16 };
    CUdeviceptr p[N], q[N];
    for (int i = 0; i < N; i++) {
        CU(cuMemAlloc_v2(&p[i], 3 * MIB + 4096));
        CHECK(!mock_cuda_own(p[i], 3 * MIB + 4096, NULL, 0));
        fill(p[i], 4096, (uint64_t)i);
    }
    for (int i = 0; i < N; i += 2) { /* waiting in the quarantine */
        CU(mock_cuda_launch(NULL, p[i], 3 * MIB + 4096));
        mock_cuda_disown(p[i]);
        CU(cuMemFree_v2(p[i]));
    }
    unsigned long long drv0 = mock_cuda_ctx_allocs(mine), nalloc, nfree, bad0, bad1;
    size_t live;
    mock_cuda_stats(&nalloc, &nfree, &bad0, &live);
    mock_cuda_fail_destroys(1);
    CUresult refused = cuCtxDestroy_v2(mine);
    CUcontext cur = NULL;
    CU(cuCtxGetCurrent(&cur));
    int still = cur == mine;
    for (int i = 0; i < N; i++) { /* served as before */
        CU(cuMemAlloc_v2(&q[i], 3 * MIB + 4096));
        CHECK(!mock_cuda_own(q[i], 3 * MIB + 4096, NULL, 0));
    }
    int freed = 0;
    for (int i = 1; i < N; i += 2) {
        CHECK(intact(p[i], 4096, (uint64_t)i));
        mock_cuda_disown(p[i]);
        freed += cuMemFree_v2(p[i]) == 0;
    }
    for (int i = 0; i < N; i++)
        mock_cuda_disown(q[i]);
    mock_cuda_stats(&nalloc, &nfree, &bad1, &live);
    unsigned long long served = (unsigned long long)N - (mock_cuda_ctx_allocs(mine) - drv0); /* not grown for */
    size_t reserved, mapped, peak;
    unsigned long long faults;
    mock_cuda_vmm_stats(&reserved, &mapped, &peak, &faults);
    unsigned long long c0 = mock_cuda_calls(), x0 = mock_cuda_mode_exchanges();
    CU(cuCtxDestroy_v2(mine));
    /* The calls that do the work, apart from the capture-mode exchanges
     * around them (at most two each: relaxed mode and back). */
    unsigned long long exch = mock_cuda_mode_exchanges() - x0, calls = mock_cuda_calls() - c0 - exch;
    size_t reserved2, mapped2, live2;
    unsigned long long bad2;
    mock_cuda_vmm_stats(&reserved2, &mapped2, &peak, &faults);
    mock_cuda_stats(&nalloc, &nfree, &bad2, &live2); /* device memory still taken */
    CU(cuCtxSetCurrent(prim));
    char text[512] = "";
    unsigned long long bad = mock_cuda_violations(text, sizeof(text));
    CHECK(refused != 0 && still && freed == N / 2 && bad1 == bad0 && bad == 0);
    CHECK(reserved2 == 0 && mapped2 == 0 && live2 == 0 && calls <= 2 * (mapped / (2 * MIB)) + 32 && exch <= 2 * calls);
    printf("OK ownctx destroy refused=%d, still current %d, %llu of %d served after, %d of %d frees accepted, "
           "%llu stray frees; destroyed: %zu MiB reserved and %zu MiB mapped before, %zu and %zu after, %zu MiB of "
           "device memory kept, %llu driver calls (and %llu capture-mode exchanges); %llu violations %s\n",
           refused != 0, still, served, N, freed, N / 2, bad1 - bad0, reserved / MIB, mapped / MIB, reserved2 / MIB,
           mapped2 / MIB, live2 / MIB, calls, exch, bad, text);
}

/* More contexts going at once than carve once kept a list for (64): DYING
 * threads each make a context, take and free 1 MiB in it and destroy it, all
 * together (MOCK_CONTEXT_DELAY_US keeps each destruction in the driver a
 * while); meanwhile the primary context, holding a 4 MiB buffer, is
 * destroyed and the driver refuses. It must stay served as before (its free
 * accepted, a new allocation served), every destroyed context's granules
 * must go back, and once the primary context is reset too nothing is left
 * mapped or reserved. */
#define DYING 72
static pthread_barrier_t dying_bar;
static int dying_ok[DYING];

static void *dying_worker(void *arg) {
    int *ok = arg;
    CUcontext c;
    CUdeviceptr p;
    int made = cuCtxCreate_v2(&c, 0, 0) == 0 && cuMemAlloc_v2(&p, MIB) == 0 && cuMemFree_v2(p) == 0;
    pthread_barrier_wait(&dying_bar);
    *ok = made && cuCtxDestroy_v2(c) == 0;
    return NULL;
}

static void mode_dying(void) {
    CUcontext prim;
    CU(cuDevicePrimaryCtxRetain(&prim, 0));
    CU(cuCtxSetCurrent(prim));
    CUdeviceptr p = 0, q = 0;
    CU(cuMemAlloc_v2(&p, 4 * MIB));
    pthread_barrier_init(&dying_bar, NULL, DYING + 1);
    pthread_t t[DYING];
    for (int i = 0; i < DYING; i++)
        CHECK(pthread_create(&t[i], NULL, dying_worker, &dying_ok[i]) == 0);
    pthread_barrier_wait(&dying_bar);
    usleep(300000); /* the workers are inside cuCtxDestroy (the delay is longer) */
    CUresult refused = cuCtxDestroy_v2(prim);
    CUresult fp = cuMemFree_v2(p);
    CUresult aq = cuMemAlloc_v2(&q, 4 * MIB);
    CUresult fq = aq == 0 ? cuMemFree_v2(q) : aq;
    int destroyed = 0;
    for (int i = 0; i < DYING; i++) {
        pthread_join(t[i], NULL);
        destroyed += dying_ok[i];
    }
    CU(cuCtxSetCurrent(prim));
    CU(cuDevicePrimaryCtxReset_v2(0));
    size_t reserved = 0, mapped = 0, peak = 0;
    unsigned long long fails = 0;
    mock_cuda_vmm_stats(&reserved, &mapped, &peak, &fails);
    char text[512] = "";
    unsigned long long bad = mock_cuda_violations(text, sizeof(text));
    CHECK(refused != 0 && fp == 0 && aq == 0 && fq == 0 && destroyed == DYING && reserved == 0 && mapped == 0 && bad == 0);
    printf("OK dying %d of %d contexts destroyed at once; the refused one: free %d, alloc %d, free %d; after reset "
           "%zu MiB reserved, %zu MiB mapped; %llu violations %s\n",
           destroyed, DYING, fp, aq, fq, reserved / MIB, mapped / MIB, bad, text);
}

int main(int argc, char **argv) {
    if (argc != 2 && !(argc == 3 && (!strcmp(argv[1], "expandable") || !strcmp(argv[1], "ordered")))) {
        fprintf(stderr, "usage: dropin_cpu_app basic|lookup|foreign|info|oom|quarantine|reuse|threads|loop|fork|"
                        "capture|doublefree|batches|reset|vmm|kinds|granules|ownctx|ipc|dying|livectx|nb-window\n       dropin_cpu_app expandable MIB\n"
                        "       dropin_cpu_app ordered legacy|blocking|nb-later|ctx-later\n");
        return 2;
    }
    start();
    const char *m = argv[1];
    if (!strcmp(m, "basic"))
        mode_basic();
    else if (!strcmp(m, "lookup"))
        mode_lookup();
    else if (!strcmp(m, "foreign"))
        mode_foreign();
    else if (!strcmp(m, "info"))
        mode_info();
    else if (!strcmp(m, "oom"))
        mode_oom();
    else if (!strcmp(m, "quarantine"))
        mode_quarantine();
    else if (!strcmp(m, "reuse"))
        mode_reuse(0);
    else if (!strcmp(m, "reuse-nb"))
        mode_reuse(1);
    else if (argc == 3 && !strcmp(m, "ordered"))
        mode_ordered(argv[2]);
    else if (!strcmp(m, "threads"))
        mode_threads();
    else if (!strcmp(m, "loop"))
        mode_loop();
    else if (!strcmp(m, "fork"))
        mode_fork();
    else if (!strcmp(m, "capture"))
        mode_capture();
    else if (!strcmp(m, "doublefree"))
        mode_doublefree();
    else if (!strcmp(m, "batches"))
        mode_batches();
    else if (!strcmp(m, "reset"))
        mode_reset();
    else if (!strcmp(m, "expandable"))
        mode_expandable((size_t)strtoull(argv[2], NULL, 10) * MIB);
    else if (!strcmp(m, "vmm"))
        mode_vmm();
    else if (!strcmp(m, "kinds"))
        mode_kinds();
    else if (!strcmp(m, "granules"))
        mode_granules();
    else if (!strcmp(m, "ownctx"))
        mode_ownctx();
    else if (!strcmp(m, "ipc"))
        mode_ipc();
    else if (!strcmp(m, "dying"))
        mode_dying();
    else if (!strcmp(m, "livectx"))
        mode_livectx();
    else if (!strcmp(m, "nb-window"))
        mode_nb_window();
    else {
        fprintf(stderr, "dropin_cpu_app: unknown mode %s\n", m);
        return 2;
    }
    return failures ? 1 : 0;
}
