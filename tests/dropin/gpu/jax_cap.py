#!/usr/bin/env python3
"""jax_cap.py — how much device memory JAX gets, and what it is told when it
asks for more, for the drop-in tests under carve-run --limit (with JAX's
default preallocation, or XLA_PYTHON_CLIENT_ALLOCATOR=platform). Knows
nothing of carve.

Asks for --ask GiB in one array (under a smaller cap JAX must raise its
own out-of-memory error, RESOURCE_EXHAUSTED), then takes memory in --piece
MiB arrays until JAX refuses, holds them --hold seconds (so that a sampler
outside sees the peak), and frees them. --baseline computes one small
array and holds it (run it with XLA_PYTHON_CLIENT_PREALLOCATE=false: the
process's memory then is the CUDA context's own). Prints one JSON object:
ask_result ("oom", "allocated" or "error"), ask_error, ask_message,
filled_bytes, fill_error, bytes_limit (JAX's own pool limit), allocator.

Usage: jax_cap.py [--ask GIB] [--piece MIB] [--hold SECONDS] [--baseline]
"""
import argparse
import json
import os
import sys
import time

import jax
import jax.numpy as jnp


def is_oom(e):
    text = str(e)
    return "RESOURCE_EXHAUSTED" in text or "Out of memory" in text or "out of memory" in text


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ask", type=float, default=10.0)
    ap.add_argument("--piece", type=int, default=256)
    ap.add_argument("--hold", type=float, default=2.0)
    ap.add_argument("--baseline", action="store_true")
    a = ap.parse_args()
    out = {"allocator": os.environ.get("XLA_PYTHON_CLIENT_ALLOCATOR", "default"),
           "preallocate": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "")}
    if a.baseline:
        x = jnp.ones(16).block_until_ready()
        time.sleep(a.hold)
        out["baseline"] = float(x.sum())
        print(json.dumps(out))
        return 0
    try:
        big = jnp.ones((int(a.ask * (1 << 30)),), dtype=jnp.uint8).block_until_ready()
        out["ask_result"] = "allocated"
        del big
    except Exception as e:
        out.update(ask_result="oom" if is_oom(e) else "error", ask_error=type(e).__name__,
                   ask_message=str(e).splitlines()[0][:300])
    held = []
    try:
        while True:
            held.append(jnp.ones((a.piece << 20,), dtype=jnp.uint8).block_until_ready())
    except Exception as e:
        out["fill_error"] = type(e).__name__ if is_oom(e) else f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        out["fill_oom"] = is_oom(e)
    out["filled_bytes"] = len(held) * (a.piece << 20)
    time.sleep(a.hold)
    stats = jax.devices()[0].memory_stats() or {}
    out["bytes_limit"] = stats.get("bytes_limit")
    out["peak_bytes_in_use"] = stats.get("peak_bytes_in_use")
    out["checksum"] = sum(int(x[0]) for x in held)
    del held
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
