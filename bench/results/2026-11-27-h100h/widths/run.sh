#!/usr/bin/env bash
# decode kernel with 64-column blocks: plan test, tests, sanitizers (memcheck, synccheck), decode sweep vs HEAD x3, forced 64 x2, full sweep --check, limits mn
R=/tmp/res59; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git log --oneline -1; git status --short; } > $R/info.txt 2>&1
git diff > $R/tree.diff
rm -rf /tmp/base; mkdir /tmp/base; git ls-files -z | xargs -0 cp --parents -t /tmp/base 2>/dev/null
(cd /tmp/base && patch -R -p1 < $R/tree.diff > /dev/null) && echo "base: HEAD" >> $R/info.txt
T0=$SECONDS
( [ -d build-gpu ] || meson setup build-gpu --buildtype=release > $R/build.log 2>&1; ninja -C build-gpu bench/kernels/bench_gemm_sweep tests/kernels/test_gemm_tc tests/kernels/test_gemm_limits tests/kernels/test_gemm_plan >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress ) &
( cd /tmp/base && meson setup build-base --buildtype=release > $R/build_base.log 2>&1; ninja -C build-base bench/kernels/bench_gemm_sweep >> $R/build_base.log 2>&1; echo "build_base rc $? $((SECONDS-T0)) s" >> $R/progress ) &
wait
N=build-gpu; O=/tmp/base/build-base
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t plan $N/tests/kernels/test_gemm_plan
t tc_quick env CARVE_TEST_QUICK=1 timeout 60 $N/tests/kernels/test_gemm_tc
for i in 1 2 3; do
  t dec_o$i $O/bench/kernels/bench_gemm_sweep --decode --json $R/dec_o$i.json
  t dec_n$i $N/bench/kernels/bench_gemm_sweep --decode --json $R/dec_n$i.json
done
for i in 1 2; do
  t dec_f64_$i env CARVE_GEMM_DECODE_COLS=64 $N/bench/kernels/bench_gemm_sweep --decode --json $R/dec_f64_$i.json
done
t memcheck_quick env CARVE_TEST_QUICK=1 timeout 120 compute-sanitizer --tool memcheck $N/tests/kernels/test_gemm_tc
t synccheck_quick env CARVE_TEST_QUICK=1 timeout 120 compute-sanitizer --tool synccheck $N/tests/kernels/test_gemm_tc
t tc_full timeout 200 $N/tests/kernels/test_gemm_tc
t sweep_check $N/bench/kernels/bench_gemm_sweep --check --json $R/sweep.json
t limits_mn env CARVE_TEST_LIMITS=mn timeout 200 $N/tests/kernels/test_gemm_limits
echo finished >> $R/progress
