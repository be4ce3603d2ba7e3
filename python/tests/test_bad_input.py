"""test_bad_input.py — every value the package hands to C is checked first:
out of range, of the wrong type, or cut short at a NUL, it is refused with an
error naming it; nothing wraps through ctypes (which turns 2**64 + 4096 into
4096 without a word). And the recorder writes the frees of an arena closed
with live buffers, so a later arena reusing their addresses replays clean.

The grid runs every integer argument of the package through the same
values: good, negative, just past its C type, huge, and of the wrong type.
"""

import ctypes
import os

import pytest

import carve
from carve import _lib

SIZE_MAX = ctypes.c_size_t(-1).value
PTR_MAX = (1 << (8 * ctypes.sizeof(ctypes.c_void_p))) - 1
INT_MAX = (1 << 31) - 1

# values and what becomes of them for an argument whose C type ends at top
BAD_INTS = [(-1, ValueError), (-(2 ** 64), ValueError), (2 ** 64, ValueError), (2 ** 64 + 4096, ValueError),
            (2 ** 65 + 7, ValueError), (True, (TypeError, ValueError)), (1.5, (TypeError, ValueError)),
            ("3", (TypeError, ValueError))]


# ---- the cases of the issue ----------------------------------------------------

def test_alloc_size_does_not_wrap(host_arena):
    a = host_arena(limit="64MiB")
    for size in (2 ** 64 + 4096, 2 ** 64, 2 ** 70):
        with pytest.raises(ValueError, match=f"size={size}.*from 0 to {SIZE_MAX}"):
            a.alloc(size)
    assert a.memory_allocated() == 0 and a.stats()["num_allocs"] == 0
    with pytest.raises(carve.OutOfMemoryError):  # in range: carve's own answer
        a.alloc(SIZE_MAX)


def test_stream_does_not_wrap(host_arena):
    a = host_arena()
    for stream in (2 ** 64 + 7, 2 ** 64, -1, -(2 ** 64) + 7):
        with pytest.raises(ValueError, match=f"stream={stream}"):
            a.alloc(4096, stream=stream)
    p = a.alloc(4096, stream=7)
    assert a.buffer_info(p) == (4096, 7)

    class Stream:
        cuda_stream = 2 ** 64 + 7
    with pytest.raises(ValueError, match="stream.cuda_stream=18446744073709551623"):
        a.alloc(4096, stream=Stream())
    with pytest.raises(ValueError, match="stream="):
        a.record_stream(p, 2 ** 64 + 7)
    a.free(p)


def test_pointers_do_not_wrap(host_arena):
    a = host_arena()
    p = a.alloc(4096)
    for bad in (p + 2 ** 64, -p, 2 ** 64):
        with pytest.raises(ValueError, match="ptr="):
            a.free(bad)
        with pytest.raises(ValueError, match="ptr="):
            a.buffer_info(bad)
        with pytest.raises(ValueError, match="ptr="):
            a.record_stream(bad, None)
    assert a.memory_allocated() > 0  # p was not freed by a wrapped p + 2**64
    with pytest.raises(TypeError):
        a.free("0x1000")
    a.free(p)
    assert a.memory_allocated() == 0


def test_devices_do_not_wrap(L):
    for device in (2 ** 32, 2 ** 32 + 1, 2 ** 64, -1, INT_MAX + 1):
        for call in (lambda: carve.memory_allocated(device), lambda: carve.mem_get_info(device),
                     lambda: carve.configure(device=device, limit="1GiB"),
                     lambda: carve.Arena(backend="host", device=device)):
            with pytest.raises(carve.ConfigError, match=f"device={device}"):
                call()


def test_nul_characters_are_refused(host_arena, tmp_path):
    with pytest.raises(carve.ConfigError, match="name="):
        carve.Arena(backend="host", name="a\0b")
    with pytest.raises(carve.ConfigError, match="NUL"):
        carve.Arena(backend="host", conf="min_grow=4MiB\0,limit=1")
    with pytest.raises(ValueError, match="path="):
        carve.record(str(tmp_path / "a\0b.csv"))
    with pytest.raises(ValueError, match="title="):
        carve.record(str(tmp_path / "t.csv"), title="x\0y")
    with pytest.raises(ValueError, match="trace="):
        carve.plot(str(tmp_path / "p.svg"), trace="t\0.csv")


def test_carve_conf_named_once(L, monkeypatch):
    monkeypatch.setenv("CARVE_CONF", "garbage")
    with pytest.raises(carve.ConfigError) as e:
        carve.configure(limit="1GiB")
    msg = str(e.value)
    assert "CARVE_CONF: 'garbage' is not key=value" in msg and "CARVE_CONF: CARVE_CONF" not in msg, msg


def load_trace(L, path):
    t = _lib.CarveTrace()
    assert L.carve_trace_load_path(os.fsencode(path), ctypes.byref(t), None, None) == 0, t.diag
    try:
        return t.nbad, t.diag.decode(), t.nallocs, t.nfrees
    finally:
        L.carve_trace_free(ctypes.byref(t))


