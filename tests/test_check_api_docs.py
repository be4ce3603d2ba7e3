#!/usr/bin/env python3
"""test_check_api_docs.py — the API-reference check catches what it must.

Builds small trees in a temporary directory, removed at the end (a public
header declaring functions in every form C allows -- a CARVE_API prototype,
with attributes before or after the return type, a static inline function,
also written inline static, static __inline__ or with an attribute, a
parenthesised name, a function returning a function pointer, a function-like
macro and a macro alias -- and a docs/api.md naming some of them) and checks
that tools/check_api_docs.py fails naming each function the reference lacks
-- also one named only outside backquotes, or only inside a comment of the
header -- passes once all are there, and refuses a tree with no public
function.

Usage: test_check_api_docs.py PATH/TO/check_api_docs.py
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


HEADER = """/* a public header */
#if defined(__GNUC__) && defined(CARVE_BUILDING)
#define CARVE_API __attribute__((visibility("default")))
#else
#define CARVE_API
#endif
/* carve_in_a_comment(x) is not a function */
CARVE_API int carve_alpha(int n);
CARVE_API const char *carve_beta(void);
static inline int carve_gamma(int x) { return carve_alpha(x); }
#define carve_delta(x) carve_alpha(x)
typedef struct carve_thing { int (*fn)(void); } carve_thing;
typedef void (*carve_callback)(int status);
"""

# Every other way C lets a header declare a function, with the name each gives.
FORMS = [
    ("CARVE_API __attribute__((warn_unused_result)) int carve_attr_first(int n);", "carve_attr_first"),
    ("CARVE_API int __attribute__((nonnull (1), format(printf, 1, 2))) carve_attr_after(const char *f, ...);",
     "carve_attr_after"),
    ("CARVE_API int carve_attr_last(int n) __attribute__((pure));", "carve_attr_last"),
    ("static inline __attribute__((always_inline)) int carve_attr_inline(int x) { return x; }", "carve_attr_inline"),
    ("inline static int carve_inline_static(int x) { return x; }", "carve_inline_static"),
    ("static __inline__ int carve_gnu_inline(int x) { return x; }", "carve_gnu_inline"),
    ("static __inline int carve_msvc_inline(int x) { return x; }", "carve_msvc_inline"),
    ("CARVE_API int (carve_paren)(int n);", "carve_paren"),
    ("#define carve_alias carve_alpha", "carve_alias"),
    ("CARVE_API void (*carve_get_handler(void))(int);", "carve_get_handler"),
    ("CARVE_API carve_thing (*carve_make_handler(int kind))(carve_thing t);", "carve_make_handler"),
    ("CARVE_API [[nodiscard]] int carve_c23_attr(int n);", "carve_c23_attr"),
    ("CARVE_API int carve_takes_callback(void (*carve_cb)(int), int n);", "carve_takes_callback"),
]

TMP = None  # every tree goes under one temporary directory, removed at the end


def tree(doc, header=HEADER):
    d = tempfile.mkdtemp(prefix="tree-", dir=TMP)
    os.makedirs(os.path.join(d, "include"))
    os.makedirs(os.path.join(d, "docs"))
    with open(os.path.join(d, "include", "carve.h"), "w") as f:
        f.write(header)
    with open(os.path.join(d, "docs", "api.md"), "w") as f:
        f.write(doc)
    return d


def run(checker, root):
    p = subprocess.run([sys.executable, checker, "--root", root], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True)
    return p.returncode, p.stdout


def main():
    global TMP
    with tempfile.TemporaryDirectory(prefix="apidocs-") as TMP:
        return checks_on(sys.argv[1])


def checks_on(checker):
    full = ("| function | returns |\n|---|---|\n| `carve_alpha(n)` | n |\n| `carve_beta()` | a name |\n"
            "`carve_gamma(x)` and `carve_delta(x)` are the same.\n")
    rc, out = run(checker, tree(full))
    check(rc == 0, f"a complete reference passes (rc {rc}): {out}")
    check("4 of 4 public functions documented" in out, f"the count: {out}")

    rc, out = run(checker, tree(full.replace("| `carve_beta()` | a name |\n", "")))
    check(rc == 1, f"a missing prototype fails (rc {rc})")
    check("include/carve.h: carve_beta is not in docs/api.md" in out, f"the missing one is named: {out}")
    check("carve_alpha" not in out.split("check_api_docs:")[0], f"only the missing one is named: {out}")

    rc, out = run(checker, tree(full.replace("`carve_gamma(x)` and ", "")))
    check(rc == 1 and "carve_gamma is not in" in out, f"a static inline function counts: {out}")

    rc, out = run(checker, tree(full.replace(" and `carve_delta(x)`", "")))
    check(rc == 1 and "carve_delta is not in" in out, f"a function-like macro counts: {out}")

    rc, out = run(checker, tree(full.replace("`carve_alpha(n)`", "carve_alpha(n)")))
    check(rc == 1 and "carve_alpha is not in" in out, f"a name outside backquotes does not count: {out}")

    check("carve_in_a_comment" not in out and "carve_thing" not in out, f"comments and types are no functions: {out}")

    # Each other form of declaration: missing from the reference, it is
    # named; there, it passes; and nothing else is taken for a function
    # (the return type carve_thing, the parameter carve_cb).
    header = HEADER + "".join(decl + "\n" for decl, _ in FORMS)
    names = [name for _, name in FORMS]
    every = full + "".join(f"`{n}` " for n in names) + "\n"
    rc, out = run(checker, tree(every, header))
    check(rc == 0, f"every form documented passes (rc {rc}): {out}")
    check(f"{4 + len(names)} of {4 + len(names)} public functions documented" in out, f"the count: {out}")
    for name in names:
        rc, out = run(checker, tree(every.replace(f"`{name}` ", ""), header))
        check(rc == 1 and f"{name} is not in" in out, f"{name}: the form is read as a public function: {out}")
    rc, out = run(checker, tree(full, header))
    missing = {line.split(": ")[1].split(" ")[0] for line in out.splitlines() if " is not in " in line}
    check(missing == set(names), f"exactly the undocumented forms are named: {sorted(missing ^ set(names))}")

    d = tree(full)
    with open(os.path.join(d, "include", "carve.h"), "w") as f:
        f.write("/* nothing public */\n")
    rc, out = run(checker, d)
    check(rc == 2, f"a tree without public functions is refused (rc {rc}): {out}")

    print(f"{checks} checks, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
