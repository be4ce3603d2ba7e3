#!/usr/bin/env python3
"""check_layers.py — the house rules of carve's source tree, checked.

The one idea: every C-family file is a node (a .c and the .h of the same name
are one node, "module"); an edge A -> B exists when A includes B or uses a
function or global variable that B defines (inline code in a header counts as
the header's own use). Then:

  1. no circles: the module graph is acyclic, so no two files call each
     other, however long the loop;
  2. arrows point down: each folder is a room (ROOMS below) that may use only
     the rooms it lists; an edge into any other room is an upward arrow;
  3. every file under lib/ lives in a room, and every source file opens with
     a comment saying what it is for.

Outside lib/, a use of a public function (one declared in include/) is an edge
to include/, the public boundary: front ends may use the library only through
its public headers. Inside lib/ it is an edge to the file that defines it, so
a backend calling up into the engine is caught even through a public name.

The analysis is lexical (comments and strings stripped, braces counted), which
is exact for this code base's style: functions defined at file scope with
their body opening after the parameter list.

Usage: tools/check_layers.py [--root DIR] [--graph] [--modules ROOM] [--quiet]
Exit status 0 when the tree keeps the rules, 1 when it breaks one (each
violation printed), 2 on bad usage.
"""

import argparse
import os
import re
import sys
from collections import defaultdict

# Room -> the rooms it may use. A file's room is the longest key that prefixes
# its path. Order is bottom-up, as in docs/architecture.md.
ROOMS = {
    "include": [],
    "lib/base": ["include"],
    "lib/backend": ["include", "lib/base"],
    "lib/engine": ["include", "lib/base", "lib/backend"],
    "lib/config": ["include", "lib/base", "lib/engine"],
    "lib/device": ["include", "lib/base", "lib/backend", "lib/engine", "lib/config"],
    "lib/trace": ["include", "lib/base", "lib/engine", "lib/config"],
    "lib/kernels": ["include", "lib/base", "lib/engine"],
    "lib/frameworks": ["include", "lib/base", "lib/engine", "lib/config", "lib/device"],
    "lib/preload": ["include", "lib/base", "lib/backend", "lib/engine", "lib/config", "lib/device",
                    "lib/trace"],
    "tools": ["include"],
    "examples": ["include"],
    "integrations": ["include"],
    "python": ["include"],
    "bench": ["include", "lib/*", "tools"],
    "tests": ["*"],
}

SOURCE_EXT = (".c", ".h", ".cu", ".cuh", ".cpp", ".hpp")
INCLUDE_ROOTS = ("include", "lib")
SKIP_DIRS = {".git", "build", "subprojects"}

IDENT = re.compile(r"[A-Za-z_]\w*")
CALL = re.compile(r"([A-Za-z_]\w*)\s*\(")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "do", "else", "case", "defined",
            "__attribute__", "__declspec", "alignof", "_Alignof", "__typeof__", "typeof"}


