#!/usr/bin/env python3
"""test_soname.py — the shared library is named by the versioning rule.

The rule (docs/api.md, "ABI"): the soname carries the ABI number
(libcarve.so.N), the library's own file begins with the soname
(libcarve.so.N.MINOR.PATCH), every exported symbol carries the version node
CARVE_N, and the project version in carve.h starts with N. The second part
is what keeps two ABIs installable side by side: when the file name did not
start with the soname (libcarve.so.0.1.0 for soname libcarve.so.1),
installing ABI 1 overwrote the file that libcarve.so.0 pointed to, and
programs linked against ABI 0 failed to start ("undefined symbol").

Usage: test_soname.py PATH/TO/libcarve.so.X.Y.Z PATH/TO/include/carve.h ABI
Exit status 0 when the rule holds, 1 when it does not (each break printed),
77 (skipped) when readelf is missing.
"""
import os
import re
import shutil
import subprocess
import sys

checks = failures = 0


def check(ok, what):
    global checks, failures
    checks += 1
    if not ok:
        failures += 1
        print("FAIL: " + what, file=sys.stderr)


def readelf(*args):
    return subprocess.run(["readelf", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=True).stdout


def main():
    lib, header, abi = sys.argv[1], sys.argv[2], sys.argv[3]
    if not shutil.which("readelf"):
        print("SKIP: no readelf")
        return 77
    name = os.path.basename(os.path.realpath(lib))
    m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", readelf("-d", lib))
    soname = m.group(1) if m else ""
    check(soname == "libcarve.so." + abi, f"soname {soname!r} is libcarve.so.{abi}")
    check(name.startswith(soname + "."),
          f"the library's file {name!r} begins with its soname {soname!r} and a dot, so that another "
          f"ABI's library never has the same file name")
    check(re.fullmatch(re.escape(soname) + r"\.\d+\.\d+", name) is not None,
          f"the library's file {name!r} is {soname}.MINOR.PATCH")

    syms = [line.split()[-1] for line in readelf("--dyn-syms", "-W", lib).splitlines()
            if " carve_" in line and " UND " not in line]
    check(len(syms) > 50, f"libcarve exports its functions ({len(syms)} carve_ symbols found)")
    unversioned = [s for s in syms if not s.endswith("@@CARVE_" + abi)]
    check(not unversioned, f"every exported carve_ symbol has version node CARVE_{abi}: {unversioned[:5]}")

    with open(header, encoding="utf-8") as f:
        m = re.search(r"#define\s+CARVE_VERSION_MAJOR\s+(\d+)", f.read())
    check(m is not None and m.group(1) == abi,
          f"carve.h's CARVE_VERSION_MAJOR ({m.group(1) if m else None}) is the ABI number {abi}")
    m = re.search(r"libcarve\.so\.(\d+\.\d+\.\d+)$", name)
    with open(header, encoding="utf-8") as f:
        text = f.read()
    hv = ".".join(re.search(r"#define\s+CARVE_VERSION_" + k + r"\s+(\d+)", text).group(1)
                  for k in ("MAJOR", "MINOR", "PATCH"))
    check(m is not None and m.group(1) == hv, f"the file's version ({name}) is carve.h's ({hv})")

    print(f"{checks} checks, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
