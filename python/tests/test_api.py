"""test_api.py — the package's API on HOST-backend arenas: arenas and their
errors, the torch.cuda-shaped statistics, peaks, empty_cache, snapshots, the
report, configure's errors, routing and scoped arenas, recording and plot.

The one idea: a HOST arena is the real engine over real host memory, so
every number checked here (bytes allocated, peaks, what empty_cache gives
back) is what the same calls report on a GPU; only the device queries are
checked for their error, since this machine has no GPU.
"""

import ctypes
import json
import os
import pickle
import re
import subprocess
import sys
import threading

import pytest

import carve
from carve import _lib

MiB = 1 << 20


def gpu():
    return carve.device_count() > 0


# ---- Arenas and their errors -----------------------------------------------

def test_arena_alloc_free_and_stats(host_arena):
    a = host_arena(limit="64MiB", name="stats")
    p = a.alloc(1000)
    q = a.alloc(3 * MiB, stream=0x40)
    assert p and q and p % 256 == 0
    ctypes.memset(p, 0x5A, 1000)  # host memory: really there
    assert a.buffer_info(p) == (1000, 0)
    assert a.buffer_info(q) == (3 * MiB, 0x40)
    s = a.stats()
    assert s["num_live"] == 2 and s["num_allocs"] == 2 and s["num_frees"] == 0
    assert s["requested_bytes"] == 1000 + 3 * MiB
    assert s["allocated_bytes"] == 1024 + 3 * MiB
    assert s["allocated_bytes.all.current"] == s["allocated_bytes"]
    assert s["limit_bytes"] == 64 * MiB
    assert a.memory_allocated() == 1024 + 3 * MiB
    assert carve.memory_allocated(a) == a.memory_allocated()
    assert a.memory_reserved() >= 4 * MiB and a.memory_reserved() % (2 * MiB) == 0
    a.free(p)
    a.free(q)
    assert a.memory_allocated() == 0
    assert a.stats()["num_frees"] == 2
    a.check()


def test_zero_size_and_bad_sizes(host_arena):
    a = host_arena()
    assert a.alloc(0) == 0
    for bad in (-1, 1.5, "10", True):
        with pytest.raises(ValueError, match=re.escape(f"size={bad!r}")):
            a.alloc(bad)


def test_out_of_memory_explains(host_arena):
    a = host_arena(limit="8MiB", name="small")
    p = a.alloc(6 * MiB)
    with pytest.raises(carve.OutOfMemoryError) as e:
        a.alloc(6 * MiB)
    msg = str(e.value)
    assert e.value.status == "CARVE_ERR_OOM"
    assert "out of memory" in msg and "'small'" in msg and "limit 8.00 MiB" in msg
    assert a.stats()["num_ooms"] == 1
    a.free(p)
    assert a.alloc(6 * MiB)  # usable again after the OOM


def test_free_errors_name_the_pointer(host_arena):
    a, b = host_arena(), host_arena()
    p = a.alloc(4096)
    with pytest.raises(carve.CarveError, match=f"{p:#x} is not a live buffer of this arena"):
        b.free(p)
    with pytest.raises(carve.CarveError, match=f"{p + 256:#x}"):
        a.free(p + 256)  # interior
    a.free(p)
    with pytest.raises(carve.CarveError, match="not a live buffer"):
        a.free(p)  # twice
    a.free(0)  # free(NULL) is fine


@pytest.mark.parametrize("kw, words", [
    (dict(limit="8XB"), ["'8XB'", "'limit'"]),
    (dict(limit=1.5), ["limit=1.5", "(0, 1]"]),
    (dict(limit=-5), ["limit=-5", "negative"]),
    (dict(limit=True), ["limit=True"]),
    (dict(limit="1,backend=virtual"), ["limit='1,backend=virtual'"]),
    (dict(initial="lots"), ["'lots'", "'initial'"]),
    (dict(limit="1000"), ["1000 B", "below one granule"]),
    (dict(growth=False), ["growth is off and initial_bytes is 0"]),
    (dict(limit="4MiB", initial="16MiB"), ["initial"]),
    (dict(backend="tpu"), ["backend='tpu'"]),
    (dict(mode="huge"), ["mode='huge'"]),
    (dict(device=-1), ["device=-1"]),
    (dict(conf="min_grow=7Q"), ["'7Q'", "min_grow"]),
])
def test_arena_config_errors_name_the_value(L, kw, words):
    kw.setdefault("backend", "host")
    with pytest.raises(carve.CarveError) as e:
        carve.Arena(**kw)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_arena_config_as_given(host_arena):
    a = host_arena(limit="32MiB", initial="4MiB", growth=False, name="fixed")
    c = a.config()
    assert c == {"backend": "host", "device": 0, "limit_bytes": 32 * MiB, "initial_bytes": 4 * MiB,
                 "growth": False, "vmm": False, "name": "fixed"}
    assert a.memory_reserved() == 4 * MiB
    with pytest.raises(carve.OutOfMemoryError):
        a.alloc(5 * MiB)  # one block, no growth
    v = host_arena(backend="virtual", limit="1TiB", mode="vmm")
    assert v.config()["vmm"] is True and v.config()["limit_bytes"] == 1 << 40
    assert host_arena(limit=None).config()["limit_bytes"] is None
    assert host_arena(limit=3 * MiB).config()["limit_bytes"] == 2 * MiB  # rounded down to the granule


