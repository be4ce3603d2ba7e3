// PDL transitivity probe: K1 (ordinary launch, triggers its dependents at once, then spins and writes x=1),
// K2 (launched with programmatic stream serialization; never waits), K3 (launched with the attribute;
// waits with griddepcontrol.wait, then reads x). Does K3's wait cover K1?
#include <cstdio>
#include <cuda_runtime.h>
__global__ void k1(volatile int *x, long long spin, int trigger) {
  if (trigger) asm volatile("griddepcontrol.launch_dependents;");
  long long t0 = clock64();
  while (clock64() - t0 < spin) {}
  *x = 1; __threadfence();
}
__global__ void k2(volatile int *y, int trigger, int wait) {
  if (trigger) asm volatile("griddepcontrol.launch_dependents;");
  if (wait) asm volatile("griddepcontrol.wait;" ::: "memory");
  *y = 1;
}
__global__ void k3(volatile int *x, int *out, int wait) {
  if (wait) asm volatile("griddepcontrol.wait;" ::: "memory");
  *out = *x;
}
static cudaError_t launch(void (*f)(), void **args, int attr, cudaStream_t s) {
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3(1); c.blockDim = dim3(1); c.stream = s;
  cudaLaunchAttribute a[1];
  a[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  a[0].val.programmaticStreamSerializationAllowed = 1;
  c.attrs = a; c.numAttrs = attr ? 1 : 0;
  return cudaLaunchKernelExC(&c, (const void *)f, args);
}
int main() {
  int *x, *y, *out; cudaMalloc(&x, 4); cudaMalloc(&y, 4); cudaMalloc(&out, 4);
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  long long spin = 100LL * 1000 * 1000; // ~50-60 ms
  struct V { const char *name; int k1trig, k2attr, k2trig, k2wait, k3attr, k3wait; } v[] = {
    {"control: K2 ordinary, K3 attr+wait", 1, 0, 1, 0, 1, 1},
    {"K2 attr no-wait (triggers), K3 attr+wait", 1, 1, 1, 0, 1, 1},
    {"K2 attr no-wait (no trigger), K3 attr+wait", 1, 1, 0, 0, 1, 1},
    {"K2 attr+wait, K3 attr+wait", 1, 1, 1, 1, 1, 1},
    {"K2 attr no-wait, K3 ordinary", 1, 1, 1, 0, 0, 0},
    {"overlap check: K2 ordinary, K3 attr NO wait", 1, 0, 1, 0, 1, 0},
    {"overlap check: K2 attr no-wait, K3 attr NO wait", 1, 1, 1, 0, 1, 0},
  };
  for (auto &c : v) {
    int got[5];
    for (int r = 0; r < 5; r++) {
      cudaMemset(x, 0, 4); cudaMemset(y, 0, 4); cudaMemset(out, 0xff, 4); cudaDeviceSynchronize();
      volatile int *xv = x, *yv = y;
      int t1 = c.k1trig, t2 = c.k2trig, w2 = c.k2wait, w3 = c.k3wait;
      void *a1[] = {&xv, &spin, &t1}; void *a2[] = {&yv, &t2, &w2}; void *a3[] = {&xv, &out, &w3};
      cudaError_t e1 = launch((void (*)())k1, a1, 0, s);
      cudaError_t e2 = launch((void (*)())k2, a2, c.k2attr, s);
      cudaError_t e3 = launch((void (*)())k3, a3, c.k3attr, s);
      cudaError_t es = cudaStreamSynchronize(s);
      if (e1 || e2 || e3 || es) { printf("error %d %d %d %d\n", e1, e2, e3, es); return 1; }
      cudaMemcpy(&got[r], out, 4, cudaMemcpyDeviceToHost);
    }
    printf("%-52s K3 read x = %d %d %d %d %d  (1: K1 was done)\n", c.name, got[0], got[1], got[2], got[3], got[4]);
  }
  return 0;
}
