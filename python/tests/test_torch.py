"""test_torch.py — carve.torch without PyTorch: the ImportError it gives, and
its logic against a fake torch (conftest.FakeTorch).

The one idea: what carve.torch does to PyTorch is a handful of calls
(compile its shim, build a CUDAPluggableAllocator from the shim's path and
symbol names, set its hooks, swap it in, or make a MemPool), and PyTorch's
side of the contract is calling the exported functions; the fake records the
first, and the tests play PyTorch's part by calling carve_torch_alloc /
carve_torch_free through ctypes, on HOST-backend arenas. The shim is compiled
against a stand-in for torch's headers (conftest.FAKE_EXCEPTION_H) and driven
by a small C++ program that catches what it throws, as PyTorch would.
"""

import ctypes
import os
import subprocess
import sys
import threading

import pytest

import carve
from carve import _lib

from conftest import CHECKOUT, PYROOT, cxx

needs_cxx = pytest.mark.skipif(not cxx(), reason="needs a C++ compiler to build the shim")

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


@needs_cxx
def test_enable_builds_the_shim_allocator(fake_torch, L, tmp_path):
    fake, ct = fake_torch
    assert not ct.is_enabled() and not ct.oom_raises()
    alloc = ct.enable()
    assert ct.is_enabled() and fake.current is alloc and ct.allocator() is alloc and ct.oom_raises()
    assert alloc.path.startswith(str(tmp_path / "shims")) and alloc.path.endswith(".so")
    assert (alloc.alloc_name, alloc.free_name) == ("carve_torch_shim_alloc", "carve_torch_shim_free")
    shim = ctypes.CDLL(alloc.path)
    for name in (alloc.alloc_name, alloc.free_name):  # the names exist in the library PyTorch will load
        assert getattr(shim, name)
    hooks = alloc.allocator().hooks
    addr = lambda name: ctypes.cast(getattr(shim, name), ctypes.c_void_p).value
    assert hooks == {"reset": _lib.address("carve_torch_empty_cache"),
                     "memory_fraction": addr("carve_torch_shim_set_fraction"),
                     "record_stream": _lib.address("carve_torch_record_stream"),
                     "begin_pool": addr("carve_torch_shim_begin_pool"),
                     "end_pool": addr("carve_torch_shim_end_pool"),
                     "release_pool": addr("carve_torch_shim_release_pool")}
    assert ct.graph_pools()
    assert ct.enable() is alloc and len(fake.made) == 1  # a second call changes nothing


@needs_cxx
def test_graph_hooks_need_a_pytorch_that_has_them(fake_torch, monkeypatch):
    """PyTorch before 2.3 has no graph-pool setters: none is set, and
    graph_pools() says so."""
    from conftest import FakeInner
    fake, ct = fake_torch
    for setter in ("set_begin_allocate_to_pool", "set_end_allocate_to_pool_fn", "set_release_pool"):
        monkeypatch.delattr(FakeInner, setter)
    alloc = ct.enable()
    assert ct.oom_raises() and not ct.graph_pools()
    assert not {"begin_pool", "end_pool", "release_pool"} & set(alloc.allocator().hooks)


@needs_cxx
def test_shim_is_built_once(fake_torch, tmp_path):
    fake, ct = fake_torch
    a = ct.build_shim()
    t = os.stat(a).st_mtime_ns
    assert ct.build_shim() == a and os.stat(a).st_mtime_ns == t  # cached: not compiled again
    os.environ["CARVE_TORCH_SHIM"] = a
    try:
        assert ct.build_shim() == a
        os.environ["CARVE_TORCH_SHIM"] = str(tmp_path / "missing.so")
        with pytest.raises(carve.CarveError, match="missing.so: no such file") as e:
            ct.build_shim()
        assert e.value.status == "CARVE_ERR_BACKEND"
    finally:
        del os.environ["CARVE_TORCH_SHIM"]


