/*
 * writer.c — appending events to a trace file while a program runs.
 *
 * The one idea: a line is formatted on the caller's stack, then copied into
 * one buffer under a lock, and the buffer's committed length is published
 * only after the copy. A flush writes [0, committed) with write(2). So a
 * flush from a signal handler, which takes no lock, never writes half a
 * line, and the file always ends with whole lines, whether the program
 * ends by exit, by returning from main, or by SIGINT/SIGTERM (whose
 * handler, in carve-run's interposer, calls carve_trace_writer_flush_now).
 * Whoever writes the buffer out holds `busy` meanwhile, and an ordinary
 * flush blocks SIGINT and SIGTERM on its thread while it does, so the
 * handler never writes bytes a flush it interrupted (or one running on
 * another thread) is writing too; it waits for that flush instead.
 * A ".gz" path goes through a `gzip -c` child that ignores SIGINT and
 * SIGTERM, so that it can finish the stream after the program is told to
 * stop.
 *
 * The writer keeps the set of ids it wrote an allocation for and not yet a
 * free (idmap.h), so that what it writes always loads clean: the free of an
 * id it never saw allocated (memory from before the recording, or from a
 * path that is not recorded) is left out, and an allocation of an id that is
 * still live (its memory went back without a free: an arena destroyed with
 * buffers in it, a context reset) gets the free it missed written first.
 * Both are counted in a comment line at the close.
 *
 * Each event's thread is written too, as a small number given in order of
 * first appearance (a thread-local that remembers, for the writer it was
 * given by, the number): a "#thread,<k>" tag line before an event whose
 * thread is not the last event's. The first thread is 0 and needs no tag,
 * so a trace of one thread reads as before, and to readers that do not
 * know the tag it is a comment.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "carve_trace.h"
#include "engine/error.h"
#include "trace/idmap.h"

#define BUF_BYTES ((size_t)256 << 10)

struct carve_trace_writer {
    pthread_mutex_t lock;
    int fd;
    pid_t gzip;       /* 0: plain file */
    int failed;       /* a write failed: drop further events */
    size_t len;       /* committed bytes in buf (atomic) */
    int busy;         /* someone is writing buf out (atomic) */
    id_map live;      /* ids allocated and not freed (under lock); no table: not tracked */
    uint64_t dropped_frees, implied_frees;
    uint64_t serial;      /* this writer among all opened (thread numbers are per writer) */
    uint32_t nthreads;    /* numbers given (under lock) */
    uint32_t last_thread; /* of the last event written (under lock) */
    uint64_t thread_id[CARVE_TRACE_MAX_THREADS]; /* the thread given each number (my_thread.id) */
    char buf[BUF_BYTES];
};

static uint64_t writers_opened, threads_seen;
/* The calling thread: an id of its own (never reused in the process), and
 * its number in the writer of that serial, the one it wrote to last. */
static __thread struct {
    uint64_t id;
    uint64_t serial;
    uint32_t k;
} my_thread;

/* Write all of [p, p+n) to fd; 0 or -1. Async-signal-safe. */
static int write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Take or give back the right to write buf out. Async-signal-safe. */
static void take_busy(carve_trace_writer *w) {
    while (__atomic_exchange_n(&w->busy, 1, __ATOMIC_ACQUIRE)) {
        struct timespec pause = {0, 100000};
        nanosleep(&pause, NULL);
    }
}
static void give_busy(carve_trace_writer *w) { __atomic_store_n(&w->busy, 0, __ATOMIC_RELEASE); }

