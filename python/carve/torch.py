"""carve.torch — carve as PyTorch's CUDA allocator, and per-model arenas.

The one idea: PyTorch's CUDAPluggableAllocator calls two C functions by name
from a shared library, so the library itself is the plugin: libcarve exports
carve_torch_alloc / carve_torch_free with exactly the signatures PyTorch
calls, and they pick the arena from the calling thread (carve_route_push), so
a `with carve.torch.arena(...)` block can send one model's tensors to an arena
of its own without PyTorch knowing.

    import torch, carve, carve.torch
    carve.torch.enable(limit="60GiB")     # right after import torch, before any CUDA use
    ...
    carve.memory_allocated(), carve.max_memory_reserved()   # the numbers to use

What torch.cuda reports while carve is the allocator (PyTorch 2.11):
torch.cuda.memory_allocated, max_memory_allocated, memory_reserved,
memory_stats, memory_summary, reset_peak_memory_stats and memory_snapshot
RAISE ("CUDAPluggableAllocator does not yet support getDeviceStats"): use
carve.memory_allocated(device) and friends. torch.cuda.mem_get_info works
(it asks the driver). torch.cuda.empty_cache() calls carve (every arena's
cached memory goes back); torch.cuda.set_per_process_memory_fraction sets
carve's limit, but only before the device's first allocation (carve's limits
are fixed once an arena exists); tensor.record_stream(s) reaches
carve_record_stream.
"""

import gc

from . import _lib
from ._api import CarveError, ConfigError, _check, configure, scoped_arena

_torch = _lib.import_framework(
    "torch", "carve.torch needs PyTorch",
    "Install torch with CUDA support, or run the program unchanged under carve-run, which serves any CUDA "
    "program from carve.")

__all__ = ["enable", "is_enabled", "arena", "allocator", "set_memory_fraction"]

_HOOKS = (("set_reset_fn", "carve_torch_empty_cache"),
          ("set_memory_fraction_fn", "carve_torch_set_memory_fraction"),
          ("set_record_stream_fn", "carve_torch_record_stream"))


class _State:
    allocator = None      # the CUDAPluggableAllocator made current by enable()
    pool_allocator = None  # the one used to back MemPools (carve not current)


def _make_allocator():
    alloc = _torch.cuda.memory.CUDAPluggableAllocator(_lib.library_path(), _lib.TORCH_ALLOC, _lib.TORCH_FREE)
    inner = alloc.allocator()
    for setter, symbol in _HOOKS:
        fn = getattr(inner, setter, None)
        if fn is not None:
            fn(_lib.address(symbol))
    return alloc


def allocator():
    """The CUDAPluggableAllocator that enable() made current (None before)."""
    return _State.allocator


def is_enabled():
    """True when carve is PyTorch's current CUDA allocator in this process."""
    return _State.allocator is not None


def enable(limit=None, growth=None, device=None, initial=None, mode=None):
    """Make carve PyTorch's CUDA allocator. Call it right after `import torch`,
    before anything initializes CUDA (a CUDA tensor, torch.cuda.init(),
    torch.cuda.current_stream(), ...): PyTorch refuses to swap allocators
    afterwards, and enable() then raises CarveError saying so.

    limit / growth / initial / mode configure the default arena of device (all
    visible devices when device is None) as carve.configure does. Returns the
    torch.cuda.memory.CUDAPluggableAllocator. Calling it again is a no-op.
    """
    if _State.allocator is not None:
        return _State.allocator
    is_init = getattr(_torch.cuda, "is_initialized", None)
    if is_init is not None and is_init():
        raise CarveError(
            "carve.torch.enable() came after CUDA was initialized in this process; PyTorch cannot swap "
            "its allocator then. Call it right after `import torch`, before any CUDA tensor, "
            "torch.cuda.init() or torch.cuda.current_stream().", status="CARVE_ERR_INVALID")
    if any(v is not None for v in (limit, growth, initial, mode)):
        from ._api import device_count
        devices = [device] if device is not None else list(range(max(1, device_count())))
        for d in devices:
            configure(device=d, limit=limit, growth=growth, initial=initial, mode=mode)
    alloc = _make_allocator()
    try:
        _torch.cuda.memory.change_current_allocator(alloc)
    except RuntimeError as e:
        if "already initialized" in str(e):
            raise CarveError(
                "carve.torch.enable(): PyTorch's CUDA allocator is already initialized in this process "
                f"(torch said: {e}). Call carve.torch.enable() right after `import torch`, before "
                "anything touches CUDA.", status="CARVE_ERR_INVALID") from e
        raise
    _State.allocator = alloc
    return alloc


