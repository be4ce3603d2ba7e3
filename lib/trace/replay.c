/*
 * replay.c — a loaded trace run through carve_alloc / carve_free.
 *
 * The timed loop does nothing but the two calls and the store of the
 * returned pointer into the slot array, so events / time measures the
 * allocator and not the tool. It runs in chunks: each chunk of events is
 * decoded from the trace's compact store into a small array first, untimed,
 * then replayed, timed, and progress is reported between chunks. A buffer
 * whose allocation ran out of memory keeps a NULL slot, so its free is
 * skipped.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/defaults.h"
#include "carve_trace.h"
#include "engine/error.h"

#define CHUNK ((size_t)1 << 16)          /* events decoded at once (a multiple of 4096) */
#define PROGRESS_EVERY ((size_t)1 << 20) /* events between progress reports */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int bad_args(const carve_trace *t, const carve_config *cfg, const carve_replay_streams *rs) {
    return !t || !cfg || !rs || !rs->s || rs->n < t->nstreams || (t->n && !t->store);
}

static carve_trace_event *chunk_new(void) { return malloc(CHUNK * sizeof(carve_trace_event)); }

/* ---- the timed replay -------------------------------------------------- */

/* One timed pass of t on arena a; counts add up in res. buf holds CHUNK events. */
static void replay_pass(carve_arena *a, const carve_trace *t, carve_stream const *streams, void **slots, int stop,
                        carve_trace_event *buf, carve_progress_fn progress, void *arg, carve_replay_result *res) {
    uint64_t nooms = 0, nerrors = 0;
    size_t i = 0, reported = 0;
    double seconds = 0;
    while (i < t->n) {
        size_t got = carve_trace_events(t, i, buf, CHUNK), k = 0;
        double t0 = now_s();
        for (; k < got; k++) {
            const carve_trace_event *e = &buf[k];
            if (e->op == 'a') {
                carve_status s = carve_alloc(a, (size_t)e->size, streams[e->stream], &slots[e->slot]);
                if (s != CARVE_OK) {
                    if (s == CARVE_ERR_OOM) {
                        nooms++;
                        if (stop)
                            break;
                    } else {
                        nerrors++;
                    }
                }
            } else if (slots[e->slot]) {
                nerrors += carve_free(a, slots[e->slot]) != CARVE_OK;
            }
        }
        seconds += now_s() - t0;
        i += k;
        if ((stop && nooms) || got == 0)
            break;
        if (progress && i < t->n && i - reported >= PROGRESS_EVERY) {
            char msg[96];
            snprintf(msg, sizeof(msg), "replayed %zu of %zu events (%.0f%%)", i, t->n,
                     100.0 * (double)i / (double)t->n);
            progress(arg, msg);
            reported = i;
        }
    }
    res->done = i;
    res->seconds += seconds;
    res->nooms += nooms;
    res->nerrors += nerrors;
    if (nerrors && !res->error[0])
        snprintf(res->error, sizeof(res->error), "%s", carve_last_error(a));
}

/* Free what a pass left live (the trace's never-freed buffers), untimed.
 * The timed loop leaves freed slots as they were, so which slots are live
 * comes from the events themselves. */
static void free_live(carve_arena *a, const carve_trace *t, void **slots, carve_trace_event *buf,
                      carve_replay_result *res) {
    uint8_t *live = calloc(t->nslots ? t->nslots : 1, 1);
    if (!live) { /* cannot tell: leave them (the arena's destruction takes them) */
        res->nerrors++;
        snprintf(res->error, sizeof(res->error), "host memory exhausted between warm passes");
        return;
    }
    for (size_t i = 0, got; (got = carve_trace_events(t, i, buf, CHUNK)) > 0; i += got)
        for (size_t k = 0; k < got; k++)
            live[buf[k].slot] = buf[k].op == 'a';
    for (size_t k = 0; k < t->nslots; k++) {
        if (live[k] && slots[k])
            res->nerrors += carve_free(a, slots[k]) != CARVE_OK;
        slots[k] = NULL;
    }
    free(live);
}

