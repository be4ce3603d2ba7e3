#!/usr/bin/env bash
# The L2-prefetch probe of this folder (and the pair-pin one beside it):
# builds the tree as it was then and a copy whose streaming-kernel B loads
# carry .L2::256B, times bench_gemm_sweep --decode twice with each, then
# the static runtime's interposed pair pinned to 1, 2, 4 cores or none.
# Run from the repository root on a GPU machine; results in /tmp/res11.
R=/tmp/res11; rm -rf $R; mkdir -p $R/o
export PATH=/usr/local/cuda/bin:$PATH
B=build-gpu
{ date -u; nvidia-smi -L; nproc; } > $R/info.txt
T0=$SECONDS
(meson setup $B --buildtype=release -Dbenchmarks=true >$R/build.log 2>&1 || true; ninja -C $B tests/kernels/test_gemm_tc bench/kernels/bench_gemm_sweep >>$R/build.log 2>&1); echo "build rc $? $((SECONDS-T0)) s" >> $R/progress
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t tc_quick env CARVE_TEST_QUICK=1 $B/tests/kernels/test_gemm_tc
# variant: the streaming kernel's B loads with a 256-byte L2 prefetch
V=/tmp/v2; rm -rf $V; mkdir -p $V; git ls-files -z | xargs -0 cp --parents -t $V 2>/dev/null; cp lib/kernels/*.cuh lib/kernels/*.cu lib/kernels/*.h $V/lib/kernels/; cp bench/kernels/*.cu $V/bench/kernels/
sed -i 's/ld.global.nc.L1::no_allocate.v4.u32/ld.global.nc.L1::no_allocate.L2::256B.v4.u32/; s/"ld.global.nc.v4.u32/"ld.global.nc.L2::256B.v4.u32/' $V/lib/kernels/gemm_tc_stream.cuh
grep -c "L2::256B" $V/lib/kernels/gemm_tc_stream.cuh >> $R/progress
(cd $V && meson setup bv --buildtype=release -Dbenchmarks=true >$R/build2.log 2>&1; ninja -C bv bench/kernels/bench_gemm_sweep >>$R/build2.log 2>&1); echo "build2 rc $? $((SECONDS-T0)) s" >> $R/progress
for i in 1 2; do
t dec_base$i $B/bench/kernels/bench_gemm_sweep --decode --json $R/dec_base$i.json
t dec_l2_$i $V/bv/bench/kernels/bench_gemm_sweep --decode --json $R/dec_l2_$i.json
done
# issue 24: the static runtime's pair, pinned to one core (CUDA's own threads share it) or to a few
DROPIN_GPU_BUILD_ONLY=1 timeout 200 tests/dropin/gpu/run.sh $B $R/o > $R/build3.log 2>&1; echo "build3 rc $? $((SECONDS-T0)) s" >> $R/progress
RUN=$B/tools/carve-run; APP=$R/o/bin/app_static
one() { "$@" 2>&1 | grep -m1 'cudaMalloc+cudaFree 4096' | sed -E 's/.*: ([0-9.]+) ns.*/\1/'; }
for pin in "2" "2-3" "2-5" "none"; do
  for i in $(seq 8); do
    if [ $pin = none ]; then v=$(one $RUN -- $APP bench-small); else v=$(one taskset -c $pin $RUN -- $APP bench-small); fi
    echo "$pin $v"
  done
done > $R/pair_pin.txt
echo "pair $((SECONDS-T0)) s" >> $R/progress
echo finished >> $R/progress
