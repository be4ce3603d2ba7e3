/*
 * explore.c — a randomized schedule explorer over carve-run's interposer on
 * the mock device (mock_cuda.c): a driver-API program that knows nothing of
 * carve and does, from several threads at once, everything a CUDA program
 * may do with memory and streams, in an order drawn from a seed; the mock
 * device's oracle checks every range the program is handed.
 *
 * The one idea: a correct program on a correct driver never sees a
 * breach, so the program must stay correct whatever the draw (work on a
 * stream-ordered buffer only on its stream, or on another after waiting for
 * it; a stream-ordered free on another stream only after that stream waits
 * for the buffer's; during a capture only graph work on the capturing
 * stream and no work on the legacy stream; after a context reset nothing of
 * the old context is touched). Then every breach the oracle counts, every
 * call answered otherwise than the driver would, every capture broken by a
 * call the program did not make, and every forked child that hangs is the
 * interposer's. (The program does break captures itself: a cuCtxSynchronize
 * beside another thread's capture is refused and breaks it, in every
 * capture mode; those breaks are counted as the program's.) Run without carve-run, the same program checks the mock.
 *
 * What a thread does, each step, by weight: allocate (cuMemAlloc, or
 * cuMemAllocAsync on one of its streams, the legacy stream or its
 * per-thread stream, by handle or through the _ptsz form), queue work that
 * uses one of its buffers, free one (cuMemFree, or cuMemFreeAsync on its
 * stream or, after a wait, on another), let the device complete some work,
 * synchronize, create or destroy a stream (blocking or not; a destroyed
 * stream's buffers are freed later with cuMemFree), capture a graph on one
 * of its streams or its per-thread stream (allocation, work and free nodes;
 * the graph is launched later), fork (the child calls the driver under an
 * alarm and exits), live a whole second context (cuCtxCreate: what
 * cuMemGetInfo reports there must be the total reported at the start,
 * buffers are allocated, used by work, freed unordered and stream-ordered
 * on a stream of its own, and some are left to cuCtxDestroy; a run makes
 * more of them than the interposer once kept track of), or change the
 * disposition of SIGINT or SIGTERM and raise it (a handler with
 * SA_SIGINFO, once with SA_RESETHAND, through signal(), or SIG_IGN: it must
 * behave and read back as set; under --trace the interposer's handler
 * stands in front of it). Every few hundred steps the threads meet and one
 * of them resets the primary context (cuDevicePrimaryCtxReset, or its last
 * cuDevicePrimaryCtxRelease and a retain), after which everything of the
 * old context is forgotten.
 *
 * Usage: dropin_explore SEED [STEPS [THREADS]]   (STEPS per thread, default
 * 2000; THREADS default 4). Prints "OK explore seed=S ..." with its figures
 * (among them how many of the second contexts' small allocations reached
 * the driver: under carve-run a few segments, without it every one), or
 * "FAIL seed=S: ..." lines (the seed reproduces the draw, not the
 * interleaving of threads) and exits 1.
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mock_api.h"

CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, int dev);

static int failures;
static unsigned long long seed;
static CUcontext primary;

#define FAILED(what, r)                                                                                 \
    do {                                                                                                \
        printf("FAIL seed=%llu thread %d step %d: %s returned %d\n", seed, th->id, th->step, what, (int)(r)); \
        __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);                                             \
    } while (0)
#define EXPECT(call)                         \
    do {                                     \
        CUresult r_ = (call);                \
        if (r_ != 0)                         \
            FAILED(#call, r_);               \
    } while (0)

enum { MAX_BUF = 32, MAX_STREAMS = 4 };

typedef struct buf {
    CUdeviceptr p;
    size_t size;
    CUstream s;   /* allocated stream-ordered on s (one of the thread's, or a default
                     stream); NULL: cuMemAlloc, usable on any stream */
    int orphan;   /* its stream was destroyed: freed with cuMemFree */
} buf;

/* Whether b is stream-ordered on a stream of the thread's own (carve
 * promises the plain calls' guarantee for the default streams). */
static int on_real_stream(const buf *b) { return (uintptr_t)b->s > 2; }

