#!/usr/bin/env python3
"""test_dropin_cpu.py — carve-run and its interposer on a machine without a GPU.

Runs dropin_cpu_app (a driver-API program that knows nothing of carve)
against the mock driver (libcuda.so.1 from mock_cuda.c), directly and under
carve-run, and checks what the interposer promises: allocations served by
carve (a few driver calls instead of one each), lookups through dlsym and
cuGetProcAddress served too, foreign pointers passed to the driver and stray
frees of carved memory refused, cuMemGetInfo reporting the cap, out of memory
past the cap with one explanation on stderr, unordered frees held back while
device work may use them, stream-ordered ones reused at once, second frees
refused wherever the first one waits, frees held in threads' batches never
lost, eight threads at once, fork, graph capture, the runtime functions the
interposer exports (dropin_rt_app over the mock shared runtime), and a trace
that is complete after exit and after SIGTERM and loads in carve-replay.
The cap counts memory taken behind carve's back (cuMemCreate as PyTorch's
expandable segments, ggml and NCCL use it, pitched and pool allocations),
and failures injected with --fail-every / --fail-at reach the program at
exactly the calls asked for, through every entry point (dropin_fault_app).
The measurement switch (carve_run_serve) sends new allocations to the driver
and back, each buffer's free going to its owner (dropin_serve_app).
Also carve-run's option checking.

Every carve-run below runs in carve-run's default mode (virtual-memory
mode: granules of cuMemCreate memory mapped as buffers need them), or with
MODE "segments" in segments mode (--mode segments is added to each call
that names no mode itself). In segments mode only what depends on the mode
runs (what carve serves and the promises it keeps, under carve-run; the
explorer with 2 seeds unless DROPIN_EXPLORE_SEEDS says otherwise); what
does not (option checking, the programs without carve-run, the runtime
floor, fault numbering, the memory counted behind carve's back, trace,
report and picture) and the cases that name their modes themselves (two
contexts, the replayed footprint, virtual-memory faults) run once, in the
default mode's run. Each part says how long it took.

Usage: test_dropin_cpu.py CARVE_RUN APP MOCK_DIR CARVE_REPLAY [MODE]
"""
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time

checks = failures = 0

# The modes of dropin_promises (promises_app.c).
PROMISES = ("destroyed", "release", "capture", "capturerace", "racefree", "signals", "signals swap", "forkthreads", "forkfirst",
            "forkvmm", "crossctx", "lifetimes", "twoctx", "capfree", "resetrace")
# resetrace needs the driver slow to reset (the others would only be slower).
PROMISE_ENV = {"resetrace": {"MOCK_CONTEXT_DELAY_US": "100000"}}


def check(ok, what):
    global checks, failures
    checks += 1
    if not ok:
        failures += 1
        print("FAIL: " + what, file=sys.stderr)


# A sanitized build's interposer runs with its sanitizer's runtime beside it.
RUNTIME = os.environ.get("DROPIN_PRELOAD_RUNTIME", "")
RUN_TOOL = None
MODE_ARGS = []


def run(args, env_extra=None, timeout=240, stdin=None):
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = MOCK + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    for k in ("CARVE_CONF", "CARVE_RUN_TRACE", "CARVE_RUN_REPORT", "CARVE_RUN_SVG", "LD_PRELOAD"):
        env.pop(k, None)
    env.update(env_extra or {})
    if args[0] == RUN_TOOL and MODE_ARGS and "--mode" not in args and "--print-env" not in args:
        args = [args[0]] + MODE_ARGS + args[1:]
    if RUNTIME and (args[0] == RUN_TOOL or "libcarve_preload" in env.get("LD_PRELOAD", "")):
        # beside the interposer (carve-run puts it in front of what is there)
        env["LD_PRELOAD"] = env["LD_PRELOAD"] + ":" + RUNTIME if env.get("LD_PRELOAD") else RUNTIME
    f = open(stdin) if stdin else None
    try:
        p = subprocess.run(args, env=env, stdin=f, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                           universal_newlines=True)
    finally:
        if f:
            f.close()
    return p.returncode, p.stdout, p.stderr


def ok_line(out, mode):
    for line in out.splitlines():
        if line.startswith("OK " + mode):
            return line
    return None


def number_before(line, word):
    toks = line.split()
    return int(toks[toks.index(word) - 1])


T_PART = [None, time.time()]


def part(name):
    """A part of the test begins: the one before says how long it took."""
    now = time.time()
    if T_PART[0]:
        print(f"part {T_PART[0]}: {now - T_PART[1]:.1f} s")
    T_PART[0], T_PART[1] = name, now


