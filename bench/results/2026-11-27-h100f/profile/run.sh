#!/usr/bin/env bash
# profile decode shapes: per-kernel durations and bytes, carve vs cuBLAS (ncu), timeline gaps (nsys if present)
R=/tmp/res43; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; which nsys ncu; git log --oneline -1; } > $R/info.txt 2>&1
T0=$SECONDS
(meson setup build-gpu --buildtype=release > $R/build.log 2>&1; ninja -C build-gpu bench/kernels/bench_gemm_sweep >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress)
S=build-gpu/bench/kernels/bench_gemm_sweep
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
SH="--shape 1x4096x4096 --shape 8x4096x4096 --shape 128x4096x4096 --shape 16x12288x4096 --shape 32x11008x4096 --shape 8x8192x8192"
t sweep $S $SH --json $R/sweep.json
for sh in 1x4096x4096 8x4096x4096 128x4096x4096 16x12288x4096; do
  t ncu_$sh timeout 150 ncu --csv --page raw --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__block_size,launch__cluster_dim_x,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active $S --shape $sh --reps 2 --batch 3
done
if which nsys >/dev/null 2>&1; then
  for sh in 1x4096x4096 8x4096x4096 128x4096x4096; do
    t nsys_$sh timeout 120 nsys profile -o $R/nsys_$sh --force-overwrite true $S --shape $sh --reps 5 --batch 10
    nsys stats --report cuda_gpu_trace --format csv -o $R/trace_$sh $R/nsys_$sh.nsys-rep > /dev/null 2>&1
    rm -f $R/nsys_$sh.nsys-rep $R/nsys_$sh.sqlite
  done
fi
echo finished >> $R/progress