def test_enable_raise_oom_false_uses_the_c_entry_points(fake_torch, L):
    fake, ct = fake_torch
    alloc = ct.enable(raise_oom=False)
    assert not ct.oom_raises()
    assert alloc.path == carve.library_path()
    assert (alloc.alloc_name, alloc.free_name) == ("carve_torch_alloc", "carve_torch_free")
    assert alloc.allocator().hooks["memory_fraction"] == _lib.address("carve_torch_set_memory_fraction")
    assert "begin_pool" not in alloc.allocator().hooks and not ct.graph_pools()  # C cannot take a std::function


def test_enable_without_a_compiler_warns_and_says_the_floor(fake_torch, L, monkeypatch):
    fake, ct = fake_torch
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    with pytest.raises(carve.CarveError, match="shim failed") as e:
        ct.enable(raise_oom=True)
    assert e.value.status == "CARVE_ERR_BACKEND" and not ct.is_enabled()
    with pytest.raises(carve.ConfigError, match="raise_oom='yes'"):
        ct.enable(raise_oom="yes")
    with pytest.warns(RuntimeWarning, match="NULL data pointer"):
        alloc = ct.enable()
    assert ct.is_enabled() and not ct.oom_raises() and alloc.alloc_name == "carve_torch_alloc"


SHIM_HARNESS = r"""
// Plays PyTorch's part: loads the shim, allocates through it on a capped
// HOST arena and catches what it throws.
#include <dlfcn.h>
#include <cstdio>
#include "c10/util/Exception.h"
#include "carve_frameworks.h"
int main(int argc, char **argv) {
    (void)argc;
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) { printf("dlopen: %s\n", dlerror()); return 1; }
    auto init = (int (*)(const char *))dlsym(h, "carve_torch_shim_init");
    auto alloc = (void *(*)(ssize_t, int, void *))dlsym(h, "carve_torch_shim_alloc");
    auto sfree = (void (*)(void *, ssize_t, int, void *))dlsym(h, "carve_torch_shim_free");
    auto frac = (void (*)(double, int))dlsym(h, "carve_torch_shim_set_fraction");
    if (init(argv[2]) != 0) { printf("init failed\n"); return 1; }
    carve_config c;
    carve_config_init(&c);
    c.backend = CARVE_BACKEND_HOST;
    c.limit_bytes = 8u << 20;
    c.name = "capped";
    carve_arena *a = nullptr;
    if (carve_arena_create(&c, &a) != CARVE_OK || carve_route_push(a) != CARVE_OK) { printf("setup\n"); return 1; }
    for (int round = 0; round < 2; round++) {
        void *p = alloc(1 << 20, 0, nullptr);
        printf("small %s\n", p ? "ok" : "NULL");
        try {
            void *big = alloc(64 << 20, 0, nullptr);
            printf("big: no exception (%p)\n", big);
        } catch (const c10::OutOfMemoryError &e) {
            printf("big: OutOfMemoryError: %s\n", e.what());
        } catch (const std::exception &e) {
            printf("big: other exception: %s\n", e.what());
        }
        sfree(p, 1 << 20, 0, nullptr);
    }
    printf("zero %s\n", alloc(0, 0, nullptr) ? "not NULL" : "NULL");
    void *q = alloc(6 << 20, 0, nullptr); // after the errors the arena goes on
    printf("after %s\n", q ? "ok" : "NULL");
    sfree(q, 6 << 20, 0, nullptr);
    try {
        frac(0.5, 3);
        printf("fraction: no exception\n");
    } catch (const c10::OutOfMemoryError &e) {
        printf("fraction: OutOfMemoryError\n");
    } catch (const c10::Error &e) {
        printf("fraction: Error: %s\n", e.what());
    }
    // Failures that are not out of memory: a routed arena forgotten (as one
    // retired by another thread) and a negative size.
    carve_config c2;
    carve_config_init(&c2);
    c2.backend = CARVE_BACKEND_HOST;
    carve_arena *b = nullptr;
    if (carve_arena_create(&c2, &b) != CARVE_OK || carve_route_push(b) != CARVE_OK ||
        carve_route_forget(b) != CARVE_OK) { printf("setup b\n"); return 1; }
    for (ssize_t size : {(ssize_t)4096, (ssize_t)-5}) {
        try {
            void *p = alloc(size, 0, nullptr);
            printf("not oom %zd: no exception (%p)\n", size, p);
        } catch (const c10::OutOfMemoryError &e) {
            printf("not oom %zd: OutOfMemoryError: %s\n", size, e.what());
        } catch (const c10::Error &e) {
            printf("not oom %zd: Error: %s\n", size, e.what());
        }
    }
    carve_route_pop();
    carve_arena_destroy(b);
    carve_route_pop();
    int destroyed = 0;
    carve_route_retire(a, &destroyed);
    printf("destroyed %d\n", destroyed);
    return 0;
}
"""


