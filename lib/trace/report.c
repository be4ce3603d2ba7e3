/*
 * report.c — what a replay measured, as aligned text for people or as one
 * JSON object for programs (its keys are documented in docs/replay.md).
 *
 * The one idea: the front ends only measure; every word and key of the
 * report is here, so carve-replay, carve-run and the Python package say the
 * same thing the same way.
 */
#include <stdint.h>
#include <stdio.h>

#include "base/text.h"
#include "base/utf8.h"
#include "carve_trace.h"

double carve_replay_footprint(const carve_replay_report *r) {
    if (!r || !r->trace || !r->result || !r->trace->peak_requested)
        return 0;
    return (double)r->result->stats.reserved_bytes_peak / (double)r->trace->peak_requested;
}

/* s as a JSON string: quotes, backslashes and control characters escaped,
 * and U+FFFD for bytes that are not UTF-8 (a file name may hold any byte
 * but '/' and NUL). */
static void json_string(FILE *out, const char *s) {
    fputc('"', out);
    while (s && *s) {
        unsigned char c = (unsigned char)*s;
        size_t n = carve_utf8_char(s);
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            fprintf(out, "\\u%04x", c);
        else if (n == 0)
            fputs("\\ufffd", out);
        else
            fwrite(s, 1, n, out);
        s += n ? n : 1;
    }
    fputc('"', out);
}

/* Driver time per event, in ns, of a modeled total over n events. */
static double per_event(uint64_t ns, double n) { return n > 0 ? (double)ns / n : 0.0; }

/* The ledger's counts by kind as a JSON object {"cuMemCreate": n, ...}
 * (kinds never called left out), each divided by div. */
static void json_calls(FILE *out, const char *key, const uint64_t *calls, double div) {
    fprintf(out, ", \"%s\": {", key);
    int first = 1;
    for (int k = 0; k < CARVE_DRV_KINDS; k++)
        if (calls[k]) {
            fprintf(out, "%s\"%s\": %.*f", first ? "" : ", ", carve_driver_op_name(k), div > 1 ? 3 : 0,
                    (double)calls[k] / div);
            first = 0;
        }
    fputc('}', out);
}

