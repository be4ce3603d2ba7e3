#!/usr/bin/env bash
# experiment: the streaming kernel's next step of B loaded while this one computes (aligned N-major), decode sweep against the same tree without it
R=/tmp/res28; rm -rf $R; mkdir -p $R
export PATH=/usr/local/cuda/bin:$PATH
{ date -u; nvidia-smi -L; } > $R/info.txt
T0=$SECONDS
rm -rf /tmp/pipe; mkdir -p /tmp/pipe; git ls-files -z | xargs -0 -I{} cp --parents {} /tmp/pipe/ 2>/dev/null; cp -r .gpu /tmp/pipe/ 2>/dev/null
sed -i 's/#define CARVE_ST_PIPE 0/#define CARVE_ST_PIPE 1/' /tmp/pipe/lib/kernels/gemm_tc_stream.cuh
(meson setup build-gpu --buildtype=release -Dbenchmarks=true > $R/build.log 2>&1 || true; ninja -C build-gpu tests/kernels/test_gemm_tc bench/kernels/bench_gemm_sweep >> $R/build.log 2>&1) &
(cd /tmp/pipe && meson setup build-gpu --buildtype=release -Dbenchmarks=true > $R/build_pipe.log 2>&1 || true; cd /tmp/pipe && ninja -C build-gpu tests/kernels/test_gemm_tc bench/kernels/bench_gemm_sweep >> $R/build_pipe.log 2>&1) &
wait
echo "builds $((SECONDS-T0)) s" >> $R/progress
cuobjdump -res-usage /tmp/pipe/build-gpu/lib/kernels/gemm_tc_sm90a.o 2>/dev/null | grep -A1 stream_gemm | grep -o "REG:[0-9]*\|STACK:[0-9]*\|Function [^ ]*" | paste - - - > $R/regs_pipe.txt
t() { local name=$1; shift; local t0=$SECONDS; stdbuf -oL -eL "$@" > $R/$name.log 2>&1; echo "$name rc $? $((SECONDS-t0)) s" >> $R/progress; }
t tc_quick_pipe env CARVE_TEST_QUICK=1 /tmp/pipe/build-gpu/tests/kernels/test_gemm_tc
t base1 build-gpu/bench/kernels/bench_gemm_sweep --decode --json $R/base1.json
t pipe1 /tmp/pipe/build-gpu/bench/kernels/bench_gemm_sweep --decode --json $R/pipe1.json
t base2 build-gpu/bench/kernels/bench_gemm_sweep --decode --json $R/base2.json
t pipe2 /tmp/pipe/build-gpu/bench/kernels/bench_gemm_sweep --decode --json $R/pipe2.json
echo finished >> $R/progress
