#!/usr/bin/env bash
# narrow outputs with long k (65-960 columns, k >= 8129: where the width rule picks 64 columns): the decode kernel forced to 64 and to 128 columns, two runs each
R=/tmp/res64; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git log --oneline -1; git status --short | grep -v bench/results; } > $R/info.txt 2>&1
T0=$SECONDS
( [ -d build-gpu ] || meson setup build-gpu --buildtype=release > $R/build.log 2>&1; ninja -C build-gpu bench/kernels/bench_gemm_sweep >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress )
N=build-gpu
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
S=""
for m in 1 8 32; do for n in 128 512 960; do for k in 8192 14336; do S="$S --shape ${m}x${n}x${k}"; done; done; done
for i in 1 2; do
  t narrow_64_$i env CARVE_GEMM_DECODE_COLS=64 $N/bench/kernels/bench_gemm_sweep $S --json $R/narrow_64_$i.json
  t narrow_128_$i env CARVE_GEMM_DECODE_COLS=128 $N/bench/kernels/bench_gemm_sweep $S --json $R/narrow_128_$i.json
done
echo finished >> $R/progress
