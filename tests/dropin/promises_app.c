/*
 * promises_app.c — the exact sequences that once broke a promise of
 * carve-run's interposer, each a mode of a driver-API program that knows
 * nothing of carve, run by test_dropin_cpu.py against the mock device
 * (mock_cuda.c), with and without carve-run.
 *
 * The one idea: the mock device keeps work queued on streams until told to
 * complete it, and its oracle (mock_cuda_own) checks every range the
 * program is handed: inside memory the driver still has for the current
 * context, owned by nobody else, and used by no queued work that is not
 * ordered before the new owner's. So a program can replay the sequence
 * that broke a promise and count the breaches itself; a correct driver
 * (the mock alone) and a correct interposer give zero. Each mode prints
 * "OK <mode> ..., <n> violations" and exits 0 when none was seen and every
 * call answered as the driver would, or "FAIL ..." lines and exits 1.
 *
 * Modes:
 *   destroyed   a buffer used by work on a stream that is then destroyed,
 *               freed with cuMemFree: not handed out while the work runs on
 *               (also with a blocking stream, and a stream-ordered buffer
 *               whose stream's handle the next stream reuses)
 *   release     the primary context reset by its last release: nothing is
 *               served from the memory the driver freed with it
 *   capture     graph capture on the per-thread stream (by its handle and
 *               by NULL in the _ptsz calls): its allocations are graph
 *               nodes; a cross-stream cuMemFreeAsync while another stream
 *               captures is accepted
 *   capturerace captures begun again and again on one thread while another
 *               frees (run with MOCK_CAPTURE_DELAY_US): no event of carve's
 *               lands in a capture that the driver has begun
 *   racefree    cuMemFree and cuMemFreeAsync of one buffer racing: exactly
 *               one accepted, nothing handed out twice (run it with
 *               --trace FILE.gz: a third thread's events keep the trace
 *               busy, which holds the racers up at any point)
 *               [ROUNDS, default 20000]
 *   signals     SIGINT ignored and SIGTERM handled with SA_SIGINFO (and the
 *               other way round with "signals swap"): the program survives
 *   forkthreads fork while threads allocate and free: the child's calls
 *               answer (no hang)   [FORKS, default 40]
 *   forkfirst   fork before any CUDA call: the child, which may use CUDA,
 *               is served as any process
 *   forkvmm     fork while three threads take and give back physical memory
 *               (cuMemCreate, cuMemRelease: the cap's count under its lock):
 *               each child's cuMemCreate, cuMemAllocPitch and pool
 *               allocation answer CUDA_ERROR_NOT_INITIALIZED, none hangs
 *               [FORKS, default 200]
 *   crossctx    a second free of a buffer of one context made while another
 *               context is current (the buffer at the start of carve's
 *               segment, which the driver would free whole) is refused, and
 *               an interior pointer too; nothing is handed out from memory
 *               the driver freed
 *   lifetimes   contexts made and taken away, ROUNDS times (default 70: more
 *               than the interposer once kept): each holds 40 MiB, a pitched
 *               4 MiB and 16 small buffers, and goes away by a reset, the last
 *               release or cuCtxDestroy; then all of its memory is free again
 *               (run with a cap of 64 MiB, where what is not given back is
 *               missed at once), every context reports the same total, and a
 *               pool allocation, which outlives its context, stays counted
 *   twoctx      two contexts on one device: what cuMemGetInfo says is free in
 *               the second, with 48 MiB held in the first, can be had there,
 *               and 2 MiB more cannot
 *   capfree     memory freed by a free node of a captured graph stays the
 *               program's until the graph runs: what cuMemGetInfo says is
 *               free can be had, 2 MiB more cannot; an allocation node of a
 *               graph destroyed without running takes nothing
 *   sigreset    run with --trace: the program changes its dispositions of
 *               SIGINT and SIGTERM after the interposer installed its handler
 *               (ignored, handled once with SA_SIGINFO | SA_RESETHAND, with
 *               signal(), and at last SIGTERM back to SIG_DFL): each behaves
 *               as the program set it, reads back as it set it, and the
 *               final SIGTERM ends the program with its trace whole; prints
 *               "OK sigreset N allocations" before it dies
 *   resetrace   a thread's first allocation while another thread resets the
 *               primary context (the driver slow to do it: run with
 *               MOCK_CONTEXT_DELAY_US) is the driver's; after the reset
 *               nothing is served from memory the reset freed
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mock_api.h"

static int failures;

static void start(void) {
    CUcontext ctx;
    CU(cuInit(0));
    CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU(cuCtxSetCurrent(ctx));
}

static unsigned long long violations(void) {
    char text[2048];
    unsigned long long n = mock_cuda_violations(text, sizeof(text));
    if (n)
        printf("violations:\n%s", text);
    return n;
}

/* Allocate size bytes, unordered or on s, and hand the range to the oracle. */
static CUdeviceptr take(size_t size, CUstream s, int ordered) {
    CUdeviceptr p = 0;
    CUresult r = ordered ? cuMemAllocAsync(&p, size, s) : cuMemAlloc_v2(&p, size);
    CHECK(r == 0);
    if (r == 0)
        mock_cuda_own(p, size, s, ordered);
    return r == 0 ? p : 0;
}

