#!/usr/bin/env bash
# probe: split-K factor and tile width at m = 64-256 decode shapes (B from memory)
R=/tmp/res17; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
B=build-gpu
{ date -u; nvidia-smi -L; } > $R/info.txt
T0=$SECONDS
(meson setup $B --buildtype=release -Dbenchmarks=true > $R/build.log 2>&1 || true; ninja -C $B bench/kernels/bench_gemm_sweep >> $R/build.log 2>&1); echo "build rc $? $((SECONDS-T0)) s" >> $R/progress
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
S="--shape 128x4096x4096 --shape 128x11008x4096 --shape 128x8192x8192 --shape 128x4096x11008 --shape 64x4096x4096 --shape 256x4096x4096 --shape 256x11008x4096 --shape 128x4096x4096t"
t plan $B/bench/kernels/bench_gemm_sweep $S --json $R/plan.json
for sk in 1 2 3 4 6 8 12 16; do t sk$sk env CARVE_GEMM_SPLITK=$sk $B/bench/kernels/bench_gemm_sweep $S --json $R/sk$sk.json; done
for bn in 128 192 256; do t bn$bn env CARVE_GEMM_BN=$bn $B/bench/kernels/bench_gemm_sweep $S --json $R/bn$bn.json; done
echo finished >> $R/progress
