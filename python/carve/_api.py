"""carve._api — the package's functions: arenas, the per-device memory
functions shaped like torch.cuda's, configuration, recording and pictures.

The one idea: every function takes "which arena" the same way. A device (an
int, a torch.device, "cuda:1", or None for the current device) means that
device's process-wide default arena (the one carve.torch and carve.cupy
allocate from when nothing is routed); an Arena object means itself. So the
same calls that report on a GPU's memory report on a HOST-backend arena in a
test, and everything but the device queries can be exercised without a GPU.
Asking about a device never creates its default arena: before its first
allocation the answers are zeros, and configure() and PyTorch's memory
fraction still apply.
"""

import contextlib
import ctypes
import json
import os
import pickle
import sys
import tempfile
import threading
import weakref

from . import _lib
from ._lib import lib

__all__ = [
    "CarveError", "OutOfMemoryError", "ConfigError", "Arena", "configure", "memory_allocated",
    "memory_reserved", "max_memory_allocated", "max_memory_reserved", "reset_peak_memory_stats",
    "empty_cache", "memory_stats", "memory_summary", "memory_snapshot", "snapshot_torch", "dump_snapshot",
    "mem_get_info", "device_count", "current_device", "report", "record", "stop_recording", "plot", "route",
    "scoped_arena", "version",
]


# ---- Errors ----------------------------------------------------------------

class CarveError(RuntimeError):
    """A carve call failed. .status is the C status name (e.g. "CARVE_ERR_OOM"):
    carve's own when the C library failed, else the one that names the
    failure ("CARVE_ERR_INVALID" for a wrong argument or state,
    "CARVE_ERR_BACKEND" for a tool or file carve could not use)."""

    default_status = "CARVE_ERR_INVALID"

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status or self.default_status


class OutOfMemoryError(CarveError):
    """An allocation did not fit under the arena's limit or in the device."""

    default_status = "CARVE_ERR_OOM"


class ConfigError(CarveError, ValueError):
    """A value is malformed or out of range (a configuration, a size, an
    address, a device), or a configuration came too late."""


class ArgumentTypeError(ConfigError, TypeError):
    """An argument of the wrong type (also a TypeError)."""


def _file_error(err):
    """err, an OSError from a file carve could not use, given .status (as
    every error the package raises)."""
    err.status = "CARVE_ERR_BACKEND"
    return err


_STATUS_NAMES = {0: "CARVE_OK", 1: "CARVE_ERR_INVALID", 2: "CARVE_ERR_OOM", 3: "CARVE_ERR_BAD_POINTER",
                 4: "CARVE_ERR_BACKEND", 5: "CARVE_ERR_NO_DEVICE"}


def _check(status, handle=None, cls=None, context=None):
    """Raise the error for a failed status, with carve's own explanation."""
    if status == _lib.OK:
        return
    msg = lib().carve_last_error(handle).decode(errors="replace")
    name = _STATUS_NAMES.get(status, f"status {status}")
    if cls is None:
        cls = OutOfMemoryError if status == _lib.ERR_OOM else CarveError
    text = msg or name
    if context and not text.startswith(context + ":"):  # carve's message may name it already
        text = f"{context}: {text}"
    raise cls(f"{text} [{name}]", status=name)


# ---- Values ----------------------------------------------------------------

# ctypes wraps an int that does not fit its C type without a word (2**64 + 4096
# becomes 4096), so every int handed to C is checked against its type here,
# in _c_uint: ArgumentTypeError (a TypeError) for anything but an int,
# ConfigError (a ValueError) out of range, both with .status.
_SIZE_MAX = ctypes.c_size_t(-1).value
_PTR_MAX = (1 << (8 * ctypes.sizeof(ctypes.c_void_p))) - 1
_GRANULE = 2 << 20
STREAM_PER_THREAD = 2  # cudaStreamPerThread: the calling thread's per-thread default stream
_INT_MAX = (1 << (8 * ctypes.sizeof(ctypes.c_int) - 1)) - 1


def _c_uint(value, name, limit, what):
    """value, an int in [0, limit]; else an error naming name, the value and the rule."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(f"{name}={value!r}: {what} is an int")
    if not 0 <= value <= limit:
        raise ConfigError(f"{name}={value}: {what} is an int from 0 to {limit}")
    return value


def _bool(value, name):
    """value, True or False (None is "not given" where the caller allows it);
    anything else is refused: growth="false" is truthy."""
    if not isinstance(value, bool):
        raise ArgumentTypeError(f"{name}={value!r}: expected True or False")
    return value


def _size_text(value, key):
    """The text carve's parser takes for a size or fraction given in Python."""
    if isinstance(value, bool):
        raise ConfigError(f"{key}={value!r}: give a size in bytes (int), a string such as '8GiB', "
                          f"or a fraction of the device's memory in (0, 1]")
    if isinstance(value, int):
        if value < 0:
            raise ConfigError(f"{key}={value}: a size cannot be negative")
        return str(value)
    if isinstance(value, float):
        if not 0 < value <= 1:
            raise ConfigError(f"{key}={value!r}: a float is a fraction of the device's memory and must be "
                              f"in (0, 1]; give bytes as an int or a string such as '8GiB'")
        text = f"{value:.17f}".rstrip("0")
        return text + "0" if text.endswith(".") else text
    if isinstance(value, str):
        v = value.strip()
        if not v or any(c in v for c in ",;=:"):
            raise ConfigError(f"{key}={value!r} is not a size (e.g. '8GiB', '1.5 GB', 123) "
                              f"or a fraction (e.g. 0.5)")
        return v
    raise ConfigError(f"{key}={value!r}: give a size in bytes (int), a string such as '8GiB', "
                      f"or a fraction in (0, 1]")


def _size_bytes(value, key):
    """Bytes from an int or a size string ('4GiB', '1.5 GB'), by carve's own
    parser; fractions are refused (the caller wants bytes)."""
    text = _size_text(value, key)
    if "." in text and not any(c.isalpha() for c in text):
        raise ConfigError(f"{key}={value!r}: give bytes (an int or a size such as '8GiB'), not a fraction")
    cfg = _parse_config(f"limit={text}")
    return cfg.limit_bytes


def _mode_vmm(mode):
    """The carve_config_parse value of vmm for a mode name."""
    if mode in ("default", None):
        return "auto"
    if mode == "vmm":
        return 1
    if mode == "segments":
        return 0
    raise ConfigError(f"mode={mode!r}: expected 'default', 'vmm' or 'segments'")