typedef struct thread_state {
    int id, step;
    uint64_t rng;
    buf b[MAX_BUF];
    int nb;
    CUstream s[MAX_STREAMS];
    int ns;
    void *graphs[4]; /* captured, waiting to be launched */
    int ngraphs;
    unsigned long long seen_resets;
    unsigned long long allocs, frees, ordered_frees, cross_frees, launches, captures, streams_made, forks;
    unsigned long long own_broken, captures_synced; /* cuCtxSynchronize refused; captures it broke */
    unsigned long long contexts, context_allocs, context_driver_allocs, signals;
} thread_state;

static int nthreads, steps;
static pthread_barrier_t meet;
/* Work on the legacy stream (write) and captures (read) exclude each other:
 * the program never joins a capture implicitly. */
static pthread_rwlock_t legacy_lock = PTHREAD_RWLOCK_INITIALIZER;
static unsigned long long resets, hung, child_failed;
/* cuCtxSynchronize beside another thread's capture breaks it in every mode,
 * and the driver refuses the synchronization: that break is the program's
 * own. Synchronizations started and returned so far, and those refused so
 * (each counted once by the mock's mock_cuda_broken_captures): a capture
 * that ends invalidated is the program's doing only when a synchronization
 * that had not returned before it began has started since, and every other
 * break is carve's. */
static unsigned long long syncs_started, syncs_done, own_breaks;
static size_t first_total; /* what cuMemGetInfo reported as total at the start */

static uint64_t rnd(thread_state *th) {
    th->rng ^= th->rng << 13;
    th->rng ^= th->rng >> 7;
    th->rng ^= th->rng << 17;
    return th->rng;
}
static int pick(thread_state *th, int n) { return (int)(rnd(th) % (uint64_t)n); }

static size_t draw_size(thread_state *th) {
    static const size_t sizes[] = {256, 512, 4096, 4096 + 256, 65536, 1 << 20};
    return sizes[pick(th, 6)] + (pick(th, 4) == 0 ? (size_t)pick(th, 8) * 256 : 0);
}

/* A stream to queue work of an unordered buffer on: one of the thread's,
 * its per-thread stream, or the legacy stream. */
static CUstream any_stream(thread_state *th) {
    int k = pick(th, th->ns + 2);
    return k < th->ns ? th->s[k] : k == th->ns ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
}

/* Queue work that uses [p, p+n) on s. */
static void launch(thread_state *th, CUstream s, CUdeviceptr p, size_t n) {
    int legacy = s == CU_STREAM_LEGACY;
    if (legacy)
        pthread_rwlock_wrlock(&legacy_lock);
    EXPECT(mock_cuda_launch(s, p, n));
    if (legacy)
        pthread_rwlock_unlock(&legacy_lock);
    th->launches++;
}

static void do_alloc(thread_state *th) {
    if (th->nb == MAX_BUF)
        return;
    size_t size = draw_size(th);
    CUdeviceptr p = 0;
    CUstream s = NULL;
    CUresult r;
    int how = pick(th, 5);
    if (how <= 1 && th->ns) { /* stream-ordered on one of its streams */
        s = th->s[pick(th, th->ns)];
        r = cuMemAllocAsync(&p, size, s);
    } else if (how == 2) { /* on its per-thread stream, by handle or by NULL in the _ptsz form */
        s = CU_STREAM_PER_THREAD;
        r = pick(th, 2) ? cuMemAllocAsync(&p, size, s) : cuMemAllocAsync_ptsz(&p, size, NULL);
    } else if (how == 3) {
        s = CU_STREAM_LEGACY;
        r = cuMemAllocAsync(&p, size, pick(th, 2) ? s : NULL);
    } else {
        r = cuMemAlloc_v2(&p, size);
    }
    if (r != 0) {
        FAILED("allocation", r);
        return;
    }
    /* On a default stream carve promises what cuMemAlloc does: usable at once anywhere. */
    mock_cuda_own(p, size, s, (uintptr_t)s > 2);
    th->b[th->nb++] = (buf){p, size, s, 0};
    th->allocs++;
}

static void do_launch(thread_state *th) {
    if (!th->nb)
        return;
    buf *b = &th->b[pick(th, th->nb)];
    if (b->orphan)
        return; /* its stream is gone: nothing more to queue on it */
    CUstream s = b->s ? b->s : any_stream(th);
    size_t off = b->size > 256 ? (size_t)pick(th, (int)(b->size / 256)) * 256 : 0;
    launch(th, s, b->p + off, b->size - off);
}

