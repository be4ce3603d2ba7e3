// PDL probe 2: a kernel launched with programmatic stream serialization that waits (griddepcontrol.wait)
// right after work that is not a kernel, or after work of another stream. Does it see that work done?
#include <cstdio>
#include <cuda_runtime.h>
__global__ void spin_write(volatile int *x, long long spin, int trigger) {
  if (trigger) asm volatile("griddepcontrol.launch_dependents;");
  long long t0 = clock64();
  while (clock64() - t0 < spin) {}
  *x = 1; __threadfence_system();
}
__global__ void reader(volatile int *x, int *out) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  *out = *x;
}
__global__ void nop_kernel(int *y) { asm volatile("griddepcontrol.launch_dependents;"); if (!y) *y = 0; }
static void host_nop(void *) {}
static cudaError_t launch_reader(volatile int *x, int *out, cudaStream_t s, int attr) {
  cudaLaunchConfig_t c = {}; c.gridDim = dim3(1); c.blockDim = dim3(1); c.stream = s;
  cudaLaunchAttribute a[1]; a[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  a[0].val.programmaticStreamSerializationAllowed = 1; c.attrs = a; c.numAttrs = attr;
  return cudaLaunchKernelEx(&c, reader, x, out);
}
static cudaError_t launch_nop_pdl(int *y, cudaStream_t s) {
  cudaLaunchConfig_t c = {}; c.gridDim = dim3(1); c.blockDim = dim3(1); c.stream = s;
  cudaLaunchAttribute a[1]; a[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  a[0].val.programmaticStreamSerializationAllowed = 1; c.attrs = a; c.numAttrs = 1;
  return cudaLaunchKernelEx(&c, nop_kernel, y);
}
int main() {
  int *x, *y, *out; cudaMalloc(&x, 4); cudaMalloc(&y, 4); cudaMalloc(&out, 4);
  cudaStream_t s, s2, sb; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
  cudaStreamCreate(&sb); /* blocking: ordered after the legacy stream */
  cudaEvent_t e; cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  long long spin = 100LL * 1000 * 1000;
  const char *names[] = {"memcpy D2D after the writer, reader reads the copy",
                         "memset of another word after the writer",
                         "writer on stream 2, event wait, reader",
                         "writer, host function, reader",
                         "writer on the legacy stream, reader on a blocking stream",
                         "graph: writer on a forked stream, joined, reader (captured)",
                         "writer (triggers), PDL nop that never waits, memcpy, reader reads the copy",
                         "control: reader without the attribute after writer on stream 2 with no wait (expect 0)"};
  int fails = 0;
  for (int v = 0; v < 8; v++) {
    int got[3];
    for (int r = 0; r < 3; r++) {
      cudaMemset(x, 0, 4); cudaMemset(y, 0, 4); cudaMemset(out, 0xff, 4); cudaDeviceSynchronize();
      volatile int *xv = x; int *src = (int *)x;
      cudaError_t err = cudaSuccess;
      switch (v) {
      case 0: spin_write<<<1, 1, 0, s>>>(xv, spin, 1); cudaMemcpyAsync(y, x, 4, cudaMemcpyDeviceToDevice, s); err = launch_reader(y, out, s, 1); break;
      case 1: spin_write<<<1, 1, 0, s>>>(xv, spin, 1); cudaMemsetAsync(y, 0, 4, s); err = launch_reader(xv, out, s, 1); break;
      case 2: spin_write<<<1, 1, 0, s2>>>(xv, spin, 1); cudaEventRecord(e, s2); cudaStreamWaitEvent(s, e, 0); err = launch_reader(xv, out, s, 1); break;
      case 3: spin_write<<<1, 1, 0, s>>>(xv, spin, 1); cudaLaunchHostFunc(s, host_nop, nullptr); err = launch_reader(xv, out, s, 1); break;
      case 4: spin_write<<<1, 1, 0, 0>>>(xv, spin, 1); err = launch_reader(xv, out, sb, 1); break;
      case 5: {
        cudaGraph_t g; cudaGraphExec_t ge;
        cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
        cudaEventRecord(e, s); cudaStreamWaitEvent(s2, e, 0);
        spin_write<<<1, 1, 0, s2>>>(xv, spin, 1);
        cudaEventRecord(e, s2); cudaStreamWaitEvent(s, e, 0);
        err = launch_reader(xv, out, s, 1);
        cudaStreamEndCapture(s, &g);
        cudaGraphInstantiate(&ge, g, 0); cudaGraphLaunch(ge, s); cudaStreamSynchronize(s);
        cudaGraphExecDestroy(ge); cudaGraphDestroy(g);
        break; }
      case 6: spin_write<<<1, 1, 0, s>>>(xv, spin, 1); launch_nop_pdl(y, s); cudaMemcpyAsync(y, x, 4, cudaMemcpyDeviceToDevice, s); err = launch_reader(y, out, s, 1); break;
      case 7: spin_write<<<1, 1, 0, s2>>>(xv, spin, 1); err = launch_reader(xv, out, s, 0); break;
      }
      (void)src;
      cudaError_t es = cudaDeviceSynchronize();
      if (err || es) { printf("error %s / %s\n", cudaGetErrorString(err), cudaGetErrorString(es)); return 1; }
      cudaMemcpy(&got[r], out, 4, cudaMemcpyDeviceToHost);
    }
    int ok = v == 7 ? got[0] == 0 : (got[0] == 1 && got[1] == 1 && got[2] == 1);
    fails += !ok;
    printf("%-88s reads %d %d %d  %s\n", names[v], got[0], got[1], got[2], ok ? "ok" : "HAZARD");
  }
  printf("%d hazards\n", fails);
  return 0;
}