def test_closed_arena_refuses_use(host_arena, L):
    a = host_arena()
    p = a.alloc(100)
    h = a._h
    assert a.close() is False  # a live buffer: retired, never destroyed under it
    assert a.close() is False  # idempotent
    assert a.closed and a.state == "retired" and "retired" in repr(a)
    ctypes.memset(p, 0x33, 100)  # still valid
    with pytest.raises(carve.CarveError, match="arena is retired") as e:
        a.alloc(100)
    assert e.value.status == "CARVE_ERR_INVALID"
    with pytest.raises(carve.CarveError, match="arena is retired"):
        carve.memory_allocated(a)
    assert L.carve_route_known(h)
    assert L.carve_route_free(p, 0) == _lib.OK  # its last buffer: now it is destroyed
    assert not L.carve_route_known(h)
    with carve.Arena(backend="host") as b:
        assert not b.closed
    assert b.closed and b.state == "closed"


def test_with_block_never_frees_a_live_buffer(host_arena, L):
    """A buffer made inside `with Arena(...) as a, route(a)` outlives the block:
    its memory is not handed to anything else until it is freed (the arena
    is retired, as torch.cuda.MemPool keeps its memory until its tensors die)."""
    with carve.Arena(backend="host", limit="64MiB") as a, carve.route(a):
        t = L.carve_torch_alloc(MiB, 0, None)
        ctypes.memset(t, 7, MiB)
        h = a._h
    assert a.state == "retired" and L.carve_route_known(h)
    other = host_arena()
    with carve.route(other):
        u = L.carve_torch_alloc(MiB, 0, None)
    ctypes.memset(u, 3, MiB)
    assert u != t and ctypes.string_at(t, MiB) == bytes([7]) * MiB  # t kept its values
    L.carve_torch_free(t, MiB, 0, None)
    assert not L.carve_route_known(h)  # memory back with the last buffer
    L.carve_torch_free(u, MiB, 0, None)


def test_dropping_the_last_reference_retires(L):
    import gc
    a = carve.Arena(backend="host")
    p = a.alloc(4096)
    h = a._h
    del a
    gc.collect()
    assert L.carve_route_known(h)  # retired, not destroyed: p is live
    ctypes.memset(p, 1, 4096)
    assert L.carve_route_free(p, 0) == _lib.OK
    assert not L.carve_route_known(h)


def test_close_while_routed_is_refused(host_arena, L):
    a = host_arena()
    with carve.route(a):
        with pytest.raises(carve.CarveError, match="pop it first") as e:
            a.close()
        assert e.value.status == "CARVE_ERR_INVALID" and not a.closed
    assert a.close() is True and a.state == "closed"


def test_arena_calls_race_close_safely(L):
    """Threads allocating from an Arena while another closes it: each call
    either succeeds (its buffer stays valid) or raises 'arena is retired'."""
    a = carve.Arena(backend="host")
    got, errors = [], []

    def work():
        for _ in range(300):
            try:
                got.append(a.alloc(512))
            except carve.CarveError as e:
                errors.append(e.status)

    ts = [threading.Thread(target=work) for _ in range(3)]
    for t in ts:
        t.start()
    a.close()
    for t in ts:
        t.join()
    assert set(errors) <= {"CARVE_ERR_INVALID"}
    for p in got:
        ctypes.memset(p, 1, 512)
        assert L.carve_route_free(p, 0) == _lib.OK


# ---- Peaks, reset, empty_cache ----------------------------------------------

def test_peaks_and_reset(host_arena):
    a = host_arena()
    big = a.alloc(10 * MiB)
    small = a.alloc(MiB)
    a.free(big)
    assert carve.memory_allocated(a) == MiB
    assert carve.max_memory_allocated(a) == 11 * MiB
    peak_reserved = carve.max_memory_reserved(a)
    assert peak_reserved >= 11 * MiB
    carve.reset_peak_memory_stats(a)
    assert carve.max_memory_allocated(a) == MiB
    assert carve.max_memory_reserved(a) == carve.memory_reserved(a)
    x = a.alloc(2 * MiB)
    assert carve.max_memory_allocated(a) == 3 * MiB
    a.free(x)
    a.free(small)


