#!/usr/bin/env python3
"""test_check_api_docs.py — the API-reference check catches what it must.

Builds small trees in a temporary directory (a public header with a CARVE_API
prototype, a static inline function and a function-like macro; a
docs/api.md naming some of them) and checks that tools/check_api_docs.py
fails naming each function the reference lacks -- also one named only
outside backquotes, or only inside a comment of the header -- passes once
all are there, and refuses a tree with no public function.

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
#define CARVE_API
/* carve_in_a_comment(x) is not a function */
CARVE_API int carve_alpha(int n);
CARVE_API const char *carve_beta(void);
static inline int carve_gamma(int x) { return carve_alpha(x); }
#define carve_delta(x) carve_alpha(x)
typedef struct carve_thing { int (*fn)(void); } carve_thing;
"""


def tree(doc):
    d = tempfile.mkdtemp(prefix="apidocs-")
    os.makedirs(os.path.join(d, "include"))
    os.makedirs(os.path.join(d, "docs"))
    with open(os.path.join(d, "include", "carve.h"), "w") as f:
        f.write(HEADER)
    with open(os.path.join(d, "docs", "api.md"), "w") as f:
        f.write(doc)
    return d


def run(checker, root):
    p = subprocess.run([sys.executable, checker, "--root", root], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True)
    return p.returncode, p.stdout


def main():
    checker = sys.argv[1]
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

    d = tree(full)
    with open(os.path.join(d, "include", "carve.h"), "w") as f:
        f.write("/* nothing public */\n")
    rc, out = run(checker, d)
    check(rc == 2, f"a tree without public functions is refused (rc {rc}): {out}")

    print(f"{checks} checks, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
