#!/usr/bin/env python3
"""test_pip_venv.py — `pip install ./python` offline in a fresh virtual environment.

The one idea: do what a new user does, with nothing to download: a virtual
environment made by Debian's python3 -m venv (pip and setuptools, no wheel
package), then `pip install --no-index ./python` with build isolation (the
package's own backend, which requires nothing), the same with
--no-build-isolation, and an editable install; after each, import carve
from outside the checkout and run an arena on the virtual backend with
CARVE_LIBRARY pointing at the library this build made. Before the package
had its own backend, the first failed (no setuptools to download) and the
second died with "invalid command 'bdist_wheel'".

Usage: test_pip_venv.py PYTHON SOURCE_DIR LIBCARVE
Exit 0 when every install works, 1 on a failure, 77 (skipped) when PYTHON
cannot make a virtual environment with pip (Debian: apt-get install
python3-venv; tools/test.sh does).
"""

import os
import subprocess
import sys
import tempfile

SKIP = 77
CHECK = ("import carve, os, sys\n"
         "a = carve.Arena(backend='virtual', limit='1GiB')\n"
         "p = a.alloc(7 << 20)\n"
         "assert a.memory_allocated() >= 7 << 20, a.memory_allocated()\n"
         "a.free(p); a.close()\n"
         "print(os.path.realpath(carve.__file__)); print(carve.library_path()); print('arena ok')\n")


def run(args, **kw):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300, **kw)
    return p.returncode, p.stdout


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    python, src, lib = sys.argv[1], os.path.realpath(sys.argv[2]), os.path.realpath(sys.argv[3])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON", "VIRTUAL_ENV", "CARVE_"))}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", PIP_NO_CACHE_DIR="1",
               PYTHONDONTWRITEBYTECODE="1")
    failures = 0
    with tempfile.TemporaryDirectory(prefix="carve-venv-") as tmp:
        venv = os.path.join(tmp, "venv")
        rc, out = run([python, "-m", "venv", venv], env=env)
        vpy = os.path.join(venv, "bin", "python")
        if rc != 0 or not os.path.exists(vpy):
            print(out[-2000:])
            print(f"SKIP: {python} -m venv cannot make an environment with pip (apt-get install python3-venv)")
            return SKIP
        rc, out = run([vpy, "-c", "import wheel"], env=env)
        print(("note: the environment has the wheel package" if rc == 0 else
               "the environment has pip and no wheel package, as a fresh one does"))
        site = run([vpy, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], env=env)[1].strip()
        installs = [("pip install --no-index ./python", ["install", "--no-index", os.path.join(src, "python")],
                     site),
                    ("pip install --no-index --no-build-isolation ./python",
                     ["install", "--no-index", "--no-build-isolation", os.path.join(src, "python")], site),
                    ("pip install --no-index -e ./python", ["install", "--no-index", "-e", os.path.join(src, "python")],
                     os.path.join(src, "python"))]
        for what, args, where in installs:
            rc, out = run([vpy, "-m", "pip"] + args, env=env, cwd=tmp)
            if rc != 0:
                print(f"FAIL {what}\n{out[-3000:]}")
                failures += 1
                continue
            rc, out = run([vpy, "-c", CHECK], env=dict(env, CARVE_LIBRARY=lib), cwd=tmp)
            lines = out.strip().splitlines()
            good = (rc == 0 and len(lines) >= 3 and lines[0].startswith(os.path.realpath(where) + os.sep)
                    and os.path.realpath(lines[1]) == lib and lines[2] == "arena ok")
            print(f"{'ok  ' if good else 'FAIL'} {what}: import carve from {lines[0] if lines else '?'}")
            if not good:
                print(out[-3000:])
                failures += 1
            rc, out = run([vpy, "-m", "pip", "uninstall", "-y", "carve"], env=env, cwd=tmp)
            if rc != 0:
                print(f"FAIL pip uninstall carve after {what}\n{out[-2000:]}")
                failures += 1
        leftovers = [n for n in os.listdir(os.path.join(src, "python")) if n in ("build", "carve.egg-info", "dist")]
        if leftovers:
            print(f"FAIL the installs left {', '.join(leftovers)} in python/")
            failures += 1
    print(f"pip_install: {'FAILED, ' + str(failures) + ' failure(s)' if failures else 'all installs work'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
