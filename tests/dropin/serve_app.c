/*
 * serve_app.c — carve-run's measurement switch (carve_run_serve,
 * include/carve_run.h) turned by a program on the mock driver and the mock
 * shared runtime; run by test_dropin_cpu.py under carve-run.
 *
 * The one idea: the mock knows every allocation it made, at its exact base
 * and size (cuMemGetAddressRange), and counts every free that reaches it, so
 * the program can tell by itself who owns each buffer and who took each
 * free back: allocations made while the switch is off must be the driver's
 * (through every entry point, the runtime's through the real runtime), those
 * made while it is on carve's; a free must reach the driver exactly when the
 * buffer is the driver's, whatever the switch says then, on any thread,
 * stream-ordered or not.
 *
 * Modes:
 *   serve          the sequence above step by step, cuMemGetInfo while off
 *                  (a driver allocation lowers its free memory by exactly its
 *                  size) and the memory carve keeps cached, which is the
 *                  program's to have while off (under a --limit, or a mock
 *                  device that small: cuMemGetInfo's free memory, whole
 *                  granules, can be had from the driver, 2 MiB more cannot),
 *                  and a forked child where carve serves nothing (-1).
 *                  Prints "OK serve carve_allocs=N driver_allocs=M ..." for
 *                  the report's counts to be checked against.
 *   serve-threads  four threads allocating and freeing through every entry
 *                  point, handing buffers to each other to free, while the
 *                  main thread turns the switch; every buffer keeps its
 *                  pattern until its free, no free is refused or reaches the
 *                  wrong owner (the report at exit: no driver memory left).
 *
 * Usage: dropin_serve_app serve|serve-threads [ROUNDS]
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "carve_run.h"
#include "mock_api.h"

static int failures;

int cudaMalloc(void **p, size_t size);
int cudaFree(void *p);
int cudaMallocAsync(void **p, size_t size, CUstream s);
int cudaFreeAsync(void *p, CUstream s);
unsigned long long mock_cudart_calls(void);

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

static carve_run_serve_fn serve;

/* Whether the mock driver made an allocation of exactly size bytes at p
 * (carve's buffers lie inside its own reservations or segments). */
static int driver_owns(uintptr_t p, size_t size) {
    CUdeviceptr base = 0;
    size_t n = 0;
    return cuMemGetAddressRange_v2(&base, &n, (CUdeviceptr)p) == 0 && base == p && n == size;
}

static void driver_counts(unsigned long long *allocs, unsigned long long *frees, unsigned long long *bad) {
    size_t live;
    mock_cuda_stats(allocs, frees, bad, &live);
}

static void start(void) {
    CUcontext ctx;
    CU(cuInit(0));
    CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU(cuCtxSetCurrent(ctx));
}

static void find_switch(void) {
    void *sym = dlsym(RTLD_DEFAULT, CARVE_RUN_SERVE_SYMBOL);
    memcpy(&serve, &sym, sizeof(sym));
}

/* ---- serve ----------------------------------------------------------------- */

static CUdeviceptr other_ptr;
static int other_async, other_result = -1;
static CUstream other_stream;

/* Frees other_ptr on a thread of its own (the runtime's stream-ordered free
 * on other_stream, or the driver's cuMemFree). */
static void *free_elsewhere(void *arg) {
    (void)arg;
    CUcontext ctx;
    CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU(cuCtxSetCurrent(ctx));
    other_result = other_async ? cudaFreeAsync((void *)(uintptr_t)other_ptr, other_stream) : cuMemFree_v2(other_ptr);
    return NULL;
}

static int free_on_thread(CUdeviceptr p, int async, CUstream s) {
    pthread_t t;
    other_ptr = p;
    other_async = async;
    other_stream = s;
    other_result = -1;
    if (pthread_create(&t, NULL, free_elsewhere, NULL) != 0)
        return -1;
    pthread_join(t, NULL);
    return other_result;
}

