#!/usr/bin/env bash
# pass73: (1) test_gemm_tc with stream_cases reordered (every K-major line shape at an index whose unpadded layouts have a K-major B): test_gemm_plan, quick, full;
# (2) issue 23's threads item on the GPU: carve_peers --workload threads, T = 1 2 4 8 16, carve (default) and carve-segments, cold and warm;
# (3) carve-run's static-runtime pair with the ordered quarantine's epoch closing every 128 (now), 512 or 1024 frees (experiment: XQ_FREES), pinned to one core and not.
R=/tmp/res73; rm -rf $R; mkdir -p $R
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git log --oneline -1; git status --short; nproc; } > $R/info.txt 2>&1
git diff > $R/tree.diff
T0=$SECONDS
# the experiment tree: this tree with .gpu/xq.diff
rm -rf /tmp/xq; mkdir -p /tmp/xq; tar --exclude='./build*' --exclude=./.git -cf - . | tar -C /tmp/xq -xf -
( cd /tmp/xq && patch -p0 < .gpu/xq.diff > $R/xq_patch.log 2>&1 || patch -p1 < .gpu/xq.diff >> $R/xq_patch.log 2>&1
  meson setup /tmp/xq/bx --buildtype=release -Dbenchmarks=false > $R/xq_build.log 2>&1
  ninja -C /tmp/xq/bx tools/carve-run lib/preload/libcarve_preload.so >> $R/xq_build.log 2>&1; echo "xq build rc $? $((SECONDS-T0)) s" >> $R/progress ) &
( [ -d build-gpu ] || meson setup build-gpu --buildtype=release > $R/build.log 2>&1; ninja -C build-gpu tests/kernels/test_gemm_tc tests/kernels/test_gemm_plan bench/peers/carve_peers >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress )
nvcc -O2 -o $R/app_static tests/dropin/gpu/app_runtime.cu > $R/app_build.log 2>&1; echo "app rc $? $((SECONDS-T0)) s" >> $R/progress
wait
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t plan build-gpu/tests/kernels/test_gemm_plan
t tc_quick env CARVE_TEST_QUICK=1 build-gpu/tests/kernels/test_gemm_tc
t tc_full build-gpu/tests/kernels/test_gemm_tc
# threads
mkdir -p $R/threads
for T in 1 2 4 8 16; do
  for A in carve carve-segments; do
    t threads_${A}_$T timeout 120 build-gpu/bench/peers/carve_peers --alloc $A --workload threads --threads $T --out $R/threads/${A}_$T.jsonl
  done
done
# static pair
mkdir -p $R/pair
for rep in 1 2 3 4 5 6; do
  for X in 0 512 1024; do
    XQ_FREES=$X taskset -c 2 /tmp/xq/bx/tools/carve-run -- $R/app_static bench-small > $R/pair/pin_${X}_$rep.log 2>&1
    XQ_FREES=$X /tmp/xq/bx/tools/carve-run -- $R/app_static bench-small > $R/pair/free_${X}_$rep.log 2>&1
  done
done
echo "pair done $((SECONDS-T0)) s" >> $R/progress
grep -H "4096 B" $R/pair/*.log > $R/pair/summary.txt
echo finished >> $R/progress
