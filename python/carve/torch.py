"""carve.torch — carve as PyTorch's CUDA allocator, and per-model arenas.

The one idea: PyTorch's CUDAPluggableAllocator calls two C functions by name
from a shared library. libcarve exports carve_torch_alloc / carve_torch_free
with exactly the signatures PyTorch calls, and they pick the arena from the
calling thread (carve_route_push), so a `with carve.torch.arena(...)` block
can send one model's tensors to an arena of its own without PyTorch knowing.
PyTorch hands a tensor whatever the alloc function returns, NULL included,
and only a C++ exception stops it: so enable() compiles a small C++ file
(_torch_shim.cpp, once per torch version, cached) against the installed
torch whose alloc function raises PyTorch's own out-of-memory error with
carve's explanation, and hands PyTorch that one.

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
carve's limit before the device's first allocation and raises afterwards
(with the compiled shim; without it, it cannot raise and changes nothing);
tensor.record_stream(s) reaches carve_record_stream.

CUDA graphs (with the shim, PyTorch >= 2.3; graph_pools() tells): a capture's
allocations come from carve graph pools in the device's default arena (one
per captured stream and PyTorch pool id), private until PyTorch releases the
pool; see docs/python.md for what works.
"""

import ctypes
import gc
import hashlib
import os
import shutil
import subprocess
import threading
import warnings

from . import _lib
from ._api import CarveError, ConfigError, _check, _check_device, configure, scoped_arena

_torch = _lib.import_framework(
    "torch", "carve.torch needs PyTorch",
    "Install torch with CUDA support, or run the program unchanged under carve-run, which serves any CUDA "
    "program from carve.")

__all__ = ["enable", "is_enabled", "oom_raises", "graph_pools", "arena", "allocator", "set_memory_fraction", "build_shim"]

SHIM_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_torch_shim.cpp")
SHIM_ALLOC, SHIM_FREE = "carve_torch_shim_alloc", "carve_torch_shim_free"
# The pluggable allocator's CUDA-graph setters and the shim's hooks for them.
GRAPH_HOOKS = (("set_begin_allocate_to_pool", "carve_torch_shim_begin_pool"),
               ("set_end_allocate_to_pool_fn", "carve_torch_shim_end_pool"),
               ("set_release_pool", "carve_torch_shim_release_pool"))


class _State:
    allocator = None       # the CUDAPluggableAllocator that enable() made current
    pool_allocator = None  # the one used to back MemPools (carve not current)
    shim = None            # path of the compiled shim in use, or None (the C entry points)
    shim_error = None      # why the shim could not be had, when it could not
    lock = threading.Lock()
    device_route = {}      # device -> (thread id, depth): the blocks holding a device's route


def _cache_dir():
    d = os.environ.get("CARVE_TORCH_SHIM_DIR")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "carve")


def build_shim(torch_module=None, cache_dir=None, compiler=None):
    """Compile _torch_shim.cpp against torch's headers and libc10 (about a
    second), or find the copy built before; returns the shared library's
    path. CARVE_TORCH_SHIM names a prebuilt one instead. Raises CarveError
    (CARVE_ERR_BACKEND) with the compiler's words when it cannot be built:
    no C++ compiler (c++, g++ or $CXX), or torch without its headers."""
    prebuilt = os.environ.get("CARVE_TORCH_SHIM")
    if prebuilt:
        if not os.path.isfile(prebuilt):
            raise CarveError(f"CARVE_TORCH_SHIM={prebuilt}: no such file", status="CARVE_ERR_BACKEND")
        return prebuilt
    t = torch_module or _torch
    tdir = os.path.dirname(os.path.abspath(t.__file__))
    inc, libdir = os.path.join(tdir, "include"), os.path.join(tdir, "lib")
    if not os.path.isfile(os.path.join(inc, "c10", "util", "Exception.h")):
        raise CarveError(f"torch at {tdir} has no C++ headers (include/c10/util/Exception.h)",
                         status="CARVE_ERR_BACKEND")
    cxx = compiler or os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not cxx:
        raise CarveError("no C++ compiler (c++, g++ or $CXX) to build carve's PyTorch shim",
                         status="CARVE_ERR_BACKEND")
    abi = int(bool(getattr(getattr(t, "_C", None), "_GLIBCXX_USE_CXX11_ABI", True)))
    with open(SHIM_SOURCE, "rb") as f:
        src = f.read()
    key = hashlib.sha256(b"\0".join([src, str(getattr(t, "__version__", "")).encode(), str(abi).encode(),
                                     inc.encode(), cxx.encode()])).hexdigest()[:16]
    cache = cache_dir or _cache_dir()
    out = os.path.join(cache, f"carve_torch_shim-{key}.so")
    if os.path.isfile(out):
        return out
    os.makedirs(cache, exist_ok=True)
    tmp = f"{out}.{os.getpid()}.{threading.get_ident()}.tmp"
    cmd = [cxx, "-O2", "-std=c++17", "-shared", "-fPIC", f"-D_GLIBCXX_USE_CXX11_ABI={abi}", "-I", inc,
           SHIM_SOURCE, "-L", libdir, "-lc10", f"-Wl,-rpath,{libdir}", "-ldl", "-o", tmp]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise CarveError(f"building carve's PyTorch shim failed: {' '.join(cmd)}: {e}",
                         status="CARVE_ERR_BACKEND") from e
    if r.returncode != 0:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise CarveError(f"building carve's PyTorch shim failed (exit {r.returncode}): {' '.join(cmd)}\n"
                         f"{(r.stderr or r.stdout)[-3000:]}", status="CARVE_ERR_BACKEND")
    os.replace(tmp, out)  # atomic: another process building the same key is harmless
    return out


