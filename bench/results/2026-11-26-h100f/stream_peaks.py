#!/usr/bin/env python3
"""stream_peaks.py TRACE.csv[.gz]: the trace's peak of live bytes, and the sum
of each stream's own peak (what separate per-stream pools would hold at
least, if no memory moved between them)."""
import collections, gzip, sys
live, cur, peaks = {}, collections.Counter(), collections.Counter()
tot = peak = 0
op = gzip.open if sys.argv[1].endswith(".gz") else open
for line in op(sys.argv[1], "rt"):
    if line[0] == "#":
        continue
    f = line.strip().split(",")
    if f[0] == "a":
        s = int(f[3]) if len(f) > 3 and not f[3].startswith("@") else 0
        live[f[1]] = (int(f[2]), s); cur[s] += int(f[2]); tot += int(f[2])
        peaks[s] = max(peaks[s], cur[s]); peak = max(peak, tot)
    elif f[0] == "f" and f[1] in live:
        z, s = live.pop(f[1]); cur[s] -= z; tot -= z
print(f"peak {peak / 2**20:.1f} MiB; sum of the {len(peaks)} streams' peaks {sum(peaks.values()) / 2**20:.1f} MiB "
      f"({sum(peaks.values()) / peak:.3f})")
