#!/usr/bin/env python3
"""check_api_docs.py — every public function is in the API reference.

The one idea: the public headers (include/*.h) are the manual and
docs/api.md is the same contract in tables, so a function a header declares
(CARVE_API prototypes, static inline functions, function-like macros named
carve_*) must be named in docs/api.md inside backquotes, as a table row or a
sentence gives it (`carve_alloc(a, size, stream, &p)`, `carve_version`). A
function added to a header without a line in the reference fails the check,
naming the function and its header.

Usage: tools/check_api_docs.py [--root DIR] [--doc PATH] [--quiet]
Exit status 0 when every function is documented, 1 when one is missing (each
printed), 2 on bad usage or when no public function is found at all.
"""

import argparse
import glob
import os
import re
import sys

COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
# A declaration or definition at file scope: the name right before "(",
# after a return type that carries CARVE_API or "static inline".
PROTO = re.compile(r"\b(?:CARVE_API|static\s+inline)\b[^;{}()]*?\b(carve_\w+)\s*\(")
MACRO = re.compile(r"^\s*#\s*define\s+(carve_\w+)\(", re.M)
CODE_SPAN = re.compile(r"`([^`]+)`")
IDENT = re.compile(r"\b(carve_\w+)\b")


def public_functions(root):
    """{name: header} for every public function of include/*.h."""
    found = {}
    for path in sorted(glob.glob(os.path.join(root, "include", "*.h"))):
        with open(path, encoding="utf-8") as f:
            text = COMMENT.sub(" ", f.read())
        rel = os.path.relpath(path, root)
        for name in PROTO.findall(text) + MACRO.findall(text):
            found.setdefault(name, rel)
    return found


def documented(doc_path):
    """Every carve_ name that appears inside a code span of the document."""
    with open(doc_path, encoding="utf-8") as f:
        text = f.read()
    names = set()
    for span in CODE_SPAN.findall(text):
        names.update(IDENT.findall(span))
    return names


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--doc", help="the reference to check (default: ROOT/docs/api.md)")
    ap.add_argument("--quiet", action="store_true", help="print only problems")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    doc = args.doc or os.path.join(root, "docs", "api.md")
    if not os.path.isfile(doc):
        print(f"check_api_docs: {doc} does not exist", file=sys.stderr)
        return 2
    funcs = public_functions(root)
    if not funcs:
        print(f"check_api_docs: no public function found in {root}/include/*.h", file=sys.stderr)
        return 2
    have = documented(doc)
    missing = sorted(n for n in funcs if n not in have)
    for name in missing:
        print(f"{funcs[name]}: {name} is not in {os.path.relpath(doc, root)} "
              f"(name it in backquotes in the table of its header)")
    if not args.quiet or missing:
        print(f"check_api_docs: {len(funcs) - len(missing)} of {len(funcs)} public functions documented")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