def _load_shim(path):
    """The shim loaded and pointed at the libcarve this package uses."""
    dll = ctypes.CDLL(path)
    dll.carve_torch_shim_init.restype = ctypes.c_int
    dll.carve_torch_shim_init.argtypes = [ctypes.c_char_p]
    if dll.carve_torch_shim_init(os.fsencode(_lib.library_path())) != 0:
        raise CarveError(f"carve's PyTorch shim {path} cannot find libcarve's functions in "
                         f"{_lib.library_path()}", status="CARVE_ERR_BACKEND")
    return dll


def _make_allocator(shim):
    """A CUDAPluggableAllocator over the shim (when given) or libcarve's C
    entry points, with carve's hooks set."""
    if shim:
        dll = _load_shim(shim)
        alloc = _torch.cuda.memory.CUDAPluggableAllocator(shim, SHIM_ALLOC, SHIM_FREE)
        fraction = ctypes.cast(dll.carve_torch_shim_set_fraction, ctypes.c_void_p).value
    else:
        alloc = _torch.cuda.memory.CUDAPluggableAllocator(_lib.library_path(), _lib.TORCH_ALLOC, _lib.TORCH_FREE)
        fraction = _lib.address("carve_torch_set_memory_fraction")
    inner = alloc.allocator()
    for setter, address in (("set_reset_fn", _lib.address("carve_torch_empty_cache")),
                            ("set_memory_fraction_fn", fraction),
                            ("set_record_stream_fn", _lib.address("carve_torch_record_stream"))):
        fn = getattr(inner, setter, None)
        if fn is not None:
            fn(address)
    # CUDA graphs (PyTorch >= 2.3): the hooks take a C++ std::function, so
    # only the shim has them.
    if shim and all(hasattr(inner, setter) for setter, _ in GRAPH_HOOKS):
        for setter, name in GRAPH_HOOKS:
            getattr(inner, setter)(ctypes.cast(getattr(dll, name), ctypes.c_void_p).value)
        alloc._carve_graph_pools = True
    return alloc


def _shim_for(raise_oom):
    """The shim's path for enable()'s raise_oom, or None for the C entry points."""
    if raise_oom is False:
        return None
    try:
        return build_shim()
    except CarveError as e:
        _State.shim_error = str(e)
        if raise_oom:
            raise
        warnings.warn("carve.torch: out-of-memory cannot be raised as torch.cuda.OutOfMemoryError here, so a "
                      "tensor past carve's limit gets a NULL data pointer (its first use fails with an illegal "
                      f"memory access). Why: {e}. Install a C++ compiler (g++), or pass raise_oom=False to "
                      "accept this.", RuntimeWarning, stacklevel=3)
        return None


def allocator():
    """The CUDAPluggableAllocator that enable() made current (None before)."""
    return _State.allocator


def is_enabled():
    """True when carve is PyTorch's current CUDA allocator in this process."""
    return _State.allocator is not None


def graph_pools():
    """True when CUDA graphs captured while carve is the allocator
    (torch.cuda.graph, torch.compile(mode="reduce-overhead")) keep their
    memory in carve graph pools: the compiled shim is in use and this
    PyTorch (2.3 or later) has the pluggable allocator's graph-pool hooks.
    False otherwise: a capture then takes memory from its stream's ordinary
    cache, which is handed out again after the capture."""
    return _State.allocator is not None and getattr(_State.allocator, "_carve_graph_pools", False)


def failed_frees():
    """How many frees PyTorch (or CuPy) handed carve that carve could not
    make since the process started: memory the framework believes given
    back that carve still counts live (carve.memory_allocated stays up).
    0 in a healthy program; carve_last_error on the freeing thread said why."""
    return int(_lib.lib().carve_frameworks_failed_frees())


