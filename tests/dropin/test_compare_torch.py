#!/usr/bin/env python3
"""test_compare_torch.py — the judge of the PyTorch drop-in checks
(tests/dropin/gpu/compare_torch.py) on made-up runs, with no GPU: each
check passes and fails where it should; the footprint is judged against
the program's live peak from carve-run's report (never the arena's
requested peak, which counts the quarantine), or PyTorch's allocated peak
when the report has none; the device memory against expandable segments' as
the watch files say, carve's at least its reserved peak plus what its own
process held beside carve's memory at rest at the end (else what the
native process held beside PyTorch's memory), however the readings fell
(carve growing or shrinking between them); a run that exited non-zero,
watches that read differently, a watch with no reading, a report with no
device and numbers that are missing or zero are failures, never passes;
without watch files the reserved peaks are compared as before.

Usage: test_compare_torch.py   (prints "N passed, N failed"; exit 1 on a failure)
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
JUDGE = os.path.join(HERE, "gpu", "compare_torch.py")
GiB = 1 << 30
passed = failed = 0


def check(ok, what):
    global passed, failed
    print(f"{'PASS' if ok else 'FAIL'} {what}", flush=True)
    if ok:
        passed += 1
    else:
        failed += 1


def judge(d, native, expandable, carve, report, watches=None):
    """Writes the runs, runs the judge; returns (exit code, {check name: PASS/FAIL}, ROW fields)."""
    files = []
    for name, obj in [("native", native), ("expandable", expandable), ("carve", carve), ("report", report)] + \
            ([("wn", watches[0]), ("wx", watches[1]), ("wc", watches[2])] if watches else []):
        path = os.path.join(d, name + ".json")
        with open(path, "w") as f:
            # a program's own lines before its JSON, as torch_train.py's runs may print
            f.write("some line a program printed\n" + json.dumps(obj) + "\n" if name == "carve" else json.dumps(obj))
        files.append(path)
    p = subprocess.run([sys.executable, JUDGE, "w"] + files, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    verdicts, row = {}, None
    for line in p.stdout.splitlines():
        if line.startswith(("PASS ", "FAIL ")):
            verdicts[line[5:].split(" | ")[0].split(": ", 1)[1]] = line[:4]
        elif line.startswith("ROW "):
            row = line.split()[1:]
    return p.returncode, verdicts, row


def run(steps_ms=100.0, losses=(1.0, 0.5), reserved=8.2, requested=8.15, live=8.09, allocated=8.09, expandable=8.11,
        held=(9.4, 8.78, 8.77), samples=(40, 40, 40), carve_losses=None, carve_ms=None,
        rcs=(0, 0, 0), methods=("process",) * 3, carve_same=1, at_exit=None):
    native = {"steps": len(losses), "losses": list(losses), "outputs": [], "step_ms_median": steps_ms,
              "torch_max_memory_allocated": int(allocated * GiB), "torch_max_memory_reserved": int(9.0 * GiB)}
    exp = dict(native, torch_max_memory_reserved=int(expandable * GiB))
    carve = dict(native, losses=list(carve_losses or losses), step_ms_median=carve_ms or steps_ms,
                 torch_max_memory_allocated=0, torch_max_memory_reserved=0)
    report = {"devices": [{"peak_reserved_bytes": int(reserved * GiB), "peak_requested_bytes": int(requested * GiB),
                           "footprint_ratio": reserved / requested, "unordered_free_peak_bytes": 0,
                           "waits_before_growing": 0}]}
    if live is not None:
        report["devices"][0].update(peak_live_bytes=int(live * GiB), live_footprint_ratio=reserved / live)
    if at_exit is not None:
        report["devices"][0]["reserved_bytes_at_exit"] = int(at_exit * GiB)
    watches = None if held is None else [
        {"peak_bytes": int(h * GiB), "last_bytes": int(h * GiB), "samples": s, "method": m, "rc": rc}
        for h, s, m, rc in zip(held, samples, methods, rcs)]
    if watches:
        watches[2]["last_same"] = carve_same
    return native, exp, carve, report, watches


def main():
    fp = "reserved peak at most 1.05 x requested peak"
    dm = "device memory at most expandable segments' (as the driver sees the process)"
    runs_ok = "the three runs exited 0, their memory read alike"
    with tempfile.TemporaryDirectory() as d:
        rc, v, row = judge(d, *run())
        check(rc == 0 and list(v.values()) == ["PASS"] * 5 and len(v) == 5,
              f"all five checks pass on good runs ({v})")
        check(row is not None and len(row) == 13 and row[1] == "8.090" and row[2] == "8.090" and row[9] == "8.770",
              f"ROW: requested (= live), allocated, ... the three device figures, the step times ({row})")
        # the footprint: the program's live peak, not the arena's requested peak (which counts the quarantine)
        # nor PyTorch's allocated peak (which leaves out what the program allocates beside PyTorch's allocator)
        _, v, row = judge(d, *run(reserved=8.2, requested=8.2, live=7.0, allocated=8.1))
        check(v.get(fp) == "FAIL" and row[1] == "7.000",
              f"footprint against the program's live peak, not the arena's requested peak nor PyTorch's ({row})")
        _, v, row = judge(d, *run(reserved=8.2, requested=8.2, live=7.9, allocated=7.0))
        check(v.get(fp) == "PASS" and row[1] == "7.900", f"... within 1.05 of it passes ({row})")
        # a report without a live peak: PyTorch's allocated peak, never the arena's requested peak
        _, v, _ = judge(d, *run(reserved=8.2, requested=8.2, live=None, allocated=7.0))
        check(v.get(fp) == "FAIL", "without a live peak: against PyTorch's allocated peak")
        _, v, _ = judge(d, *run(reserved=8.2, requested=8.2, live=None, allocated=7.9))
        check(v.get(fp) == "PASS", "... within 1.05 of it passes")
        rc, v, _ = judge(d, *run(reserved=8.2, live=20.0))
        check(rc == 1 and v.get(fp) is None and "FAIL" in v.values(),
              f"a live peak above the reserved peak: FAIL, exit 1, no footprint verdict ({v})")
        # reserved bytes at exit above the reserved peak: not a reading at rest to trust
        _, v, row = judge(d, *run(held=(9.6, 8.78, 8.7), reserved=8.2, carve_same=3, at_exit=8.3))
        check(v.get(dm) == "FAIL" and row[9] == "8.800", f"at exit above the peak: the native's ({row})")
        bad_live = run()
        bad_live[3]["devices"][0]["peak_live_bytes"] = 0
        rc, v, _ = judge(d, *bad_live)
        check(rc == 1 and "FAIL" in v.values() and v.get(fp) is None, f"a live peak of 0: FAIL, exit 1 ({v})")
        # carve's figure is at least its reserved peak + what the native process held beside PyTorch's
        # memory (9.4 - 9.0 = 0.4 GiB), whatever the carve watch saw: a peak between readings, or carve
        # growing after the last one
        _, v, row = judge(d, *run(held=(9.4, 8.78, 8.5), reserved=8.5))
        check(v.get(dm) == "FAIL" and row[9] == "8.900", f"carve's peak missed by the readings still counts ({row})")
        _, v, row = judge(d, *run(held=(9.4, 8.78, 0.7), reserved=1.5, live=0.79, allocated=0.79, expandable=0.9))
        check(v.get(dm) == "PASS" and row[9] == "1.900" and v.get(fp) == "FAIL",
              f"carve grown after its last reading: its figure from its peak, its footprint from the report ({row})")
        # carve's own memory beside its arena, read at rest at the end (3 readings alike): its last reading
        # less its reserved bytes at exit (8.7 - 8.2 = 0.5 GiB), not the native process's (9.6 - 9.0 = 0.6 GiB,
        # which holds buffers carve's arena holds already)
        _, v, row = judge(d, *run(held=(9.6, 8.78, 8.7), reserved=8.2, carve_same=3, at_exit=8.2))
        check(v.get(dm) == "PASS" and row[9] == "8.700", f"settled: carve's own memory beside its arena ({row})")
        _, v, row = judge(d, *run(held=(9.6, 8.78, 8.7), reserved=8.2, carve_same=2, at_exit=8.2))
        check(v.get(dm) == "FAIL" and row[9] == "8.800", f"not settled (2 readings alike): the native's ({row})")
        _, v, row = judge(d, *run(held=(9.6, 8.78, 8.7), reserved=8.2, carve_same=3))
        check(v.get(dm) == "FAIL" and row[9] == "8.800", f"no reserved bytes at exit: the native's ({row})")
        _, v, row = judge(d, *run(held=(9.6, 8.78, 8.1), reserved=8.2, carve_same=5, at_exit=8.2))
        check(v.get(dm) == "FAIL" and row[9] == "8.800", f"a last reading under carve's reserved bytes: the native's ({row})")
        # a reserved peak above the settled end still counts in full
        _, v, row = judge(d, *run(held=(9.6, 8.78, 8.5), reserved=8.4, carve_same=3, at_exit=8.0))
        check(v.get(dm) == "FAIL" and row[9] == "8.900", f"settled: reserved peak + own memory beside it ({row})")
        bad_native = run()
        bad_native[4][0]["last_bytes"] = int(8.9 * GiB)  # below PyTorch's reserved 9.0 GiB: a wrong reading
        rc, v, _ = judge(d, *bad_native)
        check(rc == 1 and list(v.values()) == ["FAIL"], f"a native last reading below its reserved peak: FAIL ({v})")
        # the runs themselves
        rc, v, _ = judge(d, *run(rcs=(0, 0, -11)))
        check(rc == 0 and v.get(runs_ok) == "FAIL", "a carve run that crashed fails, whatever the other checks")
        _, v, _ = judge(d, *run(methods=("process", "device", "process")))
        check(v.get(runs_ok) == "FAIL", "watches that read differently (process / device) fail")
        bad_report = run()
        bad_report[3]["devices"] = []
        rc, v, _ = judge(d, *bad_report)
        check(rc == 1 and list(v.values()) == ["FAIL"], f"a report with no device: one FAIL, exit 1 ({v})")
        rc, v, _ = judge(d, *run(steps_ms=0.0))
        check(rc == 1 and list(v.values()) == ["FAIL"], f"a native step time of 0: one FAIL, exit 1 ({v})")
        no_alloc = run()
        del no_alloc[0]["torch_max_memory_allocated"]
        rc, v, _ = judge(d, *no_alloc)
        check(rc == 1 and list(v.values()) == ["FAIL"], f"a missing allocated peak: one FAIL, no PASS before it ({v})")
        # device memory, as the driver saw each process
        _, v, _ = judge(d, *run(held=(9.4, 8.77, 8.80)))
        name = "device memory at most expandable segments' (as the driver sees the process)"
        check(v.get(name) == "FAIL", "the carve run's process holding more than expandable segments' fails")
        _, v, _ = judge(d, *run(held=(9.4, 8.77, 8.77), reserved=8.2, expandable=8.11))
        check(v.get(name) == "PASS", "equal device memory passes, whatever the reserved peaks say")
        rc, v, _ = judge(d, *run(samples=(40, 40, 0)))
        check(rc == 1 and list(v.values()) == ["FAIL"], "a watch that found no reading of the carve run's process fails")
        # without watch files: the reserved peaks, as before
        rc, v, row = judge(d, *run(held=None, reserved=8.2, expandable=8.11))
        check(rc == 0 and v.get("reserved peak at most expandable segments'") == "FAIL" and name not in v,
              f"without watch files the reserved peaks are compared ({v})")
        _, v, _ = judge(d, *run(held=None, reserved=8.0, live=7.9, expandable=8.11))
        check(v.get("reserved peak at most expandable segments'") == "PASS", "... and pass where carve's is lower")
        # results and speed
        _, v, _ = judge(d, *run(carve_losses=(1.0, 0.25)))
        check(v.get("same losses as PyTorch's own allocator") == "FAIL", "a different loss fails")
        _, v, _ = judge(d, *run(carve_ms=102.5))
        check(v.get("step time within 2% of PyTorch's own cache") == "FAIL", "2.5% slower fails")
        _, v, _ = judge(d, *run(carve_ms=101.9))
        check(v.get("step time within 2% of PyTorch's own cache") == "PASS", "1.9% slower passes")
        p = subprocess.run([sys.executable, JUDGE, "w", "a", "b"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        check(p.returncode == 2, "a wrong number of arguments: exit 2")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
