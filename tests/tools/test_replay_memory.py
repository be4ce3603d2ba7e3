#!/usr/bin/env python3
"""test_replay_memory.py — carve-replay's memory: proportional to the trace's
events, whatever the sizes in it.

usage: test_replay_memory.py CARVE_REPLAY GEN_EVENTS PEAK_RSS events|huge

events: a synthetic trace (gen_events, piped in: never on disk) replays in
  the default mode and in segments mode (vmm=0); the peak resident memory of
  carve-replay is printed, and must stay under 1 GiB and within 8 bytes per
  event (plus 8 MiB) of a replay of a 1000-event trace. The events default
  to 2 million (seconds, for CI); CARVE_TEST_REPLAY_EVENTS=100000000 is the
  full check (about a minute).
huge: what the engine keeps follows what is live, not the bytes of address
  space or of mapped memory. A trace allocating 2^48, 2^50 and 2^52 bytes
  (CARVE_TEST_HUGE_BYTES: one size instead), freeing and allocating them
  again, and a trace of 2^52 bytes in all with several allocations and
  frees of sizes from 300 bytes to 2^51 on three streams, replay in both
  modes with no error and no out-of-memory answer, reserving at least what
  they request, in under 1 GiB (checked under an address-space limit of
  1.25 GiB, so that a replay that would take more fails at once instead of
  filling the machine).
"""
import json
import os
import subprocess
import sys
import tempfile

GiB = 1 << 30
MiB = 1 << 20
MODES = (("default", []), ("segments", ["--conf", "vmm=0"]))
failures = 0
PEAK_RSS = None


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL: " + what, file=sys.stderr)
    return cond


def measure(tool, args, gen=None, limit_as=0):
    """One replay (its input piped from the generator command gen, when
    given), started by peak_rss so that its peak RSS is its own: (exit
    status, JSON report or None, stderr, peak RSS in bytes)."""
    with tempfile.NamedTemporaryFile("r") as res:
        src = subprocess.Popen(gen.split(), stdout=subprocess.PIPE) if gen else None
        p = subprocess.Popen([PEAK_RSS, res.name, str(limit_as), tool, "-q", "--json"] + args,
                             stdin=src.stdout if src else None, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if src:
            src.stdout.close()
        out, err = p.communicate(timeout=1800)
        if src:
            src.wait(timeout=60)
        fields = res.read().split()
    rss = int(fields[1]) * 1024 if len(fields) == 2 else 0
    try:
        rep = json.loads(out)
    except ValueError:
        rep = None
    return p.returncode, rep, err.decode("utf-8", "replace"), rss


def events_test(tool, gen):
    n = int(os.environ.get("CARVE_TEST_REPLAY_EVENTS", "2000000"))
    for name, conf in MODES:
        rc0, rep0, err0, base = measure(tool, conf + ["-"], gen=f"{gen} 1000 7")
        check(rc0 == 0 and rep0 and rep0["events"] == 1000, f"{name}: the 1000-event replay ({rc0}, {err0})")
        rc, rep, err, rss = measure(tool, conf + ["-"], gen=f"{gen} {n} 7")
        ok = check(rc == 0 and rep is not None, f"{name}: {n} events replay ({rc}: {err.strip()})")
        per_event = (rss - base) / n
        print(f"{name} mode: {n} events, peak RSS {rss / MiB:.1f} MiB ({base / MiB:.1f} MiB for 1000 events; "
              f"{per_event:.2f} bytes per event)" + (f", {rep['ns_per_op']:.1f} ns/op" if ok else ""))
        if not ok:
            continue
        check(rep["events"] == n and rep["num_errors"] == 0 and rep["num_ooms"] == 0 and rep["skipped_lines"] == 0,
              f"{name}: every event replayed cleanly: {rep}")
        check(rss < GiB, f"{name}: peak RSS {rss / MiB:.1f} MiB is under 1 GiB")
        check(rss - base <= 8 * n + 8 * MiB,
              f"{name}: {per_event:.2f} bytes per event beyond a tiny trace (at most 8, plus 8 MiB)")


# Several allocations and frees on three streams, 2^52 bytes live at the
# peak: huge buffers next to small ones, given back and taken again.
MANY = """a,1,1125899906842624,0
a,2,300,1
a,3,2251799813685248,1
a,4,5242880,2
a,5,562949953421312,2
f,1
a,6,1125899906842879,0
f,3
a,7,2251799813685248,2
a,8,4096,0
f,5
f,7
a,9,3377699720527872,1
f,2
f,4
f,6
f,8
f,9
a,10,4503599627370496,2
f,10
a,11,1125899906842624,1
"""


def huge_test(tool):
    sizes = [int(os.environ["CARVE_TEST_HUGE_BYTES"])] if os.environ.get("CARVE_TEST_HUGE_BYTES") else \
        [1 << 48, 1 << 50, 1 << 52]
    with tempfile.TemporaryDirectory() as tmp:
        traces = []
        for size in sizes:
            path = os.path.join(tmp, f"huge-{size}.csv")
            with open(path, "w") as f:
                f.write(f"a,1,{size}\nf,1\na,2,{size}\n")
            traces.append((f"one allocation of {size} bytes", path, size))
        path = os.path.join(tmp, "many.csv")
        with open(path, "w") as f:
            f.write(MANY)
        traces.append(("2^52 bytes in allocations and frees on three streams", path, 1 << 52))
        for what, path, peak in traces:
            for name, conf in MODES:
                rc, rep, err, rss = measure(tool, conf + [path], limit_as=GiB + GiB // 4)
                print(f"{name} mode: {what}: exit {rc}, peak RSS {rss / MiB:.1f} MiB, "
                      f"{'no report' if rep is None else str(rep['num_ooms']) + ' OOMs'}")
                if not check(rc == 0 and rep is not None and rep["num_errors"] == 0,
                             f"{name}: {what} replays ({rc}: {err.strip()})"):
                    continue
                check(rep["num_ooms"] == 0 and rep["skipped_lines"] == 0,
                      f"{name}: {what}: no out-of-memory answer ({rep['num_ooms']})")
                check(rep["peak_requested_bytes"] >= peak and rep["reserved_peak_bytes"] >= rep["peak_requested_bytes"],
                      f"{name}: {what}: reserved {rep['reserved_peak_bytes']} for a peak of {rep['peak_requested_bytes']}")
                check(rss < GiB, f"{name}: {what}: peak RSS {rss / MiB:.1f} MiB is under 1 GiB")


def main():
    global PEAK_RSS
    if len(sys.argv) != 5 or sys.argv[4] not in ("events", "huge"):
        print(__doc__, file=sys.stderr)
        return 2
    tool, gen, PEAK_RSS, what = sys.argv[1:]
    if what == "events":
        events_test(tool, gen)
    else:
        huge_test(tool)
    print("failed" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
