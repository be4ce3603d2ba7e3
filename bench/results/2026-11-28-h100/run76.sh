#!/usr/bin/env bash
# pass76: (1) the GEMM host change (the SM count read once a call): test_gemm_plan, test_gemm_tc quick;
# (2) carve-run's static-runtime pair with address-space randomization off (setarch -R) and on, pinned to core 2, 8 processes each, taking turns.
R=/tmp/res76; rm -rf $R; mkdir -p $R
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git log --oneline -1; git status --short; } > $R/info.txt 2>&1
git diff > $R/tree.diff
T0=$SECONDS
( [ -d build-gpu ] || meson setup build-gpu --buildtype=release > $R/build.log 2>&1; ninja -C build-gpu tests/kernels/test_gemm_tc tests/kernels/test_gemm_plan tools/carve-run lib/preload/libcarve_preload.so >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress )
nvcc -O2 -o $R/app_static tests/dropin/gpu/app_runtime.cu > $R/app_build.log 2>&1; echo "app rc $? $((SECONDS-T0)) s" >> $R/progress
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t plan build-gpu/tests/kernels/test_gemm_plan
t tc_quick env CARVE_TEST_QUICK=1 build-gpu/tests/kernels/test_gemm_tc
mkdir -p $R/pair
for rep in 1 2 3 4 5 6 7 8; do
  taskset -c 2 setarch x86_64 -R build-gpu/tools/carve-run -- $R/app_static bench-small > $R/pair/norand_$rep.log 2>&1
  taskset -c 2 build-gpu/tools/carve-run -- $R/app_static bench-small > $R/pair/rand_$rep.log 2>&1
done
grep -H "4096 B" $R/pair/*.log > $R/pair/summary.txt
echo finished >> $R/progress
