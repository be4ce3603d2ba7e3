#!/usr/bin/env bash
# staged B for both layouts: tests, memcheck; N-major narrow and K-major odd shapes at the plan, forced cluster sizes 1-4, and main's kernel (base)
R=/tmp/res31; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv; git log -1 --format=%H; git status --short | head -8; } > $R/info.txt
T0=$SECONDS
rm -rf /tmp/base; mkdir -p /tmp/base
tar --exclude=./build-gpu --exclude=./bench/results --exclude=./.gpu --exclude=./.git -cf - . | tar -xf - -C /tmp/base
cp .gpu/base_stream.cuh /tmp/base/lib/kernels/gemm_tc_stream.cuh
TG="tests/kernels/test_gemm_tc tests/kernels/test_gemm_plan bench/kernels/bench_gemm_sweep"
(meson setup build-gpu --buildtype=release -Dbenchmarks=true > $R/build.log 2>&1; ninja -C build-gpu $TG >> $R/build.log 2>&1; echo "build new rc $? $((SECONDS-T0)) s" >> $R/progress) &
(cd /tmp/base && meson setup build-base --buildtype=release -Dbenchmarks=true > $R/build_base.log 2>&1; ninja -C build-base bench/kernels/bench_gemm_sweep >> $R/build_base.log 2>&1; echo "build base rc $? $((SECONDS-T0)) s" >> $R/progress) &
wait
B=build-gpu; BB=/tmp/base/build-base
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t plan $B/tests/kernels/test_gemm_plan
t tc_quick env CARVE_TEST_QUICK=1 $B/tests/kernels/test_gemm_tc
t memcheck_quick env CARVE_TEST_QUICK=1 timeout 300 compute-sanitizer --tool memcheck $B/tests/kernels/test_gemm_tc
NM=""; KM=""
for m in 1 2 4 8 16; do
  for nk in 257x4096 513x4096 1025x4096 2049x4096 4097x768 1025x768 8193x4096; do NM="$NM --shape ${m}x${nk}"; done
  for nk in 4096x4097t 32000x4097t 12288x4097t 50264x769t 1024x4097t 11008x4097t 4096x11009t; do KM="$KM --shape ${m}x${nk}"; done
done
for m in 1 4 16; do for nk in 32008x4096 50264x768 4096x4096 12288x4096; do NM="$NM --shape ${m}x${nk}"; done; for nk in 4096x4096t 32000x4096t 12288x4096t; do KM="$KM --shape ${m}x${nk}"; done; done
for set in NM KM; do
  S=${!set}
  t ${set}_new $B/bench/kernels/bench_gemm_sweep --reps 10 --check $S --json $R/${set}_new.json
  t ${set}_base $BB/bench/kernels/bench_gemm_sweep --reps 10 $S --json $R/${set}_base.json
  for cs in 1 2 3 4; do t ${set}_cs$cs env CARVE_GEMM_PATH=stream CARVE_GEMM_SPLITK=$cs $B/bench/kernels/bench_gemm_sweep --reps 10 $S --json $R/${set}_cs$cs.json; done
done
t tc_full timeout 200 $B/tests/kernels/test_gemm_tc
echo finished >> $R/progress
