"""arenas_sequential.py — two models one after the other, each in an arena of
its own (carve.torch.arena), with the device's free memory checked after
each: ResNet-50 inference, its arena closed, then GPT-2 training steps in
another; torch.cuda.mem_get_info must come back to the baseline each time.

The one idea: an arena is retired at the end of its block and destroyed by
the free of its last tensor, which gives its segments back to the driver,
so the driver's own count of free memory is the witness. The first use of
a kernel or library loads code and handles onto the device outside any
allocator; a warm-up pass of both models (in throwaway arenas) takes that
out of the measurement.
"""

import gc

import common

a = common.args("per-model arenas, closed in turn", modes=("carve",),
                limit=(str, "24GiB", "cap of each model's arena"),
                tolerance_mib=(int, 4, "how far free memory may end from the baseline"))
torch = common.torch_for("carve")
import carve  # noqa: E402
import carve.torch  # noqa: E402
import torchvision  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402


def resnet50():
    model = torchvision.models.resnet50(weights=None).cuda().eval()
    with torch.no_grad():
        for bs in (1, 16, 64, 8):
            model(torch.randn(bs, 3, 224, 224, device="cuda"))
    torch.cuda.synchronize()


def gpt2():
    model = GPT2LMHeadModel(GPT2Config()).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for _ in range(3):
        x = torch.randint(0, 50257, (4, 256), device="cuda")
        model(input_ids=x, labels=x).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()


def in_arena(name, fn):
    scope = carve.torch.arena(limit=a.limit, name=name)
    with scope as arena:
        fn()
        gc.collect()  # the models' reference cycles, so their tensors die inside the block
        inside = torch.cuda.mem_get_info()[0]
        peak = arena.max_memory_reserved()
    torch.cuda.synchronize()
    return scope, inside, peak


for name, fn in (("warm-resnet50", resnet50), ("warm-gpt2", gpt2)):
    in_arena(name, fn)

baseline = torch.cuda.mem_get_info()[0]
default_reserved = carve.memory_reserved(0)
steps = []
for name, fn in (("resnet50", resnet50), ("gpt2", gpt2)):
    scope, inside, peak = in_arena(name, fn)
    after = torch.cuda.mem_get_info()[0]
    steps.append({
        "model": name, "closed_at_exit": scope.closed_at_exit, "arena_peak_reserved_bytes": peak,
        "live_at_exit": scope.last_stats["num_live"], "free_inside_bytes": inside, "free_after_bytes": after,
        "baseline_free_bytes": baseline, "delta_bytes": baseline - after,
        "ok": bool(scope.closed_at_exit) and abs(baseline - after) <= a.tolerance_mib << 20 and inside < baseline,
    })
common.write(a.out, {"mode": "carve", "limit": a.limit, "tolerance_mib": a.tolerance_mib, "steps": steps,
                     "default_arena_reserved_bytes": default_reserved,
                     "default_arena_reserved_after_bytes": carve.memory_reserved(0)})
