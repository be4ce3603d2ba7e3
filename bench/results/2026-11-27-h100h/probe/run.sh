#!/usr/bin/env bash
# forced decode sweep (every m up to 256 on the decode kernel, the plan's width) against the plan, two runs each (the racecheck this pass also ran, in hazard-report mode, is superseded by final/)
R=/tmp/res60; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git log --oneline -1; git status --short; } > $R/info.txt 2>&1
git diff > $R/tree.diff
T0=$SECONDS
( [ -d build-gpu ] || meson setup build-gpu --buildtype=release > $R/build.log 2>&1; ninja -C build-gpu bench/kernels/bench_gemm_sweep tests/kernels/test_gemm_tc >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress )
N=build-gpu
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
for i in 1 2; do
  t plan_$i $N/bench/kernels/bench_gemm_sweep --decode --json $R/plan_$i.json
  t forced_$i env CARVE_GEMM_PATH=decode $N/bench/kernels/bench_gemm_sweep --decode --json $R/forced_$i.json
done
echo finished >> $R/progress
