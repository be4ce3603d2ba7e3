/*
 * signals.c — SIGINT and SIGTERM while a trace is written: the interposer's
 * handler stands in front of the program's disposition, so that a signal
 * that ends the program first finishes the trace, and everything else stays
 * the program's.
 *
 * The one idea: once the handler is installed, the program's own sigaction,
 * signal, bsd_signal and sysv_signal calls for these two signals come here
 * (this library exports them): the disposition the program asks for is
 * recorded and answered back to it (as the old action, and to a later
 * query), and what is installed for real is carve's handler with the
 * program's flags and mask, or SIG_IGN when the program ignores the signal
 * (an ignored signal stays ignored, in children too). The handler then does
 * what the recorded disposition says: the program's handler (with the
 * siginfo and context an SA_SIGINFO handler asks for, once for
 * SA_RESETHAND), nothing for SIG_IGN, and for SIG_DFL the trace is finished
 * with async-signal-safe calls before the default action follows. So a
 * program that sets SIGTERM back to SIG_DFL after the handler was installed
 * still leaves a whole trace. Not seen: a disposition set with a raw
 * rt_sigaction system call (the Go runtime's) or with sigset.
 *
 * The recorded dispositions are read by the handler and written by the
 * program's calls on any thread: under a spin lock that writers take with
 * both signals blocked (a handler never interrupts a holder on its own
 * thread, and runs with both blocked itself).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "preload/exports.h"
#include "preload/preload.h"

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef void (*handler_fn)(int);

CARVE_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *oldact);
CARVE_EXPORT handler_fn signal(int sig, handler_fn handler);
CARVE_EXPORT handler_fn bsd_signal(int sig, handler_fn handler);
CARVE_EXPORT handler_fn sysv_signal(int sig, handler_fn handler);

static sigaction_fn real_sigaction;
static struct sigaction program[2]; /* what the program asked for: SIGINT, SIGTERM */
static int watching[2];             /* atomic: carve's handler stands in front (program[] is the truth) */
static int plock;                   /* guards program[] */
static pthread_mutex_t writers = PTHREAD_MUTEX_INITIALIZER;
static void (*finish)(void);        /* finishes the trace, async-signal-safe (atomic) */

static int which(int sig) { return sig == SIGINT ? 0 : sig == SIGTERM ? 1 : -1; }

CARVE_NOT_SANITIZED static sigaction_fn find_real(void) {
    sigaction_fn f = __atomic_load_n(&real_sigaction, __ATOMIC_ACQUIRE);
    if (!f) {
        CARVE_SET_FN(f, carve_real_dlsym(RTLD_NEXT, "sigaction"));
        __atomic_store_n(&real_sigaction, f, __ATOMIC_RELEASE);
    }
    return f;
}

static void take(void) {
    while (__atomic_exchange_n(&plock, 1, __ATOMIC_ACQUIRE)) {
    }
}
static void give(void) { __atomic_store_n(&plock, 0, __ATOMIC_RELEASE); }

/* SIG_DFL and SIG_IGN are told by the handler's value whatever the flags,
 * as the kernel does (sa_handler and sa_sigaction share their storage). */
static int ignores(const struct sigaction *sa) { return sa->sa_handler == SIG_IGN; }

/* The signal arrived: what the program chose happens. */
static void on_signal(int sig, siginfo_t *info, void *uc) {
    int k = which(sig);
    take();
    struct sigaction sa = program[k];
    if ((sa.sa_flags & SA_RESETHAND) && sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN)
        program[k].sa_handler = SIG_DFL; /* one delivery: the kernel resets the handler, not the flags */
    give();
    if (sa.sa_handler == SIG_IGN)
        return;
    if (sa.sa_handler != SIG_DFL) {
        if (sa.sa_flags & SA_SIGINFO)
            sa.sa_sigaction(sig, info, uc);
        else
            sa.sa_handler(sig);
        return;
    }
    void (*done)(void) = __atomic_load_n(&finish, __ATOMIC_ACQUIRE);
    if (done)
        done();
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    find_real()(sig, &dfl, NULL);
    raise(sig); /* delivered with the default action once the handler returns */
}

/* Install for real what stands for the program's disposition of sig
 * (writers held, both signals blocked). */
