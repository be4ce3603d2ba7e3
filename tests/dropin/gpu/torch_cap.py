#!/usr/bin/env python3
"""torch_cap.py — how much device memory PyTorch gets, and what it is told
when it asks for more, for the drop-in tests under carve-run --limit (with
its caching allocator as configured: PYTORCH_CUDA_ALLOC_CONF, e.g.
expandable_segments:True). Knows nothing of carve.

Asks for --ask GiB in one tensor (under a smaller cap PyTorch must raise
its own torch.cuda.OutOfMemoryError), then takes memory in --piece MiB
tensors until PyTorch refuses, holds them --hold seconds (so that a sampler
outside sees the peak), and frees them. --baseline allocates one small
tensor and holds it: the process's memory then is the CUDA context's own.
Prints one JSON object: ask_result ("oom", "allocated" or "error"),
ask_error (the exception's type), ask_message (its first line),
filled_bytes, fill_error, max_memory_reserved, alloc_conf.

Usage: torch_cap.py [--ask GIB] [--piece MIB] [--hold SECONDS] [--baseline]
"""
import argparse
import json
import os
import sys
import time

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ask", type=float, default=10.0)
    ap.add_argument("--piece", type=int, default=256)
    ap.add_argument("--hold", type=float, default=2.0)
    ap.add_argument("--baseline", action="store_true")
    a = ap.parse_args()
    dev = torch.device("cuda")
    out = {"alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
           "no_caching": os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING", "")}
    if a.baseline:
        x = torch.ones(16, device=dev)
        torch.cuda.synchronize()
        time.sleep(a.hold)
        out["baseline"] = float(x.sum())
        print(json.dumps(out))
        return 0
    try:
        big = torch.ones(int(a.ask * (1 << 30)), dtype=torch.uint8, device=dev)
        torch.cuda.synchronize()
        out["ask_result"] = "allocated"
        del big
    except torch.cuda.OutOfMemoryError as e:
        out.update(ask_result="oom", ask_error=type(e).__name__, ask_message=str(e).splitlines()[0][:300])
    except Exception as e:  # anything but PyTorch's own out-of-memory error is wrong
        out.update(ask_result="error", ask_error=type(e).__name__, ask_message=str(e).splitlines()[0][:300])
    torch.cuda.empty_cache()
    held = []
    try:
        while True:
            held.append(torch.ones(a.piece << 20, dtype=torch.uint8, device=dev))
            torch.cuda.synchronize()
    except torch.cuda.OutOfMemoryError as e:
        out["fill_error"] = type(e).__name__
    except Exception as e:
        out["fill_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    out["filled_bytes"] = len(held) * (a.piece << 20)
    time.sleep(a.hold)
    out["max_memory_reserved"] = torch.cuda.max_memory_reserved()
    out["checksum"] = sum(int(t[0]) for t in held)
    del held
    torch.cuda.empty_cache()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
