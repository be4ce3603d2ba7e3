#!/usr/bin/env bash
# probe: register prefetch in the streaming kernel, at the plan's cluster size and at 2 (fewer blocks: the prefetch holds two an SM)
R=/tmp/res47; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git log --oneline -1; git diff --stat; } > $R/info.txt 2>&1
git diff > $R/tree.diff
rm -rf /tmp/pf; mkdir /tmp/pf; git ls-files -z | xargs -0 cp --parents -t /tmp/pf
sed -i 's/^#define CARVE_TC_STREAM_PREFETCH 0/#define CARVE_TC_STREAM_PREFETCH 1/' /tmp/pf/lib/kernels/gemm_tc_stream.cuh
grep -n "define CARVE_TC_STREAM_PREFETCH" /tmp/pf/lib/kernels/gemm_tc_stream.cuh >> $R/info.txt
T0=$SECONDS
( [ -d build-gpu ] || meson setup build-gpu --buildtype=release > $R/build.log 2>&1; ninja -C build-gpu bench/kernels/bench_gemm_sweep tests/kernels/test_gemm_tc >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress ) &
( cd /tmp/pf && meson setup build-pf --buildtype=release > $R/build_pf.log 2>&1; ninja -C build-pf bench/kernels/bench_gemm_sweep tests/kernels/test_gemm_tc >> $R/build_pf.log 2>&1; echo "build_pf rc $? $((SECONDS-T0)) s" >> $R/progress ) &
wait
A=build-gpu; P=/tmp/pf/build-pf
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t tc_quick env CARVE_TEST_QUICK=1 timeout 60 $A/tests/kernels/test_gemm_tc
t pf_tc_quick env CARVE_TEST_QUICK=1 timeout 60 $P/tests/kernels/test_gemm_tc
SH=""

for s in 1x4096x4096 2x4096x4096 4x4096x4096 8x4096x4096 16x4096x4096 1x14336x4096 4x14336x4096 1x4096x14336 1x28672x8192 4x28672x8192 1x4096x4096t 4x4096x11008t 16x12288x4096 1x50257x768 1x32000x4096t; do SH="$SH --shape $s"; done
for i in 1 2; do
  t c2_a$i env CARVE_GEMM_PATH=stream CARVE_GEMM_SPLITK=2 $A/bench/kernels/bench_gemm_sweep $SH --json $R/c2_a$i.json
  t c2_p$i env CARVE_GEMM_PATH=stream CARVE_GEMM_SPLITK=2 $P/bench/kernels/bench_gemm_sweep $SH --json $R/c2_p$i.json
  t st_a$i env CARVE_GEMM_PATH=stream $A/bench/kernels/bench_gemm_sweep $SH --json $R/st_a$i.json
  t st_p$i env CARVE_GEMM_PATH=stream $P/bench/kernels/bench_gemm_sweep $SH --json $R/st_p$i.json
done
echo finished >> $R/progress
