#!/usr/bin/env python3
"""PyTorch's CUDA caching allocator as a peer of carve's peer benchmark.

Builds torch_peer.cpp with torch.utils.cpp_extension.load (cached in
--build-dir) and runs one workload of the peer benchmark through
c10::cuda::CUDACachingAllocator, with the timed loops in C++. The allocator
reads PYTORCH_CUDA_ALLOC_CONF once, when CUDA is first initialized, so each
configuration needs its own process: run.sh starts this script once per
workload and configuration.

    torch_peer.py --build-dir DIR --build-only
    torch_peer.py --build-dir DIR -- --workload churn --out raw.jsonl [options]

Everything after "--" goes to the benchmark (see peers.hpp: --workload,
--trace, --label, --out, --quick, ...). The row name is "torch", or
"torch-expandable" when expandable segments are configured.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def build(build_dir, verbose):
    from torch.utils.cpp_extension import load

    os.makedirs(build_dir, exist_ok=True)
    t0 = time.monotonic()
    mod = load(
        name="carve_torch_peer",
        sources=[os.path.join(HERE, "torch_peer.cpp")],
        extra_include_paths=[HERE],
        extra_cflags=["-O2"],
        with_cuda=True,
        build_directory=build_dir,
        verbose=verbose,
    )
    return mod, time.monotonic() - t0


def alloc_conf():
    # Newer releases read PYTORCH_ALLOC_CONF and still accept the CUDA name.
    return os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or os.environ.get("PYTORCH_ALLOC_CONF") or ""


def expandable_requested(conf):
    for item in conf.replace(" ", "").split(","):
        key, _, val = item.partition(":")
        if key == "expandable_segments" and val.lower() == "true":
            return True
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__, allow_abbrev=False,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(HERE, "..", "..", "build", "torch_peer"))
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--verbose-build", action="store_true")
    argv = sys.argv[1:]
    rest = []
    if "--" in argv:
        cut = argv.index("--")
        argv, rest = argv[:cut], argv[cut + 1:]
    args, unknown = ap.parse_known_args(argv)
    rest = unknown + rest

    import torch

    mod, secs = build(os.path.abspath(args.build_dir), args.verbose_build)
    if args.build_only:
        print(f"torch_peer: extension ready ({secs:.1f} s) for torch {torch.__version__}", flush=True)
        return 0

    if not torch.cuda.is_available():
        print("torch_peer: no CUDA device", file=sys.stderr)
        return 1
    torch.cuda.init()
    dev = 0
    torch.cuda.set_device(dev)

    conf = alloc_conf()
    requested = expandable_requested(conf)
    # Check that the configuration took effect: one small tensor, then look
    # at its segment. Everything is given back before the benchmark starts.
    x = torch.empty(4 << 20, dtype=torch.uint8, device="cuda")
    segs = torch.cuda.memory._snapshot()["segments"]
    flags = [s["is_expandable"] for s in segs if "is_expandable" in s]
    in_use = any(flags) if flags else None
    del x, segs
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    if in_use is not None and in_use != requested:
        print(f"torch_peer: warning: expandable segments requested={requested} but in use={in_use}",
              file=sys.stderr)

    name = "torch-expandable" if requested else "torch"
    describe = (f"PyTorch {torch.__version__} CUDA caching allocator; "
                f"PYTORCH_CUDA_ALLOC_CONF={conf!r}; expandable segments in use: "
                f"{'unknown' if in_use is None else in_use}")

    def reset_peak():
        torch.cuda.reset_peak_memory_stats(dev)

    def reserved_peak():
        return int(torch.cuda.memory_stats(dev)["reserved_bytes.all.peak"])

    def trim():
        torch.cuda.synchronize(dev)
        torch.cuda.empty_cache()

    argv = ["torch_peer", "--alloc", name, "--describe", describe] + rest
    sys.stdout.flush()
    rc = mod.run(argv, name, reset_peak, reserved_peak, trim)
    return int(rc)


if __name__ == "__main__":
    sys.exit(main())
