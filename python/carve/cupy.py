"""carve.cupy — carve as CuPy's device memory allocator, and per-block arenas.

The one idea: CuPy takes any callable size -> cupy.cuda.MemoryPointer as its
allocator, and wraps foreign memory with cupy.cuda.UnownedMemory, which keeps
an owner object alive for as long as CuPy uses the memory. carve's callable
allocates on CuPy's current stream and device (passed explicitly, so CuPy
never has to ask the driver whose pointer it is), and the owner's finalizer
frees the buffer, on whatever thread drops the last array. Allocation goes
through the same routing as carve.torch, so `with carve.cupy.arena(...)`
gives a block of code an arena of its own.

    import cupy, carve, carve.cupy
    carve.cupy.enable(limit="8GiB")       # any time; arrays made before stay where they are
    ...
    carve.memory_allocated()               # CuPy's pool counters no longer see these arrays

enable(c_allocator=True) uses CuPy's C allocator interface instead
(cupy.cuda.CFunctionAllocator over carve_cupy_malloc / carve_cupy_free): no
Python per allocation, but the stream is fixed when it is made (CuPy's C
interface carries none).
"""

import ctypes

from . import _lib
from ._api import CarveError, _check, _stream_ptr, configure, scoped_arena

_cupy = _lib.import_framework(
    "cupy", "carve.cupy needs CuPy",
    "Install the cupy package matching your CUDA (e.g. cupy-cuda13x), or run the program unchanged under "
    "carve-run.")

__all__ = ["enable", "disable", "is_enabled", "malloc", "arena"]


class _State:
    enabled = False
    previous = None   # CuPy's allocator before enable()
    c_alloc = None    # the CFunctionAllocator, kept alive while current


class _Buffer:
    """The owner CuPy keeps alive while it uses a carve buffer; frees it when dropped."""

    __slots__ = ("ptr", "device")

    def __init__(self, ptr, device):
        self.ptr = ptr
        self.device = device

    def __del__(self):
        try:
            _lib.lib().carve_route_free(self.ptr, self.device)
        except Exception:  # interpreter shutdown
            pass


def _oom(size, device, message):
    """CuPy's own out-of-memory error (so CuPy code that catches it works),
    chained to carve's explanation."""
    L = _lib.lib()
    h = L.carve_route_current()
    if not h:
        p = ctypes.c_void_p()
        if L.carve_device_arena(device, ctypes.byref(p)) == _lib.OK:
            h = p.value
    reserved, limit = (L.carve_memory_reserved(h), 0) if h else (0, 0)
    if h:
        s = _lib.CarveStats()
        if L.carve_get_stats_sized(h, ctypes.byref(s), ctypes.sizeof(s)) == _lib.OK and s.limit_bytes != ctypes.c_size_t(-1).value:
            limit = s.limit_bytes
    err_type = getattr(getattr(_cupy.cuda, "memory", None), "OutOfMemoryError", None)
    cause = CarveError(message, status="CARVE_ERR_OOM")
    if err_type is None:
        return cause
    err = err_type(size, reserved, limit)
    err.__cause__ = cause
    try:
        err.status = "CARVE_ERR_OOM"  # as every error the package raises
    except AttributeError:
        pass
    return err


def malloc(size):
    """CuPy's allocator interface: size -> cupy.cuda.MemoryPointer, from the
    arena this thread routes to or the current device's default arena, on
    CuPy's current stream."""
    device = _cupy.cuda.runtime.getDevice()
    if size == 0:
        return _cupy.cuda.MemoryPointer(_cupy.cuda.UnownedMemory(0, 0, None, device), 0)
    stream = _stream_ptr(_cupy.cuda.get_current_stream().ptr)
    L = _lib.lib()
    p = ctypes.c_void_p()
    st = L.carve_route_alloc(None, size, device, stream, ctypes.byref(p))
    if st == _lib.ERR_OOM:
        raise _oom(size, device, L.carve_last_error(None).decode(errors="replace"))
    _check(st)
    mem = _cupy.cuda.UnownedMemory(p.value, size, _Buffer(p.value, device), device)
    return _cupy.cuda.MemoryPointer(mem, 0)


def is_enabled():
    return _State.enabled


def enable(limit=None, growth=None, device=None, initial=None, mode=None, c_allocator=False, stream=None):
    """Make carve CuPy's allocator (cupy.cuda.set_allocator) for this process.

    limit / growth / initial / mode configure the default arena of device (the
    current CuPy device when None) as carve.configure does; that must come
    before the arena's first use. c_allocator=True: CuPy's C interface, no
    Python per allocation, every allocation on `stream` (default: the default
    stream). CuPy's per-thread default stream (CUPY_CUDA_PER_THREAD_DEFAULT_STREAM)
    is each thread's own stream to carve (cudaStreamPerThread). Raises ValueError inside a
    cupy.cuda.using_allocator block (CuPy's rule)."""
    if any(v is not None for v in (limit, growth, initial, mode)):
        configure(device=_cupy.cuda.runtime.getDevice() if device is None else device, limit=limit, growth=growth,
                  initial=initial, mode=mode)
    if not _State.enabled:
        get = getattr(_cupy.cuda, "get_allocator", None)
        _State.previous = get() if get is not None else None
    if c_allocator:
        cls = getattr(_cupy.cuda, "CFunctionAllocator", None) or _cupy.cuda.memory.CFunctionAllocator
        ca = cls(_stream_ptr(stream) or 0, _lib.address("carve_cupy_malloc"), _lib.address("carve_cupy_free"),
                 _lib.lib())
        _cupy.cuda.set_allocator(ca.malloc)
        _State.c_alloc = ca
    else:
        _cupy.cuda.set_allocator(malloc)
        _State.c_alloc = None
    _State.enabled = True


def disable():
    """Give CuPy back the allocator it had before enable(). Arrays made while
    carve was current stay in carve and are freed there."""
    if not _State.enabled:
        return
    _cupy.cuda.set_allocator(_State.previous)
    _State.enabled = False
    _State.c_alloc = None


class arena(scoped_arena):
    """A fresh carve arena with its own cap for a block of CuPy code (carve must
    be CuPy's allocator: carve.cupy.enable()); as `with` or as a decorator:

        with carve.cupy.arena(limit="2GiB") as a:
            x = cupy.ones((1 << 20,)); ...
        del x   # the arena closes when its last array is gone

    Arguments as carve.Arena (backend "cuda"; device None = CuPy's current
    device)."""

    def _device(self):
        if self.device is not None:
            return self.device
        if self.kw["backend"] in ("cuda", "cuda_driver"):
            return _cupy.cuda.runtime.getDevice()
        return 0

    def _enter_hook(self, a):
        if not _State.enabled:
            raise CarveError("carve.cupy.arena needs carve as CuPy's allocator: call carve.cupy.enable() first",
                             status="CARVE_ERR_INVALID")
        return None
