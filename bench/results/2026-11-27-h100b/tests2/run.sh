#!/usr/bin/env bash
# test_gemm_tc with the decode cases on the plan's new lines (auto streaming, K-major cluster), quick, full and under memcheck
R=/tmp/res26; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
B=build-gpu
{ date -u; nvidia-smi -L; } > $R/info.txt
T0=$SECONDS
(meson setup $B --buildtype=release -Dbenchmarks=true > $R/build.log 2>&1 || true; ninja -C $B tests/kernels/test_gemm_tc tests/kernels/test_gemm_plan >> $R/build.log 2>&1); echo "build rc $? $((SECONDS-T0)) s" >> $R/progress
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t plan $B/tests/kernels/test_gemm_plan
t tc_quick env CARVE_TEST_QUICK=1 $B/tests/kernels/test_gemm_tc
t memcheck_quick env CARVE_TEST_QUICK=1 timeout 300 compute-sanitizer --tool memcheck $B/tests/kernels/test_gemm_tc
t tc_full timeout 300 $B/tests/kernels/test_gemm_tc
echo finished >> $R/progress