/* Under a cap (or a device that small), while off: all of carve's buffers
 * are freed; what cuMemGetInfo says is free, in whole granules, can be had
 * from the driver in one piece (carve gives its cached memory back for
 * it), 2 MiB more cannot. */
static void cached_is_the_programs(int *got_all, int *more_refused, unsigned *driver_allocs) {
    size_t f = 0, t = 0;
    CU(cuMemGetInfo_v2(&f, &t));
    size_t whole = f / (2 * MIB) * (2 * MIB);
    CUdeviceptr big = 0;
    int r = cuMemAlloc_v2(&big, whole);
    *got_all = r == 0 && driver_owns(big, whole);
    if (r == 0) {
        ++*driver_allocs;
        CU(cuMemFree_v2(big));
    }
    CU(cuMemGetInfo_v2(&f, &t));
    r = cuMemAlloc_v2(&big, f / (2 * MIB) * (2 * MIB) + 2 * MIB);
    *more_refused = r == 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    if (r == 0) {
        ++*driver_allocs;
        CU(cuMemFree_v2(big));
    }
}

static void mode_serve(void) {
    const size_t SZ = 96 * KIB;
    unsigned carve_allocs = 0, driver_allocs = 0;
    start();
    CUstream s;
    CU(cuStreamCreate(&s, 0));

    /* Made while carve serves: carve's, through every entry point. */
    enum { NC = 6 };
    CUdeviceptr c[NC];
    for (int i = 0; i < NC; i++) {
        if (i == 4) {
            void *p = NULL;
            CHECK(cudaMalloc(&p, SZ) == 0);
            c[i] = (CUdeviceptr)(uintptr_t)p;
        } else {
            CU(i == 3 ? cuMemAllocAsync(&c[i], SZ, s) : cuMemAlloc_v2(&c[i], SZ));
        }
        CHECK(!driver_owns(c[i], SZ));
        carve_allocs++;
    }

    CHECK(serve(0) == 1); /* it served */
    CHECK(serve(0) == 0); /* it was off already */

    /* Made while off: the driver's, through every entry point; the
     * runtime's calls through the real runtime. */
    unsigned long long a0, f0, b0, a1, f1, b1;
    driver_counts(&a0, &f0, &b0);
    enum { ND = 5 };
    CUdeviceptr d[ND];
    CU(cuMemAlloc_v2(&d[0], SZ));
    CU(cuMemAllocAsync(&d[1], SZ, s));
    CU(cuMemAllocAsync_ptsz(&d[2], SZ, NULL));
    unsigned long long rt0 = mock_cudart_calls();
    void *r = NULL;
    CHECK(cudaMalloc(&r, SZ) == 0);
    d[3] = (CUdeviceptr)(uintptr_t)r;
    CHECK(cudaMallocAsync(&r, SZ, s) == 0);
    d[4] = (CUdeviceptr)(uintptr_t)r;
    int runtime_passed = mock_cudart_calls() - rt0 == 2;
    CHECK(runtime_passed);
    int off_driver = 0;
    for (int i = 0; i < ND; i++)
        off_driver += driver_owns(d[i], SZ);
    CHECK(off_driver == ND);
    driver_allocs += ND;
    driver_counts(&a1, &f1, &b1);
    CHECK(a1 - a0 == ND);

    /* Frees while off: carve's buffers back to carve (the mock sees none of
     * them), on this thread and another, ordered or not; a second free of
     * one is refused, never passed to the driver. */
    CU(cuMemFree_v2(c[0]));
    CU(cuMemFreeAsync(c[3], s));
    CHECK(cudaFree((void *)(uintptr_t)c[4]) == 0);
    CHECK(free_on_thread(c[1], 0, NULL) == 0);
    CHECK(free_on_thread(c[2], 1, s) == 0);
    CHECK(cuMemFree_v2(c[0]) != 0);
    driver_counts(&a1, &f1, &b1);
    int carve_frees_off = f1 == f0 && b1 == b0;
    CHECK(carve_frees_off);
    /* ... and the driver's to the driver. */
    CU(cuMemFree_v2(d[0]));
    CU(cuMemFreeAsync(d[1], s));
    driver_counts(&a1, &f1, &b1);
    int driver_frees_off = f1 - f0 == 2 && b1 == b0;
    CHECK(driver_frees_off);

    /* cuMemGetInfo while off: a driver allocation of 8 MiB lowers its free
     * memory by exactly that, and its free gives it back. */
    size_t fr0 = 0, t0 = 0, fr1 = 0, t1 = 0, fr2 = 0, t2 = 0;
    CU(cuMemGetInfo_v2(&fr0, &t0));
    CUdeviceptr eight = 0;
    CU(cuMemAlloc_v2(&eight, 8 * MIB));
    driver_allocs++;
    int eight_driver = driver_owns(eight, 8 * MIB);
    CU(cuMemGetInfo_v2(&fr1, &t1));
    CU(cuMemFree_v2(eight));
    CU(cuMemGetInfo_v2(&fr2, &t2));
    int info_ok = eight_driver && t1 == t0 && t2 == t0 && fr0 - fr1 == 8 * MIB && fr2 == fr0;
    CHECK(info_ok);

    /* The last of carve's buffers freed while off, then carve's cache is the
     * program's to have from the driver. */
    CU(cuMemFree_v2(c[5]));
    int got_all = 0, more_refused = 0;
    cached_is_the_programs(&got_all, &more_refused, &driver_allocs);
    CHECK(got_all);
    CHECK(more_refused);

    /* On again: carve serves again, through every entry point (the runtime's
     * calls answered without the real runtime), and the driver's buffers
     * made while off go back to the driver. */
    CHECK(serve(1) == 0);
    CHECK(serve(1) == 1);
    CUdeviceptr e[3];
    rt0 = mock_cudart_calls();
    CU(cuMemAlloc_v2(&e[0], SZ));
    CU(cuMemAllocAsync(&e[1], SZ, s));
    CHECK(cudaMalloc(&r, SZ) == 0);
    e[2] = (CUdeviceptr)(uintptr_t)r;
    int on_carve = !driver_owns(e[0], SZ) && !driver_owns(e[1], SZ) && !driver_owns(e[2], SZ) &&
                   mock_cudart_calls() == rt0;
    CHECK(on_carve);
    carve_allocs += 3;
    driver_counts(&a0, &f0, &b0);
    CU(cuMemFreeAsync_ptsz(d[2], NULL));
    CHECK(cudaFree((void *)(uintptr_t)d[3]) == 0);
    CHECK(free_on_thread(d[4], 1, s) == 0);
    driver_counts(&a1, &f1, &b1);
    int driver_frees_on = f1 - f0 == 3 && b1 == b0;
    CHECK(driver_frees_on);
    CU(cuMemFree_v2(e[0]));
    CU(cuMemFreeAsync(e[1], s));
    CHECK(cudaFree((void *)(uintptr_t)e[2]) == 0);
    CU(cuStreamSynchronize(s));
    CU(cuStreamDestroy_v2(s));
    int driver_clean = 1; /* the mock knows none of its buffers any more */
    for (int i = 0; i < ND; i++)
        driver_clean &= !driver_owns(d[i], SZ);
    CHECK(driver_clean);

    /* A child of a process that used CUDA: carve serves nothing there, and
     * the switch says so and changes nothing. */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        _exit(serve(0) == -1 && serve(1) == -1 ? 0 : 1);
    int status = -1;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    int child_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    CHECK(child_ok);
    CHECK(serve(1) == 1); /* the parent's switch as it was */

    printf("%s serve carve_allocs=%u driver_allocs=%u runtime_passed=%d off_driver=%d/%d carve_frees_off=%d "
           "driver_frees_off=%d info_ok=%d got_all=%d more_refused=%d on_carve=%d driver_frees_on=%d "
           "driver_clean=%d child=%d\n",
           failures ? "FAIL" : "OK", carve_allocs, driver_allocs, runtime_passed, off_driver, ND, carve_frees_off,
           driver_frees_off, info_ok, got_all, more_refused, on_carve, driver_frees_on, driver_clean, child_ok);
}

