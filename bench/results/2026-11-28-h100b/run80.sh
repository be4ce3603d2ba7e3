#!/usr/bin/env bash
# pass80: (1) PDL transitivity probe; (2) static-runtime pair bimodality: carve-run static pair, the runtime alone
# (do-nothing driver stand-in) and a CPU-only reference (bench_alloc pair, virtual backend), taking turns, pinned,
# with the core's clock; (3) decode sweep by default and with CARVE_GEMM_PDL=2, two runs each.
R=/tmp/res80; rm -rf $R; mkdir -p $R
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; nproc; lscpu | head -20; git log --oneline -1; git status --short; } > $R/info.txt 2>&1
T0=$SECONDS
nvcc -arch=sm_90 -o $R/probe .gpu/pdl/probe.cu > $R/probe_build.log 2>&1; echo "probe build rc $?" >> $R/progress
$R/probe > $R/probe.log 2>&1; echo "probe rc $? $((SECONDS-T0)) s" >> $R/progress
( [ -d build-gpu ] || meson setup build-gpu --buildtype=release > $R/build.log 2>&1; ninja -C build-gpu tools/carve-run lib/preload/libcarve_preload.so tests/dropin/libdropin_floor.so bench/bench_alloc bench/kernels/bench_gemm_sweep >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress )
nvcc -O2 -o $R/app_static tests/dropin/gpu/app_runtime.cu > $R/app_build.log 2>&1; echo "app rc $? $((SECONDS-T0)) s" >> $R/progress
mkdir -p $R/pair
FLOOR=build-gpu/tests/dropin/libdropin_floor.so
mhz() { grep MHz /proc/cpuinfo | sed -n "$(( $1 + 1 ))p" | awk '{print $4}'; cat /sys/devices/system/cpu/cpu$1/cpufreq/scaling_cur_freq 2>/dev/null; }
for rep in $(seq 1 12); do
  echo "rep $rep t=$((SECONDS-T0)) mhz2=$(mhz 2 | tr '\n' ' ') load=$(cut -d' ' -f1-3 /proc/loadavg)" >> $R/pair/clock.txt
  taskset -c 2 build-gpu/tools/carve-run -- $R/app_static bench-small > $R/pair/carve_$rep.log 2>&1
  LD_PRELOAD=$FLOOR taskset -c 2 $R/app_static bench-small > $R/pair/floor_$rep.log 2>&1
  taskset -c 2 build-gpu/bench/bench_alloc --only pair --quick > $R/pair/cpu_$rep.log 2>&1
done
for rep in 1 2 3; do for c in 0 5 9 14; do
  taskset -c $c build-gpu/tools/carve-run -- $R/app_static bench-small > $R/pair/core${c}_carve_$rep.log 2>&1
  taskset -c $c build-gpu/bench/bench_alloc --only pair --quick > $R/pair/core${c}_cpu_$rep.log 2>&1
done; done
( for f in $R/pair/*.log; do echo "$(basename $f): $(grep -m1 -E '4096 B|pair 256 B' $f)"; done ) > $R/pair/summary.txt
echo "pair done $((SECONDS-T0)) s" >> $R/progress
mkdir -p $R/gemm
for run in 1 2; do
  build-gpu/bench/kernels/bench_gemm_sweep --decode --json $R/gemm/dec_pdl1_$run.json > $R/gemm/dec_pdl1_$run.log 2>&1
  CARVE_GEMM_PDL=2 build-gpu/bench/kernels/bench_gemm_sweep --decode --json $R/gemm/dec_pdl2_$run.json > $R/gemm/dec_pdl2_$run.log 2>&1
  echo "gemm run $run $((SECONDS-T0)) s" >> $R/progress
done
echo finished >> $R/progress
