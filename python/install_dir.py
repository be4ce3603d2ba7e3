"""install_dir.py — where meson installs the carve Python package (python/meson.build).

Run by meson with the Python the package is for. Arguments: the install
prefix, the -Dpython_dir option ('' for the default), and the absolute path
the library is installed at. Prints three lines: the directory the package
goes into (unless the option names one, relative paths joined to the
prefix: the first directory of packages this Python searches right under
the prefix, else lib/python3.X/site-packages under it), the library's path
relative to the package directory (<dir>/carve; '' when the package or the
library lies outside the prefix, so the relation would not survive a moved
tree), and "on-path" or "off-path" (whether this Python searches the
directory).
"""

import os
import sys
import sysconfig


def searched_under(prefix):
    """The first package directory this Python searches that lies right
    under prefix (prefix/lib*/python*/site-packages or dist-packages), or
    None. Debian's Python searches /usr/local/lib/python3.X/dist-packages
    and /usr/lib/python3/dist-packages; a virtual environment or a Python
    of its own prefix, its lib/python3.X/site-packages."""
    for entry in sys.path:
        if not entry or not os.path.isabs(entry):
            continue
        rel = os.path.relpath(os.path.normpath(entry), prefix).split(os.sep)
        if (len(rel) == 3 and rel[0].startswith("lib") and rel[1].startswith("python")
                and rel[2] in ("site-packages", "dist-packages")):
            return os.path.join(prefix, *rel)
    return None


def main(prefix, option, library):
    if option:
        target = option if os.path.isabs(option) else os.path.join(prefix, option)
    else:
        target = searched_under(prefix) or sysconfig.get_path(
            "purelib", "posix_prefix", vars={"base": prefix, "platbase": prefix})
    target = os.path.normpath(target)
    package = os.path.join(target, "carve")
    inside = [os.path.commonpath([prefix, p]) == os.path.normpath(prefix) for p in (package, library)]
    relative = os.path.relpath(library, package) if all(inside) else ""
    searched = {os.path.normpath(p) for p in sys.path if p}
    print(target)
    print(relative)
    print("on-path" if target in searched else "off-path")


if __name__ == "__main__":
    main(os.path.normpath(sys.argv[1]), sys.argv[2], os.path.normpath(sys.argv[3]))
