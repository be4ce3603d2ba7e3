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
import shutil
import subprocess
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

    # The CUDA-graph hooks of PyTorch >= 2.3 (a test deletes them from the
    # class to play an older PyTorch).
    def set_begin_allocate_to_pool(self, f):
        self.hooks["begin_pool"] = f

    def set_end_allocate_to_pool_fn(self, f):
        self.hooks["end_pool"] = f

    def set_release_pool(self, f):
        self.hooks["release_pool"] = f


# A stand-in for torch's C++ headers and libc10, enough to compile carve's
# shim (python/carve/_torch_shim.cpp): c10::Error and c10::OutOfMemoryError,
# TORCH_CHECK and TORCH_CHECK_WITH, with PyTorch's meaning (throw with the
# arguments streamed into the message).
FAKE_EXCEPTION_H = r"""
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
namespace c10 {
struct Error : std::runtime_error { using std::runtime_error::runtime_error; };
struct OutOfMemoryError : Error { using Error::Error; };
namespace fake {
inline void cat(std::ostringstream &) {}
template <class T, class... R> void cat(std::ostringstream &o, const T &t, const R &...r) { o << t; cat(o, r...); }
template <class... A> std::string str(const A &...a) { std::ostringstream o; cat(o, a...); return o.str(); }
}
}
#define TORCH_CHECK_WITH(kind, cond, ...) \
    do { if (!(cond)) throw ::c10::kind(::c10::fake::str(__VA_ARGS__)); } while (0)
#define TORCH_CHECK(cond, ...) TORCH_CHECK_WITH(Error, cond, __VA_ARGS__)
"""


def cxx():
    return os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")


def make_fake_torch_tree(root):
    """root/torch/__init__.py, include/c10/util/Exception.h and lib/libc10.so
    (empty): where build_shim looks. Returns the package directory, or None
    without a C++ compiler."""
    pkg = os.path.join(root, "torch")
    os.makedirs(os.path.join(pkg, "include", "c10", "util"), exist_ok=True)
    os.makedirs(os.path.join(pkg, "lib"), exist_ok=True)
    with open(os.path.join(pkg, "__init__.py"), "w") as f:
        f.write("")
    with open(os.path.join(pkg, "include", "c10", "util", "Exception.h"), "w") as f:
        f.write(FAKE_EXCEPTION_H)
    cc = cxx()
    if not cc:
        return None
    subprocess.run([cc, "-shared", "-fPIC", "-x", "c++", "-", "-o", os.path.join(pkg, "lib", "libc10.so")],
                   input="", text=True, check=True, timeout=120)
    return pkg


@pytest.fixture(scope="session")
def fake_torch_tree(tmp_path_factory):
    return make_fake_torch_tree(str(tmp_path_factory.mktemp("faketorch")))


class FakeTorch:
    """Enough of torch for carve.torch: the pluggable allocator, the swap, the
    MemPool path, the cuBLAS workspace clearing, and a place (tree) whose
    include/ and lib/ a shim can be built against."""

    def __init__(self, tree=None):
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
        mod.__file__ = os.path.join(tree or "/nonexistent/torch", "__init__.py")
        mod.__version__ = "0.0-fake"
        mod.cuda = types.SimpleNamespace(
            is_initialized=lambda: t.initialized, current_device=lambda: 0, MemPool=MemPool,
            use_mem_pool=_UsePool,
            memory=types.SimpleNamespace(CUDAPluggableAllocator=CUDAPluggableAllocator,
                                         change_current_allocator=change_current_allocator))
        mod._C = types.SimpleNamespace(_cuda_clearCublasWorkspaces=clear, _GLIBCXX_USE_CXX11_ABI=True)
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
def fake_torch(monkeypatch, L, fake_torch_tree, tmp_path):
    """(FakeTorch, carve.torch imported over it). Shims are built into a
    fresh directory per test."""
    monkeypatch.setenv("CARVE_TORCH_SHIM_DIR", str(tmp_path / "shims"))
    monkeypatch.delenv("CARVE_TORCH_SHIM", raising=False)
    fake = FakeTorch(fake_torch_tree)
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