static int cmp_seconds(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* The smallest carve_replay_driver taken: its size and the cold ledger. */
#define DRIVER_SIZE_MIN offsetof(carve_replay_driver, warm_calls)

carve_status carve_replay_run_driver(const carve_trace *t, const carve_config *cfg, const carve_replay_streams *rs,
                                    void **slots, unsigned flags, unsigned warm_passes, carve_progress_fn progress,
                                    void *arg, carve_replay_result *res, carve_replay_warm *warm,
                                    carve_replay_driver *drv) {
    if (!res)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_replay_run: res is NULL");
    memset(res, 0, sizeof(*res));
    if (warm)
        memset(warm, 0, sizeof(*warm));
    size_t dsize = drv ? drv->size : 0;
    if (drv && (dsize < DRIVER_SIZE_MIN || dsize > 4096))
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_replay_run: a carve_replay_driver of %zu bytes (from %zu to 4096)",
                          dsize, (size_t)DRIVER_SIZE_MIN);
    carve_replay_driver d;
    carve_replay_driver_init(&d);
    if (drv)
        memset(drv, 0, dsize);
    if (bad_args(t, cfg, rs) || (t->nslots && !slots) || (warm_passes && !warm))
        return carve_fail(NULL, CARVE_ERR_INVALID,
                          "carve_replay_run: NULL argument, or fewer streams than the trace uses");
    double *secs = NULL;
    carve_trace_event *buf = chunk_new();
    if (!buf || (warm_passes && !(secs = calloc(warm_passes, sizeof(double))))) {
        free(buf);
        return carve_fail_host(NULL, CARVE_ERR_OOM, 1, "carve_replay_run: host memory exhausted");
    }
    carve_arena *a;
    carve_status st = carve_arena_create(cfg, &a);
    if (st != CARVE_OK) {
        free(secs);
        free(buf);
        return st;
    }
    for (size_t k = 0; k < t->nslots; k++)
        slots[k] = NULL;
    int stop = flags & CARVE_REPLAY_STOP_AT_OOM;
    replay_pass(a, t, rs->s, slots, stop, buf, progress, arg, res);
    carve_get_stats_sized(a, (carve_stats *)&res->stats, sizeof(res->stats)); /* the 1.0 fields */
    carve_stats cold;
    carve_get_stats(a, &cold);
    memcpy(d.cold_calls, cold.driver_calls, sizeof(d.cold_calls));
    memcpy(d.cold_mappings, cold.driver_mappings, sizeof(d.cold_mappings));
    memcpy(d.cold_bytes, cold.driver_bytes, sizeof(d.cold_bytes));
    d.cold_model_ns = cold.driver_model_ns;
    carve_config eff;
    if (carve_arena_get_config(a, &eff) == CARVE_OK) {
        res->initial_bytes = eff.initial_bytes;
        res->vmm = eff.vmm;
    }
    if (warm_passes) {
        /* The cache stays: each pass starts from what the last one left. */
        carve_replay_result w;
        memset(&w, 0, sizeof(w));
        free_live(a, t, slots, buf, res);
        carve_stats s0, s1;
        carve_get_stats(a, &s0);
        for (unsigned k = 0; k < warm_passes; k++) {
            double before = w.seconds;
            replay_pass(a, t, rs->s, slots, 0, buf, progress, arg, &w);
            secs[k] = w.seconds - before;
            free_live(a, t, slots, buf, &w);
        }
        carve_get_stats(a, &s1);
        qsort(secs, warm_passes, sizeof(double), cmp_seconds);
        warm->passes = warm_passes;
        warm->seconds = warm_passes % 2 ? secs[warm_passes / 2] : (secs[warm_passes / 2 - 1] + secs[warm_passes / 2]) / 2;
        warm->backend_allocs = s1.num_backend_allocs - s0.num_backend_allocs;
        warm->backend_frees = s1.num_backend_frees - s0.num_backend_frees;
        warm->event_records = s1.num_event_records - s0.num_event_records;
        warm->event_queries = s1.num_event_queries - s0.num_event_queries;
        warm->syncs = s1.num_syncs - s0.num_syncs;
        warm->reserved_peak_bytes = s1.reserved_bytes_peak;
        warm->nooms = w.nooms;
        for (int k = 0; k < CARVE_DRIVER_SLOTS; k++) {
            d.warm_calls[k] = s1.driver_calls[k] - s0.driver_calls[k];
            d.warm_mappings[k] = s1.driver_mappings[k] - s0.driver_mappings[k];
            d.warm_bytes[k] = s1.driver_bytes[k] - s0.driver_bytes[k];
        }
        d.warm_model_ns = carve_driver_model_ns(d.warm_calls, d.warm_mappings, d.warm_bytes);
        res->nerrors += w.nerrors;
        if (w.nerrors && !res->error[0])
            snprintf(res->error, sizeof(res->error), "%s", w.error);
    }
    free(secs);
    free(buf);
    carve_arena_destroy(a);
    if (drv)
        memcpy(drv, &d, dsize < sizeof(d) ? dsize : sizeof(d));
    if (drv)
        drv->size = dsize;
    return CARVE_OK;
}

