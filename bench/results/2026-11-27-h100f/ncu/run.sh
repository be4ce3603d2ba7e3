#!/usr/bin/env bash
# ncu full sections: the streaming kernel and cuBLAS's at 1 x 4096 x 4096, the wgmma kernel at 8 x 4096 x 4096
R=/tmp/res44; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git log --oneline -1; } > $R/info.txt 2>&1
([ -d build-gpu ] || meson setup build-gpu --buildtype=release > $R/build.log 2>&1; ninja -C build-gpu bench/kernels/bench_gemm_sweep >> $R/build.log 2>&1; echo "build rc $?" >> $R/progress)
S=build-gpu/bench/kernels/bench_gemm_sweep
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t full_stream timeout 120 ncu --set full -k regex:stream_gemm --launch-skip 5 --launch-count 1 $S --shape 1x4096x4096 --reps 2 --batch 3
t full_nvjet timeout 120 ncu --set full -k regex:nvjet --launch-skip 5 --launch-count 1 $S --shape 1x4096x4096 --reps 2 --batch 3
t full_wgmma timeout 120 ncu --set full -k regex:wgmma_gemm --launch-skip 5 --launch-count 1 $S --shape 8x4096x4096 --reps 2 --batch 3
echo finished >> $R/progress
