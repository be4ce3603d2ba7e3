#!/usr/bin/env python3
"""test_ab_judge.py — integrations/ggml/measure.py's in-process A/B step without a GPU.

judge_ab on made-up figures (within the 2% band, outside it, an interval
wider than the band or none at all: never a PASS), then the step itself,
measure.py --only ab, with stand-ins for carve-run (runs what follows its
"--") and ab-gpt2 (writes the JSON it is told to, figures chosen by the
test): the command it builds, the checks it prints, results-ab.md and
results-ab.json.

Usage: test_ab_judge.py MEASURE_PY
"""
import importlib.util
import json
import os
import stat
import sys
import tempfile

checks = failures = 0


def check(ok, what):
    global checks, failures
    checks += 1
    if not ok:
        failures += 1
        print("FAIL: " + what, file=sys.stderr)


def fig(m, lo, hi, n=24):
    return {"median_ratio": m, "lo": lo, "hi": hi, "coverage": 0.977 if lo is not None else 0, "n": n,
            "carve_median_tps": 1000 * m, "plain_median_tps": 1000}


def judge_cases(measure):
    cases = [  # figure, passes, a word the verdict must say
        (fig(0.995, 0.985, 1.004), True, "within 0.98-1.02"),
        (fig(1.0, 0.981, 1.019), True, "within"),
        (fig(0.975, 0.965, 0.985), False, "outside 0.98-1.02"),
        (fig(1.025, 1.015, 1.035), False, "outside"),
        (fig(1.0, 0.95, 1.03), False, "not judgeable"),      # 0.08 wide: wider than the band
        (fig(0.99, 0.969, 1.011), False, "not judgeable"),    # 0.042 wide, though the median is inside
        (fig(1.0, None, None, n=5), False, "at least 6"),
        (fig(1.0, None, None, n=8), False, "too few"),
        (None, False, "not measured"),
        ({"median_ratio": None, "lo": None, "hi": None, "n": 0}, False, "not measured"),
        # what no run can give, or a json.load of ab-gpt2's output could: never a pass
        (fig(float("nan"), float("nan"), float("nan"), n=0), False, "not measured"),
        (fig(1.0, float("nan"), float("nan")), False, "too few"),
        (fig(1.0, 1.01, 0.99), False, "outside its interval"),  # lo above hi
        (fig(1.0, 1.005, 1.015), False, "outside its interval"),  # the median below its interval
        (fig(1.0, 0.99, 1.01, n=1), False, "at least 6"),
        ({"median_ratio": True, "lo": True, "hi": True, "n": 120}, False, "not measured"),
        (fig(1.0, 0.99, 1.01, n=True), False, "at least 6"),
    ]
    for f, want, word in cases:
        ok, words = measure.judge_ab(f)
        check(ok == want and word in words, f"judge_ab({f}) = {ok}, {words!r}: wanted {want} saying {word!r}")
    # pairs that gave no figure: 6 of 120 judged would be a selection
    for n, pairs, want in ((6, 120, False), (107, 120, False), (108, 120, True), (24, 24, True)):
        ok, words = measure.judge_ab(fig(1.0, 0.99, 1.01, n=n), pairs)
        check(ok == want and (want or "pairs" in words), f"judge_ab(n={n}, pairs={pairs}) = {ok}, {words!r}")


STUB_RUN = """#!/bin/sh
# carve-run's stand-in: what follows "--" runs, its options are noted.
echo "$@" >> "$(dirname "$0")/carve-run.args"
while [ "$1" != "--" ]; do shift; done
shift
exec "$@"
"""

STUB_AB = """#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
out = args[args.index("--json") + 1]
pairs = int(args[args.index("--pairs") + 1])
rest = args[args.index("--") + 1:]
legacy = "ggml_no_vmm" in os.environ.get("LD_PRELOAD", "")
figs = json.loads(os.environ["STUB_AB_FIGS"])["legacy" if legacy else "vmm"]
d = {"ab_gpt2": 1, "switch": True, "pairs": pairs, "warmup": 0, "gen": 16, "prompt_tokens": 40,
     "calls": 4 * pairs, "complete": True, "same_tokens": os.environ.get("STUB_AB_SAME", "1") == "1",
     "seconds": 1.5, "rounds": [], "pair_ratios": [], "prompt": figs[0], "gen": figs[1],
     "gpt2_args_ok": "-n" not in rest and "-m" in rest}
with open(out, "w") as f:
    json.dump(d, f)
with open(args[args.index("--text") + 1], "w") as f:
    f.write("stub\\n")
print("stub ab-gpt2", " ".join(rest))
"""


