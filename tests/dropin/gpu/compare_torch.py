#!/usr/bin/env python3
"""compare_torch.py — one PyTorch workload (torch_train.py) run three ways,
judged against the drop-in's promises: with PyTorch's own caching
allocator (native), with its expandable segments, and with its cache off
under carve-run (carve, with carve-run's --report).

Checks, each printed as "PASS name | detail" or "FAIL name | detail":
  - same results: the losses (training) or each step's outputs (inference)
    of the carve run equal the native run's, bit for bit;
  - step time: the carve run's median step at most 2% above native's;
  - footprint: carve's reserved peak at most 1.05 times the requested peak
    of the carve run, as carve-run's report counts it (the program's live
    buffers, and those a thread freed that carve-run keeps for its reuse);
    PyTorch's own allocated peak in the native run is printed beside it. The
    two differ: with its cache off every allocation of the process reaches
    carve-run, also those made outside PyTorch's allocator, which its count
    leaves out (32 MiB and 1 KiB more per thread that runs a matrix product,
    cuBLAS's by their size and moment; the live sets at both peaks are in
    bench/results/2026-11-26-h100f);
  - against expandable segments: the device memory the driver saw the carve
    run's process hold (its peak, mem_watch.py) at most what it saw the
    expandable run's hold: the same program, the same CUDA context, every
    byte counted whoever allocated it. Without the watch files, carve's
    reserved peak against PyTorch's reserved peak with expandable segments
    (which leaves out what cuBLAS allocated itself).
Then one line of figures for the table (prefixed "ROW").

Usage: compare_torch.py NAME NATIVE.json EXPANDABLE.json CARVE.json CARVE_REPORT.json
                        [NATIVE-watch.json EXPANDABLE-watch.json CARVE-watch.json]
"""
import json
import sys


def last_json(path):
    """The file's JSON, or the last line's (a program may print more before it)."""
    with open(path) as f:
        text = f.read().strip()
    try:
        return json.loads(text)
    except ValueError:
        return json.loads(text.splitlines()[-1])


def main():
    if len(sys.argv) not in (6, 9):
        print(__doc__, file=sys.stderr)
        return 2
    name = sys.argv[1]
    runs = {}
    for key, path in zip(("native", "expandable", "carve", "report", "wn", "wx", "wc"), sys.argv[2:]):
        try:
            runs[key] = last_json(path)
        except (OSError, ValueError, IndexError) as e:
            print(f"FAIL {name}: results | {key} run unreadable ({path}: {e})")
            return 1
    n, x, c, r = runs["native"], runs["expandable"], runs["carve"], runs["report"]
    infer = bool(n.get("outputs"))
    key = "outputs" if infer else "losses"
    same = n.get(key) and n[key] == c.get(key) and len(n[key]) == n["steps"]
    print(f"{'PASS' if same else 'FAIL'} {name}: same {key} as PyTorch's own allocator | "
          f"{len(n.get(key) or [])} steps, last {(c.get(key) or ['-'])[-1]} vs {(n.get(key) or ['-'])[-1]}"
          f" (expandable segments {'the same' if x.get(key) == n.get(key) else 'differ'})")
    tn, tc, tx = n["step_ms_median"], c["step_ms_median"], x["step_ms_median"]
    print(f"{'PASS' if tc <= 1.02 * tn else 'FAIL'} {name}: step time within 2% of PyTorch's own cache | "
          f"{tc:.2f} ms vs {tn:.2f} ms ({100 * (tc / tn - 1):+.1f}%; expandable segments {tx:.2f} ms)")
    dev = r["devices"][0]
    reserved = dev["peak_reserved_bytes"]
    requested = dev["peak_requested_bytes"]
    allocated = n["torch_max_memory_allocated"]
    ratio = reserved / requested if requested else float("inf")
    print(f"{'PASS' if ratio <= 1.05 else 'FAIL'} {name}: reserved peak at most 1.05 x requested peak | "
          f"{reserved / 2**30:.3f} GiB for {requested / 2**30:.3f} GiB = {ratio:.3f} (PyTorch's allocated peak "
          f"with its own cache {allocated / 2**30:.3f} GiB, {reserved / allocated if allocated else 0:.3f}; "
          f"quarantine at most {dev.get('unordered_free_peak_bytes', 0) / 2**30:.3f} GiB, "
          f"{dev.get('waits_before_growing', '-')} waits before growing)")
    xr = x["torch_max_memory_reserved"]
    if "wc" in runs:
        held = {k: runs[k]["peak_bytes"] if runs[k].get("samples") else 0 for k in ("wn", "wx", "wc")}
        ok = 0 < held["wc"] <= held["wx"]
        print(f"{'PASS' if ok else 'FAIL'} {name}: device memory at most expandable segments' (as the driver sees the process) | "
              f"{held['wc'] / 2**30:.3f} GiB vs {held['wx'] / 2**30:.3f} GiB (PyTorch's own cache {held['wn'] / 2**30:.3f} GiB; "
              f"reserved peaks {reserved / 2**30:.3f} vs {xr / 2**30:.3f} GiB)")
    else:
        held = {"wn": 0, "wx": 0, "wc": 0}
        print(f"{'PASS' if reserved <= xr else 'FAIL'} {name}: reserved peak at most expandable segments' | "
              f"{reserved / 2**30:.3f} GiB vs {xr / 2**30:.3f} GiB (PyTorch's own cache {n['torch_max_memory_reserved'] / 2**30:.3f} GiB)")
    print(f"ROW {name:16s} {requested / 2**30:9.3f} {allocated / 2**30:9.3f} {n['torch_max_memory_reserved'] / 2**30:9.3f} "
          f"{xr / 2**30:9.3f} {reserved / 2**30:9.3f} {ratio:7.3f} {held['wn'] / 2**30:8.3f} {held['wx'] / 2**30:8.3f} "
          f"{held['wc'] / 2**30:8.3f} {tn:9.2f} {tx:9.2f} {tc:9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