def _parse_config(text, cfg=None):
    """A carve_config with text applied by carve_config_parse (errors name the value)."""
    L = lib()
    if "\0" in text:  # C would read the text only up to it
        raise ConfigError(f"{text!r}: a configuration holds no NUL character")
    if cfg is None:
        cfg = _lib.CarveConfig()
        L.carve_config_init_sized(ctypes.byref(cfg), ctypes.sizeof(cfg))
    _check(L.carve_config_parse(ctypes.byref(cfg), text.encode()), cls=ConfigError)
    return cfg


def _stream_ptr(stream):
    """A stream handle from None, an int, or a framework stream object."""
    if stream is None:
        return None
    if isinstance(stream, int) and not isinstance(stream, bool):
        return _c_uint(stream, "stream", _PTR_MAX, "a stream handle") or None
    for attr in ("cuda_stream", "ptr", "handle"):
        v = getattr(stream, attr, None)
        if isinstance(v, int) and not isinstance(v, bool):
            return _c_uint(v, f"stream.{attr}", _PTR_MAX, "a stream handle") or None
    raise ArgumentTypeError(f"stream={stream!r}: give an int handle or a stream object (.cuda_stream or .ptr)")


def current_device():
    """The current CUDA device as the framework in use sees it: PyTorch's
    (once CUDA is initialized: asking never initializes it), else CuPy's,
    else 0."""
    t = sys.modules.get("torch")
    cuda = getattr(t, "cuda", None)
    try:
        if cuda is not None and cuda.is_initialized():
            return int(cuda.current_device())
    except Exception:  # a broken or partial torch: fall through
        pass
    c = sys.modules.get("cupy")
    try:
        if c is not None:
            return int(c.cuda.runtime.getDevice())
    except Exception:
        pass
    return 0


def _path(path, name="path"):
    """A file path handed to C, which would cut it at a NUL character."""
    try:
        b = os.fsencode(path)
    except TypeError:
        raise ArgumentTypeError(f"{name}={path!r}: a path is a str, bytes or os.PathLike") from None
    if b"\0" in b:
        raise ConfigError(f"{name}={path!r}: a path holds no NUL character")
    return b


def _ptr(ptr, name="ptr"):
    """A buffer address handed to C."""
    return _c_uint(ptr, name, _PTR_MAX, "an address")


def _check_device(device):
    """A device index from what torch.cuda takes: an int, a torch.device (or
    anything with .type and .index), "cuda", "cuda:N", or None (the current
    device)."""
    if device is None:
        return current_device()
    if isinstance(device, bool):
        raise ArgumentTypeError(f"device={device!r}: a device is an int >= 0, a torch.device or 'cuda:N'")
    if isinstance(device, int):
        return _c_uint(device, "device", _INT_MAX, "a device")
    if isinstance(device, str):
        text = device.strip()
        kind, _, index = text.partition(":")
        if kind == "cuda" and not index:
            return current_device()
        if kind == "cuda" and index.isdigit() and index.isascii():
            return _c_uint(int(index), "device", _INT_MAX, "a device")
        raise ConfigError(f"device={device!r}: expected 'cuda' or 'cuda:N'")
    kind, index = getattr(device, "type", None), getattr(device, "index", False)
    if kind is not None and index is not False:
        if kind != "cuda":
            raise ConfigError(f"device={device!r}: carve serves CUDA devices, not {kind!r}")
        return current_device() if index is None else _check_device(int(index))
    raise ArgumentTypeError(f"device={device!r}: a device is an int >= 0, a torch.device or 'cuda:N'")


def _fmt(n):
    if n == (1 << 64) - 1 or n == ctypes.c_size_t(-1).value:
        return "unlimited"
    buf = ctypes.create_string_buffer(32)
    return lib().carve_format_bytes(buf, 32, n).decode()


# ---- Arenas ----------------------------------------------------------------

_BACKENDS = {"cuda": _lib.BACKEND_CUDA, "host": _lib.BACKEND_HOST, "virtual": _lib.BACKEND_VIRTUAL,
             "cuda_driver": _lib.BACKEND_CUDA_DRIVER}


