"""test_build_backend.py — the package's own build backend (backend/carve_build.py).

The one idea: build each artifact into a temporary directory with the
backend's hooks, as pip would, and check it the way an installer reads it:
a wheel whose RECORD matches every member's hash and size, whose METADATA
says what pyproject.toml says and whose files are carve/ and nothing else
(no carve/_install.py, no caches); an sdist that builds the same wheel
again by itself; an editable wheel whose finder imports carve from this
checkout and nothing else of it; the small TOML reader agreeing with
tomllib. The offline pip install into a fresh virtual environment is
tests/install/test_pip_venv.py (suite frameworks).
"""

import base64
import csv
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import zipfile

import pytest

from carve import _lib

from conftest import PYROOT

sys.path.insert(0, os.path.join(PYROOT, "backend"))
import carve_build  # noqa: E402

import carve  # noqa: E402

V = carve.__version__  # the package's version, which pyproject.toml repeats

sys.path.remove(os.path.join(PYROOT, "backend"))


def _check_record(z):
    names = z.namelist()
    info = [n for n in names if n.endswith(".dist-info/RECORD")]
    assert len(info) == 1
    rows = list(csv.reader(io.StringIO(z.read(info[0]).decode())))
    assert sorted(r[0] for r in rows) == sorted(names)
    for name, digest, size in rows:
        if name == info[0]:
            assert digest == "" and size == ""
            continue
        data = z.read(name)
        want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert digest == "sha256=" + want, name
        assert int(size) == len(data), name


def test_hooks_need_nothing():
    assert carve_build.get_requires_for_build_wheel() == []
    assert carve_build.get_requires_for_build_sdist() == []
    assert carve_build.get_requires_for_build_editable() == []


def test_wheel(tmp_path, L):
    name = carve_build.build_wheel(str(tmp_path))
    assert name == f"carve-{V}-py3-none-any.whl"
    with zipfile.ZipFile(tmp_path / name) as z:
        _check_record(z)
        names = z.namelist()
        pkg = sorted(n for n in names if n.startswith("carve/"))
        want = sorted("carve/" + f for f in os.listdir(os.path.join(PYROOT, "carve"))
                      if f.endswith((".py", ".cpp")) and f != "_install.py")
        assert pkg == want
        meta = z.read(f"carve-{V}.dist-info/METADATA").decode()
        wheel = z.read(f"carve-{V}.dist-info/WHEEL").decode()
    assert "Name: carve\n" in meta and f"Version: {V}\n" in meta and "Requires-Python: >=3.8\n" in meta
    assert 'Requires-Dist: pytest; extra == "test"' in meta
    assert "Tag: py3-none-any\n" in wheel and "Root-Is-Purelib: true\n" in wheel
    # The wheel's package imports and works from where it is unpacked.
    out = tmp_path / "unpacked"
    zipfile.ZipFile(tmp_path / name).extractall(out)
    code = "import carve; print(carve.__file__); print(carve.version())"
    env = dict(os.environ, PYTHONPATH=str(out), CARVE_LIBRARY=os.path.realpath(_lib.library_path()))
    p = subprocess.run([sys.executable, "-c", code], env=env, cwd=str(tmp_path), capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0].startswith(str(out))


def test_wheel_leaves_out_install_file_and_caches(tmp_path):
    root = tmp_path / "src"
    for n, d in carve_build.sdist_files():
        os.makedirs(root / os.path.dirname(n), exist_ok=True)
        with open(d, "rb") as f:
            (root / n).write_bytes(f.read())
    (root / "carve" / "_install.py").write_text('LIBRARY = "/usr/lib/libcarve.so.1"\n')
    (root / "carve" / "__pycache__").mkdir()
    (root / "carve" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    names = [n for n, _ in carve_build.package_files(str(root))]
    assert "carve/_install.py" not in names and not any("__pycache__" in n for n in names)
    # A libcarve copied in is bundled, and the wheel is tagged for this platform.
    (root / "carve" / "libcarve.so.1").write_bytes(b"\x7fELF")
    tag, pure = carve_build.wheel_tag(str(root))
    assert not pure and tag.startswith("py3-none-") and tag != "py3-none-any"
    assert "carve/libcarve.so.1" in [n for n, _ in carve_build.package_files(str(root))]
    assert "carve/libcarve.so.1" not in [n for n, _ in carve_build.sdist_files(str(root))]


def test_sdist_builds_the_same_wheel(tmp_path):
    name = carve_build.build_sdist(str(tmp_path))
    assert name == f"carve-{V}.tar.gz"
    with tarfile.open(tmp_path / name) as t:
        names = t.getnames()
        t.extractall(tmp_path / "x")
    assert f"carve-{V}/PKG-INFO" in names and f"carve-{V}/backend/carve_build.py" in names
    src = tmp_path / "x" / f"carve-{V}"
    code = ("import sys; sys.path.insert(0, 'backend'); import carve_build as b; "
            f"print(b.build_wheel({str(tmp_path / 'w')!r}))")
    os.mkdir(tmp_path / "w")
    p = subprocess.run([sys.executable, "-c", code], cwd=str(src), capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    with zipfile.ZipFile(tmp_path / "w" / p.stdout.strip()) as z:
        _check_record(z)
        again = sorted(z.namelist())
    with zipfile.ZipFile(tmp_path / carve_build.build_wheel(str(tmp_path))) as z:
        assert again == sorted(z.namelist())


def test_editable_finds_carve_and_nothing_else(tmp_path):
    name = carve_build.build_editable(str(tmp_path))
    with zipfile.ZipFile(tmp_path / name) as z:
        _check_record(z)
        z.extractall(tmp_path / "site")
    code = ("import site, sys; site.addsitedir(sys.argv[1]); import carve; print(carve.__file__)\n"
            "try:\n    import install_dir\nexcept ImportError:\n    print('only carve')\n")
    p = subprocess.run([sys.executable, "-S", "-c", code, str(tmp_path / "site")], cwd=str(tmp_path),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == [os.path.join(PYROOT, "carve", "__init__.py"), "only", "carve"]


def test_prepare_metadata(tmp_path):
    info = carve_build.prepare_metadata_for_build_wheel(str(tmp_path))
    assert info == f"carve-{V}.dist-info"
    assert (tmp_path / info / "METADATA").read_text() == carve_build.metadata_text()


def test_versions_agree():
    import carve
    assert carve_build.project()["version"] == carve.__version__
    meson = open(os.path.join(os.path.dirname(PYROOT), "meson.build"), encoding="utf-8").read()
    assert f"version: '{carve.__version__}'" in meson


def test_toml_reader_matches_tomllib():
    tomllib = pytest.importorskip("tomllib")
    with open(os.path.join(PYROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    assert carve_build.parse_toml_subset(text) == tomllib.loads(text)
    tricky = ('[a]\nx = "has # hash"  # comment\ny = [\n  "p",  # one\n  "q",\n]\n'
              'z = {text = "MIT"}\n[a.b]\nw = "\\"quoted\\""\n')
    assert carve_build.parse_toml_subset(tricky) == tomllib.loads(tricky)


def test_versions_agree():
    """The wheel's version (pyproject.toml) is the package's and the library's."""
    assert carve_build._dist()[1] == carve.__version__
    with open(os.path.join(PYROOT, "..", "meson.build")) as f:
        assert f"version: '{carve.__version__}'" in f.read()