def set_memory_fraction(fraction, device=0):
    """carve's limit for device as a fraction of its memory, like
    torch.cuda.set_per_process_memory_fraction but raising when it cannot be
    applied (after the device's first allocation) instead of doing nothing."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
        raise ConfigError(f"fraction={fraction!r}: expected a number in (0, 1]")
    L = _lib.lib()
    st = L.carve_device_set_limit_fraction(device, float(fraction))
    _check(st, cls=ConfigError if st == _lib.ERR_INVALID else None)


class arena(scoped_arena):
    """A fresh carve arena with its own cap for a block of PyTorch code; as
    `with` or as a decorator (a fresh arena per call):

        with carve.torch.arena(limit="4GiB") as a:
            model = build().cuda(); out = model(x)
            print(a.memory_allocated())
        del model, out   # the arena closes when its last tensor is gone

    The tensors allocated inside the block by this thread live in the arena;
    a tensor over the cap raises PyTorch's out-of-memory error. After the
    block the arena is retired: closed at once when no tensor of it is alive,
    else when the last one is freed (on any thread), so the device's free
    memory returns to where it was. The cuBLAS workspaces PyTorch caches per
    stream are cleared at exit (clear_workspaces=False keeps them), since one
    made inside the block would keep the arena alive forever.

    Two ways, chosen at entry:
      - carve is the current allocator (carve.torch.enable() was called): the
        block routes this thread's allocations to the arena (carve_route_push).
        Preferred: every tensor is one carve buffer, and the arena's
        statistics are exact.
      - otherwise (PyTorch's own allocator is current): the block is a
        torch.cuda.MemPool backed by carve through a CUDAPluggableAllocator,
        inside torch.cuda.use_mem_pool. PyTorch then asks carve for whole
        segments (20 MiB and 2 MiB and up) and cuts them itself, so the arena
        counts segments, not tensors; PyTorch gives the segments back when
        the pool is deleted after its tensors (or at torch.cuda.empty_cache()),
        which is when the arena closes.
    torch.cuda.MemPool refuses a pluggable allocator while one is current
    ("pluggable does not yet support createOrIncrefPool"), hence the two ways.

    Arguments as carve.Arena (backend "cuda"; device None = the current CUDA
    device). After the block, .last_stats holds the arena's statistics at
    exit and .closed_at_exit whether it closed right away.
    """

    def __init__(self, limit=None, growth=True, initial=None, mode="default", device=None, backend="cuda",
                 name=None, conf=None, clear_workspaces=True):
        super().__init__(limit=limit, growth=growth, initial=initial, mode=mode, device=device, backend=backend,
                         name=name, conf=conf)
        self.clear_workspaces = clear_workspaces

    def _device(self):
        if self.device is not None:
            return self.device
        if self.kw["backend"] in ("cuda", "cuda_driver"):
            return _torch.cuda.current_device()
        return 0

    def _enter_hook(self, a):
        if is_enabled():
            return None
        if _State.pool_allocator is None:
            _State.pool_allocator = _make_allocator()
        pool = _torch.cuda.MemPool(_State.pool_allocator.allocator())
        ctx = _torch.cuda.use_mem_pool(pool, device=a.device)
        ctx.__enter__()
        return [pool, ctx]

    def _exit_hook(self, a, token):
        try:
            if token is not None:
                pool, ctx = token
                token[:] = []
                ctx.__exit__(None, None, None)
                del pool, ctx
                gc.collect()
        finally:
            if self.clear_workspaces:
                clear = getattr(getattr(_torch, "_C", None), "_cuda_clearCublasWorkspaces", None)
                if clear is not None:
                    clear()

