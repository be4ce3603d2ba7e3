/*
 * faults.c — a backend in front of the backend: it numbers the calls that
 * can fail for real (allocations, event records, releases) and makes the
 * chosen ones fail the way a driver would, before they reach the real
 * backend, so that nothing is half done.
 *
 * The one idea: the layer swaps be->ops and keeps the real ops in
 * be->faults.leaf, calling them with the same carve_be, so a backend with
 * faults on is the same backend (same context, same device, same simulated
 * events) and costs nothing when faults are off: the ops pointer is then the
 * real one.
 */
#include "backend/faults.h"

#include <stdio.h>

static const char *const kind_name[] = {"", "allocation", "event record", "", "release"};

/* 1 (and the message written) when this counted call must fail. */
static int fails(carve_be *be, unsigned kind, const char *what) {
    carve_faults *f = &be->faults;
    if (!(f->kinds & kind))
        return 0;
    unsigned long n = __atomic_add_fetch(&f->calls, 1, __ATOMIC_RELAXED);
    int due = (f->at && n >= f->at && n - f->at < f->times) || (f->every && n % f->every == 0);
    if (!due)
        return 0;
    __atomic_add_fetch(&f->failed, 1, __ATOMIC_RELAXED);
    carve_backend_fail("injected failure of backend call %lu (%s: %s)", n, kind_name[kind], what);
    carve_backend_code(0, 0); /* not the driver's */
    return 1;
}

static carve_status f_reserve(carve_be *be, size_t size, uintptr_t *base) {
    if (fails(be, CARVE_FAULT_ALLOC, "reserve"))
        return be->faults.status;
    return be->faults.leaf->reserve(be, size, base);
}

static carve_status f_release(carve_be *be, uintptr_t base, size_t size) {
    if (fails(be, CARVE_FAULT_RELEASE, "release"))
        return CARVE_ERR_BACKEND;
    return be->faults.leaf->release(be, base, size);
}

static carve_status f_commit(carve_be *be, uintptr_t addr, size_t size, size_t piece) {
    if (fails(be, CARVE_FAULT_ALLOC, "map"))
        return be->faults.status;
    return be->faults.leaf->commit(be, addr, size, piece);
}

/* One counted call a mapping, as the driver unmaps them one at a time: the
 * k-th mapping of a run can be refused, the ones before it gone. */
static carve_status f_decommit(carve_be *be, uintptr_t addr, size_t size, size_t piece, size_t *done) {
    if (!(be->faults.kinds & CARVE_FAULT_RELEASE))
        return be->faults.leaf->decommit(be, addr, size, piece, done);
    *done = 0;
    for (size_t off = 0; off < size; off += piece) {
        if (fails(be, CARVE_FAULT_RELEASE, "unmap"))
            return CARVE_ERR_BACKEND;
        size_t d = 0;
        carve_status st = be->faults.leaf->decommit(be, addr + off, piece, piece, &d);
        *done += d;
        if (st != CARVE_OK)
            return st;
    }
    return CARVE_OK;
}

static void f_recycle(carve_be *be, int on) {
    if (be->faults.leaf->recycle)
        be->faults.leaf->recycle(be, on);
}

static carve_status f_event_record(carve_be *be, carve_stream s, void **ev) {
    if (fails(be, CARVE_FAULT_EVENT, "record")) {
        *ev = NULL;
        return CARVE_ERR_BACKEND;
    }
    return be->faults.leaf->event_record(be, s, ev);
}

static carve_status f_event_follow(carve_be *be, void *user, void **ev) {
    *ev = NULL;
    if (!be->faults.leaf->event_follow) {
        carve_backend_fail("the %s backend cannot follow a program's event", carve_backend_str(be->kind));
        return CARVE_ERR_INVALID;
    }
    if (fails(be, CARVE_FAULT_EVENT, "record"))
        return CARVE_ERR_BACKEND;
    return be->faults.leaf->event_follow(be, user, ev);
}

