#!/usr/bin/env bash
# pass79: the committed tree (tile-width fixed cost 16): test_gemm_tc full, as far as the device time allows
R=/tmp/res79; rm -rf $R; mkdir -p $R
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; git log --oneline -1; git status --short; } > $R/info.txt 2>&1
git diff > $R/tree.diff
T0=$SECONDS
( [ -d build-gpu ] || meson setup build-gpu --buildtype=release -Dbenchmarks=false > $R/build.log 2>&1; ninja -C build-gpu tests/kernels/test_gemm_tc >> $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress )
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t tc_full build-gpu/tests/kernels/test_gemm_tc
echo finished >> $R/progress