static void give(CUdeviceptr p, CUstream s, int ordered) {
    mock_cuda_disown(p);
    CU(ordered ? cuMemFreeAsync(p, s) : cuMemFree_v2(p));
}

/* Unordered allocations and frees of one size, enough for epochs to close
 * and for their buffers to be handed out again. */
static void churn(size_t size, int n) {
    for (int i = 0; i < n; i++) {
        CUdeviceptr q = take(size, NULL, 0);
        if (q)
            give(q, NULL, 0);
    }
}

/* ---- destroyed: frees after a stream is destroyed ------------------------------------ */

/* Allocations only, held, until no free waits anywhere (a thread joins its
 * batch and the quarantine closes its epoch once frees stop coming). */
enum { QUIET = 400 };
static void quiesce(CUdeviceptr *held) {
    for (int i = 0; i < QUIET; i++)
        held[i] = take(256, NULL, 0);
}
static void unhold(CUdeviceptr *held) {
    for (int i = 0; i < QUIET; i++)
        if (held[i])
            give(held[i], NULL, 0);
}

/* Allocations of one size, held, then freed: once the memory freed before
 * them may be reused, one of them gets it. */
static void hold_same(size_t size) {
    static CUdeviceptr p[300];
    for (int i = 0; i < 300; i++)
        p[i] = take(size, NULL, 0);
    for (int i = 0; i < 300; i++)
        if (p[i])
            give(p[i], NULL, 0);
}

static void mode_destroyed(void) {
    const size_t size = 1 << 20;
    static CUdeviceptr held[QUIET];
    /* Segments first: a segment the driver frees would synchronize. */
    CUdeviceptr warm[8];
    for (int i = 0; i < 8; i++)
        warm[i] = take(size, NULL, 0);
    for (int i = 0; i < 8; i++)
        give(warm[i], NULL, 0);
    churn(size, 300);
    hold_same(size);
    for (int flags = 1; flags >= 0; flags--) { /* non-blocking, then blocking */
        quiesce(held);
        CUstream s;
        CU(cuStreamCreate(&s, (unsigned)flags));
        CUdeviceptr p = take(size, NULL, 0);
        CU(mock_cuda_launch(s, p, size)); /* a kernel on s writes p, and runs on */
        CU(cuStreamDestroy_v2(s));
        give(p, NULL, 0); /* cudaFree: must wait for that kernel */
        hold_same(size);
        churn(size, 300);
        mock_cuda_complete_all();
        unhold(held);
    }
    /* A stream-ordered buffer freed on its stream, which is then destroyed
     * while its work runs; the next stream gets the same handle (also while
     * another stream is being captured, when nothing may be waited for). */
    int same_handle = 1;
    for (int during_capture = 0; during_capture < 2; during_capture++) {
        quiesce(held);
        CUstream s, t, x = NULL;
        CU(cuStreamCreate(&s, 1));
        CUdeviceptr p = take(size, s, 1);
        CU(mock_cuda_launch(s, p, size));
        give(p, s, 1);
        if (during_capture) {
            CU(cuStreamCreate(&x, 1));
            CU(cuStreamBeginCapture_v2(x, 2 /* relaxed */));
        }
        CU(cuStreamDestroy_v2(s));
        CU(cuStreamCreate(&t, 1));
        same_handle &= s == t;
        for (int i = 0; i < 50; i++) {
            CUdeviceptr q = take(size, t, 1);
            if (q)
                give(q, t, 1);
        }
        if (during_capture) {
            void *graph = NULL;
            CU(cuStreamEndCapture(x, &graph));
            CU(cuGraphDestroy(graph));
            CU(cuStreamDestroy_v2(x));
        }
        churn(size, 300);
        mock_cuda_complete_all();
        unhold(held);
        CU(cuStreamDestroy_v2(t));
    }
    unsigned long long v = violations();
    CHECK(v == 0);
    printf("OK destroyed handle_reused=%d, %llu violations\n", same_handle, v);
}

/* ---- release: the primary context reset by its last release -------------------------- */

static void mode_release(void) {
    enum { N = 64 };
    CUdeviceptr p[N];
    for (int i = 0; i < N; i++)
        p[i] = take(4096 + (size_t)i * 1024, NULL, 0);
    for (int i = 0; i < N; i += 2)
        give(p[i], NULL, 0);
    mock_cuda_disown_all(); /* the rest goes with the context */
    CU(cuDevicePrimaryCtxRelease_v2(0)); /* the last retain: the context is reset */
    unsigned flags = 0;
    int active = 1;
    CU(cuDevicePrimaryCtxGetState(0, &flags, &active));
    CHECK(active == 0);
    start(); /* retained again: a fresh context behind the same handle */
    int refused = 0;
    for (int round = 0; round < 4; round++) {
        static CUdeviceptr q[500];
        for (int i = 0; i < 500; i++)
            q[i] = take(256 + (size_t)(i % 9) * 1024, NULL, 0);
        for (int i = 0; i < 500; i++) {
            mock_cuda_disown(q[i]);
            refused += q[i] && cuMemFree_v2(q[i]) != 0;
        }
    }
    CHECK(refused == 0);
    unsigned long long v = violations();
    CHECK(v == 0);
    printf("OK release %d frees refused, %llu violations\n", refused, v);
}

