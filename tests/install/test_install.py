#!/usr/bin/env python3
"""test_install.py — `meson install` gives a tree that works from where it lands.

The one idea: install into a fresh temporary DESTDIR, which is the same as
a tree moved away from its prefix, and use it only from there, the way a
user of each kind would: the files in place, libcarve's soname and symbol
versions, the programs finding their library and carve-run its interposer
through paths relative to themselves, `import carve` finding the library
installed with it; a C program built with pkg-config; a C++ program built
with CMake's find_package(carve), against the shared and the static library.

Usage: test_install.py MODE BUILD_DIR SOURCE_DIR MESON KEY=VALUE...
  MODE: layout | pkgconfig | cmake
  KEY=VALUE: what meson.build knows of the install (prefix, libdir, bindir,
  includedir, abi, version, shared, static, pc_relocatable, python,
  python_dir, cpu_app, mock_dir; an empty value is false or absent)
Exit 0 when every check passes, 1 on a failure (each printed), 77 (skipped)
when the tool a mode needs (pkg-config, cmake, a C compiler) is missing.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77


class Check:
    def __init__(self):
        self.failures = 0

    def ok(self, cond, what, detail=""):
        print(("ok   " if cond else "FAIL ") + what + ("" if cond or not detail else f"\n     {detail}"))
        if not cond:
            self.failures += 1
        return cond


def run(args, env=None, cwd=None, timeout=300):
    p = subprocess.run(args, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout


def clean_env(**extra):
    """The environment without anything that would find carve for us."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD", "CARVE_LIBRARY", "CARVE_PRELOAD", "PYTHONPATH",
                        "PKG_CONFIG_PATH", "CMAKE_PREFIX_PATH", "CARVE_CONF")}
    env.update(extra)
    return env


def install(build, meson, dest):
    rc, out = run([meson, "install", "-C", build, "--no-rebuild", "--quiet", "--destdir", dest])
    if rc != 0:
        print(out)
        print("FAIL meson install --destdir")
        sys.exit(1)


def under(dest, path):
    return os.path.join(dest, path.lstrip("/"))


def resolved_libs(prog, env):
    """{soname: path} as the dynamic loader resolves them for prog."""
    rc, out = run([prog], env=dict(env, LD_TRACE_LOADED_OBJECTS="1"))
    return {m.group(1): m.group(2) for m in re.finditer(r"^\s*(\S+) => (\S+)", out, re.M)}


