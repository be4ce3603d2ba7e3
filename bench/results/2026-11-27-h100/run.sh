#!/usr/bin/env bash
# The GEMM pass of this folder: build; test_gemm_plan; test_gemm_tc (quick
# under the plan, under memcheck, full); test_gemm_limits (m and n near
# INT_MAX); the whole sweep with --check, then the decode rows twice more;
# shapes whose B rows are off 16 bytes (odd n) beside aligned controls.
# Run from the repository root: bench/results/2026-11-27-h100/run.sh OUT_DIR
R=${1:?usage: run.sh OUT_DIR}; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
B=build-gpu
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv; } > $R/info.txt
T0=$SECONDS
(meson setup $B --buildtype=release -Dbenchmarks=true >$R/build.log 2>&1 || true
 ninja -C $B tests/kernels/test_gemm_tc tests/kernels/test_gemm_plan tests/kernels/test_gemm_limits bench/kernels/bench_gemm_sweep >>$R/build.log 2>&1)
echo "build rc $? $((SECONDS-T0)) s" >> $R/progress
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t plan $B/tests/kernels/test_gemm_plan
t tc_quick env CARVE_TEST_QUICK=1 $B/tests/kernels/test_gemm_tc
t memcheck_quick env CARVE_TEST_QUICK=1 timeout 400 compute-sanitizer --tool memcheck $B/tests/kernels/test_gemm_tc
t sweep timeout 500 $B/bench/kernels/bench_gemm_sweep --check --json $R/sweep.json
t decode2 $B/bench/kernels/bench_gemm_sweep --decode --json $R/decode2.json
t decode3 $B/bench/kernels/bench_gemm_sweep --decode --json $R/decode3.json
S="--shape 3x50257x768 --shape 3x50264x768 --shape 1x50257x4096 --shape 8x50257x4096 --shape 32x50257x4096"
S="$S --shape 16x32001x4096 --shape 16x32008x4096 --shape 4x4097x4096 --shape 4x4104x4096 --shape 2x4096x4097t --shape 2x4096x4104t"
t odd $B/bench/kernels/bench_gemm_sweep --check $S --json $R/odd.json
t tc_full timeout 300 $B/tests/kernels/test_gemm_tc
t limits_mn env CARVE_TEST_LIMITS=mn timeout 240 $B/tests/kernels/test_gemm_limits
echo finished >> $R/progress
