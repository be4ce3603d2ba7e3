"""common.py — what the GPU scripts share: the allocator mode a run uses,
its peak-memory numbers, determinism settings, and the JSON each script
writes for run_all.py to compare.

The one idea: every comparison (carve against PyTorch's allocator, with and
without expandable segments; carve against CuPy's pool) runs the same script
in separate processes that differ only in --mode, because the allocator can
only be chosen before CUDA starts. The mode is applied here, before torch
is imported, and the numbers a mode can report are read here, from carve
when carve is the allocator (torch.cuda.memory_* raise then) and from torch
otherwise.
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PYROOT = os.path.dirname(os.path.dirname(HERE))
if PYROOT not in sys.path:
    sys.path.insert(0, PYROOT)

# carve: carve's default mode (virtual-memory mode on a GPU that supports it);
# carve-segments: cudaMalloc segments (mode="segments"); default and
# expandable: PyTorch's own allocator, plain and with expandable segments.
MODES = ("carve", "carve-segments", "default", "expandable")


def is_carve(mode):
    return mode.startswith("carve")


def args(description, modes=MODES, **extra):
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--mode", choices=modes, required=True)
    ap.add_argument("--out", required=True, help="JSON file to write the result to")
    for name, (kind, default, help_) in extra.items():
        ap.add_argument("--" + name.replace("_", "-"), type=kind, default=default, help=help_)
    return ap.parse_args()


def torch_for(mode):
    """Import torch with the allocator of mode in place (before CUDA starts)."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    if mode == "expandable":
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    else:
        os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    import torch
    if is_carve(mode):
        import carve.torch
        carve.torch.enable(mode="segments" if mode == "carve-segments" else None)
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True, warn_only=True)
    return torch


def reset_peaks(torch, mode):
    torch.cuda.synchronize()
    if is_carve(mode):
        import carve
        carve.reset_peak_memory_stats(0)
    else:
        torch.cuda.reset_peak_memory_stats()


def peaks(torch, mode):
    """(peak allocated, peak reserved) bytes of device 0 by the allocator in use."""
    torch.cuda.synchronize()
    if is_carve(mode):
        import carve
        return carve.max_memory_allocated(0), carve.max_memory_reserved(0)
    return torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()


def levels(torch, mode):
    """Memory of device 0 now: allocated and reserved bytes by the allocator
    in use (carve's own numbers when carve is), what torch.cuda.memory_allocated
    says (None under carve, where it raises) and the driver's free bytes."""
    torch.cuda.synchronize()
    free, _ = torch.cuda.mem_get_info()
    if is_carve(mode):
        import carve
        allocated, reserved = carve.memory_allocated(0), carve.memory_reserved(0)
        try:
            from_torch = torch.cuda.memory_allocated()
        except RuntimeError:
            from_torch = None
    else:
        allocated, reserved = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
        from_torch = allocated
    level = {"allocated": allocated, "reserved": reserved, "torch_allocated": from_torch, "driver_free": free}
    if is_carve(mode):  # what a level that does not come back is made of
        import carve
        s = carve.memory_stats(0)
        level.update({k: s.get(k) for k in ("num_live", "num_allocs", "num_frees", "num_ooms")})
        import carve.torch
        level["failed_frees"] = carve.torch.failed_frees()
    return level


def write(path, result):
    result.setdefault("python", sys.version.split()[0])
    with open(path, "w") as f:
        json.dump(result, f, indent=1)


def now():
    return time.perf_counter()
