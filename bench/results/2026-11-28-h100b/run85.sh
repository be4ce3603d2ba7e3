#!/usr/bin/env bash
# pass85: test_pdl_order after its graph steps became two helpers (same cases), three runs.
R=/tmp/res85; rm -rf $R; mkdir -p $R
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv; git log --oneline -1; git status --short; } > $R/info.txt 2>&1
git diff > $R/tree.diff
T0=$SECONDS
( [ -d build-gpu ] || meson setup build-gpu --buildtype=release > $R/setup.log 2>&1; ninja -C build-gpu tests/kernels/test_pdl_order > $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress )
for r in 1 2 3; do build-gpu/tests/kernels/test_pdl_order > $R/pdl_$r.log 2>&1; echo "pdl_$r rc $?" >> $R/progress; done
echo finished >> $R/progress
