#!/usr/bin/env bash
# allocator thread scaling on the device's 16 cores (virtual backend, no GPU use): both modes
R=/tmp/res27; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
B=build-gpu
{ date -u; nvidia-smi -L; lscpu | grep -E "Model name|^CPU\(s\)|Thread|Core"; } > $R/info.txt
T0=$SECONDS
(meson setup $B --buildtype=release -Dbenchmarks=true > $R/build.log 2>&1 || true; ninja -C $B bench/bench_alloc >> $R/build.log 2>&1); echo "build rc $? $((SECONDS-T0)) s" >> $R/progress
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t scaling_vmm timeout 200 $B/bench/bench_alloc --vmm --only scaling --threads 16
t scaling_seg timeout 200 $B/bench/bench_alloc --segments --only scaling --threads 16
echo finished >> $R/progress
