#!/usr/bin/env bash
# PDL probe 2: stream kernel trigger placement; CARVE_GEMM_PDL=0 off, 1 all early, 2 stream never triggers, 3 stream triggers after its k loop
R=/tmp/res36; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git status --short | head -20; } > $R/info.txt
T0=$SECONDS
TG="tests/kernels/test_gemm_tc bench/kernels/bench_gemm_sweep"
(meson setup build-gpu --buildtype=release -Dbenchmarks=true > $R/build.log 2>&1; ninja -C build-gpu $TG >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress)
B=build-gpu
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
for v in 2 3; do t tc_quick_$v env CARVE_GEMM_PDL=$v CARVE_TEST_QUICK=1 $B/tests/kernels/test_gemm_tc; done
S=""
for m in 1 2 4 8 16 32 64 128; do S="$S --shape ${m}x4096x4096 --shape ${m}x4096x4096t --shape ${m}x14336x4096 --shape ${m}x4096x11008"; done
for m in 1 2 4 16; do for nk in 50257x768 4097x4096 1025x4096 2049x4096 50264x769t 4096x11009t 1024x4097t; do S="$S --shape ${m}x${nk}"; done; done
for i in 1 2; do for v in 0 1 2 3; do
  t sh_pdl${v}_$i env CARVE_GEMM_PDL=$v $B/bench/kernels/bench_gemm_sweep $S --json $R/sh_pdl${v}_$i.json
done; done
for v in 0 2 3; do t dec_pdl$v env CARVE_GEMM_PDL=$v $B/bench/kernels/bench_gemm_sweep --decode --json $R/dec_pdl$v.json; done
echo finished >> $R/progress
