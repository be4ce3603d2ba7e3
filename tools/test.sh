#!/usr/bin/env bash
# Build carve and run every test suite: a release build (unit, stress, header,
# layers, tools, dropin, frameworks with the Python package's tests, soak,
# fuzz, and the gpu, gpu-dropin and kernels suites, which report SKIP without
# a CUDA device; tools includes meson install into a temporary directory with
# the pkg-config and CMake consumers built against it, frameworks the
# package's offline pip install into a fresh virtual environment), an
# ASan+UBSan build with the expensive internal checks (unit, stress, tools,
# dropin, frameworks, soak, fuzz), a ThreadSanitizer build (unit, stress,
# dropin, frameworks, soak) and a clang build with libFuzzer (suite libfuzzer:
# each fuzz target for CARVE_FUZZ_SECONDS, default 20). Installs meson,
# ninja, python3, python3-pytest, python3-venv, cmake, pkg-config and clang's
# libFuzzer with apt-get when they are missing; where clang cannot be had,
# the libfuzzer suite counts as skipped (the plain fuzz driver still replays
# every corpus).
# Prints "N passed, N failed" (skipped tests counted apart) and exits non-zero
# on any failure. Usage: tools/test.sh [--quick]
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
quick=0
[ "${1:-}" = "--quick" ] && quick=1

need_apt=()
command -v meson >/dev/null || need_apt+=(meson)
command -v ninja >/dev/null || need_apt+=(ninja-build)
command -v cc >/dev/null || need_apt+=(gcc)
command -v c++ >/dev/null || need_apt+=(g++)
command -v python3 >/dev/null || need_apt+=(python3)
# The Python package's tests use Debian's python3 and python3-pytest (the
# python3 first on PATH may be a separate build that cannot see them).
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import pytest' 2>/dev/null || need_apt+=(python3 python3-pytest)
# The installed tree's consumers (suite tools: install_cmake, install_pkgconfig)
# and the fresh virtual environment the Python package is installed into
# offline (suite frameworks: pip_install).
command -v cmake >/dev/null || need_apt+=(cmake)
command -v pkg-config >/dev/null || need_apt+=(pkg-config)
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || need_apt+=(python3-venv)
# integrations/ggml/make_gpt2.py writes its model with numpy (suite tools: make_gpt2).
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import numpy' 2>/dev/null || need_apt+=(python3-numpy)
sudo_cmd=""; [ "$(id -u)" != 0 ] && sudo_cmd=sudo
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing: ${need_apt[*]}"
  $sudo_cmd apt-get update -qq && $sudo_cmd apt-get install -y -qq "${need_apt[@]}" >/dev/null || {
    echo "could not install ${need_apt[*]}"; exit 1; }
fi
# libFuzzer: clang and its runtime (Debian: clang, libclang-rt-dev). Optional.
have_libfuzzer() {
  command -v clang >/dev/null &&
    echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }' |
      clang -x c -fsanitize=fuzzer,address - -o /tmp/carve-libfuzzer-probe.$$ 2>/dev/null &&
    rm -f /tmp/carve-libfuzzer-probe.$$
}
if [ $quick = 0 ] && ! have_libfuzzer; then
  echo "installing: clang libclang-rt-dev (for the libfuzzer suite)"
  { $sudo_cmd apt-get update -qq && $sudo_cmd apt-get install -y -qq clang libclang-rt-dev >/dev/null; } 2>/dev/null ||
    echo "could not install clang; the libfuzzer suite will be skipped"
fi
[ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH

setup() { # dir, options...
  local dir=$1; shift
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$@" >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; return 1; }
  fi
  ninja -C "$dir" >"$dir.build.log" 2>&1 || { tail -40 "$dir.build.log"; return 1; }
}

passed=0; failed=0; skipped=0
run_suites() { # dir, suites...
  local dir=$1; shift
  local args=()
  for s in "$@"; do args+=(--suite "$s"); done
  meson test -C "$dir" "${args[@]}" --print-errorlogs --num-processes "$(nproc)" || true
  local counts
  counts=$(python3 - "$dir/meson-logs/testlog.json" <<'PY'
import json, sys
p = f = s = 0
for line in open(sys.argv[1]):
    r = json.loads(line)["result"]
    if r in ("OK", "EXPECTEDFAIL"): p += 1
    elif r == "SKIP": s += 1
    else: f += 1
print(p, f, s)
PY
)
  read -r p f s <<<"$counts"
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
}

echo "== release build (build-release)"
if setup build-release --buildtype=release; then
  run_suites build-release unit stress header layers tools dropin frameworks soak fuzz gpu gpu-dropin kernels
else
  failed=$((failed + 1))
fi
if [ $quick = 0 ]; then
  echo "== ASan + UBSan build with expensive checks (build-sanitize)"
  if setup build-sanitize --buildtype=debugoptimized -Db_sanitize=address,undefined -Db_lto=false \
       -Dchecks=expensive -Dbenchmarks=false; then
    run_suites build-sanitize unit stress tools dropin frameworks soak fuzz
  else
    failed=$((failed + 1))
  fi
fi
if [ $quick = 0 ]; then
  echo "== ThreadSanitizer build (build-tsan)"
  # tools: carve-run, for the dropin suite (the interposer with TSan's runtime beside it)
  if setup build-tsan --buildtype=debugoptimized -Db_sanitize=thread -Db_lto=false -Dchecks=internal \
       -Dbenchmarks=false -Dtools=true; then
    run_suites build-tsan unit stress dropin frameworks soak
  else
    failed=$((failed + 1))
  fi
fi
if [ $quick = 0 ]; then
  echo "== clang + libFuzzer + ASan/UBSan build (build-libfuzzer)"
  if have_libfuzzer; then
    # -Db_lundef=false: clang's ASan runtime is linked into executables, not into libcarve.so
    if CC=clang CXX=clang++ setup build-libfuzzer --buildtype=debugoptimized -Dfuzzing=true \
         -Db_sanitize=address,undefined -Db_lundef=false -Db_lto=false -Dcuda=disabled -Dbenchmarks=false; then
      run_suites build-libfuzzer libfuzzer
    else
      failed=$((failed + 1))
    fi
  else
    echo "SKIP: no clang with libFuzzer"
    skipped=$((skipped + 1))
  fi
fi
echo
echo "skipped: $skipped (GPU suites skip when no CUDA device is present; skipped is not passed)"
echo "$passed passed, $failed failed"
[ $failed = 0 ]