def main():
    global MOCK, RUN_TOOL, MODE_ARGS
    if len(sys.argv) not in (5, 6) or (len(sys.argv) == 6 and sys.argv[5] not in ("default", "segments")):
        print(__doc__, file=sys.stderr)
        return 2
    run_tool, app, MOCK, replay = sys.argv[1:5]
    RUN_TOOL = run_tool
    if len(sys.argv) == 6 and sys.argv[5] == "segments":
        MODE_ARGS = ["--mode", "segments"]
    FULL = not MODE_ARGS  # the parts that do not depend on the mode run in the default mode's run only
    tmp = tempfile.mkdtemp(prefix="dropin-")

    part("options")
    # ---- options ---------------------------------------------------------
    rc, out, err = run([run_tool, "--help"])
    check(rc == 0 and "--limit" in out and "Examples" in out, "--help explains the options")
    for bad in (["--limit", "0x100", "--", "true"], ["--limit", "1.5", "--", "true"], ["--mode", "fast", "--", "true"],
                ["--device-limit", "x=1GiB", "--", "true"], ["--device-limit", "99=1GiB", "--", "true"],
                ["--bogus", "--", "true"], [], ["--limit", "1GiB", "--conf", "limit=2GiB", "--", "true"],
                ["--growth", "--no-growth", "--", "true"]):
        rc, out, err = run([run_tool] + bad)
        check(rc == 2 and err.startswith("carve-run:") and out == "", f"carve-run {bad}: exit 2 with a message ({rc}, {err!r})")
    rc, out, err = run([run_tool, "--print-env", "--limit", "8GiB", "--device-limit", "1=2GiB", "--trace", "t.csv",
                        "--report"])
    env = dict(line.split("=", 1) for line in out.splitlines())
    check(rc == 0 and env.get("CARVE_CONF") == "limit=8GiB;device1:limit=2GiB", f"--print-env: {out!r}")
    check(env.get("LD_PRELOAD", "").split(":")[0].endswith("libcarve_preload.so")
          and env.get("CARVE_RUN_TRACE") == "t.csv"
          and env.get("CARVE_RUN_REPORT") == "-", f"--print-env sets the interposer and friends: {out!r}")
    for bad, opt in ((["--fail-every", "0"], "--fail-every"), (["--fail-every", "x"], "--fail-every"),
                     (["--fail-every", "-3"], "--fail-every"), (["--fail-at", "1.5"], "--fail-at"),
                     (["--fail-at", ""], "--fail-at"), (["--fail-at", "2", "--fail-at", "3"], "--fail-at")):
        rc, out, err = run([run_tool] + bad + ["--", "true"])
        check(rc == 2 and err.startswith("carve-run:") and opt in err.splitlines()[0] and out == "",
              f"carve-run {bad}: exit 2 naming {opt} ({rc}, {err!r})")
    rc, out, err = run([run_tool, "--", "true"], {"CARVE_RUN_FAIL_EVERY": "zero"})
    check(rc == 2 and "CARVE_RUN_FAIL_EVERY" in err, f"a bad CARVE_RUN_FAIL_EVERY is refused by carve-run ({rc}, {err!r})")
    rc, out, err = run([run_tool, "--print-env", "--fail-every", "7", "--fail-at", "2"])
    check(rc == 0 and "CARVE_RUN_FAIL_EVERY=7\n" in out and "CARVE_RUN_FAIL_AT=2\n" in out,
          f"--print-env gives the faults' environment form: {out!r}")
    rc, out, err = run([run_tool, "--", "/nonexistent/program"])
    check(rc == 127 and "cannot run" in err, "a program that cannot be run: exit 127")
    rc, out, err = run([run_tool, "--", "sh", "-c", "exit 7"])
    check(rc == 7, "the program's exit status passes through")

    part("served")
    # ---- served by carve -------------------------------------------------
    rc, out, err = run([app, "basic"])
    raw = ok_line(out, "basic")
    check(rc == 0 and raw, f"basic without carve-run: {out}{err}")
    rc, out, err = run([run_tool, "--", app, "basic"])
    line = ok_line(out, "basic")
    check(rc == 0 and line, f"basic under carve-run: {out}{err}")
    if raw and line:
        check(number_before(raw, "reached") == 2000, f"without carve-run every allocation reaches the driver: {raw}")
        check(number_before(line, "reached") < 100, f"under carve-run few do: {line}")

    rc, out, err = run([run_tool, "--", app, "lookup"])
    line = ok_line(out, "lookup")
    check(rc == 0 and line and number_before(line, "reached") < 100,
          f"functions found through dlsym + cuGetProcAddress (plain and per-thread) are carve's: {out}{err}")
    rc, out, err = run([app, "lookup"])
    check(rc == 0 and number_before(ok_line(out, "lookup") or "0 0 reached", "reached") == 200,
          "the same lookups without carve-run reach the driver")

    # A tool preloaded beside the interposer that wraps dlopen and looks it
    # up through dlsym (compute-sanitizer puts its own in front): no
    # re-entry, whichever comes first.
    tool = os.path.join(MOCK, "libdropin_tool.so")
    interposer = env.get("LD_PRELOAD", "").split(":")[0]
    for order, preload in (("in front of", tool + ":" + interposer), ("behind", interposer + ":" + tool)):
        rc, out, err = run([app, "basic"], {"LD_PRELOAD": preload})
        line = ok_line(out, "basic")
        check(rc == 0 and line and number_before(line, "reached") < 100 and "FAIL tool" not in err,
              f"a dlopen-wrapping tool preloaded {order} the interposer: {out}{err}")

    rc, out, err = run([run_tool, "--", app, "foreign"])
    line = ok_line(out, "foreign")
    check(rc == 0 and line and number_before(line, "frees") == 0,
          f"foreign pointers reach the driver, stray and double frees of carved memory do not: {out}{err}")

    rc, out, err = run([run_tool, "--limit", "256MiB", "--", app, "info"])
    line = ok_line(out, "info")
    check(rc == 0 and line and f"total {256 << 20} " in line, f"cuMemGetInfo reports the cap as total: {out}{err}")

    rc, out, err = run([run_tool, "--limit", "256MiB", "--", app, "oom"])
    line = ok_line(out, "oom")
    check(rc == 0 and line and number_before(line, "pieces") >= 12 and "error 2" in line and "room_again=1" in line,
          f"past the cap: CUDA_ERROR_OUT_OF_MEMORY within 256 MiB, and the memory comes back: {out}{err}")
    check(err.count("out of memory on device 0") == 1 and "limit" in err, f"one explanation on stderr: {err!r}")

    rc, out, err = run([run_tool, "--", app, "quarantine"], {"MOCK_EVENT_POLLS": "1000000"})
    check(rc == 0 and "unordered_reused=0 ordered_reused=1" in out,
          f"an unordered free waits for device work; an ordered one is reused at once: {out}{err}")
    # With queries that never say an event is done (1000000 polls), memory
    # comes back only because the arena waits for the oldest epoch of frees
    # rather than grow past them (cuEventSynchronize completes it), or, with
    # no non-blocking stream in the context, once an event on the legacy
    # stream was recorded after the free (quarantine.c, ordered reuse).
    for polls in ("1000000", "3", "0"):
        for mode in ("reuse", "reuse-nb", "reuse-off"):
            args = [run_tool, "--no-ordered-reuse", "--", app, "reuse"] if mode == "reuse-off" else \
                [run_tool, "--", app, mode]
            rc, out, err = run(args, {"MOCK_EVENT_POLLS": polls})
            line = ok_line(out, "reuse")
            m = re.search(r"reuse (\d+) of \d+ .*, (\d+) before an event was recorded after its free, (\d+) before one "
                          r"completed", line or "")
            n, early, undone = (int(x) for x in m.groups()) if m else (-1, -1, -1)
            if mode == "reuse":
                ok = n > 1000 and early == 0 and (polls != "1000000" or undone > 1000)
                what = ("with no non-blocking stream, unordered frees come back (to the freeing thread too) once an "
                        "event on the legacy stream was recorded after them, without waiting for it")
            else:
                ok = n > 1000 and early == 0 and undone == 0
                what = ("with a non-blocking stream, unordered frees come back (to the freeing thread too) only "
                        "after an event recorded after them completed" if mode == "reuse-nb" else
                        "with --no-ordered-reuse, unordered frees come back only after an event recorded after "
                        "them completed")
            check(rc == 0 and ok, f"{what} (MOCK_EVENT_POLLS={polls}): {out}{err}")
    # Ordered reuse: a buffer freed while a kernel on a blocking stream still
    # uses it comes back before that kernel completes, and whatever uses it
    # next waits for it: the legacy stream, another blocking stream (both
    # through the event recorded on the legacy stream), or a non-blocking
    # stream / a context made after the reuse (the interposer waits for that
    # event when it is made). The mock's oracle counts any race.
    # The report names what ended ordered reuse (null while it held).
    ended_by = {"legacy": None, "blocking": None, "nb-later": "a non-blocking stream", "ctx-later": "cuCtxCreate"}
    for how in ("legacy", "blocking", "nb-later", "ctx-later", "off"):
        rjson = os.path.join(tmp, f"ordered-{how}.json")
        off = ["--no-ordered-reuse"] if how == "off" else []
        rc, out, err = run([run_tool, f"--report={rjson}"] + off + ["--", app, "ordered", "legacy" if off else how])
        try:
            with open(rjson) as f:
                why = json.load(f)["devices"][0]["ordered_reuse_ended_by"]
        except (OSError, ValueError, KeyError, IndexError) as e:
            why = f"no report ({e})"
        want = "--no-ordered-reuse" if off else ended_by[how]
        check(why == want or (how == "ctx-later" and isinstance(why, str) and why.startswith("cuCtxCreate")),
              f"the report's ordered_reuse_ended_by, next use {how}: {why!r} (expected {want!r})")
        if off:
            continue
        line = ok_line(out, "ordered " + how) or ""
        m = re.search(r"reused=1 .* kernels queued at the reuse (\d+), after the next use (\d+); 0 violations", line)
        waited = how in ("nb-later", "ctx-later")
        ok = rc == 0 and m and int(m.group(1)) >= 1 and (int(m.group(2)) == 1) == waited
        check(ok, f"ordered reuse, next use {how}: the buffer back before its old kernel completed, no race"
                  f"{' (the old kernel waited for when the stream or context was made)' if waited else ''}: {out}{err}")
    # The sequences that broke ordered reuse when it was first written
    # (tests/dropin/ordered_app.c), with the mock's waits and context calls
    # slowed down so that a thread that should wait shows its race.
    ordered_app = os.path.join(MOCK, "dropin_ordered_app")
    for case in (["race-mark"], ["ctx-v1"], ["ctx-v1", "graph"], ["nb-dying"], ["fork"], ["v1-stream"],
                 ["v1-reset"], ["v1-capture"], ["v1-capture", "ptsz"], ["refused-nb"]):
        rc, out, err = run([run_tool, "--", ordered_app] + case,
                           {"MOCK_SYNC_DELAY_US": "300000", "MOCK_CONTEXT_DELAY_US": "300000"})
        line = ok_line(out, "ordered-app " + case[0]) or ""
        good = "answered not initialized: 1" in line if case[0] == "fork" else " 0 violations" in line
        check(rc == 0 and good and "FAIL" not in out,
              f"ordered reuse, {' '.join(case)}: no race, no hang: {out}{err}")
    rc, out, err = run([run_tool, "--", app, "threads"])
    check(rc == 0 and ok_line(out, "threads"), f"eight threads: {out}{err}")
    rjson = os.path.join(tmp, "capture.json")
    rc, out, err = run([run_tool, f"--report={rjson}", "--", app, "capture"])
    line = ok_line(out, "capture")
    check(rc == 0 and line and number_before(line, "captured") == 1,
          f"an allocation on a captured stream goes to the driver (a graph node): {out}{err}")
    try:
        with open(rjson) as f:
            k = json.load(f)["counted"][0]["kinds"]["driver"]
        check(k["allocations"] == 0 and k["peak_bytes"] == 0 and k["bytes_at_exit"] == 0,
              f"a graph's allocation node is not counted (the driver takes graph memory when the graph runs): {k}")
    except (OSError, ValueError, KeyError, IndexError) as e:
        check(False, f"capture report ({e})")

    rc, out, err = run([run_tool, "--", app, "doublefree"])
    check(rc == 0 and "refused: same=1 async=1 other_thread=1" in out and "accepted once: 512/512" in out
          and "later refusals 0" in out,
          f"a second free of a waiting buffer is refused, from any thread and racing; later ones are not: {out}{err}")
    rjson = os.path.join(tmp, "batches.json")
    rc, out, err = run([run_tool, "--limit", "8MiB", f"--report={rjson}", "--", app, "batches"])
    line = ok_line(out, "batches")
    check(rc == 0 and line and "while_held=1 after_exit=1" in line and "stream_waited=1" in line,
          f"frees waiting in threads' batches: taken when memory is short, handed over at thread exit, "
          f"waited for when a stream is destroyed: {out}{err}")
    try:
        with open(rjson) as f:
            d = json.load(f)["devices"][0]
        n = int(line.split("frees=")[1])
        check(d["allocs"] == n and d["frees"] == n, f"the report counts every thread's calls: {d} vs {n}")
    except (OSError, ValueError, KeyError, IndexError, AttributeError) as e:
        check(False, f"batches report ({e}): {out}{err}")

    rc, out, err = run([run_tool, "--report", "--", app, "reset"])
    check(rc == 0 and "OK reset 0 frees refused" in out,
          f"a context reset while frees wait: a new arena, nothing refused or overlapping: {out}{err}")

    part("promises")
    # ---- promises, each checked by replaying the sequence that once broke it --
    # dropin_promises (promises_app.c) counts what the mock device's oracle
    # saw: a range handed out while queued work still used it, from memory
    # the driver had freed, or twice. Without carve-run the mock driver alone
    # must pass every mode (the program itself is correct).
    promises = os.path.join(MOCK, "dropin_promises")
    if FULL:
        for mode in PROMISES:
            args = mode.split()
            rc, out, err = run([promises] + args, dict({"MOCK_CAPTURE_DELAY_US": "200"}, **PROMISE_ENV.get(mode, {})),
                               timeout=120)
            check(rc == 0 and ok_line(out, args[0]), f"dropin_promises {mode} without carve-run: {out}{err}")

    # A buffer a kernel on a stream still writes, freed with cuMemFree after
    # the stream was destroyed (non-blocking, blocking; and a stream-ordered
    # one whose stream's handle the next stream reuses): not handed out
    # before that work completes.
    rc, out, err = run([run_tool, "--", promises, "destroyed"], timeout=120)
    check(rc == 0 and "0 violations" in (ok_line(out, "destroyed") or ""),
          f"frees after a stream is destroyed wait for the work still queued on it: {out}{err}")

    # The primary context reset by its last release: a fresh arena after the
    # next retain, nothing served from the memory the driver freed.
    rc, out, err = run([run_tool, "--", promises, "release"], timeout=120)
    check(rc == 0 and "0 violations" in (ok_line(out, "release") or ""),
          f"a primary context reset by its last release is noticed: {out}{err}")

    # Graph capture on the per-thread stream (its handle, or NULL in the _ptsz
    # calls): its stream-ordered allocations are graph nodes, not carve's; a
    # cross-stream cuMemFreeAsync while another stream captures is accepted.
    rc, out, err = run([run_tool, "--", promises, "capture"], timeout=120)
    check(rc == 0 and "2 graph nodes" in out and "accepted, 0 violations" in out,
          f"graph capture is respected on every stream: {out}{err}")

    # Captures begun on one thread while another frees, the driver taking
    # 200 us to return from cuStreamBeginCapture: no event of carve's lands
    # on the legacy stream once the driver has begun the capture.
    rc, out, err = run([run_tool, "--", promises, "capturerace"], {"MOCK_CAPTURE_DELAY_US": "200"}, timeout=120)
    check(rc == 0 and "0 broken" in out, f"no event is recorded once a capture has begun: {out}{err}")

    # cuMemFree and cuMemFreeAsync of one buffer at once, 20000 times: exactly
    # one accepted each time, nothing handed out twice. Under --trace to a
    # .gz, a third thread's events keep the trace's lock and pipe busy, which
    # holds either free up inside its window at any point.
    rc, out, err = run([run_tool, "--trace", os.path.join(tmp, "race.csv.gz"), "--", promises, "racefree"],
                       timeout=240)
    check(rc == 0 and "both accepted 0, neither 0, 0 violations" in out,
          f"racing cuMemFree and cuMemFreeAsync of one buffer: exactly one accepted: {out}{err}")

    # With --trace, a program that ignores one of SIGINT/SIGTERM and handles
    # the other with SA_SIGINFO survives both, its handler getting siginfo.
    for mode in ("signals", "signals swap"):
        rc, out, err = run([run_tool, "--trace", os.path.join(tmp, "signals.csv"), "--", promises] + mode.split())
        check(rc == 0 and ok_line(out, "signals"), f"{mode} under --trace: exit {rc}: {out}{err}")

    # fork while four threads allocate, free and make and destroy streams:
    # the child's calls (a free of a buffer carve handed out among them) all
    # answer, as the driver answers a child, and none hangs.
    rc, out, err = run([run_tool, "--", promises, "forkthreads"], timeout=240)
    check(rc == 0 and "0 children hung, 0 died otherwise" in out,
          f"fork from a parent whose threads use carve: the child never hangs: {out}{err}")
    rc, out, err = run([run_tool, "--", promises, "forkfirst"], timeout=120)
    check(rc == 0 and "child exit 0 (served)" in out,
          f"a child forked before CUDA was used is served by carve: {out}{err}")

    # fork while three threads take and give back physical memory (the cap's
    # count is taken under the meter's lock): every child's cuMemCreate,
    # cuMemAllocPitch and pool allocation answer CUDA_ERROR_NOT_INITIALIZED,
    # as the driver answers a child, and none hangs on a lock the parent's
    # threads held.
    rc, out, err = run([run_tool, "--limit", "64MiB", "--", promises, "forkvmm"], timeout=240)
    check(rc == 0 and ok_line(out, "forkvmm") and "0 children hung, 0 answered otherwise" in out,
          f"fork while threads count physical memory: the child never hangs: {out}{err}")

    # A second free of a buffer at the start of carve's segment, made while
    # another context is current, and an interior pointer's: refused, never
    # passed to the driver (which would free the segment under carve).
    rc, out, err = run([run_tool, "--limit", "64MiB", "--", promises, "crossctx"], timeout=120)
    check(rc == 0 and "second free 1, stream-ordered 1, interior 1, 0 violations" in out,
          f"a double free from another context is refused: {out}{err}")

    # 70 contexts made and taken away (reset, last release, destroy), each
    # holding 40 MiB under a cap of 64 MiB: all of each one's memory comes
    # back, every context is served (its 16 small allocations take at most a
    # segment from the driver) and reports the cap, and a pool allocation
    # that outlives the contexts stays counted.
    rc, out, err = run([run_tool, "--limit", "64MiB", "--", promises, "lifetimes"], timeout=240)
    line = ok_line(out, "lifetimes")
    check(rc == 0 and line and "0 kept memory" in line and "0 reported another total" in line
          and number_before(line, "of") <= 2, f"context lifetimes past 64 under a cap: {out}{err}")

    # Two contexts on one device: what cuMemGetInfo says is free in the
    # second can be had there, 2 MiB more cannot, in each mode; also when no
    # arena can be made (--mode vmm on a device without virtual memory
    # management: every call goes to the driver): the cap is reported all
    # the same.
    if FULL:
        for mode_args, env in (([], {}), (["--mode", "vmm"], {}), (["--mode", "segments"], {}),
                               (["--mode", "vmm"], {"MOCK_NO_VMM": "1"})):
            rc, out, err = run([run_tool, "--limit", "64MiB"] + mode_args + ["--", promises, "twoctx"], env, timeout=120)
            check(rc == 0 and "free 16 MiB of 64 in the second context: 2 MiB more answered 2, 2 MiB less 0" in out,
                  f"cuMemGetInfo in a second context {mode_args} {env}: {out}{err}")

    # What virtual-memory mode keeps on top of segments mode (and segments
    # mode keeps as well): a granule two buffers share stays mapped while one
    # lives, cached memory freed while a kernel still writes it is unmapped
    # only after the kernel (the mock counts an unmap under queued work or an
    # owned range as a breach), the whole granules of cuMemGetInfo's free
    # memory can be had in one piece and 2 MiB more cannot, and the device
    # never holds more than the cap of 32 MiB.
    rc, out, err = run([run_tool, "--limit", "32MiB", "--", app, "granules"], timeout=120)
    check(rc == 0 and "shared_ok=1" in out and "waited=1" in out and "all of it 0, 2 MiB more 2" in out
          and "0 violations" in out, f"granules under the quarantine and the cap: {out}{err}")

    # Legacy IPC (cuIpcGetMemHandle, and through the runtime
    # cudaIpcGetMemHandle) cannot export the cuMemCreate granules of the
    # default mode: refused with CUDA_ERROR_NOT_SUPPORTED and a line naming
    # --mode segments, asked directly and through cuGetProcAddress; in
    # segments mode and without carve-run the driver exports the memory.
    if FULL:
        rc, out, err = run([run_tool, "--", app, "ipc"], timeout=60)
        check(rc == 0 and "OK ipc direct=801 lookup=801" in out and "--mode segments" in err
              and err.count("cuIpcGetMemHandle") == 1, f"IPC refused in the default mode: {out}{err}")
        rc, out, err = run([run_tool, "--mode", "segments", "--", app, "ipc"], timeout=60)
        check(rc == 0 and "OK ipc direct=0 lookup=0" in out and "cuIpcGetMemHandle" not in err,
              f"IPC in segments mode: {out}{err}")
        rc, out, err = run([app, "ipc"], timeout=60)
        check(rc == 0 and "OK ipc direct=0 lookup=0" in out, f"IPC without carve-run: {out}{err}")

    # Peer access in the default mode (the mock reporting two devices, each
    # able to access the other's memory; MOCK_ACCESS_LOG records every
    # cuMemSetAccess): peers=auto grants carve's mappings to both devices,
    # as cudaMalloc memory is reachable once the program enables peer
    # access; --conf peers=none and a device 1 that cannot access device 0
    # (MOCK_NO_PEERS) grant them to device 0 alone; segments mode maps
    # nothing.
    if not MODE_ARGS:
        for conf, env, want in ((None, {}, "0 1"), ("peers=none", {}, "0"), (None, {"MOCK_NO_PEERS": "1"}, "0")):
            log = os.path.join(tmp, "access.log")
            if os.path.exists(log):
                os.unlink(log)
            args = [run_tool] + (["--conf", conf] if conf else []) + ["--", app, "basic"]
            rc, out, err = run(args, dict({"MOCK_DEVICES": "2", "MOCK_ACCESS_LOG": log}, **env), timeout=120)
            grants = set()
            if os.path.exists(log):
                with open(log) as f:
                    grants = {" ".join(line.split()[2:]) for line in f if line.startswith("access ")}
            check(rc == 0 and ok_line(out, "basic") and grants == {want},
                  f"access granted on two devices ({conf} {env}): {sorted(grants)}, want {want!r}: {out}{err}")

    # A context of the program's own whose cuCtxDestroy the driver refuses
    # once: served as before (its frees accepted, nothing passed to the
    # driver, nothing handed out early); then destroyed: every granule and
    # range back, no device memory kept, in driver calls that follow what
    # was mapped (2 GiB of address space, 98 MiB mapped); also with every
    # third cuMemRelease (a granule's handle would hold its memory after the
    # unmap) or cuMemUnmap failing.
    for env in ({}, {"MOCK_VMM_FAIL": "cuMemRelease", "MOCK_VMM_FAIL_EVERY": "3"},
                {"MOCK_VMM_FAIL": "cuMemUnmap", "MOCK_VMM_FAIL_EVERY": "3"})[:3 if FULL else 1]:
        rc, out, err = run([run_tool, "--", app, "ownctx"], env, timeout=120)
        line = ok_line(out, "ownctx") or ""
        m = re.search(r"(\d+) MiB reserved and (\d+) MiB mapped before, 0 and 0 after, 0 MiB of device memory kept, "
                      r"(\d+) driver calls", line)
        check(rc == 0 and "refused=1, still current 1" in line and "8 of 8 frees accepted, 0 stray frees" in line
              and m and "0 violations" in line and (MODE_ARGS or int(m.group(2)) > 0),
              f"a context whose destruction is refused once, then destroyed {env}: {out}{err}")

    # More than 64 contexts destroyed at once (each held in the driver a
    # second), and meanwhile a destruction the driver refuses: that context
    # stays served (its free accepted, a new allocation served), every
    # destroyed context's granules go back, nothing is left after a reset.
    rc, out, err = run([run_tool, "--", app, "dying"], {"MOCK_CONTEXT_DELAY_US": "1000000"}, timeout=120)
    check(rc == 0 and "OK dying 72 of 72 contexts destroyed at once; the refused one: free 0, alloc 0, free 0; "
          "after reset 0 MiB reserved, 0 MiB mapped; 0 violations" in out, f"72 contexts going at once: {out}{err}")

    # Ordered reuse ends before the first non-blocking stream exists: an
    # allocation made while the driver makes it (another thread's, in the
    # moment before the call returns) gets no buffer whose earlier work is
    # still queued (the oracle). The barrier was once waited for only after
    # the driver had made the stream (about 1 run in 100 of three threads
    # freeing and allocating while one made the stream).
    rc, out, err = run([run_tool, "--", app, "nb-window"], timeout=120)
    check(rc == 0 and "OK nb-window" in out, f"no buffer reused in order while a non-blocking stream exists: {out}{err}")

    # The driver failing each virtual-memory call in turn (every third call
    # of one function, in the mock): the program gets every allocation, and
    # what the cap counts at exit is what carve holds.
    if FULL:
        for fn in ("cuMemAddressReserve", "cuMemAddressFree", "cuMemCreate", "cuMemRelease", "cuMemMap", "cuMemUnmap",
                   "cuMemSetAccess", "cuMemRetainAllocationHandle"):
            rc, out, err = run([run_tool, "--report", "--", app, "basic"],
                               {"MOCK_VMM_FAIL": fn, "MOCK_VMM_FAIL_EVERY": "3"}, timeout=120)
            check(rc == 0 and ok_line(out, "basic") and " 0 out of memory" in err,
                  f"basic with every third {fn} failing: {out}{err}")

    # Memory freed by a free node of a captured graph stays counted until the
    # graph runs (carve does not see it run); an allocation node of a graph
    # destroyed without running is not counted.
    rc, out, err = run([run_tool, "--limit", "64MiB", "--", promises, "capfree"], timeout=120)
    check(rc == 0 and "free 24 MiB of 64: 2 MiB more answered 2, 2 MiB less 0" in out
          and "allocation node took 0 MiB" in out, f"graph nodes and the cap: {out}{err}")
    check("Outside this arena: the cap of 64.00 MiB holds 40.00 MiB already (pitched 40.00 MiB)" in err,
          f"carve's out-of-memory message says what holds the cap outside its arena: {err!r}")

    # A thread's first allocation while another resets the primary context
    # (the driver taking 100 ms to do it): no arena made meanwhile outlives
    # the reset.
    rc, out, err = run([run_tool, "--", promises, "resetrace"], {"MOCK_CONTEXT_DELAY_US": "100000"}, timeout=120)
    check(rc == 0 and "OK resetrace 0 violations" in out, f"an allocation racing a context reset: {out}{err}")

    # The program changes its dispositions of SIGINT and SIGTERM after the
    # interposer installed its handler (ignored, handled once with
    # SA_SIGINFO | SA_RESETHAND, signal(), then SIGTERM back to SIG_DFL):
    # each behaves and reads back as the program set it, and the final
    # SIGTERM ends it with the trace whole (plain and compressed).
    if FULL:
        rc, out, err = run([promises, "sigreset"], timeout=120)
        check(rc == -signal.SIGTERM and ok_line(out, "sigreset"), f"sigreset without carve-run: {rc} {out}{err}")
        for name in ("sigreset.csv", "sigreset.csv.gz"):
            path = os.path.join(tmp, name)
            rc, out, err = run([run_tool, "--trace", path, "--", promises, "sigreset"], timeout=120)
            line = ok_line(out, "sigreset")
            check(rc == -signal.SIGTERM and line, f"sigreset under --trace {name}: {rc} {out}{err}")
            rc2, out2, err2 = run([replay, "--json", "-q", path])
            try:
                j = json.loads(out2)
                n = number_before(line, "allocations") if line else -1
                check(j["skipped_lines"] == 0 and j["allocs"] == n and j["frees"] == n,
                      f"the trace is whole after SIGTERM set back to SIG_DFL ({name}, {n} allocations): {out2}")
            except (ValueError, KeyError) as e:
                check(False, f"the trace of sigreset loads ({name}: {e}): {out2}{err2}")

    # While the arena is made, carve's own backend calls cuMemGetInfo through
    # the interposer (as the CUDA runtime of --mode vmm does): answered by
    # the driver, no deadlock on the table of contexts.
    try:
        rc, out, err = run([run_tool, "--", app, "basic"], {"MOCK_REENTER": "1"}, timeout=60)
        line = ok_line(out, "basic")
        check(rc == 0 and line and number_before(line, "reached") < 100,
              f"carve's own backend re-entering the hooks while the arena is made: {out}{err}")
    except subprocess.TimeoutExpired:
        check(False, "carve's own backend re-entering the hooks while the arena is made: deadlock (60 s)")

    part("explorer")
    # ---- the schedule explorer (explore.c) ------------------------------------
    # Threads allocating, freeing (ordered and not), queueing work, making and
    # destroying streams, capturing graphs, forking, living whole second
    # contexts (more than 64 in a run), changing signal dispositions, with
    # context resets in between, in an order drawn from a seed; the mock
    # device's oracle checks every range handed out. On the mock alone first
    # (the program is correct), then under carve-run (one seed with --trace,
    # one under a cap). A long run:
    # DROPIN_EXPLORE_SEEDS (how many, default 8), DROPIN_EXPLORE_FIRST (the
    # first seed, default 1), DROPIN_EXPLORE_STEPS (per thread, default 2000),
    # DROPIN_EXPLORE_THREADS (default 4).
    explore = os.path.join(MOCK, "dropin_explore")
    nseeds = int(os.environ.get("DROPIN_EXPLORE_SEEDS", "8" if FULL else "2"))
    first = int(os.environ.get("DROPIN_EXPLORE_FIRST", "1"))
    esteps = os.environ.get("DROPIN_EXPLORE_STEPS", "2000")
    ethreads = os.environ.get("DROPIN_EXPLORE_THREADS", "4")
    if FULL:
        rc, out, err = run([explore, str(first), esteps, ethreads], timeout=600)
        check(rc == 0 and ok_line(out, "explore"), f"dropin_explore {first} without carve-run: {out}{err}")
    failed_seeds, t0 = [], time.time()
    for sd in range(first, first + nseeds):
        # One seed traced (the interposer's signal handler in front of the
        # program's dispositions), one under a cap (every second context
        # must report it), one with captures that take longer to begin (so
        # that the program's cuCtxSynchronize meets them more often: each is
        # refused and breaks the capture, the program's doing, not carve's).
        args = [run_tool] + (["--trace", os.path.join(tmp, "explore.csv")] if sd == first else []) + \
               (["--limit", "768MiB"] if sd == first + 1 else []) + ["--", explore, str(sd), esteps, ethreads]
        try:
            rc, out, err = run(args, {"MOCK_CAPTURE_DELAY_US": "200"} if sd == first + 2 else None, timeout=600)
        except subprocess.TimeoutExpired:
            rc, out, err = -1, "timeout (600 s)", ""
        if rc != 0 or not ok_line(out, "explore"):
            failed_seeds.append(sd)
            print(f"dropin_explore seed {sd} failed (reproduce: carve-run -- {explore} {sd} {esteps} {ethreads}):"
                  f"\n{out[-3000:]}{err[-2000:]}", file=sys.stderr)
    check(not failed_seeds, f"schedule explorer under carve-run: seeds {failed_seeds} failed of {nseeds}")
    print(f"dropin_explore: {nseeds} seeds from {first}, {ethreads} threads x {esteps} steps under carve-run, "
          f"{len(failed_seeds)} failed, {time.time() - t0:.1f} s")

    part("runtime")
    # ---- the runtime functions the interposer exports ----------------------
    # A program whose shared runtime (the mock) lives in libraries loaded with
    # RTLD_LOCAL: the plain calls are answered without the runtime, all else
    # reaches it (and its last error) exactly once.
    rt_app = os.path.join(MOCK, "dropin_rt_app")
    # Its plain cudaMalloc on the thread that captures in global mode: the
    # driver refuses it (cudaErrorStreamCaptureUnsupported, 900) and the
    # capture ends invalidated (901) without carve-run; under carve-run the
    # arena serves it and the capture ends well.
    rc, out, err = run([rt_app, MOCK])
    line = ok_line(out, "runtime")
    check(rc == 0 and line, f"rt_app without carve-run: {out}{err}")
    if line:
        got = dict(kv.split("=") for kv in line.split()[2:])
        want = {"capture_plain": "900", "capture_error": "900", "capture_end": "901"}
        wrong = {k: (got.get(k), v) for k, v in want.items() if got.get(k) != v}
        check(not wrong, f"without carve-run the driver refuses cudaMalloc inside a global-mode capture (got, "
                         f"wanted): {wrong} {line}")
    rc, out, err = run([run_tool, "--", rt_app, MOCK])
    line = ok_line(out, "runtime")
    check(rc == 0 and line, f"rt_app under carve-run: {out}{err}")
    if line:
        got = dict(kv.split("=") for kv in line.split()[2:])
        want = {"start": "1", "passed": "0", "ordered_reused": "1", "second_free": "1", "second_passed": "1",
                "errors_passed": "2", "foreign": "1", "capture_passed": "4", "graph_nodes": "1",
                "plain_to_driver": "0", "after_capture": "0", "fresh_first": "1", "fresh_then": "0",
                "fresh_driver": "0", "tail_passed": "2", "capture_plain": "0", "capture_error": "0",
                "capture_end": "0"}
        wrong = {k: (got.get(k), v) for k, v in want.items() if got.get(k) != v}
        check(not wrong and int(got["driver_allocs"]) < 10,
              f"cudaMalloc/cudaFree/cudaMallocAsync/cudaFreeAsync[_ptsz] answered by the interposer only in the "
              f"plain case (got, wanted): {wrong} {line}")
        check(err.count("out of memory on device 0") == 1, f"one explanation of the failed allocation: {err!r}")

    # The pair benchmark runs in every mode, served without the runtime.
    bench = os.path.join(MOCK, "dropin_bench_pairs")
    for mode in ("driver", "async", "runtime", "runtime-async"):
        rc, out, err = run([run_tool, "--", bench, mode, "3000"])
        f = out.split()
        check(rc == 0 and len(f) == 7 and f[0] == "pairs" and float(f[5]) < 1.1 and float(f[6]) == 0,
              f"dropin_bench_pairs {mode}: about one driver call and no runtime call a pair: {out}{err}")

    # The benchmark's instrument (runtime_floor.c): behind the runtime, a
    # stand-in serves the pairs itself; in count mode it counts driver calls.
    if FULL:
        floor = os.path.join(MOCK, "libdropin_floor.so")
        rc, out, err = run([bench, "runtime", "3000"], {"LD_PRELOAD": floor})
        served = re.search(r"dropin_floor: (\d+) allocations served by the stand-in, (\d+) passed", err)
        check(rc == 0 and served and int(served.group(1)) >= 3000 and int(served.group(2)) < 10,
              f"the runtime floor's stand-in serves the pairs without the driver: {out}{err}")
        if platform.machine() == "x86_64":
            rc, out, err = run([bench, "runtime", "3000"], {"LD_PRELOAD": floor, "DROPIN_FLOOR": "count"})
            calls = dict((m.group(2), int(m.group(1))) for m in re.finditer(r"dropin_floor +(\d+) (\S+)\n", err))
            check(rc == 0 and calls.get("cuMemAlloc", 0) >= 3000 and calls.get("cuMemFree", 0) >= 3000,
                  f"the runtime floor counts the driver calls a pair makes: {calls} {err[-300:]}")

    part("switch")
    # ---- the measurement switch (include/carve_run.h, serve_app.c) ----------
    # carve_run_serve(0) from the program: its new allocations are the
    # driver's through every entry point (the runtime's through the real
    # runtime), carve's buffers made before still go back to carve when
    # freed meanwhile (on another thread, stream-ordered or not), the
    # driver's to the driver after carve_run_serve(1), which serves again.
    # cuMemGetInfo while off: exact; what carve holds cached is the
    # program's to have from the driver, under a cap and on a device that
    # small alike. The report counts carve's calls and the driver's apart.
    serve_app = os.path.join(MOCK, "dropin_serve_app")
    for limit, env in (([], {}), (["--limit", "64MiB"], {}), ([], {"MOCK_CUDA_MEM": str(64 << 20)})):
        rjson = os.path.join(tmp, "serve.json")
        if os.path.exists(rjson):
            os.unlink(rjson)
        rc, out, err = run([run_tool] + limit + [f"--report={rjson}", "--", serve_app, "serve"], env, timeout=120)
        line = ok_line(out, "serve") or ""
        m = re.search(r"carve_allocs=(\d+) driver_allocs=(\d+)", line)
        check(rc == 0 and m, f"the switch {limit} {env}: allocations while off are the driver's, frees go to their "
                             f"owner, carve serves again when on: {out}{err}")
        try:
            with open(rjson) as f:
                rep = json.load(f)
            d, k = rep["devices"][0], rep["counted"][0]["kinds"]["driver"]
            n_carve, n_driver = (int(x) for x in m.groups()) if m else (-1, -1)
            check(d["allocs"] == n_carve and d["frees"] == n_carve and k["allocations"] == n_driver
                  and k["bytes_at_exit"] == 0,
                  f"the switch {limit} {env}: the report counts carve's allocations and frees ({n_carve}) and the "
                  f"driver's ({n_driver}), none of the driver's left: {d} {k}")
        except (OSError, ValueError, KeyError, IndexError) as e:
            check(False, f"the switch's report ({e}): {out}{err}")
    # Turned every 100 us by one thread while four allocate and free through
    # every entry point and hand buffers to each other (the TSan build runs
    # this too): every buffer intact until its free, no free refused or
    # reaching the wrong owner, nothing of the driver's left at exit.
    rjson = os.path.join(tmp, "serve-threads.json")
    rc, out, err = run([run_tool, f"--report={rjson}", "--", serve_app, "serve-threads",
                        os.environ.get("DROPIN_SERVE_ROUNDS", "3000")], timeout=300)
    line = ok_line(out, "serve-threads")
    check(rc == 0 and line, f"the switch turned while four threads allocate and free: {out}{err}")
    try:
        with open(rjson) as f:
            rep = json.load(f)
        d, k = rep["devices"][0], rep["counted"][0]["kinds"]["driver"]
        m = re.search(r"(\d+) buffers the driver's, (\d+) carve's", line or "")
        check(m and d["allocs"] == d["frees"] == int(m.group(2)) and k["allocations"] == int(m.group(1))
              and k["bytes_at_exit"] == 0,
              f"the switch turned under threads: the report counts every thread's calls by owner, none of the "
              f"driver's memory left: {d} {k} {line}")
    except (OSError, ValueError, KeyError, IndexError) as e:
        check(False, f"the switch's report under threads ({e}): {out}{err}")
    # Not under carve-run there is no switch to find.
    if FULL:
        rc, out, err = run([serve_app, "serve"])
        check(rc == 1 and "no carve_run_serve in this process" in out, f"no switch without carve-run: {out}{err}")

    part("faults")
    # ---- fault injection through carve-run --------------------------------
    rc, out, err = run([run_tool, "--conf", "fail_backend_every=3", "--", app, "oom"])
    check(rc == 0 and ok_line(out, "oom"), f"driver failures injected under carve-run lose nothing: {out}{err}")

    # Every interposed allocation entry point, driver and runtime, numbered
    # once per call of the program; the chosen calls fail with the driver's
    # and the runtime's out-of-memory errors, and nothing else changes.
    if FULL:
        fault_app = os.path.join(MOCK, "dropin_fault_app")
        entries = 13

        def faults(line):
            got = dict(kv.split("=", 1) for kv in line.split()[2:])
            failed = [] if got["failed"] == "none" else [int(x) for x in got["failed"].split(",")]
            per = {kv.split(":")[0]: int(kv.split(":")[1]) for kv in got["per_entry"].split(",")}
            return int(got["calls"]), failed, per, got["errors_ok"] == "1" and got.get("invalid_ok") == "1"

        rjson = os.path.join(tmp, "faults.json")
        cases = [([run_tool, "--", fault_app], {}, lambda n: []),
                 ([run_tool, "--fail-every", "3", f"--report={rjson}", "--", fault_app], {},
                  lambda n: list(range(3, n + 1, 3))),
                 ([run_tool, "--fail-at", "5", "--", fault_app], {}, lambda n: [5]),
                 ([run_tool, "--fail-every", "13", "--fail-at", "2", "--", fault_app], {},
                  lambda n: sorted({2} | set(range(13, n + 1, 13)))),
                 ([fault_app], {"LD_PRELOAD": interposer, "CARVE_RUN_FAIL_EVERY": "3"},
                  lambda n: list(range(3, n + 1, 3))),
                 ([fault_app], {"LD_PRELOAD": interposer, "CARVE_RUN_FAIL_EVERY": "3x"}, lambda n: [])]
        for args, extra, want in cases:
            rc, out, err = run(args, extra)
            line = ok_line(out, "faults")
            what = f"faults {' '.join(args[1:-1]) or ''} {extra.get('CARVE_RUN_FAIL_EVERY', '')}"
            if not line:
                check(False, f"{what}: {out}{err}")
                continue
            n, failed, per, errors_ok = faults(line)
            check(rc == 0 and errors_ok and n == 3 * entries and failed == want(n),
                  f"{what}: the calls that fail are exactly {want(n)}, with the driver's and runtime's out-of-memory "
                  f"errors, and invalid calls (NULL pitch, property or pointer) answered as invalid, unnumbered: {line}")
            if failed == list(range(3, n + 1, 3)):
                check(sorted(per.values()) == [1] * entries, f"{what}: every entry point failed once: {per}")
            if extra.get("CARVE_RUN_FAIL_EVERY") == "3x":
                check("CARVE_RUN_FAIL_EVERY='3x' is not a whole number" in err, f"a bad value is said: {err!r}")
            check("out of memory on device" not in err, f"{what}: an injected failure is no out-of-memory report: {err!r}")
        try:
            with open(rjson) as f:
                rep = json.load(f)
            counted = rep["counted"][0]["kinds"]
            check(rep["injected_failures"] == entries and rep["devices"][0]["ooms"] == 0
                  and all(counted[k]["bytes_at_exit"] == 0 for k in counted if k != "carve"),
                  f"the report counts the injected failures, no out of memory, and nothing kept: {rep}")
        except (OSError, ValueError, KeyError, IndexError) as e:
            check(False, f"faults report ({e})")

    part("counted")
    if FULL:
        # ---- memory taken behind carve's back, counted against the cap ---------
        # PyTorch's expandable segments size their address range from the total
        # memory reported (the cap) and count on cuMemCreate failing before the
        # range is full; a cuMemCreate not held to the cap maps the whole range
        # and PyTorch follows a null pointer (exit 139). Under the cap the program
        # must get CUDA_ERROR_OUT_OF_MEMORY from cuMemCreate.
        rc, out, err = run([app, "expandable", "160"])
        check(rc == 0 and "OK expandable allocated 8 pages" in out, f"expandable segments without carve-run: {out}{err}")
        rjson = os.path.join(tmp, "expandable.json")
        rc, out, err = run([run_tool, "--limit", "64MiB", f"--report={rjson}", "--", app, "expandable", "160"])
        check(rc == 0 and "OK expandable out of memory: CUDA_ERROR_OUT_OF_MEMORY (2) from cuMemCreate after 3 of 4" in out,
              f"expandable segments past a cap of 64 MiB: PyTorch's out-of-memory error, not a crash ({rc}): {out}{err}")
        check("cuMemCreate refused: the cap of 64.00 MiB holds 60.00 MiB" in err, f"the refusal says why: {err!r}")
        try:
            with open(rjson) as f:
                c = json.load(f)["counted"][0]
            k = c["kinds"]["cuMemCreate"]
            check(c["cap_bytes"] == 64 << 20 and c["peak_bytes"] == 60 << 20 and c["bytes_at_exit"] == 0
                  and k["allocations"] == 3 and k["refused"] == 1 and k["peak_bytes"] == 60 << 20,
                  f"the report counts cuMemCreate's memory: {c}")
        except (OSError, ValueError, KeyError, IndexError) as e:
            check(False, f"expandable report ({e})")
        rc, out, err = run([run_tool, "--limit", "64MiB", "--", app, "vmm"])
        check(rc == 0 and "ggml_ok=1 nccl_ok=1" in out and "shared_pages=32 shared_ok=1" in out,
              f"cuMemCreate memory counted until its handle is released and its mappings gone (ggml, NCCL), "
              f"sharing the cap with carve's memory, consistent with cuMemGetInfo: {out}{err}")
        rjson = os.path.join(tmp, "kinds.json")
        rc, out, err = run([run_tool, "--limit", "64MiB", f"--report={rjson}", "--", app, "kinds"])
        check(rc == 0 and "pitched_oom=1" in out and "pools=16 pool_oom=1 back=1 consistent=1" in out,
              f"pitched and pool allocations counted, refused past the cap, consistent with cuMemGetInfo: {out}{err}")
        try:
            with open(rjson) as f:
                c = json.load(f)["counted"][0]
            k = c["kinds"]
            check(c["peak_bytes"] <= 64 << 20 and k["pitched"]["refused"] == 1 and k["pools"]["refused"] == 1
                  and k["pools"]["peak_bytes"] == 64 << 20 and k["pitched"]["allocations"] >= 60
                  and c["bytes_at_exit"] == 0, f"the report counts pitched and pool memory by kind: {c}")
        except (OSError, ValueError, KeyError, IndexError) as e:
            check(False, f"kinds report ({e})")
        check("counted against the cap (64.00 MiB)" in err and "pitched peak" in err and "pools peak" in err,
              f"--report prints the counted memory by kind: {err!r}")

    part("footprint")
    if FULL:
        # ---- footprint: a recorded program's allocations in each mode -----------
        # GPT-2 training with PyTorch's cache off, recorded under carve-run on an
        # H100 (bench/traces/carve-run/), replayed through cuMemAlloc/cuMemFree
        # with each buffer used by work on the legacy stream and the "GPU" LAG
        # events behind (its work completes every LAG allocations and frees), so
        # that unordered frees wait in the quarantine: the mock's peak of device
        # memory over the program's requested peak, in the default mode and in
        # segments mode, and the oracle's count of ranges handed out while work
        # still used them (must be 0). The default mode must hold at most 1.05
        # times what the program asks for (the bar on a GPU) where the GPU runs
        # up to 16 events behind, and never more than segments mode; the
        # waiting frees must not decide the footprint.
        #
        # Churn: the replay prints the driver's calls step by step ("#step"
        # lines, put before each training step's first allocation of the
        # trace's largest size, the logits: a step's allocations of that size
        # come within a few events of each other, steps thousands apart). A
        # training step repeats the one before, so once the arena holds what
        # a step needs it must stay put: over the second half of the steps,
        # the default mode's cuMemMap and cuMemUnmap calls together must stay
        # under 1 in 100 of the cuMemMap calls of the first part (which maps
        # the arena's memory once). Before a repeated request at the peak
        # could raise it (lib/engine/vmm.c, carve_vmm_map), each step
        # unmapped and mapped again hundreds of granules at the same
        # footprint: 1140 calls over the second half at lag 16, 43% of the
        # first part's cuMemMap.
        import gzip
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "traces", "carve-run",
                           "torch_gpt2_nocache.csv.gz")
        plain = os.path.join(tmp, "gpt2.csv")
        with gzip.open(src, "rt") as f:
            lines = f.read().splitlines()
        sizes = [int(l.split(",")[2]) if l.startswith("a,") else 0 for l in lines]
        largest, last, starts = max(sizes), None, set()
        for i, sz in enumerate(sizes):
            if sz == largest:
                if last is None or i - last > 1000:
                    starts.add(i)
                last = i
        with open(plain, "w") as g:
            for i, l in enumerate(lines):
                if i in starts:
                    g.write("#step\n")
                g.write(l + "\n")
        check(len(starts) >= 6, f"the GPT-2 trace splits into its training steps: {len(starts)} found")
        step_re = re.compile(r"^step (\d+): \d+ events, (\d+) cuMemMap, (\d+) cuMemUnmap, .*?(\d+) waits", re.M)
        ratios = {}
        for lag in (1, 16, 64):
            for mode in ("default", "segments"):
                env = dict(os.environ, LD_LIBRARY_PATH=MOCK, MOCK_CUDA_MEM=str(16 << 30))
                for k in ("CARVE_CONF", "LD_PRELOAD"):
                    env.pop(k, None)
                if RUNTIME:
                    env["LD_PRELOAD"] = RUNTIME
                rjson = os.path.join(tmp, f"replay-{mode}-{lag}.json")
                with open(plain) as f:
                    p = subprocess.run([run_tool, "--mode", mode, f"--report={rjson}", "--",
                                        os.path.join(MOCK, "dropin_replay"), str(lag)], stdin=f, env=env,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=300)
                line = ok_line(p.stdout, "replay")
                m = re.search(r"ratio ([0-9.]+), 0 violations, (\d+) cuMemCreate", line or "")
                check(p.returncode == 0 and m, f"replay of GPT-2 training in {mode} mode, lag {lag}: {p.stdout}{p.stderr}")
                if m:
                    ratios[(mode, lag)] = float(m.group(1))
                steps = [tuple(int(x) for x in s) for s in step_re.findall(p.stdout)]
                if mode == "default":
                    # steps[0] is what came before the first step (the model
                    # built, the first forward pass); steps[1:] are the steps.
                    half = steps[1 + (len(steps) - 1) // 2:]
                    churn = sum(s[1] + s[2] for s in half)
                    check(len(steps) == len(starts) + 1 and steps[0][1] > 0 and 100 * churn < steps[0][1],
                          f"lag {lag}: repeated training steps keep what is mapped (cuMemMap + cuMemUnmap over the "
                          f"second half of the steps under 1/100 of the first part's cuMemMap): "
                          f"{[(s[1], s[2]) for s in steps]}")
                    print(f"lag {lag}: driver calls per step (cuMemMap, cuMemUnmap, waits): "
                          f"{[(s[1], s[2], s[3]) for s in steps]}")
                if m and mode == "default" and lag == 16:
                    # Granules unmapped to map others keep their memory for
                    # them (a cuMemCreate and a release saved each).
                    try:
                        with open(rjson) as f:
                            d = json.load(f)["devices"][0]
                        # All the program's work is on the legacy stream:
                        # every epoch goes back as it closes (ordered reuse),
                        # and nothing waits for the device before growing.
                        check(d["unordered_free_peak_bytes"] > 0 and d["waits_before_growing"] == 0 and
                              d["unordered_free_ordered_epochs"] == d["unordered_free_epochs"] > 0,
                              f"the report says what the quarantine held at most, how many of its epochs went back "
                              f"as they closed (all: the legacy stream only) and how often the arena waited: {d}")
                        creates = int(m.group(2))
                        check(d["driver_releases"] > 0 and creates + d["driver_releases"] // 2 <= d["driver_reserves"],
                              f"unmapped granules' memory is mapped again rather than created anew: {creates} created, "
                              f"{d['driver_reserves']} maps and reserves, {d['driver_releases']} unmaps")
                    except (OSError, ValueError, KeyError, IndexError) as e:
                        check(False, f"replay report ({e})")
        print("footprint of GPT-2 training (PyTorch's cache off) on the mock, device peak / requested peak: " +
              ", ".join(f"{m} lag {lag}: {r:.4f}" for (m, lag), r in sorted(ratios.items())))
        for lag in (1, 16, 64):
            d, g = ratios.get(("default", lag)), ratios.get(("segments", lag))
            # The replay's work is all on the legacy stream: with ordered
            # reuse how far the GPU is behind does not matter (1.0068 at
            # every lag here; waiting for completed events it was 1.0078,
            # 1.0352 and 1.0628 at lags 1, 16 and 64).
            check(d is not None and g is not None and d <= 1.02 and d <= g,
                  f"lag {lag}: the default mode holds at most 1.02 times the requested peak, however far the GPU "
                  f"is behind, and no more than segments mode: {d} vs {g}")

    part("threads")
    # ---- what one thread keeps, for another thread's allocation ---------------
    # Thread 0 allocates twelve 1 MiB buffers, thread 1 frees them all (as
    # autograd's thread frees the forward pass's activations), thread 0 asks
    # for 12 MiB: what thread 1 keeps of its frees (a joined batch waiting
    # for its epoch, a batch that has joined none, buffers ready for its own
    # reuse) must serve it before the arena grows. It did not: thread 1 made
    # no call after its frees, the allocation gave back only its own
    # thread's buffers, and the arena grew by 12 MiB (device peak twice the
    # requested peak, in both modes). dropin_replay runs each "#thread,K"
    # part of the trace on a thread of its own, in order.
    mib = 1 << 20
    lines = [f"a,{i},{mib}" for i in range(1, 13)] + ["#thread,1"] + [f"f,{i}" for i in range(1, 13)]
    lines += ["#thread,0", f"a,100,{12 * mib}"]
    two = os.path.join(tmp, "two-threads.csv")
    with open(two, "w") as f:
        f.write("\n".join(lines) + "\n")
    rc, out, err = run([run_tool, "--", os.path.join(MOCK, "dropin_replay"), "1"],
                       env_extra={"MOCK_CUDA_MEM": str(1 << 30)}, stdin=two)
    line = ok_line(out, "replay") or ""
    m = re.search(r", 2 threads, requested peak (\d+), device peak (\d+)", line)
    check(rc == 0 and m and int(m.group(2)) < int(m.group(1)) + 12 * mib,
          f"another thread's frees serve an allocation before the arena grows (device peak under requested peak "
          f"+ 12 MiB): {out}{err}")
    # Tags as the loader reads them (docs/trace-format.md): a bad one leaves
    # the thread as it was, and "#step" takes no thread of its own. The
    # replay once read "#thread,4x" as 4 and "#thread,2,7" as 2, and a tag
    # before a last "#step" started a thread that ran nothing.
    for name, text, threads in (("bad-tags", "#thread,3\na,1,1048576\n#thread,4x\na,2,1048576\n#thread,2,7\n"
                                              "f,1\nf,2\n", 4),
                                ("step-tag", "a,1,1048576\nf,1\n#thread,7\n#step\n", 1)):
        path = os.path.join(tmp, name + ".csv")
        with open(path, "w") as f:
            f.write(text)
        rc, out, err = run([run_tool, "--", os.path.join(MOCK, "dropin_replay"), "1"],
                           env_extra={"MOCK_CUDA_MEM": str(1 << 30)}, stdin=path)
        line = ok_line(out, "replay") or ""
        want = f", {threads} thread{'s' if threads > 1 else ''},"
        check(rc == 0 and want in line, f"{name}: the replay's threads are the loader's ({threads}): {out}{err}")

    # GPT-2 training with its two threads (bench/traces/carve-run/
    # gpt2_threads.csv.gz: the main thread runs the optimizer and the forward
    # pass, autograd's thread the backward pass), replayed on two threads and
    # with the same events on one: the threads must hold no more than 0.5%
    # over the one. Default mode, lag 64: 8,935,964,672 B against
    # 8,795,455,488 B (1.6% over) while what a thread kept of its frees
    # stayed out of carve until the arena would grow (carve-run then placed
    # the other thread's allocations around those buffers and the free
    # memory was cut up); 0.17% over once another thread's look takes what
    # a thread that stopped calling keeps.
    import gzip
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "traces", "carve-run",
                       "gpt2_threads.csv.gz")
    with gzip.open(src, "rt") as f:
        lines = f.read().splitlines()
    peaks = {}
    live_keys = {}  # what the trace never frees: the report's live_bytes_at_exit
    for l in lines:
        f = l.split(",")
        if f[0] == "a":
            live_keys[f[1]] = int(f[2])
        elif f[0] == "f":
            live_keys.pop(f[1], None)
    left = sum(live_keys.values())
    for name, keep in (("threads", lambda l: True), ("one", lambda l: not l.startswith("#thread,"))):
        path = os.path.join(tmp, f"gpt2-{name}.csv")
        with open(path, "w") as g:
            g.write("\n".join(l for l in lines if keep(l)) + "\n")
        rjson = os.path.join(tmp, f"gpt2-{name}.json")
        rc, out, err = run([run_tool, f"--report={rjson}", "--", os.path.join(MOCK, "dropin_replay"), "64"],
                           env_extra={"MOCK_CUDA_MEM": str(16 << 30)}, stdin=path, timeout=300)
        m = re.search(r", (\d+) threads?, requested peak (\d+), device peak (\d+), .*, 0 violations",
                      ok_line(out, "replay") or "")
        check(rc == 0 and m, f"GPT-2 training with its threads replayed ({name}): {out}{err}")
        if m:
            peaks[name] = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
            # The report's live peak is the program's own, counted at its
            # calls: exactly the replay's requested peak, although carve
            # keeps freed buffers (a thread's reusable ones, the quarantine)
            # and the arena's requested peak counts them.
            try:
                with open(rjson) as f:
                    d = json.load(f)["devices"][0]
                check(d["peak_live_bytes"] == int(m.group(2)) and d["peak_requested_bytes"] >= d["peak_live_bytes"]
                      and d["live_bytes_at_exit"] == left
                      and abs(d["live_footprint_ratio"] - d["peak_reserved_bytes"] / d["peak_live_bytes"]) < 1e-5,
                      f"GPT-2 ({name}): the report's peak_live_bytes is the program's requested peak "
                      f"{m.group(2)}: {d['peak_live_bytes']} (arena's {d['peak_requested_bytes']}); "
                      f"live_bytes_at_exit what it never freed, {left}: {d['live_bytes_at_exit']}")
            except (OSError, ValueError, KeyError, IndexError) as e:
                check(False, f"GPT-2 ({name}): the report has peak_live_bytes ({e})")
    if len(peaks) == 2:
        (n2, r2, d2), (n1, r1, d1) = peaks["threads"], peaks["one"]
        print(f"GPT-2 training, device peak with its 2 threads {d2}, on one thread {d1} ({d2 / d1:.4f})")
        check(n2 == 2 and n1 == 1 and r2 == r1 and d2 * 1000 <= d1 * 1005,
              f"GPT-2's two threads hold at most 0.5% more than the same events on one thread: "
              f"{n2} threads {d2} B, {n1} thread {d1} B, requested peak {r2} and {r1} B")

    # The live peak is each context's own: a context destroyed with 64 MiB
    # live, then two contexts holding 64 MiB each at once, all on device 0.
    # One count per device once gave 128 MiB (a footprint of 0.5) for both.
    rjson = os.path.join(tmp, "livectx.json")
    rc, out, err = run([run_tool, f"--report={rjson}", "--", app, "livectx"])
    try:
        with open(rjson) as f:
            devs = json.load(f)["devices"]
        check(rc == 0 and len(devs) == 3 and all(d["peak_live_bytes"] == 64 << 20 and d["live_footprint_ratio"] >= 1.0
                                                 and d["live_bytes_at_exit"] == 0 for d in devs),
              f"livectx: every context's live peak is its own 64 MiB: "
              f"{[(d['peak_live_bytes'], d['live_footprint_ratio'], d['live_bytes_at_exit']) for d in devs]} {err}")
    except (OSError, ValueError, KeyError) as e:
        check(False, f"livectx: the report ({e}): {out}{err}")

    part("trace")
    if FULL:
        # ---- trace, report, picture --------------------------------------------
        trace = os.path.join(tmp, "basic.csv.gz")
        rjson = os.path.join(tmp, "report.json")
        svg = os.path.join(tmp, "run.svg")
        rc, out, err = run([run_tool, "--trace", trace, f"--report={rjson}", "--svg", svg, "--", app, "basic"])
        check(rc == 0, f"basic with trace, report and svg: {err}")
        rc2, out2, err2 = run([replay, "--json", "-q", trace])
        try:
            j = json.loads(out2)
            check(j["allocs"] == 2000 and j["frees"] == 2000 and j["skipped_lines"] == 0,
                  f"the trace holds every allocation and free: {out2}")
        except (ValueError, KeyError) as e:
            check(False, f"carve-replay reads the trace ({e}): {out2}{err2}")
        try:
            with open(rjson) as f:
                rep = json.load(f)
            d = rep["devices"][0]
            check(d["allocs"] == 2000 and d["frees"] == 2000 and d["peak_reserved_bytes"] >= d["peak_allocated_bytes"]
                  and d["footprint_ratio"] >= 1.0, f"report: {d}")
            check(all(isinstance(d.get(k), int) for k in ("arena_event_records", "arena_event_queries", "arena_syncs")),
                  f"the report gives the arena's event and wait counts: {d}")
        except (OSError, ValueError, KeyError, IndexError) as e:
            check(False, f"--report writes JSON ({e})")
        check("peak reserved" in err and "allocations" in err, f"--report prints on stderr: {err!r}")
        check(os.path.exists(svg) and open(svg).read(200).startswith("<svg"), "--svg draws the run")

        # Killed by SIGTERM: the trace ends with whole lines and loads.
        trace2 = os.path.join(tmp, "loop.csv.gz")
        env = dict(os.environ, LD_LIBRARY_PATH=MOCK)
        env.pop("CARVE_CONF", None)
        if RUNTIME:
            env["LD_PRELOAD"] = RUNTIME
        p = subprocess.Popen([run_tool, "--trace", trace2, "--", app, "loop"], env=env, stdout=subprocess.PIPE,
                             universal_newlines=True)
        for line in p.stdout:
            if line.startswith("loop 5000"):
                break
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)
        check(p.returncode == -signal.SIGTERM, f"the program died of SIGTERM ({p.returncode})")
        rc2, out2, err2 = run([replay, "--json", "-q", trace2])
        try:
            j = json.loads(out2)
            check(j["skipped_lines"] == 0 and j["allocs"] >= 5000, f"the trace after SIGTERM is whole: {out2}")
        except (ValueError, KeyError) as e:
            check(False, f"the trace after SIGTERM loads ({e}): {out2}{err2}")

        rc, out, err = run([run_tool, "--trace", os.path.join(tmp, "fork.csv"), "--report", "--", app, "fork"])
        check(rc == 0 and ok_line(out, "fork") and err.count("peak reserved") == 1,
              f"fork: the child neither traces nor reports: {out}{err}")

    part(None)
    print(f"{checks} checks, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
