/*
 * fuzz_common.h — what the three fuzz targets share: the libFuzzer entry
 * point's prototype and the invariant check that aborts.
 *
 * The one idea: a fuzz target reports a violated invariant by printing what
 * broke and calling abort(), so that libFuzzer, the plain driver (driver.c)
 * and the sanitizers all treat it as a crash and keep the input that caused
 * it. Nothing else is ever printed per input.
 */
#ifndef CARVE_FUZZ_COMMON_H
#define CARVE_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The entry point every target defines (libFuzzer's name and signature). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Abort with "file:line: invariant violated: cond: message" when cond is false.
 * The variadic part is a printf format and its arguments. */
#define FUZZ_CHECK(cond, ...)                                                                 \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "%s:%d: invariant violated: %s: ", __FILE__, __LINE__, #cond);   \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fputc('\n', stderr);                                                              \
            fflush(stderr);                                                                   \
            abort();                                                                          \
        }                                                                                     \
    } while (0)

#endif
