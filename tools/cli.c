/*
 * cli.c — the words carve-run and carve-replay share for bad options, counts
 * and progress (cli.h).
 *
 * The one idea: getopt_long, with its own messages off, only says that
 * something was wrong; the word the user typed says what. So a bad option
 * is named from argv: "--json=1" is an option that takes no value, not the
 * unknown option '-\x06' that its internal code would print as.
 */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void cli_usage_error(const char *tool, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", tool);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s --help' for more information.\n", tool);
    exit(CLI_EXIT_USAGE);
}

/* The long option named by the first len characters of name: an exact
 * match, or the only one it abbreviates (*ambiguous set when several). */
static const struct option *find_long(const struct option *longs, const char *name, size_t len, int *ambiguous) {
    const struct option *hit = NULL;
    *ambiguous = 0;
    for (const struct option *o = longs; o->name; o++) {
        if (strncmp(o->name, name, len) != 0)
            continue;
        if (strlen(o->name) == len)
            return o;
        if (hit)
            *ambiguous = 1;
        hit = o;
    }
    return *ambiguous ? NULL : hit;
}

/* A character as it can be printed: itself, or \xNN. */
static const char *shown(int c, char *buf, size_t len) {
    if (c > 0x20 && c < 0x7f)
        snprintf(buf, len, "%c", c);
    else
        snprintf(buf, len, "\\x%02x", (unsigned)c & 0xffu);
    return buf;
}

void cli_bad_option(const char *tool, char **argv, int c, const struct option *longs) {
    const char *word = optind > 0 ? argv[optind - 1] : "";
    /* A long option: the word getopt stopped at, when it names one (a
     * short option's error may come while optind still points before it). */
    if (word && word[0] == '-' && word[1] == '-' && word[2]) {
        const char *name = word + 2;
        size_t len = strcspn(name, "=");
        int ambiguous;
        const struct option *o = find_long(longs, name, len, &ambiguous);
        if (!optopt || (o && o->val == optopt && !o->flag)) {
            if (ambiguous)
                cli_usage_error(tool, "option '--%.*s' is ambiguous (give more of its name)", (int)len, name);
            if (!o)
                cli_usage_error(tool, "unknown option '--%.*s'", (int)len, name);
            if (o->has_arg == no_argument && name[len] == '=')
                cli_usage_error(tool, "option '--%s' takes no value (given '%s')", o->name, word);
            cli_usage_error(tool, "option '--%s' needs a value", o->name);
        }
    }
    char b[8];
    if (c == ':')
        cli_usage_error(tool, "option '-%s' needs a value", shown(optopt, b, sizeof(b)));
    cli_usage_error(tool, "unknown option '-%s'", shown(optopt, b, sizeof(b)));
}

/* Count one use of option o; exit 2 at its second when it is in names. */
static void once_count(const char *tool, const struct option *o, const char *const *names, const char **seen,
                       int *nseen) {
    for (const char *const *n = names; *n; n++) {
        if (strcmp(*n, o->name) != 0)
            continue;
        for (int k = 0; k < *nseen; k++)
            if (seen[k] == *n)
                cli_usage_error(tool, "option '--%s' given twice (give it once)", o->name);
        if (*nseen < 64)
            seen[(*nseen)++] = *n;
    }
}

void cli_once(const char *tool, int end, char **argv, const char *shorts, const struct option *longs,
              const char *const *names) {
    const char *seen[64];
    int nseen = 0;
    for (int i = 1; i < end; i++) {
        const char *w = argv[i];
        if (strcmp(w, "--") == 0)
            return;
        if (w[0] != '-' || !w[1])
            continue;
        if (w[1] != '-') { /* a cluster of short options, the last perhaps with its value */
            for (const char *c = w + 1; *c; c++) {
                const char *at = *c != ':' ? strchr(shorts, *c) : NULL;
                const struct option *o = longs;
                while (o->name && o->val != *c)
                    o++;
                if (o->name)
                    once_count(tool, o, names, seen, &nseen);
                if (at && at[1] == ':') {
                    if (!c[1])
                        i++; /* the value is the next word */
                    break;
                }
            }
            continue;
        }
        size_t len = strcspn(w + 2, "=");
        int ambiguous;
        const struct option *o = find_long(longs, w + 2, len, &ambiguous);
        if (!o)
            continue;
        if (o->has_arg == required_argument && !w[2 + len])
            i++; /* its value is the next word */
        once_count(tool, o, names, seen, &nseen);
    }
}

int cli_count(const char *text, unsigned long long min, unsigned long long max, unsigned long long *out) {
    if (!text || !*text)
        return -1;
    unsigned long long v = 0;
    for (const char *p = text; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        unsigned d = (unsigned)(*p - '0');
        if (v > (~0ull - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    if (v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cli_progress_init(cli_progress *p, const char *tool, int quiet, int forced) {
    memset(p, 0, sizeof(*p));
    p->tool = tool;
    p->tty = isatty(STDERR_FILENO);
    p->on = forced || (!quiet && p->tty);
    p->last = now_s();
}

void cli_progress_say(cli_progress *p, const char *fmt, ...) {
    if (!p->on)
        return;
    double t = now_s();
    if (t - p->last < 1.0)
        return;
    p->last = t;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, p->tty ? "\r%s: " : "%s: ", p->tool);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs(p->tty ? "\033[K" : "\n", stderr);
    p->shown = p->tty;
}

void cli_progress_done(cli_progress *p) {
    if (p->shown)
        fputs("\r\033[K", stderr);
    p->shown = 0;
}
