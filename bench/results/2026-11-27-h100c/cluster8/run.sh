#!/usr/bin/env bash
# cluster sizes past 4 on narrow outputs (staged odd B and aligned), m = 1, 2, 4, 16: forced 2, 4, 6, 8 against the plan
R=/tmp/res33; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git log -1 --format=%H; git status --short | head -8; } > $R/info.txt
T0=$SECONDS
(meson setup build-gpu --buildtype=release -Dbenchmarks=true > $R/build.log 2>&1; ninja -C build-gpu bench/kernels/bench_gemm_sweep >> $R/build.log 2>&1); echo "build rc $? $((SECONDS-T0)) s" >> $R/progress
B=build-gpu
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
S=""
for m in 1 2 4 16; do for nk in 1025x4096 2049x4096 4097x4096 2049x768 4096x4097t 4096x11009t 4096x4096 4096x4096t 2048x4096 4096x11008; do S="$S --shape ${m}x${nk}"; done; done
t plan $B/bench/kernels/bench_gemm_sweep --reps 20 $S --json $R/plan.json
for cs in 2 4 6 8; do t cs$cs env CARVE_GEMM_PATH=stream CARVE_GEMM_SPLITK=$cs $B/bench/kernels/bench_gemm_sweep --reps 20 $S --json $R/cs$cs.json; done
t plan2 $B/bench/kernels/bench_gemm_sweep --reps 20 $S --json $R/plan2.json
echo finished >> $R/progress