/* ---- serve-threads --------------------------------------------------------- */

enum { THREADS = 4, KEEP = 8, SLOTS = 16 };

typedef struct buf {
    CUdeviceptr p;
    size_t size;
    uint64_t id;
    int how; /* 0 cuMemAlloc, 1 cuMemAllocAsync, 2 cudaMalloc, 3 cudaMallocAsync */
} buf;

static buf slots[SLOTS]; /* buffers handed from thread to thread (slot_lock) */
static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;
static int threads_done;    /* atomic: workers finished */
static int thread_failures; /* atomic */
static unsigned long long owned_by_driver, owned_by_carve; /* atomic */

static void fill(const buf *b) {
    uint64_t *w = (uint64_t *)(uintptr_t)b->p;
    for (size_t i = 0; i < b->size / 8; i += 61)
        w[i] = b->id * 0x9E3779B97F4A7C15ull + i;
}

static int intact(const buf *b) {
    const uint64_t *w = (const uint64_t *)(uintptr_t)b->p;
    for (size_t i = 0; i < b->size / 8; i += 61)
        if (w[i] != b->id * 0x9E3779B97F4A7C15ull + i)
            return 0;
    return 1;
}

static void bad(const char *what, const buf *b, int r) {
    __atomic_add_fetch(&thread_failures, 1, __ATOMIC_RELAXED);
    printf("FAIL %s: buffer %llu (%zu B, way %d): %d\n", what, (unsigned long long)b->id, b->size, b->how, r);
}