carve_status carve_replay_run_warm(const carve_trace *t, const carve_config *cfg, const carve_replay_streams *rs,
                                  void **slots, unsigned flags, unsigned warm_passes, carve_progress_fn progress,
                                  void *arg, carve_replay_result *res, carve_replay_warm *warm) {
    return carve_replay_run_driver(t, cfg, rs, slots, flags, warm_passes, progress, arg, res, warm, NULL);
}

carve_status carve_replay_run(const carve_trace *t, const carve_config *cfg, const carve_replay_streams *rs,
                             void **slots, unsigned flags, carve_progress_fn progress, void *arg,
                             carve_replay_result *res) {
    return carve_replay_run_warm(t, cfg, rs, slots, flags, 0, progress, arg, res, NULL);
}

/* ---- the recording replay ---------------------------------------------- */

void carve_replay_rec_free(carve_replay_rec *rec) {
    if (!rec)
        return;
    free(rec->addr);
    free(rec->requested);
    free(rec->allocated);
    free(rec->reserved);
    memset(rec, 0, sizeof(*rec));
}

carve_status carve_replay_record(const carve_trace *t, const carve_config *cfg, const carve_replay_streams *rs,
                                size_t ncols, carve_replay_rec *rec, carve_replay_result *res) {
    if (!rec || !res)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_replay_record: NULL argument");
    memset(rec, 0, sizeof(*rec));
    memset(res, 0, sizeof(*res));
    if (bad_args(t, cfg, rs))
        return carve_fail(NULL, CARVE_ERR_INVALID,
                          "carve_replay_record: NULL argument, or fewer streams than the trace uses");
    if (ncols == 0)
        ncols = 1;
    rec->ncols = ncols;
    rec->addr = calloc(t->nallocs ? t->nallocs : 1, sizeof(*rec->addr));
    rec->requested = calloc(ncols, sizeof(uint64_t));
    rec->allocated = calloc(ncols, sizeof(uint64_t));
    rec->reserved = calloc(ncols, sizeof(uint64_t));
    void **slots = calloc(t->nslots ? t->nslots : 1, sizeof(void *));
    uint64_t *slot_size = calloc(t->nslots ? t->nslots : 1, sizeof(uint64_t));
    unsigned char *touched = calloc(ncols, 1);
    carve_trace_event *buf = chunk_new();
    carve_arena *a = NULL;
    carve_status st = CARVE_OK;
    if (!rec->addr || !rec->requested || !rec->allocated || !rec->reserved || !slots || !slot_size || !touched ||
        !buf)
        st = carve_fail_host(NULL, CARVE_ERR_OOM, 1, "carve_replay_record: host memory exhausted");
    else
        st = carve_arena_create(cfg, &a);
    if (st != CARVE_OK) {
        free(slots);
        free(slot_size);
        free(touched);
        free(buf);
        carve_replay_rec_free(rec);
        return st;
    }
    uint64_t live = 0;
    size_t nalloc = 0;
    double t0 = now_s();
    for (size_t i = 0, got = 0, k = 0; i < t->n; i++, k++) {
        if (k == got) {
            got = carve_trace_events(t, i, buf, CHUNK);
            k = 0;
            if (!got)
                break;
        }
        const carve_trace_event *e = &buf[k];
        if (e->op == 'a') {
            carve_status s = carve_alloc(a, (size_t)e->size, rs->s[e->stream], &slots[e->slot]);
            if (s == CARVE_ERR_OOM)
                res->nooms++;
            else if (s != CARVE_OK)
                res->nerrors++;
            rec->addr[nalloc++] = (uintptr_t)slots[e->slot];
            slot_size[e->slot] = slots[e->slot] ? e->size : 0;
            live += slot_size[e->slot];
        } else if (slots[e->slot]) {
            res->nerrors += carve_free(a, slots[e->slot]) != CARVE_OK;
            slots[e->slot] = NULL;
            live -= slot_size[e->slot];
        }
        size_t c = (size_t)((double)i * (double)ncols / (double)t->n);
        if (c >= ncols)
            c = ncols - 1;
        touched[c] = 1;
        uint64_t al = carve_memory_allocated(a), re = carve_memory_reserved(a);
        if (live > rec->requested[c])
            rec->requested[c] = live;
        if (al > rec->allocated[c])
            rec->allocated[c] = al;
        if (re > rec->reserved[c])
            rec->reserved[c] = re;
    }
    res->seconds = now_s() - t0;
    res->done = t->n;
    /* With fewer events than columns, a column without an event shows the
     * state left by the one before it. */
    for (size_t c = 1; c < ncols; c++)
        if (!touched[c]) {
            rec->requested[c] = rec->requested[c - 1];
            rec->allocated[c] = rec->allocated[c - 1];
            rec->reserved[c] = rec->reserved[c - 1];
        }
    free(touched);
    free(buf);
    carve_get_stats_sized(a, (carve_stats *)&res->stats, sizeof(res->stats)); /* the 1.0 fields */
    carve_arena_destroy(a);
    free(slots);
    free(slot_size);
    return CARVE_OK;
}

