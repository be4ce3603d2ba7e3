#!/usr/bin/env bash
# static-runtime pair bimodality probe
R=/tmp/res4; rm -rf $R; mkdir -p $R/o
export PATH=/usr/local/cuda/bin:$PATH
B=build-gpu
{ date; nvidia-smi -L; which perf setarch; } > $R/info.txt 2>&1
T0=$SECONDS
DROPIN_GPU_BUILD_ONLY=1 tests/dropin/gpu/run.sh $B $R/o > $R/build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s" >> $R/progress
RUN=$B/tools/carve-run; APP=$R/o/bin/app_static
one() { "$@" 2>&1 | grep -m1 'cudaMalloc+cudaFree 4096' | sed -E 's/.*: ([0-9.]+) ns.*/\1/'; }
for i in $(seq 10); do echo "aslr $(one taskset -c 2 $RUN -- $APP bench-small)"; done > $R/aslr.txt
for i in $(seq 10); do echo "noaslr $(one setarch x86_64 -R taskset -c 2 $RUN -- $APP bench-small)"; done > $R/noaslr.txt
echo "step1 $((SECONDS-T0)) s" >> $R/progress
# per process: the address carve handed out, and the stack, with the time
cat > $R/probe.cu <<'EOT'
#include <cuda_runtime.h>
#include <stdio.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
int main(){ void*p; cudaStream_t s; cudaStreamCreateWithFlags(&s,cudaStreamNonBlocking);
 for(int w=0;w<2000;w++){cudaMalloc(&p,4096);cudaFree(p);}
 double best[21]; for(int r=0;r<21;r++){double t0=now(); for(int i=0;i<2000;i++){cudaMalloc(&p,4096);cudaFree(p);} best[r]=(now()-t0)/2000;}
 double m=1e18; for(int r=0;r<21;r++) if(best[r]<m) m=best[r];
 int local; printf("min %.1f ns p=%p stack=%p main=%p\n", m, p, (void*)&local, (void*)&main); return 0; }
EOT
nvcc -O2 -o $R/probe $R/probe.cu >> $R/build.log 2>&1
for i in $(seq 12); do taskset -c 2 $RUN -- $R/probe; done > $R/probe.txt 2>&1
echo "step2 $((SECONDS-T0)) s" >> $R/progress
if command -v perf >/dev/null; then
  for i in 1 2 3 4 5 6; do taskset -c 2 perf stat -e cycles,instructions,L1-dcache-load-misses,branch-misses,machine_clears.memory_ordering,ld_blocks_partial.address_alias -x, -o $R/perf.$i.txt $RUN -- $APP bench-small > $R/perfapp.$i.txt 2>&1; done
fi
echo finished >> $R/progress