/* s2 waits for everything queued on s so far. */
static void wait_for(thread_state *th, CUstream s2, CUstream s) {
    CUevent e;
    EXPECT(cuEventCreate(&e, 0));
    EXPECT(cuEventRecord(e, s));
    EXPECT(cuStreamWaitEvent(s2, e, 0));
    EXPECT(cuEventDestroy_v2(e));
}

static void do_free(thread_state *th) {
    if (!th->nb)
        return;
    int i = pick(th, th->nb);
    buf b = th->b[i];
    th->b[i] = th->b[--th->nb];
    mock_cuda_disown(b.p);
    int how = pick(th, 3);
    if (b.s && !b.orphan && how == 0) { /* on its own stream */
        if (b.s == CU_STREAM_PER_THREAD && pick(th, 2))
            EXPECT(cuMemFreeAsync_ptsz(b.p, NULL));
        else
            EXPECT(cuMemFreeAsync(b.p, b.s));
        th->ordered_frees++;
    } else if (on_real_stream(&b) && !b.orphan && how == 1 && th->ns > 1) {
        CUstream s2 = th->s[pick(th, th->ns)]; /* on another, once it waits for the buffer's */
        if (s2 != b.s) {
            wait_for(th, s2, b.s);
            th->cross_frees++;
        }
        EXPECT(cuMemFreeAsync(b.p, s2));
        th->ordered_frees++;
    } else {
        EXPECT(cuMemFree_v2(b.p));
    }
    th->frees++;
}

static void do_stream(thread_state *th) {
    if (th->ns < MAX_STREAMS && (pick(th, 2) || !th->ns)) {
        EXPECT(cuStreamCreate(&th->s[th->ns], (unsigned)pick(th, 2)));
        th->ns++;
        th->streams_made++;
        return;
    }
    int k = pick(th, th->ns);
    CUstream s = th->s[k];
    th->s[k] = th->s[--th->ns];
    for (int i = 0; i < th->nb; i++)
        if (th->b[i].s == s)
            th->b[i].orphan = 1;
    EXPECT(cuStreamDestroy_v2(s));
}

/* cuCtxSynchronize, refused while another thread captures (see own_breaks). */
static void ctx_sync(thread_state *th) {
    __atomic_add_fetch(&syncs_started, 1, __ATOMIC_SEQ_CST);
    CUresult r = cuCtxSynchronize();
    if (r == 900 /* CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED */) {
        __atomic_add_fetch(&own_breaks, 1, __ATOMIC_SEQ_CST);
        th->own_broken++;
    } else if (r != 0) {
        FAILED("cuCtxSynchronize()", r);
    }
    __atomic_add_fetch(&syncs_done, 1, __ATOMIC_SEQ_CST);
}

/* A graph captured on one of the thread's streams or its per-thread stream:
 * an allocation node, work on it and on an unordered buffer of the thread,
 * and a free node. */
static void do_capture(thread_state *th) {
    if (th->ngraphs == 4)
        return;
    int per_thread = !th->ns || pick(th, 3) == 0;
    CUstream s = per_thread ? CU_STREAM_PER_THREAD : th->s[pick(th, th->ns)];
    int ptsz = per_thread && pick(th, 2);
    pthread_rwlock_rdlock(&legacy_lock);
    unsigned long long done0 = __atomic_load_n(&syncs_done, __ATOMIC_SEQ_CST);
    EXPECT(ptsz ? cuStreamBeginCapture_v2_ptsz(NULL, 2) : cuStreamBeginCapture_v2(s, 2 /* relaxed */));
    CUdeviceptr g = 0;
    size_t size = draw_size(th);
    CUresult r = ptsz ? cuMemAllocAsync_ptsz(&g, size, NULL) : cuMemAllocAsync(&g, size, s);
    if (r != 0)
        FAILED("cuMemAllocAsync during a capture", r);
    if (r == 0)
        EXPECT(mock_cuda_launch(s, g, size));
    for (int i = 0; i < th->nb; i++) /* a buffer of the thread, while it lives: the graph runs before any free */
        if (!th->b[i].s && pick(th, 2)) {
            EXPECT(mock_cuda_launch(s, th->b[i].p, th->b[i].size));
            break;
        }
    if (r == 0)
        EXPECT(ptsz ? cuMemFreeAsync_ptsz(g, NULL) : cuMemFreeAsync(g, s));
    void *graph = NULL;
    CUresult end = ptsz ? cuStreamEndCapture_ptsz(NULL, &graph) : cuStreamEndCapture(s, &graph);
    if (end == 901 /* CUDA_ERROR_STREAM_CAPTURE_INVALIDATED */ &&
        __atomic_load_n(&syncs_started, __ATOMIC_SEQ_CST) > done0)
        th->captures_synced++; /* a synchronization of the program's broke it */
    else if (end != 0)
        FAILED("cuStreamEndCapture", end);
    pthread_rwlock_unlock(&legacy_lock);
    void *exec = NULL;
    if (graph && cuGraphInstantiateWithFlags(&exec, graph, 0) == 0) {
        /* launched now, on the stream it was captured on: it may use the
         * thread's buffer only while that buffer lives */
        EXPECT(cuGraphLaunch(exec, s));
        th->graphs[th->ngraphs++] = graph;
    }
    th->captures++;
}

