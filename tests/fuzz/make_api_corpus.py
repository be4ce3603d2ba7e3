#!/usr/bin/env python3
"""make_api_corpus.py — writes the seed corpus of fuzz_api (corpus/api/).

The one idea: fuzz_api reads a byte program (arena configurations, then one
opcode byte and its argument bytes per operation), so seeds are written here
as readable lists of operations and encoded with the same tables as
fuzz_api.c; each seed exercises one opcode or one situation, and libFuzzer
or driver.c mutate from there.

Usage: tests/fuzz/make_api_corpus.py [OUT_DIR]   (default: corpus/api next to this file)
"""
import os
import sys

# Configuration tables (indexes into fuzz_api.c's initial_choice / limit_choice / min_grow_choice).
INITIAL = {0: 0, "2M": 1, "4M": 2, "8M": 3, "16M": 4, "32M": 5, "64M": 6, "256M": 7, "3M+1": 10, "1B": 11,
           "6M": 12, "20M": 13, "12M+5": 15}
LIMIT = {"2M": 0, "4M": 1, "8M": 2, "16M": 3, "32M": 4, "64M": 5, "128M": 6, "256M": 7, "5M+3": 10, "24M": 12,
         "2M+255": 13, "100M": 14}
MIN_GROW = {"auto": 0, "2M": 2, "4M": 3, "16M": 4, "1B": 5, "64M": 6, "300M": 7}
EVERY = {0: 0, 3: 1, 5: 2, 11: 3, 64: 4, 2: 5, 7: 6}

OP = {"alloc": 0, "free": 4, "bad": 7, "record": 8, "empty": 9, "stats": 10, "reset": 11, "snapshot": 12,
      "memory": 13, "edge": 14, "misc": 15}
BAD = {"interior": 0, "misaligned": 1, "foreign": 2, "freed": 3, "null": 4, "wild": 5, "past_end": 6, "top": 7}
EDGE = {"zero": 0, "size_max": 1, "limit_plus_1": 2, "capacity": 3, "over_max_alloc": 4, "per_thread": 5,
        "null_out": 6, "null_arena": 7}
MISC = {"free_all": 0, "free_stream": 1, "recreate": 2, "get_config": 3, "burst": 4, "record_all_free": 5,
        "null_calls": 6, "alloc_free_each_stream": 7}


def arena(virtual=False, growth=True, polls=0, vmm=False, initial=0, limit="64M", min_grow="auto", name=0,
          faults=None):
    """3 bytes (4 with faults=(at, every, backend_status))."""
    b0 = (3 if virtual else 0) | (4 if growth else 0) | (polls & 3) << 3 | (32 if vmm else 0)
    if faults:
        b0 |= 0xC0
    b1 = INITIAL[initial] | LIMIT[limit] << 4
    b2 = MIN_GROW[min_grow] | (name & 31) << 3
    out = [b0, b1, b2]
    if faults:
        at, every, backend = faults
        out.append((at & 15) | (16 if backend else 0) | EVERY[every] << 5)
    return out


def size_args(size, exact=False):
    """(e, m) with ((256 + m) << e) >> 8 close to size (from below)."""
    e = max(size.bit_length() - 1, 0)
    e = min(e, 25)
    m = min(max((size << 8 >> e) - 256, 0), 255)
    return [e | (0xC0 if exact else 0), m]


def alloc(a, stream, size, exact=False):
    return [OP["alloc"], a, stream] + size_args(size, exact)


def free(a, i):
    return [OP["free"], a, i]


def bad(a, kind, i=0, off=0, s=0):
    return [OP["bad"], a, BAD[kind], i, off, s]


def record(a, i, s):
    return [OP["record"], a, i, s]


def simple(op, a):
    return [OP[op], a]


def edge(a, kind, s=0):
    return [OP["edge"], a, EDGE[kind], s]


def misc(a, kind, x=0, y=0):
    return [OP["misc"], a, MISC[kind], x, y]


