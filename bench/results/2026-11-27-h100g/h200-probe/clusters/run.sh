#!/usr/bin/env bash
# decode kernel: cluster size probe (CARVE_GEMM_SPLITK 1,2,4,8) on decode shapes, m = 1..64, beside the plan
R=/tmp/res51; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git log --oneline -1; git status --short; } > $R/info.txt 2>&1
git diff > $R/tree.diff
T0=$SECONDS
( [ -d build-gpu ] || meson setup build-gpu --buildtype=release > $R/build.log 2>&1; ninja -C build-gpu bench/kernels/bench_gemm_sweep >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress )
N=build-gpu
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
SH=""
for m in 1 8 32 64; do for s in 4096x4096 4096x14336 4096x11008 11008x4096 14336x4096 8192x8192 28672x8192 8192x28672 1024x4096 2048x8192 4096x4096t 4096x14336t 28672x8192t; do SH="$SH --shape ${m}x$s"; done; done
for i in 1 2; do
  t au$i $N/bench/kernels/bench_gemm_sweep $SH --json $R/au$i.json
  for cs in 1 2 4 8; do
    t c${cs}_$i env CARVE_GEMM_PATH=decode CARVE_GEMM_SPLITK=$cs $N/bench/kernels/bench_gemm_sweep $SH --json $R/c${cs}_$i.json
  done
  t dc$i env CARVE_GEMM_PATH=decode $N/bench/kernels/bench_gemm_sweep $SH --json $R/dc$i.json
done
echo finished >> $R/progress
