#!/usr/bin/env bash
# PDL probe: the tree with griddepcontrol in the GEMM kernels; CARVE_GEMM_PDL=0 / 1 interleaved in one process set
R=/tmp/res35; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv; git status --short | head -20; } > $R/info.txt
T0=$SECONDS
TG="tests/kernels/test_gemm_tc tests/kernels/test_gemm_plan bench/kernels/bench_gemm_sweep"
(meson setup build-gpu --buildtype=release -Dbenchmarks=true > $R/build.log 2>&1; ninja -C build-gpu $TG >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress)
B=build-gpu
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t tc_quick env CARVE_TEST_QUICK=1 $B/tests/kernels/test_gemm_tc
t plan $B/tests/kernels/test_gemm_plan
t memcheck_quick env CARVE_TEST_QUICK=1 timeout 300 compute-sanitizer --tool memcheck $B/tests/kernels/test_gemm_tc
S=""
for m in 1 2 4 8 16 24 32 64 128 256; do S="$S --shape ${m}x4096x4096 --shape ${m}x4096x4096t --shape ${m}x14336x4096 --shape ${m}x4096x11008"; done
for m in 1 2 4 16; do for nk in 50257x768 4097x4096 1025x4096 2049x4096 50264x769t 4096x11009t 1024x4097t; do S="$S --shape ${m}x${nk}"; done; done
for i in 1 2; do
  t sh_pdl0_$i env CARVE_GEMM_PDL=0 $B/bench/kernels/bench_gemm_sweep $S --json $R/sh_pdl0_$i.json
  t sh_pdl1_$i env CARVE_GEMM_PDL=1 $B/bench/kernels/bench_gemm_sweep $S --json $R/sh_pdl1_$i.json
done
t dec_pdl1 env CARVE_GEMM_PDL=1 $B/bench/kernels/bench_gemm_sweep --decode --json $R/dec_pdl1.json
t dec_pdl0 env CARVE_GEMM_PDL=0 $B/bench/kernels/bench_gemm_sweep --decode --json $R/dec_pdl0.json
t tc_quick_pdl0 env CARVE_GEMM_PDL=0 CARVE_TEST_QUICK=1 $B/tests/kernels/test_gemm_tc
echo finished >> $R/progress
