#!/usr/bin/env bash
# pass65: the hot slot's kept answer (pair in virtual-memory mode) against HEAD on the GPU; GEMM probes: K-major odd-row B at small n on stream vs plan, 11008 x 4096 at m = 48-96 on decode vs plan
R=/tmp/res65; rm -rf $R; mkdir -p $R
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git log --oneline -1; git status --short; } > $R/info.txt 2>&1
git diff > $R/tree.diff
T0=$SECONDS
rm -rf /tmp/base; mkdir -p /tmp/base; git ls-files -z | xargs -0 cp --parents -t /tmp/base; (cd /tmp/base && patch -R -p1 < $R/tree.diff > /dev/null)
b() { ( [ -d $1/build-gpu ] || meson setup $1/build-gpu $1 --buildtype=release > $R/build_$2.log 2>&1; ninja -C $1/build-gpu bench/peers/carve_peers bench/kernels/bench_gemm_sweep >> $R/build_$2.log 2>&1; echo "build $2 rc $? $((SECONDS-T0)) s" >> $R/progress ) }
b . new & b /tmp/base base & wait
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
for i in 1 2 3; do
  for tr in base new; do
    d=.; [ $tr = base ] && d=/tmp/base
    for al in carve carve-segments; do
      t pair_${tr}_${al}_$i $d/build-gpu/bench/peers/carve_peers --alloc $al --workload pair --out $R/pair_${tr}_${al}_$i.jsonl
    done
  done
done
for tr in base new; do
  d=.; [ $tr = base ] && d=/tmp/base
  t churn_${tr} $d/build-gpu/bench/peers/carve_peers --alloc carve --workload churn --out $R/churn_${tr}.jsonl
done
S=build-gpu/bench/kernels/bench_gemm_sweep
ODD="--shape 1x1024x4097t --shape 4x1024x4097t --shape 16x1024x4097t --shape 1x2048x4097t --shape 4x2048x4097t --shape 16x2048x4097t --shape 1x3072x4097t --shape 8x3072x4097t --shape 1x1024x8193t --shape 1x2048x2049t --shape 2x4096x4097t"
DEC="--shape 48x11008x4096 --shape 64x11008x4096 --shape 96x11008x4096 --shape 64x14336x4096 --shape 64x12288x4096 --shape 64x8192x4096 --shape 64x28672x8192"
for i in 1 2; do
  t odd_plan_$i $S $ODD --json $R/odd_plan_$i.json
  t odd_stream_$i env CARVE_GEMM_PATH=stream $S $ODD --json $R/odd_stream_$i.json
  t dec_plan_$i $S $DEC --json $R/dec_plan_$i.json
  t dec_decode_$i env CARVE_GEMM_PATH=decode $S $DEC --json $R/dec_decode_$i.json
  t dec_decode128_$i env CARVE_GEMM_PATH=decode CARVE_GEMM_DECODE_COLS=128 $S $DEC --json $R/dec_decode128_$i.json
done
echo finished >> $R/progress