static void write_json(FILE *out, const carve_replay_report *p, const carve_replay_driver *d) {
    const carve_trace *t = p->trace;
    const carve_replay_result *r = p->result;
    const carve_stats_1_0 *s = &r->stats;
    const carve_config *c = p->cfg;
    fputs("{\"trace\": ", out);
    json_string(out, p->trace_name);
    fprintf(out, ", \"backend\": \"%s\", \"growth\": %d, \"vmm\": %d, \"initial_bytes\": %zu, \"limit_bytes\": %zu",
            carve_backend_str(c->backend), c->growth ? 1 : 0, r->vmm ? 1 : 0, r->initial_bytes,
            s->limit_bytes == SIZE_MAX ? (size_t)0 : s->limit_bytes);
    fprintf(out, ", \"events\": %zu, \"allocs\": %zu, \"frees\": %zu, \"streams\": %u, \"threads\": %u, \"slots\": %zu",
            t->n, t->nallocs, t->nfrees, t->nstreams, t->nthreads, t->nslots);
    fprintf(out, ", \"skipped_lines\": %zu, \"diag\": ", t->nbad);
    json_string(out, t->diag);
    fprintf(out, ", \"peak_requested_bytes\": %llu, \"total_alloc_bytes\": %llu",
            (unsigned long long)t->peak_requested, (unsigned long long)t->total_alloc_bytes);
    fprintf(out, ", \"reserved_peak_bytes\": %zu, \"allocated_peak_bytes\": %zu", s->reserved_bytes_peak,
            s->allocated_bytes_peak);
    if (t->peak_requested)
        fprintf(out, ", \"footprint_ratio\": %.6f", carve_replay_footprint(p));
    else
        fputs(", \"footprint_ratio\": null", out);
    fprintf(out, ", \"ns_per_op\": %.3f, \"replay_seconds\": %.6f, \"repeat\": %u, \"load_seconds\": %.6f",
            p->ns_per_op, p->seconds, p->repeat ? p->repeat : 1, p->load_seconds);
    fprintf(out, ", \"num_backend_allocs\": %llu, \"num_backend_frees\": %llu, \"num_event_records\": %llu"
                 ", \"num_event_queries\": %llu, \"num_syncs\": %llu, \"num_ooms\": %llu"
                 ", \"num_errors\": %llu, \"final_reserved_bytes\": %zu, \"live_buffers_at_end\": %llu",
            (unsigned long long)s->num_backend_allocs, (unsigned long long)s->num_backend_frees,
            (unsigned long long)s->num_event_records, (unsigned long long)s->num_event_queries,
            (unsigned long long)s->num_syncs,
            (unsigned long long)r->nooms, (unsigned long long)r->nerrors, s->reserved_bytes,
            (unsigned long long)s->num_live);
    if (d) {
        double cold_driver = per_event(d->cold_model_ns, (double)t->n);
        fputs(", \"driver_costs\": ", out);
        json_string(out, carve_driver_costs_source());
        fprintf(out, ", \"host_ns_per_event\": %.3f, \"driver_ns_per_event\": %.3f, \"modeled_ns_per_event\": %.3f"
                     ", \"driver_model_ns\": %llu",
                p->ns_per_op, cold_driver, p->ns_per_op + cold_driver, (unsigned long long)d->cold_model_ns);
        json_calls(out, "driver_calls", d->cold_calls, 1);
        json_calls(out, "driver_mappings", d->cold_mappings, 1);
        json_calls(out, "driver_bytes", d->cold_bytes, 1);
    }
    const carve_replay_warm *w = p->warm;
    if (w && w->passes) {
        if (d) {
            double warm_host = t->n ? w->seconds * 1e9 / (double)t->n : 0.0;
            double warm_driver = per_event(d->warm_model_ns, (double)t->n * w->passes);
            fprintf(out, ", \"warm_host_ns_per_event\": %.3f, \"warm_driver_ns_per_event\": %.3f"
                         ", \"warm_modeled_ns_per_event\": %.3f, \"warm_driver_model_ns\": %llu",
                    warm_host, warm_driver, warm_host + warm_driver, (unsigned long long)d->warm_model_ns);
            json_calls(out, "warm_driver_calls_per_pass", d->warm_calls, w->passes);
            json_calls(out, "warm_driver_mappings_per_pass", d->warm_mappings, w->passes);
        }
        fprintf(out, ", \"warm_passes\": %u, \"warm_ns_per_op\": %.3f, \"warm_backend_allocs_per_pass\": %.3f"
                     ", \"warm_backend_frees_per_pass\": %.3f, \"warm_event_records_per_pass\": %.3f"
                     ", \"warm_event_queries_per_pass\": %.3f, \"warm_syncs_per_pass\": %.3f"
                     ", \"warm_reserved_peak_bytes\": %llu, \"warm_num_ooms\": %llu",
                w->passes, t->n ? w->seconds * 1e9 / (double)t->n : 0.0, (double)w->backend_allocs / w->passes,
                (double)w->backend_frees / w->passes, (double)w->event_records / w->passes,
                (double)w->event_queries / w->passes, (double)w->syncs / w->passes,
                (unsigned long long)w->reserved_peak_bytes,
                (unsigned long long)w->nooms);
        if (t->peak_requested)
            fprintf(out, ", \"warm_footprint_ratio\": %.6f", (double)w->reserved_peak_bytes / (double)t->peak_requested);
    }
    const carve_capacity_result *cap = p->capacity;
    if (cap) {
        fprintf(out, ", \"min_capacity_lower_bound_bytes\": %zu, \"min_capacity_probes\": %u", cap->lower_bound,
                cap->probes);
        if (cap->bytes) {
            fprintf(out, ", \"min_capacity_bytes\": %zu", cap->bytes);
            if (t->peak_requested)
                fprintf(out, ", \"min_capacity_ratio\": %.6f", (double)cap->bytes / (double)t->peak_requested);
            else
                fputs(", \"min_capacity_ratio\": null", out);
        } else {
            fputs(", \"min_capacity_bytes\": null, \"min_capacity_ratio\": null", out);
        }
    }
    if (p->svg_path) {
        fputs(", \"svg\": ", out);
        json_string(out, p->svg_path);
    }
    fputs("}\n", out);
}