def oom_raises():
    """True when an allocation carve cannot serve raises
    torch.cuda.OutOfMemoryError (the compiled shim is in use); False when it
    gives PyTorch a NULL pointer (see enable's raise_oom)."""
    return _State.shim is not None


def enable(limit=None, growth=None, device=None, initial=None, mode=None, raise_oom=None):
    """Make carve PyTorch's CUDA allocator. Call it right after `import torch`,
    before anything initializes CUDA (a CUDA tensor, torch.cuda.init(),
    torch.cuda.current_stream(), ...): PyTorch refuses to swap allocators
    afterwards, and enable() then raises CarveError saying so.

    limit / growth / initial / mode configure the default arena of device (all
    visible devices when device is None) as carve.configure does.

    raise_oom: None (default) compiles carve's shim (build_shim: needs a C++
    compiler; about a second, once per torch version) so that an allocation
    carve cannot serve raises torch.cuda.OutOfMemoryError with carve's
    explanation, and falls back to libcarve's C entry points with a
    RuntimeWarning when it cannot; True insists (raises CarveError when the
    shim cannot be built); False uses the C entry points, where PyTorch
    turns carve's NULL into a tensor with a NULL data pointer (the floor:
    PyTorch's pluggable allocator does not check). oom_raises() tells which.

    Also sets inductor's cudagraph_trees and slow_path_cudagraph_asserts to
    False: with CUDA graph trees, torch.compile(mode="reduce-overhead") asks
    the allocator for pool checkpoints PyTorch's pluggable interface cannot
    give, and would fail at its first call; without them each compiled
    function is captured with torch.cuda.graph into a pool of its own.

    Returns the torch.cuda.memory.CUDAPluggableAllocator. Calling it again is
    a no-op.
    """
    if _State.allocator is not None:
        return _State.allocator
    is_init = getattr(_torch.cuda, "is_initialized", None)
    if is_init is not None and is_init():
        raise CarveError(
            "carve.torch.enable() came after CUDA was initialized in this process; PyTorch cannot swap "
            "its allocator then. Call it right after `import torch`, before any CUDA tensor, "
            "torch.cuda.init() or torch.cuda.current_stream().", status="CARVE_ERR_INVALID")
    if raise_oom not in (None, True, False):
        raise ConfigError(f"raise_oom={raise_oom!r}: expected None, True or False")
    if any(v is not None for v in (limit, growth, initial, mode)):
        from ._api import device_count
        devices = [_check_device(device)] if device is not None else list(range(max(1, device_count())))
        for d in devices:
            configure(device=d, limit=limit, growth=growth, initial=initial, mode=mode)
    shim = _shim_for(raise_oom)
    alloc = _make_allocator(shim)
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
    _State.shim = shim
    _inductor_checks_off()
    return alloc


def _inductor_checks_off():
    """torch.compile(mode="reduce-overhead") with inductor's CUDA graph
    trees (its default) asks the allocator two things PyTorch's pluggable
    interface cannot answer: which blocks of a graph pool are live (with
    slow_path_cudagraph_asserts on, its default: "pluggable does not yet
    support checkPoolLiveAllocations") and the pool's checkpointed state, to
    share one pool among the graphs of a tree ("CUDAPluggableAllocator does
    not yet support getCheckpointState"); either fails the first compiled
    call. Inductor's other way to graph a compiled function, one
    torch.cuda.graph capture per function with its own pool, asks neither:
    use it, and leave the debugging check off."""
    try:
        import torch._inductor.config as ic
        ic.triton.cudagraph_trees = False
        ic.triton.slow_path_cudagraph_asserts = False
    except Exception:  # no inductor in this torch: nothing to set
        pass


