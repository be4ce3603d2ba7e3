/*
 * arena.c — creating and destroying arenas, their configuration, and
 * carve_empty_cache (the reclaiming itself is in reclaim.c).
 *
 * Creation validates the whole configuration before anything is reserved,
 * resolves fractions against the device's memory, and rounds sizes to the
 * 2 MiB granule, so every later decision works on plain byte counts.
 */
#include "engine/arena.h"

#include <string.h>
#include <time.h>

#include "backend/faults.h"
#include "backend/open.h"
#include "base/defaults.h"
#include "base/text.h"
#include "base/utf8.h"
#include "engine/error.h"
#include "engine/heap.h"
#include "engine/live.h"
#include "engine/vmm.h"
#include "engine/pool.h"
#include "engine/reclaim.h"

static uint64_t next_arena_id(void) {
    static uint64_t counter;
    return __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
}

static carve_status validate(const carve_config *c) {
    if (c->backend != CARVE_BACKEND_CUDA && c->backend != CARVE_BACKEND_HOST &&
        c->backend != CARVE_BACKEND_VIRTUAL && c->backend != CARVE_BACKEND_CUDA_DRIVER)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_arena_create: unknown backend %d",
                          (int)c->backend);
    carve_status st = CARVE_OK;
    if (c->initial_fraction != 0.0 &&
        (st = carve_fraction_check("carve_arena_create", "initial_fraction", c->initial_fraction)) != CARVE_OK)
        return st;
    if (c->limit_fraction != 0.0 &&
        (st = carve_fraction_check("carve_arena_create", "limit_fraction", c->limit_fraction)) != CARVE_OK)
        return st;
    int device_backend = c->backend == CARVE_BACKEND_CUDA || c->backend == CARVE_BACKEND_CUDA_DRIVER;
    if ((c->initial_fraction > 0 || c->limit_fraction > 0) && !device_backend)
        return carve_fail(NULL, CARVE_ERR_INVALID,
                          "carve_arena_create: fractions of device memory need a cuda backend");
    if (!c->growth && c->initial_bytes == 0 && c->initial_fraction == 0)
        return carve_fail(NULL, CARVE_ERR_INVALID,
                          "carve_arena_create: growth is off and initial_bytes is 0: the arena could "
                          "never hold a byte");
    if (c->vmm != 0 && c->vmm != 1 && c->vmm != CARVE_VMM_AUTO)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_arena_create: vmm is %d (0, 1 or CARVE_VMM_AUTO)", c->vmm);
    if (c->vmm == 1 && c->backend != CARVE_BACKEND_CUDA && c->backend != CARVE_BACKEND_VIRTUAL &&
        c->backend != CARVE_BACKEND_CUDA_DRIVER)
        return carve_fail(NULL, CARVE_ERR_INVALID,
                          "carve_arena_create: virtual-memory mode needs the cuda, cuda_driver or virtual backend");
    /* 0 (CARVE_OK) stands for the default, CARVE_ERR_OOM, so that a
     * structure zeroed before its fields are set works. */
    if (c->fail_backend_status != CARVE_OK && c->fail_backend_status != CARVE_ERR_OOM &&
        c->fail_backend_status != CARVE_ERR_BACKEND)
        return carve_fail(NULL, CARVE_ERR_INVALID,
                          "carve_arena_create: fail_backend_status is %d (CARVE_ERR_OOM or CARVE_ERR_BACKEND)",
                          (int)c->fail_backend_status);
    if (c->device < 0 && device_backend) /* HOST and VIRTUAL ignore the device */
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_arena_create: device %d is negative",
                          c->device);
    if (c->peers != CARVE_PEERS_AUTO && c->peers != CARVE_PEERS_NONE && c->peers != CARVE_PEERS_ALL &&
        c->peers != CARVE_PEERS_LIST)
        return carve_fail(NULL, CARVE_ERR_INVALID,
                          "carve_arena_create: peers is %d (CARVE_PEERS_AUTO, _NONE, _ALL or _LIST)", c->peers);
    if ((c->peers == CARVE_PEERS_ALL || c->peers == CARVE_PEERS_LIST) && c->backend != CARVE_BACKEND_CUDA)
        return carve_fail(NULL, CARVE_ERR_INVALID,
                          "carve_arena_create: peers=all or a list of devices needs the cuda backend (the %s "
                          "backend's memory cannot be granted to other devices)",
                          carve_backend_str(c->backend));
    if (c->peers != CARVE_PEERS_LIST && c->peer_devices != 0)
        return carve_fail(NULL, CARVE_ERR_INVALID,
                          "carve_arena_create: peer_devices is set but peers is not CARVE_PEERS_LIST");
    if (c->ipc != CARVE_IPC_AUTO && c->ipc != 0 && c->ipc != 1)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_arena_create: ipc is %d (0, 1 or CARVE_IPC_AUTO)", c->ipc);
    /* ipc=1 is a requirement: refused where it could never be met rather
     * than accepted and then ignored. */
    if (c->ipc == 1 && c->backend != CARVE_BACKEND_CUDA)
        return carve_fail(NULL, CARVE_ERR_INVALID,
                          "carve_arena_create: ipc=1 needs the cuda backend (the %s backend's memory cannot be "
                          "exported to other processes)",
                          carve_backend_str(c->backend));
    return CARVE_OK;
}

