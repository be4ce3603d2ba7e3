"""carve_build — the carve package's own build backend (PEP 517, PEP 660).

The one idea: the package is pure Python (ctypes over libcarve), so a wheel
is only a zip of carve/ with three small files that describe it (METADATA,
WHEEL, RECORD), and an sdist a tar of the sources: both are written here
with the standard library alone. pyproject.toml lists this module as the
backend (backend-path) and requires nothing, so `pip install ./python`
works offline in a fresh virtual environment with pip alone: nothing is
downloaded, and no setuptools or wheel package is needed.

What goes in: every file of carve/ but caches and carve/_install.py (which
`meson install` writes for the library it installs beside the package; a
wheel must not name one). A libcarve.so* copied into carve/ before
building goes in too, and the wheel is then tagged for this platform
(py3-none-linux_x86_64, say) instead of py3-none-any.

Hooks: build_wheel, build_sdist, build_editable (a wheel whose .pth file
puts a finder for `carve` alone, pointing at this checkout, on sys.meta_path),
prepare_metadata_for_build_wheel / _editable, and get_requires_for_build_*
(nothing). Metadata comes from pyproject.toml's [project] table, read with
tomllib where Python has it (3.11 on) and otherwise with a reader of the
small part of TOML that file uses.
"""

import base64
import hashlib
import io
import os
import re
import sysconfig
import tarfile
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "carve"
SKIP_NAMES = ("__pycache__", "_install.py")


# ---- pyproject.toml -----------------------------------------------------------

def _toml_value(text):
    """A value of the TOML subset pyproject.toml uses: a basic string, an
    array of strings, an inline table of strings."""
    text = text.strip()
    if text.startswith('"'):
        m = re.match(r'"((?:[^"\\]|\\.)*)"\s*$', text)
        if not m:
            raise ValueError(f"pyproject.toml: cannot read {text!r}")
        return m.group(1).encode().decode("unicode_escape")
    if text.startswith("["):
        return [_toml_value(s) for s in re.findall(r'"(?:[^"\\]|\\.)*"', text)]
    if text.startswith("{"):
        return {k: _toml_value(v) for k, v in re.findall(r'([A-Za-z0-9_-]+)\s*=\s*("(?:[^"\\]|\\.)*")', text)}
    raise ValueError(f"pyproject.toml: cannot read {text!r}")


def _strip_comment(line):
    """line without a # comment (a # inside a string stays)."""
    quoted = False
    for i, c in enumerate(line):
        if c == '"' and (i == 0 or line[i - 1] != "\\"):
            quoted = not quoted
        elif c == "#" and not quoted:
            return line[:i]
    return line


def parse_toml_subset(text):
    """Tables, `key = value` pairs (arrays may span lines), comments: the
    part of TOML pyproject.toml uses, into the dict tomllib would give."""
    data = {}
    table = data
    lines = [_strip_comment(line).strip() for line in text.splitlines()]
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        m = re.match(r"\[([A-Za-z0-9_.-]+)\]$", line)
        if m:
            table = data
            for part in m.group(1).split("."):
                table = table.setdefault(part, {})
            continue
        key, eq, value = line.partition("=")
        if not eq:
            raise ValueError(f"pyproject.toml: cannot read {line!r}")
        value = value.strip()
        while value.startswith("[") and value.count("[") > value.count("]") and i < len(lines):
            value += " " + lines[i]
            i += 1
        table[key.strip().strip('"')] = _toml_value(value)
    return data


def read_pyproject(root=ROOT):
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        raw = f.read()
    try:
        import tomllib
    except ImportError:
        return parse_toml_subset(raw.decode("utf-8"))
    return tomllib.loads(raw.decode("utf-8"))


def project(root=ROOT):
    return read_pyproject(root)["project"]


def metadata_text(root=ROOT):
    """The core metadata (METADATA in a wheel, PKG-INFO in an sdist)."""
    p = project(root)
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}"]
    if p.get("description"):
        lines.append(f"Summary: {p['description']}")
    lic = p.get("license")
    if isinstance(lic, dict) and lic.get("text"):
        lines.append(f"License: {lic['text']}")
    if p.get("requires-python"):
        lines.append(f"Requires-Python: {p['requires-python']}")
    for dep in p.get("dependencies", []):
        lines.append(f"Requires-Dist: {dep}")
    for extra, deps in sorted(p.get("optional-dependencies", {}).items()):
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {dep}; extra == "{extra}"' for dep in deps]
    readme = p.get("readme")
    body = ""
    if isinstance(readme, str):
        with open(os.path.join(root, readme), encoding="utf-8") as f:
            body = f.read()
        lines.append("Description-Content-Type: " +
                     ("text/markdown" if readme.endswith(".md") else "text/plain"))
    return "\n".join(lines) + "\n\n" + body


# ---- what goes in -------------------------------------------------------------

