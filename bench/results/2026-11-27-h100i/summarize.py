#!/usr/bin/env python3
"""summarize.py — the tables of this folder's README, from its files.

  python3 summarize.py pair            medians of the pinned pair and churn runs (pair/)
  python3 summarize.py probe           each probe shape, the plan against the forced path (probe/)
  python3 summarize.py valid [floor]   the new plan against HEAD on shapes it was not fitted on (valid/, valid/floor/)
  python3 summarize.py clusters        the cluster rule against every forced size (clusters/), and against 4 (clusters/valid/)
  python3 summarize.py sweep FILE      a sweep's rows by kind (final/sweep_new.json, final/sweep_base.json)
  python3 summarize.py compare A B     per-row speed of sweep B's carve over sweep A's, path changes listed
"""
import json
import math
import os
import statistics as st
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def rows(path):
    return json.load(open(os.path.join(HERE, path)))["rows"]


def gmean(v):
    return math.exp(sum(math.log(x) for x in v) / len(v))


def name(r):
    return f"{r['m']}x{r['n']}x{r['k']}{'t' if r['transb'] else ''}"


def pair():
    got = {}
    for f in sorted(os.listdir(os.path.join(HERE, "pair"))):
        if not f.endswith(".jsonl"):
            continue
        tree = f.split("_")[1]
        for line in open(os.path.join(HERE, "pair", f)):
            d = json.loads(line)
            got.setdefault((tree, d["allocator"], d["workload"]), []).append(d)
    print("tree  allocator       workload      warm ns (runs)                         median   cold median")
    for (tree, al, w), v in sorted(got.items()):
        warm = [d["ns_per_op"] for d in v]
        cold = [d["cold_ns_per_op"] for d in v if d.get("cold_ns_per_op")]
        print(f"{tree:5s} {al:15s} {w:12s} {' '.join(f'{x:6.1f}' for x in warm):38s} {st.median(warm):7.1f}"
              + (f"   {st.median(cold):7.1f}" if cold else ""))


def table(a, b, la, lb):
    for x, y in zip(a, b):
        assert name(x) == name(y)
        print(f"{name(x):16s} {la} {x['path']:6s}/{x['splits']:2d} {x['ratio']:.2f}  {lb} {y['path']:6s}/{y['splits']:2d} "
              f"{y['ratio']:.2f}  one {x['one_ratio']:.2f}->{y['one_ratio']:.2f}  x{x['carve_ms'] / y['carve_ms']:.2f}")


def probe():
    print("B K-major, rows off 16 bytes: the plan (HEAD) against the streaming kernel forced (carve / cuBLAS)")
    table(rows("probe/A_plan.json"), rows("probe/A_stream.json"), "plan", "stream")
    print("\n8704-16384 columns at m = 33-96: the plan (HEAD) against the decode kernel forced")
    table(rows("probe/B_plan.json"), rows("probe/B_decode.json"), "plan", "decode")


def valid(sub):
    d = "valid/floor" if sub == "floor" else "valid"
    for grp in ("A", "B"):
        if not os.path.exists(os.path.join(HERE, d, f"{grp}_base_1.json")):
            continue
        base = [rows(f"{d}/{grp}_base_{i}.json") for i in (1, 2)]
        new = [rows(f"{d}/{grp}_new_{i}.json") for i in (1, 2)]
        sp = []
        for j in range(len(base[0])):
            tb = min(x[j]["carve_ms"] for x in base)
            tn = min(x[j]["carve_ms"] for x in new)
            sp.append(tb / tn)
            b0, n0 = base[0][j], new[0][j]
            print(f"{name(b0):16s} {b0['path']:6s} -> {n0['path']:6s} carve/cuBLAS {b0['ratio']:.2f},{base[1][j]['ratio']:.2f}"
                  f" -> {n0['ratio']:.2f},{new[1][j]['ratio']:.2f}  speed x{sp[-1]:.2f}")
        print(f"{grp}: {len(sp)} shapes, geometric mean speed x{gmean(sp):.3f} (best of two runs each)\n")


