#!/usr/bin/env bash
# probe: streaming kernel on B rows off 16 bytes; cluster sizes forced; ncu BU vs aligned
R=/tmp/res21; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
B=build-gpu
{ date -u; nvidia-smi -L; } > $R/info.txt
(meson setup $B --buildtype=release -Dbenchmarks=true > $R/build.log 2>&1 || true; ninja -C $B bench/kernels/bench_gemm_sweep >> $R/build.log 2>&1); echo "build rc $?" >> $R/progress
t() { local name=$1; shift; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $?" >> $R/progress; }
S=""
for m in 1 4 16; do for nk in 50257x768 32001x4096 4097x4096 50264x768 32008x4096; do S="$S --shape ${m}x${nk}"; done; done
S="$S --shape 2x4096x4097t --shape 8x4096x4097t"
t plan $B/bench/kernels/bench_gemm_sweep --reps 10 $S --json $R/plan.json
for cs in 1 2 4 8; do t cs$cs env CARVE_GEMM_PATH=stream CARVE_GEMM_SPLITK=$cs $B/bench/kernels/bench_gemm_sweep --reps 10 $S --json $R/cs$cs.json; done
M="dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,lts__t_bytes.sum,l1tex__t_sector_hit_rate.pct,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__occupancy_limit_registers,smsp__inst_executed.sum,gpu__time_duration.sum,launch__grid_size,launch__cluster_dim_x,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active"
for sh in 3x50257x768 3x50264x768 16x32001x4096 16x32008x4096; do
  t ncu_$sh env CARVE_GEMM_PATH=stream CARVE_GEMM_SPLITK=2 timeout 120 ncu --kernel-name regex:stream_gemm --launch-skip 20 --launch-count 1 --metrics $M $B/bench/kernels/bench_gemm_sweep --reps 3 --shape $sh
done
echo finished >> $R/progress
