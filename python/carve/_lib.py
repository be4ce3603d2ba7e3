"""carve._lib — finding libcarve and declaring the C functions the package calls.

The one idea: the package is pure Python over ctypes, so everything it knows
of the C library is here: where to look for libcarve (in a fixed order, each
place tried and remembered, so a failure can list them all), the structures
of carve.h and carve_trace.h mirrored field for field, and the argument and
result types of every function used. Nothing is loaded at import time: the
first call of lib() loads the library, and later calls return it.

Where libcarve is looked for, in order:
  1. the file named by the environment variable CARVE_LIBRARY (when set, it is
     the only place: a wrong path is an error, never silently replaced);
  2. the library installed together with the package by `meson install`,
     which writes carve/_install.py: its path relative to the package (so a
     tree installed with DESTDIR or moved still finds its own), then the
     absolute path it was installed to;
  3. a copy installed beside the package (carve/libcarve.so*);
  4. the build trees of the checkout the package sits in (../build*/lib/), the
     plain build-release/ and build/ first, then the newest; builds made with
     sanitizers are skipped (an instrumented library cannot be loaded into an
     interpreter built without them);
  5. the system loader: "libcarve.so.1", then "libcarve.so".
"""

import ast
import ctypes
import glob
import json
import os
import threading

__all__ = ["lib", "library_path", "LibraryNotFoundError", "CarveConfig", "CarveStats", "find_candidates"]


class LibraryNotFoundError(ImportError):
    """libcarve could not be loaded from any of the places carve looks in."""

    status = "CARVE_ERR_BACKEND"


# ---- Structures (carve.h, carve_trace.h) -----------------------------------

c_size = ctypes.c_size_t


class CarveConfig(ctypes.Structure):
    _fields_ = [
        ("size", c_size),
        ("backend", ctypes.c_int),
        ("device", ctypes.c_int),
        ("initial_bytes", c_size),
        ("limit_bytes", c_size),
        ("growth", ctypes.c_int),
        ("initial_fraction", ctypes.c_double),
        ("limit_fraction", ctypes.c_double),
        ("min_grow_bytes", c_size),
        ("vmm", ctypes.c_int),
        ("sim_event_polls", ctypes.c_uint),
        ("fail_backend_at", ctypes.c_ulong),
        ("fail_backend_every", ctypes.c_ulong),
        ("fail_backend_status", ctypes.c_int),
        ("name", ctypes.c_char_p),
        ("peers", ctypes.c_int),
        ("peer_devices", ctypes.c_uint64),
        ("ipc", ctypes.c_int),
    ]


STATS_FIELDS = [
    ("requested_bytes", c_size), ("requested_bytes_peak", c_size),
    ("allocated_bytes", c_size), ("allocated_bytes_peak", c_size),
    ("reserved_bytes", c_size), ("reserved_bytes_peak", c_size),
    ("limit_bytes", c_size), ("cached_bytes", c_size), ("largest_free_block", c_size),
    ("num_segments", c_size), ("num_streams", c_size),
    ("num_live", ctypes.c_uint64), ("num_allocs", ctypes.c_uint64), ("num_frees", ctypes.c_uint64),
    ("num_backend_allocs", ctypes.c_uint64), ("num_backend_frees", ctypes.c_uint64),
    ("num_ooms", ctypes.c_uint64), ("num_syncs", ctypes.c_uint64),
    ("num_event_records", ctypes.c_uint64), ("num_event_queries", ctypes.c_uint64),
]
# ABI 1.0's carve_stats (carve_stats_1_0: what carve_replay_result holds);
# carve_stats has grown at its end since, read with carve_get_stats_sized.
STATS_FIELDS_1_0 = list(STATS_FIELDS)
STATS_FIELDS += [("num_alloc_retries", ctypes.c_uint64)]