def layout(c, info, build, src, dest):
    prefix = under(dest, info["prefix"])
    libdir = os.path.join(prefix, info["libdir"])
    bindir = os.path.join(prefix, info["bindir"])
    incdir = os.path.join(prefix, info["includedir"])
    abi = info["abi"]
    so = os.path.join(libdir, f"libcarve.so.{abi}")

    want = [os.path.join(bindir, p) for p in ("carve-run", "carve-replay")]
    want += [os.path.join(incdir, h) for h in sorted(os.listdir(os.path.join(src, "include")))]
    want += [os.path.join(libdir, "libcarve_preload.so"), os.path.join(libdir, "pkgconfig", "carve.pc"),
             os.path.join(libdir, "cmake", "carve", "carve-config.cmake"),
             os.path.join(libdir, "cmake", "carve", "carve-config-version.cmake")]
    if info["shared"]:
        want += [so, os.path.join(libdir, "libcarve.so")]
    if info["static"]:
        want.append(os.path.join(libdir, "libcarve.a"))
    for f in want:
        c.ok(os.path.exists(f), f"installed: {os.path.relpath(f, dest)}")

    if info["shared"] and shutil.which("readelf"):
        rc, out = run(["readelf", "-d", so])
        c.ok(f"Library soname: [libcarve.so.{abi}]" in out, f"soname libcarve.so.{abi}")
        rc, out = run(["readelf", "--dyn-syms", "-W", so])
        exported = [line.split()[-1] for line in out.splitlines()
                    if re.search(r"\b(FUNC|OBJECT)\s+GLOBAL\s+DEFAULT\s+\d+", line)]
        carve = [s for s in exported if s.startswith("carve_")]
        c.ok(len(carve) > 50 and all(s.endswith(f"@@CARVE_{abi}") for s in carve),
             f"{len(carve)} exported carve_ functions, each versioned CARVE_{abi}",
             ", ".join(s for s in carve if not s.endswith(f"@@CARVE_{abi}"))[:300])
        others = [s for s in exported if not s.startswith("carve_") and not s.startswith("CARVE_")]
        c.ok(not others, "nothing but carve_ exported", ", ".join(others[:10]))

    env = clean_env()
    for prog in ("carve-replay", "carve-run"):
        path = os.path.join(bindir, prog)
        libs = resolved_libs(path, env)
        got = libs.get(f"libcarve.so.{abi}", "(not found)")
        c.ok(os.path.realpath(got) == os.path.realpath(so), f"{prog} loads the libcarve installed beside it",
             f"it loads {got}")
        rc, out = run([path, "--version"], env=env)
        c.ok(rc == 0 and info["version"] in out, f"{prog} --version", out.strip())

    carve_run = os.path.join(bindir, "carve-run")
    rc, out = run([carve_run, "--print-env", "--", "true"], env=env)
    preload = os.path.join(libdir, "libcarve_preload.so")
    c.ok(rc == 0 and f"LD_PRELOAD={os.path.realpath(preload)}" in out,
         "carve-run finds the interposer installed beside it", out.strip())
    if info.get("cpu_app") and os.path.exists(info["cpu_app"]):
        # The installed launcher and interposer serving a driver-API program
        # on the mock driver of tests/dropin (host memory, no GPU).
        rc, out = run([carve_run, "--report", "--", info["cpu_app"], "basic"],
                      env=clean_env(LD_LIBRARY_PATH=info["mock_dir"]))
        c.ok(rc == 0 and "OK basic" in out and "carve-run" in out,
             "installed carve-run serves a program on the mock driver", out[-1500:])

    pydir = info.get("python_dir")
    if pydir:
        pkg = os.path.join(under(dest, pydir), "carve")
        sources = sorted(f for f in os.listdir(os.path.join(src, "python", "carve"))
                         if f.endswith((".py", ".cpp")))
        missing = [f for f in sources if not os.path.exists(os.path.join(pkg, f))]
        c.ok(not missing, "every file of python/carve installed", ", ".join(missing))
        c.ok(os.path.exists(os.path.join(pkg, "_install.py")), "carve/_install.py written")
        code = ("import carve, sys; print(carve.library_path()); "
                "a = carve.Arena(backend='virtual', limit='1GiB'); p = a.alloc(3 << 20); "
                "assert a.memory_allocated() >= 3 << 20; a.free(p); a.close(); print('arena ok')")
        with tempfile.TemporaryDirectory() as cwd:
            rc, out = run([info["python"], "-c", code], env=clean_env(PYTHONPATH=under(dest, pydir),
                                                                   PYTHONDONTWRITEBYTECODE="1"), cwd=cwd)
        lines = out.strip().splitlines()
        c.ok(rc == 0 and lines and os.path.realpath(lines[0]) == os.path.realpath(so) and "arena ok" in out,
             "import carve loads the libcarve installed with it", out.strip()[-1500:])
        with tempfile.TemporaryDirectory() as cwd:
            built = os.path.join(build, "lib", f"libcarve.so.{abi}")
            rc, out = run([info["python"], "-c", "import carve; print(carve.library_path())"],
                          env=clean_env(PYTHONPATH=under(dest, pydir), CARVE_LIBRARY=built,
                                        PYTHONDONTWRITEBYTECODE="1"), cwd=cwd)
        c.ok(rc == 0 and out.strip() == built, "CARVE_LIBRARY still comes first", out.strip()[-500:])


C_PROGRAM = r"""
/* A C program built with pkg-config --cflags --libs carve. */
#include <carve.h>
#include <stdio.h>
int main(void) {
    carve_config cfg;
    carve_config_init(&cfg);
    cfg.backend = CARVE_BACKEND_VIRTUAL;
    if (carve_config_parse(&cfg, "limit=1GiB") != CARVE_OK) return 1;
    carve_arena *a;
    if (carve_arena_create(&cfg, &a) != CARVE_OK) { puts(carve_last_error(NULL)); return 1; }
    void *p;
    if (carve_alloc(a, 5u << 20, NULL, &p) != CARVE_OK || carve_memory_allocated(a) < (5u << 20)) return 1;
    if (carve_free(a, p) != CARVE_OK) return 1;
    printf("pkg-config consumer: carve %s\n", carve_version());
    carve_arena_destroy(a);
    return 0;
}
"""


