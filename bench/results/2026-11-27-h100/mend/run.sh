#!/usr/bin/env bash
# The check of b38b13e (the sweep's timing helper, the alignment flag passed once):
# test_gemm_tc quick, under memcheck, and bench_gemm_sweep --decode --check. Results in /tmp/res20.
R=/tmp/res20; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
B=build-gpu
{ date -u; nvidia-smi -L; } > $R/info.txt
(meson setup $B --buildtype=release -Dbenchmarks=true > $R/build.log 2>&1 || true; ninja -C $B tests/kernels/test_gemm_tc bench/kernels/bench_gemm_sweep >> $R/build.log 2>&1); echo "build rc $?" >> $R/progress
t() { local name=$1; shift; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $?" >> $R/progress; }
t tc_quick env CARVE_TEST_QUICK=1 $B/tests/kernels/test_gemm_tc
t memcheck_quick env CARVE_TEST_QUICK=1 timeout 300 compute-sanitizer --tool memcheck $B/tests/kernels/test_gemm_tc
t decode $B/bench/kernels/bench_gemm_sweep --decode --check --json $R/decode.json
echo finished >> $R/progress
