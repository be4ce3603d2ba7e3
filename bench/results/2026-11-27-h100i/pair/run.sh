#!/usr/bin/env bash
# pass66: plan probes (tree = HEAD + the hot-slot change; GEMM untouched): (A) B K-major with rows off 16 bytes, n 1024-3584, m 1-16, streaming kernel forced vs the plan; (B) 8704-16384 columns at m 33-96 (cluster 1), decode kernel forced vs the plan; pairs again, pinned, 5 interleaved runs
R=/tmp/res66; rm -rf $R; mkdir -p $R
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git log --oneline -1; git status --short; } > $R/info.txt 2>&1
git diff > $R/tree.diff
T0=$SECONDS
rm -rf /tmp/base; mkdir -p /tmp/base; git ls-files -z | xargs -0 cp --parents -t /tmp/base; (cd /tmp/base && patch -R -p1 < $R/tree.diff > /dev/null)
b() { ( [ -d $1/build-gpu ] || meson setup $1/build-gpu $1 --buildtype=release > $R/build_$2.log 2>&1; ninja -C $1/build-gpu bench/peers/carve_peers bench/kernels/bench_gemm_sweep >> $R/build_$2.log 2>&1; echo "build $2 rc $? $((SECONDS-T0)) s" >> $R/progress ) }
b . new & b /tmp/base base & wait
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
S=build-gpu/bench/kernels/bench_gemm_sweep
A=""; for k in 2049 4097 8193 11009; do for n in 1024 1536 2048 3072 3584; do for m in 1 2 4 8 12 16; do A="$A --shape ${m}x${n}x${k}t"; done; done; done
B=""; for k in 4096 8192; do for n in 8704 9216 10240 11008 12288 13312 14336 16384; do for m in 33 48 64 96; do B="$B --shape ${m}x${n}x${k}"; done; done; done
t A_plan $S $A --reps 20 --json $R/A_plan.json
t A_stream env CARVE_GEMM_PATH=stream $S $A --reps 20 --json $R/A_stream.json
t B_plan $S $B --reps 20 --json $R/B_plan.json
t B_decode env CARVE_GEMM_PATH=decode $S $B --reps 20 --json $R/B_decode.json
for i in 1 2 3 4 5; do
  for tr in base new; do
    d=.; [ $tr = base ] && d=/tmp/base
    for al in carve carve-segments; do
      t pair_${tr}_${al}_$i taskset -c 3 $d/build-gpu/bench/peers/carve_peers --alloc $al --workload pair --out $R/pair_${tr}_${al}_$i.jsonl
    done
    t churn_${tr}_$i taskset -c 3 $d/build-gpu/bench/peers/carve_peers --alloc carve --workload churn --out $R/churn_${tr}_$i.jsonl
  done
done
echo finished >> $R/progress
