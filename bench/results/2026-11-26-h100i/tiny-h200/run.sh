#!/usr/bin/env bash
R=${1:?usage: run.sh OUT_DIR}; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
B=build-gpu
{ date; nvidia-smi -L; } > $R/info.txt
(meson setup $B --buildtype=release -Dbenchmarks=true >$R/build.log 2>&1 || true; ninja -C $B tests/kernels/test_gemm_tc bench/kernels/bench_gemm_sweep >>$R/build.log 2>&1); echo "build rc $?" >> $R/progress
t() { local name=$1; shift; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $?" >> $R/progress; }
t tc_quick env CARVE_TEST_QUICK=1 $B/tests/kernels/test_gemm_tc
t memcheck_quick env CARVE_TEST_QUICK=1 timeout 400 compute-sanitizer --tool memcheck $B/tests/kernels/test_gemm_tc
t sweep timeout 400 $B/bench/kernels/bench_gemm_sweep --check --json $R/sweep.json
t tc_full timeout 300 $B/tests/kernels/test_gemm_tc