class Arena:
    """An arena of its own: its own cap, its own statistics, closed on demand.

        a = carve.Arena(backend="host", limit="64MiB")   # no GPU needed
        p = a.alloc(1 << 20)
        a.free(p)
        a.close()                # or: with carve.Arena(...) as a: ...

    backend: "cuda" (device memory on device), "host" (real host memory, for
    tests), "virtual" (addresses only), "cuda_driver". limit / initial: bytes
    (int), a size string ("8GiB", "1.5 GB") or a fraction of the device's
    memory (0.5; CUDA only). growth: reserve segments on demand (True) or hold
    one block of `initial` (False). mode: "default" (virtual-memory mode where
    the device supports it, growth is on and initial is 0; else segments),
    "vmm" (virtual-memory mode) or "segments" (cudaMalloc segments;
    docs/cuda.md). conf: more carve_config_parse keys, e.g. "min_grow=64MiB".
    Errors name the offending value.
    """

    def __init__(self, backend="cuda", device=None, limit=None, growth=True, initial=None, mode="default",
                 name=None, conf=None):
        if not isinstance(backend, str) or backend not in _BACKENDS:
            raise ConfigError(f"backend={backend!r}: expected one of {', '.join(_BACKENDS)}")
        if device is None and backend not in ("cuda", "cuda_driver"):
            device = 0
        device = _check_device(device)
        if name is not None and (not isinstance(name, str) or "\0" in name):
            raise ConfigError(f"name={name!r}: a name is a str without NUL characters")
        if conf is not None and not isinstance(conf, str):
            raise ArgumentTypeError(f"conf={conf!r}: give more configuration as a str, e.g. 'min_grow=64MiB'")
        parts = [f"backend={backend}", f"device={device}", f"growth={1 if _bool(growth, 'growth') else 0}",
                 f"vmm={_mode_vmm(mode)}"]
        if limit is not None:
            parts.append("limit=" + _size_text(limit, "limit"))
        if initial is not None:
            parts.append("initial=" + _size_text(initial, "initial"))
        if conf:
            parts.append(conf)
        cfg = _parse_config(",".join(parts))
        self._name = (name or "").encode() or None
        cfg.name = self._name
        h = ctypes.c_void_p()
        _check(lib().carve_arena_create(ctypes.byref(cfg), ctypes.byref(h)), cls=None)
        self._h = h.value
        self._retired_h = None  # the handle while retired: its live buffers may still be freed
        self.device = device
        self.backend = backend
        self._state = "open"
        self._lock = threading.RLock()
        _arenas.add(self)

    # -- lifetime
    def _handle(self):
        if self._h is None:
            raise CarveError(f"arena is {self._state}", status="CARVE_ERR_INVALID")
        return self._h

    @property
    def closed(self):
        """True once close() or retire() was called (its memory may still be held
        by live buffers: see .state)."""
        return self._h is None

    @property
    def state(self):
        """"open"; "closed" (destroyed, all memory back); "retired" (closed
        while buffers were live: destroyed by the free of its last buffer,
        wherever that is freed; the state stays "retired" then)."""
        return self._state

    def close(self):
        """Close the arena without ever freeing memory a live buffer holds
        (as torch.cuda.MemPool keeps its memory until its tensors die): when
        it holds no live buffer it is destroyed now and close() returns True;
        else it is retired (returns False), and the free of its last buffer,
        on whatever thread, destroys it. Raises CarveError
        (CARVE_ERR_INVALID) while the calling thread still routes to it
        (leave carve.route(arena) first) or it is a device's route. Afterwards
        the object serves only free() of the buffers still live in it.
        Idempotent."""
        with self._lock:
            if self._h is None:
                return self._state == "closed"
            done = ctypes.c_int(0)
            _check(lib().carve_route_retire(self._h, ctypes.byref(done)))
            self._retired_h = None if done.value else self._h
            self._h = None
            self._state = "closed" if done.value else "retired"
            return bool(done.value)

    def retire(self):
        """The same as close(): True when destroyed now, False when the free of
        its last buffer will destroy it."""
        return self.close()

    def __enter__(self):
        self._handle()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            if getattr(self, "_h", None) is not None:
                self.close()
        except Exception:  # interpreter shutdown, or still routed: nothing to do
            pass

    def __repr__(self):
        if self._h is None:
            return f"<carve.Arena {self._state}>"
        return (f"<carve.Arena {self.backend} device {self.device}: {_fmt(self.memory_allocated())} allocated, "
                f"{_fmt(self.memory_reserved())} reserved>")

    # -- buffers (mostly for tests and tools: frameworks allocate through routing)
    def alloc(self, size, stream=None, align=None):
        """Allocate size bytes on stream (an int handle or stream object; None =
        the default stream; STREAM_PER_THREAD the calling thread's per-thread
        default stream); returns the address as an int (0 for size 0).
        align: a power of two up to 2 MiB the address is a multiple of (None:
        carve's 256 bytes; carve_alloc_aligned). Recorded when carve.record()
        is on (aligned allocations are not)."""
        _c_uint(size, "size", _SIZE_MAX, "a size")
        p = ctypes.c_void_p()
        if align is not None:
            _c_uint(align, "align", _SIZE_MAX, "an alignment")
            if align & (align - 1) or align > _GRANULE:
                raise ConfigError(f"align={align}: a power of two up to 2 MiB", "CARVE_ERR_INVALID")
            L = lib()
            with self._lock:
                h = self._handle()
                if not L.carve_route_known(h):  # registered as routed allocations register it (size 0: nothing)
                    _check(L.carve_route_alloc(h, 0, self.device, None, ctypes.byref(p)))
                _check(L.carve_alloc_aligned(h, size, align, _stream_ptr(stream), ctypes.byref(p)), self._h)
            return p.value or 0
        with self._lock:
            _check(lib().carve_route_alloc(self._handle(), size, self.device, _stream_ptr(stream),
                                           ctypes.byref(p)))
        return p.value or 0

    def free(self, ptr, stream=None):
        """Free a buffer from alloc (errors for addresses that are not live
        buffers of this arena, naming them). stream: the stream the free is
        ordered on, as cudaFreeAsync(ptr, stream) (carve_free_on_stream; the
        memory is reused by no stream before work queued there so far is
        done); None: the buffer's own stream. After close() retired the arena
        its live buffers may still be freed here (the free of the last one
        destroys it), as anywhere else (carve_route_free)."""
        if ptr is None or (type(ptr) is int and ptr == 0):
            return
        _ptr(ptr)
        L = lib()
        if stream is not None:
            with self._lock:
                _check(L.carve_free_on_stream(self._handle(), ptr, _stream_ptr(stream)), self._h)
            return
        with self._lock:
            if self._h is None and self._retired_h is not None:
                own = ctypes.c_void_p()
                if L.carve_route_owner(ptr, self.device, ctypes.byref(own)) != _lib.OK or \
                        own.value != self._retired_h:
                    raise CarveError(f"Arena.free: {ptr:#x} is not a live buffer of this arena (retired; "
                                     f"destroyed once its last buffer was freed)", "CARVE_ERR_BAD_POINTER")
                _check(L.carve_route_free(ptr, self.device))
                return
            if L.carve_buffer_info(self._handle(), ptr, None, None) != _lib.OK:
                raise CarveError(f"Arena.free: {ptr:#x} is not a live buffer of this arena",
                                 "CARVE_ERR_BAD_POINTER")
            _check(L.carve_route_free(ptr, self.device))

    def buffer_info(self, ptr):
        """(requested size, stream handle) of a live buffer of this arena."""
        size, stream = ctypes.c_size_t(), ctypes.c_void_p()
        _ptr(ptr)
        _check(lib().carve_buffer_info(self._handle(), ptr, ctypes.byref(size), ctypes.byref(stream)), self._h)
        return size.value, stream.value or 0

    def set_limit(self, limit):
        """Change the arena's limit (bytes, or a size such as "4GiB"; 0: the
        device's memory, unlimited off CUDA). Lowering it below what is
        reserved gives cached memory back first (a device synchronization);
        below what live buffers hold, it applies to future growth
        (carve_set_limit)."""
        n = _size_bytes(limit, "limit")
        with self._lock:
            _check(lib().carve_set_limit(self._handle(), n), self._h)

    def set_tag(self, ptr, tag):
        """Tag the live buffer ptr with a 64-bit int of the program's (0 removes
        it); the snapshot shows it with the buffer, and it goes when the buffer
        is freed."""
        _c_uint(tag, "tag", (1 << 64) - 1, "a 64-bit tag")
        _check(lib().carve_set_tag(self._handle(), _ptr(ptr), tag), self._h)

    def tag(self, ptr):
        """The tag of the live buffer ptr (0 when it has none)."""
        t = ctypes.c_uint64()
        _check(lib().carve_get_tag(self._handle(), _ptr(ptr), ctypes.byref(t)), self._h)
        return t.value

    def record_stream(self, ptr, stream):
        """Declare that work on stream also uses the live buffer ptr."""
        self._handle()
        _check(lib().carve_route_record_stream(_ptr(ptr), self.device, _stream_ptr(stream)))

    # -- accounting, the same functions as for devices
    def memory_allocated(self):
        return lib().carve_memory_allocated(self._handle())

    def memory_reserved(self):
        return lib().carve_memory_reserved(self._handle())

    def max_memory_allocated(self):
        return self.stats()["allocated_bytes_peak"]

    def max_memory_reserved(self):
        return self.stats()["reserved_bytes_peak"]

    def reset_peak_memory_stats(self):
        lib().carve_reset_peak_stats(self._handle())

    def empty_cache(self):
        _check(lib().carve_empty_cache(self._handle()), self._h)

    def stats(self):
        return memory_stats(self)

    def snapshot(self):
        return memory_snapshot(self)

    def config(self):
        """The effective configuration as a dict (limit and initial in bytes;
        limit None when unlimited)."""
        cfg = _lib.CarveConfig()
        _check(lib().carve_arena_get_config_sized(self._handle(), ctypes.byref(cfg), ctypes.sizeof(cfg)), self._h)
        limit = cfg.limit_bytes
        return {"backend": [k for k, v in _BACKENDS.items() if v == cfg.backend][0], "device": cfg.device,
                "limit_bytes": None if limit == ctypes.c_size_t(-1).value else limit,
                "initial_bytes": cfg.initial_bytes, "growth": bool(cfg.growth), "vmm": bool(cfg.vmm),
                "name": (cfg.name or b"").decode()}

    def check(self):
        """Walk every invariant of the arena; raises CarveError naming a broken one."""
        _check(lib().carve_check(self._handle()), self._h)


