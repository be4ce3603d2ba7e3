#!/usr/bin/env bash
# the shared ring helpers: mid-size sweep against HEAD, four alternating runs each, and 1024^3 / 512 x 4096 x 4096 at 100 reps
R=/tmp/res57; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
git add -N lib/kernels/gemm_tc_decode.cuh
{ date -u; nvidia-smi -L; git log --oneline -1; } > $R/info.txt 2>&1
git diff -- lib tests bench/kernels docs README.md > $R/tree.diff
rm -rf /tmp/base; mkdir /tmp/base; git ls-files -z | xargs -0 cp --parents -t /tmp/base 2>/dev/null
(cd /tmp/base && patch -R -p1 < $R/tree.diff > /dev/null) && echo "base: HEAD" >> $R/info.txt
T0=$SECONDS
( [ -d build-gpu ] || meson setup build-gpu --buildtype=release > $R/build.log 2>&1; ninja -C build-gpu bench/kernels/bench_gemm_sweep >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress ) &
( cd /tmp/base && meson setup build-base --buildtype=release > $R/build_base.log 2>&1; ninja -C build-base bench/kernels/bench_gemm_sweep >> $R/build_base.log 2>&1; echo "build_base rc $? $((SECONDS-T0)) s" >> $R/progress ) &
wait
N=build-gpu; O=/tmp/base/build-base
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
for i in 1 2 3 4; do
  t mid_o$i $O/bench/kernels/bench_gemm_sweep --mid --json $R/mid_o$i.json
  t mid_n$i $N/bench/kernels/bench_gemm_sweep --mid --json $R/mid_n$i.json
  t sm_o$i $O/bench/kernels/bench_gemm_sweep --shape 1024x1024x1024 --shape 512x4096x4096 --reps 100 --json $R/sm_o$i.json
  t sm_n$i $N/bench/kernels/bench_gemm_sweep --shape 1024x1024x1024 --shape 512x4096x4096 --reps 100 --json $R/sm_n$i.json
done
echo finished >> $R/progress