# The driver ledger at the end of carve_stats (carve.h: carve_driver_op,
# CARVE_DRIVER_SLOTS): calls, mappings and bytes by kind, and their modeled time.
DRIVER_SLOTS = 16
DRIVER_OPS = ("cuMemCreate", "cuMemRelease", "cuMemMap", "cuMemSetAccess", "cuMemUnmap",
              "cuMemRetainAllocationHandle", "cuMemAddressReserve", "cuMemAddressFree", "cudaMalloc", "cudaFree",
              "cudaEventRecord", "cudaEventQuery", "cudaEventSynchronize", "cudaDeviceSynchronize")
DRIVER_FIELDS = [
    ("driver_calls", ctypes.c_uint64 * DRIVER_SLOTS), ("driver_mappings", ctypes.c_uint64 * DRIVER_SLOTS),
    ("driver_bytes", ctypes.c_uint64 * DRIVER_SLOTS), ("driver_model_ns", ctypes.c_uint64),
]


class CarveStats(ctypes.Structure):
    _fields_ = STATS_FIELDS + DRIVER_FIELDS


class CarveStats10(ctypes.Structure):
    _fields_ = STATS_FIELDS_1_0


class CarveTrace(ctypes.Structure):
    _fields_ = [
        ("ev", ctypes.c_void_p), ("n", c_size), ("nslots", c_size), ("nstreams", ctypes.c_uint32),
        ("nthreads", ctypes.c_uint32), ("peak_requested", ctypes.c_uint64), ("total_alloc_bytes", ctypes.c_uint64),
        ("nallocs", c_size), ("nfrees", c_size), ("nbad", c_size), ("diag", ctypes.c_char * 512),
    ]


class ReplayStreams(ctypes.Structure):
    _fields_ = [("s", ctypes.c_void_p), ("n", ctypes.c_uint32), ("real", ctypes.c_int)]


class ReplayResult(ctypes.Structure):
    _fields_ = [
        ("stats", CarveStats10), ("nooms", ctypes.c_uint64), ("nerrors", ctypes.c_uint64), ("done", c_size),
        ("seconds", ctypes.c_double), ("initial_bytes", c_size), ("vmm", ctypes.c_int), ("error", ctypes.c_char * 256),
    ]


class ReplayRec(ctypes.Structure):
    _fields_ = [("addr", ctypes.c_void_p), ("requested", ctypes.c_void_p), ("allocated", ctypes.c_void_p),
                ("reserved", ctypes.c_void_p), ("ncols", c_size)]


class SvgInfo(ctypes.Structure):
    _fields_ = [("trace_name", ctypes.c_char_p), ("backend", ctypes.c_char_p), ("footprint_ratio", ctypes.c_double),
                ("reserved_peak", ctypes.c_uint64), ("color_by_stream", ctypes.c_int)]


# Status codes (carve_status) and backends (carve_backend).
OK, ERR_INVALID, ERR_OOM, ERR_BAD_POINTER, ERR_BACKEND, ERR_NO_DEVICE = range(6)
BACKEND_CUDA, BACKEND_HOST, BACKEND_VIRTUAL, BACKEND_CUDA_DRIVER = range(4)
SVG_COLS = 1200