def step_cases(measure_py, tmp):
    work, out = os.path.join(tmp, "work"), os.path.join(tmp, "out")
    for d in ("bin", "prefix/bin", "gpt2"):
        os.makedirs(os.path.join(work, d), exist_ok=True)
    for path, body in (("prefix/bin/carve-run", STUB_RUN), ("bin/ab-gpt2", STUB_AB)):
        with open(os.path.join(work, path), "w") as f:
            f.write(body)
        os.chmod(os.path.join(work, path), stat.S_IRWXU)
    # The shim and the model need only exist (the shim is never loaded: the stand-ins are scripts).
    for path in ("bin/libggml_no_vmm.so", "gpt2/ggml-model.bin"):
        open(os.path.join(work, path), "w").close()

    def run(figs, same="1"):
        import subprocess
        env = dict(os.environ, STUB_AB_FIGS=json.dumps(figs), STUB_AB_SAME=same, GGML_RUN_CPUS="0")
        p = subprocess.run([sys.executable, measure_py, "--work", work, "--out", out, "--only", "ab",
                            "--ab-pairs", "8", "--gen", "16"], env=env, capture_output=True, text=True, timeout=120)
        try:
            with open(os.path.join(out, "results-ab.json")) as f:
                res = json.load(f)
        except (OSError, ValueError):
            res = {}
        return p, res

    good = {"vmm": [fig(0.996, 0.99, 1.004, 8), fig(1.001, 0.995, 1.006, 8)],
            "legacy": [fig(0.993, 0.985, 1.0, 8), fig(0.999, 0.99, 1.01, 8)]}
    p, res = run(good)
    lines = [line for line in p.stdout.splitlines() if line.startswith(("PASS", "FAIL"))]
    check(p.returncode == 0 and len(lines) == 6 and all(line.startswith("PASS") for line in lines)
          and "6 passed, 0 failed" in p.stdout, f"--only ab, every figure within the band: 6 passes: {p.stdout}{p.stderr}")
    check(res.get("ab", {}).get("carve-run", {}).get("gpt2_args_ok") is True,
          f"ab-gpt2 gets gpt-2-backend's arguments without -n: {res.get('ab')}")
    with open(os.path.join(work, "prefix/bin/carve-run.args")) as f:
        runs = f.read().splitlines()
    check(len(runs) == 2 and all(r.startswith("--report=") and " -- " in r and "--pairs 8" in r for r in runs),
          f"ab-gpt2 runs under carve-run with a report, once per pool: {runs}")
    try:
        with open(os.path.join(out, "results-ab.md")) as f:
            md = f.read()
        check("| carve-run | 0.9960 (0.9900-1.0040) | 1.0010 (0.9950-1.0060) | 32 |" in md
              and "| carve-run-legacy |" in md, f"results-ab.md has the table: {md}")
    except OSError as e:
        check(False, f"results-ab.md written ({e})")

    wide = {"vmm": [fig(1.0, 0.95, 1.05, 8), fig(0.97, 0.96, 0.975, 8)], "legacy": good["legacy"]}
    p, res = run(wide)
    fails = [line for line in p.stdout.splitlines() if line.startswith("FAIL")]
    check(p.returncode == 1 and len(fails) == 2 and "not judgeable" in fails[0] and "outside" in fails[1],
          f"--only ab: a wide interval is not judgeable (FAIL), a median outside the band FAILs: {p.stdout}")
    p, res = run(good, same="0")
    fails = [line for line in p.stdout.splitlines() if line.startswith("FAIL")]
    check(p.returncode == 1 and len(fails) == 6 and "the same tokens" in fails[0],
          f"--only ab: other tokens between calls fail the way and its figures go unjudged: {p.stdout}")


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    spec = importlib.util.spec_from_file_location("measure", sys.argv[1])
    measure = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(measure)
    judge_cases(measure)
    with tempfile.TemporaryDirectory(prefix="ab-judge-") as tmp:
        step_cases(os.path.abspath(sys.argv[1]), tmp)
    print(f"{checks} checks, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