/* In the child: every call answers, none hangs. */
static void child(thread_state *th) {
    alarm(10);
    CUdeviceptr p = 0;
    CUstream s = NULL;
    size_t f, t;
    if (th->nb)
        (void)cuMemFree_v2(th->b[0].p);
    (void)cuMemAlloc_v2(&p, 4096);
    (void)cuMemGetInfo_v2(&f, &t);
    (void)cuStreamCreate(&s, 1);
    (void)cuStreamBeginCapture_v2(s, 2);
    (void)cuStreamEndCapture(s, NULL);
    (void)cuStreamDestroy_v2(s);
    if (th->ns)
        (void)cuStreamDestroy_v2(th->s[0]);
    _exit(0);
}

static void do_fork(thread_state *th) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        child(th);
    if (pid < 0)
        return;
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
        __atomic_add_fetch(&hung, 1, __ATOMIC_RELAXED);
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        __atomic_add_fetch(&child_failed, 1, __ATOMIC_RELAXED);
    th->forks++;
}

/* A second context, lived whole: made (current on this thread), its total
 * memory as reported at the start, buffers allocated, used and freed in it
 * (some on a stream of its own), some left to its destruction, which makes
 * the primary context current again. */
enum { CTX_BUFS = 8 };
static void do_context(thread_state *th) {
    CUcontext c = NULL;
    EXPECT(cuCtxCreate_v2(&c, 0, 0));
    if (!c)
        return;
    size_t f = 0, t = 0;
    EXPECT(cuMemGetInfo_v2(&f, &t));
    if (t != first_total)
        FAILED("cuMemGetInfo's total in a second context differs from the first one's", (int)(t >> 20));
    CUstream s = NULL;
    EXPECT(cuStreamCreate(&s, (unsigned)pick(th, 2)));
    CUdeviceptr p[CTX_BUFS] = {0};
    int ordered[CTX_BUFS];
    unsigned long long before = mock_cuda_ctx_allocs(c);
    for (int i = 0; i < CTX_BUFS; i++) {
        size_t size = 256 + (size_t)pick(th, 16) * 256;
        ordered[i] = pick(th, 3) == 0;
        CUresult r = ordered[i] ? cuMemAllocAsync(&p[i], size, s) : cuMemAlloc_v2(&p[i], size);
        if (r != 0) {
            FAILED("allocation in a second context", r);
            p[i] = 0;
            continue;
        }
        mock_cuda_own(p[i], size, s, ordered[i]);
        if (pick(th, 2))
            launch(th, ordered[i] ? s : pick(th, 2) ? s : CU_STREAM_LEGACY, p[i], size);
    }
    th->context_allocs += CTX_BUFS;
    th->context_driver_allocs += mock_cuda_ctx_allocs(c) - before;
    for (int i = 0; i < CTX_BUFS; i++) {
        if (!p[i] || pick(th, 4) == 0)
            continue; /* left to the context's destruction */
        mock_cuda_disown(p[i]);
        EXPECT(ordered[i] && pick(th, 2) ? cuMemFreeAsync(p[i], s) : cuMemFree_v2(p[i]));
        p[i] = 0;
    }
    EXPECT(cuStreamDestroy_v2(s));
    for (int i = 0; i < CTX_BUFS; i++)
        if (p[i])
            mock_cuda_disown(p[i]); /* the driver frees it with the context */
    pthread_rwlock_wrlock(&legacy_lock); /* its queued legacy work completes: no capture may be broken by it */
    EXPECT(cuCtxDestroy_v2(c));
    pthread_rwlock_unlock(&legacy_lock);
    th->contexts++;
}

