"""carve — the carve GPU memory allocator from Python (pure Python over ctypes).

The one idea: the functions mirror torch.cuda's memory functions
(memory_allocated, memory_reserved, max_memory_*, reset_peak_memory_stats,
empty_cache, memory_stats, memory_summary, memory_snapshot, mem_get_info),
and each takes either a device (an int, a torch.device, "cuda:N", or None for
the current device: that device's default arena, which carve.torch and
carve.cupy allocate from) or a carve.Arena. So they report on the GPU in a
program and on a HOST-backend arena in a test without a GPU.

    import carve
    carve.configure(device=0, limit="8GiB")        # before first use
    import carve.torch; carve.torch.enable()        # or carve.cupy.enable()
    ...
    print(carve.report())
    carve.plot("arena.svg")                         # after carve.record()

libcarve is found through CARVE_LIBRARY, the library `meson install` put
in place with this package, a copy beside it, the build tree of the
checkout, or the system loader (carve._lib says how); it
is loaded on first use, so `import carve` never fails for want of it.
See docs/python.md.
"""

from ._api import (MISSING_TORCH_STATS, STREAM_PER_THREAD, Arena, ArgumentTypeError, CarveError, ConfigError, OutOfMemoryError,
                   configure, current_device, device_count, dump_snapshot, empty_cache, max_memory_allocated,
                   max_memory_reserved, mem_get_info, memory_allocated, memory_reserved, memory_snapshot,
                   memory_stats, memory_summary, plot, record, report, reset_peak_memory_stats, route,
                   scoped_arena, snapshot_torch, stop_recording, version)
from ._lib import LibraryNotFoundError, library_path
from . import memory  # carve.memory._dump_snapshot and friends, after `import carve` alone

__version__ = "1.0.0"

__all__ = [
    "Arena", "STREAM_PER_THREAD", "CarveError", "ConfigError", "OutOfMemoryError", "ArgumentTypeError", "LibraryNotFoundError",
    "configure", "memory_allocated", "memory_reserved", "max_memory_allocated", "max_memory_reserved",
    "reset_peak_memory_stats", "empty_cache", "memory_stats", "memory_summary", "MISSING_TORCH_STATS",
    "memory_snapshot", "snapshot_torch", "dump_snapshot", "mem_get_info", "device_count", "current_device",
    "report", "record", "stop_recording", "plot", "route", "scoped_arena", "version", "library_path", "memory",
]