/* "1.50 GiB (1610612736 bytes)", or "0.3 of 79.18 GiB = 23.75 GiB" for a
 * fraction: a size the way the user gave it, for messages. */
static const char *given(char *buf, size_t len, size_t bytes, double fraction, size_t total) {
    char b1[32], b2[32];
    if (fraction > 0)
        snprintf(buf, len, "%g of %s = %s", fraction, carve_format_bytes(b1, sizeof(b1), total),
                 carve_format_bytes(b2, sizeof(b2), bytes));
    else
        snprintf(buf, len, "%s (%zu bytes)", carve_format_bytes(b1, sizeof(b1), bytes), bytes);
    return buf;
}

carve_status carve_fraction_check(const char *fn, const char *what, double fraction) {
    if (fraction > 0.0 && fraction <= 1.0)
        return CARVE_OK;
    return carve_fail(NULL, CARVE_ERR_INVALID, "%s: %s %g is not in (0, 1] (a share of the device's memory)", fn,
                      what, fraction);
}

carve_status carve_limit_check(const char *fn, size_t limit, double fraction, size_t total) {
    char b1[96], b2[32];
    if (limit == SIZE_MAX || carve_align_down(limit, CARVE_SEGMENT_GRANULE) >= CARVE_SEGMENT_GRANULE)
        return CARVE_OK;
    return carve_fail(NULL, CARVE_ERR_INVALID, "%s: the limit %s is below one granule of %s", fn,
                      given(b1, sizeof(b1), limit, fraction, total),
                      carve_format_bytes(b2, sizeof(b2), CARVE_SEGMENT_GRANULE));
}

/* Resolve limit and initial in bytes once the backend knows the device size.
 * The limit is rounded down to the granule (it is a hard cap) and the
 * initial block up, but never past the rounded limit: initial and limit are
 * compared as given, so equal sizes or equal fractions give one block of
 * the limit. */
static carve_status resolve_sizes(carve_arena *a, const carve_config *c) {
    char b1[96], b2[96];
    size_t total = a->be.total_bytes;
    size_t limit = c->limit_bytes, initial = c->initial_bytes;
    if (c->limit_fraction > 0)
        limit = (size_t)((double)total * c->limit_fraction);
    else if (limit == 0)
        limit = c->backend == CARVE_BACKEND_CUDA || c->backend == CARVE_BACKEND_CUDA_DRIVER ? total : SIZE_MAX;
    if (c->initial_fraction > 0)
        initial = (size_t)((double)total * c->initial_fraction);
    if (initial > limit)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_arena_create: initial %s is larger than the limit %s",
                          given(b1, sizeof(b1), initial, c->initial_fraction, total),
                          given(b2, sizeof(b2), limit, c->limit_fraction, total));
    carve_status st = carve_limit_check("carve_arena_create", limit, c->limit_fraction, total);
    if (st != CARVE_OK)
        return st;
    size_t rlimit = limit == SIZE_MAX ? SIZE_MAX : carve_align_down(limit, CARVE_SEGMENT_GRANULE);
    a->limit = rlimit;
    a->initial = initial ? carve_align_up(initial, CARVE_SEGMENT_GRANULE) : 0;
    if (a->initial > rlimit || a->initial < initial) /* the second: rounding up wrapped */
        a->initial = rlimit;
    /* 0: automatic; never more than the rounded limit. Clamped before it is
     * rounded up, so that a size within a granule of SIZE_MAX (with no
     * limit) cannot wrap around to 0, which would mean automatic. */
    size_t gmax = carve_align_down(rlimit, CARVE_SEGMENT_GRANULE);
    a->min_grow = c->min_grow_bytes > gmax ? gmax : carve_align_up(c->min_grow_bytes, CARVE_SEGMENT_GRANULE);
    a->growth = c->growth != 0;
    /* Automatic: virtual-memory mode where the backend maps granules (the
     * CUDA backend opened its virtual-memory form only if the device
     * supports it) and the arena grows from nothing; an arena asked to hold
     * memory from the start (initial > 0, or one fixed block) keeps it as a
     * segment reserved at creation. */
    a->vmm = c->vmm == 1 ||
             (c->vmm == CARVE_VMM_AUTO && a->growth && a->initial == 0 && a->be.ops->commit != NULL);
    a->small_max = a->vmm ? 0 : CARVE_SMALL_MAX;
    if (a->vmm) {
        /* Address space: twice what the arena may map first (64 GiB when
         * unlimited), then more, the limit or 64 GiB at a time, whenever no
         * free range holds a request (heap.c): live buffers can leave any
         * fixed amount without a free range large enough. Growth off caps
         * the mapped bytes at the initial amount. */
        if (!a->growth)
            a->limit = a->initial;
        a->va_step = a->limit < CARVE_VMM_VA_STEP ? a->limit : CARVE_VMM_VA_STEP;
        a->va_size = a->limit == SIZE_MAX    ? CARVE_VMM_VA_STEP
                     : a->limit > SIZE_MAX / 4 ? carve_align_down(SIZE_MAX / 2, CARVE_SEGMENT_GRANULE)
                                               : 2 * a->limit;
        a->heap.target = a->initial;
    }
    return CARVE_OK;
}

