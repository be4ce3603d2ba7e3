#!/usr/bin/env bash
# pass81: the static-runtime pair's slow processes: with and without carve's per-allocation cuCtxGetCurrent
# (CARVE_X_NOCTX=1: an experiment's build, .gpu/noctx.diff), taking turns with the runtime alone; perf stat if there is perf.
R=/tmp/res81; rm -rf $R; mkdir -p $R
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; which perf; perf --version; git log --oneline -1; } > $R/info.txt 2>&1
T0=$SECONDS
patch -p1 < .gpu/noctx.diff > $R/patch.log 2>&1
( [ -d build-gpu ] || meson setup build-gpu --buildtype=release > $R/setup.log 2>&1; ninja -C build-gpu tools/carve-run lib/preload/libcarve_preload.so tests/dropin/libdropin_floor.so > $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress )
patch -R -p1 < .gpu/noctx.diff >> $R/patch.log 2>&1
nvcc -O2 -o $R/app_static tests/dropin/gpu/app_runtime.cu > $R/app_build.log 2>&1; echo "app rc $? $((SECONDS-T0)) s" >> $R/progress
mkdir -p $R/pair
FLOOR=build-gpu/tests/dropin/libdropin_floor.so
for rep in $(seq 1 12); do
  taskset -c 2 build-gpu/tools/carve-run -- $R/app_static bench-small > $R/pair/carve_$rep.log 2>&1
  CARVE_X_NOCTX=1 taskset -c 2 build-gpu/tools/carve-run -- $R/app_static bench-small > $R/pair/noctx_$rep.log 2>&1
  LD_PRELOAD=$FLOOR taskset -c 2 $R/app_static bench-small > $R/pair/floor_$rep.log 2>&1
done
echo "pair done $((SECONDS-T0)) s" >> $R/progress
if command -v perf >/dev/null; then
  for rep in 1 2 3 4 5 6; do
    taskset -c 2 perf stat -e cycles,instructions,branch-misses,L1-dcache-load-misses,LLC-load-misses -o $R/pair/perf_$rep.txt build-gpu/tools/carve-run -- $R/app_static bench-small > $R/pair/perfrun_$rep.log 2>&1
  done
fi
( for f in $R/pair/*.log; do echo "$(basename $f): $(grep -m2 -E '4096 B' $f | awk '{print $6}' | tr '\n' ' ')"; done ) > $R/pair/summary.txt
( ninja -C build-gpu bench/kernels/bench_gemm_sweep > $R/build2.log 2>&1; echo "build2 rc $? $((SECONDS-T0)) s" >> $R/progress )
mkdir -p $R/gemm
SH="--shape 128x4096x4096 --shape 64x11008x4096 --shape 128x8192x8192 --shape 256x4096x4096 --shape 32x11008x4096"
g() { local name=$1; shift; env "$@" build-gpu/bench/kernels/bench_gemm_sweep $SH --json $R/gemm/$name.json > $R/gemm/$name.log 2>&1; echo "$name $((SECONDS-T0)) s" >> $R/progress; }
g default X=1
for c in 64 128; do for s in 1 2 4; do g dec_c${c}_s$s CARVE_GEMM_PATH=decode CARVE_GEMM_DECODE_COLS=$c CARVE_GEMM_SPLITK=$s; done; done
for bn in 128 256; do for s in 1 2 3 4; do g wg_bn${bn}_s$s CARVE_GEMM_PATH=wgmma CARVE_GEMM_BN=$bn CARVE_GEMM_SPLITK=$s; done; done
g default2 X=1
echo finished >> $R/progress
