#!/usr/bin/env bash
# cluster cap 8 at M <= 4 (plan) against forced 4 on narrow odd outputs; gemm tests
R=/tmp/res39; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git status --short | head -20; } > $R/info.txt
T0=$SECONDS
TG="tests/kernels/test_gemm_tc tests/kernels/test_gemm_plan bench/kernels/bench_gemm_sweep"
(meson setup build-gpu --buildtype=release -Dbenchmarks=true > $R/build.log 2>&1; ninja -C build-gpu $TG >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress)
B=build-gpu
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t plan $B/tests/kernels/test_gemm_plan
t tc_quick env CARVE_TEST_QUICK=1 $B/tests/kernels/test_gemm_tc
S=""
for m in 1 2 3 4; do for nk in 1025x4096 1537x4096 2049x4096 3073x4096 1025x11008 2049x11008 1025x2100; do S="$S --shape ${m}x${nk}"; done; done
for i in 1 2 3; do
  t plan_$i $B/bench/kernels/bench_gemm_sweep $S --json $R/plan_$i.json
  t cs4_$i env CARVE_GEMM_SPLITK=4 $B/bench/kernels/bench_gemm_sweep $S --json $R/cs4_$i.json
done
t tc_full timeout 240 $B/tests/kernels/test_gemm_tc
echo finished >> $R/progress
