#!/usr/bin/env python3
"""test_replay_memory.py — carve-replay's memory: proportional to the trace's
events, whatever the sizes in it.

usage: test_replay_memory.py CARVE_REPLAY GEN_EVENTS PEAK_RSS events|huge|huge-known-limit

events: a synthetic trace (gen_events, piped in: never on disk) replays in
  the default mode and in segments mode (vmm=0); the peak resident memory of
  carve-replay is printed, and must stay under 1 GiB and within 8 bytes per
  event (plus 8 MiB) of a replay of a 1000-event trace. The events default
  to 2 million (seconds, for CI); CARVE_TEST_REPLAY_EVENTS=100000000 is the
  full check (about a minute).
huge: a trace allocating 2^52 bytes, freeing and allocating them again
  (CARVE_TEST_HUGE_BYTES to change the size) replays in both modes without
  running out of memory, in under 1 GiB (checked under an address-space
  limit of 1.25 GiB, so that a replay that would take more fails at once
  instead of filling the machine).
huge-known-limit: the same, where the engine is known not to fit yet: a
  mode that runs out of memory cleanly passes as that limit; a crash, an
  error or a missing report fails, and so does every mode fitting (then the
  test is to be registered with 'huge').
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


def huge_test(tool, known_limit):
    """known_limit: the engine is known not to hold the allocation yet (its
    per-granule metadata): a replay that runs out of memory under the cap,
    cleanly, passes as that known limit, anything else odd fails, and a
    replay that now fits fails too, so that the known limit is dropped."""
    size = int(os.environ.get("CARVE_TEST_HUGE_BYTES", str(1 << 52)))
    fits = known = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "huge.csv")
        with open(path, "w") as f:
            f.write(f"a,1,{size}\nf,1\na,2,{size}\n")
        for name, conf in MODES:
            rc, rep, err, rss = measure(tool, conf + [path], limit_as=GiB + GiB // 4)
            print(f"{name} mode: one allocation of {size} bytes: exit {rc}, peak RSS {rss / MiB:.1f} MiB, "
                  f"{'no report' if rep is None else str(rep['num_ooms']) + ' OOMs'}")
            if not check(rc == 0 and rep is not None and rep["num_errors"] == 0,
                         f"{name}: replays, out of memory or not ({rc}: {err.strip()})"):
                continue
            if rep["num_ooms"] == 0 and rep["reserved_peak_bytes"] >= size and rss < GiB:
                fits += 1
            elif known_limit and rep["num_ooms"] > 0:
                known += 1
                print(f"  known limit: the engine's per-granule metadata does not fit under the cap ({name} mode)")
            else:
                check(False, f"{name}: the allocation fits, twice, in under 1 GiB ({rep['num_ooms']} OOMs, "
                             f"peak RSS {rss / MiB:.1f} MiB)")
    if known_limit:
        check(fits < len(MODES), "every mode now fits: register the test with 'huge' (the known limit is gone)")


def main():
    global PEAK_RSS
    if len(sys.argv) != 5 or sys.argv[4] not in ("events", "huge", "huge-known-limit"):
        print(__doc__, file=sys.stderr)
        return 2
    tool, gen, PEAK_RSS, what = sys.argv[1:]
    if what == "events":
        events_test(tool, gen)
    else:
        huge_test(tool, what == "huge-known-limit")
    print("failed" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
