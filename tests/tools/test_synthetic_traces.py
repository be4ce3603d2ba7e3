#!/usr/bin/env python3
"""test_synthetic_traces.py — bench/traces/synthetic's traces are what
gen_serving.py makes: each file's first line is the command that made it,
and running it again gives the same text (the decompressed bytes: gzip's
own may differ between zlib versions), so the committed traces can always be
regenerated and the generator is checked to be deterministic.

usage: test_synthetic_traces.py DIR
"""
import gzip
import os
import subprocess
import sys


def main():
    d = sys.argv[1]
    gen = os.path.join(d, "gen_serving.py")
    traces = sorted(f for f in os.listdir(d) if f.endswith(".csv.gz"))
    failures = 0
    if not traces:
        print("FAIL: no traces in %s" % d)
        return 1
    for f in traces:
        text = gzip.open(os.path.join(d, f), "rt").read()
        first = text.split("\n", 1)[0].split()
        if first[:2] != ["#", "gen_serving.py"]:
            print("FAIL: %s does not say how it was made: %s" % (f, " ".join(first)))
            failures += 1
            continue
        again = subprocess.run([sys.executable, gen] + first[2:], capture_output=True, text=True, check=True).stdout
        if again != text:
            print("FAIL: %s differs from what %s gives now" % (f, " ".join(first[1:])))
            failures += 1
        else:
            print("ok: %s (%d lines)" % (f, text.count("\n")))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
