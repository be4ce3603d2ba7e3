#!/usr/bin/env bash
# the committed tree (64-column blocks where shares keep 16 k tiles; the streaming kernel yields only where they split k): plan test, test_gemm_tc quick and full, memcheck quick, decode sweep once (its choices against final/)
R=/tmp/res63; rm -rf $R; mkdir -p $R
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
t dec_1 $N/bench/kernels/bench_gemm_sweep --decode --json $R/dec_1.json
t tc_full timeout 200 $N/tests/kernels/test_gemm_tc
echo finished >> $R/progress