def strip_code(text):
    """Comments and string/char literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "/" and i + 1 < n and text[i + 1] == "/":
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c == "/" and i + 1 < n and text[i + 1] == "*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j) or " ")
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def drop_attributes(code):
    """Remove __attribute__((...)) and __declspec(...) with balanced parentheses."""
    res = []
    i = 0
    for m in re.finditer(r"__attribute__|__declspec", code):
        if m.start() < i:
            continue
        j = m.end()
        while j < len(code) and code[j].isspace():
            j += 1
        if j >= len(code) or code[j] != "(":
            continue
        depth = 0
        k = j
        while k < len(code):
            if code[k] == "(":
                depth += 1
            elif code[k] == ")":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        res.append(code[i:m.start()])
        i = k + 1
    res.append(code[i:])
    return "".join(res)


def split_preprocessor(code):
    """(code without preprocessor lines, text of #define bodies)."""
    keep, defines = [], []
    lines = code.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("#"):
            block = [line]
            while block[-1].rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                block.append(lines[i])
            text = " ".join(block)
            m = re.match(r"\s*#\s*define\s+\w+(\([^)]*\))?(.*)", text)
            if m:
                defines.append(m.group(2))
            keep.extend([""] * len(block))
        else:
            keep.append(line)
        i += 1
    return "\n".join(keep), " ".join(defines)


class Unit:
    """What one file defines and uses."""

    def __init__(self, path, text):
        self.path = path
        code = drop_attributes(strip_code(text))
        self.includes = INCLUDE.findall(text)
        self.raw_defines = "\n".join(l for l in code.split("\n") if l.lstrip().startswith("#"))
        body, self.define_text = split_preprocessor(code)
        self.functions = set()      # non-static functions defined here
        self.statics = set()        # static functions (file-local; inline ones in headers count as uses)
        self.variables = set()      # non-static global variables defined here
        self.body_text = []         # text inside function bodies
        self.top_text = []          # file-scope text outside function bodies
        self._scan(body)

    def _scan(self, code):
        depth = 0
        transparent = []            # depth levels of extern "C" { / namespace { blocks
        stmt_start = 0
        func_start = None
        i, n = 0, len(code)
        while i < n:
            c = code[i]
            if c == "{":
                lvl = depth - len(transparent)
                head = code[stmt_start:i]
                if lvl == 0 and re.search(r"(extern\s*\"\"|namespace(\s+\w+)?)\s*$", head):
                    transparent.append(depth)
                    depth += 1
                    stmt_start = i + 1
                    i += 1
                    continue
                if lvl == 0:
                    name = self._function_name(head)
                    if name:
                        (self.statics if re.search(r"\bstatic\b", head) else self.functions).add(name)
                        self.top_text.append(head)
                        func_start = i
                depth += 1
            elif c == "}":
                depth -= 1
                if transparent and depth == transparent[-1]:
                    transparent.pop()
                    stmt_start = i + 1
                elif depth - len(transparent) == 0:
                    if func_start is not None:
                        self.body_text.append(code[func_start:i + 1])
                        func_start = None
                        stmt_start = i + 1
            elif c == ";" and depth - len(transparent) == 0:
                stmt = code[stmt_start:i]
                self.top_text.append(stmt)
                self._variable(stmt)
                stmt_start = i + 1
            i += 1

    @staticmethod
    def _function_name(head):
        """Name of the function whose definition ends with head, or None."""
        h = head.rstrip()
        h = re.sub(r"(\bconst|\bnoexcept|\boverride)\s*$", "", h).rstrip()
        if not h.endswith(")") or re.search(r"=\s*$", h):
            return None
        depth = 0
        for k in range(len(h) - 1, -1, -1):
            if h[k] == ")":
                depth += 1
            elif h[k] == "(":
                depth -= 1
                if depth == 0:
                    m = re.search(r"([A-Za-z_]\w*)\s*$", h[:k])
                    if not m or m.group(1) in KEYWORDS:
                        return None
                    before = h[:m.start()]
                    if re.search(r"\b(struct|union|enum|typedef)\b", before) and "(" not in before:
                        return None
                    return m.group(1)
        return None

    def _variable(self, stmt):
        s = stmt.strip()
        if not s or re.match(r"(typedef|extern|static|struct\s+\w+\s*$|union|enum|using|template)\b", s):
            return
        if re.match(r"(struct|union|enum)\s+\w+\s*$", s):
            return
        lhs = s.split("=", 1)[0]
        if "(" in lhs:             # a prototype, or a function pointer: not a definition we track
            return
        m = re.search(r"([A-Za-z_]\w*)\s*(\[[^\]]*\]\s*)*$", lhs)
        if m and m.group(1) not in KEYWORDS:
            self.variables.add(m.group(1))

    def defined(self):
        return self.functions | self.variables

    def types(self):
        """Type names this file defines (typedefs, struct/union/enum tags): sizeof(x) is no call."""
        text = " ".join(self.top_text) + " " + " ".join(self.body_text)
        names = set(re.findall(r"\b(?:struct|union|enum)\s+([A-Za-z_]\w*)", text))
        for stmt in self.top_text:
            if re.match(r"\s*typedef\b", stmt):
                m = re.search(r"([A-Za-z_]\w*)\s*(\[[^\]]*\]\s*)*$", stmt)
                if m:
                    names.add(m.group(1))
        return names

    def declared(self):
        """Every name this file declares or defines at file scope (prototypes included)."""
        names = self.functions | self.statics | self.variables
        for stmt in self.top_text:
            names.update(CALL.findall(stmt))
            m = re.search(r"([A-Za-z_]\w*)\s*(\[[^\]]*\]\s*)*$", stmt.split("=", 1)[0])
            if m:
                names.add(m.group(1))
        names.update(re.findall(r"#\s*define\s+([A-Za-z_]\w*)", self.raw_defines))
        return names

    def used_text(self, is_header):
        if is_header:
            return " ".join(self.body_text) + " " + self.define_text
        return " ".join(self.body_text) + " " + " ".join(self.top_text) + " " + self.define_text


def module_of(path):
    return os.path.splitext(path)[0]


def room_of(path):
    best = None
    for r in ROOMS:
        if path == r or path.startswith(r + "/"):
            if best is None or len(r) > len(best):
                best = r
    return best


def allowed(src_room, dst_room):
    if src_room == dst_room:
        return True
    for a in ROOMS.get(src_room, []):
        if a == "*" or a == dst_room or (a.endswith("/*") and dst_room.startswith(a[:-1])):
            return True
    return False


def collect(root):
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        dirnames[:] = sorted(d for d in dirnames
                             if d not in SKIP_DIRS and not d.startswith("build") and not d.startswith("."))
        if rel == ".":
            rel = ""
        for f in sorted(filenames):
            if f.endswith(SOURCE_EXT):
                files.append(os.path.join(rel, f) if rel else f)
    return files


def resolve_include(root, src, name, present):
    cands = [os.path.normpath(os.path.join(os.path.dirname(src), name))]
    cands += [os.path.normpath(os.path.join(r, name)) for r in INCLUDE_ROOTS]
    for c in cands:
        if c in present:
            return c
    return None


def sccs(nodes, edges):
    """Tarjan's strongly connected components (iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def check(root, graph=False, quiet=False, modules=None):
    files = collect(root)
    present = set(files)
    units = {}
    problems = []
    for f in files:
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        units[f] = Unit(f, text)
        if not re.match(r"\s*(/\*|//)", text):
            problems.append(f"{f}: no header comment (say what the file is for in its first lines)")
        if f.startswith("lib/") and room_of(f) in (None, "lib"):
            problems.append(f"{f}: lives in no room (put it in a folder of lib/ listed in ROOMS)")

    public = set()                      # names declared in public headers
    for f, u in units.items():
        if f.startswith("include/"):
            with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
                code = split_preprocessor(drop_attributes(strip_code(fh.read())))[0]
            public.update(re.findall(r"([A-Za-z_]\w*)\s*\(", code))
    shared = set()                      # global variables declared extern in a header
    for f, u in units.items():
        if f.endswith((".h", ".cuh", ".hpp")):
            for stmt in u.top_text:
                m = re.match(r"\s*extern\b(?!\s*\"\")[^(]*?([A-Za-z_]\w*)\s*(\[[^\]]*\]\s*)*$", stmt)
                if m:
                    shared.add(m.group(1))
    definers = defaultdict(set)         # name -> modules defining it
    for f, u in units.items():
        for name in u.functions | (u.variables & shared):
            definers[name].add(module_of(f))
        if f.endswith((".h", ".cuh", ".hpp")):
            for name in u.statics:      # static inline in a header: defined by the header
                definers[name].add(module_of(f))

    # A name refers to one of ours only where a declaration of it is visible:
    # in the file itself or in a header it includes, directly or not. (Tests
    # that emulate CUDA built-ins on the host define make_float4 and
    # friends; the kernels' uses of them are CUDA's, not the tests'.)
    direct = {f: [t for t in (resolve_include(root, f, i, present) for i in u.includes) if t]
              for f, u in units.items()}
    declared = {f: u.declared() for f, u in units.items()}
    visible = {}
    for f in units:
        seen, todo, names = {f}, list(direct[f]), set(declared[f])
        while todo:
            h = todo.pop()
            if h in seen:
                continue
            seen.add(h)
            names |= declared[h]
            todo.extend(direct[h])
        visible[f] = names

    edges = defaultdict(set)
    why = {}
    mod_room = {}
    for f, u in units.items():
        m = module_of(f)
        mod_room[m] = room_of(f)
        edges.setdefault(m, set())
        for t in direct[f]:
            if module_of(t) != m:
                edges[m].add(module_of(t))
                why.setdefault((m, module_of(t)), f"{f} includes {t}")
        is_header = f.endswith((".h", ".cuh", ".hpp"))
        own_local = u.statics | u.defined() | u.types()
        outside_lib = not f.startswith("lib/")
        used = u.used_text(is_header)
        # A function is used by a call, or by name in file-scope text (an ops
        # table); a shared variable by name anywhere. A bare name inside a body
        # is more often a local variable that happens to share a function's name.
        names = set(CALL.findall(used)) | (set(IDENT.findall(used)) & shared)
        if not is_header:
            names |= set(IDENT.findall(" ".join(u.top_text)))
        for name in names:
            if name not in definers or name in own_local or name not in visible[f]:
                continue
            targets = definers[name]
            if not f.startswith("tests/"):
                # Nothing may use tests/, so a name defined there (a mock
                # driver's or runtime's function) is never what another
                # room's file means: it means the real one, outside the tree.
                targets = {t for t in targets if room_of(t) != "tests"}
            if outside_lib and name in public:
                targets = {"include/carve"}
            elif len(targets) > 1:
                # The same name defined in several rooms (a mock driver in
                # tests/ and the interposer in lib/): a file means the one it
                # may use, if there is one.
                mine = room_of(f)
                usable = {t for t in targets if allowed(mine, room_of(t) or "")}
                targets = usable or targets
            for t in targets:
                if t != m:
                    edges[m].add(t)
                    why.setdefault((m, t), f"{f} uses {name}")
    for m in list(edges):
        for t in edges[m]:
            mod_room.setdefault(t, room_of(t))

    for comp in sccs(sorted(edges), edges):
        if len(comp) > 1:
            inside = [why[(a, b)] for a in comp for b in sorted(edges[a]) if b in comp and (a, b) in why]
            problems.append("circle between " + ", ".join(comp) + ":\n    " + "\n    ".join(inside))
    for a in sorted(edges):
        for b in sorted(edges[a]):
            ra, rb = mod_room.get(a), mod_room.get(b)
            if ra is None or rb is None or not allowed(ra, rb):
                problems.append(f"upward or sideways arrow {ra} -> {rb}: {why.get((a, b), a + ' -> ' + b)}")

    if graph:
        rooms = defaultdict(set)
        for a in edges:
            for b in edges[a]:
                ra, rb = mod_room.get(a), mod_room.get(b)
                if ra != rb:
                    rooms[ra].add(rb)
        for r in ROOMS:
            if r in rooms:
                print(f"{r} -> {', '.join(sorted(rooms[r]))}")
    if modules:
        for a in sorted(edges):
            if mod_room.get(a) == modules:
                inside = sorted(os.path.basename(b) for b in edges[a] if mod_room.get(b) == modules)
                print(f"{os.path.basename(a)} -> {', '.join(inside) if inside else '(nothing in the room)'}")
    for p in problems:
        print(p)
    if not quiet:
        nlib = sum(1 for f in files if f.startswith("lib/"))
        nedges = sum(len(v) for v in edges.values())
        print(f"check_layers: {len(files)} files ({nlib} in lib/), {len(edges)} modules, {nedges} edges: "
              + ("OK" if not problems else f"{len(problems)} problem(s)"))
    return 0 if not problems else 1


def main():
    ap = argparse.ArgumentParser(description="Check that carve's rooms keep their arrows pointing down "
                                 "and that no files form a circle.")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."),
                    help="source tree to check (default: this checkout)")
    ap.add_argument("--graph", action="store_true", help="also print which rooms each room uses")
    ap.add_argument("--quiet", action="store_true", help="print violations only")
    ap.add_argument("--modules", metavar="ROOM", help="also print the arrows between the files of ROOM "
                    "(e.g. lib/engine)")
    args = ap.parse_args()
    if not os.path.isdir(args.root):
        print(f"check_layers: {args.root} is not a directory", file=sys.stderr)
        return 2
    if args.modules and args.modules not in ROOMS:
        print(f"check_layers: unknown room {args.modules} (rooms: {', '.join(ROOMS)})", file=sys.stderr)
        return 2
    return check(os.path.normpath(args.root), args.graph, args.quiet, args.modules)


if __name__ == "__main__":
    sys.exit(main())