_P = ctypes.c_void_p
_PP = ctypes.POINTER(ctypes.c_void_p)
_ST = ctypes.c_int
_SIGS = {
    # carve.h
    "carve_version": (ctypes.c_char_p, []),
    "carve_status_str": (ctypes.c_char_p, [_ST]),
    "carve_format_bytes": (ctypes.c_char_p, [ctypes.c_char_p, c_size, c_size]),
    "carve_config_init_sized": (None, [ctypes.POINTER(CarveConfig), c_size]),
    "carve_config_parse": (_ST, [ctypes.POINTER(CarveConfig), ctypes.c_char_p]),
    "carve_config_check": (_ST, [ctypes.POINTER(CarveConfig)]),
    "carve_arena_create": (_ST, [ctypes.POINTER(CarveConfig), _PP]),
    "carve_arena_destroy": (None, [_P]),
    "carve_arena_get_config_sized": (_ST, [_P, ctypes.POINTER(CarveConfig), c_size]),
    "carve_buffer_info": (_ST, [_P, _P, ctypes.POINTER(c_size), _PP]),
    "carve_empty_cache": (_ST, [_P]),
    "carve_memory_allocated": (c_size, [_P]),
    "carve_memory_reserved": (c_size, [_P]),
    "carve_get_stats": (_ST, [_P, ctypes.POINTER(CarveStats10)]),
    "carve_get_stats_sized": (_ST, [_P, ctypes.POINTER(CarveStats), c_size]),
    "carve_alloc_aligned": (_ST, [_P, c_size, c_size, _P, _PP]),
    "carve_free_on_stream": (_ST, [_P, _P, _P]),
    "carve_set_limit": (_ST, [_P, c_size]),
    "carve_set_tag": (_ST, [_P, _P, ctypes.c_uint64]),
    "carve_get_tag": (_ST, [_P, _P, ctypes.POINTER(ctypes.c_uint64)]),
    "carve_reset_peak_stats": (None, [_P]),
    "carve_check": (_ST, [_P]),
    "carve_last_error": (ctypes.c_char_p, [_P]),
    "carve_snapshot_json": (_ST, [_P, ctypes.POINTER(ctypes.c_void_p)]),
    "carve_snapshot_free": (None, [_P]),
    "carve_conf_parse_sized": (_ST, [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(CarveConfig), c_size]),
    "carve_device_arena": (_ST, [ctypes.c_int, _PP]),
    "carve_device_set_limit": (_ST, [ctypes.c_int, c_size]),
    "carve_device_set_limit_fraction": (_ST, [ctypes.c_int, ctypes.c_double]),
    "carve_device_set_growth": (_ST, [ctypes.c_int, ctypes.c_int]),
    "carve_device_set_initial": (_ST, [ctypes.c_int, c_size]),
    "carve_device_mem_info": (_ST, [ctypes.c_int, ctypes.POINTER(c_size), ctypes.POINTER(c_size)]),
    "carve_device_count": (ctypes.c_int, []),
    # carve_trace.h
    "carve_trace_load_path": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(CarveTrace), _P, _P]),
    "carve_trace_free": (None, [ctypes.POINTER(CarveTrace)]),
    "carve_trace_writer_open": (_ST, [ctypes.c_char_p, ctypes.c_char_p, _PP]),
    "carve_trace_writer_alloc": (_ST, [_P, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint64]),
    "carve_trace_writer_free": (_ST, [_P, ctypes.c_uint64, ctypes.c_uint64]),
    "carve_trace_writer_comment": (_ST, [_P, ctypes.c_char_p]),
    "carve_trace_writer_flush": (_ST, [_P]),
    "carve_trace_writer_close": (_ST, [_P]),
    "carve_replay_streams_open": (_ST, [ctypes.POINTER(ReplayStreams), ctypes.c_uint32, ctypes.c_int, ctypes.c_int]),
    "carve_replay_streams_close": (None, [ctypes.POINTER(ReplayStreams)]),
    "carve_replay_record": (_ST, [ctypes.POINTER(CarveTrace), ctypes.POINTER(CarveConfig),
                                  ctypes.POINTER(ReplayStreams), c_size, ctypes.POINTER(ReplayRec),
                                  ctypes.POINTER(ReplayResult)]),
    "carve_replay_rec_free": (None, [ctypes.POINTER(ReplayRec)]),
    "carve_svg_write": (ctypes.c_int, [_P, ctypes.POINTER(CarveTrace), ctypes.POINTER(ReplayRec),
                                       ctypes.POINTER(SvgInfo)]),
    # carve_frameworks.h
    "carve_route_push": (_ST, [_P]),
    "carve_route_pop": (_ST, []),
    "carve_route_current": (_P, []),
    "carve_route_known": (ctypes.c_int, [_P]),
    "carve_route_retire": (_ST, [_P, ctypes.POINTER(ctypes.c_int)]),
    "carve_route_forget": (_ST, [_P]),
    "carve_route_alloc": (_ST, [_P, c_size, ctypes.c_int, _P, _PP]),
    "carve_route_free": (_ST, [_P, ctypes.c_int]),
    "carve_route_owner": (_ST, [_P, ctypes.c_int, _PP]),
    "carve_route_record_stream": (_ST, [_P, ctypes.c_int, _P]),
    "carve_route_empty_caches": (_ST, []),
    "carve_route_device": (_ST, [ctypes.c_int, _P, _P]),
    "carve_route_device_current": (_P, [ctypes.c_int]),
    "carve_route_default_arena": (_P, [ctypes.c_int]),
    "carve_route_set_recorder": (_ST, [_P, _P, _P]),
    "carve_torch_alloc": (_P, [ctypes.c_ssize_t, ctypes.c_int, _P]),
    "carve_torch_free": (None, [_P, ctypes.c_ssize_t, ctypes.c_int, _P]),
    "carve_torch_empty_cache": (None, []),
    "carve_torch_set_memory_fraction": (None, [ctypes.c_double, ctypes.c_int]),
    "carve_torch_record_stream": (None, [_P, _P]),
    "carve_cupy_malloc": (_P, [_P, c_size, ctypes.c_int]),
    "carve_cupy_free": (None, [_P, _P, ctypes.c_int]),
    "carve_frameworks_failed_frees": (ctypes.c_ulonglong, []),
}

