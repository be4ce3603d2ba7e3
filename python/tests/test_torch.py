"""test_torch.py — carve.torch without PyTorch: the ImportError it gives, and
its logic against a fake torch (conftest.FakeTorch).

The one idea: what carve.torch does to PyTorch is a handful of calls
(build a CUDAPluggableAllocator from libcarve's path and symbol names, set
its hooks, swap it in, or make a MemPool), and PyTorch's side of the
contract is calling libcarve's exported functions; the fake records the
first, and the tests play PyTorch's part by calling carve_torch_alloc /
carve_torch_free through ctypes, on HOST-backend arenas.
"""

import ctypes
import os
import subprocess
import sys

import pytest

import carve
from carve import _lib

from conftest import PYROOT

MiB = 1 << 20


def test_import_without_torch_says_why():
    code = "import sys; sys.modules['torch'] = None\nimport carve.torch\n"
    env = dict(os.environ, PYTHONPATH=PYROOT)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "ImportError: carve.torch needs PyTorch" in out.stderr
    assert "carve-run" in out.stderr
    # carve itself still imports and works.
    code = "import sys; sys.modules['torch'] = None\nimport carve\nprint(carve.version())\n"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.count(".") == 2, out.stderr


def test_enable_builds_the_pluggable_allocator(fake_torch, L):
    fake, ct = fake_torch
    assert not ct.is_enabled()
    alloc = ct.enable()
    assert ct.is_enabled() and fake.current is alloc and ct.allocator() is alloc
    assert alloc.path == carve.library_path()
    assert (alloc.alloc_name, alloc.free_name) == ("carve_torch_alloc", "carve_torch_free")
    # The names exist in the library PyTorch will load.
    for name in (alloc.alloc_name, alloc.free_name):
        assert getattr(ctypes.CDLL(alloc.path), name)
    hooks = alloc.allocator().hooks
    assert hooks == {"reset": _lib.address("carve_torch_empty_cache"),
                     "memory_fraction": _lib.address("carve_torch_set_memory_fraction"),
                     "record_stream": _lib.address("carve_torch_record_stream")}
    assert ct.enable() is alloc and len(fake.made) == 1  # a second call changes nothing


def test_reset_hook_empties_routed_arenas(fake_torch, host_arena, L):
    fake, ct = fake_torch
    hooks = ct.enable().allocator().hooks
    a = host_arena()
    with carve.route(a):
        p = L.carve_torch_alloc(40 * MiB, 0, None)
    L.carve_torch_free(p, 40 * MiB, 0, None)
    assert a.memory_reserved() >= 40 * MiB
    ctypes.CFUNCTYPE(None)(hooks["reset"])()  # what torch.cuda.empty_cache() does
    assert a.memory_reserved() == 0


def test_enable_after_cuda_init_is_a_clear_error(fake_torch):
    fake, ct = fake_torch
    fake.initialized = True
    with pytest.raises(carve.CarveError, match=r"after CUDA was initialized.*right after `import torch`"):
        ct.enable()
    assert fake.current is None and not ct.is_enabled()


def test_torch_refusing_the_swap_is_translated(fake_torch):
    fake, ct = fake_torch
    fake.swap_error = RuntimeError("Can't swap an already initialized allocator")
    with pytest.raises(carve.CarveError) as e:
        ct.enable()
    assert "already initialized" in str(e.value) and "before anything touches CUDA" in str(e.value)
    assert isinstance(e.value.__cause__, RuntimeError)
    assert not ct.is_enabled()
    fake.swap_error = RuntimeError("something else")
    with pytest.raises(RuntimeError, match="^something else$"):
        ct.enable()


def test_enable_checks_configuration_first(fake_torch):
    fake, ct = fake_torch
    with pytest.raises(carve.ConfigError, match="'12 parsecs'"):
        ct.enable(limit="12 parsecs")
    assert fake.made == [] and fake.current is None
    if carve.device_count() == 0:
        with pytest.raises(carve.CarveError, match="device 0 does not exist"):
            ct.enable(limit="8GiB")
        assert fake.current is None


