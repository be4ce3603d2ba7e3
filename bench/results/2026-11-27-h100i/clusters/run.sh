#!/usr/bin/env bash
# pass69: the streaming kernel's cluster size on B K-major with rows off 16 bytes at 1024-3584 columns (the plan's new line): the plan against every forced size 1, 2, 3, 4, 6, 8
R=/tmp/res69; rm -rf $R; mkdir -p $R
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git log --oneline -1; git status --short; } > $R/info.txt 2>&1
git diff > $R/tree.diff
T0=$SECONDS
( [ -d build-gpu ] || meson setup build-gpu --buildtype=release > $R/build.log 2>&1; ninja -C build-gpu bench/kernels/bench_gemm_sweep >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress )
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
S=build-gpu/bench/kernels/bench_gemm_sweep
A=""; for k in 4097 11009; do for n in 1024 1536 2048 3072; do for m in 1 2 4; do A="$A --shape ${m}x${n}x${k}t"; done; done; done
A="$A --shape 8x3072x4097t --shape 8x3584x11009t --shape 1x1280x6145t --shape 1x2560x6145t --shape 3x1280x3073t --shape 1x3584x2049t"
for i in 1 2; do
  t plan_$i $S $A --reps 20 --json $R/plan_$i.json
  for cs in 1 2 3 4 6 8; do
    t cs${cs}_$i env CARVE_GEMM_SPLITK=$cs $S $A --reps 20 --json $R/cs${cs}_$i.json
  done
done
echo finished >> $R/progress
