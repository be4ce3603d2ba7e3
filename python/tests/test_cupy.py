"""test_cupy.py — carve.cupy without CuPy: the ImportError it gives, and its
allocator against a fake cupy (conftest.FakeCupy) on HOST-backend arenas.

The one idea: CuPy's side of the contract is calling the allocator with a
size and keeping the UnownedMemory's owner alive while the array lives, so
the tests call carve.cupy.malloc as CuPy would, drop the MemoryPointer as an
array's death would, and read the arena's statistics to see each effect.
"""

import ctypes
import gc
import os
import subprocess
import sys

import pytest

import carve
from carve import _lib

from conftest import PYROOT

MiB = 1 << 20


def test_import_without_cupy_says_why():
    code = "import sys; sys.modules['cupy'] = None\nimport carve.cupy\n"
    env = dict(os.environ, PYTHONPATH=PYROOT)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "ImportError: carve.cupy needs CuPy" in out.stderr and "cupy-cuda" in out.stderr


def test_enable_and_disable(fake_cupy):
    fake, cc = fake_cupy
    cc.enable()
    assert fake.allocator is cc.malloc and cc.is_enabled()
    cc.disable()
    assert fake.allocator == "cupy-default-pool" and not cc.is_enabled()
    cc.disable()  # no-op


def test_malloc_on_current_stream_in_routed_arena(fake_cupy, L):
    fake, cc = fake_cupy
    cc.enable()
    fake.stream = 0x5150
    with cc.arena(backend="host", limit="16MiB") as a:
        mp = fake.allocator(3 * MiB)
        assert mp.ptr == mp.mem.ptr and mp.mem.size == 3 * MiB and mp.mem.device_id == 0
        assert a.buffer_info(mp.ptr) == (3 * MiB, 0x5150)
        ctypes.memset(mp.ptr, 1, 3 * MiB)
        fake.stream = 0
        mp2 = fake.allocator(1000)
        assert a.buffer_info(mp2.ptr) == (1000, 0)
        zero = fake.allocator(0)
        assert zero.ptr == 0
        h = a._h
        del mp2
        gc.collect()
        assert a.stats()["num_live"] == 1  # the dropped array's buffer went back
    assert L.carve_route_known(h)  # one array still alive
    del mp
    gc.collect()
    assert not L.carve_route_known(h)


def test_out_of_memory_is_cupys_error(fake_cupy, L):
    fake, cc = fake_cupy
    cc.enable()
    with cc.arena(backend="host", limit="8MiB") as a:
        keep = fake.allocator(4 * MiB)
        with pytest.raises(fake.OutOfMemoryError) as e:
            fake.allocator(6 * MiB)
        assert e.value.size == 6 * MiB and e.value.limit == 8 * MiB and e.value.total == a.memory_reserved()
        assert isinstance(e.value.__cause__, carve.CarveError)
        assert "out of memory" in str(e.value.__cause__)
        assert e.value.status == e.value.__cause__.status == "CARVE_ERR_OOM"
        del keep


def test_no_device_without_gpu(fake_cupy, L):
    if carve.device_count() > 0:
        pytest.skip("this machine has a GPU")
    fake, cc = fake_cupy
    cc.enable()
    with pytest.raises(carve.CarveError, match="device 0 does not exist"):
        fake.allocator(4096)


def test_arena_needs_enable(fake_cupy, L):
    fake, cc = fake_cupy
    with pytest.raises(carve.CarveError, match="carve.cupy.enable"):
        with cc.arena(backend="host"):
            pass
    assert L.carve_route_current() is None


def test_c_allocator(fake_cupy, host_arena, L):
    fake, cc = fake_cupy
    cc.enable(c_allocator=True, stream=0x42)
    (ca,) = fake.c_allocators
    assert fake.allocator == ca.malloc
    assert ca.param == 0x42 and ca.owner is L
    assert ca.malloc_func == _lib.address("carve_cupy_malloc") and ca.free_func == _lib.address("carve_cupy_free")
    # What CuPy does with them: call malloc(param, size, device) and free(param, ptr, device).
    malloc = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)(ca.malloc_func)
    free = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)(ca.free_func)
    a = host_arena()
    with carve.route(a):
        p = malloc(ca.param, 5000, 0)
    assert a.buffer_info(p) == (5000, 0x42)
    free(ca.param, p, 0)
    assert a.memory_allocated() == 0
    cc.enable()  # back to the Python allocator
    assert fake.allocator is cc.malloc