def set_memory_fraction(fraction, device=None):
    """carve's limit for device as a fraction of its memory, like
    torch.cuda.set_per_process_memory_fraction but raising whenever it cannot
    be applied (after the device's first allocation: carve fixes a limit when
    the arena is made)."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
        raise ConfigError(f"fraction={fraction!r}: expected a number in (0, 1]")
    L = _lib.lib()
    st = L.carve_device_set_limit_fraction(_check_device(device), float(fraction))
    _check(st, cls=ConfigError if st == _lib.ERR_INVALID else None)


class arena(scoped_arena):
    """A fresh carve arena with its own cap for a block of PyTorch code; as
    `with` or as a decorator (a fresh arena per call):

        with carve.torch.arena(limit="4GiB") as a:
            model = build().cuda(); out = model(x); out.sum().backward()
            print(a.max_memory_allocated())     # forward and backward
        del model, out   # the arena closes when its last tensor is gone

    The tensors allocated inside the block live in the arena; one over the
    cap raises torch.cuda.OutOfMemoryError (carve's explanation in its
    message). After the block the arena is retired: closed at once when no
    tensor of it is alive, else when the last one is freed (on any thread),
    so the device's free memory returns to where it was; a tensor that
    outlives the block keeps its memory until then. The cuBLAS workspaces
    PyTorch caches per stream are cleared at exit (clear_workspaces=False
    keeps them), since one made inside the block would keep the arena alive
    forever.

    Two ways, chosen at entry:
      - carve is the current allocator (carve.torch.enable() was called): the
        block routes this thread's allocations to the arena (carve_route_push)
        and, with backward=True (the default), also the device's allocations
        from threads that route nowhere (carve_route_device), which is where
        PyTorch runs backward: its autograd threads. So the arena's cap and
        statistics cover forward and backward. Other threads' allocations on
        the device that route nowhere land there too while the block runs;
        when another thread's block already holds the device's route, this
        block routes its own thread only (.routes_backward is then False).
        Every tensor is one carve buffer, and the statistics are exact.
      - otherwise (PyTorch's own allocator is current): the block is a
        torch.cuda.MemPool backed by carve through a CUDAPluggableAllocator,
        inside torch.cuda.use_mem_pool. PyTorch then asks carve for whole
        segments (20 MiB and 2 MiB and up) and cuts them itself, so the arena
        counts segments, not tensors; PyTorch gives the segments back when
        the pool is deleted after its tensors (or at torch.cuda.empty_cache()),
        which is when the arena closes. use_mem_pool routes the calling thread
        only: backward's allocations on autograd's threads are not in the
        pool (PyTorch's own limit).
    torch.cuda.MemPool refuses a pluggable allocator while one is current
    ("pluggable does not yet support createOrIncrefPool"), hence the two ways.

    Arguments as carve.Arena (backend "cuda"; device None = the current CUDA
    device). After the block, .last_stats holds the arena's statistics at
    exit, .closed_at_exit whether it closed right away, .routes_backward
    whether autograd's threads were routed to it.

    The routing is per thread: coroutines sharing a thread (asyncio) must
    not hold the block across an await while others allocate or enter blocks
    of their own (their tensors would land here, and blocks left out of
    order pop each other's arenas); see carve.scoped_arena.
    """

    def __init__(self, limit=None, growth=True, initial=None, mode="default", device=None, backend="cuda",
                 name=None, conf=None, clear_workspaces=True, backward=True):
        super().__init__(limit=limit, growth=growth, initial=initial, mode=mode, device=device, backend=backend,
                         name=name, conf=conf)
        self.clear_workspaces = clear_workspaces
        self.backward = backward
        self.routes_backward = None

    def _device(self):
        if self.device is not None:
            return _check_device(self.device)
        if self.kw["backend"] in ("cuda", "cuda_driver"):
            return _torch.cuda.current_device()
        return 0

    def _take_device_route(self, a):
        """Make a the route of its device's unrouted threads when no other
        thread's block holds it: (the route it replaced,), or None when it
        did not."""
        if not self.backward:
            return None
        L = _lib.lib()
        me = threading.get_ident()
        with _State.lock:
            holder = _State.device_route.get(a.device)
            if holder is not None and holder[0] != me:
                return None
            prev = L.carve_route_device_current(a.device)
            _check(L.carve_route_device(a.device, prev, a._handle()))
            _State.device_route[a.device] = (me, (holder[1] if holder else 0) + 1)
            return (prev,)

    def _give_device_route(self, a, prev):
        L = _lib.lib()
        with _State.lock:
            st = L.carve_route_device(a.device, a._handle(), prev)
            me, depth = _State.device_route[a.device]
            if depth > 1:
                _State.device_route[a.device] = (me, depth - 1)
            else:
                del _State.device_route[a.device]
        _check(st)

    def _enter_hook(self, a):
        if is_enabled():
            taken = self._take_device_route(a)
            self.routes_backward = taken is not None
            return ["route", taken[0]] if taken else None
        self.routes_backward = False
        if _State.pool_allocator is None:
            _State.pool_allocator = _make_allocator(_State.shim or _shim_for(None))
        pool = _torch.cuda.MemPool(_State.pool_allocator.allocator())
        ctx = _torch.cuda.use_mem_pool(pool, device=a.device)
        ctx.__enter__()
        return [pool, ctx]

    def _exit_hook(self, a, token):
        try:
            if token is not None and token[0] == "route":
                self._give_device_route(a, token[1])
            elif token is not None:
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