/* ---- capture: every stream kind, and frees during another stream's capture ------------ */

static void mode_capture(void) {
    const size_t size = 1 << 16;
    CUdeviceptr warm = take(size, NULL, 0); /* segments exist before any capture */
    give(warm, NULL, 0);
    int nodes = 0;
    for (int how = 0; how < 2; how++) { /* the per-thread stream by its handle, then by NULL in _ptsz */
        CUstream pt = how == 0 ? CU_STREAM_PER_THREAD : NULL;
        unsigned long long before = mock_cuda_async_allocs();
        CU(how == 0 ? cuStreamBeginCapture_v2(pt, 2 /* relaxed */) : cuStreamBeginCapture_v2_ptsz(pt, 2));
        CUdeviceptr g = 0;
        CU(how == 0 ? cuMemAllocAsync(&g, size, pt) : cuMemAllocAsync_ptsz(&g, size, pt));
        CU(mock_cuda_launch(CU_STREAM_PER_THREAD, g, size));
        CU(how == 0 ? cuMemFreeAsync(g, pt) : cuMemFreeAsync_ptsz(g, pt));
        void *graph = NULL, *exec = NULL;
        CU(how == 0 ? cuStreamEndCapture(pt, &graph) : cuStreamEndCapture_ptsz(pt, &graph));
        nodes += (int)(mock_cuda_async_allocs() - before);
        /* The graph runs later and uses the memory it named. */
        churn(size, 300);
        CU(cuGraphInstantiateWithFlags(&exec, graph, 0));
        CU(cuGraphLaunch(exec, CU_STREAM_LEGACY));
        churn(size, 300);
        mock_cuda_complete_all();
        CU(cuGraphDestroy(graph));
    }
    CHECK(nodes == 2); /* each captured allocation became the driver's graph node */

    /* Allocated on s1, freed on s2 while s3 is being captured: valid. */
    CUstream s1, s2, s3;
    CU(cuStreamCreate(&s1, 1));
    CU(cuStreamCreate(&s2, 1));
    CU(cuStreamCreate(&s3, 1));
    CUdeviceptr p = take(size, s1, 1);
    CU(mock_cuda_launch(s1, p, size));
    CUevent e;
    CU(cuEventCreate(&e, 0));
    CU(cuEventRecord(e, s1));
    CU(cuStreamWaitEvent(s2, e, 0)); /* s2 is ordered after p's use on s1 */
    CU(cuStreamBeginCapture_v2(s3, 2));
    mock_cuda_disown(p);
    CUresult freed = cuMemFreeAsync(p, s2);
    CHECK(freed == 0);
    void *graph = NULL;
    CU(cuStreamEndCapture(s3, &graph));
    CHECK(cuMemFreeAsync(p, s2) != 0); /* it was freed: a second free is refused */
    churn(size, 300);
    for (int i = 0; i < 50; i++) {
        CUdeviceptr q = take(size, s1, 1);
        if (q)
            give(q, s1, 1);
    }
    mock_cuda_complete_all();
    CU(cuGraphDestroy(graph));
    CU(cuEventDestroy_v2(e));
    CU(cuStreamDestroy_v2(s1));
    CU(cuStreamDestroy_v2(s2));
    CU(cuStreamDestroy_v2(s3));
    CHECK(mock_cuda_broken_captures() == 0);
    unsigned long long v = violations();
    CHECK(v == 0);
    printf("OK capture %d graph nodes, cross-stream free during a capture %s, %llu violations\n", nodes,
           freed == 0 ? "accepted" : "refused", v);
}

/* ---- capturerace: captures beginning while another thread frees ------------------------ */

static int churn_stop;
static void *churner(void *arg) {
    (void)arg;
    start();
    for (unsigned i = 1; !__atomic_load_n(&churn_stop, __ATOMIC_RELAXED); i++) {
        CUdeviceptr p = 0;
        if (cuMemAlloc_v2(&p, 4096) == 0)
            CU(cuMemFree_v2(p)); /* an epoch closes, with an event on the legacy stream, every 128 */
        if (i % 32 == 0) /* frees wait in the quarantine while captures go on: not too many */
            usleep(50);
    }
    return NULL;
}

static void mode_capturerace(void) {
    CUstream s;
    CU(cuStreamCreate(&s, 1));
    pthread_t t;
    pthread_create(&t, NULL, churner, NULL);
    for (int i = 0; i < 200; i++) {
        CU(cuStreamBeginCapture_v2(s, 2));
        void *graph = NULL;
        CU(cuStreamEndCapture(s, &graph));
        CU(cuGraphDestroy(graph));
        usleep(100);
    }
    __atomic_store_n(&churn_stop, 1, __ATOMIC_RELAXED);
    pthread_join(t, NULL);
    CU(cuStreamDestroy_v2(s));
    int broken = mock_cuda_broken_captures();
    CHECK(broken == 0);
    printf("OK capturerace 200 captures, %d broken\n", broken);
}

/* ---- racefree: cuMemFree and cuMemFreeAsync of one buffer at once -------------------- */

static CUdeviceptr race_p;
static CUstream race_s;
static int race_round, race_ok[2];
static pthread_barrier_t race_end;

