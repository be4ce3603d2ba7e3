/*
 * carve_run.h — what a program can ask of carve-run from inside its own
 * process: a measurement switch that sends the program's new device
 * allocations to the CUDA driver, as if carve-run were not there, and back
 * to carve.
 *
 * The one idea: two processes of the same program can differ in speed by
 * more than the effect one wants to see (ggml's GPT-2 programs: 10-17% from
 * process to process on an H100), so carve-run's cost is measured inside ONE
 * process, alternating many rounds with carve serving and not. Only the
 * allocations change hands; everything else stays as it is, in both arms.
 *
 * carve_run_serve exists only in a process that runs under carve-run (or
 * with its interposer, libcarve_preload.so, preloaded by hand); libcarve does
 * not define it. Find it at run time and go on without it elsewhere:
 *
 *     carve_run_serve_fn serve;
 *     void *sym = dlsym(RTLD_DEFAULT, CARVE_RUN_SERVE_SYMBOL);
 *     memcpy(&serve, &sym, sizeof(sym));   (NULL: not under carve-run)
 *
 * Linking to it directly would fail in any other process.
 */
#ifndef CARVE_RUN_H
#define CARVE_RUN_H

#ifdef __cplusplus
extern "C" {
#endif

#define CARVE_RUN_SERVE_SYMBOL "carve_run_serve"

/* on != 0: carve serves the process's new allocations again (how every
 * carve-run process starts). on == 0: from the next call on, every new
 * allocation of the program (cuMemAlloc, cuMemAllocAsync and their forms,
 * and the shared runtime's cudaMalloc and cudaMallocAsync, which then go
 * through the real runtime) is the driver's, counted against --limit as any
 * allocation carve passes to the driver is, and --fail-every / --fail-at
 * still number and fail them. Neither state changes what exists: a buffer
 * stays its owner's, and its free goes to its owner whatever the switch says
 * (carve's buffers back to carve, the driver's to the driver, stream-ordered
 * or not, from any thread); carve keeps the memory it holds cached, which
 * cuMemGetInfo still counts as the program's, and gives it back to the
 * driver when an allocation made while off finds the driver out of memory.
 * Calls already under way when the switch turns may go either way.
 * Returns 1 when carve served new allocations before the call, 0 when they
 * went to the driver, and -1, changing nothing, where carve serves nothing
 * in this process (a child forked by a process that had used CUDA).
 * Thread-safe; calls no driver function and does not synchronize the
 * device. */
int carve_run_serve(int on);
typedef int (*carve_run_serve_fn)(int on);

#ifdef __cplusplus
}
#endif

#endif
