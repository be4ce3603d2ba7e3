/*
 * record.h — the recorder of the framework entry points (record.c): every
 * routed allocation and free, reported to callbacks a caller installed
 * (a trace writer, for carve.plot).
 */
#ifndef CARVE_FRAMEWORKS_RECORD_H
#define CARVE_FRAMEWORKS_RECORD_H

#include "base/util.h"
#include "carve_frameworks.h"

/* Report an allocation of size bytes at ptr on stream, after it came out of
 * its arena. A no-op (one relaxed load) while no recorder is set. */
void carve_fw_record_alloc(const void *ptr, size_t size, carve_stream stream) CARVE_INTERNAL;

/* Around a free: begin before carve_free, end after it with whether it
 * succeeded. begin returns nonzero when it took the recorder's lock (a
 * recorder is set), which end reports the free under (only when freed) and
 * drops; so no allocation of the same memory can be reported in between, and
 * a free that failed is not reported. Nothing may call this header's
 * routing functions in between. */
int carve_fw_record_free_begin(void) CARVE_INTERNAL;
void carve_fw_record_free_end(int held, const void *ptr, int freed) CARVE_INTERNAL;

#endif
