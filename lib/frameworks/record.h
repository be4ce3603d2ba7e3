/*
 * record.h — the recorder of the framework entry points (record.c): every
 * routed allocation and free, reported to callbacks a caller installed
 * (a trace writer, for carve.plot).
 */
#ifndef CARVE_FRAMEWORKS_RECORD_H
#define CARVE_FRAMEWORKS_RECORD_H

#include "base/util.h"
#include "carve_frameworks.h"

/* Report an allocation of size bytes at ptr on stream / the free of ptr. No-ops
 * (one relaxed load) while no recorder is set. Report a free before the
 * memory goes back to its arena, an allocation after it came out. */
void carve_fw_record_alloc(const void *ptr, size_t size, carve_stream stream) CARVE_INTERNAL;
void carve_fw_record_free(const void *ptr) CARVE_INTERNAL;

#endif
