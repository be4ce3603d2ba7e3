#!/usr/bin/env bash
# pass68: the committed candidate (hot-slot answer kept; plan lines for B K-major with rows off 16 bytes at 1024-4095 columns and for the decode kernel at 33-64 rows with k of 64 tiles or more): test_gemm_plan, test_gemm_tc quick and full, memcheck on quick; the 51 validation shapes of the decode line again (the floor on k) against HEAD; the decode sweep against HEAD (2 runs each, interleaved); the full sweep, both trees
R=/tmp/res68; rm -rf $R; mkdir -p $R
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git log --oneline -1; git status --short; } > $R/info.txt 2>&1
git diff > $R/tree.diff
T0=$SECONDS
rm -rf /tmp/base; mkdir -p /tmp/base; git ls-files -z | xargs -0 cp --parents -t /tmp/base; (cd /tmp/base && patch -R -p1 < $R/tree.diff > /dev/null)
b() { ( [ -d $1/build-gpu ] || meson setup $1/build-gpu $1 --buildtype=release > $R/build_$2.log 2>&1; ninja -C $1/build-gpu bench/kernels/bench_gemm_sweep $3 >> $R/build_$2.log 2>&1; echo "build $2 rc $? $((SECONDS-T0)) s" >> $R/progress ) }
b . new "tests/kernels/test_gemm_tc tests/kernels/test_gemm_plan" & b /tmp/base base "" & wait
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
B=""; for k in 2048 5120 14336; do for n in 9728 15360 16896; do for m in 40 56 64; do B="$B --shape ${m}x${n}x${k}"; done; done; done
for k in 256 512 1024; do for n in 2048 4096 11008; do for m in 48 64; do B="$B --shape ${m}x${n}x${k}"; done; done; done
B="$B --shape 48x17408x4096 --shape 48x20480x4096 --shape 48x11008x4096t --shape 64x9216x8192t --shape 64x14336x4096t --shape 40x13824x5120t"
t plan build-gpu/tests/kernels/test_gemm_plan
t tc_quick env CARVE_TEST_QUICK=1 build-gpu/tests/kernels/test_gemm_tc
t tc_full build-gpu/tests/kernels/test_gemm_tc
for i in 1 2; do
  for tr in base new; do
    d=.; [ $tr = base ] && d=/tmp/base
    t B_${tr}_$i $d/build-gpu/bench/kernels/bench_gemm_sweep $B --reps 20 --json $R/B_${tr}_$i.json
  done
done
for i in 1 2; do
  for tr in base new; do
    d=.; [ $tr = base ] && d=/tmp/base
    t decode_${tr}_$i $d/build-gpu/bench/kernels/bench_gemm_sweep --decode --json $R/decode_${tr}_$i.json
  done
done
t sweep_new build-gpu/bench/kernels/bench_gemm_sweep --json $R/sweep_new.json
t sweep_base /tmp/base/build-gpu/bench/kernels/bench_gemm_sweep --json $R/sweep_base.json
t memcheck env CARVE_TEST_QUICK=1 compute-sanitizer --tool memcheck --print-limit 20 build-gpu/tests/kernels/test_gemm_tc
echo finished >> $R/progress
