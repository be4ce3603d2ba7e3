#!/usr/bin/env bash
# probe: every decode row under forced split-K factors (B from memory)
R=/tmp/res18; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
B=build-gpu
{ date -u; nvidia-smi -L; } > $R/info.txt
T0=$SECONDS
(meson setup $B --buildtype=release -Dbenchmarks=true > $R/build.log 2>&1 || true; ninja -C $B bench/kernels/bench_gemm_sweep >> $R/build.log 2>&1); echo "build rc $? $((SECONDS-T0)) s" >> $R/progress
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t plan env CARVE_GEMM_PATH=wgmma $B/bench/kernels/bench_gemm_sweep --decode --json $R/plan.json
for sk in 1 2 3 4 6 8; do t sk$sk env CARVE_GEMM_PATH=wgmma CARVE_GEMM_SPLITK=$sk $B/bench/kernels/bench_gemm_sweep --decode --json $R/sk$sk.json; done
echo finished >> $R/progress