/* Spin (both racers must start together), yielding now and then: the
 * machine may have fewer cores than there are spinning threads. */
static void spin_until(int *where, int value) {
    for (unsigned n = 0; __atomic_load_n(where, __ATOMIC_ACQUIRE) < value; n++)
        if (n % 256 == 255)
            sched_yield();
}

static void *race_free(void *arg) {
    int which = (int)(uintptr_t)arg;
    start();
    for (int round = 1;; round++) {
        spin_until(&race_round, round);
        CUdeviceptr p = __atomic_load_n(&race_p, __ATOMIC_ACQUIRE);
        if (!p)
            return NULL;
        int ok = (which ? cuMemFreeAsync(p, race_s) : cuMemFree_v2(p)) == 0;
        __atomic_store_n(&race_ok[which], ok, __ATOMIC_RELAXED);
        pthread_barrier_wait(&race_end);
    }
}

/* Allocations and frees all along (under --trace, each an event: the
 * trace's lock and its writes to gzip hold the racers up at any point). */
static int noise_stop;
static void *noise(void *arg) {
    (void)arg;
    start();
    for (unsigned i = 0; !__atomic_load_n(&noise_stop, __ATOMIC_RELAXED); i++) {
        CUdeviceptr p = 0;
        if (cuMemAlloc_v2(&p, 512 + (i % 5) * 512) == 0)
            CU(cuMemFree_v2(p));
    }
    return NULL;
}

static void mode_racefree(void) {
    const char *env = getenv("ROUNDS");
    int rounds = env && *env ? atoi(env) : 20000;
    CU(cuStreamCreate(&race_s, 1));
    /* The racers spin for the start of a round, the main thread sleeps
     * until both are done: on two cores they run at once. */
    pthread_barrier_init(&race_end, NULL, 3);
    pthread_t t[2], nt;
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, race_free, (void *)(uintptr_t)i);
    pthread_create(&nt, NULL, noise, NULL);
    int both = 0, none = 0;
    for (int round = 1; round <= rounds; round++) {
        CUdeviceptr p = 0;
        CU(cuMemAllocAsync(&p, 4096 + (size_t)(round % 3) * 256, race_s));
        __atomic_store_n(&race_p, p, __ATOMIC_RELEASE);
        __atomic_store_n(&race_round, round, __ATOMIC_RELEASE);
        pthread_barrier_wait(&race_end);
        int n = race_ok[0] + race_ok[1];
        both += n == 2;
        none += n == 0;
        if (round % 64 == 0) { /* what was freed comes back: nothing twice */
            static CUdeviceptr q[64];
            for (int i = 0; i < 64; i++)
                q[i] = take(4096 + (size_t)(i % 3) * 256, race_s, 1);
            for (int i = 0; i < 64; i++)
                if (q[i])
                    give(q[i], race_s, 1);
        }
    }
    __atomic_store_n(&race_p, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&race_round, rounds + 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    __atomic_store_n(&noise_stop, 1, __ATOMIC_RELAXED);
    pthread_join(nt, NULL);
    CU(cuStreamDestroy_v2(race_s));
    unsigned long long v = violations();
    CHECK(both == 0 && none == 0 && v == 0);
    printf("OK racefree %d rounds: both accepted %d, neither %d, %llu violations\n", rounds, both, none, v);
}

/* ---- signals: dispositions the program chose ----------------------------------------- */

static volatile sig_atomic_t handled_signo, handled_with_info;

static void on_info(int sig, siginfo_t *info, void *uc) {
    (void)uc;
    handled_signo = sig;
    handled_with_info = info && info->si_signo == sig;
}

static void mode_signals(int swap) {
    int ignored = swap ? SIGTERM : SIGINT, caught = swap ? SIGINT : SIGTERM;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_IGN;
    sigaction(ignored, &sa, NULL);
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_info;
    sa.sa_flags = SA_SIGINFO;
    sigaction(caught, &sa, NULL);
    for (int i = 0; i < 100; i++) { /* the trace opens at the first event */
        CUdeviceptr p = take(4096, NULL, 0);
        give(p, NULL, 0);
    }
    raise(ignored);
    raise(caught);
    CHECK(handled_signo == caught && handled_with_info);
    for (int i = 0; i < 100; i++) { /* and the run goes on */
        CUdeviceptr p = take(4096, NULL, 0);
        give(p, NULL, 0);
    }
    printf("OK signals survived %s (ignored) and %s (handled, siginfo %d)\n", ignored == SIGINT ? "SIGINT" : "SIGTERM",
           caught == SIGINT ? "SIGINT" : "SIGTERM", (int)handled_with_info);
}

/* ---- forkthreads: fork from a parent whose threads hold the interposer's locks ------- */

static int fork_stop;

