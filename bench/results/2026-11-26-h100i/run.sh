#!/usr/bin/env bash
# The GEMM pass of this folder: build, test_gemm_tc (quick under the plan,
# each forced width, the one-block-a-tile grid and the register epilogue;
# memcheck; full), the --mid set under each of those, the whole sweep with
# --check, test_gemm_limits (m and n near INT_MAX).
# Run from the repository root: bench/results/2026-11-26-h100i/run.sh OUT_DIR
R=${1:?usage: run.sh OUT_DIR}; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
B=build-gpu
{ date; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv; git log --oneline -1; } > $R/info.txt
T0=$SECONDS
(meson setup $B --buildtype=release -Dbenchmarks=true >$R/build.log 2>&1 || true; ninja -C $B tests/kernels/test_gemm_tc tests/kernels/test_gemm_limits bench/kernels/bench_gemm_sweep >>$R/build.log 2>&1); echo "build rc $? $((SECONDS-T0)) s" >> $R/progress
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t tc_quick env CARVE_TEST_QUICK=1 $B/tests/kernels/test_gemm_tc
for bn in 128 192 256; do t tc_quick_bn$bn env CARVE_GEMM_BN=$bn CARVE_TEST_QUICK=1 $B/tests/kernels/test_gemm_tc; done
t tc_quick_onetile env CARVE_GEMM_PERSIST=0 CARVE_TEST_QUICK=1 $B/tests/kernels/test_gemm_tc
t tc_quick_regepi env CARVE_GEMM_TMA_STORE=0 CARVE_TEST_QUICK=1 $B/tests/kernels/test_gemm_tc
t memcheck_quick env CARVE_TEST_QUICK=1 timeout 400 compute-sanitizer --tool memcheck $B/tests/kernels/test_gemm_tc
t mid $B/bench/kernels/bench_gemm_sweep --mid --check --json $R/mid.json
t mid_onetile env CARVE_GEMM_PERSIST=0 $B/bench/kernels/bench_gemm_sweep --mid --json $R/mid_onetile.json
t mid_regepi env CARVE_GEMM_TMA_STORE=0 $B/bench/kernels/bench_gemm_sweep --mid --json $R/mid_regepi.json
t mid2 $B/bench/kernels/bench_gemm_sweep --mid --json $R/mid2.json
for bn in 128 192 256; do t mid_bn$bn env CARVE_GEMM_BN=$bn $B/bench/kernels/bench_gemm_sweep --mid --json $R/mid_bn$bn.json; done
t sweep timeout 400 $B/bench/kernels/bench_gemm_sweep --check --json $R/sweep.json
t tc_full timeout 300 $B/tests/kernels/test_gemm_tc
t limits_mn env CARVE_TEST_LIMITS=mn timeout 240 $B/tests/kernels/test_gemm_limits