# The symbols a framework is handed by name (they must exist in the library).
TORCH_ALLOC, TORCH_FREE = "carve_torch_alloc", "carve_torch_free"

_lock = threading.Lock()
_loaded = None  # (path, CDLL)


def _sanitized(build_dir):
    """True when the meson build in build_dir was configured with sanitizers."""
    info = os.path.join(build_dir, "meson-info", "intro-buildoptions.json")
    try:
        with open(info, encoding="utf-8") as f:
            for opt in json.load(f):
                if opt.get("name") == "b_sanitize":
                    # a string before meson 1.8 ("none", "address,undefined"),
                    # a list since (["address"]; [] when off)
                    value = opt.get("value")
                    if isinstance(value, list):
                        return any(v not in ("none", "") for v in value)
                    return value not in ("none", "", None)
    except (OSError, ValueError):
        pass
    base = os.path.basename(build_dir.rstrip("/"))
    return any(k in base for k in ("sanitize", "asan", "tsan", "ubsan", "msan"))


def _build_dirs(checkout):
    dirs = [d for d in glob.glob(os.path.join(checkout, "build*")) if os.path.isdir(os.path.join(d, "lib"))]
    preferred = [os.path.join(checkout, n) for n in ("build-release", "build")]
    first = [d for d in preferred if d in dirs]
    rest = sorted((d for d in dirs if d not in first), key=lambda d: -os.path.getmtime(d))
    return first + rest


def _lib_files(directory):
    names = [os.path.join(directory, n) for n in ("libcarve.so", "libcarve.so.1")]
    extra = sorted(set(glob.glob(os.path.join(directory, "libcarve.so*"))) - set(names))
    return [p for p in names + extra if os.path.isfile(p)]