def test_record_frees_of_an_arena_closed_with_live_buffers(L, tmp_path):
    path = str(tmp_path / "closed.csv")
    carve.record(path)
    first = carve.Arena(backend="virtual", name="first")
    ptrs = [first.alloc(s) for s in (1 << 20, 3 << 20, 5 << 20)]
    assert first.close() is False  # the three buffers are live: the arena is retired
    for p in ptrs:  # the last free destroys it and its memory goes back
        assert L.carve_route_free(p, 0) == 0
    second = carve.Arena(backend="virtual", name="second")
    again = [second.alloc(s) for s in (1 << 20, 3 << 20, 5 << 20)]
    assert set(ptrs) & set(again), "the virtual backend reuses the first arena's addresses (else nothing is tested)"
    for p in again:
        second.free(p)
    second.close()
    carve.stop_recording()
    nbad, diag, nallocs, nfrees = load_trace(L, path)
    assert nbad == 0 and diag == "" and nallocs == 6 and nfrees == 6, (nbad, diag, nallocs, nfrees)
    with open(path) as f:
        text = f.read()
    assert "frees written before an allocation" not in text, text  # each free written when made


# ---- the grid ------------------------------------------------------------------

def _int_calls(arena, live):
    """(name, call taking one value, the C type's top, the error class for a
    value out of range) for every integer argument of the package."""
    return [
        ("Arena.alloc size", lambda v: arena.alloc(v), SIZE_MAX, ValueError),
        ("Arena.alloc stream", lambda v: arena.alloc(256, stream=v), PTR_MAX, ValueError),
        ("Arena.free ptr", lambda v: arena.free(v), PTR_MAX, ValueError),
        ("Arena.buffer_info ptr", lambda v: arena.buffer_info(v), PTR_MAX, ValueError),
        ("Arena.record_stream ptr", lambda v: arena.record_stream(v, None), PTR_MAX, ValueError),
        ("Arena.record_stream stream", lambda v: arena.record_stream(live, v), PTR_MAX, ValueError),
        ("Arena device", lambda v: carve.Arena(backend="host", device=v).close(), INT_MAX, carve.ConfigError),
        ("memory_allocated device", lambda v: carve.memory_allocated(v), INT_MAX, carve.ConfigError),
        ("memory_stats device", lambda v: carve.memory_stats(v), INT_MAX, carve.ConfigError),
        ("empty_cache device", lambda v: carve.empty_cache(v), INT_MAX, carve.ConfigError),
        ("mem_get_info device", lambda v: carve.mem_get_info(v), INT_MAX, carve.ConfigError),
        ("configure device", lambda v: carve.configure(device=v, limit="1GiB"), INT_MAX, carve.ConfigError),
    ]


GRID_NAMES = [c[0] for c in _int_calls(None, 0)]


@pytest.mark.parametrize("name", GRID_NAMES)
def test_int_argument_grid(host_arena, name):
    a = host_arena()
    live = a.alloc(4096)
    call, top, out_of_range = [(c, t, e) for n, c, t, e in _int_calls(a, live) if n == name][0]
    words = name.split()[-1]
    for v in (top + 1, top + 4096, 2 ** 64 + 4096, -1, -(2 ** 64)):
        with pytest.raises(out_of_range) as e:
            call(v)
        assert f"{words}={v}" in str(e.value) or f".{words}" in str(e.value) or str(v) in str(e.value), \
            f"{name}={v}: {e.value}"
        assert e.value.status == "CARVE_ERR_INVALID", f"{name}={v}: {e.value!r}"  # as every error the package raises
    for v, cls in BAD_INTS[5:]:
        with pytest.raises(cls) as e:
            call(v)
        assert isinstance(e.value, carve.CarveError) and e.value.status == "CARVE_ERR_INVALID", f"{name}={v!r}"
    # In range, the value reaches carve unchanged: the call works, or carve
    # gives its own answer (no such device here, not a live buffer, ...).
    for v in (0, 1, top):
        try:
            call(v)
        except carve.CarveError as e:
            assert e.status in ("CARVE_ERR_NO_DEVICE", "CARVE_ERR_BAD_POINTER", "CARVE_ERR_OOM",
                                "CARVE_ERR_INVALID"), f"{name}={v}: {e}"
            assert not isinstance(e, carve.ConfigError) or "device" in str(e), f"{name}={v}: {e}"
    assert a.memory_allocated() >= 4096  # nothing above freed the live buffer by a wrapped address


@pytest.mark.parametrize("key", ["limit", "initial"])
@pytest.mark.parametrize("value,ok", [
    ("64MiB", True), (64 << 20, True), ("2.5 MB", True), (0, True),
    (-1, False), (2 ** 64, False), (2 ** 64 + 4096, False), ("99999999999999999999999", False),
    ("", False), ("64MiB,backend=cuda", False), ("12XB", False), (True, False), (1.5, False), ([1], False),
])
def test_size_argument_grid(host_arena, key, value, ok):
    kw = {key: value}
    if key == "initial":
        kw["limit"] = "1TiB"
    if ok:
        host_arena(**kw)
        return
    with pytest.raises(carve.ConfigError) as e:
        carve.Arena(backend="host", **kw)
    assert key in str(e.value), str(e.value)