def pkgconfig(c, info, build, src, dest):
    pkg = shutil.which("pkg-config") or shutil.which("pkgconf")
    cc = shutil.which("cc") or shutil.which("gcc")
    if not pkg or not cc:
        print("SKIP: no pkg-config" if not pkg else "SKIP: no C compiler")
        return SKIP
    prefix = under(dest, info["prefix"])
    libdir = os.path.join(prefix, info["libdir"])
    env = clean_env(PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
    # A relocatable .pc file (meson's pkgconfig.relocatable, carve's default)
    # finds the tree from its own place; an older build dir configured
    # without it is pointed there.
    args = [pkg] if info["pc_relocatable"] else [pkg, f"--define-variable=prefix={prefix}"]
    rc, ver = run(args + ["--modversion", "carve"], env=env)
    c.ok(rc == 0 and ver.strip() == info["version"], "pkg-config --modversion carve", ver.strip())
    rc, flags = run(args + ["--cflags", "--libs", "carve"], env=env)
    ldirs = [os.path.realpath(f[2:]) for f in flags.split() if f.startswith("-L")]
    c.ok(rc == 0 and os.path.realpath(libdir) in ldirs,
         "pkg-config points into the installed tree" + (" (relocatable .pc)" if info["pc_relocatable"] else ""),
         flags.strip())
    with tempfile.TemporaryDirectory() as tmp:
        srcf = os.path.join(tmp, "consumer.c")
        with open(srcf, "w") as f:
            f.write(C_PROGRAM)
        exe = os.path.join(tmp, "consumer")
        rc, out = run([cc, "-std=c99", "-Wall", "-Werror", srcf, "-o", exe] + flags.split(), env=env)
        if not c.ok(rc == 0, "a C program builds with pkg-config's flags", out[-2000:]):
            return 1
        rc, out = run([exe], env=clean_env(LD_LIBRARY_PATH=libdir))
        c.ok(rc == 0 and f"carve {info['version']}" in out, "and runs", out.strip())
    return 0


def cmake(c, info, build, src, dest):
    exe = shutil.which("cmake")
    if not exe:
        print("SKIP: no cmake (tools/test.sh installs it with apt-get)")
        return SKIP
    prefix = under(dest, info["prefix"])
    variants = [("shared", [])] + ([("static", ["-DCARVE_EXAMPLE_STATIC=ON"])] if info["static"] else [])
    for name, extra in variants:
        with tempfile.TemporaryDirectory() as tmp:
            b = os.path.join(tmp, "build")
            rc, out = run([exe, "-S", os.path.join(src, "examples", "cmake"), "-B", b,
                           f"-DCMAKE_PREFIX_PATH={prefix}", "-DCMAKE_BUILD_TYPE=Release"] + extra,
                          env=clean_env())
            if not c.ok(rc == 0 and f"carve {info['version']} (ABI {info['abi']}" in out,
                        f"cmake configures examples/cmake with find_package(carve) ({name})", out[-3000:]):
                continue
            rc, out = run([exe, "--build", b], env=clean_env())
            if not c.ok(rc == 0, f"and builds it ({name})", out[-3000:]):
                continue
            prog = os.path.join(b, "carve_cmake_example")
            for backend in ("host", "virtual"):
                rc, out = run([prog, backend], env=clean_env())
                c.ok(rc == 0 and f"carve {info['version']}: {backend} backend" in out,
                     f"and it runs on the {backend} backend ({name})", out.strip()[-1000:])
            if name == "shared":
                libs = resolved_libs(prog, clean_env())
                got = libs.get(f"libcarve.so.{info['abi']}", "(not found)")
                c.ok(os.path.realpath(got).startswith(os.path.realpath(prefix)),
                     "the program loads the installed libcarve", got)
    # A version the installed one does not satisfy must be refused.
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "CMakeLists.txt"), "w") as f:
            f.write("cmake_minimum_required(VERSION 3.17)\nproject(v C)\nfind_package(carve 99.0 REQUIRED)\n")
        rc, out = run([exe, "-S", tmp, "-B", os.path.join(tmp, "b"), f"-DCMAKE_PREFIX_PATH={prefix}"],
                      env=clean_env())
        c.ok(rc != 0 and "99.0" in out and info["version"] in out,
             "find_package(carve 99.0) is refused, naming the version found", out[-1500:])
    return 0


def main():
    if len(sys.argv) < 6 or sys.argv[1] not in ("layout", "pkgconfig", "cmake"):
        print(__doc__)
        return 2
    mode, build, src, meson = sys.argv[1:5]
    info = dict(kv.split("=", 1) for kv in sys.argv[5:])
    c = Check()
    with tempfile.TemporaryDirectory(prefix="carve-install-") as dest:
        install(build, meson, dest)
        if mode == "layout":
            rc = layout(c, info, build, src, dest) or 0
        elif mode == "pkgconfig":
            rc = pkgconfig(c, info, build, src, dest)
        else:
            rc = cmake(c, info, build, src, dest)
    if rc == SKIP:
        return SKIP
    print(f"{mode}: {'FAILED, ' + str(c.failures) + ' failure(s)' if c.failures else 'all checks passed'}")
    return 1 if c.failures or rc else 0


if __name__ == "__main__":
    sys.exit(main())