carve_status carve_arena_create(const carve_config *user, carve_arena **out) {
    if (!out)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_arena_create: out is NULL");
    *out = NULL;
    if (!user)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_arena_create: config is NULL");
    carve_config full; /* the caller's fields, defaults for those its carve.h lacks */
    char bad[256];
    if (carve_config_read(user, &full, bad, sizeof(bad)) != 0)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_arena_create: %s", bad);
    const carve_config *c = &full;
    carve_status st = validate(c);
    if (st != CARVE_OK)
        return st;

    void *mem = NULL;
    if (posix_memalign(&mem, 64, sizeof(carve_arena)) != 0)
        return carve_fail_host(NULL, CARVE_ERR_OOM, 1, "carve_arena_create: host memory exhausted");
    carve_arena *a = memset(mem, 0, sizeof(carve_arena));
    a->cfg = *c;
    /* Cut between characters: a cut one would be invalid UTF-8 in messages
     * and in the snapshot's JSON. */
    const char *name = c->name ? c->name : "arena";
    size_t nlen = carve_utf8_prefix(name, sizeof(a->name) - 1);
    memcpy(a->name, name, nlen);
    a->name[nlen] = '\0';
    a->cfg.name = a->name;

    st = carve_backend_open(&a->be, c);
    if (st != CARVE_OK) {
        free(a);
        return carve_fail_host(NULL, st, carve_backend_host(), "carve_arena_create: %s backend: %s",
                               carve_backend_str(c->backend),
                          carve_backend_msg());
    }
    if (st == CARVE_OK && (carve_heap_init(a) != CARVE_OK || carve_mutex_init(&a->pools_lock) != 0 ||
                           carve_mutex_init(&a->oom_lock) != 0 || carve_cond_init(&a->oom_done) != 0 ||
                           carve_maps_init(&a->maps) != 0))
        st = carve_fail(NULL, CARVE_ERR_OOM, "carve_arena_create: cannot create locks");
    if (st == CARVE_OK)
        st = resolve_sizes(a, c);
    a->be.maps = a->vmm; /* what a reservation is, for the backend's driver ledger */
    if (st == CARVE_OK && a->vmm && !a->be.ops->commit)
        st = carve_fail(NULL, CARVE_ERR_INVALID, "carve_arena_create: the %s backend cannot map memory",
                        carve_backend_str(c->backend));
    if (st != CARVE_OK) {
        a->be.ops->destroy(&a->be);
        free(a);
        return st;
    }
    a->id = next_arena_id();
    a->cache_id = a->id;
    if (a->vmm) { /* reserve the address space now; memory is mapped on use */
        carve_mutex_lock(&a->heap.lock);
        st = carve_heap_grow(a, a->va_size, a->va_size, NULL);
        carve_mutex_unlock(&a->heap.lock);
        if (st != CARVE_OK) {
            char why[256];
            snprintf(why, sizeof(why), "%s", carve_note_get());
            int host = carve_note_is_host();
            carve_arena_destroy(a);
            return carve_fail_host(NULL, st, host, "carve_arena_create: reserving address space failed: %s", why);
        }
    } else if (a->initial > 0) {
        carve_mutex_lock(&a->heap.lock);
        int growth = a->growth;
        a->growth = 0; /* exactly one segment of initial bytes */
        st = carve_heap_grow(a, a->initial, a->initial, NULL);
        a->growth = growth;
        carve_mutex_unlock(&a->heap.lock);
        if (st != CARVE_OK) {
            char why[256];
            snprintf(why, sizeof(why), "%s", carve_note_get());
            int host = carve_note_is_host();
            carve_arena_destroy(a);
            return carve_fail_host(NULL, st, host, "carve_arena_create: reserving the initial block failed: %s",
                                   why);
        }
    }
    /* Last: what changes the process (peer access), once nothing else can
     * refuse the arena. */
    if (a->be.ops->grant && (st = a->be.ops->grant(&a->be)) != CARVE_OK) {
        char why[256];
        snprintf(why, sizeof(why), "%s", carve_backend_msg());
        int host = carve_backend_host();
        carve_arena_destroy(a);
        return carve_fail_host(NULL, st, host, "carve_arena_create: granting peer access failed: %s", why);
    }
    if (carve_live_add(a) != 0) {
        carve_arena_destroy(a);
        return carve_fail_host(NULL, CARVE_ERR_OOM, 1, "carve_arena_create: host memory exhausted");
    }
    *out = a;
    return CARVE_OK;
}

