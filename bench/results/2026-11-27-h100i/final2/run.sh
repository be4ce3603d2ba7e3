#!/usr/bin/env bash
# pass70: the streaming kernel's cluster size for B K-major with rows off 16 bytes at 2113-4095 columns (6, or 8 where k > 6144) on 60 shapes it was not fitted on, against HEAD (two runs each, interleaved); test_gemm_plan, test_gemm_tc quick and full, memcheck on quick
R=/tmp/res70; rm -rf $R; mkdir -p $R
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git log --oneline -1; git status --short; } > $R/info.txt 2>&1
git diff > $R/tree.diff
T0=$SECONDS
rm -rf /tmp/base; mkdir -p /tmp/base; git ls-files -z | xargs -0 cp --parents -t /tmp/base; (cd /tmp/base && patch -R -p1 < $R/tree.diff > /dev/null)
b() { ( [ -d $1/build-gpu ] || meson setup $1/build-gpu $1 --buildtype=release > $R/build_$2.log 2>&1; ninja -C $1/build-gpu bench/kernels/bench_gemm_sweep $3 >> $R/build_$2.log 2>&1; echo "build $2 rc $? $((SECONDS-T0)) s" >> $R/progress ) }
b . new "tests/kernels/test_gemm_tc tests/kernels/test_gemm_plan" & b /tmp/base base "" & wait
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
A=""; for k in 3073 5121 9217; do for n in 2176 2688 3200 3968; do for m in 1 2 4 6 8; do A="$A --shape ${m}x${n}x${k}t"; done; done; done
for i in 1 2; do
  for tr in base new; do
    d=.; [ $tr = base ] && d=/tmp/base
    t A_${tr}_$i $d/build-gpu/bench/kernels/bench_gemm_sweep $A --reps 20 --json $R/A_${tr}_$i.json
  done
done
t plan build-gpu/tests/kernels/test_gemm_plan
t tc_quick env CARVE_TEST_QUICK=1 build-gpu/tests/kernels/test_gemm_tc
t memcheck env CARVE_TEST_QUICK=1 compute-sanitizer --tool memcheck --print-limit 20 build-gpu/tests/kernels/test_gemm_tc
t tc_full build-gpu/tests/kernels/test_gemm_tc
echo finished >> $R/progress
