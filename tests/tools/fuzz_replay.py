#!/usr/bin/env python3
"""fuzz_replay.py — carve-replay on garbage never crashes.

usage: fuzz_replay.py CARVE_REPLAY TRACE [SEED] [COUNT]

Feeds the tool random bytes, random near-trace lines, and mutations of the
committed small trace (flipped bytes, dropped, duplicated and shuffled
lines), with --min-capacity and --svg on some of them. Every run must end
normally: exit 0 with one JSON object on stdout (exit 1 only for input that
starts like gzip and does not decompress), never a signal or a hang.
"""
import json
import os
import random
import subprocess
import sys
import tempfile

failures = 0


def run_one(tool, path, extra, what):
    global failures
    args = [tool, "-q", "--json"] + extra + [path]
    try:
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    except subprocess.TimeoutExpired:
        failures += 1
        print("FAIL (hang): %s %s" % (what, " ".join(args)), file=sys.stderr)
        return
    with open(path, "rb") as f:
        gz = f.read(1) == b"\x1f"
    if p.returncode == 1 and gz:
        return
    if p.returncode != 0:
        failures += 1
        print("FAIL (exit %d): %s %s\n%s" % (p.returncode, what, " ".join(args),
                                             p.stderr.decode("utf-8", "replace")[-2000:]),
              file=sys.stderr)
        return
    try:
        j = json.loads(p.stdout)
        assert j["events"] >= 0 and j["skipped_lines"] >= 0
    except (ValueError, KeyError, AssertionError) as e:
        failures += 1
        print("FAIL (bad JSON: %s): %s" % (e, what), file=sys.stderr)


def random_bytes(rng):
    n = rng.randrange(0, 3000)
    alphabet = b"af,,,0123456789\n\n\n#\r -x\t"
    return bytes(rng.choice(alphabet) if rng.random() < 0.8 else rng.randrange(256)
                 for _ in range(n))


def random_lines(rng):
    out = []
    for _ in range(rng.randrange(0, 400)):
        r = rng.random()
        ident = rng.randrange(12) if rng.random() < 0.9 else rng.getrandbits(64)
        if r < 0.45:
            size = rng.choice([0, 1, 255, 256, 4097, 1 << 20, (1 << 20) + 1, 10 << 20, 3 << 30,
                               (1 << 64) - 1, 1 << 63, rng.getrandbits(rng.randrange(1, 40))])
            stream = rng.choice(["", ",0", ",1", ",7", ",1023", ",1024", ",-1", ","])
            out.append("a,%d,%d%s" % (ident, size, stream))
        elif r < 0.85:
            out.append("f,%d" % ident)
        else:
            out.append(rng.choice(["#", "", "a", "f", "a,,", "x,1,2", "a,1,2,3,4", "  ",
                                   "a,99999999999999999999999,1", "\x00", "f,-1"]))
    sep = rng.choice(["\n", "\r\n", " \n"])
    return (sep.join(out) + rng.choice(["", sep])).encode("latin-1")


def mutate(rng, base):
    lines = base.split(b"\n")
    for _ in range(rng.randrange(1, 30)):
        k = rng.random()
        i = rng.randrange(len(lines))
        if k < 0.3:
            del lines[i]
        elif k < 0.5:
            lines.insert(rng.randrange(len(lines)), lines[i])
        elif k < 0.7:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif lines[i]:
            b = bytearray(lines[i])
            b[rng.randrange(len(b))] = rng.randrange(256)
            lines[i] = bytes(b)
    return b"\n".join(lines)


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    tool, trace = sys.argv[1], sys.argv[2]
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    count = int(sys.argv[4]) if len(sys.argv) > 4 else 60
    rng = random.Random(seed)
    with open(trace, "rb") as f:
        base = f.read()
    runs = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "input.csv")
        svg = os.path.join(tmp, "out.svg")
        for i in range(count):
            kind = i % 3
            data = (random_bytes, random_lines, lambda r: mutate(r, base))[kind](rng)
            with open(path, "wb") as f:
                f.write(data)
            extra = []
            if i % 4 == 0:
                extra.append("--min-capacity")
            if i % 5 == 0:
                extra += ["--svg", svg]
            if i % 11 == 0:  # real host memory: keep it small
                extra += ["--backend", "host", "--limit", "256MiB"]
            elif i % 7 == 0:  # (an option may be given once)
                extra += ["--limit", "64MiB"]
            run_one(tool, path, extra, "input %d (seed %d, kind %d)" % (i, seed, kind))
            runs += 1
    print("%d runs, %d failures" % (runs, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
