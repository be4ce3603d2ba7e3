#!/usr/bin/env python3
"""apply_patch.py — apply (or reverse) a unified diff with exact context, for
machines without GNU patch or git.

build.sh uses `patch -p1` where it exists and this otherwise. Each hunk's
old lines must be found in the file at their place, or, failing that, at
one other place in the file (an offset); a hunk that is not found stops
everything before a file is written. A file the diff creates
("@@ -0,0 ...") is written whole; reversed, it is removed.

Usage: apply_patch.py [-R] DIR PATCH     (paths in the diff are a/... b/..., as with -p1)
"""

import os
import re
import sys


def parse(text):
    """[(path, [(old_start, old_lines, new_lines)])] from a unified diff."""
    files, hunks, path = [], None, None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("+++ "):
            path = line[4:].split("\t")[0].strip()
            path = path[2:] if path.startswith(("a/", "b/")) else path
            hunks = []
            files.append((path, hunks))
        elif line.startswith("@@ ") and hunks is not None:
            m = re.match(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", line)
            n_old = int(m.group(2) or 1)
            n_new = int(m.group(4) or 1)
            old, new = [], []
            i += 1
            while i < len(lines) and (len(old) < n_old or len(new) < n_new):
                body = lines[i]
                tag, rest = (body[:1], body[1:]) if body else (" ", "")
                if tag in (" ", "-"):
                    old.append(rest)
                if tag in (" ", "+"):
                    new.append(rest)
                i += 1
            hunks.append((int(m.group(1)), old, new))
            continue
        i += 1
    return files


def apply_file(content, hunks, reverse):
    lines = content.split("\n") if content else []
    offset = 0
    for start, old, new in hunks:
        if reverse:
            old, new = new, old
        want = max(start - 1 + offset, 0)
        at = None
        if lines[want:want + len(old)] == old:
            at = want
        else:
            found = [k for k in range(len(lines) - len(old) + 1) if lines[k:k + len(old)] == old]
            if len(found) == 1:
                at = found[0]
        if at is None:
            raise ValueError(f"hunk at line {start} does not match")
        lines[at:at + len(old)] = new
        offset += len(new) - len(old) + (at - want)
    return "\n".join(lines)


def main():
    args = sys.argv[1:]
    reverse = args[:1] == ["-R"]
    if reverse:
        args = args[1:]
    if len(args) != 2:
        print(__doc__)
        return 2
    root, patch = args
    with open(patch, encoding="utf-8") as f:
        files = parse(f.read())
    results = {}
    for path, hunks in files:
        full = os.path.join(root, path)
        created = len(hunks) == 1 and hunks[0][0] == 0 and not hunks[0][1]
        try:
            if created:
                results[full] = None if reverse else "\n".join(hunks[0][2]) + "\n"
                continue
            with open(full, encoding="utf-8") as f:
                results[full] = apply_file(f.read(), hunks, reverse)
        except (OSError, ValueError) as e:
            print(f"apply_patch.py: {path}: {e}; nothing written", file=sys.stderr)
            return 1
    for full, text in results.items():
        if text is None:
            if os.path.exists(full):
                os.remove(full)
            continue
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