@needs_cxx
def test_shim_raises_pytorchs_oom_with_carves_explanation(fake_torch, fake_torch_tree, tmp_path, L):
    fake, ct = fake_torch
    shim = ct.build_shim()
    src = tmp_path / "harness.cpp"
    src.write_text(SHIM_HARNESS)
    exe = tmp_path / "harness"
    lib = os.path.realpath(carve.library_path())
    subprocess.run([cxx(), "-std=c++17", "-I", os.path.join(fake_torch_tree, "include"), "-I",
                    os.path.join(CHECKOUT, "include"), str(src), lib, f"-Wl,-rpath,{os.path.dirname(lib)}", "-ldl",
                    "-o", str(exe)], check=True, timeout=300)
    out = subprocess.run([str(exe), shim, lib], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    big = [l for l in lines if l.startswith("big:")]
    assert len(big) == 2 and all(l.startswith("big: OutOfMemoryError: CUDA out of memory (carve).") for l in big)
    assert "Tried to allocate 67108864 bytes on device 0" in big[0]
    assert "out of memory" in big[0].split("(carve).", 1)[1] and "'capped'" in big[0] and "limit 8.00 MiB" in big[0]
    assert lines.count("small ok") == 2 and "zero NULL" in lines and "after ok" in lines
    assert any(l.startswith("fraction: Error: carve cannot apply set_per_process_memory_fraction(0.5, 3)")
               and "[CARVE_ERR_NO_DEVICE]" in l for l in lines), lines
    assert "destroyed 1" in lines
    forgotten = [l for l in lines if l.startswith("not oom 4096:")]
    assert len(forgotten) == 1 and forgotten[0].startswith("not oom 4096: Error: carve cannot allocate 4096 bytes "
                                                          "on device 0: carve_route_alloc: the arena this thread "
                                                          "routes to"), lines
    assert forgotten[0].endswith("[CARVE_ERR_INVALID]"), forgotten
    negative = [l for l in lines if l.startswith("not oom -5:")]
    assert negative == ["not oom -5: Error: carve cannot allocate a negative size (-5 bytes) [CARVE_ERR_INVALID]"], \
        lines


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


def test_failed_frees_are_counted(fake_torch, host_arena, L):
    """A free carve cannot make (a pointer it never handed out, or freed
    twice) changes nothing but is counted, so a test can tell memory the
    framework believes freed from memory carve still holds."""
    fake, ct = fake_torch
    ct.enable()
    a = host_arena()
    before = ct.failed_frees()
    with carve.route(a):
        p = L.carve_torch_alloc(MiB, 0, None)
    L.carve_torch_free(p, MiB, 0, None)
    assert ct.failed_frees() == before
    L.carve_torch_free(p, MiB, 0, None)           # twice
    L.carve_cupy_free(None, ctypes.c_void_p(0x1000), 0)  # never carve's
    assert ct.failed_frees() == before + 2
    assert a.memory_allocated() == 0


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
    ct.enable(raise_oom=False)
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
    assert L.carve_route_current() is None and L.carve_route_device_current(0) is None
    assert scope.routes_backward is True
    assert scope.closed_at_exit is False and scope.last_stats["num_live"] == 1
    assert scope.last_stats["num_ooms"] == 1
    assert L.carve_route_known(h)
    L.carve_torch_free(x, MiB, 0, 0x77)  # the last tensor dies: the arena goes
    assert not L.carve_route_known(h)


def test_arena_as_decorator_and_nested(fake_torch, L):
    fake, ct = fake_torch
    ct.enable(raise_oom=False)
    inner_scope = ct.arena(backend="host", clear_workspaces=False)
    handles = []

    @ct.arena(backend="host", limit="8MiB")
    def step():
        outer = L.carve_route_current()
        assert L.carve_route_device_current(0) == outer
        with inner_scope as b:
            assert L.carve_route_current() == b._h != outer
            assert L.carve_route_device_current(0) == b._h  # the inner block's, for its time
            p = L.carve_torch_alloc(100, 0, None)
            L.carve_torch_free(p, 100, 0, None)
        assert L.carve_route_device_current(0) == outer
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
    scope = ct.arena(backend="host", limit="64MiB")
    with scope as a:
        # PyTorch's allocator asks the pool's allocator for a segment on this thread.
        seg = L.carve_torch_alloc(20 * MiB, 0, None)
        assert a.buffer_info(seg) == (20 * MiB, 0)
        h = a._h
    assert len(fake.pools) == 1
    pool_alloc = fake.pools[0].allocator
    maker = [m for m in fake.made if m.allocator() is pool_alloc][0]
    names = (maker.alloc_name, maker.free_name)
    assert names in ((ct.SHIM_ALLOC, ct.SHIM_FREE), ("carve_torch_alloc", "carve_torch_free"))
    assert maker.path == (carve.library_path() if names[0] == "carve_torch_alloc" else ct.build_shim())
    assert scope.routes_backward is False  # use_mem_pool routes this thread only
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


def _alloc_on_new_thread(L, n=1000):
    out = []
    t = threading.Thread(target=lambda: out.append(L.carve_torch_alloc(n, 0, None)))
    t.start()
    t.join()
    return out[0]


def test_arena_routes_autograds_threads(fake_torch, L):
    """Backward runs on PyTorch's own threads, which push nothing: the block
    routes the device's unrouted threads to its arena too."""
    fake, ct = fake_torch
    ct.enable(raise_oom=False)
    with ct.arena(backend="host", limit="16MiB") as a:
        p = _alloc_on_new_thread(L)  # as autograd's device thread would
        assert p and a.buffer_info(p) == (1000, 0)
        s = a.stats()
        assert s["num_live"] == 1
    L.carve_torch_free(p, 1000, 0, None)
    assert L.carve_route_device_current(0) is None
    # Without backward=True only this thread is routed: the other thread goes
    # to the device's default arena (none here without a GPU).
    with ct.arena(backend="host", backward=False) as b:
        q = _alloc_on_new_thread(L)
        assert q is None or b.buffer_info(q) is None
    if q:
        L.carve_torch_free(q, 1000, 0, None)


def test_a_concurrent_block_routes_its_own_thread_only(fake_torch, L):
    fake, ct = fake_torch
    ct.enable(raise_oom=False)
    seen = {}
    inside, done = threading.Event(), threading.Event()

    def other():
        with ct.arena(backend="host") as b:
            seen["b"] = b._h
            inside.set()
            done.wait(30)
        seen["scope_b"] = True

    scope_a = ct.arena(backend="host")
    with scope_a as a:
        t = threading.Thread(target=other)
        t.start()
        assert inside.wait(30)
        assert L.carve_route_device_current(0) == a._h  # the first block keeps the device's route
        done.set()
        t.join()
    assert scope_a.routes_backward is True
    assert L.carve_route_device_current(0) is None


def test_set_memory_fraction_takes_a_torch_device(fake_torch, L):
    fake, ct = fake_torch
    with pytest.raises(carve.ConfigError, match="'cpu'"):
        ct.set_memory_fraction(0.5, types_device("cpu", None))
    if carve.device_count() == 0:
        with pytest.raises(carve.CarveError, match="device 1 does not exist"):
            ct.set_memory_fraction(0.5, "cuda:1")


def types_device(kind, index):
    import types
    return types.SimpleNamespace(type=kind, index=index)