/* A disposition of SIGINT or SIGTERM set and the signal raised, one thread
 * at a time (dispositions are the process's): it behaves and reads back as
 * set. Never SIG_DFL while the signal may come. */
static pthread_mutex_t signal_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile sig_atomic_t caught_signo, caught_info;
static void on_plain_signal(int sig) { caught_signo = sig; }
static void on_info_signal(int sig, siginfo_t *info, void *uc) {
    (void)uc;
    caught_signo = sig;
    caught_info = info && info->si_signo == sig;
}

static void do_signal(thread_state *th) {
    int sig = pick(th, 2) ? SIGINT : SIGTERM, how = pick(th, 4);
    pthread_mutex_lock(&signal_lock);
    struct sigaction sa, now;
    memset(&sa, 0, sizeof(sa));
    if (how == 0) {
        sa.sa_handler = SIG_IGN;
        EXPECT(sigaction(sig, &sa, NULL));
    } else if (how == 1) {
        if (signal(sig, on_plain_signal) == SIG_ERR)
            FAILED("signal", -1);
    } else {
        sa.sa_sigaction = on_info_signal;
        sa.sa_flags = SA_SIGINFO | (how == 3 ? SA_RESETHAND : 0);
        EXPECT(sigaction(sig, &sa, NULL));
    }
    EXPECT(sigaction(sig, NULL, &now));
    int reads_back = how == 0 ? now.sa_handler == SIG_IGN
                     : how == 1 ? now.sa_handler == on_plain_signal
                                : (now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_info_signal;
    if (!reads_back)
        FAILED("a disposition that does not read back as set", how);
    caught_signo = caught_info = 0;
    raise(sig);
    if (how == 0 ? caught_signo != 0 : caught_signo != sig || (how >= 2 && !caught_info))
        FAILED("a signal not handled as its disposition says", how);
    if (how == 3) { /* delivered once: SIG_DFL now, which must not stay */
        EXPECT(sigaction(sig, NULL, &now));
        if (now.sa_handler != SIG_DFL)
            FAILED("SA_RESETHAND left the handler in place", how);
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = SIG_IGN;
        EXPECT(sigaction(sig, &sa, NULL));
    }
    pthread_mutex_unlock(&signal_lock);
    th->signals++;
}

/* Everything of the old context is gone (the driver freed it). */
static void forget_context(thread_state *th) {
    th->nb = th->ns = th->ngraphs = 0;
}

static void reset_context(thread_state *th) {
    mock_cuda_disown_all();
    if (pick(th, 2)) {
        EXPECT(cuDevicePrimaryCtxReset_v2(0));
    } else {
        EXPECT(cuDevicePrimaryCtxRelease_v2(0)); /* the last retain: the context is reset */
        CUcontext again = NULL;
        EXPECT(cuDevicePrimaryCtxRetain(&again, 0));
        if (again != primary)
            FAILED("cuDevicePrimaryCtxRetain gave another handle", 0);
    }
    resets++;
}

static void *run_thread(void *arg) {
    thread_state *th = arg;
    EXPECT(cuCtxSetCurrent(primary));
    for (th->step = 0; th->step < steps; th->step++) {
        if (th->step % 500 == 499) { /* the threads meet; one may reset the context */
            for (int i = 0; i < th->ngraphs; i++)
                EXPECT(cuGraphDestroy(th->graphs[i]));
            th->ngraphs = 0;
            pthread_barrier_wait(&meet);
            if (th->id == 0 && pick(th, 3) == 0)
                reset_context(th);
            pthread_barrier_wait(&meet);
            if (th->seen_resets != resets) {
                th->seen_resets = resets;
                forget_context(th);
            }
        }
        int w = pick(th, 100);
        if (w < 26)
            do_alloc(th);
        else if (w < 46)
            do_launch(th);
        else if (w < 70)
            do_free(th);
        else if (w < 82)
            mock_cuda_complete_one(rnd(th));
        else if (w < 85 && th->ns)
            EXPECT(cuStreamSynchronize(th->s[pick(th, th->ns)]));
        else if (w < 86)
            ctx_sync(th);
        else if (w < 91)
            do_stream(th);
        else if (w < 95)
            do_capture(th);
        else if (w < 96 && pick(th, 8) == 0)
            do_fork(th);
        else if (w < 97 && pick(th, 2) == 0)
            do_context(th);
        else if (w < 98 && pick(th, 4) == 0)
            do_signal(th);
        else if (th->ngraphs && pick(th, 4) == 0)
            EXPECT(cuGraphDestroy(th->graphs[--th->ngraphs]));
    }
    for (int i = 0; i < th->ngraphs; i++)
        EXPECT(cuGraphDestroy(th->graphs[i]));
    while (th->nb) {
        buf b = th->b[--th->nb];
        mock_cuda_disown(b.p);
        EXPECT(cuMemFree_v2(b.p));
    }
    while (th->ns)
        EXPECT(cuStreamDestroy_v2(th->s[--th->ns]));
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: dropin_explore SEED [STEPS [THREADS]]\n");
        return 2;
    }
    seed = strtoull(argv[1], NULL, 10);
    steps = argc > 2 ? atoi(argv[2]) : 2000;
    nthreads = argc > 3 ? atoi(argv[3]) : 4;
    if (nthreads < 1 || nthreads > 64 || steps < 1) {
        fprintf(stderr, "dropin_explore: 1..64 threads, at least one step\n");
        return 2;
    }
    size_t f = 0;
    if (cuInit(0) != 0 || cuDevicePrimaryCtxRetain(&primary, 0) != 0 || cuCtxSetCurrent(primary) != 0 ||
        cuMemGetInfo_v2(&f, &first_total) != 0) {
        printf("FAIL seed=%llu: no context\n", seed);
        return 1;
    }
    pthread_barrier_init(&meet, NULL, (unsigned)nthreads);
    thread_state *th = calloc((size_t)nthreads, sizeof(*th));
    pthread_t *t = calloc((size_t)nthreads, sizeof(*t));
    for (int i = 0; i < nthreads; i++) {
        th[i].id = i;
        th[i].rng = (seed + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)(i + 1) * 0xD1B54A32D192ED03ull;
        if (!th[i].rng)
            th[i].rng = 1;
        pthread_create(&t[i], NULL, run_thread, &th[i]);
    }
    unsigned long long allocs = 0, frees = 0, ordered = 0, cross = 0, launches = 0, captures = 0, streams = 0,
                       forks = 0, contexts = 0, context_allocs = 0, context_driver = 0, signals = 0,
                       own_broken = 0, synced_captures = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(t[i], NULL);
        allocs += th[i].allocs;
        frees += th[i].frees;
        ordered += th[i].ordered_frees;
        cross += th[i].cross_frees;
        launches += th[i].launches;
        captures += th[i].captures;
        streams += th[i].streams_made;
        forks += th[i].forks;
        contexts += th[i].contexts;
        context_allocs += th[i].context_allocs;
        context_driver += th[i].context_driver_allocs;
        signals += th[i].signals;
        own_broken += th[i].own_broken;
        synced_captures += th[i].captures_synced;
    }
    mock_cuda_complete_all();
    char text[2048];
    unsigned long long v = mock_cuda_violations(text, sizeof(text));
    /* Breaks counted by the mock: the program's refused synchronizations,
     * and any other is a call the program did not make. */
    long long broken = (long long)mock_cuda_broken_captures() - (long long)own_breaks;
    if (v)
        printf("FAIL seed=%llu: %llu violations:\n%s", seed, v, text);
    if (broken)
        printf("FAIL seed=%llu: %lld captures broken by calls the program did not make\n", seed, broken);
    if (hung || child_failed)
        printf("FAIL seed=%llu: %llu forked children hung, %llu failed\n", seed, hung, child_failed);
    int bad = failures || v || broken || hung || child_failed;
    printf("%s explore seed=%llu threads=%d steps=%d: %llu allocations, %llu frees (%llu stream-ordered, %llu on "
           "another stream), %llu launches, %llu captures, %llu streams, %llu context resets, %llu forks, "
           "%llu second contexts (%llu of their %llu allocations reached the driver), %llu signals, "
           "%d stale stream uses, %llu violations, %llu cuCtxSynchronize refused beside a capture (%llu "
           "captures ended broken by them)\n",
           bad ? "FAIL" : "OK", seed, nthreads, steps, allocs, frees, ordered, cross, launches, captures, streams,
           resets, forks, contexts, context_driver, context_allocs, signals, mock_cuda_stale_stream_uses(), v,
           own_broken, synced_captures);
    free(th);
    free(t);
    return bad ? 1 : 0;
}
