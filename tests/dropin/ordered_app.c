/*
 * ordered_app.c — the sequences that broke ordered reuse (carve-run's
 * quarantine handing a buffer back once a legacy-stream event was recorded
 * after its free, lib/preload/quarantine.c) when it was first written, each
 * checked by the mock device's oracle.
 *
 * The one idea: every case frees a buffer while a kernel on a blocking
 * stream still uses it, takes it back by ordered reuse (allocating the size
 * until the address returns), and then reaches work that does not wait for
 * the legacy stream in a way the interposer had missed:
 *   race-mark  two threads make contexts at once: the second cuCtxCreate
 *              must not return before the first one's wait for the barrier
 *              is over (run with MOCK_SYNC_DELAY_US);
 *   ctx-v1     a context made through the driver's first cuCtxCreate, found
 *              with dlsym as ctypes does; with "graph", the new work is a
 *              graph launched there (the oracle checks graph launches too);
 *   nb-dying   a non-blocking stream made while another thread releases its
 *              own retain of the primary context, before carve served the
 *              context (MOCK_CONTEXT_DELAY_US): the stream must still count;
 *   fork       a child forked while another thread waits inside carve calls
 *              cuCtxCreate: the driver's answer (not initialized), at once;
 *   v1-stream  the kernel's blocking stream destroyed through the driver's
 *              first cuStreamDestroy (dlsym): its tail must still be waited for;
 *   v1-reset   the primary context reset through the first
 *              cuDevicePrimaryCtxReset: nothing handed out of freed memory;
 *   v1-capture another thread captures a blocking stream begun through the
 *              first cuStreamBeginCapture (ptsz: its per-thread stream,
 *              through cuStreamBeginCapture_ptsz): no epoch goes back during it
 *              (neither an event nor a device synchronization can be made);
 *   refused-nb a non-blocking stream made while another thread's
 *              cuCtxDestroy of the context is refused (MOCK_CONTEXT_DELAY_US):
 *              the stream must still count.
 * Prints "OK ordered-app CASE ..." with the oracle's violations (0) or FAIL.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mock_api.h"

CUresult cuDevicePrimaryCtxRelease_v2(int dev);

static int failures;
#define MIB ((size_t)1 << 20)

/* Allocations of MIB, each freed again unless it is p, until p comes back
 * (at most tries); p when it did, else 0 (nothing kept). */
static CUdeviceptr take_back(CUdeviceptr p, int tries) {
    CUdeviceptr q = 0;
    for (int i = 0; i < tries && q != p; i++) {
        CU(cuMemAlloc_v2(&q, MIB));
        if (q != p)
            CU(cuMemFree_v2(q));
    }
    return q == p ? p : 0;
}

/* A buffer used by a queued kernel on s, freed, and allocated again until
 * the address comes back (0 when it did not). */
static CUdeviceptr reused_while_queued(CUstream s) {
    CUdeviceptr p = 0, q = 0;
    CU(cuMemAlloc_v2(&p, MIB));
    CHECK(!mock_cuda_own(p, MIB, NULL, 0));
    CU(mock_cuda_launch(s, p, MIB)); /* stays queued: nothing completes it */
    mock_cuda_disown(p);
    CU(cuMemFree_v2(p));
    q = take_back(p, 1000);
    if (q != p)
        return 0;
    CHECK(!mock_cuda_own(q, MIB, NULL, 0));
    return q;
}

static CUcontext start(void) {
    CUcontext ctx;
    CU(cuInit(0));
    CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU(cuCtxSetCurrent(ctx));
    return ctx;
}

static void *make_context(void *arg) {
    (void)arg;
    CUcontext c = NULL;
    CU(cuCtxCreate_v2(&c, 0, 0));
    return NULL;
}

static void case_race_mark(void) {
    start();
    CUstream s1;
    CU(cuStreamCreate(&s1, 0)); /* blocking */
    CUdeviceptr q = reused_while_queued(s1);
    pthread_t t;
    pthread_create(&t, NULL, make_context, NULL);
    usleep(100000); /* the other thread is inside its cuCtxCreate, waiting */
    CUcontext c2 = NULL;
    CU(cuCtxCreate_v2(&c2, 0, 0));
    size_t pending = mock_cuda_pending();
    if (q)
        CU(mock_cuda_launch(NULL, q, MIB)); /* c2's legacy stream */
    pthread_join(t, NULL);
    char text[512] = "";
    unsigned long long bad = mock_cuda_violations(text, sizeof(text));
    CHECK(q && bad == 0);
    printf("OK ordered-app race-mark reused=%d, kernels queued when the second cuCtxCreate returned %zu; "
           "%llu violations %s\n", q != 0, pending, bad, text);
}