def installed_library(package_dir):
    """The library meson installed with the package in package_dir, from its
    _install.py: [path relative to the package resolved, absolute path],
    without repeats; [] when there is no _install.py. The file is read, not
    imported: string assignments only."""
    try:
        with open(os.path.join(package_dir, "_install.py"), encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return []
    values = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            values[node.targets[0].id] = node.value.value
    out = []
    rel = values.get("LIBRARY_RELATIVE", "")
    if rel:
        out.append(os.path.normpath(os.path.join(package_dir, rel)))
    absolute = values.get("LIBRARY", "")
    if absolute and os.path.normpath(absolute) not in out:
        out.append(os.path.normpath(absolute))
    return out


def find_candidates(env=None, package_dir=None, checkout=None, system_names=("libcarve.so.1", "libcarve.so")):
    """Every place carve would try, in order, as (description, path or name,
    kind): kind is "file" for a path that exists, "missing" for one that
    does not, "skipped" for a sanitized build, "system" for a name the
    system loader resolves."""
    env = os.environ if env is None else env
    here = package_dir or os.path.dirname(os.path.abspath(__file__))
    checkout = checkout or os.path.dirname(os.path.dirname(here))
    explicit = env.get("CARVE_LIBRARY")
    if explicit:
        return [("CARVE_LIBRARY", explicit, "file" if os.path.exists(explicit) else "missing")]
    out = [("installed with the package", p, "file" if os.path.exists(p) else "missing")
           for p in installed_library(here)]
    beside = _lib_files(here)
    out += [("beside the package", p, "file") for p in beside] or \
        [("beside the package", os.path.join(here, "libcarve.so*"), "missing")]
    builds = _build_dirs(checkout)
    if not builds:
        out.append(("build tree", os.path.join(checkout, "build*", "lib", "libcarve.so*"), "missing"))
    for b in builds:
        libdir = os.path.join(b, "lib")
        if _sanitized(b):
            out.append(("build tree (built with sanitizers, skipped)", libdir, "skipped"))
            continue
        files = _lib_files(libdir)
        out += [("build tree", p, "file") for p in files] or \
            [("build tree", os.path.join(libdir, "libcarve.so*"), "missing")]
    out += [("system loader", n, "system") for n in system_names]
    return out


def load(env=None, package_dir=None, checkout=None, system_names=("libcarve.so.1", "libcarve.so")):
    """Load libcarve from the first place that works; (path, CDLL). Raises
    LibraryNotFoundError listing every place tried and why it failed."""
    tried = []
    for what, where, kind in find_candidates(env, package_dir, checkout, system_names):
        if kind in ("missing", "skipped"):
            tried.append(f"  {what}: {where} ({'not found' if kind == 'missing' else 'skipped'})")
            continue
        try:
            dll = ctypes.CDLL(where)
        except OSError as e:
            tried.append(f"  {what}: {where} ({e})")
            continue
        missing = [name for name in _SIGS if not hasattr(dll, name)]
        if missing:
            tried.append(f"  {what}: {where} (loaded, but lacks {', '.join(missing[:4])}"
                         f"{' ...' if len(missing) > 4 else ''}: an older libcarve?)")
            continue
        for name, (res, args) in _SIGS.items():
            fn = getattr(dll, name)
            fn.restype = res
            fn.argtypes = args
        return where, dll
    raise LibraryNotFoundError(
        "carve: cannot load libcarve. Looked in, in order:\n" + "\n".join(tried) +
        "\nBuild it (meson setup build-release && ninja -C build-release), install it, "
        "or point CARVE_LIBRARY at libcarve.so.")


def lib():
    """The loaded libcarve (a ctypes.CDLL with signatures declared)."""
    global _loaded
    if _loaded is None:
        with _lock:
            if _loaded is None:
                _loaded = load()
    return _loaded[1]


def library_path():
    """The path (or, from the system loader, the name) libcarve was loaded from."""
    lib()
    return _loaded[0]


def address(name):
    """The address of the C function name in libcarve, as an int."""
    return ctypes.cast(getattr(lib(), name), ctypes.c_void_p).value


def import_framework(module, needs, hint):
    """Load libcarve, then import the framework `module` and return it.

    libcarve goes first: a framework's libraries take the static TLS space
    that a library loaded later with dlopen draws from. When the framework
    cannot be imported, the ImportError says what is missing and `hint` says
    what to do (install it, or run the program unchanged under carve-run).
    """
    import importlib
    try:
        lib()
    except ImportError:
        pass  # the framework plug-in says so when it is first used
    try:
        return importlib.import_module(module)
    except ImportError as e:
        err = ImportError(f"{needs}, which cannot be imported here ({e}). {hint}")
        err.status = "CARVE_ERR_BACKEND"  # as every error the package raises
        raise err from e
