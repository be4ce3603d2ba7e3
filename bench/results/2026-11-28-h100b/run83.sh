#!/usr/bin/env bash
# pass83: the committed tree: the kernels GPU suite (meson test --suite kernels: test_gemm, test_reduce, test_gemm_tc,
# test_pdl_order), test_pdl_order twice more on its own.
R=/tmp/res83; rm -rf $R; mkdir -p $R
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv; git log --oneline -1; git status --short; } > $R/info.txt 2>&1
git diff > $R/tree.diff
T0=$SECONDS
( [ -d build-gpu ] || meson setup build-gpu --buildtype=release > $R/setup.log 2>&1; ninja -C build-gpu tests/kernels/test_gemm tests/kernels/test_reduce tests/kernels/test_gemm_tc tests/kernels/test_pdl_order > $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress )
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t suite meson test -C build-gpu --no-rebuild --suite kernels --print-errorlogs
cp build-gpu/meson-logs/testlog.txt $R/testlog.txt 2>/dev/null
t pdl_2 build-gpu/tests/kernels/test_pdl_order
t pdl_3 build-gpu/tests/kernels/test_pdl_order
echo finished >> $R/progress