/* Lock held. */
static void drain(carve_trace_writer *w) {
    sigset_t stop, old;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, &old);
    take_busy(w);
    size_t n = __atomic_load_n(&w->len, __ATOMIC_ACQUIRE);
    if (n && !w->failed && write_all(w->fd, w->buf, n) != 0)
        w->failed = 1;
    __atomic_store_n(&w->len, 0, __ATOMIC_RELEASE);
    give_busy(w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Lock held. Copy line into the buffer (writing it out first when full). */
static void put(carve_trace_writer *w, const char *line, size_t n) {
    if (w->len + n > BUF_BYTES)
        drain(w);
    if (!w->failed) {
        memcpy(w->buf + w->len, line, n);
        __atomic_store_n(&w->len, w->len + n, __ATOMIC_RELEASE);
    }
}

/* Lock held. Before the line of an event of the calling thread: its tag
 * when the last event was another thread's. A thread past the last number
 * shares it. */
static void put_thread(carve_trace_writer *w) {
    if (my_thread.serial != w->serial) {
        /* Another writer since this thread's last event here: look its
         * number up (one thread writing to two writers in turn keeps its
         * number in each). */
        if (!my_thread.id)
            my_thread.id = __atomic_add_fetch(&threads_seen, 1, __ATOMIC_RELAXED);
        uint32_t k = 0;
        while (k < w->nthreads && w->thread_id[k] != my_thread.id)
            k++;
        if (k == w->nthreads) {
            if (k < CARVE_TRACE_MAX_THREADS)
                w->thread_id[w->nthreads++] = my_thread.id;
            else
                k = CARVE_TRACE_MAX_THREADS - 1;
        }
        my_thread.serial = w->serial;
        my_thread.k = k;
    }
    if (my_thread.k != w->last_thread) {
        char tag[32];
        int k = snprintf(tag, sizeof(tag), "#thread,%u\n", my_thread.k);
        put(w, tag, (size_t)k);
        w->last_thread = my_thread.k;
    }
}

static carve_status done(carve_trace_writer *w) {
    int failed = w->failed;
    pthread_mutex_unlock(&w->lock);
    return failed ? carve_fail(NULL, CARVE_ERR_BACKEND, "carve_trace_writer: writing the trace failed") : CARVE_OK;
}

static carve_status append(carve_trace_writer *w, const char *line, size_t n) {
    if (!w)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_trace_writer: NULL writer");
    pthread_mutex_lock(&w->lock);
    put(w, line, n);
    return done(w);
}

carve_status carve_trace_writer_open(const char *path, const char *title, carve_trace_writer **out) {
    if (out)
        *out = NULL;
    if (!path || !out)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_trace_writer_open: NULL argument");
    carve_trace_writer *w = calloc(1, sizeof(*w));
    if (!w)
        return carve_fail_host(NULL, CARVE_ERR_OOM, 1, "carve_trace_writer_open: host memory exhausted");
    pthread_mutex_init(&w->lock, NULL);
    w->serial = __atomic_add_fetch(&writers_opened, 1, __ATOMIC_RELAXED);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        carve_status st = carve_fail(NULL, CARVE_ERR_BACKEND, "cannot create the trace %s: %s", path, strerror(errno));
        free(w);
        return st;
    }
    size_t n = strlen(path);
    if (n > 3 && strcmp(path + n - 3, ".gz") == 0) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) != 0) {
            close(fd);
            free(w);
            return carve_fail(NULL, CARVE_ERR_BACKEND, "cannot create a pipe for gzip: %s", strerror(errno));
        }
        pid_t pid = fork();
        if (pid == 0) { /* gzip -c < pipe > file, deaf to the signals that stop the program */
            signal(SIGINT, SIG_IGN);
            signal(SIGTERM, SIG_IGN);
            dup2(p[0], STDIN_FILENO);
            dup2(fd, STDOUT_FILENO);
            execlp("gzip", "gzip", "-c", (char *)NULL);
            _exit(127);
        }
        close(p[0]);
        close(fd);
        if (pid < 0) {
            close(p[1]);
            free(w);
            return carve_fail(NULL, CARVE_ERR_BACKEND, "cannot start gzip for %s: %s", path, strerror(errno));
        }
        w->gzip = pid;
        fd = p[1];
    }
    w->fd = fd;
    if (id_map_init(&w->live, 1024) != 0)
        w->live.e = NULL; /* write every event as it comes */
    *out = w;
    char line[512];
    int k = snprintf(line, sizeof(line), "# carve trace%s%.400s\n", title ? ": " : "", title ? title : "");
    append(w, line, (size_t)k < sizeof(line) ? (size_t)k : sizeof(line) - 1);
    return CARVE_OK;
}

static int free_line(char *line, size_t len, uint64_t id, uint64_t t_ns) {
    return snprintf(line, len, "f,0x%llx,@%llu\n", (unsigned long long)id, (unsigned long long)t_ns);
}

