/*
 * cli.h — what carve's command-line tools say the same way (cli.c): a bad
 * option named as it was typed, counts checked digit by digit, and progress
 * on a terminal.
 */
#ifndef CARVE_TOOLS_CLI_H
#define CARVE_TOOLS_CLI_H

#include <getopt.h>
#include <stddef.h>

#define CLI_EXIT_USAGE 2

/* Print "TOOL: MESSAGE" and the hint to try --help on stderr; exit 2. */
void cli_usage_error(const char *tool, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

/* After getopt_long (with opterr = 0) returned '?' or ':' (c): name the
 * option as it was typed (unknown, ambiguous, needing a value, or taking
 * none, as in --json=1) and exit 2. */
void cli_bad_option(const char *tool, char **argv, int c, const struct option *longs)
    __attribute__((noreturn));

/* Refuse (exit 2) a second use of any option in names (long names, NULL-
 * terminated; a short form counts as its long option) among argv[1] ..
 * argv[end - 1], the words getopt_long parsed: "--trace a --trace b" would
 * otherwise keep the last silently. Values of options that take one are
 * skipped, so "--conf --trace" is one --conf. shorts is getopt's optstring. */
void cli_once(const char *tool, int end, char **argv, const char *shorts, const struct option *longs,
              const char *const *names);

/* A whole decimal number in [min, max], digits only (no sign, blanks,
 * suffix or exponent): 0 with *out set, or -1. */
int cli_count(const char *text, unsigned long long min, unsigned long long max, unsigned long long *out);

/* Progress on stderr: shown when stderr is a terminal (rewritten in place
 * on one line), or everywhere when forced (one line each), at most once a
 * second; never when off. */
typedef struct cli_progress {
    const char *tool;
    int on, tty, shown;
    double last;
} cli_progress;

void cli_progress_init(cli_progress *p, const char *tool, int quiet, int forced);
/* Show message (printf-style) if a second has passed since the last one. */
void cli_progress_say(cli_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Clear the line a terminal shows, before other output. */
void cli_progress_done(cli_progress *p);

#endif
