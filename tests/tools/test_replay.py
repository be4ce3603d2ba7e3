#!/usr/bin/env python3
"""test_replay.py — carve-replay end to end.

usage: test_replay.py CARVE_REPLAY TRACE EVENTS

Runs the tool on the committed small trace (TRACE, with EVENTS events) and on
small traces written here, and checks the JSON report, --min-capacity (the
capacity found fits, one granule less does not), --svg, standard input and
gzip input, problem traces, and the exit status of bad options.
"""
import gzip
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

GRANULE = 2 << 20
failures = 0
checks = 0


def check(cond, what):
    global failures, checks
    checks += 1
    if not cond:
        failures += 1
        print("FAIL: " + what, file=sys.stderr)
    return cond


def run(args, stdin=None, timeout=240):
    p = subprocess.run([TOOL] + args, input=stdin, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def run_json(args, stdin=None):
    rc, out, err = run(["--json"] + args, stdin)
    if not check(rc == 0, "exit status 0 for %s (got %d): %s" % (args, rc, err.strip())):
        return {}
    try:
        return json.loads(out)  # exactly one JSON value, nothing else
    except ValueError as e:
        check(False, "stdout of %s is one JSON object: %s: %r" % (args, e, out[:200]))
        return {}


def write(dirname, name, text, mode="w"):
    path = os.path.join(dirname, name)
    with open(path, mode) as f:
        f.write(text)
    return path


def test_json(trace, events):
    j = run_json([trace])
    for key in ("events", "peak_requested_bytes", "reserved_peak_bytes", "footprint_ratio",
                "ns_per_op", "num_backend_allocs", "num_ooms", "allocated_peak_bytes",
                "skipped_lines", "allocs", "frees", "backend", "growth", "limit_bytes",
                "num_backend_frees", "repeat", "load_seconds", "diag"):
        check(key in j, "JSON has %s" % key)
    if not j:
        return j
    check(j["events"] == events, "events == %d (got %s)" % (events, j["events"]))
    check(j["allocs"] + j["frees"] == j["events"], "allocs + frees == events")
    check(j["peak_requested_bytes"] > 0, "peak requested > 0")
    check(j["reserved_peak_bytes"] >= j["peak_requested_bytes"], "reserved peak >= peak requested")
    check(j["allocated_peak_bytes"] >= j["peak_requested_bytes"], "allocated peak >= peak requested")
    check(j["footprint_ratio"] >= 1.0, "footprint ratio >= 1 (got %s)" % j["footprint_ratio"])
    ratio = j["reserved_peak_bytes"] / j["peak_requested_bytes"]
    check(abs(j["footprint_ratio"] - ratio) < 1e-5, "footprint ratio = reserved / requested")
    check(j["ns_per_op"] > 0, "ns_per_op > 0")
    check(j["num_backend_allocs"] >= 1, "at least one backend allocation")
    check(j["num_ooms"] == 0, "no OOM without a limit")
    check(j["skipped_lines"] == 0 and j["diag"] == "", "the small trace is clean")
    check(j["backend"] == "virtual" and j["growth"] == 1, "defaults: virtual backend, growth on")
    # Deterministic on the virtual backend: a second run reports the same footprint.
    j2 = run_json(["-q", "--repeat", "3", trace])
    check(j2.get("reserved_peak_bytes") == j["reserved_peak_bytes"], "deterministic reserved peak")
    check(j2.get("repeat") == 3, "repeat reported")
    return j


def test_min_capacity(trace, base):
    j = run_json(["-q", "--min-capacity", trace])
    for key in ("min_capacity_bytes", "min_capacity_ratio", "min_capacity_lower_bound_bytes",
                "min_capacity_probes"):
        check(key in j, "JSON has %s" % key)
    cap = j.get("min_capacity_bytes")
    if not check(isinstance(cap, int), "a capacity was found"):
        return
    peak = j["peak_requested_bytes"]
    check(cap >= peak, "min capacity >= peak requested")
    check(cap % GRANULE == 0, "min capacity is a multiple of 2 MiB")
    check(abs(j["min_capacity_ratio"] - cap / peak) < 1e-5, "min capacity ratio")
    check(j["min_capacity_lower_bound_bytes"] >= peak, "lower bound >= peak requested")
    check(j["min_capacity_lower_bound_bytes"] - peak < GRANULE, "lower bound is peak rounded up")
    fit = run_json(["-q", "--growth", "0", "--initial", str(cap), "--limit", str(cap), trace])
    check(fit.get("num_ooms") == 0, "no OOM in a block of the min capacity")
    check(fit.get("num_backend_allocs") == 1, "one block only with growth off")
    if cap > j["min_capacity_lower_bound_bytes"]:
        less = cap - GRANULE
        short = run_json(["-q", "--growth", "0", "--initial", str(less), "--limit", str(less), trace])
        check(short.get("num_ooms", 0) > 0, "OOMs in a block one granule smaller")
    # Sizes with suffixes go through carve_config_parse.
    mib = cap // (1 << 20)
    fit2 = run_json(["-q", "--growth", "0", "--initial", "%dMiB" % mib, "--limit", "%dMiB" % mib,
                     trace])
    check(fit2.get("num_ooms") == 0 and fit2.get("limit_bytes") == cap, "sizes with suffixes")


def well_formed_svg(path, what):
    with open(path, "rb") as f:
        data = f.read()
    check(data.startswith(b"<svg"), what + ": starts with <svg")
    check(data.rstrip().endswith(b"</svg>"), what + ": ends with </svg>")
    check(len(data) < 4 << 20, what + ": under 4 MB")
    try:
        root = ET.fromstring(data)
        check(root.tag.endswith("svg"), what + ": root element is svg")
    except ET.ParseError as e:
        check(False, what + ": well-formed XML: %s" % e)
    return data


def test_svg(trace, tmp):
    out = os.path.join(tmp, "arena.svg")
    rc, text, err = run(["-q", "--svg", out, trace])
    check(rc == 0, "--svg exits 0: " + err)
    data = well_formed_svg(out, "svg by size")
    check(b"footprint ratio" in data, "svg title gives the footprint ratio")
    check(b"virtual backend" in data, "svg title names the backend")
    check(b"<path" in data, "svg draws buffers")
    check("picture" in text, "report names the picture")
    out2 = os.path.join(tmp, "arena-streams.svg")
    rc, _, err = run(["-q", "--svg", out2, "--svg-color", "stream", trace])
    check(rc == 0, "--svg-color stream exits 0: " + err)
    data = well_formed_svg(out2, "svg by stream")
    check(b"stream 1" in data, "stream legend")


def test_stdin_and_gzip(trace, base, tmp):
    with open(trace, "rb") as f:
        raw = f.read()
    j = run_json(["-q", "-"], stdin=raw)
    for k in ("events", "peak_requested_bytes", "reserved_peak_bytes", "num_backend_allocs"):
        check(j.get(k) == base[k], "stdin gives the same %s" % k)
    gz = os.path.join(tmp, "trace.csv.gz")
    with gzip.open(gz, "wb") as f:
        f.write(raw)
    j = run_json(["-q", gz])
    check(j.get("events") == base["events"] and
          j.get("reserved_peak_bytes") == base["reserved_peak_bytes"], "gzip file")
    with open(gz, "rb") as f:
        j = run_json(["-q", "-"], stdin=f.read())
    check(j.get("events") == base["events"], "gzip on stdin")
    # A corrupt gzip file is an error, not a crash.
    bad = write(tmp, "bad.gz", b"\x1f\x8b\x08\x00garbage", "wb")
    rc, _, err = run(["-q", bad])
    check(rc == 1 and "gzip" in err, "corrupt gzip: exit 1 naming gzip (%d, %s)" % (rc, err.strip()))


def test_problem_trace(tmp):
    text = ("a,1,1000\n"
            "a,2,hello\n"      # line 2: malformed
            "f,77\n"           # line 3: unknown id
            "a,1,5\n"          # line 4: id already live
            "a,3,-4\n"         # line 5: negative
            "a,4,3000000,2\r\n"
            "f,1\n"
            "f,4")
    path = write(tmp, "problems.csv", text)
    j = run_json(["-q", path])
    check(j.get("skipped_lines") == 4, "4 skipped lines (got %s)" % j.get("skipped_lines"))
    check(j.get("events") == 4, "4 clean events")
    diag = j.get("diag", "")
    for needle in ("line 2", "line 3", "line 4", "line 5"):
        check(needle in diag, "diag names %s: %s" % (needle, diag))
    check(j.get("streams") == 3, "streams = 1 + largest stream number")
    rc, out, err = run([path])
    check(rc == 0, "a trace with problems still replays")
    check("skipped lines    4" in out, "the report gives the skipped lines")
    check("warning" in err and "line 2" in err, "warning on stderr")
    rc, out, err = run(["-q", path])
    check(err == "", "--quiet silences stderr: %r" % err)


def test_limits_and_backends(trace, tmp):
    j = run_json(["-q", "--limit", "8MiB", trace])
    check(j.get("num_ooms", 0) > 0, "OOMs under a small limit are counted")
    check(j.get("events") is not None and j.get("reserved_peak_bytes", 1 << 40) <= 8 << 20,
          "the limit holds")
    check(j.get("limit_bytes") == 8 << 20, "limit reported")
    small = write(tmp, "host.csv", "".join("a,%d,%d,%d\n" % (i, 1000 * (i + 1), i % 3)
                                           for i in range(50)) +
                  "".join("f,%d\n" % i for i in range(0, 50, 2)))
    j = run_json(["-q", "--backend", "host", small])
    check(j.get("backend") == "host" and j.get("num_ooms") == 0 and j.get("events") == 75,
          "host backend replays")
    j = run_json(["-q", "--conf", "sim_event_polls=3", small])
    check(j.get("events") == 75, "--conf is applied")
    empty = write(tmp, "empty.csv", "")
    j = run_json(["-q", "--min-capacity", empty])
    check(j.get("events") == 0 and j.get("footprint_ratio", 0) is None, "empty trace")
    out = os.path.join(tmp, "empty.svg")
    rc, _, err = run(["-q", "--svg", out, empty])
    check(rc == 0, "svg of an empty trace: " + err)
    well_formed_svg(out, "empty svg")
    rc, out, _ = run(["-q", "--svg", os.path.join(tmp, "no", "such", "dir.svg"), small])
    check(rc == 1, "unwritable svg path: exit 1")


def test_warm(tmp):
    """--warm N: the trace again on the same arena; a program that repeats a
    step maps nothing in a warm pass, and the keys are there."""
    sizes = [3 << 20, 700 << 10, 9 << 20, (5 << 20) + 100, 64 << 10, 2 << 20, 13 << 20]
    lines, n = [], 0
    for step in range(6):
        ids = []
        for sz in sizes:
            lines.append("a,%d,%d,0\n" % (n, sz))
            ids.append(n)
            n += 1
        for i in range(len(ids)):
            lines.append("f,%d\n" % ids[(3 * i) % len(ids)])
    steps = write(tmp, "steps.csv", "".join(lines))
    for conf in ([], ["--conf", "vmm=1"]):
        j = run_json(["-q", "--warm", "2"] + conf + [steps])
        check(j.get("warm_passes") == 2, "warm passes reported %s" % conf)
        for key in ("warm_ns_per_op", "warm_backend_frees_per_pass", "warm_reserved_peak_bytes",
                    "warm_num_ooms", "warm_footprint_ratio", "warm_event_records_per_pass",
                    "warm_event_queries_per_pass", "warm_syncs_per_pass"):
            check(key in j, "warm JSON has %s %s" % (key, conf))
        check(j.get("warm_backend_allocs_per_pass") == 0,
              "a repeated step maps nothing when warm %s: %s" %
              (conf, j.get("warm_backend_allocs_per_pass")))
        check(j.get("warm_num_ooms") == 0, "no OOM when warm %s" % conf)
        check(all(isinstance(j.get(k), int) for k in ("num_event_records", "num_event_queries", "num_syncs")),
              "the cold pass's event and wait counts %s" % conf)
        # The modeled time: host (measured) + driver (the ledger by the cost
        # table), cold and warm; a repeated step calls no mapping function warm.
        for pre in ("", "warm_"):
            h, d, m = (j.get(pre + k + "_ns_per_event") for k in ("host", "driver", "modeled"))
            check(all(isinstance(x, (int, float)) for x in (h, d, m)) and abs(h + d - m) < 0.01,
                  "%smodeled ns per event = host + driver %s: %s %s %s" % (pre, conf, h, d, m))
        calls = j.get("driver_calls", {})
        check(calls.get("cudaEventRecord", 0) == j.get("num_event_records"), "ledger records = engine's %s" % conf)
        check(j.get("driver_ns_per_event", 0) > 0 and j.get("driver_model_ns", 0) > 0,
              "cold driver time modeled %s" % conf)
        if j.get("vmm"):
            # The engine counts granules mapped; a mapping may hold several.
            mapped = j.get("driver_bytes", {}).get("cuMemMap", 0)
            check(mapped % (2 << 20) == 0 and calls.get("cuMemMap", 0) <= mapped // (2 << 20) and
                  mapped // (2 << 20) + calls.get("cuMemAddressReserve", 0) == j.get("num_backend_allocs"),
                  "ledger maps = engine's %s: %s, %s bytes" % (conf, calls, mapped))
        else:
            check(calls.get("cudaMalloc") == j.get("num_backend_allocs"), "ledger segments = engine's %s" % conf)
        warm = j.get("warm_driver_calls_per_pass", {})
        check(not any(k in warm for k in ("cuMemCreate", "cuMemMap", "cuMemUnmap", "cudaMalloc", "cudaFree")),
              "a repeated step calls no mapping function when warm %s: %s" % (conf, warm))
        check(j.get("warm_driver_model_ns") == round(j["warm_driver_ns_per_event"] * j["events"] * 2)
              or abs(j["warm_driver_ns_per_event"] * j["events"] * 2 - j["warm_driver_model_ns"]) < 1,
              "warm driver ns per event over both passes %s" % conf)
    j = run_json(["-q", steps])
    check("warm_passes" not in j or j.get("warm_passes") == 0, "no warm passes unless asked")
    rc, out, _ = run(["--warm", "1", "--conf", "vmm=1", steps])
    check(rc == 0 and "warm" in out and "granule maps" in out, "text report of warm passes: " + out)
    check("modeled, cold" in out and "modeled, warm" in out and "cuMemMap" in out and "bench/vmm_costs.cu" in out,
          "text report of the modeled time: " + out)


def test_options(trace):
    rc, out, _ = run(["--help"])
    check(rc == 0, "--help exits 0")
    for opt in ("--backend", "--device", "--initial", "--limit", "--growth", "--min-grow",
                "--conf", "--repeat", "--warm", "--min-capacity", "--svg", "--svg-color", "--json",
                "--quiet", "--help", "--version"):
        check(opt in out, "--help documents " + opt)
    rc, out, _ = run(["--version"])
    check(rc == 0 and out.startswith("carve-replay "), "--version")
    bad = [
        ["--bogus", trace], ["-z", trace], [], [trace, trace], ["--growth", "2", trace],
        ["--growth"], ["--limit", "12XB", trace], ["--initial", "lots", trace],
        ["--limit", "1GiB,backend=cuda", trace], ["--repeat", "0", trace],
        ["--repeat", "-3", trace], ["--repeat", "x", trace], ["--warm", "-1", trace],
        ["--warm", "x", trace], ["--warm"], ["--backend", "nope", trace],
        ["--svg-color", "pink", trace], ["--svg"], ["--conf", "nokey=1", trace],
        ["--growth", "0", trace],  # growth off needs an initial block
    ]
    for args in bad:
        rc, out, err = run(args)
        check(rc == 2, "exit 2 for %s (got %d)" % (args, rc))
        check(err.startswith("carve-replay"), "message for %s: %r" % (args, err))
        check(out == "", "nothing on stdout for %s" % args)
    rc, _, err = run(["/no/such/trace.csv"])
    check(rc == 1 and "cannot open" in err, "missing trace: exit 1")


def main():
    global TOOL
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    TOOL, trace, events = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with tempfile.TemporaryDirectory() as tmp:
        base = test_json(trace, events)
        if base:
            test_min_capacity(trace, base)
            test_stdin_and_gzip(trace, base, tmp)
        test_svg(trace, tmp)
        test_problem_trace(tmp)
        test_limits_and_backends(trace, tmp)
        test_warm(tmp)
        test_options(trace)
    print("%d checks, %d failed" % (checks, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