def package_files(root=ROOT, libraries=True):
    """(path in the archive, path on disk) for every file of the package."""
    out = []
    base = os.path.join(root, PACKAGE)
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_NAMES)
        for name in sorted(filenames):
            if name in SKIP_NAMES or name.endswith((".pyc", ".pyo", ".in")):
                continue
            if name.startswith("libcarve.so") and not libraries:
                continue
            disk = os.path.join(dirpath, name)
            out.append((os.path.relpath(disk, root).replace(os.sep, "/"), disk))
    return out


def wheel_tag(root=ROOT):
    """py3-none-any, or this platform's tag when a libcarve is bundled."""
    if any(os.path.basename(d).startswith("libcarve.so") for _, d in package_files(root)):
        plat = re.sub(r"[^A-Za-z0-9]", "_", sysconfig.get_platform())
        return f"py3-none-{plat}", False
    return "py3-none-any", True


def _dist(root=ROOT):
    p = project(root)
    return re.sub(r"[-_.]+", "_", p["name"]).lower(), p["version"]


def _epoch():
    """Timestamps inside archives: SOURCE_DATE_EPOCH when set, else 1980-01-01
    (the earliest a zip can hold), so that builds are reproducible."""
    try:
        return max(int(os.environ["SOURCE_DATE_EPOCH"]), 315532800)
    except (KeyError, ValueError):
        return 315532800


# ---- wheels -------------------------------------------------------------------

def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _write_wheel(wheel_directory, members, root=ROOT):
    """members: (name, bytes, executable). Adds the dist-info and writes the
    wheel; returns its file name."""
    name, version = _dist(root)
    tag, pure = wheel_tag(root)
    info = f"{name}-{version}.dist-info"
    wheel_meta = ("Wheel-Version: 1.0\nGenerator: carve_build\n"
                  f"Root-Is-Purelib: {'true' if pure else 'false'}\nTag: {tag}\n")
    members = list(members) + [(f"{info}/METADATA", metadata_text(root).encode(), False),
                               (f"{info}/WHEEL", wheel_meta.encode(), False)]
    record = [_record_line(n, d) for n, d, _ in members] + [f"{info}/RECORD,,"]
    members.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode(), False))
    filename = f"{name}-{version}-{tag}.whl"
    stamp = time.gmtime(_epoch())[:6]
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as z:
        for n, data, executable in members:
            zi = zipfile.ZipInfo(n, stamp)
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.external_attr = ((0o755 if executable else 0o644) | 0o100000) << 16
            z.writestr(zi, data)
    return filename


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    members = [(n, _read(d), os.path.basename(n).startswith("libcarve.so")) for n, d in package_files()]
    return _write_wheel(wheel_directory, members)


EDITABLE_FINDER = '''"""_carve_editable — `import carve` from the checkout this was installed from
(pip install -e), and nothing else of that directory."""
import importlib.util
import sys

PATH = {path!r}


class CarveFinder:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "carve":
            return None
        return importlib.util.spec_from_file_location(
            name, PATH + "/__init__.py", submodule_search_locations=[PATH])


if not any(getattr(f, "__name__", "") == "CarveFinder" for f in sys.meta_path):
    sys.meta_path.append(CarveFinder)
'''


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    path = os.path.join(ROOT, PACKAGE)
    members = [("_carve_editable.py", EDITABLE_FINDER.format(path=path).encode(), False),
               ("__editable__.carve.pth", b"import _carve_editable\n", False)]
    return _write_wheel(wheel_directory, members)


def _prepare_metadata(metadata_directory):
    name, version = _dist()
    info = f"{name}-{version}.dist-info"
    os.makedirs(os.path.join(metadata_directory, info), exist_ok=True)
    with open(os.path.join(metadata_directory, info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(metadata_text())
    return info


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return _prepare_metadata(metadata_directory)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    return _prepare_metadata(metadata_directory)


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


# ---- sdist --------------------------------------------------------------------

def sdist_files(root=ROOT):
    """(name in the sdist, path on disk): what builds the wheel again."""
    out = [("pyproject.toml", os.path.join(root, "pyproject.toml")),
           ("backend/carve_build.py", os.path.join(root, "backend", "carve_build.py"))]
    readme = project(root).get("readme")
    if isinstance(readme, str):
        out.append((readme, os.path.join(root, readme)))
    return out + package_files(root, libraries=False)


def build_sdist(sdist_directory, config_settings=None):
    name, version = _dist()
    base = f"{name}-{version}"
    filename = f"{base}.tar.gz"
    members = [(n, _read(d)) for n, d in sdist_files()] + [("PKG-INFO", metadata_text().encode())]
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for n, data in members:
            ti = tarfile.TarInfo(f"{base}/{n}")
            ti.size, ti.mtime, ti.mode = len(data), _epoch(), 0o644
            ti.uid = ti.gid = 0
            ti.uname = ti.gname = ""
            t.addfile(ti, io.BytesIO(data))
    return filename
