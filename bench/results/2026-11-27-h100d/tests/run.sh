#!/usr/bin/env bash
# PDL final tree with the chain test fixed: tests, sanitizers; mutants without each kernel's grid_dep_wait (chains must fail)
R=/tmp/res38; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git status --short | head -20; } > $R/info.txt
T0=$SECONDS
TG="tests/kernels/test_gemm_tc tests/kernels/test_gemm_plan"
mk() { # mk NAME FILE PERL-EXPR
  rm -rf /tmp/$1; mkdir -p /tmp/$1
  tar --exclude=./build-gpu --exclude=./bench/results --exclude=./.gpu --exclude=./.git -cf - . | tar -xf - -C /tmp/$1
  perl -0pi -e "$3" /tmp/$1/$2
  (cd /tmp/$1 && git -C /tmp/$1 init -q 2>/dev/null; diff <(cat $OLDPWD/$2) $2 > $R/$1.diff; meson setup build-m --buildtype=release > $R/$1_build.log 2>&1; ninja -C build-m tests/kernels/test_gemm_tc >> $R/$1_build.log 2>&1; echo "build $1 rc $? $((SECONDS-T0)) s" >> $R/progress)
}
(meson setup build-gpu --buildtype=release -Dbenchmarks=true > $R/build.log 2>&1; ninja -C build-gpu $TG >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress) &
mk mut_reduce lib/kernels/gemm_tc_ws.cuh 's/(splitk_reduce_kernel.*?)grid_dep_wait\(\);/$1/s' &
mk mut_wgmma lib/kernels/gemm_tc_wgmma.cuh 's/grid_dep_wait\(\);//' &
mk mut_stream lib/kernels/gemm_tc_stream.cuh 's/grid_dep_wait\(\);//' &
wait
B=build-gpu
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t tc_quick env CARVE_TEST_QUICK=1 $B/tests/kernels/test_gemm_tc
t tc_quick_pdl0 env CARVE_GEMM_PDL=0 CARVE_TEST_QUICK=1 $B/tests/kernels/test_gemm_tc
t plan $B/tests/kernels/test_gemm_plan
for m in mut_reduce mut_wgmma mut_stream; do t $m env CARVE_TEST_QUICK=1 /tmp/$m/build-m/tests/kernels/test_gemm_tc; done
t memcheck_quick env CARVE_TEST_QUICK=1 timeout 300 compute-sanitizer --tool memcheck $B/tests/kernels/test_gemm_tc
t synccheck_quick env CARVE_TEST_QUICK=1 timeout 200 compute-sanitizer --tool synccheck $B/tests/kernels/test_gemm_tc
t racecheck_quick env CARVE_TEST_QUICK=1 timeout 200 compute-sanitizer --tool racecheck $B/tests/kernels/test_gemm_tc
t tc_full timeout 240 $B/tests/kernels/test_gemm_tc
echo finished >> $R/progress
