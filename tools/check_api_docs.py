#!/usr/bin/env python3
"""check_api_docs.py — every public function is in the API reference.

The one idea: the public headers (include/*.h) are the manual and
docs/api.md is the same contract in tables, so a function a header declares
(CARVE_API prototypes, inline functions, macros named carve_*) must be named
in docs/api.md inside backquotes, as a table row or a sentence gives it
(`carve_alloc(a, size, stream, &p)`, `carve_version`). A function added to a
header without a line in the reference fails the check, naming the function
and its header.

Declarations are read after comments, preprocessor lines and attributes
(__attribute__((...)), __declspec(...), [[...]]) are taken out, so every
way C lets one be written counts: CARVE_API with attributes anywhere, static
inline in either order (also __inline__ and __inline), a parenthesised name
(`int (carve_x)(int)`), a function returning a function pointer
(`void (*carve_x(void))(int)`), and a lowercase carve_ macro, function-like or
an alias (`#define carve_x carve_y`).

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
# Preprocessor lines, with their continuations.
DIRECTIVE = re.compile(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", re.M)
# What marks a public function: the export macro or an inline keyword.
SPECIFIER = re.compile(r"\b(?:CARVE_API|inline|__inline__|__inline)\b")
# The declarator's name: the identifier right before its parameter list,
# maybe inside "(*" ")" or "(" ")". A "(" followed by "*" opens a pointer
# declarator, not a parameter list, so a return type such as
# "carve_status (*carve_x(void))(int)" is not taken for the name.
NAME = re.compile(r"\b(carve_\w+)\s*\)?\s*\((?!\s*\*)")
# Any lowercase carve_ macro: function-like, or an alias of a function.
MACRO = re.compile(r"^\s*#\s*define\s+(carve_\w+)\b", re.M)
CODE_SPAN = re.compile(r"`([^`]+)`")
IDENT = re.compile(r"\b(carve_\w+)\b")


def strip_attributes(text):
    """text without __attribute__((...)), __declspec(...) and [[...]]."""
    out, i = [], 0
    for m in re.finditer(r"\b(?:__attribute__|__declspec)\s*\(|\[\[", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        if m.group(0) == "[[":
            end = text.find("]]", m.end())
            i = len(text) if end < 0 else end + 2
            continue
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            j += 1
        out.append(" ")
        i = j
    out.append(text[i:])
    return "".join(out)


def declared(text):
    """The carve_ functions a header's text (comments stripped) declares."""
    names = MACRO.findall(text)
    code = strip_attributes(DIRECTIVE.sub(" ", text))
    for m in SPECIFIER.finditer(code):
        end = re.compile(r"[;{]").search(code, m.end())
        decl = code[m.end():end.start() if end else len(code)]
        n = NAME.search(decl)
        if n:
            names.append(n.group(1))
    return names


def public_functions(root):
    """{name: header} for every public function of include/*.h."""
    found = {}
    for path in sorted(glob.glob(os.path.join(root, "include", "*.h"))):
        with open(path, encoding="utf-8") as f:
            text = COMMENT.sub(" ", f.read())
        rel = os.path.relpath(path, root)
        for name in declared(text):
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
