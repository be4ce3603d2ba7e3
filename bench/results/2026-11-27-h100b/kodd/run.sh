#!/usr/bin/env bash
# the final tree on the GPU (test_gemm_plan, test_gemm_tc quick), and B K-major with rows off 16 bytes (odd k) under the plan and at cluster sizes 1-4
R=/tmp/res29; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
B=build-gpu
{ date -u; nvidia-smi -L; git log -1 --format=%H; git status --short | head -5; } > $R/info.txt
T0=$SECONDS
(meson setup $B --buildtype=release -Dbenchmarks=true > $R/build.log 2>&1 || true; ninja -C $B tests/kernels/test_gemm_tc tests/kernels/test_gemm_plan bench/kernels/bench_gemm_sweep >> $R/build.log 2>&1); echo "build rc $? $((SECONDS-T0)) s" >> $R/progress
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t plan $B/tests/kernels/test_gemm_plan
t tc_quick env CARVE_TEST_QUICK=1 $B/tests/kernels/test_gemm_tc
S=""
for m in 1 4 16; do for nk in 32000x4097t 50264x769t 12288x4097t 12288x4096t; do S="$S --shape ${m}x${nk}"; done; done
t kodd $B/bench/kernels/bench_gemm_sweep --reps 10 $S --json $R/kodd.json
for cs in 1 2 3 4; do t kodd_cs$cs env CARVE_GEMM_PATH=stream CARVE_GEMM_SPLITK=$cs $B/bench/kernels/bench_gemm_sweep --reps 10 $S --json $R/kodd_cs$cs.json; done
echo finished >> $R/progress