_arenas = weakref.WeakSet()  # every Arena made here, for snapshot_torch


def _arena_handle(device, create=False):
    """The C arena for device: an Arena, or a device (its default arena). A
    device's default arena is created only when create is true: otherwise
    None comes back while it does not exist yet (its configuration then
    still applies), and CarveError (CARVE_ERR_NO_DEVICE) when there is no
    such device."""
    if isinstance(device, Arena):
        return device._handle()
    d = _check_device(device)
    L = lib()
    if create:
        h = ctypes.c_void_p()
        _check(L.carve_device_arena(d, ctypes.byref(h)))
        return h.value
    h = L.carve_route_default_arena(d)
    if h:
        return h
    n = L.carve_device_count()
    if d >= n:
        raise CarveError(f"device {d} does not exist ({n} CUDA device{'s' if n != 1 else ''} visible)",
                         status="CARVE_ERR_NO_DEVICE")
    return None


# ---- The torch.cuda-shaped functions ----------------------------------------

def memory_allocated(device=None):
    """Bytes held by live buffers (as rounded by carve) in device's default
    arena, or in an Arena. The number to use where torch.cuda.memory_allocated
    would be (that one raises while carve is PyTorch's allocator)."""
    h = _arena_handle(device)
    return lib().carve_memory_allocated(h) if h else 0


def memory_reserved(device=None):
    """Bytes carve holds from the driver for device's default arena (or an Arena)."""
    h = _arena_handle(device)
    return lib().carve_memory_reserved(h) if h else 0


def max_memory_allocated(device=None):
    """Peak of memory_allocated since the start or reset_peak_memory_stats."""
    return memory_stats(device)["allocated_bytes_peak"]


def max_memory_reserved(device=None):
    """Peak of memory_reserved since the start or reset_peak_memory_stats."""
    return memory_stats(device)["reserved_bytes_peak"]


def reset_peak_memory_stats(device=None):
    """Reset the peaks to the current values."""
    h = _arena_handle(device)
    if h:
        lib().carve_reset_peak_stats(h)


def empty_cache(device=None):
    """Give every cached segment with no live buffer back to the driver.
    Synchronizes the device."""
    h = _arena_handle(device)
    if h:
        _check(lib().carve_empty_cache(h), h)


# PyTorch's memory_stats keys carve gives, each with PyTorch's meaning (over
# all pools: carve has no small and large pools), from carve_stats. The keys
# PyTorch has and carve cannot give are in MISSING_TORCH_STATS.
_TORCH_STATS = (
    ("allocated_bytes.all.current", "allocated_bytes"), ("allocated_bytes.all.peak", "allocated_bytes_peak"),
    ("reserved_bytes.all.current", "reserved_bytes"), ("reserved_bytes.all.peak", "reserved_bytes_peak"),
    ("requested_bytes.all.current", "requested_bytes"), ("requested_bytes.all.peak", "requested_bytes_peak"),
    ("allocation.all.current", "num_live"), ("allocation.all.allocated", "num_allocs"),
    ("allocation.all.freed", "num_frees"),
    ("segment.all.current", "num_segments"), ("segment.all.allocated", "num_backend_allocs"),
    ("segment.all.freed", "num_backend_frees"),
    ("num_ooms", "num_ooms"), ("num_device_alloc", "num_backend_allocs"),
    ("num_device_free", "num_backend_frees"), ("num_sync_all_streams", "num_syncs"),
    ("num_alloc_retries", "num_alloc_retries"),
)
MISSING_TORCH_STATS = (
    "*.large_pool.*", "*.small_pool.*", "allocated_bytes.all.allocated", "allocated_bytes.all.freed",
    "reserved_bytes.all.allocated", "reserved_bytes.all.freed", "requested_bytes.all.allocated",
    "requested_bytes.all.freed", "allocation.all.peak", "segment.all.peak", "active.*", "active_bytes.*",
    "inactive_split.*", "inactive_split_bytes.*", "oversize_allocations.*", "oversize_segments.*",
    "max_split_size",
)