static int install(int sig, const struct sigaction *prog) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    if (ignores(prog)) {
        sa.sa_handler = SIG_IGN;
    } else {
        sa.sa_sigaction = on_signal;
        sa.sa_flags = SA_SIGINFO | (prog->sa_flags & (SA_RESTART | SA_ONSTACK));
        sa.sa_mask = prog->sa_mask;
        sigaddset(&sa.sa_mask, SIGINT); /* one handler at a time: the trace is finished once */
        sigaddset(&sa.sa_mask, SIGTERM);
    }
    return find_real()(sig, &sa, NULL);
}

static void block_both(sigset_t *old) {
    sigset_t both;
    sigemptyset(&both);
    sigaddset(&both, SIGINT);
    sigaddset(&both, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &both, old);
}

void carve_signals_watch(void (*finish_trace)(void)) {
    if (!find_real())
        return;
    __atomic_store_n(&finish, finish_trace, __ATOMIC_RELEASE);
    sigset_t old;
    block_both(&old);
    pthread_mutex_lock(&writers);
    for (int k = 0; k < 2; k++) {
        int sig = k ? SIGTERM : SIGINT;
        struct sigaction now;
        if (__atomic_load_n(&watching[k], __ATOMIC_ACQUIRE) || find_real()(sig, NULL, &now) != 0)
            continue;
        take();
        program[k] = now;
        give();
        if (ignores(&now) || install(sig, &now) == 0) /* an ignored signal: nothing to stand in front of */
            __atomic_store_n(&watching[k], 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&writers);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* ---- the program's calls -------------------------------------------------- */

/* The program's sigaction of a watched signal (k: its index). */
static int program_sigaction(int k, int sig, const struct sigaction *act, struct sigaction *oldact) {
    sigset_t old;
    block_both(&old);
    pthread_mutex_lock(&writers);
    int r = 0;
    take();
    struct sigaction was = program[k];
    give();
    if (act) {
        r = install(sig, act);
        if (r == 0) {
            take();
            program[k] = *act;
            give();
        }
    }
    pthread_mutex_unlock(&writers);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r == 0 && oldact)
        *oldact = was;
    return r;
}

CARVE_NOT_SANITIZED int sigaction(int sig, const struct sigaction *act, struct sigaction *oldact) {
    int k = which(sig);
    if (k >= 0 && __atomic_load_n(&watching[k], __ATOMIC_ACQUIRE))
        return program_sigaction(k, sig, act, oldact);
    sigaction_fn f = find_real();
    return f ? f(sig, act, oldact) : -1;
}

/* signal() and its BSD and System V forms, as glibc defines them, through
 * sigaction above. */
static handler_fn set_handler(int k, int sig, handler_fn handler, int flags) {
    struct sigaction sa, old;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = handler;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    if (!(flags & SA_NODEFER))
        sigaddset(&sa.sa_mask, sig);
    if (program_sigaction(k, sig, &sa, &old) != 0)
        return SIG_ERR;
    return old.sa_handler; /* shares its storage with sa_sigaction, as glibc's signal() answers */
}

/* name (the real one when sig is not watched) with these flags. */
CARVE_NOT_SANITIZED static handler_fn set_by(const char *name, int sig, handler_fn handler, int flags) {
    int k = which(sig);
    if (k >= 0 && __atomic_load_n(&watching[k], __ATOMIC_ACQUIRE))
        return set_handler(k, sig, handler, flags);
    handler_fn (*f)(int, handler_fn);
    CARVE_SET_FN(f, carve_real_dlsym(RTLD_NEXT, name));
    return f ? f(sig, handler) : SIG_ERR;
}

CARVE_NOT_SANITIZED handler_fn signal(int sig, handler_fn handler) { return set_by("signal", sig, handler, SA_RESTART); }
CARVE_NOT_SANITIZED handler_fn bsd_signal(int sig, handler_fn handler) {
    return set_by("bsd_signal", sig, handler, SA_RESTART);
}
CARVE_NOT_SANITIZED handler_fn sysv_signal(int sig, handler_fn handler) {
    return set_by("sysv_signal", sig, handler, SA_RESETHAND | SA_NODEFER);
}
