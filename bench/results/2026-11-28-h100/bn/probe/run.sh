#!/usr/bin/env bash
# pass77 (probe): the wgmma tile width on prefill and mid shapes: bench_gemm_sweep --shape ... under the
# plan and under CARVE_GEMM_BN=128|192|256, two rounds taking turns; fit shapes and unseen ones apart.
R=/tmp/res77; rm -rf $R; mkdir -p $R
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git log --oneline -1; git status --short; } > $R/info.txt 2>&1
git diff > $R/tree.diff
T0=$SECONDS
( [ -d build-gpu ] || meson setup build-gpu --buildtype=release > $R/build.log 2>&1; ninja -C build-gpu bench/kernels/bench_gemm_sweep >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress )
FIT=""; for M in 2048 4096; do for N in 4096 5120 8192 11008 13824 14336 28672; do FIT="$FIT --shape ${M}x${N}x4096"; done; done
VAL=""; for M in 1024 3072; do for N in 6144 10240 11008 18944; do VAL="$VAL --shape ${M}x${N}x4096"; done; done
for M in 6144 8192; do for N in 6144 10240 11008 18944; do VAL="$VAL --shape ${M}x${N}x8192"; done; done
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
for rd in 1 2; do
  for bn in plan 128 192 256; do
    e=""; [ $bn != plan ] && e="CARVE_GEMM_BN=$bn"
    t fit_${bn}_$rd env $e build-gpu/bench/kernels/bench_gemm_sweep $FIT --reps 20 --json $R/fit_${bn}_$rd.json
    t val_${bn}_$rd env $e build-gpu/bench/kernels/bench_gemm_sweep $VAL --reps 20 --json $R/val_${bn}_$rd.json
  done
done
echo finished >> $R/progress