def _empty_stats():
    d = {name: 0 for name, _ in _lib.STATS_FIELDS}
    d["limit_bytes"] = None
    d["driver_model_ns"] = 0
    d["driver_calls"] = {}
    return d


def memory_stats(device=None):
    """The arena's statistics as a dict: carve_stats under carve's names
    ("allocated_bytes_peak", "cached_bytes", "largest_free_block", ...;
    "limit_bytes" None when unlimited), and PyTorch's keys wherever carve
    counts the same thing ("allocated_bytes.all.current",
    "reserved_bytes.all.peak", "allocation.all.allocated", "segment.all.current",
    "num_ooms", "num_device_alloc", ...; MISSING_TORCH_STATS lists the rest),
    and the driver ledger: "driver_calls" ({"cuMemMap": n, ...}, kinds never
    called left out) and "driver_model_ns" (their time by the cost table).
    "arena_exists" is False for a device whose default arena is not made yet
    (every count 0; asking does not make it)."""
    h = _arena_handle(device)
    if h:
        s = _lib.CarveStats()
        _check(lib().carve_get_stats_sized(h, ctypes.byref(s), ctypes.sizeof(s)), h)
        d = {name: getattr(s, name) for name, _ in _lib.STATS_FIELDS}
        d["driver_model_ns"] = s.driver_model_ns
        d["driver_calls"] = {op: s.driver_calls[k] for k, op in enumerate(_lib.DRIVER_OPS) if s.driver_calls[k]}
        if d["limit_bytes"] == ctypes.c_size_t(-1).value:
            d["limit_bytes"] = None
    else:
        d = _empty_stats()
    d["arena_exists"] = bool(h)
    for key, name in _TORCH_STATS:
        d[key] = d[name]
    return d


def memory_summary(device=None, abbreviated=False):
    """A text summary of the arena's memory in the shape of
    torch.cuda.memory_summary: current and peak bytes, totals of
    allocations and frees, segments, the limit and out-of-memory errors
    ("-" where carve does not count that figure). abbreviated is accepted
    for torch.cuda's signature; the table is short either way."""
    s = memory_stats(device)
    title = (f"carve memory summary, arena {device.config()['name'] or device.backend}"
             if isinstance(device, Arena) else f"carve memory summary, device ID {_check_device(device)}")
    lim = "unlimited" if s["limit_bytes"] is None else _fmt(s["limit_bytes"])
    w = 75

    def row(cells, widths=(23, 12, 12, 12, 12)):
        return "|" + "|".join(f" {c:<{widths[0] - 1}}" if i == 0 else f" {c:>{x - 2}} "
                              for i, (c, x) in enumerate(zip(cells, widths))) + "|"

    lines = ["|" + "=" * w + "|", "|" + title.center(w) + "|", "|" + "-" * w + "|",
             "|" + f" out-of-memory errors: {s['num_ooms']:<10}  limit: {lim}".ljust(w) + "|",
             "|" + "=" * w + "|",
             row(("Metric", "Cur Usage", "Peak Usage", "Tot Alloc", "Tot Freed")),
             "|" + "-" * w + "|",
             row(("Allocated memory", _fmt(s["allocated_bytes"]), _fmt(s["allocated_bytes_peak"]), "-", "-")),
             row(("Requested memory", _fmt(s["requested_bytes"]), _fmt(s["requested_bytes_peak"]), "-", "-")),
             row(("GPU reserved memory", _fmt(s["reserved_bytes"]), _fmt(s["reserved_bytes_peak"]), "-", "-")),
             row(("Cached free memory", _fmt(s["cached_bytes"]), "-", "-", "-")),
             row(("Largest free block", _fmt(s["largest_free_block"]), "-", "-", "-")),
             "|" + "-" * w + "|",
             row(("Allocations", str(s["num_live"]), "-", str(s["num_allocs"]), str(s["num_frees"]))),
             row(("GPU reserved segments", str(s["num_segments"]), "-", str(s["num_backend_allocs"]),
                  str(s["num_backend_frees"]))),
             "|" + "=" * w + "|"]
    return "\n".join(lines) + "\n"


def memory_snapshot(device=None):
    """carve's JSON snapshot of the arena as a dict (docs/snapshot.md): its
    configuration, statistics, streams, and every segment with every block.
    For a device whose default arena is not made yet: no segments."""
    h = _arena_handle(device)
    if not h:
        return {"carve_snapshot": 1, "version": version(), "arena": None, "stats": _empty_stats(),
                "streams": [], "segments": []}
    out = ctypes.c_void_p()
    L = lib()
    _check(L.carve_snapshot_json(h, ctypes.byref(out)), h)
    try:
        return json.loads(ctypes.string_at(out.value).decode())
    finally:
        L.carve_snapshot_free(out.value)


# ---- PyTorch's snapshot layout (torch.cuda.memory._snapshot) -----------------

_TORCH_STATE = {"used": "active_allocated", "pending": "active_pending_free", "free": "inactive",
                "cached": "inactive"}


def _hex(text):
    """An address of carve's snapshot ("0x..."; the default stream may read
    "(nil)" or null) as an int."""
    try:
        return int(text, 16) if text else 0
    except ValueError:
        return 0


def _torch_segments(snap, device, pool, vmm):
    """carve's snapshot as PyTorch's segments: one per stretch of memory carve
    holds (in virtual-memory mode, address space with nothing mapped behind
    it is left out), its blocks tiling it, so every byte PyTorch's readers
    sum up is reserved memory."""
    out = []
    for seg in snap["segments"]:
        base = int(seg["address"], 16)
        pieces = []  # (offset, size, state, requested, stream)
        for r in seg["ranges"]:
            if r["state"] == "span":
                for b in r.get("blocks", []):
                    if b["state"] == "unmapped":
                        pieces.append(None)
                        continue
                    pieces.append((b["offset"], b["size"], _TORCH_STATE.get(b["state"], "inactive"),
                                   b.get("requested", 0), b.get("stream")))
            elif vmm:
                pieces.append(None)  # the heap's free address space: not mapped
            else:
                pieces.append((r["offset"], r["size"], "inactive", 0, None))
        run = []
        for p in pieces + [None]:
            if p is not None and (not run or run[-1][0] + run[-1][1] == p[0]):
                run.append(p)
                continue
            if run:
                start = run[0][0]
                blocks = [{"address": base + o, "size": n, "requested_size": req if st != "inactive" else 0,
                           "state": st, "frames": []} for o, n, st, req, _ in run]
                streams = [_hex(x) for *_, x in run if _hex(x)]
                out.append({
                    "device": device, "address": base + start, "total_size": sum(b["size"] for b in blocks),
                    "allocated_size": sum(b["size"] for b in blocks if b["state"] != "inactive"),
                    "active_size": sum(b["size"] for b in blocks if b["state"] != "inactive"),
                    "requested_size": sum(b["requested_size"] for b in blocks),
                    "stream": streams[0] if streams else 0, "segment_type": "large",
                    "segment_pool_id": pool, "is_expandable": vmm, "frames": [], "blocks": blocks})
            run = [p] if p is not None else []
    return out


