#!/usr/bin/env python3
"""test_bad_input.py — every bad input to carve's command-line tools is refused
with a message naming it, and nothing is cut, wrapped or dropped silently.

usage: test_bad_input.py CARVE_RUN CARVE_REPLAY CARVE_DEMO [DROPIN_DIR]

Two parts:
  - the cases of issue 26, one check each: carve-run's options that would
    turn carve off, a long LD_PRELOAD, --report's file, CARVE_PRELOAD, traces
    with frees the trace never allocated; carve-replay's warm reports, gzip
    through pipes, options given values they do not take, file names that
    are not UTF-8, sizes no backend can reserve, input that is no trace,
    progress, an SVG that could not be written, --min-capacity in both
    modes; the demo's step counts.
  - a grid: every option of carve-run, carve-replay and carve-demo with a
    good value (as "--opt V" and "--opt=V"), a bad one, none, a huge one, a
    negative one, an empty one, twice, and flags given a value, each with its
    expected exit status and words of its message (the option and the value
    it was given).
DROPIN_DIR (tests/dropin of the build: dropin_cpu_app and the mock
libcuda.so.1) adds the checks that run a program under the interposer; in a
sanitized build DROPIN_PRELOAD_RUNTIME names the sanitizer's runtime to
preload beside it, as in test_dropin_cpu.py.
"""
import gzip
import json
import os
import pty
import subprocess
import sys
import tempfile
import threading
import xml.etree.ElementTree as ET

checks = failures = 0
RUN = REPLAY = DEMO = DROPIN = None
TMP = None
TRACE = None  # a small clean trace


def check(cond, what):
    global checks, failures
    checks += 1
    if not cond:
        failures += 1
        print("FAIL: " + what, file=sys.stderr)
    return cond