def test_empty_cache_gives_memory_back(host_arena):
    a = host_arena()
    ptrs = [a.alloc(n) for n in (30 * MiB, 5 * MiB, 1000, 64 << 10)]
    assert carve.memory_reserved(a) >= 35 * MiB
    before = carve.memory_reserved(a)
    keep = ptrs.pop()
    for p in ptrs:
        a.free(p)
    assert carve.memory_reserved(a) == before  # freed memory stays cached ...
    carve.empty_cache(a)
    s = a.stats()
    assert 0 < s["reserved_bytes"] <= before - 30 * MiB  # ... until empty_cache; the live buffer's segment stays
    assert s["num_backend_frees"] >= 1
    a.free(keep)
    a.empty_cache()
    assert a.memory_reserved() == 0
    assert a.stats()["reserved_bytes_peak"] >= 35 * MiB  # the peak remembers


# ---- Snapshot and report -----------------------------------------------------

def test_snapshot_structure(host_arena):
    a = host_arena(limit="16MiB", name="snap")
    p = a.alloc(3000, stream=0x10)
    snap = carve.memory_snapshot(a)
    assert snap["carve_snapshot"] == 1
    assert snap["arena"]["name"] == "snap" and snap["arena"]["backend"] == "host"
    assert snap["arena"]["limit_bytes"] == 16 * MiB
    assert snap["stats"]["num_live"] == 1 and snap["stats"]["requested_bytes"] == 3000
    assert len(snap["streams"]) == 1 and int(snap["streams"][0]["stream"], 16) == 0x10
    used = [(seg, b) for seg in snap["segments"] for r in seg["ranges"] for b in r.get("blocks", [])
            if b["state"] == "used"]
    assert len(used) == 1
    seg, b = used[0]
    assert int(seg["address"], 16) + b["offset"] == p
    assert b["requested"] == 3000 and b["size"] == 3072
    a.free(p)
    assert a.snapshot()["stats"]["num_live"] == 0


def test_snapshot_is_json_for_any_name(host_arena):
    # A name cut at 63 bytes used to split a character (invalid UTF-8: the
    # strict decode in memory_snapshot failed), and the default stream came
    # out as "(nil)".
    a = host_arena(limit="16MiB", name="a" * 62 + "\u00e9")
    assert a.config()["name"] == "a" * 62
    p = a.alloc(3000)
    snap = json.loads(json.dumps(carve.memory_snapshot(a)))
    assert snap["arena"]["name"] == "a" * 62
    assert snap["streams"][0]["stream"] == "0x0"
    blocks = [b for seg in snap["segments"] for r in seg["ranges"] for b in r.get("blocks", [])]
    assert blocks and all(int(b["stream"], 16) == 0 for b in blocks)
    a.free(p)
    b = host_arena(limit="16MiB", name="\u00e9" * 40)  # 80 bytes: 31 characters fit in 63
    assert carve.memory_snapshot(b)["arena"]["name"] == "\u00e9" * 31


def test_report_text(host_arena):
    a = host_arena(limit="64MiB", name="model-a")
    b = host_arena(name="model-b")
    p = a.alloc(3 * MiB)
    text = carve.report([a, b])
    lines = text.splitlines()
    assert lines[0] == "carve memory report"
    assert "model-a" in lines[1] and "model-b" in lines[1]
    row = {l.split("  ")[0].strip(): l for l in lines[2:]}
    assert "3.00 MiB" in row["allocated"]
    assert "64.00 MiB" in row["limit"] and "unlimited" in row["limit"]
    assert re.search(r"1 / 0\s+0 / 0$", row["allocs / frees"])
    assert carve.report(a).splitlines()[1].split() == ["model-a"]
    a.free(p)


# ---- Devices and configure (no GPU here) -----------------------------------

def test_device_functions_without_gpu(L):
    if gpu():
        pytest.skip("this machine has a GPU")
    for fn in (carve.memory_allocated, carve.memory_reserved, carve.memory_stats, carve.empty_cache,
               carve.memory_snapshot, carve.mem_get_info, carve.memory_summary, carve.reset_peak_memory_stats):
        for d in (0, None, "cuda", "cuda:0"):
            with pytest.raises(carve.CarveError) as e:
                fn(d)
            assert e.value.status == "CARVE_ERR_NO_DEVICE", (fn.__name__, d)
    with pytest.raises(carve.CarveError, match="device 3 does not exist"):
        carve.max_memory_allocated(3)
    with pytest.raises(carve.CarveError, match="device 2 does not exist"):
        carve.memory_stats("cuda:2")


class _Device:
    """What torch.device looks like to carve: .type and .index."""

    def __init__(self, kind, index):
        self.type, self.index = kind, index


