"""conftest.py — what every test of the carve Python package shares: the
package imported from this checkout (no install needed), the loaded library,
HOST-backend arenas, and fake torch / cupy modules.

The one idea: the package is tested without a GPU by giving every function
a HOST-backend arena (real host memory behind the same engine), and the
framework modules by handing them small fakes that record what carve asked
of PyTorch and CuPy and call back into libcarve the way the frameworks do.
The GPU scripts in gpu/ are not collected here (run them with gpu/run_all.sh).
"""

import importlib
import os
import sys
import types

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYROOT = os.path.dirname(HERE)
CHECKOUT = os.path.dirname(PYROOT)
if PYROOT not in sys.path:
    sys.path.insert(0, PYROOT)

collect_ignore = ["gpu"]

import carve  # noqa: E402
from carve import _lib  # noqa: E402


@pytest.fixture(scope="session")
def L():
    """The loaded libcarve (fails, never skips, when it cannot be loaded)."""
    return _lib.lib()


@pytest.fixture
def host_arena(L):
    arenas = []

    def make(**kw):
        kw.setdefault("backend", "host")
        a = carve.Arena(**kw)
        arenas.append(a)
        return a

    yield make
    for a in arenas:
        a.close()
    assert L.carve_route_current() is None, "a test left a route pushed"


@pytest.fixture(autouse=True)
def _no_recording_left():
    yield
    carve.stop_recording()
    carve._api._rec["path"] = None


# ---- Fakes of the frameworks ------------------------------------------------

class FakeInner:
    """torch._C._CUDAPluggableAllocator: records the hooks it is given."""

    def __init__(self):
        self.hooks = {}

    def set_reset_fn(self, f):
        self.hooks["reset"] = f

    def set_memory_fraction_fn(self, f):
        self.hooks["memory_fraction"] = f

    def set_record_stream_fn(self, f):
        self.hooks["record_stream"] = f


class FakeTorch:
    """Enough of torch for carve.torch: the pluggable allocator, the swap, the
    MemPool path, the cuBLAS workspace clearing."""

    def __init__(self):
        self.initialized = False
        self.swap_error = None
        self.current = None
        self.made = []
        self.pools = []
        self.pool_events = []
        self.cleared = 0
        t = self

        class CUDAPluggableAllocator:
            def __init__(self, path, alloc_fn_name, free_fn_name):
                self.path, self.alloc_name, self.free_name = path, alloc_fn_name, free_fn_name
                self._inner = FakeInner()
                t.made.append(self)

            def allocator(self):
                return self._inner

        def change_current_allocator(a):
            if t.swap_error is not None:
                raise t.swap_error
            t.current = a

        class MemPool:
            def __init__(self, allocator=None):
                self.allocator = allocator
                t.pools.append(self)

        class _UsePool:
            def __init__(self, pool, device=None):
                self.pool, self.device = pool, device

            def __enter__(self):
                t.pool_events.append(("enter", self.pool, self.device))

            def __exit__(self, *exc):
                t.pool_events.append(("exit", self.pool, self.device))

        def clear():
            t.cleared += 1

        mod = types.ModuleType("torch")
        mod.cuda = types.SimpleNamespace(
            is_initialized=lambda: t.initialized, current_device=lambda: 0, MemPool=MemPool,
            use_mem_pool=_UsePool,
            memory=types.SimpleNamespace(CUDAPluggableAllocator=CUDAPluggableAllocator,
                                         change_current_allocator=change_current_allocator))
        mod._C = types.SimpleNamespace(_cuda_clearCublasWorkspaces=clear)
        self.module = mod


class FakeCupy:
    """Enough of cupy for carve.cupy: the allocator slot, foreign memory, streams."""

    def __init__(self):
        self.stream = 0
        self.allocator = "cupy-default-pool"
        self.c_allocators = []
        t = self

        class UnownedMemory:
            def __init__(self, ptr, size, owner, device_id=-1):
                self.ptr, self.size, self.owner, self.device_id = ptr, size, owner, device_id

        class MemoryPointer:
            def __init__(self, mem, offset):
                self.mem, self.ptr = mem, mem.ptr + offset

        class OutOfMemoryError(MemoryError):
            def __init__(self, size, total, limit=0):
                super().__init__(f"Out of memory allocating {size} bytes (allocated so far: {total} bytes, "
                                 f"limit set to: {limit} bytes).")
                self.size, self.total, self.limit = size, total, limit

        class CFunctionAllocator:
            def __init__(self, param, malloc_func, free_func, owner):
                self.param, self.malloc_func, self.free_func, self.owner = param, malloc_func, free_func, owner
                t.c_allocators.append(self)

            def malloc(self, size):  # pragma: no cover - not called by the tests
                raise AssertionError("the fake does not allocate")

        def set_allocator(a=None):
            t.allocator = a

        mod = types.ModuleType("cupy")
        mod.cuda = types.SimpleNamespace(
            runtime=types.SimpleNamespace(getDevice=lambda: 0),
            get_current_stream=lambda: types.SimpleNamespace(ptr=t.stream),
            UnownedMemory=UnownedMemory, MemoryPointer=MemoryPointer, set_allocator=set_allocator,
            get_allocator=lambda: t.allocator, CFunctionAllocator=CFunctionAllocator,
            memory=types.SimpleNamespace(OutOfMemoryError=OutOfMemoryError))
        self.module = mod
        self.OutOfMemoryError = OutOfMemoryError


def _fresh_import(monkeypatch, framework, fake_module):
    """carve.<framework> imported anew over the fake (undone by _forget)."""
    monkeypatch.setitem(sys.modules, framework, fake_module)
    _forget(framework)
    return importlib.import_module(f"carve.{framework}")


def _forget(framework):
    sys.modules.pop(f"carve.{framework}", None)
    if hasattr(carve, framework):
        delattr(carve, framework)


@pytest.fixture
def fake_torch(monkeypatch, L):
    fake = FakeTorch()
    mod = _fresh_import(monkeypatch, "torch", fake.module)
    yield fake, mod
    _forget("torch")


@pytest.fixture
def fake_cupy(monkeypatch, L):
    fake = FakeCupy()
    mod = _fresh_import(monkeypatch, "cupy", fake.module)
    yield fake, mod
    if mod.is_enabled():
        mod.disable()
    _forget("cupy")
