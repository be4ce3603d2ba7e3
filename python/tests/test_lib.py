"""test_lib.py — finding libcarve, and the ctypes mirror of carve's structures.

The one idea: the loader takes the places it searches as arguments, so each
rule (CARVE_LIBRARY wins and alone, a copy beside the package, build trees
with sanitized ones skipped, the system loader last, every place listed on
failure) is checked against temporary directories; the structure layouts
are checked against the C compiler's own sizeof and offsetof.
"""

import ctypes
import json
import os
import shutil
import subprocess
import sys

import pytest

from carve import _lib

from conftest import CHECKOUT, PYROOT

NOWHERE = ("libcarve-definitely-missing.so.0",)


def test_not_found_lists_every_place(tmp_path):
    pkg, co = tmp_path / "pkg", tmp_path / "checkout"
    pkg.mkdir()
    (co / "build-x" / "lib").mkdir(parents=True)
    with pytest.raises(_lib.LibraryNotFoundError) as e:
        _lib.load(env={}, package_dir=str(pkg), checkout=str(co), system_names=NOWHERE)
    msg = str(e.value)
    assert "cannot load libcarve" in msg
    assert f"beside the package: {pkg}/libcarve.so* (not found)" in msg
    assert f"build tree: {co}/build-x/lib/libcarve.so* (not found)" in msg
    assert "system loader: libcarve-definitely-missing.so.0" in msg
    assert "CARVE_LIBRARY" in msg  # the advice names the variable
    # In the order searched.
    assert msg.index("beside the package") < msg.index("build tree") < msg.index("system loader")


def test_no_build_tree_is_listed(tmp_path):
    with pytest.raises(_lib.LibraryNotFoundError) as e:
        _lib.load(env={}, package_dir=str(tmp_path), checkout=str(tmp_path), system_names=NOWHERE)
    assert f"build tree: {tmp_path}/build*/lib/libcarve.so* (not found)" in str(e.value)


def test_carve_library_is_the_only_place(tmp_path, L):
    bad = tmp_path / "nope" / "libcarve.so"
    # Even with a loadable copy beside the package, a wrong CARVE_LIBRARY is an error.
    os.symlink(os.path.realpath(_lib.library_path()), tmp_path / "libcarve.so")
    with pytest.raises(_lib.LibraryNotFoundError) as e:
        _lib.load(env={"CARVE_LIBRARY": str(bad)}, package_dir=str(tmp_path), checkout=str(tmp_path),
                  system_names=NOWHERE)
    msg = str(e.value)
    assert f"CARVE_LIBRARY: {bad} (not found)" in msg
    assert "beside the package" not in msg


def test_carve_library_not_a_library(tmp_path):
    junk = tmp_path / "libcarve.so"
    junk.write_text("not an ELF file")
    with pytest.raises(_lib.LibraryNotFoundError) as e:
        _lib.load(env={"CARVE_LIBRARY": str(junk)}, system_names=NOWHERE)
    assert f"CARVE_LIBRARY: {junk} (" in str(e.value)
    assert "not found" not in str(e.value)  # it was found, and failed to load


def test_copy_beside_the_package_is_used(tmp_path, L):
    os.symlink(os.path.realpath(_lib.library_path()), tmp_path / "libcarve.so")
    path, dll = _lib.load(env={}, package_dir=str(tmp_path), checkout=str(tmp_path / "none"),
                          system_names=NOWHERE)
    assert path == str(tmp_path / "libcarve.so")
    assert dll.carve_version().decode().count(".") == 2


