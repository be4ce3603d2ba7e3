#!/usr/bin/env bash
# the default configuration's sweep (PDL within calls, cluster rule of 7214abe): --check and --decode
R=/tmp/res41; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git status --short | head -20; } > $R/info.txt
T0=$SECONDS
(meson setup build-gpu --buildtype=release -Dbenchmarks=true > $R/build.log 2>&1; ninja -C build-gpu bench/kernels/bench_gemm_sweep >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress)
B=build-gpu
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t sweep timeout 100 $B/bench/kernels/bench_gemm_sweep --check --json $R/sweep.json
echo finished >> $R/progress
