#!/usr/bin/env bash
# test_gemm_tc's pdl_edge_cases on the tree and on a mutant whose calls give their first kernel the attribute by default
R=/tmp/res46; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git log --oneline -1; git status --short; } > $R/info.txt 2>&1
git diff > $R/tree.diff
rm -rf /tmp/mut; mkdir /tmp/mut; git ls-files -z | xargs -0 cp --parents -t /tmp/mut
cp tests/kernels/test_gemm_tc.c /tmp/mut/tests/kernels/
sed -i 's/    if (first \&\& !(v \&\& v\[0\] == .2.))/    if (false \&\& first \&\& !(v \&\& v[0] == \x272\x27))/' /tmp/mut/lib/kernels/gemm_tc_common.cuh
(cd /tmp/mut && git diff --no-index /work/main/lib/kernels/gemm_tc_common.cuh lib/kernels/gemm_tc_common.cuh) > $R/mutant.diff 2>&1
T0=$SECONDS
( [ -d build-gpu ] || meson setup build-gpu --buildtype=release > $R/build.log 2>&1; ninja -C build-gpu tests/kernels/test_gemm_tc >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress ) &
( cd /tmp/mut && meson setup build-mut --buildtype=release > $R/build_mut.log 2>&1; ninja -C build-mut tests/kernels/test_gemm_tc >> $R/build_mut.log 2>&1; echo "build_mut rc $? $((SECONDS-T0)) s" >> $R/progress ) &
wait
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t tc_quick env CARVE_TEST_QUICK=1 timeout 60 build-gpu/tests/kernels/test_gemm_tc
t mut_quick env CARVE_TEST_QUICK=1 timeout 60 /tmp/mut/build-mut/tests/kernels/test_gemm_tc
echo finished >> $R/progress