@pytest.mark.parametrize("given, want", [
    (0, 0), (3, 3), ("cuda:2", 2), (" cuda:5 ", 5), (_Device("cuda", 1), 1), (None, 0), ("cuda", 0),
    (_Device("cuda", None), 0),
])
def test_devices_as_torch_cuda_takes_them(given, want, monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    assert carve._api._check_device(given) == want


@pytest.mark.parametrize("bad", [-1, True, "cpu", "cuda:x", "1", 1.0, _Device("cpu", 0), object()])
def test_bad_devices_are_named(bad):
    with pytest.raises(carve.ConfigError) as e:
        carve._api._check_device(bad)
    assert repr(bad) in str(e.value) and e.value.status == "CARVE_ERR_INVALID"


def test_none_is_the_current_device(monkeypatch):
    """None means the current device of the framework in use: PyTorch's once
    CUDA is initialized (asking never initializes it), else CuPy's."""
    import types
    calls = []
    cuda = types.SimpleNamespace(is_initialized=lambda: False, current_device=lambda: calls.append(1) or 3)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    assert carve.current_device() == 0 and calls == []  # not initialized: not asked
    cuda.is_initialized = lambda: True
    assert carve.current_device() == 3 and carve._api._check_device(None) == 3
    assert carve._api._check_device(_Device("cuda", None)) == 3
    monkeypatch.delitem(sys.modules, "torch")
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(
        cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(getDevice=lambda: 2))))
    assert carve.current_device() == 2


def test_asking_never_creates_the_default_arena(L, monkeypatch):
    """A statistics query must not make the device's default arena (which would
    fix its configuration before the program's first allocation)."""
    made = []

    class Spy:
        def __getattr__(self, name):
            if name == "carve_device_arena":
                made.append(name)
            return getattr(L, name)

    monkeypatch.setattr(carve._api, "lib", lambda: Spy())
    for fn in (carve.memory_allocated, carve.memory_reserved, carve.memory_stats, carve.max_memory_allocated,
               carve.max_memory_reserved, carve.reset_peak_memory_stats, carve.empty_cache, carve.memory_snapshot,
               carve.memory_summary):
        try:
            fn(0)
        except carve.CarveError as e:
            assert e.status == "CARVE_ERR_NO_DEVICE"
    assert made == []


@pytest.mark.parametrize("kw, words", [
    (dict(limit="8XB"), ["'8XB'", "'limit'"]),
    (dict(limit=2.0), ["limit=2.0", "(0, 1]"]),
    (dict(initial=-1), ["initial=-1"]),
    (dict(mode="fast"), ["mode='fast'"]),
    (dict(device=-2), ["device=-2"]),
    (dict(growth=False), ["growth=0", "initial"]),
    (dict(growth="false"), ["growth='false'", "True or False"]),  # a truthy string is not True
    (dict(growth=1), ["growth=1", "True or False"]),
    # the rules of carve_config_check, judged before the device is asked
    (dict(limit=1), ["limit=1", "below one granule"]),
    (dict(limit="1MiB"), ["limit=1048576", "below one granule"]),
    (dict(limit="4MiB", initial="8MiB"), ["initial=", "larger than limit="]),
    (dict(device=0, limit="4MiB", initial="8MiB"), ["larger than"]),
])
def test_configure_bad_values_named_before_any_device(L, kw, words, monkeypatch):
    monkeypatch.delenv("CARVE_CONF", raising=False)
    with pytest.raises(carve.ConfigError) as e:
        carve.configure(**kw)
    for w in words:
        assert w in str(e.value), str(e.value)
    assert e.value.status == "CARVE_ERR_INVALID"
    assert "CARVE_CONF" not in os.environ  # nothing changed


def test_configure_judges_values_with_carve_conf_and_earlier_calls(L, monkeypatch):
    """The arena configure() would make is checked whole: CARVE_CONF's
    initial block against the limit given now."""
    monkeypatch.setenv("CARVE_CONF", "initial=64MiB")
    with pytest.raises(carve.ConfigError, match="larger than"):
        carve.configure(device=0, limit="32MiB")
    assert os.environ["CARVE_CONF"] == "initial=64MiB"


def test_configure_without_device(L, monkeypatch):
    if gpu():
        pytest.skip("this machine has a GPU")
    monkeypatch.delenv("CARVE_CONF", raising=False)
    with pytest.raises(carve.CarveError) as e:
        carve.configure(device=0, limit="8GiB", growth=True)
    assert e.value.status == "CARVE_ERR_NO_DEVICE" and "device 0 does not exist" in str(e.value)
    assert "CARVE_CONF" not in os.environ  # nothing changed


