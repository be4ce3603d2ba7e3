#!/usr/bin/env bash
# run_all.sh — the Python package's GPU checks: carve.torch's safety cases;
# CUDA graphs (a captured GPT-2 step, torch.compile reduce-overhead) under
# carve and PyTorch's allocator; those cases under compute-sanitizer memcheck;
# GPT-2 training and generation and ResNet-50 inference under carve,
# PyTorch's allocator and expandable segments; per-model arenas closed in
# turn; CuPy under carve and its pool.
# Prints PASS/FAIL lines and "N passed, N failed", writes OUTDIR/results.md
# and results.json. Exits 77 (skipped) without a GPU, 1 on any failure.
#
# The one idea: this script only makes sure the three things the checks need
# exist (a GPU, a Python, a loadable libcarve, building one with meson if the
# checkout has none) and hands over to run_all.py, which runs every script in
# its own process per allocator mode and judges the numbers they write.
#
# Usage: python/tests/gpu/run_all.sh OUTDIR   (PYTHON=... to choose the interpreter,
# CARVE_LIBRARY=... to choose the library, CARVE_GPU_CHECKS=torch_graphs,memcheck
# to run only some checks: run_all.py names them)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
outdir=${1:-gpu-results}
mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "SKIP: no NVIDIA GPU visible (nvidia-smi -L lists none)"
  exit 77
fi
py=${PYTHON:-python3}
command -v "$py" >/dev/null || { echo "FAIL: no $py"; echo "0 passed, 1 failed"; exit 1; }

export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}"
# The package finds libcarve itself (CARVE_LIBRARY, the checkout's build trees
# without sanitizers, the system); build one when it finds none.
if ! "$py" -c "import carve; carve.version()" >/dev/null 2>&1 && [ -z "${CARVE_LIBRARY:-}" ]; then
  echo "no loadable libcarve: building build-release (meson, ninja)"
  [ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH
  if (cd "$root" && { [ -f build-release/build.ninja ] || meson setup build-release --buildtype=release >"$outdir/build.log" 2>&1; } \
        && ninja -C build-release lib/libcarve.so >>"$outdir/build.log" 2>&1); then
    export CARVE_LIBRARY="$root/build-release/lib/libcarve.so"
  else
    tail -20 "$outdir/build.log"; echo "FAIL: could not build libcarve"; echo "0 passed, 1 failed"; exit 1
  fi
fi
"$py" -c "import carve; print('carve', carve.version(), 'from', carve.library_path(), 'devices:', carve.device_count())" || {
  echo "FAIL: the carve package cannot load libcarve"; echo "0 passed, 1 failed"; exit 1; }
exec "$py" "$here/run_all.py" "$outdir"
