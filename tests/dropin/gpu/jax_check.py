#!/usr/bin/env python3
"""jax_check.py — what JAX sizes itself to and a small computation, for the
drop-in tests: under carve-run --limit, JAX's preallocation must fit the cap
(it takes a fraction of the device's memory as reported to it). Prints one
JSON object. Knows nothing of carve.
"""
import json
import os
import sys

import jax
import jax.numpy as jnp


def main():
    x = jnp.arange(1 << 22, dtype=jnp.float32)
    y = float(jnp.sum(jnp.sin(x) * 2.0))
    d = jax.devices()[0]
    stats = d.memory_stats() or {}
    print(json.dumps({"result": y, "bytes_limit": stats.get("bytes_limit"), "pool_bytes": stats.get("pool_bytes"),
                      "peak_bytes_in_use": stats.get("peak_bytes_in_use"),
                      "allocator": os.environ.get("XLA_PYTHON_CLIENT_ALLOCATOR", "default")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
