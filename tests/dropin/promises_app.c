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
    while (!__atomic_load_n(&churn_stop, __ATOMIC_RELAXED)) {
        CUdeviceptr p = 0;
        if (cuMemAlloc_v2(&p, 4096) == 0)
            CU(cuMemFree_v2(p)); /* an epoch closes, with an event on the legacy stream, every 128 */
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

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: dropin_promises destroyed|release|capture|capturerace|racefree|signals [swap]|forkthreads|forkfirst\n");
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
    else {
        fprintf(stderr, "dropin_promises: unknown mode %s\n", m);
        return 2;
    }
    return failures ? 1 : 0;
}
