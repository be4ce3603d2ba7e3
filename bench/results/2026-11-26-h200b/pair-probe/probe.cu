/*
 * probe.cu — cudaMalloc+cudaFree of 4 KiB through the static runtime, the
 * best of 21 repetitions of 2000 pairs, with the address carve handed out,
 * the stack's and main's: run under carve-run by probe1.sh, to see whether
 * the pair's two speeds follow the process's memory layout.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
int main(){ void*p; cudaStream_t s; cudaStreamCreateWithFlags(&s,cudaStreamNonBlocking);
 for(int w=0;w<2000;w++){cudaMalloc(&p,4096);cudaFree(p);}
 double best[21]; for(int r=0;r<21;r++){double t0=now(); for(int i=0;i<2000;i++){cudaMalloc(&p,4096);cudaFree(p);} best[r]=(now()-t0)/2000;}
 double m=1e18; for(int r=0;r<21;r++) if(best[r]<m) m=best[r];
 int local; printf("min %.1f ns p=%p stack=%p main=%p\n", m, p, (void*)&local, (void*)&main); return 0; }
