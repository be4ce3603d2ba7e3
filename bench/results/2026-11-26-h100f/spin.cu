/*
 * spin.cu — keeps the GPU busy for a while (argument: seconds, default 1)
 * with one spinning kernel on every SM, so that a timed run right after it
 * starts on a GPU that is not idle (ggml_noise.py's "warm" ways).
 */
#include <cstdio>
#include <cuda_runtime.h>
__global__ void spin(long long ns, int *o) { long long t0 = clock64(); while (clock64() - t0 < ns) {} if (threadIdx.x == 0 && blockIdx.x == 0) *o = 1; }
int main(int argc, char **argv) { int *o; cudaMalloc(&o, 4); double s = argc > 1 ? atof(argv[1]) : 1.0;
  spin<<<264, 128>>>((long long)(s * 1.9e9), o); cudaDeviceSynchronize(); return 0; }
