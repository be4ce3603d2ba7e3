#!/usr/bin/env python3
"""patch_file.py — one new file of a unified diff, as the patch creates it.

Prints (or writes to OUT) the content of the file the patch adds at PATH
(a hunk "@@ -0,0 +1,N @@"): the test of the adapter builds against the
header ggml-carve.patch adds to ggml, taken from the patch itself, so that
the two cannot drift apart. Exit 1 when the patch adds no such file.

Usage: patch_file.py PATCH PATH [OUT]
"""

import sys


def added_file(patch_text, path):
    lines = patch_text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("+++ ") and line[4:].split("\t")[0].strip() in (f"b/{path}", path):
            if i + 1 >= len(lines) or not lines[i + 1].startswith("@@ -0,0 "):
                return None
            out = []
            for body in lines[i + 2:]:
                if not body.startswith("+"):
                    break
                out.append(body[1:])
            return "\n".join(out) + "\n"
    return None


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__)
        return 2
    with open(sys.argv[1], encoding="utf-8") as f:
        text = added_file(f.read(), sys.argv[2])
    if text is None:
        print(f"patch_file.py: {sys.argv[1]} adds no file {sys.argv[2]}", file=sys.stderr)
        return 1
    if len(sys.argv) == 4:
        with open(sys.argv[3], "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