static void case_ctx_v1(int graph) {
    start();
    CUstream s1;
    CU(cuStreamCreate(&s1, 0));
    CUdeviceptr q = reused_while_queued(s1);
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    CUresult (*create)(CUcontext *, unsigned, int) = NULL;
    if (h)
        *(void **)&create = dlsym(h, "cuCtxCreate"); /* as ctypes' CDLL("libcuda.so.1").cuCtxCreate */
    CHECK(create != NULL);
    CUcontext c2 = NULL;
    if (create)
        CU(create(&c2, 0, 0));
    size_t pending = mock_cuda_pending();
    if (q && graph) {
        void *g = NULL, *x = NULL;
        CU(cuStreamBeginCapture_v2(CU_STREAM_PER_THREAD, 0));
        CU(mock_cuda_launch(CU_STREAM_PER_THREAD, q, MIB));
        CU(cuStreamEndCapture(CU_STREAM_PER_THREAD, &g));
        CU(cuGraphInstantiateWithFlags(&x, g, 0));
        CU(cuGraphLaunch(x, NULL));
    } else if (q) {
        CU(mock_cuda_launch(NULL, q, MIB));
    }
    char text[512] = "";
    unsigned long long bad = mock_cuda_violations(text, sizeof(text));
    CHECK(q && bad == 0);
    printf("OK ordered-app ctx-v1%s reused=%d, kernels queued when cuCtxCreate returned %zu; %llu violations %s\n",
           graph ? " graph" : "", q != 0, pending, bad, text);
}

static void *release_own_retain(void *arg) {
    (void)arg;
    CUcontext c;
    CU(cuDevicePrimaryCtxRetain(&c, 0));
    CU(cuDevicePrimaryCtxRelease_v2(0)); /* its own retain: the context stays */
    return NULL;
}

static void case_nb_dying(void) {
    start();
    pthread_t t;
    pthread_create(&t, NULL, release_own_retain, NULL);
    usleep(450000); /* the other thread is inside its release */
    CUstream nb;
    CU(cuStreamCreate(&nb, 1 /* non-blocking */));
    pthread_join(t, NULL);
    CUdeviceptr q = reused_while_queued(nb);
    char text[512] = "";
    unsigned long long bad = mock_cuda_violations(text, sizeof(text));
    CHECK(bad == 0);
    printf("OK ordered-app nb-dying reused=%d; %llu violations %s\n", q != 0, bad, text);
}

static void *make_nb(void *arg) {
    CU(cuCtxSetCurrent((CUcontext)arg));
    CUstream nb;
    CU(cuStreamCreate(&nb, 1)); /* the first non-blocking stream: waits for the barrier */
    return NULL;
}

static void case_fork(void) {
    CUcontext ctx = start();
    CUstream s1;
    CU(cuStreamCreate(&s1, 0));
    (void)reused_while_queued(s1); /* the context has a barrier now */
    pthread_t t;
    pthread_create(&t, NULL, make_nb, ctx);
    usleep(200000);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        CUcontext c;
        CUresult r = cuCtxCreate_v2(&c, 0, 0);
        _exit(r == 3 /* CUDA_ERROR_NOT_INITIALIZED */ ? 0 : 1);
    }
    int status = 0, waited = 0;
    while (waited < 100 && waitpid(pid, &status, WNOHANG) == 0) {
        usleep(100000);
        waited++;
    }
    if (waited == 100) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    pthread_join(t, NULL);
    int answered = waited < 100 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    CHECK(answered);
    printf("OK ordered-app fork the child's cuCtxCreate answered not initialized: %d (%s)\n", answered,
           waited < 100 ? "at once" : "hung: killed after 10 s");
}

static void *driver_fn(const char *name) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    return h ? dlsym(h, name) : NULL; /* as ctypes' CDLL("libcuda.so.1").<name> */
}

static void report(const char *name, int reused) {
    char text[512] = "";
    unsigned long long bad = mock_cuda_violations(text, sizeof(text));
    CHECK(bad == 0);
    printf("OK ordered-app %s reused=%d; %llu violations %s\n", name, reused, bad, text);
}

static void case_v1_stream(void) {
    start();
    CUstream s1;
    CU(cuStreamCreate(&s1, 0));
    CUdeviceptr p = 0, q = 0;
    CU(cuMemAlloc_v2(&p, MIB));
    CHECK(!mock_cuda_own(p, MIB, NULL, 0));
    CU(mock_cuda_launch(s1, p, MIB)); /* stays queued */
    mock_cuda_disown(p);
    CUresult (*destroy)(CUstream) = NULL;
    *(void **)&destroy = driver_fn("cuStreamDestroy");
    CHECK(destroy != NULL);
    if (destroy)
        CU(destroy(s1)); /* its kernel runs on */
    CU(cuMemFree_v2(p));
    q = take_back(p, 300);
    if (q == p)
        CHECK(!mock_cuda_own(q, MIB, NULL, 0));
    report("v1-stream", q == p);
}

