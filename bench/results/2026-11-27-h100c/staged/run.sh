#!/usr/bin/env bash
# B N-major with rows off 16 bytes staged through shared memory (cp.async): tests on the GPU, odd shapes new vs base (main's kernel) in one run
R=/tmp/res30; rm -rf $R; mkdir -p $R
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
S=""
for m in 1 2 4 8 16; do for nk in 50257x768 32001x4096 4097x4096 12289x4096 50257x4096 11009x4096 1025x4096 4097x11008; do S="$S --shape ${m}x${nk}"; done; done
S="$S --shape 3x50257x768"
t odd_new $B/bench/kernels/bench_gemm_sweep --reps 10 --check $S --json $R/odd_new.json
t odd_base $BB/bench/kernels/bench_gemm_sweep --reps 10 --check $S --json $R/odd_base.json
for cs in 1 2 3 4; do t odd_new_cs$cs env CARVE_GEMM_PATH=stream CARVE_GEMM_SPLITK=$cs $B/bench/kernels/bench_gemm_sweep --reps 10 $S --json $R/odd_new_cs$cs.json; done
t odd_base2 $BB/bench/kernels/bench_gemm_sweep --reps 10 $S --json $R/odd_base2.json
t odd_new2 $B/bench/kernels/bench_gemm_sweep --reps 10 $S --json $R/odd_new2.json
t tc_full timeout 200 $B/tests/kernels/test_gemm_tc
t sweep timeout 200 $B/bench/kernels/bench_gemm_sweep --check --json $R/sweep.json
echo finished >> $R/progress
