"""test_engine_api.py — what an inference engine uses from Python, on HOST
arenas: a free ordered on another stream, aligned allocations, a limit
changed on a live arena, tags on buffers, and the retry count in
memory_stats.
"""

import ctypes
import json

import pytest

import carve
from carve import _lib

S1, S2 = 0x1000, 0x2000


def test_free_on_another_stream_waits_for_it(host_arena, L):
    a = host_arena(limit=None)
    cfg = _lib.CarveConfig()
    # events on the host backend complete after sim_event_polls queries: a
    # fresh arena with 3 of them, through the C config
    L.carve_config_init_sized(ctypes.byref(cfg), ctypes.sizeof(cfg))
    assert L.carve_config_parse(ctypes.byref(cfg), b"backend=host,sim_event_polls=3") == _lib.OK
    h = ctypes.c_void_p()
    assert L.carve_arena_create(ctypes.byref(cfg), ctypes.byref(h)) == _lib.OK
    try:
        p = ctypes.c_void_p()
        assert L.carve_alloc_aligned(h, 8192, 0, S1, ctypes.byref(p)) == _lib.OK
        assert L.carve_free_on_stream(h, p, S2) == _lib.OK
        q = ctypes.c_void_p()
        assert L.carve_alloc_aligned(h, 8192, 0, S1, ctypes.byref(q)) == _lib.OK
        assert q.value != p.value  # S2's work may still use it
    finally:
        L.carve_arena_destroy(h)
    # the Arena method: freed on a stream, then no longer live
    x = a.alloc(4096, stream=S1)
    a.free(x, stream=S2)
    with pytest.raises(carve.CarveError) as e:
        a.buffer_info(x)
    assert e.value.status == "CARVE_ERR_BAD_POINTER"
    assert a.stats()["num_live"] == 0
    y = a.alloc(4096, stream=S1)
    a.free(y, stream=S1)  # its own stream: as free(y)


def test_aligned_allocations(host_arena):
    a = host_arena()
    ptrs = []
    for align in (512, 4096, 1 << 16, 2 << 20):
        p = a.alloc(1000, stream=S1, align=align)
        assert p % align == 0
        assert a.buffer_info(p)[0] == 1000
        a.record_stream(p, S2)
        ptrs.append(p)
    for p in ptrs:
        a.free(p)
    for bad in (3, 3 << 20):
        with pytest.raises(carve.ConfigError):
            a.alloc(100, align=bad)
    a.check()


def test_set_limit_on_a_live_arena(host_arena):
    a = host_arena(limit="64MiB")
    with pytest.raises(carve.OutOfMemoryError):
        a.alloc(100 << 20)
    a.set_limit("128MiB")
    assert a.config()["limit_bytes"] == 128 << 20
    p = a.alloc(100 << 20)
    a.free(p)
    a.set_limit(16 << 20)  # below what is reserved: the cache goes back
    assert a.config()["limit_bytes"] == 16 << 20
    assert a.memory_reserved() <= 16 << 20
    with pytest.raises(carve.OutOfMemoryError):
        a.alloc(20 << 20)
    with pytest.raises(carve.ConfigError):
        a.set_limit(0.5)
    with pytest.raises(carve.CarveError):
        a.set_limit(1 << 20)  # below one granule
    assert a.config()["limit_bytes"] == 16 << 20


def test_tags_in_the_snapshot(host_arena):
    a = host_arena()
    p = a.alloc(5000, stream=S1)
    assert a.tag(p) == 0
    a.set_tag(p, 0xFEEDFACE12345678)
    assert a.tag(p) == 0xFEEDFACE12345678
    snap = a.snapshot()
    if isinstance(snap, str):
        snap = json.loads(snap)
    tags = [b.get("tag") for s in snap["segments"] for r in s["ranges"] for b in r.get("blocks", [])]
    assert "0xfeedface12345678" in tags
    a.free(p)
    q = a.alloc(5000, stream=S1)  # the same block again: no tag
    assert a.tag(q) == 0
    a.free(q)
    with pytest.raises(carve.CarveError):
        a.tag(q)
    with pytest.raises(carve.ConfigError):
        a.set_tag(q, -1)


def test_retries_are_counted(host_arena):
    a = host_arena()
    assert "num_alloc_retries" not in carve.MISSING_TORCH_STATS
    s = carve.memory_stats(a)
    assert s["num_alloc_retries"] == 0
    assert carve.STREAM_PER_THREAD == 2
    p = a.alloc(100, stream=carve.STREAM_PER_THREAD)
    assert a.buffer_info(p)[1] == carve.STREAM_PER_THREAD
    a.free(p)
