/*
 * ipc.h — how ipc.c writes the mappings behind an exported buffer into a
 * carve_ipc_desc and reads them back, apart from the driver, so that a
 * machine without a GPU can check both sides.
 *
 * The one idea: in virtual-memory mode a buffer may lie in mappings of
 * different sizes (granules, and larger mappings of untouched room:
 * engine/maps.h); one descriptor goes across per mapping, and the importer
 * maps each whole, so the description says each one's size: piece_bytes
 * when they are all the same, else runs of sizes in cuda_handle.
 */
#ifndef CARVE_DEVICE_IPC_H
#define CARVE_DEVICE_IPC_H

#include "backend/backend.h"

/* The sizes of the n mappings p into d: piece_bytes, or 0 and runs. 0, or
 * -1 when they need more runs than a description holds (d unchanged then
 * but for piece_bytes). */
int carve_ipc_layout_put(carve_ipc_desc *d, const carve_be_piece *p, size_t n) CARVE_INTERNAL;
/* The bytes behind each of d's num_fds descriptors into sizes, for a
 * description carve_ipc_import accepts. */
void carve_ipc_layout_get(const carve_ipc_desc *d, size_t *sizes) CARVE_INTERNAL;

#endif
