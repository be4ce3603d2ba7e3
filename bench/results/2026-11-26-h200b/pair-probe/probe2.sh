#!/usr/bin/env bash
R=/tmp/res5; rm -rf $R; mkdir -p $R/o
export PATH=/usr/local/cuda/bin:$PATH
B=build-gpu
[ -x $B/tools/carve-run ] || DROPIN_GPU_BUILD_ONLY=1 tests/dropin/gpu/run.sh $B $R/o > $R/build.log 2>&1
RUN=$B/tools/carve-run
cat > $R/probe.cu <<'EOT'
#include <cuda_runtime.h>
#include <stdio.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
int main(){ void*p; cudaStream_t s; cudaStreamCreateWithFlags(&s,cudaStreamNonBlocking);
 for(int w=0;w<200;w++){cudaMalloc(&p,4096);cudaFree(p);}
 printf("reps");
 for(int r=0;r<40;r++){double t0=now(); for(int i=0;i<2000;i++){cudaMalloc(&p,4096);cudaFree(p);} printf(" %.0f",(now()-t0)/2000);}
 printf("\n"); return 0; }
EOT
nvcc -O2 -o $R/probe $R/probe.cu > $R/build2.log 2>&1
for i in $(seq 8); do taskset -c 2 $RUN --report=$R/rep.$i.json -- $R/probe; done > $R/probe.txt 2>&1
echo finished > $R/progress