def _trace_events(path):
    """A trace file of carve.record() as PyTorch's device trace entries."""
    events, live = [], {}
    try:
        f = open(path, encoding="utf-8", errors="replace")
    except OSError:
        return events
    with f:
        for line in f:
            parts = [x.strip() for x in line.strip().split(",")]
            if len(parts) < 2 or parts[0] not in ("a", "f"):
                continue
            t = [x for x in parts if x.startswith("@")]
            t_us = int(t[0][1:]) // 1000 if t and t[0][1:].isdigit() else 0
            fields = [x for x in parts[1:] if not x.startswith("@")]
            try:
                addr = int(fields[0], 0)
                if parts[0] == "a":
                    size = int(fields[1])
                    stream = int(fields[2]) if len(fields) > 2 else 0
                    live[addr] = (size, stream)
                    events.append({"action": "alloc", "addr": addr, "size": size, "stream": stream,
                                   "time_us": t_us, "frames": []})
                else:
                    size, stream = live.pop(addr, (0, 0))
                    for action in ("free_requested", "free_completed"):
                        events.append({"action": action, "addr": addr, "size": size, "stream": stream,
                                       "time_us": t_us, "frames": []})
            except (ValueError, IndexError):
                continue
    return events


def snapshot_torch(device=None, arenas=None):
    """The memory of a device in the layout of PyTorch's
    torch.cuda.memory._snapshot(), which PyTorch's memory_viz reads:
    {"segments": [...], "device_traces": [...], "allocator_settings": {...}}.
    arenas: the carve.Arena objects (and the device's default arena, as
    None) to include; default: the device's default arena and every open
    Arena of this package on that device. Each arena's segments carry its
    index in "segment_pool_id". device_traces[device] holds the recording in
    progress (carve.record()), which covers every routed allocation of the
    process."""
    d = _check_device(device)
    if arenas is None:
        arenas = [None] + [a for a in list(_arenas) if not a.closed and a.device == d]
    segments = []
    for i, a in enumerate(arenas):
        h = _arena_handle(d if a is None else a)
        if not h:
            continue
        cfg = _lib.CarveConfig()
        _check(lib().carve_arena_get_config_sized(h, ctypes.byref(cfg), ctypes.sizeof(cfg)), h)
        segments += _torch_segments(memory_snapshot(d if a is None else a), d, (i, 0), bool(cfg.vmm))
    traces = [[] for _ in range(max(d + 1, device_count()))]
    with _rec_lock:
        path, writer = _rec["path"], _rec["writer"]
        if writer is not None:
            lib().carve_trace_writer_flush(writer)
    if path:
        traces[d] = _trace_events(path)
    return {"segments": segments, "device_traces": traces,
            "allocator_settings": {"backend": "carve", "carve_version": version()}}


def dump_snapshot(path, device=None, arenas=None):
    """Write snapshot_torch(device, arenas) to path as a pickle, as
    torch.cuda.memory._dump_snapshot does: PyTorch's memory_viz
    (python -m torch.cuda._memory_viz, pytorch.org/memory_viz) opens it.
    Returns the path. A file that cannot be written raises its OSError with
    .status CARVE_ERR_BACKEND."""
    _path(path)
    snap = snapshot_torch(device, arenas)
    try:
        with open(path, "wb") as f:
            pickle.dump(snap, f)
    except OSError as e:
        raise _file_error(e)
    return path


def mem_get_info(device=None):
    """(free, total) bytes of the device as the driver sees them (cudaMemGetInfo)."""
    device = _check_device(device)
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    _check(lib().carve_device_mem_info(device, ctypes.byref(free), ctypes.byref(total)))
    return free.value, total.value


def device_count():
    """CUDA devices visible to carve (0 without a driver or device)."""
    return lib().carve_device_count()


def version():
    """The loaded libcarve's version, e.g. "1.0.0"."""
    return lib().carve_version().decode()


# ---- Configuration of the default arenas -------------------------------------

_conf_lock = threading.Lock()
_conf_sections = {}      # device -> {key: text} that configure put into CARVE_CONF
_conf_given = {}         # device -> {key: text} that configure gave the device's setters
_conf_original = [None]  # CARVE_CONF as it was before configure first changed it


def _env_config(device):
    """The configuration device's arena would get from defaults and CARVE_CONF."""
    cfg = _lib.CarveConfig()
    conf = os.environ.get("CARVE_CONF")
    _check(lib().carve_conf_parse_sized(conf.encode() if conf is not None else None, device, ctypes.byref(cfg),
                                        ctypes.sizeof(cfg)),
           cls=ConfigError, context="CARVE_CONF")
    return cfg