/* ---- the smallest single block ----------------------------------------- */

/* One probe: 1 when t replays in a single block of cap bytes without an OOM,
 * 0 when it runs out, -1 (with *st) when the arena cannot be made. base is
 * a full configuration of this library's size (carve_config_read). */
static int probe(const carve_trace *t, const carve_config *base, const carve_replay_streams *rs,
                 void **slots, size_t cap, carve_progress_fn progress, void *arg, unsigned n,
                 carve_status *st) {
    carve_config cfg = *base;
    cfg.backend = CARVE_BACKEND_VIRTUAL;
    cfg.growth = 0;
    cfg.initial_bytes = cap;
    cfg.limit_bytes = cap;
    cfg.initial_fraction = 0;
    cfg.limit_fraction = 0;
    cfg.vmm = 0; /* a single block is one segment: the answer does not depend on the mode */
    carve_replay_result r;
    *st = carve_replay_run(t, &cfg, rs, slots, CARVE_REPLAY_STOP_AT_OOM, NULL, NULL, &r);
    if (*st == CARVE_ERR_OOM) { /* the block itself cannot be had: as good as an OOM */
        *st = CARVE_OK;
        r.nooms = 1;
        r.done = 0;
    } else if (*st != CARVE_OK) {
        return -1;
    }
    if (progress) {
        char msg[160];
        if (r.nooms)
            snprintf(msg, sizeof(msg), "min-capacity probe %u: %zu bytes (%.1f MiB): OOM at event %zu of %zu",
                     n, cap, (double)cap / 1048576.0, r.done + 1, t->n);
        else
            snprintf(msg, sizeof(msg), "min-capacity probe %u: %zu bytes (%.1f MiB): fits", n, cap,
                     (double)cap / 1048576.0);
        progress(arg, msg);
    }
    return r.nooms == 0;
}

carve_status carve_replay_min_capacity(const carve_trace *t, const carve_config *base, void **slots,
                                      carve_progress_fn progress, void *arg, carve_capacity_result *out) {
    const size_t g = CARVE_SEGMENT_GRANULE;
    const size_t max_cap = (size_t)1 << 52; /* beyond any device: give up there */
    if (!out)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_replay_min_capacity: out is NULL");
    memset(out, 0, sizeof(*out));
    if (!t || !base || (t->nslots && !slots))
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_replay_min_capacity: NULL argument");
    /* The caller's carve_config may be smaller or larger than this
     * library's (base->size says): read it by the size rule into one of
     * ours before changing fields in a copy. */
    carve_config full;
    char why[256];
    if (carve_config_read(base, &full, why, sizeof(why)) != 0)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_replay_min_capacity: %s", why);
    base = &full;
    carve_replay_streams rs;
    carve_status st = carve_replay_streams_open(&rs, t->nstreams, CARVE_BACKEND_VIRTUAL, 0);
    if (st != CARVE_OK)
        return st;
    uint64_t peak = t->peak_requested;
    size_t lo = peak > max_cap ? max_cap + g : (size_t)((peak + g - 1) / g * g);
    if (lo == 0)
        lo = g;
    out->lower_bound = lo;
    if (lo > max_cap)
        goto done;
    int r = probe(t, base, &rs, slots, lo, progress, arg, ++out->probes, &st);
    if (r < 0)
        goto done;
    if (r == 1) {
        out->bytes = lo;
        goto done;
    }
    /* Gallop up from the lower bound (+1/8, +1/4, +1/2, x2, ...) to a
     * capacity that fits, then bisect between the last failure and it. */
    size_t step = lo / 8 / g * g;
    if (step < g)
        step = g;
    size_t hi;
    for (;;) {
        if (lo > max_cap - step)
            goto done;
        hi = lo + step;
        r = probe(t, base, &rs, slots, hi, progress, arg, ++out->probes, &st);
        if (r < 0)
            goto done;
        if (r == 1)
            break;
        lo = hi;
        step *= 2;
    }
    while (hi - lo > g) {
        size_t mid = lo + (hi - lo) / 2 / g * g;
        r = probe(t, base, &rs, slots, mid, progress, arg, ++out->probes, &st);
        if (r < 0)
            goto done;
        if (r == 1)
            hi = mid;
        else
            lo = mid;
    }
    out->bytes = hi;
done:
    carve_replay_streams_close(&rs);
    return st;
}
