#!/usr/bin/env python3
"""Turn the peer benchmark's JSON lines into one table, a CSV and a JSON file.

    summarize.py RAW.jsonl [--csv OUT.csv] [--json OUT.json] [--header FILE]

Rows are workloads, columns allocators. A cell is "cold/warm footprint":
cold is ns per operation over a whole pass from an empty cache (median of
the timed cold passes, every operation timed, the allocator's driver work
included), warm the median ns per operation over warm repetitions (pair
rows: ns per alloc+free pair, warm only; the threads row: aggregate million
operations per second, warm, marked M), and footprint = peak reserved bytes
/ peak requested bytes of the accounted cold pass.
"""
import argparse
import csv
import json
import sys

ALLOC_ORDER = ["cudaMalloc", "cudaMallocAsync", "cub", "torch", "torch-expandable", "carve", "carve-segments", "carve-vmm"]
ROW_ORDER = ["pair_256B", "pair_64KiB", "pair_2MiB", "pair_64MiB", "churn"]


def load(path):
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                print(f"summarize: {path}:{n}: skipped ({e})", file=sys.stderr)
    return rows


def row_key(name):
    if name in ROW_ORDER:
        return (0, ROW_ORDER.index(name), name)
    if name.startswith("threads"):
        return (1, 0, name)
    return (2, 0, name)


def human(n):
    if n is None:
        return "-"
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:.2f} {unit}"
    return f"{n} B"


def cell(r):
    if r is None:
        return "-"
    if r.get("error"):
        return "FAIL"
    fp = r.get("footprint")
    fps = f"{fp:5.2f}" if isinstance(fp, (int, float)) else "    -"
    if r["kind"] == "threads":
        m = r.get("mops")
        return (f"{m:7.2f}M" if isinstance(m, (int, float)) else "      -") + " " + fps
    ns, cold = r.get("ns_per_op"), r.get("cold_ns_per_op")
    nss = f"{ns:.0f}" if isinstance(ns, (int, float)) else "-"
    if r["kind"] == "pair":
        return f"{nss:>13}     -"
    colds = f"{cold:.0f}" if isinstance(cold, (int, float)) else "-"
    return f"{colds + '/' + nss:>13} {fps}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("raw")
    ap.add_argument("--csv")
    ap.add_argument("--json")
    ap.add_argument("--header", help="text file printed above the table")
    args = ap.parse_args()

    rows = load(args.raw)
    if not rows:
        print("summarize: no results", file=sys.stderr)
        return 1
    # last result wins for a (workload, allocator) pair
    by = {}
    for r in rows:
        by[(r["workload"], r["allocator"])] = r
    allocs = [a for a in ALLOC_ORDER if any(k[1] == a for k in by)]
    allocs += sorted({k[1] for k in by} - set(allocs))
    workloads = sorted({k[0] for k in by}, key=row_key)

    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["workload", "allocator", "ns_per_op", "mops", "footprint", "peak_requested",
                        "peak_reserved", "reserved_method", "driver_used_peak", "driver_footprint",
                        "reps", "ops_timed", "cold_s", "cold_ns_per_op", "cold_reps", "error"])
            for wl in workloads:
                for a in allocs:
                    r = by.get((wl, a))
                    if r is None:
                        continue
                    w.writerow([wl, a, r.get("ns_per_op"), r.get("mops"), r.get("footprint"),
                                r.get("peak_requested"), r.get("peak_reserved"),
                                r.get("reserved_method"), r.get("driver_used_peak"),
                                r.get("driver_footprint"), len(r.get("reps") or []),
                                r.get("ops_timed"), r.get("cold_s"), r.get("cold_ns_per_op"),
                                len(r.get("cold_reps") or []), r.get("error")])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"allocators": allocs, "workloads": workloads, "results": rows}, f, indent=1)

    out = []
    if args.header:
        try:
            with open(args.header) as f:
                out.append(f.read().rstrip("\n"))
        except OSError:
            pass
    device = next((r.get("device") for r in rows if r.get("device")), "unknown device")
    out.append(f"device: {device}")
    out.append("cell: cold/warm ns per op (cold: a whole pass from an empty cache, driver work included, "
               "median of the cold passes; warm: median of warm repetitions; pair rows: ns per alloc+free "
               "pair, warm; threads: aggregate M ops/s, warm)  footprint = peak reserved / peak requested")
    wl_w = max(16, max(len(w) for w in workloads))
    col_w = 19
    head = f"{'workload':<{wl_w}} {'peak req':>10} | " + " | ".join(f"{a:>{col_w}}" for a in allocs)
    sub = f"{'':<{wl_w}} {'':>10} | " + " | ".join(f"{'cold/warm    fp':>{col_w}}" for _ in allocs)
    out.append(head)
    out.append(sub)
    out.append("-" * len(head))
    fails = []
    for wl in workloads:
        reqs = [by[(wl, a)].get("peak_requested") for a in allocs if (wl, a) in by]
        req = next((q for q in reqs if q), None)
        cells = []
        for a in allocs:
            r = by.get((wl, a))
            cells.append(f"{cell(r):>{col_w}}")
            if r is not None and r.get("error"):
                fails.append(f"  {wl} / {a}: {r['error']}")
        out.append(f"{wl:<{wl_w}} {human(req):>10} | " + " | ".join(cells))
    out.append("")
    out.append("reserved bytes measured by:")
    for a in allocs:
        meth = next((r.get("reserved_method") for r in rows
                     if r["allocator"] == a and r.get("reserved_method")), "-")
        desc = next((r.get("describe") for r in rows if r["allocator"] == a and r.get("describe")), "")
        out.append(f"  {a:<17} {meth}")
        if desc:
            out.append(f"  {'':<17} ({desc})")
    if fails:
        out.append("")
        out.append("failures:")
        out.extend(fails)
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
