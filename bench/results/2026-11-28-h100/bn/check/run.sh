#!/usr/bin/env bash
# pass78: CARVE_TC_TILE_FIXED 32 -> 16: (1) the shapes whose width it changes that pass 77 did not time, every width forced, and the plan;
# (2) test_gemm_plan, test_gemm_tc quick; (3) squares >= 4096 and prefill (m = 2048, 8192) under the plan.
R=/tmp/res78; rm -rf $R; mkdir -p $R
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git log --oneline -1; git status --short; } > $R/info.txt 2>&1
git diff > $R/tree.diff
T0=$SECONDS
( [ -d build-gpu ] || meson setup build-gpu --buildtype=release > $R/build.log 2>&1; ninja -C build-gpu bench/kernels/bench_gemm_sweep tests/kernels/test_gemm_tc tests/kernels/test_gemm_plan >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress )
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
NEW="--shape 512x28672x4096 --shape 1024x14336x4096 --shape 1024x13824x4096 --shape 8192x13824x4096 --shape 2048x11008x4096 --shape 1024x14336x8192 --shape 512x28672x8192"
for bn in plan 128 192 256; do
  e=""; [ $bn != plan ] && e="CARVE_GEMM_BN=$bn"
  t new_${bn} env $e build-gpu/bench/kernels/bench_gemm_sweep $NEW --reps 20 --json $R/new_${bn}.json
done
t plan build-gpu/tests/kernels/test_gemm_plan
t tc_quick env CARVE_TEST_QUICK=1 build-gpu/tests/kernels/test_gemm_tc
SW="--shape 4096x4096x4096 --shape 8192x8192x8192 --shape 16384x16384x16384"
for M in 2048 8192; do for NK in 4096x4096 11008x4096 4096x11008 14336x4096 4096x14336 8192x8192 28672x8192 8192x28672; do SW="$SW --shape ${M}x${NK}"; done; done
t sweep build-gpu/bench/kernels/bench_gemm_sweep $SW --json $R/sweep.json
echo finished >> $R/progress
