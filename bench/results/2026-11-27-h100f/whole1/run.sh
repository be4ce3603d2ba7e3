#!/usr/bin/env bash
# the streaming kernel with a test-free path for whole steps and no row tests on A's fragments, against HEAD
R=/tmp/res48; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git log --oneline -1; git status --short; } > $R/info.txt 2>&1
git diff > $R/tree.diff
rm -rf /tmp/base; mkdir /tmp/base; git ls-files -z | xargs -0 cp --parents -t /tmp/base
(cd /tmp/base && patch -R -p1 < $R/tree.diff > /dev/null) && echo "base: HEAD" >> $R/info.txt
T0=$SECONDS
( [ -d build-gpu ] || meson setup build-gpu --buildtype=release > $R/build.log 2>&1; ninja -C build-gpu bench/kernels/bench_gemm_sweep tests/kernels/test_gemm_tc >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress ) &
( cd /tmp/base && meson setup build-base --buildtype=release > $R/build_base.log 2>&1; ninja -C build-base bench/kernels/bench_gemm_sweep >> $R/build_base.log 2>&1; echo "build_base rc $? $((SECONDS-T0)) s" >> $R/progress ) &
wait
N=build-gpu; O=/tmp/base/build-base
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t tc_quick env CARVE_TEST_QUICK=1 timeout 60 $N/tests/kernels/test_gemm_tc
SH=""
for s in 1x4096x4096 2x4096x4096 4x4096x4096 8x4096x4096 16x4096x4096 32x4096x4096 1x14336x4096 4x14336x4096 1x4096x14336 1x28672x8192 4x28672x8192 1x4096x4096t 4x4096x11008t 16x12288x4096 1x50257x768 1x32000x4096t 3x4097x4096 1x1024x4097t; do SH="$SH --shape $s"; done
for i in 1 2; do
  t st_o$i env CARVE_GEMM_PATH=stream $O/bench/kernels/bench_gemm_sweep $SH --json $R/st_o$i.json
  t st_n$i env CARVE_GEMM_PATH=stream $N/bench/kernels/bench_gemm_sweep $SH --json $R/st_n$i.json
done
t tc_full timeout 200 $N/tests/kernels/test_gemm_tc
echo finished >> $R/progress
