#!/usr/bin/env bash
# decode kernel (swap AB, cluster split-K): first run: tests quick/full, sanitizers, decode sweep forced vs auto
R=/tmp/res50; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git log --oneline -1; git status --short; } > $R/info.txt 2>&1
git diff > $R/tree.diff
T0=$SECONDS
( [ -d build-gpu ] || meson setup build-gpu --buildtype=release > $R/build.log 2>&1; ninja -C build-gpu bench/kernels/bench_gemm_sweep tests/kernels/test_gemm_tc >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress )
N=build-gpu
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t tc_quick env CARVE_TEST_QUICK=1 timeout 60 $N/tests/kernels/test_gemm_tc
t memcheck_quick env CARVE_TEST_QUICK=1 timeout 120 compute-sanitizer --tool memcheck $N/tests/kernels/test_gemm_tc
for i in 1 2; do
  t dc$i env CARVE_GEMM_PATH=decode $N/bench/kernels/bench_gemm_sweep --decode --json $R/dc$i.json
  t au$i $N/bench/kernels/bench_gemm_sweep --decode --json $R/au$i.json
done
t dc_check env CARVE_GEMM_PATH=decode $N/bench/kernels/bench_gemm_sweep --decode --check --reps 3
t tc_full timeout 200 $N/tests/kernels/test_gemm_tc
t synccheck_quick env CARVE_TEST_QUICK=1 timeout 120 compute-sanitizer --tool synccheck $N/tests/kernels/test_gemm_tc
t racecheck_quick env CARVE_TEST_QUICK=1 timeout 150 compute-sanitizer --tool racecheck $N/tests/kernels/test_gemm_tc
echo finished >> $R/progress