def test_build_tree_order_and_sanitized_skipped(tmp_path, L):
    co = tmp_path / "co"
    for name, sanitize in (("build-asan", "address"), ("build-release", "none"), ("build-other", "none")):
        lib = co / name / "lib"
        lib.mkdir(parents=True)
        os.symlink(os.path.realpath(_lib.library_path()), lib / "libcarve.so")
        info = co / name / "meson-info"
        info.mkdir()
        (info / "intro-buildoptions.json").write_text(json.dumps([{"name": "b_sanitize", "value": sanitize}]))
    cands = _lib.find_candidates(env={}, package_dir=str(tmp_path / "pkg"), checkout=str(co),
                                 system_names=NOWHERE)
    kinds = [(what, where, kind) for what, where, kind in cands]
    files = [where for what, where, kind in kinds if kind == "file"]
    assert files[0] == str(co / "build-release" / "lib" / "libcarve.so")
    assert str(co / "build-other" / "lib" / "libcarve.so") in files
    assert not any("build-asan" in f for f in files)
    assert any(kind == "skipped" and "build-asan" in where for _, where, kind in kinds)
    path, _ = _lib.load(env={}, package_dir=str(tmp_path / "pkg"), checkout=str(co), system_names=NOWHERE)
    assert path == str(co / "build-release" / "lib" / "libcarve.so")


@pytest.mark.parametrize("value,sanitized", [
    ("none", False), ("", False), ("address", True), ("address,undefined", True),  # meson before 1.8: a string
    ([], False), (["none"], False), (["address"], True), (["address", "undefined"], True), (["thread"], True),
])
def test_sanitized_reads_both_forms_of_b_sanitize(tmp_path, value, sanitized):
    """meson 1.8 and later store b_sanitize as a list, [] when off."""
    d = tmp_path / "build-x"
    (d / "meson-info").mkdir(parents=True)
    (d / "meson-info" / "intro-buildoptions.json").write_text(json.dumps([{"name": "b_sanitize", "value": value}]))
    assert _lib._sanitized(str(d)) is sanitized


def _installed_tree(tmp_path, relative=True, absolute=None):
    """A package directory as meson install leaves it: carve/_install.py
    naming a library under lib/ of the same tree."""
    real = os.path.realpath(_lib.library_path())
    pkg, libdir = tmp_path / "py" / "carve", tmp_path / "lib"
    pkg.mkdir(parents=True)
    libdir.mkdir()
    os.symlink(real, libdir / "libcarve.so.1")
    rel = os.path.relpath(libdir / "libcarve.so.1", pkg) if relative else ""
    (pkg / "_install.py").write_text(f'"""written by meson"""\nLIBRARY = "{absolute or ""}"\n'
                                     f'LIBRARY_RELATIVE = "{rel}"\n')
    return pkg, libdir / "libcarve.so.1"


def test_installed_library_after_carve_library(tmp_path, L):
    pkg, installed = _installed_tree(tmp_path)
    os.symlink(os.path.realpath(_lib.library_path()), pkg / "libcarve.so")  # a copy beside: comes later
    path, _ = _lib.load(env={}, package_dir=str(pkg), checkout=str(tmp_path / "none"), system_names=NOWHERE)
    assert path == str(installed)
    other = tmp_path / "other.so"
    os.symlink(os.path.realpath(_lib.library_path()), other)
    path, _ = _lib.load(env={"CARVE_LIBRARY": str(other)}, package_dir=str(pkg), system_names=NOWHERE)
    assert path == str(other)


def test_installed_library_relative_then_absolute(tmp_path, L):
    # The tree moved (or installed with DESTDIR): the relative path finds
    # it, though the absolute one names where it was meant to go.
    pkg, installed = _installed_tree(tmp_path, absolute="/nonexistent/lib/libcarve.so.1")
    cands = _lib.find_candidates(env={}, package_dir=str(pkg), checkout=str(tmp_path), system_names=NOWHERE)
    assert cands[0] == ("installed with the package", str(installed), "file")
    assert cands[1] == ("installed with the package", "/nonexistent/lib/libcarve.so.1", "missing")
    # Without a relative path (the package outside the prefix): the absolute one.
    pkg2, installed2 = _installed_tree(tmp_path / "b", relative=False, absolute=str(tmp_path / "b" / "lib" /
                                                                                   "libcarve.so.1"))
    path, _ = _lib.load(env={}, package_dir=str(pkg2), checkout=str(tmp_path / "none"), system_names=NOWHERE)
    assert path == str(installed2)


