#!/usr/bin/env python3
"""compare_torch.py — one PyTorch workload (torch_train.py) run three ways,
judged against the drop-in's promises: with PyTorch's own caching
allocator (native), with its expandable segments, and with its cache off
under carve-run (carve, with carve-run's --report).

Checks, each printed as "PASS name | detail" or "FAIL name | detail":
  - the runs: every watched run (mem_watch.py) exited 0, and the three
    watches read the memory the same way (all of the process, or all of
    the device);
  - same results: the losses (training) or each step's outputs (inference)
    of the carve run equal the native run's, bit for bit;
  - step time: the carve run's median step at most 2% above native's;
  - footprint: carve's reserved peak at most 1.05 times the program's
    live peak (the report's peak_live_bytes: the most bytes of carve's
    buffers the program held at once, counted at its own allocations and
    frees, so that what carve keeps after a free, for a thread's reuse or
    in the quarantine, is not in it). With its cache off every allocation
    of the process reaches carve-run, also those made outside PyTorch's
    allocator, which PyTorch's allocated peak leaves out (32 MiB and 1 KiB
    more per thread that runs a matrix product, cuBLAS's by their size and
    moment; the live sets at both peaks are in
    bench/results/2026-11-26-h100f); printed beside. A report without a
    live peak (an older carve-run) is judged against PyTorch's allocated
    peak instead, which is strict. The arena's requested peak (it counts
    what waits in the quarantine) is never the judge;
  - against expandable segments: the device memory the driver saw the carve
    run's process hold at most what it saw the expandable run's hold: the
    same program, the same CUDA context, every byte counted whoever
    allocated it. carve's memory can shrink during the run (it unmaps) and
    the readings are half a second or more apart, so carve's figure is at
    least its reserved peak (report) plus what its process held beside
    carve's memory: its last reading less carve's reserved bytes at exit,
    where the watch saw the process hold still at the end (at least
    SETTLED readings in a row alike: torch_train.py --settle; what the
    context holds only grows, so the end is its most); otherwise, what the
    native run's process held beside PyTorch's reserved memory at its last
    reading (the context and what is allocated outside PyTorch's
    allocator, which carve's reserved bytes hold already: strict by that
    much). PyTorch's reserved memory never shrinks in these runs. Without
    the watch files, carve's reserved peak against PyTorch's reserved peak
    with expandable segments.
An input that cannot be read or judged is one FAIL line ("judge"), and the
exit status is 1; 0 otherwise, whatever the verdicts.
Then one line of figures for the table (prefixed "ROW").

Usage: compare_torch.py NAME NATIVE.json EXPANDABLE.json CARVE.json CARVE_REPORT.json
                        [NATIVE-watch.json EXPANDABLE-watch.json CARVE-watch.json]
"""
import json
import math
import sys


def last_json(path):
    """The file's JSON, or the last line's (a program may print more before it)."""
    with open(path) as f:
        text = f.read().strip()
    try:
        return json.loads(text)
    except ValueError:
        return json.loads(text.splitlines()[-1])


SETTLED = 3  # readings in a row alike at the end of a watch: the process held still

def number(d, key, what, positive=True):
    """d[key] as a finite number (positive unless told), or ValueError naming it."""
    v = d.get(key) if isinstance(d, dict) else None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or \
            (positive and v <= 0):
        raise ValueError(f"{what}: {key} is {v!r}")
    return v


