/*
 * ipc.c — sharing a buffer with another process: carve_ipc_export describes
 * a live buffer, carve_ipc_import maps the description in the other process.
 *
 * The one idea: the arena only vouches for the buffer (a live buffer's
 * start, its requested size); its backend knows what the memory is made of
 * and says how another process reaches it -- one file descriptor per granule
 * in virtual-memory mode, a cudaIpcMemHandle_t of the segment in segments
 * mode. Importing needs no arena: the description says which kind of
 * mapping to make, and the mapping remembers how to undo it.
 */
#include <string.h>
#include <unistd.h>

#include "backend/leaves.h"
#include "engine/error.h"

struct carve_ipc_mapping {
    uint32_t kind;   /* carve_ipc_kind */
    int device;
    uintptr_t base;  /* what the backend mapped */
    size_t len;      /* CARVE_IPC_FDS: bytes mapped */
};

carve_status carve_ipc_export(carve_arena *arena, const void *ptr, carve_ipc_desc *desc, int **fds) {
    if (desc)
        memset(desc, 0, sizeof(*desc));
    if (fds)
        *fds = NULL;
    if (!arena || !ptr || !desc || !fds)
        return carve_fail(arena, CARVE_ERR_INVALID, "carve_ipc_export: NULL argument");
    size_t size = 0;
    carve_status st = carve_buffer_info(arena, ptr, &size, NULL);
    if (st != CARVE_OK)
        return carve_fail(arena, st, "carve_ipc_export: %p is not the start of a live buffer of arena '%s'", ptr,
                          arena->name);
    if (!__atomic_load_n(&arena->be.ipc, __ATOMIC_RELAXED) || !arena->be.ops->export_buffer)
        return carve_fail(arena, CARVE_ERR_INVALID,
                          "carve_ipc_export: arena '%s' cannot share memory with other processes (%s backend%s)",
                          arena->name, carve_backend_str(arena->cfg.backend),
                          arena->cfg.backend == CARVE_BACKEND_CUDA
                              ? ", virtual-memory mode without file-descriptor handles: ipc=0 or the device lacks them"
                              : "");
    st = arena->be.ops->export_buffer(&arena->be, (uintptr_t)ptr, size, desc, fds);
    if (st != CARVE_OK) {
        memset(desc, 0, sizeof(*desc));
        *fds = NULL;
        return carve_fail_host(arena, st, carve_backend_host(), "carve_ipc_export: %s", carve_backend_msg());
    }
    desc->magic = CARVE_IPC_MAGIC;
    return CARVE_OK;
}

void carve_ipc_fds_close(int *fds, size_t n) {
    if (!fds)
        return;
    for (size_t i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(fds);
}

/* Is desc one that carve_ipc_export could have written? */
static carve_status check_desc(const carve_ipc_desc *d, const int *fds) {
    if (d->magic != CARVE_IPC_MAGIC)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_ipc_import: not a carve_ipc_desc (magic %#x)", d->magic);
    if (d->size == 0)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_ipc_import: a buffer of 0 bytes");
    if (d->kind == CARVE_IPC_FDS) {
        uint64_t need = d->offset < CARVE_SEGMENT_GRANULE && d->size <= UINT64_MAX / 2
                            ? (d->offset + d->size + CARVE_SEGMENT_GRANULE - 1) / CARVE_SEGMENT_GRANULE
                            : 0;
        if (d->piece_bytes != CARVE_SEGMENT_GRANULE || need == 0 || d->num_fds != need)
            return carve_fail(NULL, CARVE_ERR_INVALID,
                              "carve_ipc_import: %u descriptors of %llu bytes for %llu bytes at offset %llu (expected "
                              "%llu of %zu bytes)",
                              d->num_fds, (unsigned long long)d->piece_bytes, (unsigned long long)d->size,
                              (unsigned long long)d->offset, (unsigned long long)need, CARVE_SEGMENT_GRANULE);
        if (!fds)
            return carve_fail(NULL, CARVE_ERR_INVALID, "carve_ipc_import: fds is NULL");
        for (uint32_t i = 0; i < d->num_fds; i++)
            if (fds[i] < 0)
                return carve_fail(NULL, CARVE_ERR_INVALID, "carve_ipc_import: descriptor %u is %d", i, fds[i]);
        return CARVE_OK;
    }
    if (d->kind == CARVE_IPC_CUDA) {
        if (d->num_fds != 0 || d->size > d->piece_bytes || d->offset > d->piece_bytes - d->size)
            return carve_fail(NULL, CARVE_ERR_INVALID,
                              "carve_ipc_import: a buffer of %llu bytes at offset %llu does not fit its segment of "
                              "%llu bytes (or num_fds %u is not 0)",
                              (unsigned long long)d->size, (unsigned long long)d->offset,
                              (unsigned long long)d->piece_bytes, d->num_fds);
        return CARVE_OK;
    }
    return carve_fail(NULL, CARVE_ERR_INVALID, "carve_ipc_import: unknown kind %u", d->kind);
}

carve_status carve_ipc_import(const carve_ipc_desc *desc, const int *fds, int device, carve_ipc_mapping **map,
                              void **ptr) {
    if (map)
        *map = NULL;
    if (ptr)
        *ptr = NULL;
    if (!desc || !map || !ptr)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_ipc_import: NULL argument");
    carve_status st = check_desc(desc, fds);
    if (st != CARVE_OK)
        return st;
    if (device < 0)
        return carve_fail(NULL, CARVE_ERR_NO_DEVICE, "carve_ipc_import: device %d does not exist", device);
    carve_ipc_mapping *m = calloc(1, sizeof(*m));
    if (!m)
        return carve_fail_host(NULL, CARVE_ERR_OOM, 1, "carve_ipc_import: host memory exhausted");
    m->kind = desc->kind;
    m->device = device;
    if (desc->kind == CARVE_IPC_FDS)
        st = carve_backend_import_fds(desc, fds, device, &m->base, &m->len);
    else
        st = carve_backend_import_cuda(desc, device, &m->base);
    if (st != CARVE_OK) {
        free(m);
        return carve_fail_host(NULL, st, carve_backend_host(), "carve_ipc_import: %s", carve_backend_msg());
    }
    *map = m;
    *ptr = (void *)(m->base + desc->offset);
    return CARVE_OK;
}

carve_status carve_ipc_close(carve_ipc_mapping *m) {
    if (!m)
        return CARVE_OK;
    carve_status st = m->kind == CARVE_IPC_FDS ? carve_backend_close_fds(m->device, m->base, m->len)
                                               : carve_backend_close_cuda(m->device, m->base);
    if (st == CARVE_ERR_NO_DEVICE) /* the device could not be made current: nothing was unmapped */
        return carve_fail(NULL, st,
                          "carve_ipc_close: device %d cannot be made current (%s); the mapping stays: close it "
                          "again",
                          m->device, carve_backend_msg());
    free(m);
    if (st != CARVE_OK)
        return carve_fail_host(NULL, st, carve_backend_host(), "carve_ipc_close: %s", carve_backend_msg());
    return CARVE_OK;
}