def configure(device=None, limit=None, growth=None, initial=None, mode=None):
    """Configure device's default arena (the one carve.torch and carve.cupy use)
    before its first use.

    limit: cap on reserved bytes: an int, a size string ("8GiB", "1.5 GB") or a
    fraction of the device's memory (0.5). growth: reserve on demand (True) or
    hold one block of `initial` (False). initial: bytes (or fraction) reserved
    at creation. mode: "default", "vmm" or "segments". Values given override
    CARVE_CONF and earlier calls.

    Everything is checked first, without a device, and with what CARVE_CONF
    and earlier calls give the device (carve_config_check: growth off needs
    an initial block, a limit in bytes is at least one granule, 2 MiB, and
    not below the initial block): a malformed or inconsistent value raises
    ConfigError naming it and changes nothing. Then the device is asked:
    CarveError (CARVE_ERR_NO_DEVICE) when there is no such device,
    ConfigError once the arena exists ("configure it before first use") or
    for a fraction that leaves less than a granule of the device's memory;
    nothing is changed then either.
    """
    device = _check_device(device)
    given = {}  # what this call gives the device's setters
    if limit is not None:
        given["limit"] = _size_text(limit, "limit")
    if initial is not None:
        given["initial"] = _size_text(initial, "initial")
    if growth is not None:
        given["growth"] = "1" if _bool(growth, "growth") else "0"
    vmm = _mode_vmm(mode) if mode is not None else None
    cfg = _parse_config(",".join(f"{k}={v}" for k, v in given.items()))
    L = lib()
    with _conf_lock:
        # The arena this would make: CARVE_CONF, then earlier calls, then this one.
        whole = dict(_conf_given.get(device, {}))
        whole.update(given)
        would = _parse_config(",".join(f"{k}={v}" for k, v in whole.items()), _env_config(device))
        _check(L.carve_config_check(ctypes.byref(would)), cls=ConfigError)

        # The first setter finds a missing device, an arena that exists already
        # or (the limit's) a fraction too small for the device before anything
        # changes; the others then cannot fail but for a race with the arena's
        # creation. The growth setter always runs: it holds the device's mode
        # against a later CARVE_CONF.
        def setter(st):
            _check(st, cls=ConfigError if st == _lib.ERR_INVALID else None)

        if limit is not None:
            if cfg.limit_fraction > 0:
                setter(L.carve_device_set_limit_fraction(device, cfg.limit_fraction))
            else:
                setter(L.carve_device_set_limit(device, cfg.limit_bytes))
        setter(L.carve_device_set_growth(device, would.growth))
        section = dict(_conf_sections.get(device, {}))
        if initial is not None:
            if cfg.initial_fraction > 0:  # no setter takes a fraction: CARVE_CONF does
                section["initial"] = given["initial"]
            else:
                section.pop("initial", None)
                setter(L.carve_device_set_initial(device, cfg.initial_bytes))
        if vmm is not None:
            section["vmm"] = str(vmm)
        _conf_given[device] = whole
        if section != _conf_sections.get(device, {}):
            _set_conf_section(device, section)


def _set_conf_section(device, section):
    if _conf_original[0] is None:
        _conf_original[0] = os.environ.get("CARVE_CONF", "")
    sections = dict(_conf_sections)
    sections[device] = section
    parts = [_conf_original[0]] if _conf_original[0] else []
    for d, keys in sorted(sections.items()):
        if keys:
            parts.append(f"device{d}:" + ",".join(f"{k}={v}" for k, v in sorted(keys.items())))
    text = ";".join(parts)
    cfg = _lib.CarveConfig()
    _check(lib().carve_conf_parse_sized(text.encode(), device, ctypes.byref(cfg), ctypes.sizeof(cfg)), cls=ConfigError,
           context=f"CARVE_CONF would become {text!r}")
    os.environ["CARVE_CONF"] = text
    _conf_sections[device] = section


# ---- Report -----------------------------------------------------------------

def report(devices=None):
    """A text table of the arenas' statistics, one column per arena. devices:
    a device, an Arena, or a list of them (default: the current device)."""
    if devices is None:
        devices = [current_device()]
    elif not isinstance(devices, (list, tuple)):
        devices = [devices]
    cols = []
    for d in devices:
        s = memory_stats(d)
        if isinstance(d, Arena):
            c = d.config()
            title = c["name"] or f"arena ({c['backend']})"
        else:
            title = f"device{_check_device(d)}"
        lim = s["limit_bytes"]
        cols.append((title, [
            _fmt(s["allocated_bytes"]), _fmt(s["allocated_bytes_peak"]), _fmt(s["requested_bytes"]),
            _fmt(s["reserved_bytes"]), _fmt(s["reserved_bytes_peak"]), _fmt(s["cached_bytes"]),
            _fmt(s["largest_free_block"]), "unlimited" if lim is None else _fmt(lim), str(s["num_segments"]),
            str(s["num_live"]), f"{s['num_allocs']} / {s['num_frees']}", str(s["num_ooms"]),
        ]))
    rows = ["allocated", "allocated (peak)", "requested", "reserved", "reserved (peak)", "cached",
            "largest free block", "limit", "segments", "live buffers", "allocs / frees", "out-of-memory errors"]
    w0 = max(len(r) for r in rows)
    widths = [max(len(t), *(len(v) for v in vals)) for t, vals in cols]
    lines = ["carve memory report", " " * w0 + "".join("  " + t.rjust(w) for (t, _), w in zip(cols, widths))]
    for i, r in enumerate(rows):
        lines.append(r.ljust(w0) + "".join("  " + vals[i].rjust(w) for (_, vals), w in zip(cols, widths)))
    return "\n".join(lines) + "\n"


# ---- Recording and pictures ---------------------------------------------------

_rec_lock = threading.Lock()
_rec = {"writer": None, "path": None}


def record(path=None, title=None):
    """Start recording every allocation and free made through carve's framework
    entry points (carve.torch, carve.cupy, Arena.alloc/free) into a trace file
    (docs/trace-format.md); returns its path (a new temporary file when path
    is None). carve.plot draws it; carve-replay replays it."""
    L = lib()
    title = "carve python" if title is None else title
    if not isinstance(title, str) or "\0" in title:
        raise ConfigError(f"title={title!r}: a title is a str without NUL characters")
    if path is not None:
        _path(path)
    with _rec_lock:
        if _rec["writer"] is not None:
            raise CarveError(f"already recording into {_rec['path']}; call carve.stop_recording() first")
        if path is None:
            try:
                fd, path = tempfile.mkstemp(prefix="carve-", suffix=".csv")
            except OSError as e:
                raise _file_error(e)
            os.close(fd)
        w = ctypes.c_void_p()
        _check(L.carve_trace_writer_open(_path(path), (title or "carve python").encode(), ctypes.byref(w)))
        st = L.carve_route_set_recorder(_lib.address("carve_trace_writer_alloc"),
                                        _lib.address("carve_trace_writer_free"), w)
        if st != _lib.OK:
            L.carve_trace_writer_close(w)
            _check(st)
        _rec["writer"], _rec["path"] = w.value, path
        return path


def stop_recording():
    """Stop recording and close the trace; returns its path (None when nothing
    was being recorded)."""
    L = lib()
    with _rec_lock:
        w = _rec["writer"]
        if w is None:
            return None
        L.carve_route_set_recorder(None, None, None)
        _rec["writer"] = None
        _check(L.carve_trace_writer_close(w), context=f"writing {_rec['path']}")
        return _rec["path"]


