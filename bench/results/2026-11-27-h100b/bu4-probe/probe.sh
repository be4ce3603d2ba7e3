#!/usr/bin/env bash
# probe: B rows off 16 bytes at 4 blocks an SM, cluster sizes 1-4 forced, to refit the plan's threshold
R=/tmp/res24; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
B=build-gpu
{ date -u; nvidia-smi -L; } > $R/info.txt
T0=$SECONDS
(meson setup $B --buildtype=release -Dbenchmarks=true > $R/build.log 2>&1 || true; ninja -C $B bench/kernels/bench_gemm_sweep >> $R/build.log 2>&1); echo "build rc $? $((SECONDS-T0)) s" >> $R/progress
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
S=""
for m in 1 4 8 16; do for nk in 50257x768 50257x4096 32001x4096 32001x768 12289x4096 20001x4096 12289x11008; do S="$S --shape ${m}x${nk}"; done; done
t plan $B/bench/kernels/bench_gemm_sweep --reps 10 $S --json $R/plan.json
for cs in 1 2 3 4; do t cs$cs env CARVE_GEMM_PATH=stream CARVE_GEMM_SPLITK=$cs $B/bench/kernels/bench_gemm_sweep --reps 10 $S --json $R/cs$cs.json; done
echo finished >> $R/progress
