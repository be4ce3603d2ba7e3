/*
 * test_ab_stats.c — integrations/ggml/ab_stats.c, what ab_gpt2 reads from a
 * call of ggml's gpt-2-backend and how it sums up the rounds, on canned
 * outputs (the lines gpt-2-backend prints, as main-backend.cpp's printf
 * calls write them, the name of main changed as ab_gpt2 builds it) and on
 * values whose medians and rank intervals are known by hand.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ab_stats.h"

static int failures;
#define CHECK(x)                                                   \
    do {                                                           \
        if (!(x)) {                                                \
            printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #x);    \
            failures++;                                            \
        }                                                          \
    } while (0)

static const char *const RUN =
    "gpt2_backend_main: seed = 42\n"
    "gpt2_model_load: loading model from 'build-ggml/gpt2/ggml-model.bin'\n"
    "gpt2_model_load: n_vocab = 50257\n"
    "gpt2_model_load: ggml tensor size    = 336 bytes\n"
    "gpt2_model_load: backend buffer size = 312.77 MB\n"
    "gpt2_model_load: memory size =   144.00 MB, n_mem = 24576\n"
    "gpt2_model_load: model size  =   239.08 MB\n"
    "extract_tests_from_file : No test file found.\n"
    "gpt2_backend_main: prompt: 'The memory of a GPU'\n"
    "gpt2_backend_main: number of tokens in prompt = 19, first 8 tokens: 84 104 101 32 109 101 109 111 \n"
    "\n"
    "The memory of a GPU<4211><977><31337>\n"
    "\n"
    "gpt2_backend_main:     load time =   412.50 ms\n"
    "gpt2_backend_main:   sample time =     1.20 ms\n"
    "gpt2_backend_main:  predict time =   689.31 ms / 2.52 ms per token\n"
    "gpt2_backend_main:    total time =  1203.77 ms\n";

static void parse_cases(void) {
    ab_output o;
    CHECK(ab_parse(RUN, &o) == 0);
    CHECK(fabs(o.predict_ms - 689.31) < 1e-9);
    CHECK(o.prompt_tokens == 19);
    const char *want = "The memory of a GPU<4211><977><31337>";
    CHECK(o.text && o.text_len == strlen(want) && memcmp(o.text, want, o.text_len) == 0);

    /* Other tokens: another text, the same figures read. */
    char other[2048];
    snprintf(other, sizeof(other), "%s", RUN);
    char *t = strstr(other, "<977>");
    memcpy(t, "<978>", 5);
    ab_output p;
    CHECK(ab_parse(other, &p) == 0 && p.text_len == o.text_len && memcmp(p.text, o.text, o.text_len) != 0);

    /* A call that failed before predicting: no figures, -1. */
    const char *failed = "gpt2_backend_main: seed = 42\n"
                         "gpt2_model_load: failed to open 'nowhere.bin'\n"
                         "gpt2_backend_main: failed to load model from 'nowhere.bin'\n";
    CHECK(ab_parse(failed, &p) == -1 && p.predict_ms < 0 && p.prompt_tokens < 0 && !p.text);

    /* "Failed to predict": tokens but no timing lines. */
    char cut[2048];
    snprintf(cut, sizeof(cut), "%s", RUN);
    *strstr(cut, "gpt2_backend_main:     load time") = 0;
    strcat(cut, "Failed to predict\n");
    CHECK(ab_parse(cut, &p) == -1 && p.prompt_tokens == 19 && p.predict_ms < 0);

    /* A malformed figure is not read as 0. */
    char bad[2048];
    snprintf(bad, sizeof(bad), "%s", RUN);
    memcpy(strstr(bad, "689.31"), "   x.", 5);
    CHECK(ab_parse(bad, &p) == -1 && p.predict_ms < 0);

    /* Windows line ends around the tokens are not part of them. */
    const char *crlf = "x: number of tokens in prompt = 3, first 8 tokens: 1 2 3 \r\n\r\nabc<7>\r\n\r\n"
                       "x:     load time = 1.00 ms\r\nx:  predict time =    5.50 ms / 1.10 ms per token\r\n";
    CHECK(ab_parse(crlf, &p) == 0 && p.text_len == 6 && memcmp(p.text, "abc<7>", 6) == 0 &&
          fabs(p.predict_ms - 5.5) < 1e-12 && p.prompt_tokens == 3);
    CHECK(ab_parse(NULL, &p) == -1);
}

static void median_cases(void) {
    double odd[] = {5, 1, 4, 2, 3};
    CHECK(ab_median(odd, 5) == 3);
    CHECK(odd[0] == 5 && odd[4] == 3); /* the caller's order is left alone */
    double even[] = {4, 1, 3, 2};
    CHECK(ab_median(even, 4) == 2.5);
    CHECK(isnan(ab_median(even, 0)));

    /* 24 values 1..24, shuffled: with 95%, the 7th smallest and the 7th
     * largest (P(B <= 6) = 0.0113 for B ~ Bin(24, 1/2), P(B <= 7) = 0.0320). */
    double x[24];
    for (int i = 0; i < 24; i++)
        x[i] = (double)((i * 7) % 24 + 1);
    double lo, hi, cov;
    CHECK(ab_median_interval(x, 24, 0.95, &lo, &hi, &cov) == 0);
    CHECK(lo == 7 && hi == 18);
    CHECK(fabs(cov - (1 - 2 * 0.011330)) < 1e-4);
    CHECK(ab_median(x, 24) == 12.5);

    /* Six values: the smallest and the largest (P(B = 0) = 1/64 <= 0.025). */
    double six[] = {1.01, 0.99, 1.03, 0.97, 1.00, 1.02};
    CHECK(ab_median_interval(six, 6, 0.95, &lo, &hi, &cov) == 0 && lo == 0.97 && hi == 1.03 &&
          fabs(cov - (1 - 2.0 / 64)) < 1e-12);
    /* Five are too few at 95% (1/32 > 0.025): no interval. */
    CHECK(ab_median_interval(six, 5, 0.95, &lo, &hi, &cov) == -1 && isnan(lo) && isnan(hi) && cov == 0);
    CHECK(ab_median_interval(six, 0, 0.95, &lo, &hi, &cov) == -1);

    /* Many values (past where 2^-n underflows): still an interval around the median. */
    static double many[2001];
    for (int i = 0; i < 2001; i++)
        many[i] = (double)((i * 37) % 2001);
    CHECK(ab_median_interval(many, 2001, 0.95, &lo, &hi, &cov) == 0);
    CHECK(lo < 1000 && hi > 1000 && lo > 900 && hi < 1100 && cov >= 0.95 && cov < 0.96);
}

int main(void) {
    parse_cases();
    median_cases();
    printf("%s\n", failures ? "FAIL" : "OK ab_stats");
    return failures ? 1 : 0;
}