static int f_capturing(carve_be *be, carve_stream s) {
    return be->faults.leaf->capturing ? be->faults.leaf->capturing(be, s) : 0;
}
static int f_context_capturing(carve_be *be) {
    return be->faults.leaf->context_capturing ? be->faults.leaf->context_capturing(be) : 0;
}

static int f_event_query(carve_be *be, void *ev) { return be->faults.leaf->event_query(be, ev); }
static carve_status f_event_sync(carve_be *be, void *ev) { return be->faults.leaf->event_sync(be, ev); }
static carve_status f_device_sync(carve_be *be) { return be->faults.leaf->device_sync(be); }
static void f_event_release(carve_be *be, void *ev) { be->faults.leaf->event_release(be, ev); }
static carve_status f_export(carve_be *be, uintptr_t addr, size_t size, carve_ipc_desc *desc, int **fds) {
    if (!be->faults.leaf->export_buffer) {
        carve_backend_fail("the %s backend cannot share memory with other processes", carve_backend_str(be->kind));
        return CARVE_ERR_INVALID;
    }
    return be->faults.leaf->export_buffer(be, addr, size, desc, fds);
}
static carve_status f_export_pieces(carve_be *be, const carve_be_piece *pieces, size_t n, int **fds) {
    if (!be->faults.leaf->export_pieces) {
        carve_backend_fail("the %s backend cannot share memory with other processes", carve_backend_str(be->kind));
        return CARVE_ERR_INVALID;
    }
    return be->faults.leaf->export_pieces(be, pieces, n, fds);
}
/* Not a counted call: injected failures stand for memory and events. */
static carve_status f_grant(carve_be *be) { return be->faults.leaf->grant ? be->faults.leaf->grant(be) : CARVE_OK; }
static void f_abandon(carve_be *be, int stage) {
    if (be->faults.leaf->abandon)
        be->faults.leaf->abandon(be, stage);
}
static void f_destroy(carve_be *be) {
    const carve_backend_ops *leaf = be->faults.leaf;
    be->ops = leaf;
    be->faults.leaf = NULL;
    leaf->destroy(be);
}

/* Two tables: a backend without commit/decommit keeps them NULL, which the
 * engine reads as "cannot map". */
static const carve_backend_ops fault_ops = {
    .reserve = f_reserve, .release = f_release, .event_record = f_event_record,
    .event_follow = f_event_follow, .event_query = f_event_query, .event_sync = f_event_sync,
    .device_sync = f_device_sync, .capturing = f_capturing, .context_capturing = f_context_capturing,
    .event_release = f_event_release, .destroy = f_destroy, .export_buffer = f_export, .grant = f_grant,
};
static const carve_backend_ops fault_ops_mapping = {
    .reserve = f_reserve, .release = f_release, .commit = f_commit, .decommit = f_decommit,
    .recycle = f_recycle, .event_record = f_event_record, .event_follow = f_event_follow,
    .event_query = f_event_query, .event_sync = f_event_sync,
    .device_sync = f_device_sync, .capturing = f_capturing, .context_capturing = f_context_capturing,
    .event_release = f_event_release, .destroy = f_destroy, .export_buffer = f_export,
    .export_pieces = f_export_pieces, .grant = f_grant, .abandon = f_abandon,
};

void carve_backend_faults_on(carve_be *be, unsigned long at, unsigned long times, unsigned long every,
                             unsigned kinds, carve_status status) {
    carve_faults *f = &be->faults;
    if (!f->leaf) {
        f->leaf = be->ops;
        be->ops = be->ops->commit ? &fault_ops_mapping : &fault_ops;
    }
    f->at = at;
    f->times = times ? times : 1;
    f->every = every;
    f->kinds = kinds;
    f->status = status == CARVE_ERR_BACKEND ? CARVE_ERR_BACKEND : CARVE_ERR_OOM;
}

void carve_backend_faults_off(carve_be *be) {
    if (be->faults.leaf) {
        be->ops = be->faults.leaf;
        be->faults.leaf = NULL;
    }
}
