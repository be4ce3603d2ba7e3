#!/usr/bin/env bash
# racecheck: the decode kernel alone, the wgmma kernel alone (control: does the filter itself break?), then every kernel
R=/tmp/res55; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
git add -N lib/kernels/gemm_tc_decode.cuh
{ date -u; nvidia-smi -L; git log --oneline -1; git status --short; compute-sanitizer --version; } > $R/info.txt 2>&1
git diff > $R/tree.diff
T0=$SECONDS
( [ -d build-gpu ] || meson setup build-gpu --buildtype=release > $R/build.log 2>&1; ninja -C build-gpu tests/kernels/test_gemm_tc >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress )
N=build-gpu
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t race_wgmma env CARVE_TEST_QUICK=1 timeout 200 compute-sanitizer --tool racecheck --kernel-name kns=wgmma_gemm $N/tests/kernels/test_gemm_tc
t race_decode_noprint env CARVE_TEST_QUICK=1 timeout 200 compute-sanitizer --tool racecheck --racecheck-report hazard --kernel-name kns=decode_gemm_kernel $N/tests/kernels/test_gemm_tc
t race_all env CARVE_TEST_QUICK=1 timeout 420 compute-sanitizer --tool racecheck $N/tests/kernels/test_gemm_tc
echo finished >> $R/progress