def test_default_arena_without_gpu(fake_torch, L):
    if carve.device_count() > 0:
        pytest.skip("this machine has a GPU")
    fake, ct = fake_torch
    ct.enable()
    # What PyTorch sees when no arena is routed and there is no device: NULL
    # (its out-of-memory error), with the reason kept for carve_last_error.
    assert L.carve_torch_alloc(4096, 0, None) is None
    assert "device 0 does not exist" in L.carve_last_error(None).decode()


def test_arena_routes_when_carve_is_current(fake_torch, L):
    fake, ct = fake_torch
    ct.enable()
    scope = ct.arena(limit="16MiB", backend="host", name="model")
    with scope as a:
        assert L.carve_route_current() == a._h
        x = L.carve_torch_alloc(MiB, 0, 0x77)
        y = L.carve_torch_alloc(2 * MiB, 0, None)
        assert a.buffer_info(x) == (MiB, 0x77)
        assert L.carve_torch_alloc(64 * MiB, 0, None) is None  # the arena's own cap
        L.carve_torch_free(y, 2 * MiB, 0, None)
        h = a._h
    assert fake.pools == [] and fake.cleared == 1
    assert L.carve_route_current() is None
    assert scope.closed_at_exit is False and scope.last_stats["num_live"] == 1
    assert scope.last_stats["num_ooms"] == 1
    assert L.carve_route_known(h)
    L.carve_torch_free(x, MiB, 0, 0x77)  # the last tensor dies: the arena goes
    assert not L.carve_route_known(h)


def test_arena_as_decorator_and_nested(fake_torch, L):
    fake, ct = fake_torch
    ct.enable()
    inner_scope = ct.arena(backend="host", clear_workspaces=False)
    handles = []

    @ct.arena(backend="host", limit="8MiB")
    def step():
        outer = L.carve_route_current()
        with inner_scope as b:
            assert L.carve_route_current() == b._h != outer
            p = L.carve_torch_alloc(100, 0, None)
            L.carve_torch_free(p, 100, 0, None)
        assert L.carve_route_current() == outer
        handles.append(outer)

    step()
    step()
    assert len(handles) == 2 and all(handles)
    assert L.carve_route_current() is None
    assert not any(L.carve_route_known(h) for h in handles)
    assert inner_scope.closed_at_exit is True
    assert fake.cleared == 2  # the outer arenas cleared the workspaces, the inner did not


def test_arena_uses_a_mempool_when_carve_is_not_current(fake_torch, L):
    fake, ct = fake_torch
    with ct.arena(backend="host", limit="64MiB") as a:
        # PyTorch's allocator asks the pool's allocator for a segment on this thread.
        seg = L.carve_torch_alloc(20 * MiB, 0, None)
        assert a.buffer_info(seg) == (20 * MiB, 0)
        h = a._h
    assert len(fake.pools) == 1
    pool_alloc = fake.pools[0].allocator
    maker = [m for m in fake.made if m.allocator() is pool_alloc][0]
    assert (maker.path, maker.alloc_name, maker.free_name) == (carve.library_path(), "carve_torch_alloc",
                                                               "carve_torch_free")
    assert [e[0] for e in fake.pool_events] == ["enter", "exit"]
    assert fake.pool_events[0][1] is fake.pools[0] and fake.pool_events[0][2] == 0
    assert fake.current is None  # carve did not become the current allocator
    assert L.carve_route_known(h)
    L.carve_torch_free(seg, 20 * MiB, 0, None)  # the pool is deleted, PyTorch gives the segment back
    assert not L.carve_route_known(h)


def test_set_memory_fraction(fake_torch, L):
    fake, ct = fake_torch
    with pytest.raises(carve.ConfigError, match="fraction=1.5"):
        ct.set_memory_fraction(1.5)
    if carve.device_count() == 0:
        with pytest.raises(carve.CarveError, match="device 0 does not exist"):
            ct.set_memory_fraction(0.5)
        # The hook PyTorch calls cannot raise; it leaves the reason.
        hook = ctypes.CFUNCTYPE(None, ctypes.c_double, ctypes.c_int)(_lib.address("carve_torch_set_memory_fraction"))
        hook(0.5, 2)
        assert "device 2 does not exist" in L.carve_last_error(None).decode()
