#!/usr/bin/env python3
"""peak_diff.py A.csv[.gz] B.csv[.gz]: the buffers live at each trace's peak of
live bytes, and the sizes B holds more (or fewer) of than A at its peak."""
import collections, gzip, sys
def peakset(fn):
    live, cur, peak, best = {}, 0, 0, None
    op = gzip.open if fn.endswith(".gz") else open
    for line in op(fn, "rt"):
        if line[0] == "#":
            continue
        f = line.strip().split(",")
        if f[0] == "a":
            live[f[1]] = int(f[2]); cur += int(f[2])
            if cur > peak:
                peak, best = cur, collections.Counter(live.values())
        elif f[0] == "f" and f[1] in live:
            cur -= live.pop(f[1])
    return peak, best
pa, a = peakset(sys.argv[1]); pb, b = peakset(sys.argv[2])
print(f"peak {pa} B in A, {pb} B in B ({pb - pa:+d})")
d = collections.Counter(b); d.subtract(a)
for size, k in sorted(d.items(), key=lambda x: -abs(x[0] * x[1])):
    if k:
        print(f"  {size} B x {k:+d}")
