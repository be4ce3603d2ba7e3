#!/usr/bin/env bash
# pass75 (experiment): the default mode's threads workload (carve_peers --workload threads) with a free
# recording a fence every 64 frees (now), 1024, or never (XF=100000000), T = 1, 2, 8, two runs each, alternating.
R=/tmp/res75; rm -rf $R; mkdir -p $R
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git log --oneline -1; git status --short; } > $R/info.txt 2>&1
T0=$SECONDS
rm -rf /tmp/xf75; mkdir -p /tmp/xf75; tar --exclude='./build*' --exclude=./.git -cf - . | tar -C /tmp/xf75 -xf -
( cd /tmp/xf75 && patch -p1 < .gpu/xf.diff > $R/patch.log 2>&1
  meson setup /tmp/xf75/bx --buildtype=release -Dtests=false > $R/build.log 2>&1
  ninja -C /tmp/xf75/bx bench/peers/carve_peers >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress )
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
for rep in 1 2; do
  for T in 1 2 8; do
    for X in 64 1024 100000000; do
      t th_${T}_${X}_$rep env XF=$X timeout 120 /tmp/xf75/bx/bench/peers/carve_peers --alloc carve --workload threads --threads $T --out $R/th_${X}.jsonl
    done
  done
done
echo finished >> $R/progress