def program(arenas, *ops):
    out = [len(arenas) - 1]
    for cfg in arenas:
        out += cfg
    for op in ops:
        out += op
    return bytes(out)


KiB, MiB = 1 << 10, 1 << 20
H = arena()  # a host arena, growth on, limit 64 MiB

SEEDS = {
    "empty_program": program([H]),
    "alloc_free": program([H], alloc(0, 0, 1000), alloc(0, 0, 5000), free(0, 0), free(0, 0)),
    "sizes_log": program([arena(limit="256M")], *[alloc(0, 0, 1 << k) for k in range(0, 27, 2)],
                         simple("stats", 0), misc(0, "free_all")),
    "exact_sizes": program([H], *[alloc(0, 1, n, exact=True) for n in (256, 512, 4096, MiB, 3 * MiB)],
                           simple("snapshot", 0)),
    "streams": program([arena(polls=2)], alloc(0, 0, 4096), alloc(0, 1, 4096), alloc(0, 2, 8192),
                       alloc(0, 3, 16384), free(0, 1), alloc(0, 0, 4096), simple("stats", 0), simple("snapshot", 0)),
    "record_stream": program([arena(polls=3)], alloc(0, 1, 100000), record(0, 0, 2), record(0, 0, 3), free(0, 0),
                             alloc(0, 2, 100000), alloc(0, 1, 100000), simple("snapshot", 0), simple("empty", 0)),
    "record_all": program([arena(polls=1)], alloc(0, 0, 65536), misc(0, "record_all_free"), simple("stats", 0)),
    "bad_pointers": program([H, H], alloc(0, 0, 4096), alloc(1, 0, 4096), free(0, 0), alloc(0, 0, 8192),
                            *[bad(0, k, 0, 6, 1) for k in BAD], bad(0, "interior", 0, 7)),
    "bad_foreign_virtual": program([H, arena(virtual=True)], alloc(0, 0, 4096), alloc(1, 0, 4096),
                                   bad(0, "foreign", 0, 0), bad(1, "foreign", 0, 1)),
    "empty_cache": program([H], alloc(0, 0, 3 * MiB), alloc(0, 1, 300), free(0, 0), simple("empty", 0),
                           simple("memory", 0), free(0, 0), simple("empty", 0), simple("memory", 0)),
    "growth_off": program([arena(growth=False, initial="32M", limit="32M")], alloc(0, 0, 8 * MiB),
                          alloc(0, 0, 8 * MiB), alloc(0, 0, 8 * MiB), alloc(0, 0, 8 * MiB), alloc(0, 0, 8 * MiB),
                          simple("stats", 0), misc(0, "free_all"), simple("empty", 0), alloc(0, 0, 30 * MiB)),
    "oom_limit": program([arena(limit="8M")], alloc(0, 0, 6 * MiB), alloc(0, 0, 6 * MiB), free(0, 0),
                         alloc(0, 0, 6 * MiB), simple("stats", 0)),
    "oom_fragmented": program([arena(limit="16M")], *[alloc(0, k % 4, 900 * KiB) for k in range(16)],
                              *[free(0, k) for k in range(0, 16, 2)], alloc(0, 0, 8 * MiB), simple("snapshot", 0)),
    "peaks_one_stream": program([H], alloc(0, 0, 10 * MiB), alloc(0, 0, 20 * MiB), free(0, 1), simple("stats", 0),
                                simple("reset", 0), simple("stats", 0), alloc(0, 0, MiB), simple("stats", 0)),
    "peaks_streams": program([arena(limit="128M")], alloc(0, 0, 10 * MiB), alloc(0, 0, 10 * MiB),
                             alloc(0, 1, 256), free(0, 0), alloc(0, 1, 16 * MiB), simple("stats", 0)),
    "reset_peaks": program([H], alloc(0, 2, 2 * MiB), simple("reset", 0), free(0, 0), simple("reset", 0),
                           simple("stats", 0)),
    "snapshot_names": program([arena(name=1), arena(name=3), arena(name=4)], alloc(0, 0, 1), alloc(1, 1, 2),
                              alloc(2, 2, 3), simple("snapshot", 0), simple("snapshot", 1), simple("snapshot", 2)),
    "edges": program([H], *[edge(0, k, 1) for k in EDGE], simple("stats", 0)),
    "edge_capacity_growth_off": program([arena(growth=False, initial="6M", limit="8M")], edge(0, "capacity"),
                                        misc(0, "free_all"), edge(0, "capacity", 2), simple("stats", 0)),
    "recreate": program([H, arena(polls=1)], alloc(0, 0, 5000), alloc(1, 1, 5000), misc(0, "recreate"),
                        alloc(0, 0, 5000), bad(1, "foreign"), misc(1, "recreate"), simple("stats", 1)),
    "get_config": program([arena(initial="3M+1", limit="5M+3", min_grow="1B")], misc(0, "get_config"),
                          alloc(0, 0, 4 * MiB)),
    "burst": program([H], misc(0, "burst", 7, 200), misc(0, "burst", 3, 1), misc(0, "burst", 12, 255)),
    "free_stream": program([H], alloc(0, 0, 100), alloc(0, 1, 200), alloc(0, 1, 300), alloc(0, 2, 400),
                           misc(0, "free_stream", 1), simple("stats", 0)),
    "null_calls": program([H], misc(0, "null_calls")),
    "alloc_free_each": program([arena(polls=2)], misc(0, "alloc_free_each_stream", 0, 77), simple("stats", 0)),
    "virtual_vmm": program([arena(virtual=True, vmm=True, limit="256M")], alloc(0, 0, 3 * MiB), alloc(0, 1, 5 * MiB),
                           free(0, 0), simple("empty", 0), alloc(0, 0, 64 * MiB), simple("snapshot", 0),
                           simple("stats", 0)),
    "virtual_vmm_growth_off": program([arena(virtual=True, vmm=True, growth=False, initial="32M", limit="32M")],
                                      alloc(0, 0, 20 * MiB), alloc(0, 0, 20 * MiB), misc(0, "free_all"),
                                      alloc(0, 0, 30 * MiB), simple("snapshot", 0)),
    "virtual_plain": program([arena(virtual=True, limit="256M", polls=1)], *[alloc(0, k % 4, 7 * MiB) for k in range(8)],
                             simple("empty", 0), simple("stats", 0)),
    "three_arenas": program([arena(), arena(growth=False, initial="16M", limit="16M", polls=3),
                             arena(virtual=True, vmm=True)],
                            *[alloc(k % 3, k % 4, 1000 * (k + 1)) for k in range(12)],
                            *[bad(k % 3, "foreign", k, k) for k in range(6)], simple("snapshot", 1),
                            misc(2, "free_all"), simple("empty", 2)),
    "invalid_configs": program([arena(growth=False, initial=0), arena(initial="64M", limit="8M")],
                               alloc(0, 0, 4096), alloc(1, 0, 4096), simple("stats", 0), simple("stats", 1)),
    "min_grow_big": program([arena(limit="256M", min_grow="300M")], alloc(0, 0, 100), alloc(0, 1, 2 * MiB)),
    "faults_oom": program([arena(polls=1, faults=(2, 3, False))], *[alloc(0, k % 2, (k + 1) * MiB) for k in range(10)],
                          record(0, 0, 1), misc(0, "free_all"), simple("empty", 0)),
    "faults_backend": program([arena(faults=(1, 5, True)), H], *[alloc(k % 2, 0, 3 * MiB) for k in range(8)],
                              simple("empty", 0), misc(0, "record_all_free"), simple("snapshot", 0)),
    "small_limit_odd": program([arena(limit="2M+255")], alloc(0, 0, 2 * MiB), alloc(0, 0, 1), edge(0, "limit_plus_1")),
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "api")
    os.makedirs(out, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print(f"{len(SEEDS)} seeds written to {out}")


if __name__ == "__main__":
    main()