void carve_arena_abandon(carve_arena *a) {
    if (!a || !a->be.ops->abandon || __atomic_exchange_n(&a->abandoned, 1, __ATOMIC_ACQ_REL))
        return;
    /* The backend itself, not the fault-injecting layer in front of it:
     * nothing injected keeps a granule mapped now. */
    const carve_backend_ops *ops = a->be.faults.leaf ? a->be.faults.leaf : a->be.ops;
    ops->abandon(&a->be, 0); /* nothing more is taken from now on */
    for (carve_pool *p = CARVE_LOAD_ACQ(&a->pools); p; p = p->next_all) {
        carve_spin_lock(&p->lock); /* carve_alloc's hot path no longer hits (it checks no flag) */
        carve_pool_abandon(p);
        carve_spin_unlock(&p->lock);
    }
    if (a->vmm)
        carve_vmm_abandon(a, ops); /* what the records say is mapped */
    ops->abandon(&a->be, 1);       /* the address ranges */
}

void carve_arena_destroy(carve_arena *a) {
    if (!a)
        return;
    carve_live_remove(a);
    carve_backend_faults_off(&a->be); /* everything goes back, whatever was injected */
    /* Work queued before the last frees may still use the memory, and
     * unmapping or releasing it is not stream-ordered (cuMemUnmap and the
     * host and virtual backends do not wait; cudaFree happens to): wait for
     * the whole device first, as the waiting reclaim does. Nothing to wait
     * for when nothing is held (address space alone holds no memory). A
     * failed synchronization (a device lost, a runtime shutting down) cannot
     * be reported; the memory goes back regardless. An abandoned arena's
     * context is gone, and its work and captures with it: no context to
     * wait or ask in. */
    if (CARVE_LOAD(&a->heap.reserved) > 0 && !__atomic_load_n(&a->abandoned, __ATOMIC_ACQUIRE)) {
        /* Neither the wait nor giving memory back may happen while a stream
         * capture is underway (it would break): the capture ends first. */
        while (carve_capture_underway(a, NULL))
            (void)nanosleep(&(struct timespec){.tv_nsec = 200000}, NULL);
        /* carve_sim_set_capturing clears its mark under pools_lock: the
         * call that ended the capture has let go of the lock before the
         * arena (and the lock) is freed. */
        carve_mutex_lock(&a->pools_lock);
        carve_mutex_unlock(&a->pools_lock);
        (void)carve_wait_device(a, NULL);
    }
    carve_pools_destroy(a);
    carve_heap_destroy(a);
    carve_pagemap_destroy(&a->pmap);
    carve_maps_destroy(&a->maps);
    carve_mutex_destroy(&a->pools_lock);
    carve_mutex_destroy(&a->oom_lock);
    carve_cond_destroy(&a->oom_done);
    a->be.ops->destroy(&a->be);
    free(a); /* thread-local pool caches name it by id, which is never reused */
}

