/*
 * capture_check.h — what the capture programs (capture_app.c,
 * capture_refusal_app.c) share beyond mock_api.h: a check that stops the
 * program at the first failure with carve's last error beside it (a broken
 * capture leaves nothing sound to check after it), and the stream cast.
 */
#ifndef CARVE_TESTS_DROPIN_CAPTURE_CHECK_H
#define CARVE_TESTS_DROPIN_CAPTURE_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include "carve.h"
#include "mock_api.h"

#define MiB ((size_t)1 << 20)
#define CS(s) ((carve_stream)(s))
#undef CHECK
#undef CU
#define CHECK(x)                                                                  \
    do {                                                                          \
        if (!(x)) {                                                               \
            fprintf(stderr, "FAIL %s:%d: %s (%s)\n", __FILE__, __LINE__, #x,      \
                    carve_last_error(NULL));                                      \
            exit(1);                                                              \
        }                                                                         \
    } while (0)
#define CU(x) CHECK((x) == 0)

#endif