static void *busy(void *arg) {
    start();
    uint64_t r = 0x9E3779B97F4A7C15ull * ((uintptr_t)arg + 1);
    CUstream s;
    CU(cuStreamCreate(&s, 1));
    CUdeviceptr held[16] = {0};
    while (!__atomic_load_n(&fork_stop, __ATOMIC_RELAXED)) {
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        int i = (int)(r % 16), ordered = (int)(r >> 8) & 1;
        if (held[i]) {
            CU(ordered ? cuMemFreeAsync(held[i], s) : cuMemFree_v2(held[i]));
            held[i] = 0;
        } else if (ordered) {
            CU(cuMemAllocAsync(&held[i], 256 + (r >> 20) % 65536, s));
        } else {
            CU(cuMemAlloc_v2(&held[i], 256 + (r >> 20) % 65536));
        }
        if ((r >> 40) % 512 == 0) { /* streams come and go */
            CU(cuStreamSynchronize(s));
            for (int k = 0; k < 16; k++)
                if (held[k]) {
                    CU(cuMemFree_v2(held[k]));
                    held[k] = 0;
                }
            CU(cuStreamDestroy_v2(s));
            CU(cuStreamCreate(&s, 1));
        }
    }
    for (int k = 0; k < 16; k++)
        if (held[k])
            CU(cuMemFree_v2(held[k]));
    CU(cuStreamDestroy_v2(s));
    return NULL;
}

/* In the child: every call answers (whatever it answers), none hangs. */
static void child(CUdeviceptr mine) {
    alarm(10);
    CUdeviceptr p = 0;
    CUstream s = NULL;
    size_t f, t;
    (void)cuMemFree_v2(mine);
    (void)cuMemFreeAsync(mine, NULL);
    (void)cuMemAlloc_v2(&p, 4096);
    (void)cuMemAllocAsync(&p, 4096, NULL);
    (void)cuMemGetInfo_v2(&f, &t);
    (void)cuStreamCreate(&s, 1);
    (void)cuStreamBeginCapture_v2(s, 2);
    (void)cuStreamEndCapture(s, NULL);
    (void)cuStreamDestroy_v2(s);
    _exit(0);
}

static void mode_forkthreads(void) {
    const char *env = getenv("FORKS");
    int forks = env && *env ? atoi(env) : 40;
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, busy, (void *)(uintptr_t)i);
    int hung = 0, other = 0;
    for (int i = 0; i < forks; i++) {
        CUdeviceptr mine = 0;
        CU(cuMemAlloc_v2(&mine, 4096));
        CU(cuMemFree_v2(mine)); /* something of this thread's waits in its batch */
        CU(cuMemAlloc_v2(&mine, 4096));
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0)
            child(mine);
        int status = 0;
        waitpid(pid, &status, 0);
        hung += WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM;
        other += !WIFEXITED(status) && !(WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM);
        CU(cuMemFree_v2(mine));
        usleep(1000);
    }
    __atomic_store_n(&fork_stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    CHECK(hung == 0 && other == 0);
    printf("OK forkthreads %d forks, %d children hung, %d died otherwise\n", forks, hung, other);
}

/* ---- forkfirst: a child forked before CUDA was used ------------------------------------ */

static unsigned long long driver_allocs(void) {
    unsigned long long a, f, b;
    size_t live;
    mock_cuda_stats(&a, &f, &b, &live);
    return a;
}

static void mode_forkfirst(void) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(30);
        start();
        unsigned long long before = driver_allocs();
        for (int i = 0; i < 2000; i++) {
            CUdeviceptr p = take(4096 + (size_t)(i % 5) * 4096, NULL, 0);
            if (p)
                give(p, NULL, 0);
        }
        unsigned long long reached = driver_allocs() - before;
        printf("child: %llu of 2000 allocations reached the driver, %llu violations\n", reached, violations());
        fflush(stdout);
        _exit(failures || mock_cuda_violations(NULL, 0) ? 1 : reached > 100 ? 3 : 0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    CHECK(code == 0 || code == 3);
    start();
    CUdeviceptr p = take(4096, NULL, 0);
    give(p, NULL, 0);
    printf("OK forkfirst child exit %d (%s)\n", code, code == 0 ? "served" : "its allocations reached the driver");
}

/* ---- forkvmm: fork while other threads count physical memory ---------------------------- */

static CUmemAllocationProp device_prop(void) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = 1;          /* pinned */
    prop.location.type = 1; /* device */
    prop.location.id = 0;
    return prop;
}

static int vmm_stop;
static void *vmm_worker(void *arg) {
    (void)arg;
    start();
    CUmemAllocationProp prop = device_prop();
    while (!__atomic_load_n(&vmm_stop, __ATOMIC_RELAXED)) {
        CUmemGenericAllocationHandle h;
        if (cuMemCreate(&h, (size_t)2 << 20, &prop, 0) == 0)
            CU(cuMemRelease(h));
    }
    return NULL;
}

static void mode_forkvmm(void) {
    const char *env = getenv("FORKS");
    int forks = env && *env ? atoi(env) : 200;
    CUdeviceptr p = take(4096, NULL, 0); /* the parent uses CUDA, and carve */
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, vmm_worker, NULL);
    int hung = 0, other = 0, wrong = 0, made = 0;
    for (int i = 0; i < forks && !hung; i++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            alarm(10);
            CUmemAllocationProp prop = device_prop();
            CUmemGenericAllocationHandle h = 0;
            CUdeviceptr q = 0;
            size_t pitch = 0;
            CUmemoryPool pool = NULL;
            int bad = cuMemCreate(&h, (size_t)2 << 20, &prop, 0) != 3;
            bad |= (cuMemAllocPitch_v2(&q, &pitch, 4096, 16, 4) != 3) << 1;
            bad |= (cuMemAllocFromPoolAsync(&q, 4096, pool, NULL) != 3) << 2;
            _exit(bad ? 10 + bad : 0); /* CUDA_ERROR_NOT_INITIALIZED (3) from each, as the driver answers */
        }
        int status = 0;
        waitpid(pid, &status, 0);
        made++;
        hung += WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM;
        wrong += WIFEXITED(status) && WEXITSTATUS(status) != 0;
        other += !WIFEXITED(status) && !(WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM);
    }
    __atomic_store_n(&vmm_stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    give(p, NULL, 0);
    CHECK(hung == 0 && other == 0 && wrong == 0);
    printf("%s forkvmm %d forks, %d children hung, %d answered otherwise than the driver, %d died otherwise\n",
           hung || other || wrong ? "FAIL" : "OK", made, hung, wrong, other);
}