/* b's free, by whoever holds it now: a buffer made on another thread's
 * stream is freed here without a stream, or on this thread's stream. */
static void release(const buf *b, CUstream mine, int own) {
    if (!intact(b))
        bad("pattern changed before the free", b, 0);
    int r;
    switch (b->how) {
    case 1: r = own ? cuMemFreeAsync(b->p, mine) : cuMemFree_v2(b->p); break;
    case 2: r = cudaFree((void *)(uintptr_t)b->p); break;
    case 3: r = cudaFreeAsync((void *)(uintptr_t)b->p, mine); break;
    default: r = cuMemFree_v2(b->p); break;
    }
    if (r != 0)
        bad("free refused", b, r);
}

typedef struct worker {
    int index, rounds;
} worker;

static void *work(void *arg) {
    worker *w = arg;
    CUcontext ctx;
    CUstream s;
    if (cuDevicePrimaryCtxRetain(&ctx, 0) != 0 || cuCtxSetCurrent(ctx) != 0 || cuStreamCreate(&s, 0) != 0) {
        __atomic_add_fetch(&thread_failures, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&threads_done, 1, __ATOMIC_RELEASE);
        return NULL;
    }
    buf held[KEEP];
    int nheld = 0;
    uint64_t rng = 0x9E3779B97F4A7C15ull * (uint64_t)(w->index + 1);
    for (int i = 0; i < w->rounds; i++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        buf b = {0, (size_t)(4 + rng % 60) * KIB + 8 * (rng % 7), ((uint64_t)w->index << 32) | (uint64_t)i,
                 (int)(rng >> 20) % 4};
        int r;
        void *p = NULL;
        switch (b.how) {
        case 1: r = cuMemAllocAsync(&b.p, b.size, s); break;
        case 2: r = cudaMalloc(&p, b.size); b.p = (CUdeviceptr)(uintptr_t)p; break;
        case 3: r = cudaMallocAsync(&p, b.size, s); b.p = (CUdeviceptr)(uintptr_t)p; break;
        default: r = cuMemAlloc_v2(&b.p, b.size); break;
        }
        if (r != 0) {
            bad("allocation failed", &b, r);
            continue;
        }
        __atomic_add_fetch(driver_owns(b.p, b.size) ? &owned_by_driver : &owned_by_carve, 1, __ATOMIC_RELAXED);
        fill(&b);
        if ((rng >> 40) % 3 == 0) { /* handed to whichever thread takes the slot next */
            pthread_mutex_lock(&slot_lock);
            buf there = slots[(rng >> 44) % SLOTS];
            slots[(rng >> 44) % SLOTS] = b;
            pthread_mutex_unlock(&slot_lock);
            if (there.p)
                release(&there, s, 0);
            continue;
        }
        if (nheld == KEEP) {
            release(&held[0], s, 1);
            memmove(held, held + 1, sizeof(buf) * (KEEP - 1));
            nheld--;
        }
        held[nheld++] = b;
    }
    for (int i = 0; i < nheld; i++)
        release(&held[i], s, 1);
    if (cuStreamSynchronize(s) != 0 || cuStreamDestroy_v2(s) != 0)
        __atomic_add_fetch(&thread_failures, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&threads_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void mode_threads(int rounds) {
    start();
    unsigned long long a0, f0, b0, a1, f1, b1;
    driver_counts(&a0, &f0, &b0);
    pthread_t t[THREADS];
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){i, rounds};
        CHECK(pthread_create(&t[i], NULL, work, &w[i]) == 0);
    }
    /* Turn the switch while they run, until the last of them is done. */
    unsigned turns = 0;
    for (int on = 0; __atomic_load_n(&threads_done, __ATOMIC_ACQUIRE) < THREADS; on ^= 1, turns++) {
        int was = serve(on);
        if (was != !on) { /* nobody else turns it: it is what this thread left */
            __atomic_add_fetch(&thread_failures, 1, __ATOMIC_RELAXED);
            printf("FAIL serve(%d) returned %d after turn %u\n", on, was, turns);
        }
        usleep(100);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    serve(1);
    pthread_mutex_lock(&slot_lock);
    for (int i = 0; i < SLOTS; i++)
        if (slots[i].p) {
            release(&slots[i], NULL, 0);
            slots[i].p = 0;
        }
    pthread_mutex_unlock(&slot_lock);
    CU(cuCtxSynchronize());
    driver_counts(&a1, &f1, &b1);
    unsigned long long drv = __atomic_load_n(&owned_by_driver, __ATOMIC_RELAXED);
    unsigned long long crv = __atomic_load_n(&owned_by_carve, __ATOMIC_RELAXED);
    int clean = b1 == b0 && f1 - f0 >= drv; /* (what the driver holds at exit: the report's counts) */
    CHECK(clean);
    CHECK(drv > 0 && crv > 0);
    failures += __atomic_load_n(&thread_failures, __ATOMIC_RELAXED);
    printf("%s serve-threads %d threads x %d rounds, %u turns, %llu buffers the driver's, %llu carve's, "
           "clean=%d\n", failures ? "FAIL" : "OK", THREADS, rounds, turns, drv, crv, clean);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: dropin_serve_app serve|serve-threads [ROUNDS]\n");
        return 2;
    }
    find_switch();
    if (!serve) {
        printf("FAIL %s: no %s in this process (run it under carve-run)\n", argv[1], CARVE_RUN_SERVE_SYMBOL);
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strcmp(argv[1], "serve") == 0)
        mode_serve();
    else if (strcmp(argv[1], "serve-threads") == 0)
        mode_threads(argc > 2 ? atoi(argv[2]) : 3000);
    else {
        fprintf(stderr, "dropin_serve_app: unknown mode '%s'\n", argv[1]);
        return 2;
    }
    return failures ? 1 : 0;
}
