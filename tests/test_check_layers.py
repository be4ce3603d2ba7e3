#!/usr/bin/env python3
"""test_check_layers.py — the layer checker catches what it must.

Builds small source trees in a temporary directory (removed at the end,
whatever happens), each breaking one house
rule (a circle between two files, a header whose inline code calls into the
file that includes it, an upward arrow between rooms, a front end reaching
past the public headers, a file in no room, a file without its header
comment), and checks that tools/check_layers.py fails on each with a message
naming the problem, and passes on a clean tree.

Usage: test_check_layers.py PATH/TO/check_layers.py
"""
import os
import subprocess
import sys
import tempfile

checks = failures = 0


def check(ok, what):
    global checks, failures
    checks += 1
    if not ok:
        failures += 1
        print("FAIL: " + what, file=sys.stderr)


TMP = None  # every tree goes under one temporary directory, removed at the end


def tree(files):
    d = tempfile.mkdtemp(prefix="tree-", dir=TMP)
    for path, text in files.items():
        full = os.path.join(d, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)
    return d


def run(checker, root):
    p = subprocess.run([sys.executable, checker, "--root", root], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True)
    return p.returncode, p.stdout


CLEAN = {
    "include/carve.h": "/* the public header */\nint carve_alloc(int n);\n",
    "lib/base/util.h": "/* helpers */\nstatic inline int carve_twice(int x) { return 2 * x; }\n",
    "lib/backend/backend.h": "/* interface */\n#include \"base/util.h\"\nint carve_backend_msg(void);\n",
    "lib/backend/backend.c": "/* messages */\n#include \"backend/backend.h\"\nint carve_backend_msg(void) { return 0; }\n",
    "lib/engine/heap.h": "/* heap */\n#include \"backend/backend.h\"\nint carve_heap_grow(int n);\n",
    "lib/engine/heap.c": "/* heap */\n#include \"engine/heap.h\"\n"
                         "int carve_heap_grow(int n) { return carve_backend_msg() + carve_twice(n); }\n",
    "lib/engine/alloc.c": "/* alloc */\n#include \"carve.h\"\n#include \"engine/heap.h\"\n"
                          "int carve_alloc(int n) { return carve_heap_grow(n); }\n",
    "tools/cli.c": "/* a front end */\n#include \"carve.h\"\nint main(void) { return carve_alloc(1); }\n",
}


def variant(changes):
    files = dict(CLEAN)
    for k, v in changes.items():
        if v is None:
            files.pop(k, None)
        else:
            files[k] = v
    return files


def expect_fail(checker, name, changes, needle):
    rc, out = run(checker, tree(variant(changes)))
    check(rc == 1, f"{name}: exit status 1 (got {rc}): {out}")
    check(needle in out, f"{name}: message mentions '{needle}': {out}")


def main():
    global TMP
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="layers-") as TMP:
        return checks_on(sys.argv[1])


def checks_on(checker):

    rc, out = run(checker, tree(CLEAN))
    check(rc == 0, f"clean tree passes: {out}")

    # Two files calling each other: heap.c calls alloc.c's function, alloc.c calls heap.c's.
    expect_fail(checker, "circle", {
        "lib/engine/heap.c": "/* heap */\n#include \"engine/heap.h\"\n#include \"carve.h\"\n"
                             "int carve_heap_grow(int n) { return n ? carve_alloc(n - 1) : 0; }\n",
    }, "circle between")

    # Inline code in a header calling into the .c file that includes it
    # (the old block.h <-> slab.c).
    expect_fail(checker, "inline header circle", {
        "lib/engine/block.h": "/* blocks */\nint carve_slab_grow(void);\n"
                              "static inline int carve_block_get(void) { return carve_slab_grow(); }\n",
        "lib/engine/slab.c": "/* slab */\n#include \"engine/block.h\"\n"
                             "int carve_slab_grow(void) { return carve_block_get() + 1; }\n",
    }, "circle between")

    # A lower room calling up: a backend using the engine.
    expect_fail(checker, "upward call", {
        "lib/backend/backend.c": "/* messages */\n#include \"backend/backend.h\"\n#include \"engine/heap.h\"\n"
                                 "int carve_backend_msg(void) { return 0; }\n"
                                 "int carve_backend_grow(void) { return carve_heap_grow(1); }\n",
    }, "upward or sideways arrow lib/backend -> lib/engine")

    # An upward call through a public name is still caught inside lib/.
    expect_fail(checker, "upward call through the public header", {
        "lib/backend/backend.c": "/* messages */\n#include \"backend/backend.h\"\n#include \"carve.h\"\n"
                                 "int carve_backend_msg(void) { return carve_alloc(0); }\n",
    }, "lib/backend -> lib/engine")

    # A lower room including a higher room's header.
    expect_fail(checker, "upward include", {
        "lib/base/util.h": "/* helpers */\n#include \"engine/heap.h\"\n"
                           "static inline int carve_twice(int x) { return 2 * x; }\n",
    }, "upward or sideways arrow lib/base -> lib/engine")

    # A front end using an internal header instead of the public API.
    expect_fail(checker, "front end past the public header", {
        "tools/cli.c": "/* a front end */\n#include \"engine/heap.h\"\nint main(void) { return carve_heap_grow(1); }\n",
    }, "tools -> lib/engine")

    # tools/ must not reach into bench/.
    expect_fail(checker, "tools into bench", {
        "bench/probe.h": "/* a benchmark helper */\nint bench_probe(void);\n",
        "bench/probe.c": "/* a benchmark helper */\n#include \"probe.h\"\nint bench_probe(void) { return 0; }\n",
        "tools/cli.c": "/* a front end */\n#include \"../bench/probe.h\"\nint main(void) { return bench_probe(); }\n",
    }, "tools -> bench")

    expect_fail(checker, "file in no room", {
        "lib/loose.c": "/* loose */\nint carve_loose(void) { return 0; }\n",
    }, "lives in no room")

    expect_fail(checker, "missing header comment", {
        "lib/engine/alloc.c": "#include \"carve.h\"\n#include \"engine/heap.h\"\n"
                              "int carve_alloc(int n) { return carve_heap_grow(n); }\n",
    }, "no header comment")

    # A local variable that shares a visible function's name is not a call
    # (counted, it would make a circle between heap.c and alloc.c).
    rc, out = run(checker, tree(variant({
        "lib/engine/heap.c": "/* heap */\n#include \"engine/heap.h\"\n#include \"carve.h\"\n"
                             "int carve_heap_grow(int n) { int carve_alloc = n; return carve_alloc; }\n",
    })))
    check(rc == 0, f"a variable named like a function is no arrow: {out}")

    print(f"{checks} checks, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
