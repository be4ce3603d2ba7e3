#!/usr/bin/env bash
# the tree after review, before the floor on the share: plan test, test_gemm_tc quick and full, memcheck quick; small-k probe: the decode kernel forced to 64 and to 128 columns (CARVE_GEMM_DECODE_COLS) on 36 short-k shapes, two runs each; decode sweep once
R=/tmp/res62; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git log --oneline -1; git status --short | grep -v bench/results; } > $R/info.txt 2>&1
git diff -- . ':!bench/results' > $R/tree.diff
T0=$SECONDS
( [ -d build-gpu ] || meson setup build-gpu --buildtype=release > $R/build.log 2>&1; ninja -C build-gpu bench/kernels/bench_gemm_sweep tests/kernels/test_gemm_tc tests/kernels/test_gemm_plan >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress )
N=build-gpu
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t plan $N/tests/kernels/test_gemm_plan
t tc_quick env CARVE_TEST_QUICK=1 timeout 60 $N/tests/kernels/test_gemm_tc
t memcheck_quick env CARVE_TEST_QUICK=1 timeout 120 compute-sanitizer --tool memcheck $N/tests/kernels/test_gemm_tc
S=""
for m in 1 8 32; do for n in 1024 2048 4096 8192; do for k in 256 448 1024; do S="$S --shape ${m}x${n}x${k}"; done; done; done
for i in 1 2; do
  t small_64_$i env CARVE_GEMM_DECODE_COLS=64 $N/bench/kernels/bench_gemm_sweep $S --json $R/small_64_$i.json
  t small_128_$i env CARVE_GEMM_DECODE_COLS=128 $N/bench/kernels/bench_gemm_sweep $S --json $R/small_128_$i.json
done
t dec_1 $N/bench/kernels/bench_gemm_sweep --decode --json $R/dec_1.json
t tc_full timeout 200 $N/tests/kernels/test_gemm_tc
echo finished >> $R/progress
