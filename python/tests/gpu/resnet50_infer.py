"""resnet50_infer.py — ResNet-50 (torchvision, random weights) inference with
a batch size that changes from call to call, under one allocator mode;
writes per-batch output sums, the total time and peak memory.

The one idea: varying batch sizes make an allocator hold buffers of many
sizes at once and reuse them in a shuffled order, which is where caching
allocators fragment; the outputs must not change, so run_all.py compares
them between modes and reports each mode's peak reserved over allocated.
"""

import common

a = common.args("ResNet-50 inference under one allocator", batches=(str, "1,32,8,64,3,48,16,128,5,96,24,64,1",
                                                                     "batch sizes, in order"))
torch = common.torch_for(a.mode)
import torchvision  # noqa: E402

torch.manual_seed(0)
model = torchvision.models.resnet50(weights=None).cuda().eval()
gen = torch.Generator().manual_seed(3)
batches = [int(b) for b in a.batches.split(",")]
inputs = [torch.randn(bs, 3, 224, 224, generator=gen) for bs in batches]
common.reset_peaks(torch, a.mode)


def one_pass():
    """Every batch once; (output sums, seconds)."""
    out = []
    t0 = common.now()
    with torch.no_grad():
        for x in inputs:
            y = model(x.cuda())
            out.append(float(y.double().sum()))
    torch.cuda.synchronize()
    return out, common.now() - t0


# The first pass finds every buffer size cold (the allocator reserves memory,
# cuDNN picks kernels); a server runs warm, so the warm passes are the speed
# that counts: the median of seven.
sums, cold_seconds = one_pass()
warm = [one_pass() for _ in range(7)]
seconds = sorted(w[1] for w in warm)[3]
assert all(w[0] == sums for w in warm), "outputs changed between passes"
peak_alloc, peak_res = common.peaks(torch, a.mode)
common.write(a.out, {
    "mode": a.mode, "batches": batches, "sums": sums, "seconds": seconds, "cold_seconds": cold_seconds,
    "images_per_s": sum(batches) / seconds, "cold_images_per_s": sum(batches) / cold_seconds,
    "peak_allocated_bytes": peak_alloc,
    "peak_reserved_bytes": peak_res, "reserved_over_allocated": peak_res / peak_alloc if peak_alloc else None,
})
