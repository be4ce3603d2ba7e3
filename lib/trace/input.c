/*
 * input.c — a trace from a path: plain or gzip-compressed, a file or the
 * standard input.
 *
 * The one idea: a gzip stream starts with the byte 0x1f, which no text trace
 * starts with, so one byte of lookahead decides. Compressed input is read
 * through `gzip -dc` in a child process (no compression library needed). A
 * regular file is named to gzip, which reads it afresh; anything else (the
 * standard input, a pipe such as <(cat t.gz) or /dev/stdin, a FIFO) cannot be
 * read twice, so a second child feeds gzip what this process has already
 * buffered, and the rest.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "carve_trace.h"

typedef struct input {
    FILE *f;
    pid_t gzip, feeder;  /* child processes when decompressing */
} input;

static int open_input(const char *path, input *in, char *err, size_t errlen) {
    memset(in, 0, sizeof(*in));
    int is_stdin = !strcmp(path, "-");
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    errno = 0;
    int c = getc(f);
    if (c == EOF && ferror(f)) { /* a directory, say */
        snprintf(err, errlen, "read error: %s", errno ? strerror(errno) : "I/O error");
        if (!is_stdin)
            fclose(f);
        return -1;
    }
    if (c == EOF || c != 0x1f) {
        if (c != EOF)
            ungetc(c, f);
        else
            clearerr(f);
        in->f = f;
        return 0;
    }
    ungetc(c, f);
    /* Only a regular file can be opened again by gzip. */
    struct stat sb;
    int fed = is_stdin || fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode);
    int out[2], feed[2] = {-1, -1};
    if (pipe(out) != 0) {
        snprintf(err, errlen, "cannot create a pipe: %s", strerror(errno));
        if (!is_stdin)
            fclose(f);
        return -1;
    }
    if (fed && pipe(feed) != 0) {
        snprintf(err, errlen, "cannot create a pipe: %s", strerror(errno));
        close(out[0]);
        close(out[1]);
        if (!is_stdin)
            fclose(f);
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    in->gzip = fork();
    if (in->gzip < 0) {
        snprintf(err, errlen, "cannot start gzip: %s", strerror(errno));
        close(out[0]);
        close(out[1]);
        if (fed) {
            close(feed[0]);
            close(feed[1]);
        }
        if (!is_stdin)
            fclose(f);
        return -1;
    }
    if (in->gzip == 0) {
        dup2(out[1], STDOUT_FILENO);
        if (fed)
            dup2(feed[0], STDIN_FILENO);
        close(out[0]);
        close(out[1]);
        if (fed) {
            close(feed[0]);
            close(feed[1]);
            execlp("gzip", "gzip", "-dc", (char *)NULL);
        } else {
            execlp("gzip", "gzip", "-dc", "--", path, (char *)NULL);
        }
        _exit(127);
    }
    close(out[1]);
    if (fed) {
        close(feed[0]);
        in->feeder = fork();
        if (in->feeder == 0) {
            close(out[0]);
            char buf[65536];
            size_t got;
            while ((got = fread(buf, 1, sizeof(buf), f)) > 0)
                if (write(feed[1], buf, got) != (ssize_t)got)
                    _exit(1);
            _exit(0);
        }
        close(feed[1]);
        if (!is_stdin)
            fclose(f); /* the feeder has its own copy */
        if (in->feeder < 0) {
            snprintf(err, errlen, "cannot start a process: %s", strerror(errno));
            close(out[0]);
            return -1;
        }
    } else {
        fclose(f);
    }
    in->f = fdopen(out[0], "rb");
    if (!in->f) {
        snprintf(err, errlen, "fdopen: %s", strerror(errno));
        close(out[0]);
        return -1;
    }
    return 0;
}

/* Close the input and reap the children; -1 when gzip failed. */
static int close_input(input *in, char *err, size_t errlen) {
    int rc = 0;
    if (in->f && in->f != stdin)
        fclose(in->f);
    int status;
    if (in->feeder > 0)
        waitpid(in->feeder, &status, 0);
    if (in->gzip > 0 && waitpid(in->gzip, &status, 0) == in->gzip &&
        !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
            snprintf(err, errlen, "the trace is gzip-compressed but gzip could not be run");
        else
            snprintf(err, errlen, "gzip -dc failed on the trace (corrupt or truncated file?)");
        rc = -1;
    }
    return rc;
}

int carve_trace_load_path(const char *path, carve_trace *t, void (*progress)(size_t lines, void *arg),
                          void *arg) {
    if (!t)
        return -1;
    memset(t, 0, sizeof(*t));
    t->nstreams = 1;
    t->nthreads = 1;
    if (!path) {
        snprintf(t->diag, sizeof(t->diag), "no trace path given");
        return -1;
    }
    input in;
    char err[sizeof(t->diag)];
    if (open_input(path, &in, err, sizeof(err)) != 0) {
        snprintf(t->diag, sizeof(t->diag), "%s", err);
        return -1;
    }
    int rc = carve_trace_load(in.f, t, progress, arg);
    if (close_input(&in, err, sizeof(err)) != 0) {
        carve_trace_free(t);
        t->nstreams = 1;
        t->nthreads = 1;
        snprintf(t->diag, sizeof(t->diag), "%s", err);
        return -1;
    }
    return rc;
}
