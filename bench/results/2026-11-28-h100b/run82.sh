#!/usr/bin/env bash
# pass82: PDL probes (transitivity; non-kernel and cross-stream predecessors, graphs), then the tree where a call's
# first kernel gets the attribute by default when it is the decode or streaming kernel: GEMM tests (plan, tc quick,
# memcheck/synccheck quick, tc full), decode sweep under the new default / CARVE_GEMM_PDL=1 (the old default) / 2,
# two runs each, and the full sweep with --check.
R=/tmp/res82; rm -rf $R; mkdir -p $R
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv; git log --oneline -1; git status --short; } > $R/info.txt 2>&1
git diff > $R/tree.diff
T0=$SECONDS
nvcc -arch=sm_90 -o $R/probe .gpu/pdl/probe.cu > $R/probe_build.log 2>&1 && nvcc -arch=sm_90 -o $R/probe2 .gpu/pdl/probe2.cu >> $R/probe_build.log 2>&1
$R/probe > $R/probe.log 2>&1; $R/probe2 > $R/probe2.log 2>&1; echo "probes rc $? $((SECONDS-T0)) s" >> $R/progress
( [ -d build-gpu ] || meson setup build-gpu --buildtype=release > $R/setup.log 2>&1; ninja -C build-gpu tests/kernels/test_gemm_tc tests/kernels/test_gemm_plan bench/kernels/bench_gemm_sweep > $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress )
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
B=build-gpu
t plan $B/tests/kernels/test_gemm_plan
t tc_quick env CARVE_TEST_QUICK=1 $B/tests/kernels/test_gemm_tc
t memcheck_quick env CARVE_TEST_QUICK=1 timeout 300 compute-sanitizer --tool memcheck --error-exitcode 1 $B/tests/kernels/test_gemm_tc
t synccheck_quick env CARVE_TEST_QUICK=1 timeout 300 compute-sanitizer --tool synccheck --error-exitcode 1 $B/tests/kernels/test_gemm_tc
mkdir -p $R/dec
for run in 1 2; do
  t dec_new_$run $B/bench/kernels/bench_gemm_sweep --decode --json $R/dec/new_$run.json
  t dec_old_$run env CARVE_GEMM_PDL=1 $B/bench/kernels/bench_gemm_sweep --decode --json $R/dec/old_$run.json
  t dec_all_$run env CARVE_GEMM_PDL=2 $B/bench/kernels/bench_gemm_sweep --decode --json $R/dec/all_$run.json
done
t sweep_check $B/bench/kernels/bench_gemm_sweep --check --json $R/sweep.json
t tc_full $B/tests/kernels/test_gemm_tc
echo finished >> $R/progress