carve_status carve_arena_get_config_sized(const carve_arena *a, carve_config *out, size_t size) {
    if (!a || !out || !carve_config_size_ok(size)) {
        /* Outputs are set on failure too: zeros, where size says how many bytes are there to set. */
        if (out && carve_config_size_ok(size)) {
            memset(out, 0, size);
            out->size = size;
        }
        return carve_fail(a, CARVE_ERR_INVALID,
                          "carve_arena_get_config: NULL argument or a size of %zu (between %zu and %zu)", size,
                          (size_t)CARVE_CONFIG_SIZE_MIN, (size_t)CARVE_CONFIG_SIZE_MAX);
    }
    carve_config c = a->cfg;
    c.limit_bytes = CARVE_LOAD(&a->limit);
    c.initial_bytes = a->initial;
    c.min_grow_bytes = a->min_grow;
    c.limit_fraction = 0;
    c.initial_fraction = 0;
    c.vmm = a->vmm;
    if (c.fail_backend_status == CARVE_OK) /* what it stands for */
        c.fail_backend_status = CARVE_ERR_OOM;
    c.ipc = __atomic_load_n(&a->be.ipc, __ATOMIC_RELAXED); /* the backend may drop it (cuda_vmm.c) */
    carve_config_write(&c, out, size);
    return CARVE_OK;
}

carve_status carve_set_limit(carve_arena *a, size_t limit_bytes) {
    if (!a)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_set_limit: arena is NULL");
    if (!a->growth)
        return carve_fail(a, CARVE_ERR_INVALID,
                          "carve_set_limit: arena '%s' has growth off: it holds its one block, whatever the limit",
                          a->name);
    size_t limit = limit_bytes;
    if (limit == 0) /* as at creation: the device's memory, or unlimited */
        limit = a->be.kind == CARVE_BACKEND_CUDA || a->be.kind == CARVE_BACKEND_CUDA_DRIVER ? a->be.total_bytes
                                                                                          : SIZE_MAX;
    carve_status st = carve_limit_check("carve_set_limit", limit, 0, 0);
    if (st != CARVE_OK) { /* the message, now about this arena */
        char why[256];
        snprintf(why, sizeof(why), "%s", carve_last_error(NULL));
        return carve_fail(a, st, "%s", why);
    }
    size_t rlimit = limit == SIZE_MAX ? SIZE_MAX : carve_align_down(limit, CARVE_SEGMENT_GRANULE);
    /* Lower than what is reserved: cached memory goes back first, as
     * carve_empty_cache gives it (the device is synchronized). Not during a
     * stream capture carve sees: nothing may go back then, and a limit
     * below what stays reserved would never hold (what is held counts as
     * allowed), so the call is refused and the limit stays; asked again
     * once the capture began during the reclaim, too. */
    if (CARVE_LOAD(&a->heap.reserved) > rlimit) {
        if (!carve_capture_underway(a, NULL) &&
            (st = carve_reclaim(a, CARVE_RECLAIM_WAIT | CARVE_RECLAIM_RELEASE | CARVE_RECLAIM_ROOM, NULL)) != CARVE_OK)
            return carve_fail_host(a, st, carve_note_is_host(), "carve_set_limit: giving cached memory back failed: %s",
                                   carve_note_get());
        if (CARVE_LOAD(&a->heap.reserved) > rlimit && carve_capture_underway(a, NULL))
            return carve_fail(a, CARVE_ERR_BACKEND,
                              "carve_set_limit: the limit was not lowered to %zu bytes: a stream capture is underway, "
                              "during which cached memory cannot be given back (the synchronization would break it); "
                              "call again after the capture",
                              rlimit);
    }
    carve_mutex_lock(&a->heap.lock);
    /* The limit first, then what is held: inflight before reserved, all
     * sequentially consistent. A stream mapping granules meanwhile
     * (vmm.c's carve_vmm_map, the heap lock not held) adds to inflight,
     * then loads the limit, then adds to reserved before inflight drops:
     * it sees the new limit, or its bytes are counted here. */
    __atomic_store_n(&a->limit, rlimit, __ATOMIC_SEQ_CST);
    size_t held = __atomic_load_n(&a->heap.inflight, __ATOMIC_SEQ_CST);
    held += __atomic_load_n(&a->heap.reserved, __ATOMIC_SEQ_CST);
    a->limit_over = held > rlimit ? held : 0; /* live buffers keep what they hold */
    if (a->vmm) /* address space comes in steps of the limit, 64 GiB at most */
        a->va_step = rlimit < CARVE_VMM_VA_STEP ? rlimit : CARVE_VMM_VA_STEP;
    carve_mutex_unlock(&a->heap.lock);
    return CARVE_OK;
}

carve_status carve_empty_cache(carve_arena *a) {
    if (!a)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_empty_cache: arena is NULL");
    carve_status st = carve_reclaim(a, CARVE_RECLAIM_WAIT | CARVE_RECLAIM_RELEASE, NULL);
    if (st != CARVE_OK)
        return carve_fail_host(a, st, carve_note_is_host(), "carve_empty_cache: %s", carve_note_get());
    return CARVE_OK;
}
