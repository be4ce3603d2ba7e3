#!/usr/bin/env bash
# pass67: the two plan lines (B K-major with rows off 16 bytes at 1024-4095 columns; the decode kernel at 33-64 rows where one wave of 128-column tiles covers n) on shapes they were not fitted on, against HEAD in the same run (2 runs each, interleaved); test_gemm_plan and test_gemm_tc quick; the decode sweep and the full sweep against HEAD
R=/tmp/res67; rm -rf $R; mkdir -p $R
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git log --oneline -1; git status --short; } > $R/info.txt 2>&1
git diff > $R/tree.diff
T0=$SECONDS
rm -rf /tmp/base; mkdir -p /tmp/base; git ls-files -z | xargs -0 cp --parents -t /tmp/base; (cd /tmp/base && patch -R -p1 < $R/tree.diff > /dev/null)
b() { ( [ -d $1/build-gpu ] || meson setup $1/build-gpu $1 --buildtype=release > $R/build_$2.log 2>&1; ninja -C $1/build-gpu bench/kernels/bench_gemm_sweep $3 >> $R/build_$2.log 2>&1; echo "build $2 rc $? $((SECONDS-T0)) s" >> $R/progress ) }
b . new "tests/kernels/test_gemm_tc tests/kernels/test_gemm_plan" & b /tmp/base base "" & wait
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
A=""; for k in 3073 6145 14337; do for n in 1280 2560 3328 4000; do for m in 1 3 4 5 6 8; do A="$A --shape ${m}x${n}x${k}t"; done; done; done
B=""; for k in 2048 5120 14336; do for n in 9728 15360 16896; do for m in 40 56 64; do B="$B --shape ${m}x${n}x${k}"; done; done; done
for k in 256 512 1024; do for n in 2048 4096 11008; do for m in 48 64; do B="$B --shape ${m}x${n}x${k}"; done; done; done
B="$B --shape 48x17408x4096 --shape 48x20480x4096 --shape 48x11008x4096t --shape 64x9216x8192t --shape 64x14336x4096t --shape 40x13824x5120t"
t plan_new build-gpu/tests/kernels/test_gemm_plan
for i in 1 2; do
  for tr in base new; do
    d=.; [ $tr = base ] && d=/tmp/base
    t A_${tr}_$i $d/build-gpu/bench/kernels/bench_gemm_sweep $A --reps 20 --json $R/A_${tr}_$i.json
    t B_${tr}_$i $d/build-gpu/bench/kernels/bench_gemm_sweep $B --reps 20 --json $R/B_${tr}_$i.json
  done
done
t tc_quick env CARVE_TEST_QUICK=1 build-gpu/tests/kernels/test_gemm_tc
for i in 1 2; do
  for tr in base new; do
    d=.; [ $tr = base ] && d=/tmp/base
    t decode_${tr}_$i $d/build-gpu/bench/kernels/bench_gemm_sweep --decode --json $R/decode_${tr}_$i.json
  done
done
t sweep_new build-gpu/bench/kernels/bench_gemm_sweep --json $R/sweep_new.json
echo finished >> $R/progress