def _stand_in_runtime():
    """The directory of the stand-in CUDA runtime the C tests use (two
    devices of host memory: tests/frameworks/fake_cudart.c) in the build
    this libcarve comes from; None when that build has none (no CUDA)."""
    build = os.path.dirname(os.path.dirname(os.path.realpath(carve.library_path())))
    d = os.path.join(build, "tests", "frameworks")
    return d if os.path.isfile(os.path.join(d, "libcudart.so.13")) else None


STAND_IN_CONFIGURE = r"""
import ctypes, carve
from carve import _lib
L = _lib.lib()
assert carve.device_count() == 2, carve.device_count()
# Refused by the device (a fraction that leaves less than a granule of its
# memory) after every value passed the checks: nothing may be set.
try:
    carve.configure(device=1, growth=False, initial="64MiB", limit=1e-9)
    print("configure: no error")
except carve.CarveError as e:
    print("refused", type(e).__name__, e.status)
cfg = _lib.CarveConfig()
h = carve._api._arena_handle(1, create=True)  # made with the defaults: growth on
L.carve_arena_get_config_sized(h, ctypes.byref(cfg), ctypes.sizeof(cfg))
print("growth", cfg.growth, "initial", cfg.initial_bytes)
# A limit set before first use holds; after it, configure says so.
carve.configure(device=0, limit="1GiB")
p = L.carve_torch_alloc(4096, 0, None)
print("limit", carve.memory_stats(0)["limit_bytes"], "allocated", carve.memory_allocated(0))
try:
    carve.configure(device=0, limit="2GiB")
except carve.ConfigError as e:
    print("late", "before first use" in str(e))
L.carve_torch_free(p, 4096, 0, None)
print("freed", carve.memory_allocated(0))
"""


