#!/usr/bin/env bash
# count_pairs.sh — what one allocation+free pair costs through carve-run's
# interposer on the CPU: instructions counted by callgrind (exact and
# repeatable, unlike a timer) and the driver and runtime calls the pair
# made, over the mock driver (mock_cuda.c) and mock runtime (mock_cudart.c).
#
# Runs dropin_bench_pairs MODE N under valgrind with the interposer preloaded
# and collection on only inside bench_pairs_loop (the N pairs, after a
# warm-up), then divides by N. Modes: driver (cuMemAlloc_v2+cuMemFree_v2),
# async (cuMemAllocAsync+cuMemFreeAsync on a non-blocking stream), runtime
# (cudaMalloc+cudaFree through a shared runtime), runtime-async
# (cudaMallocAsync+cudaFreeAsync). These are CPU instruction counts on a
# mock driver, not GPU timings: a real driver call costs far more than the
# mock's, which is why the calls are counted too.
#
# Usage: tests/dropin/count_pairs.sh BUILD_DIR [N] [MODE ...]
#   e.g. tests/dropin/count_pairs.sh build-dropin 100000 driver async
# Environment: CARVE_CONF and the other carve-run variables pass through.
set -euo pipefail
if [ $# -lt 1 ] || [ "$1" = "--help" ] || [ "$1" = "-h" ]; then
  sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
  [ $# -lt 1 ] && exit 2 || exit 0
fi
build=$(cd "$1" && pwd); shift
n=100000
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then n=$1; shift; fi
modes=("$@"); [ ${#modes[@]} -eq 0 ] && modes=(driver async runtime runtime-async)
bin=$build/tests/dropin/dropin_bench_pairs
preload=$build/lib/preload/libcarve_preload.so
[ -x "$bin" ] && [ -f "$preload" ] || { echo "count_pairs: build $build first (ninja -C $build)" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "count_pairs: valgrind not found (apt-get install valgrind)" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for m in "${modes[@]}"; do
  case $m in driver|async|runtime|runtime-async) ;; *) echo "count_pairs: unknown mode '$m'" >&2; exit 2;; esac
  # env sets the preload inside the traced process only (not in valgrind's launcher).
  valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$tmp/$m.%p.out" \
    --toggle-collect=bench_pairs_loop \
    env LD_LIBRARY_PATH="$build/tests/dropin" LD_PRELOAD="$preload" "$bin" "$m" "$n" \
    >"$tmp/$m.log" 2>"$tmp/$m.err" || { cat "$tmp/$m.err" "$tmp/$m.log" >&2; exit 1; }
  /usr/bin/env python3 - "$tmp" "$m" "$n" <<'PY'
import glob, sys
tmp, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
total = 0
for f in glob.glob(f"{tmp}/{mode}.*.out"):
    for line in open(f):
        if line.startswith("summary:") or line.startswith("totals:"):
            total += int(line.split()[1])
            break
fields = None
for line in open(f"{tmp}/{mode}.log"):
    if line.startswith("pairs "):
        fields = line.split()
if not total or not fields:
    sys.exit(f"count_pairs: {mode}: nothing counted")
print(f"{mode:14s} {total / n:8.1f} instructions per pair, {float(fields[5]):.3f} driver calls, "
      f"{float(fields[6]):.3f} runtime calls ({n} pairs of {fields[3]} B)")
PY
done