/* ---- crossctx: a second free while another context is current ---------------------- */

#define MIB ((size_t)1 << 20)

static void mode_crossctx(void) {
    CUcontext a = NULL, b = NULL;
    CU(cuCtxGetCurrent(&a));
    CUstream s;
    CU(cuStreamCreate(&s, 1));
    /* The first buffer of a fresh arena is at the start of its segment: the
     * driver frees the whole segment if the free reaches it. */
    CUdeviceptr x = take(MIB, s, 1);
    CUdeviceptr y = take(MIB, s, 1); /* live: an interior pointer of it is freed below */
    give(x, s, 1);
    CU(cuCtxCreate_v2(&b, 0, 0)); /* another context current */
    CUresult second = cuMemFree_v2(x);
    CUresult second_async = cuMemFreeAsync(x, NULL);
    CUresult interior = cuMemFree_v2(y + 4096);
    CU(cuCtxDestroy_v2(b));
    CU(cuCtxSetCurrent(a));
    CHECK(second == 1 && second_async == 1 && interior == 1); /* CUDA_ERROR_INVALID_VALUE */
    /* Nothing was freed under carve: what it hands out next is live memory. */
    CUdeviceptr again[4];
    for (int i = 0; i < 4; i++)
        again[i] = take(MIB, s, 1);
    for (int i = 0; i < 4; i++)
        give(again[i], s, 1);
    give(y, s, 1);
    CU(cuStreamDestroy_v2(s));
    unsigned long long v = violations();
    CHECK(v == 0);
    printf("%s crossctx second free %d, stream-ordered %d, interior %d, %llu violations\n",
           failures ? "FAIL" : "OK", second, second_async, interior, v);
}

/* ---- lifetimes: contexts made and taken away, more than 64 ---------------------------- */

static size_t mem_free(size_t *total) {
    size_t f = 0, t = 0;
    CU(cuMemGetInfo_v2(&f, &t));
    if (total)
        *total = t;
    return f;
}

static void mode_lifetimes(int rounds) {
    /* The rounds' contexts come and go from a context of the program's own,
     * which holds the pool; the primary context is released, so that a
     * round's release is its last. */
    CUcontext home = NULL;
    CU(cuDevicePrimaryCtxRelease_v2(0));
    CU(cuCtxCreate_v2(&home, 0, 0));
    size_t total0 = 0, free0 = mem_free(&total0);
    /* A pool allocation outlives the contexts that go away: counted all along. */
    CUmemoryPool pool = NULL;
    CU(cuMemPoolCreate(&pool, NULL));
    CUdeviceptr pooled = 0;
    CU(cuMemAllocFromPoolAsync(&pooled, 8 * MIB, pool, NULL));
    size_t free_pooled = mem_free(NULL);
    CHECK(free_pooled + 8 * MIB == free0);
    int kept = 0, totals = 0, worst_small = 0;
    const char *hows[3] = {"reset", "release", "destroy"};
    int how_failed[3] = {0, 0, 0};
    for (int r = 0; r < rounds; r++) {
        int how = r % 3;
        CUcontext c = NULL;
        if (how == 2) {
            CU(cuCtxCreate_v2(&c, 0, 0));
        } else {
            CU(cuDevicePrimaryCtxRetain(&c, 0));
            CU(cuCtxSetCurrent(c));
        }
        size_t t = 0;
        mem_free(&t);
        totals += t != total0;
        CUdeviceptr big = 0, pitched = 0, small[16];
        size_t pitch = 0;
        CU(cuMemAlloc_v2(&big, 40 * MIB));
        CU(cuMemAllocPitch_v2(&pitched, &pitch, 4096, 1024, 4));
        unsigned long long before = driver_allocs();
        for (int i = 0; i < 16; i++)
            CU(cuMemAlloc_v2(&small[i], 4096));
        int reached = (int)(driver_allocs() - before);
        if (reached > worst_small)
            worst_small = reached;
        CU(cuMemFree_v2(small[3])); /* one waits for the device when its context goes */
        if (how == 0) {
            CU(cuDevicePrimaryCtxReset_v2(0));
            CU(cuDevicePrimaryCtxRelease_v2(0));
        } else if (how == 1) {
            CU(cuDevicePrimaryCtxRelease_v2(0)); /* the last one: the context is reset */
        } else {
            CU(cuCtxDestroy_v2(c));
        }
        CU(cuCtxSetCurrent(home));
        size_t f = mem_free(NULL);
        if (f != free_pooled) { /* all of the context's memory is free again; the pool's is not */
            kept++;
            how_failed[how]++;
            if (kept <= 3)
                printf("round %d (%s): %zu MiB free after the context went, %zu MiB before it\n", r, hows[how],
                       f / MIB, free_pooled / MIB);
        }
    }
    CU(cuMemFree_v2(pooled));
    CU(cuMemPoolDestroy(pool));
    CHECK(mem_free(NULL) == free0);
    CU(cuCtxDestroy_v2(home));
    CHECK(kept == 0 && totals == 0);
    unsigned long long v = violations();
    CHECK(v == 0);
    printf("%s lifetimes %d contexts: %d kept memory (reset %d, release %d, destroy %d), %d reported another total, "
           "at most %d of 16 small allocations reached the driver, %llu violations\n",
           failures ? "FAIL" : "OK", rounds, kept, how_failed[0], how_failed[1], how_failed[2], totals, worst_small, v);
}

