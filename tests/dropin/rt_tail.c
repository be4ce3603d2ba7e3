/*
 * rt_tail.c — rt_user.c's plain calls, as tail calls: the runtime function
 * returns straight to rt_tail's caller, so the interposer sees a call from
 * the program (which has no runtime of its own) and must still find the
 * program's runtime rather than the one libcarve itself is linked to.
 */
#include <stddef.h>

#define EXPORT __attribute__((visibility("default")))

int cudaMalloc(void **p, size_t size);
int cudaFree(void *p);

EXPORT int rtt_malloc(void **p, size_t size) { return cudaMalloc(p, size); }
EXPORT int rtt_free(void *p) { return cudaFree(p); }
