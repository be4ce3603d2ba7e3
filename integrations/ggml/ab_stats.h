/*
 * ab_stats.h — what ab_gpt2 reads from one call of ggml's GPT-2 program and
 * how it sums up many: the figures ggml prints (its own predict time, the
 * prompt's length, the tokens it printed) and a median with a
 * distribution-free 95% interval.
 *
 * Plain C with no dependency, so that tests/integrations/test_ab_stats.c
 * checks it on canned outputs without ggml or a GPU.
 */
#ifndef GGML_AB_STATS_H
#define GGML_AB_STATS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One call's output (stdout) as gpt-2-backend prints it. */
typedef struct ab_output {
    double predict_ms;  /* "predict time = X ms": the time in ggml's eval calls; -1 when absent */
    long prompt_tokens; /* "number of tokens in prompt = N"; -1 when absent */
    const char *text;   /* what it printed of the tokens: the lines after the prompt's line, up to
                           the timing lines, without the blank lines around them (points into out) */
    size_t text_len;
} ab_output;

/* Read out (NUL-terminated) into *o. 0 when the predict time, the prompt's
 * length and the timing lines were all found; -1 else (what was found is
 * filled in, the rest -1 / NULL). */
int ab_parse(const char *out, ab_output *o);

/* The median of n values (their order is not changed); NaN when n is 0. */
double ab_median(const double *x, size_t n);

/* The distribution-free interval for the median of n values at the given
 * level (0.95): the k-th smallest and the k-th largest value, k the largest
 * for which P(B < k) <= (1 - level) / 2, B ~ Binomial(n, 1/2) (a rank
 * interval: it assumes only that the values are independent draws of one
 * distribution). *coverage is its exact coverage, 1 - 2 P(B < k), at least
 * level. -1 when n is too small for any interval at that level (6 values
 * for 0.95): *lo, *hi NaN and *coverage 0. */
int ab_median_interval(const double *x, size_t n, double level, double *lo, double *hi, double *coverage);

#ifdef __cplusplus
}
#endif

#endif