def clusters():
    sizes = ["plan"] + [f"cs{c}" for c in (1, 2, 3, 4, 6, 8)]
    d = {v: [rows(f"clusters/{v}_{i}.json") for i in (1, 2)] for v in sizes}
    got = {v: [] for v in sizes + ["rule"]}
    for j in range(len(d["plan"][0])):
        t = {v: min(x[j]["carve_ms"] for x in d[v]) for v in sizes}
        r = d["plan"][0][j]
        moved = r["n"] < 4096 and -(-r["n"] // 64) * 4 > 132 and r["m"] <= 8
        t["rule"] = t["cs8" if r["k"] > 6144 else "cs6"] if moved else t["plan"]
        best = min(t[v] for v in sizes)
        for v in got:
            got[v].append(best / t[v])
        print(f"{name(r):16s} plan size {r['splits']}: " + " ".join(f"{v} {best / t[v]:.2f}" for v in sizes + ["rule"]))
    print("of the fastest size, geometric mean (worst): " +
          ", ".join(f"{v} {gmean(x):.3f} ({min(x):.2f})" for v, x in got.items()))
    new = [rows(f"clusters/valid/A_new_{i}.json") for i in (1, 2)]
    old = [rows(f"clusters/valid/A_cs4_{i}.json") for i in (1, 2)]
    sp = [min(x[j]["carve_ms"] for x in old) / min(x[j]["carve_ms"] for x in new)
          for j in range(len(new[0])) if new[0][j]["path"] == "stream"]
    print(f"valid/: {len(sp)} streamed shapes, the rule against 4: {min(sp):.2f}-{max(sp):.2f}, "
          f"geometric mean {gmean(sp):.3f}")


def sweep(path):
    rs = json.load(open(path))["rows"]
    kinds = {}
    for r in rs:
        kinds.setdefault(r["kind"], []).append(r)
    for k, v in kinds.items():
        rat = [r["ratio"] for r in v]
        print(f"{k:9s} {len(v):3d} rows: carve / cuBLAS {min(rat):.2f}-{max(rat):.2f}, median {st.median(rat):.2f}")
    dec = [r for r in rs if r["kind"].startswith("decode")]
    below = [r for r in dec if r["ratio"] < 0.9]
    roof = [r["roofline_carve"] for r in dec if r.get("roofline_carve")]
    roofc = [r["roofline_cublas"] for r in dec if r.get("roofline_cublas")]
    both = [r for r in dec if r["ratio"] >= 0.9 and (r.get("roofline_carve") or 0) >= 0.8]
    print(f"decode rows (m <= 256, both layouts of B): {len(dec)}, {len(below)} below 0.9 of cuBLAS: "
          + "; ".join(f"{name(r)} {r['ratio']:.2f} ({r['path']})" for r in below))
    print(f"  memory roofline median {st.median(roof):.2f} (cuBLAS {st.median(roofc):.2f}); "
          f"{len(both)} rows at >= 0.9 of cuBLAS and >= 0.8 of the roofline")
    low = [r for r in rs if r["ratio"] < 0.8]
    print("rows below 0.8 of cuBLAS:", ", ".join(f"{name(r)} {r['ratio']:.2f}" for r in low) or "none")


def compare(a, b):
    ra, rb = json.load(open(a))["rows"], json.load(open(b))["rows"]
    same = []
    for x, y in zip(ra, rb):
        assert name(x) == name(y)
        s = x["carve_ms"] / y["carve_ms"]
        if x["path"] != y["path"] or x.get("cols") != y.get("cols"):
            print(f"{name(x):16s} {x['path']}/{x.get('cols')} -> {y['path']}/{y.get('cols')}: x{s:.2f}, "
                  f"carve / cuBLAS {x['ratio']:.2f} -> {y['ratio']:.2f}")
        else:
            same.append((s, x["cublas_ms"] / y["cublas_ms"]))
    print(f"rows on the same path: carve x{gmean([s for s, _ in same]):.3f}, cuBLAS x{gmean([c for _, c in same]):.3f}"
          f" ({len(same)} rows; the second run over the first)")


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else "--help"
    if cmd == "pair":
        pair()
    elif cmd == "probe":
        probe()
    elif cmd == "valid":
        valid(sys.argv[2] if len(sys.argv) > 2 else "")
    elif cmd == "clusters":
        clusters()
    elif cmd == "sweep" and len(sys.argv) > 2:
        sweep(sys.argv[2])
    elif cmd == "compare" and len(sys.argv) > 3:
        compare(sys.argv[2], sys.argv[3])
    else:
        print(__doc__)
        sys.exit(0 if cmd in ("-h", "--help") else 2)
