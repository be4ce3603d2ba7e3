/*
 * snapshot.c — carve_snapshot_json: the arena as one JSON document
 * (schema in docs/snapshot.md).
 *
 * Taken under every lock (pools in list order, then the heap) so the
 * picture is consistent. Addresses are hex strings ("0x..." always, the
 * default stream's "0x0" included), because JSON numbers lose precision
 * above 2^53; sizes and offsets are plain numbers. The one string that
 * comes from the user, the arena's name, is escaped to valid UTF-8
 * whatever bytes it holds (carve_strbuf_json_string).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "engine/error.h"
#include "engine/pool.h"
#include "engine/stats.h"

static void stats_json(carve_strbuf *b, const carve_stats *s) {
    carve_strbuf_printf(b,
              "{\"requested_bytes\":%zu,\"requested_bytes_peak\":%zu,\"allocated_bytes\":%zu,"
              "\"allocated_bytes_peak\":%zu,\"reserved_bytes\":%zu,\"reserved_bytes_peak\":%zu,"
              "\"cached_bytes\":%zu,\"largest_free_block\":%zu,\"num_segments\":%zu,\"num_streams\":%zu,"
              "\"num_live\":%llu,\"num_allocs\":%llu,\"num_frees\":%llu,\"num_backend_allocs\":%llu,"
              "\"num_backend_frees\":%llu,\"num_ooms\":%llu,\"num_syncs\":%llu,\"num_event_records\":%llu,"
              "\"num_event_queries\":%llu,\"num_alloc_retries\":%llu}",
              s->requested_bytes, s->requested_bytes_peak, s->allocated_bytes, s->allocated_bytes_peak,
              s->reserved_bytes, s->reserved_bytes_peak, s->cached_bytes, s->largest_free_block,
              s->num_segments, s->num_streams, (unsigned long long)s->num_live,
              (unsigned long long)s->num_allocs, (unsigned long long)s->num_frees,
              (unsigned long long)s->num_backend_allocs, (unsigned long long)s->num_backend_frees,
              (unsigned long long)s->num_ooms, (unsigned long long)s->num_syncs,
              (unsigned long long)s->num_event_records, (unsigned long long)s->num_event_queries,
              (unsigned long long)s->num_alloc_retries);
}

/* An address or stream handle as the document's "0x..." string (printf's
 * %p would write "(nil)" for the default stream, %#lx "0" for zero). */
#define ADDR_LEN 24
static const char *addr(char buf[ADDR_LEN], const void *p) {
    snprintf(buf, ADDR_LEN, "0x%" PRIxPTR, (uintptr_t)p);
    return buf;
}

static const char *block_state(const carve_block *b) {
    switch (b->state) {
    case CARVE_B_USED: return "used";
    case CARVE_B_PENDING: return "pending";
    case CARVE_B_HOT: return "cached";
    case CARVE_B_UNMAPPED: return "unmapped";
    default: return "free";
    }
}

static void segments_json(carve_strbuf *b, const carve_arena *a) {
    char x[ADDR_LEN];
    carve_strbuf_printf(b, "[");
    for (const carve_segment *s = a->heap.segs; s; s = s->next) {
        size_t mapped = 0; /* virtual-memory mode: what the spans map (free ranges hold nothing) */
        for (const carve_block *r = s->first; r; r = r->next)
            if (r->state == CARVE_B_SPAN)
                mapped += r->size - r->u.r.unmapped * CARVE_SEGMENT_GRANULE;
        carve_strbuf_printf(b, "%s{\"address\":\"%s\",\"size\":%zu,\"reserved_size\":%zu,", s == a->heap.segs ? "" : ",",
                  addr(x, (void *)s->base), s->size, a->vmm ? mapped : s->raw_size);
        if (a->vmm)
            carve_strbuf_printf(b, "\"address_space\":%zu,", s->raw_size);
        carve_strbuf_printf(b, "\"serial\":%llu,\"ranges\":[", (unsigned long long)s->serial);
        for (const carve_block *r = s->first; r; r = r->next) {
            carve_strbuf_printf(b, "%s{\"offset\":%zu,\"size\":%zu,", r == s->first ? "" : ",", (size_t)(r->addr - s->base),
                      r->size);
            if (r->state == CARVE_B_FREE) {
                carve_strbuf_printf(b, "\"state\":\"free\",\"pending_stream\":");
                if (r->u.r.event)
                    carve_strbuf_printf(b, "\"%s\"}", addr(x, r->stream));
                else
                    carve_strbuf_printf(b, "null}");
                continue;
            }
            carve_strbuf_printf(b, "\"state\":\"span\",\"stream\":\"%s\",\"class\":\"%s\",\"blocks\":[", addr(x, r->stream),
                      r->cls == CARVE_CLASS_SMALL ? "small" : "large");
            for (const carve_block *k = r->u.r.first; k; k = k->next) {
                carve_strbuf_printf(b, "%s{\"offset\":%zu,\"size\":%zu,\"state\":\"%s\",\"stream\":\"%s\"",
                          k == r->u.r.first ? "" : ",", (size_t)(k->addr - s->base), k->size, block_state(k),
                          addr(x, r->stream));
                if (k->state == CARVE_B_USED)
                    carve_strbuf_printf(b, ",\"requested\":%zu", carve_block_requested(k));
                if (k->state == CARVE_B_USED && (k->flags & CARVE_BF_TAG)) /* a string: JSON numbers lose bits */
                    carve_strbuf_printf(b, ",\"tag\":\"%#llx\"", (unsigned long long)k->u.b.tag);
                carve_strbuf_printf(b, "}");
            }
            carve_strbuf_printf(b, "]}");
        }
        carve_strbuf_printf(b, "]}");
    }
    carve_strbuf_printf(b, "]");
}

