#!/usr/bin/env bash
# PDL after review: within a call by default (1), across calls under CARVE_GEMM_PDL=2, off under 0; tests and speed
R=/tmp/res40; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git status --short | head -20; } > $R/info.txt
T0=$SECONDS
TG="tests/kernels/test_gemm_tc tests/kernels/test_gemm_plan bench/kernels/bench_gemm_sweep"
(meson setup build-gpu --buildtype=release -Dbenchmarks=true > $R/build.log 2>&1; ninja -C build-gpu $TG >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress)
B=build-gpu
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t tc_quick env CARVE_TEST_QUICK=1 $B/tests/kernels/test_gemm_tc
t tc_quick_pdl0 env CARVE_GEMM_PDL=0 CARVE_TEST_QUICK=1 $B/tests/kernels/test_gemm_tc
t plan $B/tests/kernels/test_gemm_plan
t memcheck_quick env CARVE_TEST_QUICK=1 timeout 300 compute-sanitizer --tool memcheck $B/tests/kernels/test_gemm_tc
S=""
for m in 1 2 4 8 16 32 64 128; do S="$S --shape ${m}x4096x4096 --shape ${m}x4096x4096t --shape ${m}x14336x4096 --shape ${m}x4096x11008"; done
for m in 1 2 4 16; do for nk in 50257x768 4097x4096 1025x4096 2049x4096 50264x769t 4096x11009t 1024x4097t; do S="$S --shape ${m}x${nk}"; done; done
S="$S --shape 8x28672x8192 --shape 16x28672x8192 --shape 32x28672x8192t --shape 128x11008x4096"
for i in 1 2; do for v in 0 1 2; do
  t sh_pdl${v}_$i env CARVE_GEMM_PDL=$v $B/bench/kernels/bench_gemm_sweep $S --json $R/sh_pdl${v}_$i.json
done; done
for v in 1 2 0; do t dec_pdl$v env CARVE_GEMM_PDL=$v $B/bench/kernels/bench_gemm_sweep --decode --json $R/dec_pdl$v.json; done
t tc_full timeout 240 $B/tests/kernels/test_gemm_tc
echo finished >> $R/progress
