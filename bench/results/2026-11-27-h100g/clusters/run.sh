#!/usr/bin/env bash
# decode kernel up to 256 rows, cluster rule from co-resident clusters: tests, decode sweep auto vs forced, cluster probe at 128/256
R=/tmp/res52; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git log --oneline -1; git status --short; } > $R/info.txt 2>&1
git diff > $R/tree.diff
T0=$SECONDS
( [ -d build-gpu ] || meson setup build-gpu --buildtype=release > $R/build.log 2>&1; ninja -C build-gpu bench/kernels/bench_gemm_sweep tests/kernels/test_gemm_tc >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress )
N=build-gpu
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t tc_quick env CARVE_TEST_QUICK=1 timeout 60 $N/tests/kernels/test_gemm_tc
for i in 1 2; do
  t au$i $N/bench/kernels/bench_gemm_sweep --decode --json $R/au$i.json
  t dc$i env CARVE_GEMM_PATH=decode $N/bench/kernels/bench_gemm_sweep --decode --json $R/dc$i.json
done
SH=""
for m in 2 16 128 256; do for s in 4096x4096 4096x14336 11008x4096 8192x8192 28672x8192 1024x4096 2048x8192 4096x4096t; do SH="$SH --shape ${m}x$s"; done; done
for i in 1 2; do
  for cs in 1 2 4 8; do
    t c${cs}_$i env CARVE_GEMM_PATH=decode CARVE_GEMM_SPLITK=$cs $N/bench/kernels/bench_gemm_sweep $SH --json $R/c${cs}_$i.json
  done
  t pau$i $N/bench/kernels/bench_gemm_sweep $SH --json $R/pau$i.json
  t pdc$i env CARVE_GEMM_PATH=decode $N/bench/kernels/bench_gemm_sweep $SH --json $R/pdc$i.json
done
t tc_full timeout 200 $N/tests/kernels/test_gemm_tc
echo finished >> $R/progress