static void case_v1_reset(void) {
    start();
    CUdeviceptr p = 0, q = 0;
    CU(cuMemAlloc_v2(&p, MIB));
    CU(cuMemFree_v2(p));
    CUresult (*reset)(int) = NULL;
    *(void **)&reset = driver_fn("cuDevicePrimaryCtxReset");
    CHECK(reset != NULL);
    if (reset)
        CU(reset(0)); /* the driver frees the context's memory */
    CUcontext ctx;
    CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU(cuCtxSetCurrent(ctx));
    CU(cuMemAlloc_v2(&q, MIB));
    CHECK(!mock_cuda_own(q, MIB, NULL, 0));
    report("v1-reset", q == p);
}

static CUcontext cap_ctx;
static volatile int cap_stage;
static int cap_ptsz; /* the first cuStreamBeginCapture_ptsz, on the thread's per-thread stream */

static void *capture_v1(void *arg) {
    (void)arg;
    CU(cuCtxSetCurrent(cap_ctx));
    CUstream s2 = NULL;
    if (!cap_ptsz)
        CU(cuStreamCreate(&s2, 0)); /* blocking */
    CUresult (*begin)(CUstream) = NULL;
    *(void **)&begin = driver_fn(cap_ptsz ? "cuStreamBeginCapture_ptsz" : "cuStreamBeginCapture");
    CHECK(begin != NULL);
    if (begin)
        CU(begin(s2));
    cap_stage = 1;
    while (cap_stage != 2)
        usleep(1000);
    void *g = NULL;
    (void)(cap_ptsz ? cuStreamEndCapture_ptsz(s2, &g) : cuStreamEndCapture(s2, &g));
    return NULL;
}

static void case_v1_capture(int ptsz) {
    cap_ptsz = ptsz;
    cap_ctx = start();
    CUstream s1;
    CU(cuStreamCreate(&s1, 0));
    CUdeviceptr p = 0, q = 0;
    CU(cuMemAlloc_v2(&p, MIB));
    CHECK(!mock_cuda_own(p, MIB, NULL, 0));
    CU(mock_cuda_launch(s1, p, MIB)); /* stays queued */
    mock_cuda_disown(p);
    pthread_t t;
    pthread_create(&t, NULL, capture_v1, NULL);
    while (cap_stage != 1)
        usleep(1000);
    CU(cuMemFree_v2(p));
    q = take_back(p, 300);
    if (q == p)
        CHECK(!mock_cuda_own(q, MIB, NULL, 0));
    cap_stage = 2;
    pthread_join(t, NULL);
    int broken = mock_cuda_broken_captures(); /* carve recorded on the legacy stream during it */
    CHECK(broken == 0);
    printf("ordered-app v1-capture: %d broken captures\n", broken);
    report(ptsz ? "v1-capture ptsz" : "v1-capture", q == p);
}

static CUcontext refused_ctx;

static void *destroy_refused(void *arg) {
    (void)arg;
    (void)cuCtxDestroy_v2(refused_ctx); /* slowed down, then refused by the mock */
    return NULL;
}

static void case_refused_nb(void) {
    CU(cuInit(0));
    CU(cuCtxCreate_v2(&refused_ctx, 0, 0));
    CUdeviceptr p = 0;
    CU(cuMemAlloc_v2(&p, MIB)); /* carve serves the context */
    CU(cuMemFree_v2(p));
    mock_cuda_fail_destroys(1);
    pthread_t t;
    pthread_create(&t, NULL, destroy_refused, NULL);
    usleep(150000); /* the other thread is inside its cuCtxDestroy */
    CUstream nb;
    CU(cuStreamCreate(&nb, 1 /* non-blocking */));
    pthread_join(t, NULL);
    CUdeviceptr q = reused_while_queued(nb);
    report("refused-nb", q != 0);
}

int main(int argc, char **argv) {
    const char *m = argc > 1 ? argv[1] : "";
    if (!strcmp(m, "race-mark"))
        case_race_mark();
    else if (!strcmp(m, "ctx-v1"))
        case_ctx_v1(argc > 2 && !strcmp(argv[2], "graph"));
    else if (!strcmp(m, "nb-dying"))
        case_nb_dying();
    else if (!strcmp(m, "fork"))
        case_fork();
    else if (!strcmp(m, "v1-stream"))
        case_v1_stream();
    else if (!strcmp(m, "v1-reset"))
        case_v1_reset();
    else if (!strcmp(m, "v1-capture"))
        case_v1_capture(argc > 2 && !strcmp(argv[2], "ptsz"));
    else if (!strcmp(m, "refused-nb"))
        case_refused_nb();
    else {
        fprintf(stderr, "usage: dropin_ordered_app race-mark|ctx-v1 [graph]|nb-dying|fork|v1-stream|v1-reset|v1-capture [ptsz]|"
                        "refused-nb\n");
        return 2;
    }
    if (failures)
        printf("FAIL ordered-app %s: %d checks failed\n", m, failures);
    return failures ? 1 : 0;
}
