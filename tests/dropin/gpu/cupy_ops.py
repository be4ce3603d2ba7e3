#!/usr/bin/env python3
"""cupy_ops.py — a few thousand CuPy operations on arrays of varying sizes,
for the drop-in tests: run plain and under carve-run, the printed checksums
must be equal. Knows nothing of carve.
"""
import json
import sys

import cupy as cp
import numpy as np


def main():
    rng = np.random.default_rng(7)
    sums = []
    keep = []
    for i in range(3000):
        n = int(rng.integers(1, 1 << 20))
        a = cp.asarray(rng.standard_normal(n, dtype=np.float32)) if i % 50 == 0 else cp.arange(n, dtype=cp.float32)
        b = (a * 1.5 + 2.0) ** 2
        if i % 7 == 0:
            m = int(rng.integers(8, 512))
            x = cp.ones((m, m), dtype=cp.float32) * (i % 13)
            b = b[: m * m].sum() + (x @ x).sum() if b.size >= m * m else b.sum()
        s = float(b.sum() if hasattr(b, "sum") else b)
        sums.append(round(s, 2))
        if i % 10 == 0:
            keep.append(a)  # some arrays live long
        if len(keep) > 50:
            keep.pop(0)
    cp.cuda.Device().synchronize()
    print(json.dumps({"ops": 3000, "checksum": sum(sums), "first": sums[:5], "last": sums[-5:],
                      "pool_used_bytes": cp.get_default_memory_pool().used_bytes()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
