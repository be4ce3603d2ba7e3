#!/usr/bin/env bash
# the stream cluster rule with B rows off 16 bytes at four blocks an SM: tests, memcheck, sweep, odd shapes
R=/tmp/res25; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
B=build-gpu
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv; git log -1 --format=%H 2>/dev/null; } > $R/info.txt
T0=$SECONDS
(meson setup $B --buildtype=release -Dbenchmarks=true > $R/build.log 2>&1 || true; ninja -C $B tests/kernels/test_gemm_tc tests/kernels/test_gemm_plan bench/kernels/bench_gemm_sweep >> $R/build.log 2>&1); echo "build rc $? $((SECONDS-T0)) s" >> $R/progress
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t plan $B/tests/kernels/test_gemm_plan
t tc_quick env CARVE_TEST_QUICK=1 $B/tests/kernels/test_gemm_tc
t memcheck_quick env CARVE_TEST_QUICK=1 timeout 300 compute-sanitizer --tool memcheck $B/tests/kernels/test_gemm_tc
S=""
for m in 1 4 16; do for nk in 50257x768 32001x4096 4097x4096 50264x768 32008x4096; do S="$S --shape ${m}x${nk}"; done; done
S="$S --shape 2x4096x4097t --shape 8x4096x4097t --shape 3x50257x768 --shape 8x50257x4096 --shape 32x50257x4096 --shape 4x12289x4096 --shape 16x12289x4096 --shape 8x20001x4096"
t odd $B/bench/kernels/bench_gemm_sweep --check $S --json $R/odd.json
t sweep timeout 300 $B/bench/kernels/bench_gemm_sweep --check --json $R/sweep.json
t decode2 $B/bench/kernels/bench_gemm_sweep --decode --json $R/decode2.json
t tc_full timeout 200 $B/tests/kernels/test_gemm_tc
echo finished >> $R/progress
