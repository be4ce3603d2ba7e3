#!/bin/sh
# run.sh [BUILD_DIR] — the GPU kernel tests, then the kernel benchmark, all
# output to stdout. BUILD_DIR defaults to build (relative to the repository
# root). bench_gemm_tc follows bench_kernels, then the shape sweep
# bench_gemm_sweep with --check. The JSON copies go to $OUT/bench_kernels.json
# and $OUT/bench_gemm_sweep.json when OUT is set. Takes about two minutes on an H100.
#   CARVE_TEST_QUICK=1  small test sizes only
#   BENCH_ARGS=--quick  a short benchmark
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
B=${1:-build}
PATH=/usr/local/cuda/bin:$PATH
export PATH

ninja -C "$B" || exit 1
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu \
        --format=csv || true
fi

echo "== kernel tests"
start=$(date +%s)
meson test -C "$B" --suite kernels --verbose --print-errorlogs
tests_rc=$?
echo "== kernel tests: exit $tests_rc, $(( $(date +%s) - start )) s"

echo "== kernel benchmark"
start=$(date +%s)
if [ -n "${OUT:-}" ]; then
    "$B"/bench/kernels/bench_kernels ${BENCH_ARGS:-} --json "$OUT/bench_kernels.json"
else
    "$B"/bench/kernels/bench_kernels ${BENCH_ARGS:-}
fi
bench_rc=$?
echo "== kernel benchmark: exit $bench_rc, $(( $(date +%s) - start )) s"

echo "== tensor-core GEMM benchmark (carve_gemm vs cublasGemmEx)"
start=$(date +%s)
"$B"/bench/kernels/bench_gemm_tc ${BENCH_ARGS:-}
tc_rc=$?
echo "== tensor-core GEMM benchmark: exit $tc_rc, $(( $(date +%s) - start )) s"

echo "== carve_gemm shape sweep (speed and --check against cublasGemmEx)"
start=$(date +%s)
if [ -n "${OUT:-}" ]; then
    "$B"/bench/kernels/bench_gemm_sweep ${BENCH_ARGS:-} --check --json "$OUT/bench_gemm_sweep.json"
else
    "$B"/bench/kernels/bench_gemm_sweep ${BENCH_ARGS:-} --check
fi
sweep_rc=$?
echo "== carve_gemm shape sweep: exit $sweep_rc, $(( $(date +%s) - start )) s"

[ "$tests_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ] && [ "$tc_rc" -eq 0 ] && [ "$sweep_rc" -eq 0 ]