carve_status carve_trace_writer_alloc(carve_trace_writer *w, uint64_t id, uint64_t size, uint32_t stream,
                                      uint64_t t_ns) {
    if (stream >= CARVE_TRACE_MAX_STREAMS)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_trace_writer_alloc: stream %u out of range", stream);
    if (!w)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_trace_writer: NULL writer");
    char line[96];
    int k = snprintf(line, sizeof(line), "a,0x%llx,%llu,%u,@%llu\n", (unsigned long long)id,
                     (unsigned long long)size, stream, (unsigned long long)t_ns);
    pthread_mutex_lock(&w->lock);
    put_thread(w);
    if (w->live.e) {
        id_entry *e = id_map_find(&w->live, id);
        if (e->val1) { /* still live: its memory went back without a free */
            char fl[64];
            put(w, fl, (size_t)free_line(fl, sizeof(fl), id, t_ns));
            w->implied_frees++;
        } else {
            e->id = id;
            e->val1 = 1;
            if (++w->live.count * 2 > w->live.mask + 1 && id_map_grow(&w->live) != 0) {
                free(w->live.e); /* cannot follow the ids any more: write everything */
                w->live.e = NULL;
            }
        }
    }
    put(w, line, (size_t)k);
    return done(w);
}

carve_status carve_trace_writer_free(carve_trace_writer *w, uint64_t id, uint64_t t_ns) {
    if (!w)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_trace_writer: NULL writer");
    char line[64];
    int k = free_line(line, sizeof(line), id, t_ns);
    pthread_mutex_lock(&w->lock);
    if (w->live.e) {
        id_entry *e = id_map_find(&w->live, id);
        if (!e->val1) { /* never allocated in this trace: a replay could only skip it */
            w->dropped_frees++;
            return done(w);
        }
        id_map_remove(&w->live, e);
    }
    put_thread(w);
    put(w, line, (size_t)k);
    return done(w);
}

carve_status carve_trace_writer_comment(carve_trace_writer *w, const char *text) {
    char line[512];
    size_t k = 0;
    line[k++] = '#';
    line[k++] = ' ';
    for (const char *t = text ? text : ""; *t && k < sizeof(line) - 2; t++)
        line[k++] = *t == '\n' || *t == '\r' ? ' ' : *t;
    line[k++] = '\n';
    return append(w, line, k);
}

carve_status carve_trace_writer_flush(carve_trace_writer *w) {
    if (!w)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_trace_writer_flush: NULL writer");
    pthread_mutex_lock(&w->lock);
    drain(w);
    int failed = w->failed;
    pthread_mutex_unlock(&w->lock);
    return failed ? carve_fail(NULL, CARVE_ERR_BACKEND, "carve_trace_writer: writing the trace failed") : CARVE_OK;
}

void carve_trace_writer_flush_now(carve_trace_writer *w) {
    if (!w || w->failed)
        return;
    take_busy(w);
    size_t n = __atomic_exchange_n(&w->len, 0, __ATOMIC_ACQ_REL);
    if (n)
        (void)write_all(w->fd, w->buf, n);
    give_busy(w);
}

void carve_trace_writer_finish_now(carve_trace_writer *w) {
    if (!w)
        return;
    carve_trace_writer_flush_now(w);
    close(w->fd);
    if (w->gzip > 0) {
        int status;
        while (waitpid(w->gzip, &status, 0) < 0 && errno == EINTR) {
        }
    }
}

carve_status carve_trace_writer_close(carve_trace_writer *w) {
    if (!w)
        return CARVE_OK;
    pthread_mutex_lock(&w->lock);
    if (w->dropped_frees || w->implied_frees) {
        char line[256];
        int k = snprintf(line, sizeof(line),
                         "# carve trace writer: %llu frees of ids never allocated in this trace left out; "
                         "%llu frees written before an allocation of an id still live\n",
                         (unsigned long long)w->dropped_frees, (unsigned long long)w->implied_frees);
        put(w, line, (size_t)k);
    }
    drain(w);
    int failed = w->failed;
    if (close(w->fd) != 0)
        failed = 1;
    if (w->gzip > 0) {
        int status = 0;
        while (waitpid(w->gzip, &status, 0) < 0 && errno == EINTR) {
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            failed = 1;
    }
    pthread_mutex_unlock(&w->lock);
    pthread_mutex_destroy(&w->lock);
    free(w->live.e);
    free(w);
    return failed ? carve_fail(NULL, CARVE_ERR_BACKEND, "carve_trace_writer_close: the trace could not be written whole")
                  : CARVE_OK;
}