def test_installed_library_missing_is_listed_and_skipped(tmp_path, L):
    pkg, installed = _installed_tree(tmp_path)
    os.unlink(installed)
    os.symlink(os.path.realpath(_lib.library_path()), pkg / "libcarve.so")
    path, _ = _lib.load(env={}, package_dir=str(pkg), checkout=str(tmp_path / "none"), system_names=NOWHERE)
    assert path == str(pkg / "libcarve.so")
    with pytest.raises(_lib.LibraryNotFoundError) as e:
        os.unlink(pkg / "libcarve.so")
        _lib.load(env={}, package_dir=str(pkg), checkout=str(tmp_path / "none"), system_names=NOWHERE)
    assert f"installed with the package: {installed} (not found)" in str(e.value)
    # Anything but plain string assignments is ignored, never run.
    (pkg / "_install.py").write_text("import os\nos.exit(3)\nLIBRARY = 1 + 2\n")
    assert _lib.installed_library(str(pkg)) == []


def test_import_carve_needs_no_library(tmp_path):
    """`import carve` works without libcarve; the first call raises the listing."""
    code = ("import carve\n"
            "try:\n    carve.version()\n"
            "except carve.LibraryNotFoundError as e:\n    print('LISTED', 'CARVE_LIBRARY' in str(e))\n")
    env = dict(os.environ, CARVE_LIBRARY=str(tmp_path / "missing.so"), PYTHONPATH=PYROOT)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "LISTED True" in out.stdout


def test_signatures_declared(L):
    assert L.carve_route_alloc.argtypes is not None
    assert L.carve_torch_alloc.restype is ctypes.c_void_p
    assert _lib.address("carve_torch_alloc") == ctypes.cast(L.carve_torch_alloc, ctypes.c_void_p).value


LAYOUT_C = r"""
#include <stddef.h>
#include <stdio.h>
#include "carve.h"
#include "carve_trace.h"
#define F(T, f) printf("%s %s %zu\n", #T, #f, offsetof(T, f));
#define S(T) printf("%s sizeof %zu\n", #T, sizeof(T));
int main(void) {
    S(carve_config) F(carve_config, initial_bytes) F(carve_config, growth) F(carve_config, initial_fraction)
    F(carve_config, vmm) F(carve_config, fail_backend_status) F(carve_config, name) F(carve_config, size)
    F(carve_config, peers) F(carve_config, peer_devices) F(carve_config, ipc)
    S(carve_stats) F(carve_stats, num_live) F(carve_stats, num_ooms)
    S(carve_trace) F(carve_trace, nstreams) F(carve_trace, nthreads) F(carve_trace, peak_requested) F(carve_trace, nbad) F(carve_trace, diag)
    S(carve_replay_streams) F(carve_replay_streams, real)
    S(carve_replay_result) F(carve_replay_result, nooms) F(carve_replay_result, seconds) F(carve_replay_result, error)
    S(carve_replay_rec) F(carve_replay_rec, ncols)
    S(carve_svg_info) F(carve_svg_info, footprint_ratio) F(carve_svg_info, color_by_stream)
    return 0;
}
"""


def test_structure_layouts_match_the_headers(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    inc = os.path.join(CHECKOUT, "include")
    if not cc or not os.path.exists(os.path.join(inc, "carve.h")):
        pytest.skip("needs a C compiler and the checkout's include/")
    src = tmp_path / "layout.c"
    src.write_text(LAYOUT_C)
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c11", "-I", inc, str(src), "-o", str(exe)], check=True, timeout=120)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    mirror = {"carve_config": _lib.CarveConfig, "carve_stats": _lib.CarveStats, "carve_trace": _lib.CarveTrace,
              "carve_replay_streams": _lib.ReplayStreams, "carve_replay_result": _lib.ReplayResult,
              "carve_replay_rec": _lib.ReplayRec, "carve_svg_info": _lib.SvgInfo}
    checked = 0
    for line in out.strip().splitlines():
        t, field, value = line.split()
        py = mirror[t]
        want = ctypes.sizeof(py) if field == "sizeof" else getattr(py, field).offset
        assert int(value) == want, f"{t}.{field}: C says {value}, ctypes says {want}"
        checked += 1
    assert checked == 31