/* ---- twoctx: memory information in a second context --------------------------------- */

static void mode_twoctx(void) {
    CUcontext a = NULL, b = NULL;
    CU(cuCtxGetCurrent(&a));
    CUdeviceptr p = 0;
    CU(cuMemAlloc_v2(&p, 48 * MIB));
    CU(cuCtxCreate_v2(&b, 0, 0));
    size_t t = 0, f = mem_free(&t);
    CUdeviceptr more = 0, q = 0;
    CUresult over = cuMemAlloc_v2(&more, f + 2 * MIB);
    if (over == 0)
        CU(cuMemFree_v2(more));
    CUresult fits = cuMemAlloc_v2(&q, f - 2 * MIB);
    CHECK(over == 2 && fits == 0);
    if (fits == 0)
        CU(cuMemFree_v2(q));
    CU(cuCtxDestroy_v2(b));
    CU(cuCtxSetCurrent(a));
    CU(cuMemFree_v2(p));
    printf("%s twoctx free %zu MiB of %zu in the second context: 2 MiB more answered %d, 2 MiB less %d\n",
           failures ? "FAIL" : "OK", f / MIB, t / MIB, over, fits);
}

/* ---- capfree: frees and allocations that are nodes of a graph --------------------------- */

static void mode_capfree(void) {
    CUstream s;
    CU(cuStreamCreate(&s, 1));
    size_t t = 0, free0 = mem_free(&t);
    /* Memory freed by a free node stays held until the graph runs: what is
     * said to be free can be had, and then the program holds no more than
     * the total said. */
    CUdeviceptr p = 0;
    size_t pitch = 0;
    CU(cuMemAllocPitch_v2(&p, &pitch, 4096, 10240, 4)); /* 40 MiB */
    CU(cuStreamBeginCapture_v2(s, 2));
    CU(cuMemFreeAsync(p, s));
    void *graph = NULL;
    CU(cuStreamEndCapture(s, &graph));
    size_t f = mem_free(NULL);
    CUdeviceptr more = 0, q = 0;
    CUresult over = cuMemAlloc_v2(&more, f + 2 * MIB);
    if (over == 0)
        CU(cuMemFree_v2(more));
    CUresult fits = cuMemAlloc_v2(&q, f - 2 * MIB);
    unsigned long long na, nf, bad;
    size_t live = 0;
    mock_cuda_stats(&na, &nf, &bad, &live);
    CHECK(over == 2 && fits == 0 && live <= t);
    if (fits == 0)
        CU(cuMemFree_v2(q));
    void *exec = NULL;
    CU(cuGraphInstantiateWithFlags(&exec, graph, 0));
    CU(cuGraphLaunch(exec, s));
    CU(cuStreamSynchronize(s));
    CU(cuGraphDestroy(graph));
    /* An allocation node of a graph destroyed without running takes nothing. */
    size_t before_node = mem_free(NULL);
    CU(cuStreamBeginCapture_v2(s, 2));
    CUdeviceptr g = 0;
    CU(cuMemAllocAsync(&g, 16 * MIB, s));
    CU(cuStreamEndCapture(s, &graph));
    CU(cuGraphDestroy(graph));
    size_t after_node = mem_free(NULL);
    CHECK(after_node == before_node);
    CU(cuStreamDestroy_v2(s));
    printf("%s capfree with 40 MiB freed by a node, free %zu MiB of %zu: 2 MiB more answered %d, 2 MiB less %d, "
           "the program then held %zu MiB; an unlaunched allocation node took %zu MiB (%zu MiB free at first)\n",
           failures ? "FAIL" : "OK", f / MIB, t / MIB, over, fits, live / MIB,
           (before_node - after_node) / MIB, free0 / MIB);
}

/* ---- sigreset: dispositions the program changes after the interposer's handler --------- */

static volatile sig_atomic_t plain_signo;
static void on_plain(int sig) { plain_signo = sig; }

static int pairs(int n) {
    for (int i = 0; i < n; i++) {
        CUdeviceptr p = take(4096 + (size_t)(i % 3) * 512, NULL, 0);
        give(p, NULL, 0);
    }
    return n;
}

/* Whether sig's disposition reads back as handler h (SIG_IGN, SIG_DFL or a
 * function), or on_info with SA_SIGINFO. (After an SA_RESETHAND delivery
 * the kernel keeps the flags: only the handler is SIG_DFL.) */
