#!/usr/bin/env bash
# (kept with its results: bench/results/2026-11-27-h100e)
# pending-error regression tests (carve_gemm_f32, carve_gemm), quick suites
R=/tmp/res42; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git status --short | head -20; } > $R/info.txt
T0=$SECONDS
(meson setup build-gpu --buildtype=release > $R/build.log 2>&1; ninja -C build-gpu >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress)
B=build-gpu
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t gemm_quick env CARVE_TEST_QUICK=1 timeout 40 $B/tests/kernels/test_gemm
t tc_quick env CARVE_TEST_QUICK=1 timeout 40 $B/tests/kernels/test_gemm_tc
t tc_full timeout 400 $B/tests/kernels/test_gemm_tc
t gemm_full timeout 200 $B/tests/kernels/test_gemm
echo finished >> $R/progress
