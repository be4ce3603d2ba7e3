#!/usr/bin/env bash
# the final tree (plan: 1 or 2 rows stream from 4096 columns): GEMM tests, memcheck quick, sweep and decode sweep
R=/tmp/res34; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv; git status --short | head -20; } > $R/info.txt
T0=$SECONDS
(meson setup build-gpu --buildtype=release -Dbenchmarks=true > $R/build.log 2>&1; ninja -C build-gpu tests/kernels/test_gemm_tc tests/kernels/test_gemm_plan bench/kernels/bench_gemm_sweep >> $R/build.log 2>&1); echo "build rc $? $((SECONDS-T0)) s" >> $R/progress
B=build-gpu
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t plan $B/tests/kernels/test_gemm_plan
t tc_quick env CARVE_TEST_QUICK=1 $B/tests/kernels/test_gemm_tc
t memcheck_quick env CARVE_TEST_QUICK=1 timeout 300 compute-sanitizer --tool memcheck $B/tests/kernels/test_gemm_tc
t sweep timeout 200 $B/bench/kernels/bench_gemm_sweep --check --json $R/sweep.json
t decode $B/bench/kernels/bench_gemm_sweep --decode --json $R/decode.json
t tc_full timeout 200 $B/tests/kernels/test_gemm_tc
echo finished >> $R/progress
