"""cupy_ops.py — a few thousand CuPy operations of many sizes, on the default
stream and a side stream, under carve.cupy or CuPy's own memory pool;
writes a checksum of every result and the allocator's numbers.

The one idea: the inputs are made on the device from fixed formulas and
every operation is deterministic (no atomics), so the checksums are a pure
function of the arithmetic and must be identical under both allocators;
under carve the arrays must all be gone at the end (no live buffer left).
"""

import gc
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402

a = common.args("CuPy operations under one allocator", modes=("carve", "default"),
                ops=(int, 3000, "operations"))
import cupy as cp  # noqa: E402

if a.mode == "carve":
    import carve  # noqa: E402
    import carve.cupy  # noqa: E402
    carve.cupy.enable()

sizes = [1, 17, 256, 1000, 4096, 65536, 1 << 18, 3 << 20, 1 << 22]
side = cp.cuda.Stream(non_blocking=True)
sums = []
keep = []
t0 = common.now()
for i in range(a.ops):
    n = sizes[i % len(sizes)]
    stream = side if i % 5 == 4 else cp.cuda.Stream.null
    with stream:
        x = (cp.arange(n, dtype=cp.float32) % 97) * 0.01 + i % 7
        op = i % 6
        if op == 0:
            y = cp.sin(x) * cp.cos(x)
        elif op == 1:
            y = cp.cumsum(x) / n
        elif op == 2:
            y = cp.sort(x[::-1])
        elif op == 3:
            m = int(n ** 0.5) or 1
            y = x[: m * m].reshape(m, m) @ x[: m * m].reshape(m, m).T
        elif op == 4:
            y = cp.where(x > 0.5, x, -x).astype(cp.float64)
        else:
            y = cp.concatenate([x, x * 2])[:: 3]
        sums.append(float(y.sum()))
        if i % 50 == 0:
            keep.append(y)  # some results live long, interleaved with short-lived ones
        if len(keep) > 20:
            keep.pop(0)
side.synchronize()
cp.cuda.Stream.null.synchronize()
seconds = common.now() - t0
del keep, x, y
gc.collect()
result = {"mode": a.mode, "ops": a.ops, "sums": sums, "seconds": seconds}
if a.mode == "carve":
    s = carve.memory_stats(cp.cuda.runtime.getDevice())
    result.update({"num_allocs": s["num_allocs"], "num_live_at_end": s["num_live"],
                   "peak_allocated_bytes": s["allocated_bytes_peak"], "peak_reserved_bytes": s["reserved_bytes_peak"]})
else:
    pool = cp.get_default_memory_pool()
    result.update({"num_live_at_end": None, "pool_used_bytes_at_end": pool.used_bytes(),
                   "pool_total_bytes": pool.total_bytes()})
common.write(a.out, result)
