#!/usr/bin/env bash
# pass74: trim_others polls other pools' fences before a device sync (lib/engine/vmm.c):
# (1) the GPU suite and memcheck/racecheck/synccheck of gpu_vmm and gpu_cross_stream on the new tree;
# (2) multi-stream traces replayed on the GPU (carve_peers --workload trace), base (session start) and new, alternating;
# (3) whether nsys is here; if so the CUDA API time of carve_peers threads T=1 and T=2 (default mode).
R=/tmp/res74; rm -rf $R; mkdir -p $R
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git log --oneline -1; git status --short; } > $R/info.txt 2>&1
git diff > $R/tree.diff
T0=$SECONDS
# base: this tree without .gpu/trim.diff
rm -rf /tmp/base74; mkdir -p /tmp/base74; tar --exclude='./build*' --exclude=./.git -cf - . | tar -C /tmp/base74 -xf -
( cd /tmp/base74 && patch -R -p1 < .gpu/trim.diff > $R/base_patch.log 2>&1
  meson setup /tmp/base74/bx --buildtype=release -Dtests=false > $R/base_build.log 2>&1
  ninja -C /tmp/base74/bx bench/peers/carve_peers >> $R/base_build.log 2>&1; echo "base build rc $? $((SECONDS-T0)) s" >> $R/progress ) &
( [ -d build-gpu ] || meson setup build-gpu --buildtype=release > $R/build.log 2>&1; ninja -C build-gpu >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress )
wait
grep -n "trim_others" /tmp/base74/lib/engine/vmm.c | head -3 > $R/base_check.txt; grep -c "fences already" /tmp/base74/lib/engine/vmm.c >> $R/base_check.txt
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t gpu_suite meson test -C build-gpu --suite gpu --no-rebuild --num-processes 1 -t 3
for tool in memcheck racecheck synccheck; do
  for x in gpu_vmm gpu_cross_stream; do
    t san_${tool}_$x compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 build-gpu/tests/gpu/$x
  done
done
mkdir -p $R/traces
for rep in 1 2; do
  for tr in bench/traces/synthetic/cnn_serving.csv.gz bench/traces/synthetic/decoder_serving.csv.gz .gpu/tr/mixed.csv.gz .gpu/tr/dec_77.csv.gz .gpu/tr/cnn_77.csv.gz; do
    n=$(basename $tr .csv.gz)
    t tr_base_${n}_$rep timeout 200 /tmp/base74/bx/bench/peers/carve_peers --alloc carve --workload trace --trace $tr --out $R/traces/base_$rep.jsonl
    t tr_new_${n}_$rep timeout 200 build-gpu/bench/peers/carve_peers --alloc carve --workload trace --trace $tr --out $R/traces/new_$rep.jsonl
  done
done
if command -v nsys >/dev/null; then
  for T in 1 2; do
    t nsys_$T nsys profile -t cuda -o $R/nsys_$T -f true build-gpu/bench/peers/carve_peers --alloc carve --workload threads --threads $T --out $R/nsys_threads_$T.jsonl
    nsys stats --report cuda_api_sum --format csv $R/nsys_$T.nsys-rep > $R/nsys_api_$T.csv 2>&1
    rm -f $R/nsys_$T.nsys-rep $R/nsys_$T.sqlite
  done
else echo "no nsys; ncu: $(command -v ncu)" > $R/nsys.txt; ls /usr/local/cuda/bin >> $R/nsys.txt; fi
echo finished >> $R/progress