def judge(name, runs):
    """The verdict lines and the ROW line, or ValueError/KeyError/TypeError."""
    lines = []
    say = lines.append
    n, x, c, r = runs["native"], runs["expandable"], runs["carve"], runs["report"]
    watched = "wc" in runs
    if watched:
        w = {k: runs[k] for k in ("wn", "wx", "wc")}
        bad = [f"{k}: rc {v.get('rc')!r}" for k, v in w.items() if v.get("rc") != 0]
        methods = {v.get("method") for v in w.values()}
        say(f"{'PASS' if not bad and len(methods) == 1 else 'FAIL'} {name}: the three runs exited 0, "
            f"their memory read alike | " + ("; ".join(bad) or "rc 0, 0, 0") +
            f"; read by {', '.join(sorted(str(m) for m in methods))}")
    infer = bool(n.get("outputs"))
    key = "outputs" if infer else "losses"
    same = bool(n.get(key)) and n[key] == c.get(key) and len(n[key]) == n["steps"]
    say(f"{'PASS' if same else 'FAIL'} {name}: same {key} as PyTorch's own allocator | "
        f"{len(n.get(key) or [])} steps, last {(c.get(key) or ['-'])[-1]} vs {(n.get(key) or ['-'])[-1]}"
        f" (expandable segments {'the same' if x.get(key) == n.get(key) else 'differ'})")
    tn = number(n, "step_ms_median", "native run")
    tc = number(c, "step_ms_median", "carve run")
    tx = number(x, "step_ms_median", "expandable run")
    say(f"{'PASS' if tc <= 1.02 * tn else 'FAIL'} {name}: step time within 2% of PyTorch's own cache | "
        f"{tc:.2f} ms vs {tn:.2f} ms ({100 * (tc / tn - 1):+.1f}%; expandable segments {tx:.2f} ms)")
    devs = r.get("devices") or []
    if not devs:
        raise ValueError("carve-run's report names no device: carve served nothing")
    dev = devs[0]
    reserved = number(dev, "peak_reserved_bytes", "carve-run's report")
    allocated = number(n, "torch_max_memory_allocated", "native run")
    xr = number(x, "torch_max_memory_reserved", "expandable run")
    nr = number(n, "torch_max_memory_reserved", "native run")
    held = {"wn": 0, "wx": 0, "wc": 0}
    if watched:
        for k in held:
            if not w[k].get("samples"):
                raise ValueError(f"{k}: no reading of the process")
            held[k] = number(w[k], "peak_bytes", k)
        # what the native process held beside PyTorch's reserved memory at the
        # end (PyTorch's reserved bytes never shrink)
        beside = number(w["wn"], "last_bytes", "wn") - nr
        if beside <= 0:
            raise ValueError(f"the native run's last reading is not above PyTorch's reserved peak ({beside} B)")
        beside_what = "the native process's"
        # what the carve process held beside carve's memory, read at rest at the end
        at_exit = dev.get("reserved_bytes_at_exit")
        if w["wc"].get("last_same", 0) >= SETTLED and isinstance(at_exit, int) and at_exit <= reserved and \
                0 < number(w["wc"], "last_bytes", "wc") - at_exit:
            beside, beside_what = w["wc"]["last_bytes"] - at_exit, "its own, at rest"
        held["wc"] = max(held["wc"], reserved + beside)
    if "peak_live_bytes" in dev:
        requested = number(dev, "peak_live_bytes", "carve-run's report")
        if requested > reserved:
            raise ValueError(f"carve-run's report: a live peak of {requested} B above its reserved peak of "
                             f"{reserved} B (the program cannot hold more than carve reserved)")
        what = f"the program's live peak; PyTorch's allocated peak {allocated / 2**30:.3f} GiB, {reserved / allocated:.3f}"
    else:
        requested = allocated
        what = "PyTorch's allocated peak: the report has no live peak"
    ratio = reserved / requested
    say(f"{'PASS' if ratio <= 1.05 else 'FAIL'} {name}: reserved peak at most 1.05 x requested peak | "
        f"{reserved / 2**30:.3f} GiB for {requested / 2**30:.3f} GiB = {ratio:.3f} ({what}; "
        f"the arena's requested peak {dev.get('peak_requested_bytes', 0) / 2**30:.3f} GiB, "
        f"with what waits in its quarantine, at most "
        f"{dev.get('unordered_free_peak_bytes', 0) / 2**30:.3f} GiB; "
        f"{dev.get('waits_before_growing', '-')} waits before growing)")
    if watched:
        ok = held["wc"] <= held["wx"]
        say(f"{'PASS' if ok else 'FAIL'} {name}: device memory at most expandable segments' (as the driver sees the process) | "
            f"{held['wc'] / 2**30:.3f} GiB vs {held['wx'] / 2**30:.3f} GiB (PyTorch's own cache {held['wn'] / 2**30:.3f} GiB; "
            f"reserved peaks {reserved / 2**30:.3f} vs {xr / 2**30:.3f} GiB; carve's figure: the most of its readings, "
            f"{w['wc']['peak_bytes'] / 2**30:.3f} GiB, and its reserved peak + {beside / 2**20:.0f} MiB beside it "
            f"({beside_what}))")
    else:
        say(f"{'PASS' if reserved <= xr else 'FAIL'} {name}: reserved peak at most expandable segments' | "
            f"{reserved / 2**30:.3f} GiB vs {xr / 2**30:.3f} GiB (PyTorch's own cache {nr / 2**30:.3f} GiB)")
    say(f"ROW {name:16s} {requested / 2**30:9.3f} {allocated / 2**30:9.3f} {nr / 2**30:9.3f} "
        f"{xr / 2**30:9.3f} {reserved / 2**30:9.3f} {ratio:7.3f} {held['wn'] / 2**30:8.3f} {held['wx'] / 2**30:8.3f} "
        f"{held['wc'] / 2**30:8.3f} {tn:9.2f} {tx:9.2f} {tc:9.2f}")
    return lines


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
            print(f"FAIL {name}: judge | {key} run unreadable ({path}: {e})")
            return 1
    try:
        lines = judge(name, runs)
    except (ValueError, KeyError, TypeError, AttributeError, ZeroDivisionError) as e:
        print(f"FAIL {name}: judge | the runs cannot be judged: {type(e).__name__}: {e}")
        return 1
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