def _libc():
    c = ctypes.CDLL(None, use_errno=True)
    c.fopen.restype = ctypes.c_void_p
    c.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    c.fclose.restype = ctypes.c_int
    c.fclose.argtypes = [ctypes.c_void_p]
    return c


def plot(path, trace=None, color_by_stream=False, mode="default", title=None):
    """Draw the SVG of this process's allocations into path: the recording in
    progress (carve.record) or the trace file given, replayed on carve's
    virtual backend (growth on, unlimited; mode "vmm" replays in
    virtual-memory mode), exactly as carve-replay --svg draws it. Returns a
    dict: path, events, peak requested and reserved bytes, footprint."""
    L = lib()
    if trace is None:
        with _rec_lock:
            trace = _rec["path"]
            if trace is None:
                raise CarveError("nothing to plot: start recording with carve.record() first, or give trace=")
            if _rec["writer"] is not None:
                _check(L.carve_trace_writer_flush(_rec["writer"]))
    t = _lib.CarveTrace()
    if L.carve_trace_load_path(_path(trace, "trace"), ctypes.byref(t), None, None) != 0:
        raise CarveError(f"cannot read the trace {trace}: {t.diag.decode(errors='replace')}",
                         status="CARVE_ERR_BACKEND")
    rs, rec, res = _lib.ReplayStreams(), _lib.ReplayRec(), _lib.ReplayResult()
    opened = recorded = False
    try:
        if t.nallocs == 0:
            raise CarveError(f"nothing to plot: the trace {trace} holds no allocation")
        cfg = _parse_config(f"backend=virtual,growth=1,vmm={_mode_vmm(mode)}")
        _check(L.carve_replay_streams_open(ctypes.byref(rs), max(1, t.nstreams), _lib.BACKEND_VIRTUAL, 0))
        opened = True
        _check(L.carve_replay_record(ctypes.byref(t), ctypes.byref(cfg), ctypes.byref(rs), _lib.SVG_COLS,
                                     ctypes.byref(rec), ctypes.byref(res)))
        recorded = True
        peak = res.stats.reserved_bytes_peak
        footprint = peak / t.peak_requested if t.peak_requested else 0.0
        info = _lib.SvgInfo((title or os.path.basename(trace)).encode(), b"virtual", footprint, peak,
                            1 if color_by_stream else 0)
        c = _libc()
        f = c.fopen(_path(path), b"w")
        if not f:
            e = ctypes.get_errno()
            raise _file_error(OSError(e, f"cannot write {path}: {os.strerror(e)}"))
        rc = L.carve_svg_write(f, ctypes.byref(t), ctypes.byref(rec), ctypes.byref(info))
        if c.fclose(f) != 0 or rc != 0:
            raise CarveError(f"cannot write {path} (disk full or host memory exhausted)", status="CARVE_ERR_BACKEND")
        return {"path": path, "trace": trace, "events": t.n, "allocations": t.nallocs,
                "peak_requested_bytes": t.peak_requested, "peak_reserved_bytes": peak, "footprint": footprint}
    finally:
        if recorded:
            L.carve_replay_rec_free(ctypes.byref(rec))
        if opened:
            L.carve_replay_streams_close(ctypes.byref(rs))
        L.carve_trace_free(ctypes.byref(t))


# ---- Routing ------------------------------------------------------------------

@contextlib.contextmanager
def route(arena):
    """Send the calling thread's framework allocations (carve.torch, carve.cupy)
    to arena inside the block. Frees find their arena wherever they happen.
    Per thread: coroutines on one thread share the route (see scoped_arena)."""
    if not isinstance(arena, Arena):
        raise ArgumentTypeError(f"route() takes a carve.Arena, not {type(arena).__name__}")
    L = lib()
    _check(L.carve_route_push(arena._handle()))
    try:
        yield arena
    finally:
        L.carve_route_pop()


class scoped_arena(contextlib.ContextDecorator):
    """A fresh arena with its own cap for a block of code, as `with` or as a
    decorator (a fresh arena per call):

        with carve.scoped_arena(limit="4GiB") as a:
            ...                      # routed allocations of this thread go to a
        # here the arena is retired: closed now, or when its last buffer is freed

    The arguments are Arena's (backend defaults to "cuda"; device None = the
    current device for "cuda" and "cuda_driver", as current_device() sees
    it, else 0). After the block, .last_stats holds the arena's statistics
    at exit and .closed_at_exit whether it was closed right away.

    The routing is per thread, as carve.route's: coroutines that run on one
    thread (asyncio) share it, so a block must not span an await while
    another coroutine allocates or enters a block of its own (that
    coroutine's allocations would land in this arena, and blocks left out of
    order pop each other's arenas). Enter and leave it between awaits, or
    run the work in a thread of its own.
    """

    def __init__(self, limit=None, growth=True, initial=None, mode="default", device=None, backend="cuda",
                 name=None, conf=None):
        self.kw = dict(limit=limit, growth=growth, initial=initial, mode=mode, backend=backend, name=name,
                       conf=conf)
        self.device = device
        self._tls = threading.local()
        self.last_stats = None
        self.closed_at_exit = None

    def _stack(self):
        if not hasattr(self._tls, "stack"):
            self._tls.stack = []
        return self._tls.stack

    def _device(self):
        if self.kw["backend"] in ("cuda", "cuda_driver"):
            return _check_device(self.device)
        return 0 if self.device is None else _check_device(self.device)

    def _enter_hook(self, arena):
        """Subclasses: set up more after the arena is routed."""
        return None

    def _exit_hook(self, arena, token):
        """Subclasses: tear down before the route is popped."""

    def __enter__(self):
        arena = Arena(device=self._device(), **self.kw)
        try:
            _check(lib().carve_route_push(arena._handle()))
        except BaseException:
            arena.close()
            raise
        try:
            token = self._enter_hook(arena)
        except BaseException:
            lib().carve_route_pop()
            arena.close()
            raise
        self._stack().append((arena, token))
        return arena

    def __exit__(self, *exc):
        arena, token = self._stack().pop()
        try:
            self._exit_hook(arena, token)
        finally:
            lib().carve_route_pop()
            self.last_stats = arena.stats()
            self.closed_at_exit = arena.retire()
        return False
