/*
 * ipc.c — sharing a buffer with another process: carve_ipc_export describes
 * a live buffer, carve_ipc_import maps the description in the other process.
 *
 * The one idea: the arena only vouches for the buffer (a live buffer's
 * start, its requested size); its backend knows what the memory is made of
 * and says how another process reaches it -- one file descriptor per mapping
 * the buffer lies in, in virtual-memory mode (a granule, or a larger mapping
 * whose ends the engine records: engine/maps.h), a cudaIpcMemHandle_t of
 * the segment in segments mode. Importing needs no arena: the description says which kind of
 * mapping to make, and the mapping remembers how to undo it.
 */
#include <string.h>
#include <unistd.h>

#include "device/ipc.h"

#include "backend/leaves.h"
#include "engine/error.h"
#include "engine/types.h"

struct carve_ipc_mapping {
    uint32_t kind;   /* carve_ipc_kind */
    int device;
    uintptr_t base;  /* what the backend mapped */
    size_t len;      /* CARVE_IPC_FDS: bytes mapped */
    size_t *sizes;   /* CARVE_IPC_FDS: the bytes behind each descriptor, mapped whole */
    size_t n;        /* ... how many */
};

/* CARVE_IPC_FDS descriptions of descriptors of different sizes (piece_bytes
 * 0) list them in cuda_handle as runs: a descriptor count and the granules
 * behind each, two uint32_t in the machine's byte order (the importer runs
 * on the same machine), up to CARVE_IPC_RUNS runs, a count of 0 ending them
 * early. carve.h says so where it describes the field. */
#define CARVE_IPC_RUNS (sizeof(((carve_ipc_desc *)0)->cuda_handle) / (2 * sizeof(uint32_t)))

static void run_get(const carve_ipc_desc *d, size_t k, uint32_t *count, uint32_t *granules) {
    memcpy(count, d->cuda_handle + 8 * k, 4);
    memcpy(granules, d->cuda_handle + 8 * k + 4, 4);
}

int carve_ipc_layout_put(carve_ipc_desc *d, const carve_be_piece *p, size_t n) {
    size_t same = 1;
    for (size_t i = 1; i < n; i++)
        same &= p[i].size == p[0].size;
    if (same) {
        d->piece_bytes = p[0].size;
        return 0;
    }
    d->piece_bytes = 0;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && p[j].size == p[i].size)
            j++;
        if (k == CARVE_IPC_RUNS || j - i > UINT32_MAX || p[i].size / CARVE_SEGMENT_GRANULE > UINT32_MAX)
            return -1;
        uint32_t count = (uint32_t)(j - i), granules = (uint32_t)(p[i].size / CARVE_SEGMENT_GRANULE);
        memcpy(d->cuda_handle + 8 * k, &count, 4);
        memcpy(d->cuda_handle + 8 * k + 4, &granules, 4);
        k++;
        i = j;
    }
    return 0;
}

void carve_ipc_layout_get(const carve_ipc_desc *d, size_t *sizes) {
    if (d->piece_bytes) {
        for (uint32_t i = 0; i < d->num_fds; i++)
            sizes[i] = d->piece_bytes;
        return;
    }
    size_t at = 0;
    for (size_t k = 0; k < CARVE_IPC_RUNS && at < d->num_fds; k++) {
        uint32_t count, granules;
        run_get(d, k, &count, &granules);
        for (uint32_t i = 0; i < count && at < d->num_fds; i++)
            sizes[at++] = (size_t)granules * CARVE_SEGMENT_GRANULE;
    }
}

/* Virtual-memory mode: one descriptor per mapping the buffer lies in (a
 * granule, or a larger mapping of the engine's: engine/maps.h), each
 * physical allocation whole. */