carve_status carve_snapshot_json(const carve_arena *ca, char **out) {
    if (out)
        *out = NULL;
    if (!ca || !out)
        return carve_fail(ca, CARVE_ERR_INVALID, "carve_snapshot_json: NULL argument");
    carve_arena *a = (carve_arena *)ca;
    carve_stats st;
    carve_strbuf b = {0};
    char lim[32], x[ADDR_LEN];
    carve_strbuf_printf(&b, "{\"carve_snapshot\":1,\"version\":\"%s\",\"arena\":{\"name\":", carve_version());
    carve_strbuf_json_string(&b, a->name);
    size_t limit = CARVE_LOAD(&a->limit); /* carve_set_limit may move it meanwhile */
    if (limit == SIZE_MAX)
        snprintf(lim, sizeof(lim), "null");
    else
        snprintf(lim, sizeof(lim), "%zu", limit);
    carve_strbuf_printf(&b,
              ",\"backend\":\"%s\",\"device\":%d,\"growth\":%s,\"vmm\":%s,\"initial_bytes\":%zu,\"limit_bytes\":%s,"
              "\"min_grow_bytes\":%zu,\"granule\":%zu,\"alignment\":%u},\"stats\":",
              carve_backend_str(a->be.kind), a->be.device, a->growth ? "true" : "false", a->vmm ? "true" : "false",
              a->initial, lim,
              a->min_grow, (size_t)CARVE_SEGMENT_GRANULE, CARVE_ALIGNMENT);

    /* Consistent picture, statistics included: every pool, then the heap. */
    carve_mutex_lock(&a->pools_lock); /* no new pool (which could own a span) meanwhile */
    carve_pool *first = carve_pools_first(a);
    for (carve_pool *p = first; p; p = p->next_all)
        carve_spin_lock(&p->lock);
    carve_mutex_lock(&a->heap.lock);
    carve_stats_collect(a, &st, 1);
    stats_json(&b, &st);
    carve_strbuf_printf(&b, ",\"streams\":[");
    for (carve_pool *p = first; p; p = p->next_all)
        carve_strbuf_printf(&b,
                  "%s{\"stream\":\"%s\",\"allocated_bytes\":%zu,\"requested_bytes\":%zu,\"allocated_bytes_peak\":%zu,"
                  "\"live\":%llu,\"spans\":%zu,\"pending\":%zu}",
                  p == first ? "" : ",", addr(x, p->stream), p->allocated, p->requested, p->allocated_peak,
                  (unsigned long long)(p->nallocs - p->nfrees), p->nspans, p->npending);
    carve_strbuf_printf(&b, "],\"segments\":");
    segments_json(&b, a);
    carve_mutex_unlock(&a->heap.lock);
    for (carve_pool *p = first; p; p = p->next_all)
        carve_spin_unlock(&p->lock);
    carve_mutex_unlock(&a->pools_lock);
    carve_strbuf_printf(&b, "}\n");
    if (b.oom) {
        free(b.p);
        return carve_fail_host(a, CARVE_ERR_OOM, 1, "carve_snapshot_json: host memory exhausted");
    }
    *out = b.p;
    return CARVE_OK;
}

void carve_snapshot_free(char *json) { free(json); }
