/*
 * ab_stats.c — ab_stats.h: the figures of one call of ggml's GPT-2 program,
 * and the median of many with its rank interval.
 *
 * The one idea: read only what ggml itself prints and measures (its predict
 * time covers its eval calls, nothing of loading or of this program), and
 * make no assumption about the spread of the figures: the interval is the
 * pair of order statistics a binomial count places around the median.
 */
#include "ab_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The line of out holding key, from its first character; NULL when none does. */
static const char *line_with(const char *out, const char *key) {
    const char *hit = strstr(out, key);
    if (!hit)
        return NULL;
    while (hit > out && hit[-1] != '\n')
        hit--;
    return hit;
}

int ab_parse(const char *out, ab_output *o) {
    o->predict_ms = -1;
    o->prompt_tokens = -1;
    o->text = NULL;
    o->text_len = 0;
    if (!out)
        return -1;
    const char *p = strstr(out, "predict time =");
    if (p) {
        char *end = NULL;
        double ms = strtod(p + strlen("predict time ="), &end);
        if (end && end != p + strlen("predict time =") && ms >= 0)
            o->predict_ms = ms;
    }
    const char *n = strstr(out, "number of tokens in prompt =");
    if (n) {
        char *end = NULL;
        long k = strtol(n + strlen("number of tokens in prompt ="), &end, 10);
        if (end && end != n + strlen("number of tokens in prompt =") && k >= 0)
            o->prompt_tokens = k;
    }
    const char *timing = line_with(out, "load time =");
    if (n && timing && timing > n) {
        const char *a = strchr(n, '\n'); /* the tokens begin on the next line */
        if (a && a < timing) {
            const char *b = timing;
            while (a < b && (*a == '\n' || *a == '\r'))
                a++;
            while (b > a && (b[-1] == '\n' || b[-1] == '\r'))
                b--;
            o->text = a;
            o->text_len = (size_t)(b - a);
        }
    }
    return o->predict_ms >= 0 && o->prompt_tokens >= 0 && o->text ? 0 : -1;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

/* A sorted copy of x (NULL when n is 0 or memory is short). */
static double *sorted(const double *x, size_t n) {
    double *s = n ? malloc(n * sizeof(double)) : NULL;
    if (!s)
        return NULL;
    memcpy(s, x, n * sizeof(double));
    qsort(s, n, sizeof(double), by_value);
    return s;
}

double ab_median(const double *x, size_t n) {
    double *s = sorted(x, n);
    if (!s)
        return NAN;
    double m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    free(s);
    return m;
}

/* P(B = i) for B ~ Binomial(n, 1/2), in logs (n may be large). */
static double binom_half_pmf(size_t n, size_t i) {
    return exp(lgamma((double)n + 1) - lgamma((double)i + 1) - lgamma((double)(n - i) + 1) - (double)n * log(2.0));
}

int ab_median_interval(const double *x, size_t n, double level, double *lo, double *hi, double *coverage) {
    *lo = *hi = NAN;
    *coverage = 0;
    double tail = (1 - level) / 2;
    /* k from 1 while P(B < k) = P(B <= k - 1) stays within the tail (and
     * the k-th smallest is not past the k-th largest). */
    size_t k = 0;
    double below = 0, next = n ? binom_half_pmf(n, 0) : 1; /* P(B < k), P(B <= k) */
    while (k + 1 <= (n + 1) / 2 && next <= tail) {
        k++;
        below = next;
        next += binom_half_pmf(n, k);
    }
    if (k == 0)
        return -1;
    double *s = sorted(x, n);
    if (!s)
        return -1;
    *lo = s[k - 1];
    *hi = s[n - k];
    *coverage = 1 - 2 * below;
    free(s);
    return 0;
}