def run(args, env_extra=None, stdin=None, timeout=60, drop_env=()):
    env = dict(os.environ)
    for k in ("CARVE_CONF", "CARVE_PRELOAD", "CARVE_RUN_TRACE", "CARVE_RUN_REPORT", "CARVE_RUN_SVG", "LD_PRELOAD",
              "CARVE_RUN_FAIL_EVERY", "CARVE_RUN_FAIL_AT") + tuple(drop_env):
        env.pop(k, None)
    env.update(env_extra or {})
    p = subprocess.run(args, env=env, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def refused(args, words, what, **kw):
    """args exits 2, prints nothing on stdout, and its message on stderr
    starts with the tool's name and holds every word of words."""
    rc, out, err = run(args, **kw)
    tool = os.path.basename(args[0])
    missing = [w for w in words if w not in err]
    return check(rc == 2 and out == b"" and err.startswith(tool + ":") and not missing,
                 f"{what}: {args[1:]} exits 2 naming {missing or words} (got {rc}: {err.strip()!r})")


def replay_json(args, **kw):
    rc, out, err = run([REPLAY, "-q", "--json"] + args, **kw)
    try:
        return rc, json.loads(out.decode("utf-8")), err
    except ValueError:
        return rc, None, err


# ---- carve-run: the cases of the issue ----------------------------------------

def run_cases():
    for args, words in ((["--limit", "1"], ["limit=1", "granule"]),
                        (["--no-growth"], ["growth=0", "initial"]),
                        (["--initial", "2GiB", "--limit", "1GiB"], ["initial=2147483648", "larger than", "limit"]),
                        (["--conf", "growth=0"], ["growth=0"]),
                        (["--device-limit", "1=1"], ["device 1", "granule"])):
        refused([RUN] + args + ["--", "true"], words, "a configuration that would turn carve off")
    # The same refusal from the environment's CARVE_CONF.
    refused([RUN, "--", "true"], ["limit=1", "CARVE_CONF"], "CARVE_CONF=limit=1", env_extra={"CARVE_CONF": "limit=1"})

    text = os.path.join(TMP, "not-a-library.so")
    with open(text, "w") as f:
        f.write("not a library\n")
    refused([RUN, "--preload", TMP, "--", "true"], ["--preload", TMP, "not a file"], "--preload of a directory")
    refused([RUN, "--preload", text, "--", "true"], ["--preload", text, "not a shared library"],
            "--preload of a text file")
    libc = next((p for p in ("/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6",
                             "/lib/aarch64-linux-gnu/libc.so.6", "/usr/lib/aarch64-linux-gnu/libc.so.6",
                             "/lib64/libc.so.6") if os.path.exists(p)), None)
    if libc:
        refused([RUN, "--preload", libc, "--", "true"], ["--preload", "not carve's interposer", "cuMemAlloc_v2"],
                "--preload of another library")
    refused([RUN, "--", "true"], ["CARVE_PRELOAD", "/nonexistent.so"], "CARVE_PRELOAD naming no file",
            env_extra={"CARVE_PRELOAD": "/nonexistent.so"})
    refused([RUN, "--", "true"], ["CARVE_PRELOAD", text, "not a shared library"], "CARVE_PRELOAD naming a text file",
            env_extra={"CARVE_PRELOAD": text})

    # An LD_PRELOAD already set is kept whole, however long.
    long_preload = ":".join(f"/opt/lib{i:04d}/libsomething-long-name.so" for i in range(300))
    rc, out, err = run([RUN, "--print-env"], env_extra={"LD_PRELOAD": long_preload})
    env = dict(line.split("=", 1) for line in out.decode().splitlines() if "=" in line)
    check(rc == 0 and len(long_preload) > 8192 and env.get("LD_PRELOAD", "").endswith(":" + long_preload),
          f"an LD_PRELOAD of {len(long_preload)} bytes is kept whole behind the interposer ({rc}, {err!r})")

    refused([RUN, "--report=", "--", "true"], ["--report=", "file name"], "--report= (empty)")
    refused([RUN, "--report", "r.json"], ["r.json", "--report=r.json"], "--report r.json (would run r.json)")
    refused([RUN, "--report", "r.json", "--", "true"], ["r.json", "--report=r.json"], "--report r.json -- true")
    refused([RUN, "--report", "no-such-program-here", "x"], ["no-such-program-here", "--report="],
            "--report followed by no program")
    rc, out, err = run([RUN, "--report", "--print-env", "--", "true"])
    check(rc == 0, f"--report followed by an option is fine ({rc}, {err!r})")
    refused([RUN, "--help=x"], ["--help", "takes no value"], "--help=x")
    refused([RUN, "--quiet=1", "--", "true"], ["--quiet", "takes no value"], "--quiet=1")
    refused([RUN, "--trace", os.path.join(TMP, "no", "dir", "t.csv"), "--", "true"], ["--trace", "no/dir"],
            "--trace into a directory that does not exist")
    refused([RUN, "--svg", TMP, "--", "true"], ["--svg", "is a directory"], "--svg naming a directory")
    refused([RUN, "--", "true"], ["CARVE_RUN_TRACE", "no/dir"], "CARVE_RUN_TRACE into a directory that does not exist",
            env_extra={"CARVE_RUN_TRACE": os.path.join(TMP, "no", "dir", "t.csv")})
    refused([RUN, "--", "true"], ["CARVE_RUN_REPORT", "is a directory"], "CARVE_RUN_REPORT naming a directory",
            env_extra={"CARVE_RUN_REPORT": TMP})


def run_under_interposer():
    """Programs run under the interposer (the mock driver of tests/dropin)."""
    app = os.path.join(DROPIN, "dropin_cpu_app")
    runtime = os.environ.get("DROPIN_PRELOAD_RUNTIME", "")
    env = {"LD_LIBRARY_PATH": DROPIN + (":" + os.environ["LD_LIBRARY_PATH"] if os.environ.get("LD_LIBRARY_PATH")
                                         else "")}
    if runtime:
        env["LD_PRELOAD"] = runtime  # carve-run puts the interposer in front of it

    # A free of memory the trace never saw allocated (a pointer passed
    # through to the driver after the stray frees) is not written: the trace
    # loads with no skipped line.
    trace = os.path.join(TMP, "foreign.csv")
    rc, out, err = run([RUN, "--trace", trace, "--", app, "foreign"], env_extra=env)
    check(rc == 0 and b"OK foreign" in out, f"foreign under carve-run --trace ({rc}: {out!r} {err!r})")
    rc, rep, err = replay_json([trace])
    check(rc == 0 and rep and rep["skipped_lines"] == 0 and rep["diag"] == "",
          f"the trace of foreign loads with no free of an unknown id: {rep and rep['diag']!r} {err!r}")
    with open(trace) as f:
        text = f.read()
    check("frees of ids never allocated in this trace left out" in text,
          f"the trace says what it left out: {text[-300:]!r}")

    # A bad CARVE_CONF reaching the interposer (carve-run refuses it first,
    # so LD_PRELOAD by hand): its message names CARVE_CONF once.
    interposer = [l.split("=", 1)[1] for l in run([RUN, "--print-env"])[1].decode().splitlines()
                  if l.startswith("LD_PRELOAD=")][0].split(":")[0]
    env2 = dict(env, CARVE_CONF="garbage", LD_PRELOAD=interposer + (":" + runtime if runtime else ""))
    rc, out, err = run([app, "foreign"], env_extra=env2)
    check("CARVE_CONF: 'garbage' is not key=value" in err and "CARVE_CONF: CARVE_CONF" not in err,
          f"the interposer names CARVE_CONF once: {err!r}")


# ---- carve-replay: the cases of the issue --------------------------------------

def replay_cases():
    # -r 2 -w 3 keeps the warm results, in the JSON and in the text.
    rc, rep, err = replay_json(["-r", "2", "-w", "3", TRACE])
    check(rc == 0 and rep and rep.get("warm_passes") == 3 and rep.get("repeat") == 2 and "warm_ns_per_op" in rep,
          f"-r 2 -w 3: the warm passes are reported ({rep and {k: rep.get(k) for k in ('warm_passes', 'repeat')}})")
    rc, out, err = run([REPLAY, "-q", "-r", "2", "-w", "3", TRACE])
    check(rc == 0 and b"warm passes      3" in out, f"-r 2 -w 3 in the text report: {out!r}")

    # gzip through a pipe path, /dev/stdin and a FIFO.
    with open(TRACE, "rb") as f:
        raw = f.read()
    gz = os.path.join(TMP, "t.csv.gz")
    with gzip.open(gz, "wb") as f:
        f.write(raw)
    rc0, base, _ = replay_json([TRACE])
    rc, out, err = run(["bash", "-c", f'exec "$0" -q --json <(cat "$1")', REPLAY, gz])
    try:
        rep = json.loads(out)
    except ValueError:
        rep = None
    check(rc == 0 and rep and rep["events"] == base["events"], f"gzip through a pipe path <(cat t.gz): {rc} {err!r}")
    with open(gz, "rb") as f:
        rc, rep, err = replay_json(["/dev/stdin"], stdin=f.read())
    check(rc == 0 and rep and rep["events"] == base["events"], f"gzip through /dev/stdin: {rc} {err!r}")
    fifo = os.path.join(TMP, "fifo")
    os.mkfifo(fifo)

    def feed():
        with open(fifo, "wb") as f:
            f.write(open(gz, "rb").read())
    th = threading.Thread(target=feed)
    th.start()
    rc, rep, err = replay_json([fifo])
    th.join()
    check(rc == 0 and rep and rep["events"] == base["events"], f"gzip through a FIFO: {rc} {err!r}")

    for flag in ("--json=1", "--quiet=1", "--min-capacity=yes", "--progress=1"):
        refused([REPLAY, flag, TRACE], [flag.split("=")[0], "takes no value", flag], f"{flag}")
    refused([REPLAY, "-z", TRACE], ["unknown option '-z'"], "-z")
    refused([REPLAY, "--bogus", TRACE], ["unknown option '--bogus'"], "--bogus")

    # A file name that is not UTF-8: the JSON and the SVG stay valid.
    name = os.path.join(os.fsencode(TMP), b"tr\xff\xfe-\xc3.csv")
    with open(name, "wb") as f:
        f.write(raw)
    svg = os.path.join(TMP, "named.svg")
    p = subprocess.run([os.fsencode(REPLAY), b"-q", b"--json", b"--svg", os.fsencode(svg), name],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        rep = json.loads(p.stdout.decode("utf-8"))  # strict UTF-8
        ok = "\ufffd" in rep["trace"]
    except (ValueError, UnicodeDecodeError) as e:
        ok = False
        print(f"  JSON: {e}", file=sys.stderr)
    check(p.returncode == 0 and ok, f"a file name with byte 0xff: the JSON is valid UTF-8 ({p.stderr!r})")
    try:
        ET.parse(svg)
        ok = True
    except (ET.ParseError, OSError) as e:
        ok = False
        print(f"  SVG: {e}", file=sys.stderr)
    check(ok, "a file name with byte 0xff: the SVG is well-formed XML")

    # Sizes no backend can reserve: exit 2, naming the option and the size.
    refused([REPLAY, "--limit", "18446744073709551614", TRACE], ["--limit", "18446744073709551614", "reserve"],
            "--limit 2^64-2")
    refused([REPLAY, "--initial", "18446744073709551615", TRACE], ["--initial", "18446744073709551615", "16.00 EiB"],
            "--initial 2^64-1")
    rc, out, err = run([REPLAY, "--initial", "18446744073709551615", TRACE])
    check("unlimited" not in err, f"--initial 2^64-1 is no 'unlimited' size: {err!r}")
    refused([REPLAY, "--initial", "2GiB", "--limit", "1GiB", TRACE], ["initial", "larger than the limit"],
            "--initial above --limit")
    refused([REPLAY, "--growth", "0", TRACE], ["growth is off"], "--growth 0 without --initial")

    # Input that is no trace ends, with a reason.
    rc, out, err = run([REPLAY, "-q", "/dev/zero"], timeout=30)
    check(rc == 1 and "not a trace" in err and "/dev/zero" in err, f"-q /dev/zero ends with exit 1 ({rc}: {err!r})")
    rc, out, err = run([REPLAY, "-q", TMP])
    check(rc == 1 and "Is a directory" in err, f"a directory as the trace: exit 1 ({rc}: {err!r})")
    binary = os.path.join(TMP, "binary")
    with open(binary, "wb") as f:
        f.write(bytes(range(256)) * 4)
    rc, rep, err = replay_json([binary])
    check(rc == 0 and rep and rep["events"] == 0 and rep["skipped_lines"] > 0,
          f"a short binary file: its lines are counted as skipped ({rc}: {err!r})")

    # Progress: on a terminal, or with --progress; never otherwise.
    two = os.path.join(TMP, "two.csv")
    with open(two, "w") as f:
        f.write("a,1,1000\nf,1\n")
    try:
        subprocess.run([REPLAY, "--progress", "-r", "1000000", two], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=1.8)
        err = b""
    except subprocess.TimeoutExpired as e:
        err = e.stderr or b""
    check(b"carve-replay: replay " in err and b" of 1000000" in err,
          f"-r 1000000 --progress shows which replay it is at: {err[-200:]!r}")
    try:
        subprocess.run([REPLAY, "-r", "1000000", two], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=1.5)
        err = b""
    except subprocess.TimeoutExpired as e:
        err = e.stderr or b""
    check(b"replay " not in err, f"no progress when stderr is no terminal: {err[-200:]!r}")
    master, slave = pty.openpty()
    p = subprocess.Popen([REPLAY, "-r", "1000000", two], stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    got = b""
    try:
        import select
        end = 3.0
        while end > 0 and b" of 1000000" not in got:
            r, _, _ = select.select([master], [], [], 0.5)
            end -= 0.5
            if r:
                got += os.read(master, 4096)
    finally:
        p.kill()
        p.wait()
        os.close(master)
    check(b" of 1000000" in got, f"progress on a terminal without --progress: {got[-200:]!r}")
    refused([REPLAY, "-q", "--progress", two], ["--quiet", "--progress"], "-q with --progress")

    # An SVG that could not be written is not named in the report.
    if os.path.exists("/dev/full"):
        rc, out, err = run([REPLAY, "-q", "--json", "--svg", "/dev/full", TRACE])
        try:
            rep = json.loads(out)
        except ValueError:
            rep = None
        check(rc == 1 and rep is not None and "svg" not in rep and "/dev/full" in err,
              f"--svg /dev/full: exit 1, the JSON names no picture ({rc}: {err!r})")

    # --min-capacity: the smallest single block does not depend on the mode.
    caps = {}
    for conf in ("vmm=0", "vmm=1", "vmm=auto"):
        rc, rep, err = replay_json(["--min-capacity", "--conf", conf, TRACE])
        caps[conf] = rep and rep.get("min_capacity_bytes")
    check(len(set(caps.values())) == 1 and None not in caps.values(),
          f"--min-capacity gives one answer in every mode: {caps}")

    # A value that would be kept silently in place of another: refused.
    refused([REPLAY, "--limit", "1GiB", "--conf", "limit=2GiB", TRACE], ["limit", "twice"], "--limit and --conf limit=")
    refused([REPLAY, "--device", "1", TRACE], ["--device", "--backend cuda"], "--device without the cuda backend")
    refused([REPLAY, "--svg-color", "stream", TRACE], ["--svg-color", "--svg"], "--svg-color without --svg")


# ---- the grid ------------------------------------------------------------------

HUGE = "99999999999999999999999"


def accepted_task(args, what):
    return ("ok", args, None, what)


def refused_task(args, words, what):
    return ("refused", args, words, what)


def run_tasks(tasks):
    """Run the grid's cases side by side (each is a process of its own) and
    check each: 'ok' cases exit 0, 'refused' ones as refused() says."""
    from concurrent.futures import ThreadPoolExecutor

    def one(t):
        return t, run(t[1])
    with ThreadPoolExecutor(max_workers=max(4, 2 * (os.cpu_count() or 2))) as pool:
        for (kind, args, words, what), (rc, out, err) in pool.map(one, tasks):
            if kind == "ok":
                check(rc == 0, f"{what}: exit 0 ({rc}: {err.strip()!r})")
                continue
            tool = os.path.basename(args[0])
            missing = [w for w in words if w not in err]
            check(rc == 2 and out == b"" and err.startswith(tool + ":") and not missing,
                  f"{what}: {args[1:]} exits 2 naming {missing or words} (got {rc}: {err.strip()!r})")
    return len(tasks)


def grid(tool, specs, good_tail, bad_tail, name, missing_head=()):
    """The grid's cases for specs: (option, kind, good value, [(bad value,
    words)...][, overrides]). kind is 'value' (takes one), 'flag' (takes
    none), 'file' (a value any string can be, so huge and negative ones are
    good names). good_tail / bad_tail: arguments after the option for a run
    that should succeed / that is refused (a trace, or --print-env, or --
    true); missing_head: what goes before an option given last without its
    value. overrides: 'good_tail', 'twice' (the words of the refusal of the
    option given twice)."""
    tasks = []
    for spec in specs:
        opt, kind, good, bads = spec[:4]
        over = spec[4] if len(spec) > 4 else {}
        gtail = over.get("good_tail", good_tail)
        if kind == "flag":
            tasks += [accepted_task([tool, opt] + gtail, f"{name} {opt}"),
                      accepted_task([tool, opt, opt] + gtail, f"{name} {opt} twice (a flag said again)"),
                      refused_task([tool, opt + "=1"] + bad_tail, [opt, "takes no value", opt + "=1"],
                                   f"{name} {opt}=1")]
            continue
        good = good() if callable(good) else good
        tasks += [accepted_task([tool, opt, good] + gtail, f"{name} {opt} {good}"),
                  accepted_task([tool, f"{opt}={good}"] + gtail, f"{name} {opt}={good}")]
        for bad, words in bads:
            tasks += [refused_task([tool, opt, bad] + bad_tail, words, f"{name} {opt} {bad!r}"),
                      refused_task([tool, f"{opt}={bad}"] + bad_tail, words, f"{name} {opt}={bad!r}")]
        tasks += [refused_task([tool] + list(missing_head) + [opt], [opt, "needs a value"],
                               f"{name} {opt} with no value"),
                  refused_task([tool, opt, ""] + bad_tail, [opt], f"{name} {opt} ''"),
                  refused_task([tool, f"{opt}="] + bad_tail, [opt], f"{name} {opt}=")]
        if kind == "value":
            tasks += [refused_task([tool, opt, HUGE] + bad_tail, [HUGE], f"{name} {opt} (huge)"),
                      refused_task([tool, opt, "-1"] + bad_tail, ["'-1'"], f"{name} {opt} -1")]
        tasks.append(refused_task([tool, opt, good, opt, good] + bad_tail, over.get("twice", [opt, "twice"]),
                                  f"{name} {opt} twice"))
    return tasks


def replay_grid():
    svg = lambda: os.path.join(TMP, "grid.svg")  # noqa: E731
    specs = [
        ("--backend", "value", "host", [("nope", ["--backend", "'nope'"]), ("cuda_driver", ["'cuda_driver'"])]),
        ("--device", "value", "0", [("x", ["--device", "'x'"]), ("1.5", ["'1.5'"])]),
        ("--initial", "value", "4MiB", [("lots", ["--initial", "'lots'"]), ("0x100", ["'0x100'"]),
                                        ("1e9", ["'1e9'"])]),
        ("--limit", "value", "64MiB", [("12XB", ["--limit", "'12XB'"]), ("1GiB,backend=cuda", ["'1GiB,backend=cuda'"])]),
        ("--growth", "value", "1", [("2", ["--growth", "'2'"]), ("yes", ["'yes'"])]),
        ("--min-grow", "value", "4MiB", [("0.5", ["--min-grow", "'0.5'"]), ("big", ["'big'"])]),
        ("--conf", "value", "sim_event_polls=2", [("nokey=1", ["--conf", "'nokey=1'", "unknown key"]),
                                                  ("limit", ["'limit'", "not key=value"]),
                                                  ("a=1;device1:limit=1", ["--conf"])],
         {"twice": ["'sim_event_polls'", "twice"]}),
        ("--repeat", "value", "2", [("0", ["--repeat", "'0'"]), ("x", ["'x'"]), ("+3", ["'+3'"]),
                                    ("1000001", ["'1000001'"]), (" 3", ["' 3'"])]),
        ("--warm", "value", "1", [("1001", ["--warm", "'1001'"]), ("x", ["'x'"]), ("2.0", ["'2.0'"])]),
        ("--svg", "file", svg, []),
        ("--svg-color", "value", "stream", [("pink", ["--svg-color", "'pink'"])]),
        ("--json", "flag", None, []),
        ("--min-capacity", "flag", None, []),
        ("--quiet", "flag", None, []),
        ("--progress", "flag", None, [], {"good_tail": [TRACE]}),
    ]
    # --svg-color needs --svg: give it one in every run of the grid.
    tasks = grid(REPLAY, [s for s in specs if s[0] != "--svg-color"], ["-q", TRACE], [TRACE], "carve-replay",
                 missing_head=[TRACE])
    tasks += grid(REPLAY, [s for s in specs if s[0] == "--svg-color"], ["--svg", svg(), TRACE],
                  ["--svg", svg(), TRACE], "carve-replay", missing_head=[TRACE])
    # Short forms take their values as the long ones do.
    for args in (["-r", "2"], ["-r2"], ["-w", "1"], ["-qw1"], ["-b", "virtual"]):
        tasks.append(accepted_task([REPLAY, "-q"] + args + [TRACE], f"carve-replay {args}"))
    for args, words in ((["-r", "0"], ["--repeat", "'0'"]), (["-r"], ["-r", "needs a value"]),
                        (["-w", "-1"], ["--warm", "'-1'"]), (["-b", "x"], ["--backend", "'x'"]),
                        (["-r", "2", "-r", "2"], ["--repeat", "twice"]), (["-qx"], ["'-x'"])):
        tasks.append(refused_task([REPLAY] + args + [TRACE] if args != ["-r"] else [REPLAY, TRACE, "-r"], words,
                                  f"carve-replay {args}"))
    return tasks


def run_grid():
    specs = [
        ("--limit", "value", "8GiB", [("0x100", ["--limit", "'0x100'"]), ("12XB", ["'12XB'"]), ("1.5", ["'1.5'"])]),
        ("--device-limit", "value", "1=2GiB", [("x=1GiB", ["--device-limit", "'x=1GiB'"]),
                                               ("99=1GiB", ["'99=1GiB'"]), ("1=lots", ["--device-limit", "'lots'"]),
                                               ("1", ["'1'"])], {"twice": ["--device-limit", "device 1", "twice"]}),
        ("--initial", "value", "1GiB", [("lots", ["--initial", "'lots'"])]),
        ("--mode", "value", "vmm", [("fast", ["--mode", "'fast'"])]),
        ("--conf", "value", "min_grow=64MiB", [("nokey=1", ["--conf", "'nokey=1'", "unknown key"]),
                                              ("limit", ["--conf", "'limit'"]),
                                              ("device1:limit=1GiB", ["--conf"])],
         {"twice": ["'min_grow'", "twice"]}),
        ("--trace", "file", "t.csv", []),
        ("--svg", "file", "t.svg", []),
        ("--growth", "flag", None, []),
        ("--no-growth", "flag", None, []),
        ("--print-env", "flag", None, []),
        ("--quiet", "flag", None, []),
    ]
    # --no-growth needs --initial; --print-env runs no program.
    tasks = []
    for spec in specs:
        opt = spec[0]
        tail = (["--initial", "1GiB"] if opt == "--no-growth" else []) + ["--print-env"]
        if opt == "--print-env":
            tail = []
        bad_tail = ["--", "true"]
        if spec[1] == "flag" and opt in ("--growth", "--no-growth"):
            # twice is refused for these two (one of them, once)
            tasks += [accepted_task([RUN, opt] + tail, f"carve-run {opt}"),
                      refused_task([RUN, opt, opt] + tail, [opt, "once"], f"carve-run {opt} twice"),
                      refused_task([RUN, opt + "=1"] + bad_tail, [opt, "takes no value"], f"carve-run {opt}=1")]
            continue
        tasks += grid(RUN, [spec], tail, bad_tail, "carve-run", missing_head=[])
    # --report takes its file after '=' only.
    rc, out, err = run([RUN, "--report=r.json", "--print-env"])
    check(rc == 0 and b"CARVE_RUN_REPORT=r.json" in out, f"carve-run --report=r.json ({rc}: {err!r})")
    rc, out, err = run([RUN, "--report", "--print-env"])
    check(rc == 0 and b"CARVE_RUN_REPORT=-" in out, f"carve-run --report alone ({rc}: {err!r})")
    refused([RUN, "--report=a.json", "--report=b.json", "--", "true"], ["--report", "once"], "carve-run --report twice")
    refused([RUN, "--preload", "", "--", "true"], ["--preload", "''"], "carve-run --preload ''")
    refused([RUN, "--preload=/no/such.so", "--", "true"], ["--preload", "/no/such.so"], "carve-run --preload=missing")
    refused([RUN, "-x", "--", "true"], ["'-x'"], "carve-run -x")
    refused([RUN], ["no program"], "carve-run with no program")
    # Cap's options, where this carve-run has them.
    rc, out, _ = run([RUN, "--help"])
    for opt in ("--fail-every", "--fail-at"):
        if opt.encode() in out:
            tasks += grid(RUN, [(opt, "value", "100", [("0", [opt, "'0'"]), ("x", ["'x'"])])], ["--print-env"],
                          ["--", "true"], "carve-run", missing_head=[])
    return tasks


def demo_grid():
    tasks = grid(DEMO, [("--steps", "value", "10", [("abc", ["--steps", "'abc'"]), ("0", ["'0'"]),
                                                   ("99999999999999", ["'99999999999999'"]), ("1e3", ["'1e3'"])])],
                 ["--virtual"], ["--virtual"], "carve-demo")
    refused([DEMO, "--virtual=1"], ["--virtual=1"], "carve-demo --virtual=1")
    refused([DEMO, "--bogus"], ["--bogus"], "carve-demo --bogus")
    rc, out, err = run([DEMO, "--virtual", "--virtual", "--steps", "5"])
    check(rc == 0 and b"5 steps" in out and b"demo done" in out, f"carve-demo --virtual twice ({rc}: {err!r})")
    rc, out, err = run([DEMO, "--help"])
    check(rc == 0 and b"--steps" in out, "carve-demo --help")
    return tasks


def main():
    global RUN, REPLAY, DEMO, DROPIN, TMP, TRACE
    if len(sys.argv) not in (4, 5):
        print(__doc__, file=sys.stderr)
        return 2
    RUN, REPLAY, DEMO = (os.path.abspath(a) for a in sys.argv[1:4])
    DROPIN = os.path.abspath(sys.argv[4]) if len(sys.argv) == 5 else None
    with tempfile.TemporaryDirectory() as tmp:
        TMP = tmp
        TRACE = os.path.join(tmp, "small.csv")
        with open(TRACE, "w") as f:
            for i in range(40):
                f.write(f"a,{i},{(i % 7 + 1) * 300000},{i % 2}\n")
                if i % 3 == 2:
                    f.write(f"f,{i - 1}\n")
        os.chdir(tmp)  # files the grid writes (t.csv, r.json) land here
        run_cases()
        if DROPIN:
            run_under_interposer()
        replay_cases()
        n = run_tasks(replay_grid() + run_grid() + demo_grid())
        print(f"grid: {n} option cases")
    print(f"{checks} checks, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
