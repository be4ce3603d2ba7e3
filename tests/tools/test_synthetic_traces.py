#!/usr/bin/env python3
"""test_synthetic_traces.py — bench/traces/synthetic's traces are what
gen_serving.py makes: each file's first line is the command that made it,
and running it again gives the same text (the decompressed bytes: gzip's
own may differ between zlib versions), so the committed traces can always be
regenerated and the generator is checked to be deterministic. Also
checks that one_stream.py puts every event of a trace on stream 0 and
changes nothing else.

usage: test_synthetic_traces.py DIR
"""
import gzip
import os
import subprocess
import sys


ONE_STREAM_IN = """# two streams
a,1,4096,3
a,0x7f,512
 a , 2 , 8 , 1 ,@17
f,1,4096,3
f,0x7f
f,2,@20
"""
ONE_STREAM_OUT = """# two streams
a,1,4096
a,0x7f,512
a,2,8,@17
f,1
f,0x7f
f,2,@20
"""


def check_one_stream(d):
    """one_stream.py: the events of a small trace with every extension, and
    of a committed trace, on stream 0, ids and sizes as they were."""
    tool = os.path.join(d, "one_stream.py")
    out = subprocess.run([sys.executable, tool, "-"], input=ONE_STREAM_IN, capture_output=True, text=True,
                         check=True).stdout
    if out != ONE_STREAM_OUT:
        print("FAIL: one_stream.py gives %r for %r" % (out, ONE_STREAM_IN))
        return 1
    src = os.path.join(d, "cnn_serving.csv.gz")
    lines = gzip.open(src, "rt").read().splitlines()
    one = subprocess.run([sys.executable, tool, src], capture_output=True, text=True, check=True).stdout.splitlines()
    want = [",".join(l.split(",")[:3]) if l.startswith("a,") else l for l in lines]
    if one != want or not any(len(l.split(",")) == 4 for l in lines):
        print("FAIL: one_stream.py on cnn_serving.csv.gz changes more than the streams (or there were none)")
        return 1
    print("ok: one_stream.py (%d lines of cnn_serving.csv.gz)" % len(one))
    return 0


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
    failures += check_one_stream(d)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