static int reads_back(int sig, void (*h)(int), int siginfo) {
    struct sigaction now;
    if (sigaction(sig, NULL, &now) != 0)
        return 0;
    return siginfo ? (now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_info : now.sa_handler == h;
}

static void mode_sigreset(void) {
    int n = pairs(100); /* the trace opens at the first event, and the handler with it */
    struct sigaction sa, old;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_IGN;
    CU(sigaction(SIGINT, &sa, &old));
    CHECK(!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL); /* what the program had: the default */
    raise(SIGINT);                                                   /* ignored */
    CHECK(reads_back(SIGINT, SIG_IGN, 0));
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_info;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
    CU(sigaction(SIGTERM, &sa, &old));
    CHECK(!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL);
    CHECK(reads_back(SIGTERM, NULL, 1));
    raise(SIGTERM); /* handled once, with its siginfo */
    CHECK(handled_signo == SIGTERM && handled_with_info);
    CHECK(reads_back(SIGTERM, SIG_DFL, 0)); /* SA_RESETHAND: the default again */
    CHECK(signal(SIGINT, on_plain) == SIG_IGN);
    raise(SIGINT);
    CHECK(plain_signo == SIGINT);
    n += pairs(100);
    CHECK(signal(SIGTERM, SIG_DFL) == SIG_DFL);
    n += pairs(100);
    printf("%s sigreset %d allocations\n", failures ? "FAIL" : "OK", n);
    fflush(stdout);
    raise(SIGTERM); /* the end, with the trace whole */
    printf("FAIL sigreset survived SIGTERM\n");
    failures++;
}

/* ---- resetrace: a first allocation while another thread resets ------------------------- */

static int race_phase;
static CUcontext race_ctx;

static void *first_alloc(void *arg) {
    (void)arg;
    CU(cuCtxSetCurrent(race_ctx));
    spin_until(&race_phase, 1);
    usleep(20000); /* inside the reset, which the driver takes its time to do */
    CUdeviceptr p = 0;
    CU(cuMemAlloc_v2(&p, 4096)); /* the reset frees it, as the driver's */
    spin_until(&race_phase, 2);
    mock_cuda_disown_all();
    for (int i = 0; i < 64; i++) { /* nothing from memory the reset freed */
        CUdeviceptr q = take(4096 + (size_t)(i % 4) * 4096, NULL, 0);
        if (q)
            give(q, NULL, 0);
    }
    return NULL;
}

static void mode_resetrace(void) {
    CU(cuCtxGetCurrent(&race_ctx));
    for (int how = 0; how < 2; how++) { /* a reset, then the last release */
        race_phase = 0;
        CUdeviceptr p = take(4096, NULL, 0);
        give(p, NULL, 0);
        pthread_t t;
        pthread_create(&t, NULL, first_alloc, NULL);
        __atomic_store_n(&race_phase, 1, __ATOMIC_RELEASE);
        if (how == 0) {
            CU(cuDevicePrimaryCtxReset_v2(0));
        } else {
            CU(cuDevicePrimaryCtxRelease_v2(0));
            CU(cuDevicePrimaryCtxRetain(&race_ctx, 0));
        }
        __atomic_store_n(&race_phase, 2, __ATOMIC_RELEASE);
        pthread_join(t, NULL);
    }
    unsigned long long v = violations();
    CHECK(v == 0);
    printf("%s resetrace %llu violations\n", failures ? "FAIL" : "OK", v);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: dropin_promises destroyed|release|capture|capturerace|racefree|signals [swap]|forkthreads|"
                        "forkfirst|forkvmm|crossctx|lifetimes [ROUNDS]|twoctx|capfree|resetrace|sigreset\n");
        return 2;
    }
    const char *m = argv[1];
    if (strcmp(m, "forkfirst") != 0)
        start();
    if (!strcmp(m, "destroyed"))
        mode_destroyed();
    else if (!strcmp(m, "release"))
        mode_release();
    else if (!strcmp(m, "capture"))
        mode_capture();
    else if (!strcmp(m, "racefree"))
        mode_racefree();
    else if (!strcmp(m, "capturerace"))
        mode_capturerace();
    else if (!strcmp(m, "signals"))
        mode_signals(argc > 2 && !strcmp(argv[2], "swap"));
    else if (!strcmp(m, "forkthreads"))
        mode_forkthreads();
    else if (!strcmp(m, "forkfirst"))
        mode_forkfirst();
    else if (!strcmp(m, "forkvmm"))
        mode_forkvmm();
    else if (!strcmp(m, "crossctx"))
        mode_crossctx();
    else if (!strcmp(m, "lifetimes"))
        mode_lifetimes(argc > 2 ? atoi(argv[2]) : 70);
    else if (!strcmp(m, "twoctx"))
        mode_twoctx();
    else if (!strcmp(m, "capfree"))
        mode_capfree();
    else if (!strcmp(m, "resetrace"))
        mode_resetrace();
    else if (!strcmp(m, "sigreset"))
        mode_sigreset();
    else {
        fprintf(stderr, "dropin_promises: unknown mode %s\n", m);
        return 2;
    }
    return failures ? 1 : 0;
}