static carve_status export_mapped(carve_arena *arena, uintptr_t addr, size_t size, carve_ipc_desc *desc, int **fds) {
    uintptr_t lo = carve_align_down(addr, CARVE_SEGMENT_GRANULE);
    size_t max = (carve_align_up(addr + size, CARVE_SEGMENT_GRANULE) - lo) / CARVE_SEGMENT_GRANULE;
    carve_be_piece *p = malloc(max * sizeof(*p));
    if (!p)
        return carve_fail(arena, CARVE_ERR_OOM, "carve_ipc_export: host memory exhausted");
    size_t n = carve_maps_cover(&arena->maps, addr, addr + size, p, max);
    carve_status st = CARVE_OK;
    if (n > UINT32_MAX || carve_ipc_layout_put(desc, p, n) != 0) {
        st = carve_fail(arena, CARVE_ERR_INVALID,
                        "carve_ipc_export: the buffer at %#lx lies in %zu mappings that form more than %zu "
                        "runs of one size, more than a carve_ipc_desc describes",
                        (unsigned long)addr, n, (size_t)CARVE_IPC_RUNS);
    } else if ((st = arena->be.ops->export_pieces(&arena->be, p, n, fds)) != CARVE_OK) {
        st = carve_fail(arena, st, "carve_ipc_export: %s", carve_backend_msg());
    } else {
        desc->kind = CARVE_IPC_FDS;
        desc->size = size;
        desc->offset = addr - p[0].addr;
        desc->num_fds = (uint32_t)n;
        desc->device = arena->be.device;
    }
    free(p);
    return st;
}

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
    if (!__atomic_load_n(&arena->be.ipc, __ATOMIC_RELAXED) ||
        !(arena->vmm ? arena->be.ops->export_pieces != NULL : arena->be.ops->export_buffer != NULL))
        return carve_fail(arena, CARVE_ERR_INVALID,
                          "carve_ipc_export: arena '%s' cannot share memory with other processes (%s backend%s)",
                          arena->name, carve_backend_str(arena->cfg.backend),
                          arena->cfg.backend == CARVE_BACKEND_CUDA
                              ? ", virtual-memory mode without file-descriptor handles: ipc=0 or the device lacks them"
                              : "");
    if (arena->vmm) {
        if ((st = export_mapped(arena, (uintptr_t)ptr, size, desc, fds)) != CARVE_OK) {
            memset(desc, 0, sizeof(*desc));
            *fds = NULL;
            return st;
        }
        desc->magic = CARVE_IPC_MAGIC;
        return CARVE_OK;
    }
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
        const uint64_t G = CARVE_SEGMENT_GRANULE;
        uint64_t need = 0, first = d->piece_bytes, last = d->piece_bytes, total = 0;
        int ok = d->size <= UINT64_MAX / 4;
        if (d->piece_bytes) { /* descriptors of one size */
            ok = ok && d->piece_bytes % G == 0 && d->piece_bytes <= UINT64_MAX / 4 && d->offset < d->piece_bytes;
            need = ok ? (d->offset + d->size + d->piece_bytes - 1) / d->piece_bytes : 0;
            ok = ok && need == d->num_fds;
        } else { /* runs of sizes: they must add up to num_fds descriptors that hold the buffer, all needed */
            uint64_t fds_in_runs = 0;
            for (size_t k = 0; ok && k < CARVE_IPC_RUNS; k++) {
                uint32_t count, granules;
                run_get(d, k, &count, &granules);
                if (count == 0)
                    break;
                ok = granules > 0;
                if (fds_in_runs == 0)
                    first = (uint64_t)granules * G;
                last = (uint64_t)granules * G;
                fds_in_runs += count;
                total += (uint64_t)count * granules * G;
            }
            need = fds_in_runs;
            ok = ok && fds_in_runs == d->num_fds && fds_in_runs > 0 && d->offset < first &&
                 d->offset + d->size <= total && d->offset + d->size > total - last;
        }
        if (!ok || need == 0)
            return carve_fail(NULL, CARVE_ERR_INVALID,
                              "carve_ipc_import: %u descriptors of %llu bytes%s for %llu bytes at offset %llu (they "
                              "must hold the buffer, the first at the offset, every one needed)",
                              d->num_fds, (unsigned long long)d->piece_bytes,
                              d->piece_bytes ? "" : " (sizes in runs)", (unsigned long long)d->size,
                              (unsigned long long)d->offset);
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
    if (desc->kind == CARVE_IPC_FDS) {
        m->n = desc->num_fds;
        if (!(m->sizes = malloc(m->n * sizeof(*m->sizes)))) {
            free(m);
            return carve_fail(NULL, CARVE_ERR_OOM, "carve_ipc_import: host memory exhausted");
        }
        carve_ipc_layout_get(desc, m->sizes);
        st = carve_backend_import_fds(desc, fds, m->sizes, device, &m->base, &m->len);
    } else {
        st = carve_backend_import_cuda(desc, device, &m->base);
    }
    if (st != CARVE_OK) {
        free(m->sizes);
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
    carve_status st = m->kind == CARVE_IPC_FDS ? carve_backend_close_fds(m->device, m->base, m->sizes, m->n)
                                               : carve_backend_close_cuda(m->device, m->base);
    if (st == CARVE_ERR_NO_DEVICE) /* the device could not be made current: nothing was unmapped */
        return carve_fail(NULL, st,
                          "carve_ipc_close: device %d cannot be made current (%s); the mapping stays: close it "
                          "again",
                          m->device, carve_backend_msg());
    free(m->sizes);
    free(m);
    if (st != CARVE_OK)
        return carve_fail_host(NULL, st, carve_backend_host(), "carve_ipc_close: %s", carve_backend_msg());
    return CARVE_OK;
}