/* Byte counts as "1.50 GiB"; "none" for an unlimited limit. */
static const char *bytes(char *buf, size_t len, uint64_t v) {
    return carve_format_bytes(buf, len, v > SIZE_MAX ? SIZE_MAX : (size_t)v);
}

/* The ledger's calls by kind, per pass (div passes), on one line: "1084
 * cuMemCreate, 1084 cuMemMap, 12 cuMemSetAccess (1084 mappings), ...". */
static void text_calls(FILE *out, const uint64_t *calls, const uint64_t *mappings, unsigned div) {
    fputs("                   driver calls", out);
    int any = 0;
    for (int k = 0; k < CARVE_DRV_KINDS; k++) {
        if (!calls[k])
            continue;
        fprintf(out, "%s %.*f %s", any ? "," : "", div > 1 ? 1 : 0, (double)calls[k] / div, carve_driver_op_name(k));
        if (mappings[k] && mappings[k] != calls[k])
            fprintf(out, " (%.*f mappings)", div > 1 ? 1 : 0, (double)mappings[k] / div);
        any = 1;
    }
    fprintf(out, "%s%s\n", any ? "" : " none", div > 1 ? " per pass" : "");
}

static void write_text(FILE *out, const carve_replay_report *p, const carve_replay_driver *d) {
    const carve_trace *t = p->trace;
    const carve_replay_result *r = p->result;
    const carve_stats_1_0 *s = &r->stats;
    const carve_config *c = p->cfg;
    char b1[32], b2[32];
    double fp = carve_replay_footprint(p);
    unsigned repeat = p->repeat ? p->repeat : 1;
    fprintf(out, "carve %s replay: %s\n", carve_version(), p->trace_name ? p->trace_name : "(trace)");
    fprintf(out, "  arena            %s backend, growth %s%s, initial %s, limit %s\n", carve_backend_str(c->backend),
            c->growth ? "on" : "off", r->vmm ? ", virtual-memory mode" : ", segments", bytes(b1, sizeof(b1), r->initial_bytes),
            s->limit_bytes == SIZE_MAX ? "none" : bytes(b2, sizeof(b2), s->limit_bytes));
    fprintf(out, "  events           %zu (%zu allocs, %zu frees), %u stream%s, %u thread%s, %zu slots\n", t->n,
            t->nallocs, t->nfrees, t->nstreams, t->nstreams == 1 ? "" : "s", t->nthreads, t->nthreads == 1 ? "" : "s",
            t->nslots);
    if (t->nbad)
        fprintf(out, "  skipped lines    %zu: %s\n", t->nbad, t->diag);
    else
        fprintf(out, "  skipped lines    0\n");
    fprintf(out, "  peak requested   %s (%llu bytes)\n", bytes(b1, sizeof(b1), t->peak_requested),
            (unsigned long long)t->peak_requested);
    fprintf(out, "  reserved peak    %s (%zu bytes)\n", bytes(b1, sizeof(b1), s->reserved_bytes_peak),
            s->reserved_bytes_peak);
    if (t->peak_requested && r->nooms)
        fprintf(out, "  footprint ratio  %.4f (reserved peak / peak requested, of which %llu allocations failed)\n",
                fp, (unsigned long long)r->nooms);
    else if (t->peak_requested)
        fprintf(out, "  footprint ratio  %.4f (reserved peak / peak requested)\n", fp);
    else
        fprintf(out, "  footprint ratio  n/a (nothing requested)\n");
    fprintf(out, "  allocated peak   %s (%zu bytes, rounded sizes of live buffers)\n",
            bytes(b1, sizeof(b1), s->allocated_bytes_peak), s->allocated_bytes_peak);
    fprintf(out, "  speed            %.1f ns/op (%zu events in %.4f s", p->ns_per_op, t->n, p->seconds);
    if (repeat > 1)
        fprintf(out, ", median of %u replays", repeat);
    fprintf(out, "; loaded in %.3f s)\n", p->load_seconds);
    if (r->vmm)
        fprintf(out, "  backend calls    %llu granule maps, %llu unmaps", (unsigned long long)s->num_backend_allocs,
                (unsigned long long)s->num_backend_frees);
    else
        fprintf(out, "  backend calls    %llu segment reserves, %llu releases",
                (unsigned long long)s->num_backend_allocs, (unsigned long long)s->num_backend_frees);
    fprintf(out, "; %llu events recorded, %llu queried, %llu host waits\n", (unsigned long long)s->num_event_records,
            (unsigned long long)s->num_event_queries, (unsigned long long)s->num_syncs);
    const carve_replay_warm *w = p->warm;
    if (d) {
        double cold_driver = per_event(d->cold_model_ns, (double)t->n);
        fprintf(out, "  modeled, cold    %.1f ns/event: host %.1f (measured) + driver %.1f (modeled)\n",
                p->ns_per_op + cold_driver, p->ns_per_op, cold_driver);
        text_calls(out, d->cold_calls, d->cold_mappings, 1);
        if (w && w->passes) {
            double warm_host = t->n ? w->seconds * 1e9 / (double)t->n : 0.0;
            double warm_driver = per_event(d->warm_model_ns, (double)t->n * w->passes);
            fprintf(out, "  modeled, warm    %.1f ns/event: host %.1f (measured, median pass) + driver %.1f (modeled)\n",
                    warm_host + warm_driver, warm_host, warm_driver);
            text_calls(out, d->warm_calls, d->warm_mappings, w->passes);
        }
        fprintf(out, "  driver costs     %s (lib/backend/driver_costs.h)\n", carve_driver_costs_source());
    }
    if (w && w->passes) {
        fprintf(out, "  warm passes      %u on the same arena: %.1f ns/op (median), %.1f %s and %.1f %s per pass\n",
                w->passes, t->n ? w->seconds * 1e9 / (double)t->n : 0.0, (double)w->backend_allocs / w->passes,
                r->vmm ? "maps" : "reserves", (double)w->backend_frees / w->passes, r->vmm ? "unmaps" : "releases");
        fprintf(out, "                   %.1f events recorded, %.1f queried, %.1f host waits per pass\n",
                (double)w->event_records / w->passes, (double)w->event_queries / w->passes,
                (double)w->syncs / w->passes);
        if (t->peak_requested)
            fprintf(out, "                   reserved peak %s, %.4f x peak requested%s\n",
                    bytes(b1, sizeof(b1), w->reserved_peak_bytes),
                    (double)w->reserved_peak_bytes / (double)t->peak_requested,
                    w->nooms ? " (some allocations ran out of memory)" : "");
    }
    fprintf(out, "  OOMs             %llu\n", (unsigned long long)r->nooms);
    if (r->nerrors)
        fprintf(out, "  errors           %llu (allocations or frees that failed other than by OOM)\n",
                (unsigned long long)r->nerrors);
    fprintf(out, "  at the end       %llu live buffers, %s reserved\n", (unsigned long long)s->num_live,
            bytes(b1, sizeof(b1), s->reserved_bytes));
    const carve_capacity_result *cap = p->capacity;
    if (cap) {
        if (cap->bytes)
            fprintf(out, "  min capacity     %s (%zu bytes), %.4f x peak requested (%u probes)\n",
                    bytes(b1, sizeof(b1), cap->bytes), cap->bytes,
                    t->peak_requested ? (double)cap->bytes / (double)t->peak_requested : 0.0, cap->probes);
        else
            fprintf(out, "  min capacity     none up to 4 PiB (%u probes)\n", cap->probes);
    }
    if (p->svg_path)
        fprintf(out, "  picture          %s (%zu bytes)\n", p->svg_path, p->svg_bytes);
}

int carve_replay_report_write_driver(FILE *out, const carve_replay_report *r, const carve_replay_driver *d, int json) {
    if (!out || !r || !r->trace || !r->result || !r->cfg)
        return -1;
    if (d && d->size < sizeof(*d))
        return -1; /* a smaller (older) ledger: nothing this writer knows to leave out yet */
    if (json)
        write_json(out, r, d);
    else
        write_text(out, r, d);
    return ferror(out) ? -1 : 0;
}

int carve_replay_report_write(FILE *out, const carve_replay_report *r, int json) {
    return carve_replay_report_write_driver(out, r, NULL, json);
}
