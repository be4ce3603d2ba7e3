#!/usr/bin/env bash
# experiment: streaming kernel with B rows off 16 bytes at 4 blocks an SM (128 registers)
R=/tmp/res23; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
B=build-gpu
{ date -u; nvidia-smi -L; } > $R/info.txt
T0=$SECONDS
(meson setup $B --buildtype=release -Dbenchmarks=true > $R/build.log 2>&1 || true; ninja -C $B tests/kernels/test_gemm_tc bench/kernels/bench_gemm_sweep >> $R/build.log 2>&1); echo "build rc $? $((SECONDS-T0)) s" >> $R/progress
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t tc_quick env CARVE_TEST_QUICK=1 $B/tests/kernels/test_gemm_tc
S=""
for m in 1 4 16; do for nk in 50257x768 32001x4096 50264x768 32008x4096; do S="$S --shape ${m}x${nk}"; done; done
S="$S --shape 3x50257x768 --shape 8x50257x4096"
t odd $B/bench/kernels/bench_gemm_sweep --check $S --json $R/odd.json
t odd2 $B/bench/kernels/bench_gemm_sweep $S --json $R/odd2.json
echo finished >> $R/progress