def test_configure_on_a_device_changes_nothing_when_refused():
    """With a device, a refused configure() leaves no half of it behind
    (growth was once set before the limit was refused)."""
    runtime = _stand_in_runtime()
    if runtime is None:
        pytest.skip("this build has no stand-in CUDA runtime (built without CUDA)")
    env = dict(os.environ, LD_LIBRARY_PATH=runtime, CARVE_CONF="vmm=0",
               PYTHONPATH=os.path.dirname(os.path.dirname(carve.__file__)))
    out = subprocess.run([sys.executable, "-c", STAND_IN_CONFIGURE], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.splitlines() == ["refused ConfigError CARVE_ERR_INVALID", "growth 1 initial 0",
                                       f"limit {1 << 30} allocated 4096", "late True", "freed 0"], out.stdout


def test_configure_reports_bad_carve_conf(L, monkeypatch):
    monkeypatch.setenv("CARVE_CONF", "limit=lots")
    with pytest.raises(carve.ConfigError, match="CARVE_CONF.*lots"):
        carve.configure(limit="1GiB")


# ---- Routing and scoped arenas ----------------------------------------------

def test_route_sends_framework_allocations(host_arena, L):
    a, b = host_arena(), host_arena()
    with carve.route(a):
        assert L.carve_route_current() == a._h
        p = L.carve_torch_alloc(5000, 0, None)
        with carve.route(b):
            q = L.carve_torch_alloc(100, 0, None)
        r = L.carve_cupy_malloc(0x99, 200, 0)
    assert L.carve_route_current() is None
    assert a.buffer_info(p) == (5000, 0) and b.buffer_info(q) == (100, 0) and a.buffer_info(r) == (200, 0x99)
    for x in (p, q, r):
        L.carve_torch_free(x, 0, 0, None)
    assert a.memory_allocated() == b.memory_allocated() == 0
    with pytest.raises(TypeError):
        with carve.route(a._h):
            pass


def test_scoped_arena_closes_when_last_buffer_goes(L):
    scope = carve.scoped_arena(backend="host", limit="16MiB", name="scoped")
    with scope as a:
        h = a._h
        p = L.carve_torch_alloc(MiB, 0, None)
        assert a.buffer_info(p) == (MiB, 0)
        assert L.carve_torch_alloc(32 * MiB, 0, None) is None  # over its own cap
        assert "out of memory" in L.carve_last_error(None).decode()
    assert L.carve_route_current() is None
    assert scope.closed_at_exit is False and scope.last_stats["num_live"] == 1
    assert L.carve_route_known(h)
    t = threading.Thread(target=L.carve_torch_free, args=(p, MiB, 0, None))
    t.start()
    t.join()
    assert not L.carve_route_known(h)  # destroyed by the last free, on another thread


def test_scoped_arena_as_decorator(L):
    seen = []
    scope = carve.scoped_arena(backend="host")

    @scope
    def work(n):
        cur = L.carve_route_current()
        seen.append(cur)
        p = L.carve_torch_alloc(n, 0, None)
        L.carve_torch_free(p, n, 0, None)
        if n == 0:
            raise KeyError("boom")
        return n

    assert work(100) == 100 and work(200) == 200
    with pytest.raises(KeyError):
        work(0)
    assert all(seen) and len(seen) == 3
    assert scope.closed_at_exit is True and scope.last_stats["num_allocs"] == 0
    assert L.carve_route_current() is None
    assert not any(L.carve_route_known(h) for h in seen)


def test_routes_are_per_thread(host_arena, L):
    a, b = host_arena(), host_arena()
    out = {}

    def worker(arena, key):
        with carve.route(arena):
            out[key] = [L.carve_torch_alloc(4096, 0, None) for _ in range(50)]

    ts = [threading.Thread(target=worker, args=(a, "a")), threading.Thread(target=worker, args=(b, "b"))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert a.stats()["num_live"] == 50 and b.stats()["num_live"] == 50
    assert all(a.buffer_info(p)[0] == 4096 for p in out["a"])
    for p in out["a"] + out["b"]:
        L.carve_torch_free(p, 4096, 0, None)
    assert a.memory_allocated() == b.memory_allocated() == 0


# ---- Recording and pictures ---------------------------------------------------

def test_plot_draws_a_recorded_session(host_arena, tmp_path, L):
    a = host_arena(limit="256MiB")
    trace = carve.record(str(tmp_path / "session.csv"))
    with pytest.raises(carve.CarveError, match="already recording"):
        carve.record()
    live = []
    for i in range(200):
        live.append(a.alloc((i % 13 + 1) * 37 * 1024, stream=(i % 3) * 0x100))
        if i % 3 == 2:
            a.free(live.pop(0))
    with carve.route(a):
        t = L.carve_torch_alloc(8 * MiB, 0, None)
    info = carve.plot(str(tmp_path / "live.svg"))  # while still recording
    assert info["allocations"] == 201 and info["events"] == 201 + 66
    L.carve_torch_free(t, 0, 0, None)
    for p in live:
        a.free(p)
    assert carve.stop_recording() == trace
    assert carve.stop_recording() is None
    a.alloc(123)  # not recorded any more

    lines = [l for l in open(trace) if not l.startswith("#")]
    assert sum(l.startswith("a,") for l in lines) == 201
    assert sum(l.startswith("f,") for l in lines) == 201
    assert {l.split(",")[3] for l in lines if l.startswith("a,")} == {"0", "1", "2"}

    info = carve.plot(str(tmp_path / "arena.svg"), title="host session")
    assert info["trace"] == trace and info["allocations"] == 201
    assert info["peak_requested_bytes"] > 8 * MiB and info["footprint"] >= 1.0
    svg = (tmp_path / "arena.svg").read_text()
    assert svg.lstrip().startswith("<") and "<svg" in svg and "</svg>" in svg and "host session" in svg
    assert os.path.getsize(tmp_path / "live.svg") > 1000


def test_plot_errors(tmp_path, L):
    with pytest.raises(carve.CarveError, match="start recording with carve.record"):
        carve.plot(str(tmp_path / "x.svg"))
    with pytest.raises(carve.CarveError, match="cannot read the trace"):
        carve.plot(str(tmp_path / "x.svg"), trace=str(tmp_path / "missing.csv"))
    empty = tmp_path / "empty.csv"
    empty.write_text("# nothing\n")
    with pytest.raises(carve.CarveError, match="holds no allocation"):
        carve.plot(str(tmp_path / "x.svg"), trace=str(empty))
    t = tmp_path / "t.csv"
    t.write_text("a,1,1000\na,2,5000000,1\nf,1\nf,2\n")
    with pytest.raises(OSError, match="cannot write"):
        carve.plot(str(tmp_path / "no" / "dir" / "x.svg"), trace=str(t))
    info = carve.plot(str(tmp_path / "t.svg"), trace=str(t), mode="vmm", color_by_stream=True)
    assert info["allocations"] == 2 and (tmp_path / "t.svg").stat().st_size > 500


def test_version_and_library_path(L):
    assert re.fullmatch(r"\d+\.\d+\.\d+", carve.version())
    assert os.path.exists(carve.library_path()) or carve.library_path().startswith("libcarve")


def test_memory_stats_has_the_driver_ledger():
    """The virtual backend counts the calls the CUDA backend would make: a
    5 MiB buffer in untouched room is 3 granules, the 2 it covers whole one
    mapping and the last one of its own, each created, mapped and let go,
    and one cuMemSetAccess over both; the modeled time grows with them."""
    with carve.Arena(backend="virtual", mode="vmm") as a:
        s0 = carve.memory_stats(a)
        assert s0["driver_calls"] == {"cuMemAddressReserve": 1}
        p = a.alloc(5 * MiB)
        s = carve.memory_stats(a)
        calls = s["driver_calls"]
        assert (calls["cuMemCreate"], calls["cuMemMap"], calls["cuMemRelease"], calls["cuMemSetAccess"]) == (2, 2, 2, 1)
        assert s["driver_model_ns"] > s0["driver_model_ns"] > 0
        assert s["num_backend_allocs"] == 3 + 1  # the engine counts granules mapped, and the address space
        a.free(p)


# ---- PyTorch's names: memory_stats keys, memory_summary, snapshots -----------

def test_memory_stats_has_pytorchs_keys_with_their_meaning(host_arena):
    a = host_arena(limit="64MiB")
    ps = [a.alloc(n) for n in (1000, 3 * MiB, 5000)]
    a.free(ps.pop())
    s = carve.memory_stats(a)
    assert s["arena_exists"] is True
    assert s["allocated_bytes.all.current"] == a.memory_allocated() == 1024 + 3 * MiB
    assert s["allocated_bytes.all.peak"] == s["allocated_bytes_peak"] >= s["allocated_bytes.all.current"]
    assert s["requested_bytes.all.current"] == 1000 + 3 * MiB
    assert s["reserved_bytes.all.current"] == a.memory_reserved()
    assert (s["allocation.all.current"], s["allocation.all.allocated"], s["allocation.all.freed"]) == (2, 3, 1)
    assert s["segment.all.current"] == s["num_segments"] >= 1
    assert s["segment.all.allocated"] == s["num_device_alloc"] == s["num_backend_allocs"]
    assert s["num_ooms"] == 0 and "num_sync_all_streams" in s
    with pytest.raises(carve.OutOfMemoryError):
        a.alloc(100 * MiB)
    assert carve.memory_stats(a)["num_ooms"] == 1
    for key in carve.MISSING_TORCH_STATS:  # keys carve cannot give are not made up
        assert key not in s
    for p in ps:
        a.free(p)


def test_memory_summary(host_arena):
    a = host_arena(limit="64MiB", name="summ")
    p = a.alloc(3 * MiB)
    text = carve.memory_summary(a)
    lines = text.splitlines()
    assert "carve memory summary, arena summ" in lines[1]
    assert len({len(l) for l in lines}) == 1  # a table: every line as wide
    row = {l.split("|")[1].strip(): l for l in lines if l.count("|") == 6}
    assert "3.00 MiB" in row["Allocated memory"] and "limit: 64.00 MiB" in text
    assert row["Allocations"].split("|")[2].strip() == "1" and row["Allocations"].split("|")[4].strip() == "1"
    a.free(p)


def _segsum(snap):
    """What PyTorch's memory_viz checks of a segment (its 'stats' view): the
    blocks tile it, allocated counts requested bytes of active blocks."""
    for seg in snap["segments"]:
        assert sum(b["size"] for b in seg["blocks"]) == seg["total_size"]
        addr = seg["address"]
        for b in seg["blocks"]:
            assert b["address"] == addr and b["state"] in ("active_allocated", "active_pending_free", "inactive")
            assert set(b) >= {"size", "requested_size", "state", "frames"}
            addr += b["size"]
        assert set(seg) >= {"device", "address", "total_size", "allocated_size", "active_size", "requested_size",
                            "stream", "segment_type", "segment_pool_id", "is_expandable", "frames", "blocks"}


@pytest.mark.parametrize("backend, mode", [("host", "segments"), ("virtual", "vmm")])
def test_snapshot_in_pytorchs_layout(backend, mode, L, tmp_path):
    a = carve.Arena(backend=backend, mode=mode, limit="1GiB")
    trace = carve.record(str(tmp_path / "t.csv"))
    ps = [a.alloc(n, stream=0x40 if i % 2 else None) for i, n in enumerate((1000, 3 * MiB, 70 * 1024, 9 * MiB))]
    a.free(ps.pop(1))
    snap = carve.snapshot_torch(0, arenas=[a])
    assert set(snap) == {"segments", "device_traces", "allocator_settings"}
    _segsum(snap)
    # Every byte in the segments is memory carve holds.
    assert sum(seg["total_size"] for seg in snap["segments"]) == a.memory_reserved()
    active = [b for seg in snap["segments"] for b in seg["blocks"] if b["state"] == "active_allocated"]
    assert sorted(b["address"] for b in active) == sorted(ps)
    assert sorted(b["requested_size"] for b in active) == [1000, 70 * 1024, 9 * MiB]
    assert all(seg["is_expandable"] == (mode == "vmm") for seg in snap["segments"])
    t = snap["device_traces"][0]
    assert [e["action"] for e in t] == ["alloc"] * 4 + ["free_requested", "free_completed"]
    assert t[1]["size"] == 3 * MiB and t[4]["addr"] == t[1]["addr"] and t[3]["stream"] == 1
    path = carve.dump_snapshot(str(tmp_path / "s.pickle"), 0, arenas=[a])
    with open(path, "rb") as f:
        assert pickle.load(f) == carve.snapshot_torch(0, arenas=[a])
    import carve.memory as cm
    assert cm._record_memory_history() == trace  # already recording: the same trace
    assert cm._record_memory_history(enabled=None) == trace
    for p in ps:
        a.free(p)
    a.close()


def test_every_error_carries_a_status(host_arena, tmp_path):
    a = host_arena(limit="8MiB")
    live = a.alloc(4096)
    t = tmp_path / "t.csv"
    t.write_text("a,1,1000\nf,1\n")
    cases = [lambda: a.alloc(-1), lambda: a.alloc(64 * MiB), lambda: a.free(12345 * 256),
             lambda: carve.Arena(backend="tpu"), lambda: carve.configure(limit="lots"),
             lambda: carve.plot(str(tmp_path / "x.svg")), lambda: carve.route(7).__enter__(),
             lambda: carve._api._check_device("cpu"), lambda: a.alloc(1, stream="s"),
             lambda: carve.Arena(backend="host", name=5), lambda: carve.Arena(backend="host", conf=5),
             lambda: carve.Arena(backend="host", growth="false", initial="4MiB"),
             lambda: carve.Arena(backend=["host"]),
             lambda: a.free(1.5), lambda: a.free("0x10"), lambda: a.record_stream(1.5, 0),
             lambda: a.buffer_info(None), lambda: a.alloc(64, stream=True),
             lambda: carve.dump_snapshot(str(tmp_path / "no" / "dir" / "x.pickle"), arenas=[a]),
             lambda: carve.dump_snapshot(5, arenas=[a]),
             lambda: carve.record(str(tmp_path / "no" / "dir" / "x.csv")), lambda: carve.record(title=5),
             lambda: carve.plot(str(tmp_path / "x.svg"), trace=str(tmp_path / "missing.csv")),
             lambda: carve.plot(str(tmp_path / "no" / "dir" / "x.svg"), trace=str(t)),
             lambda: carve.configure(growth="false", initial="4MiB")]
    for i, case in enumerate(cases):
        with pytest.raises((carve.CarveError, OSError, TypeError, ValueError)) as e:
            case()
        assert getattr(e.value, "status", None) in ("CARVE_ERR_INVALID", "CARVE_ERR_OOM", "CARVE_ERR_BAD_POINTER",
                                                     "CARVE_ERR_BACKEND", "CARVE_ERR_NO_DEVICE"), (i, e.value)
    a.free(live)


def test_files_carve_cannot_use_are_backend_errors(host_arena, tmp_path):
    """CARVE_ERR_BACKEND names "a file carve could not use": a trace that
    cannot be read, a snapshot or picture that cannot be written."""
    a = host_arena()
    with pytest.raises(carve.CarveError, match="cannot read the trace") as e:
        carve.plot(str(tmp_path / "x.svg"), trace=str(tmp_path / "missing.csv"))
    assert e.value.status == "CARVE_ERR_BACKEND"
    with pytest.raises(OSError) as e:
        carve.dump_snapshot(str(tmp_path / "no" / "dir" / "x.pickle"), arenas=[a])
    assert e.value.status == "CARVE_ERR_BACKEND" and "x.pickle" in str(e.value)


def test_memory_module_after_import_carve_alone():
    """docs/python.md calls carve.memory._dump_snapshot(path) after `import carve`."""
    code = "import carve\nprint(callable(carve.memory._dump_snapshot), callable(carve.memory._snapshot))\n"
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(carve.__file__)))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.split() == ["True", "True"], out.stdout + out.stderr


def test_a_retired_arenas_buffers_can_still_be_freed(L):
    a = carve.Arena(backend="host", name="retiring")
    p, q = a.alloc(4096), a.alloc(8192)
    h = a._h
    assert a.close() is False and a.state == "retired"
    with pytest.raises(carve.CarveError, match="arena is retired"):
        a.alloc(16)
    b = carve.Arena(backend="host")
    other = b.alloc(4096)
    with pytest.raises(carve.CarveError, match="not a live buffer of this arena") as e:
        a.free(other)  # another arena's buffer
    assert e.value.status == "CARVE_ERR_BAD_POINTER" and b.buffer_info(other) == (4096, 0)
    a.free(p)
    assert L.carve_route_known(h)  # q is still live
    with pytest.raises(carve.CarveError, match="not a live buffer") as e:
        a.free(p)  # freed already
    a.free(q)  # its last buffer: the arena is destroyed
    assert not L.carve_route_known(h)
    with pytest.raises(carve.CarveError, match="not a live buffer"):
        a.free(q)
    b.free(other)
    b.close()
    assert carve.LibraryNotFoundError.status == "CARVE_ERR_BACKEND"
