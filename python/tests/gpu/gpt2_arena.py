"""gpt2_arena.py — GPT-2 small trained inside carve.torch.arena: the arena's
peak covers forward and backward (backward runs on autograd's threads,
which the block routes to the arena too), checked against
torch.cuda.max_memory_allocated for the same step under PyTorch's
allocator (--mode default).

The one idea: the same step (same seed, batch and sequence) is measured in
two processes: under carve, the arena's own peak and the device's default
arena's peak (what escaped the arena) during one step, with backward routed
and, for contrast, not; under PyTorch's allocator, its peak allocated bytes
for the step. run_all.py compares them.
"""

import common

a = common.args("GPT-2 steps inside carve.torch.arena", modes=("carve", "default"),
                batch=(int, 8, "sequences per step"), seq=(int, 512, "tokens per sequence"))
torch = common.torch_for(a.mode)
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402


def step(model, opt, x):
    loss = model(input_ids=x, labels=x).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()


def train(measure):
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    gen = torch.Generator().manual_seed(1)
    x = torch.randint(0, 50257, (a.batch, a.seq), generator=gen).cuda()
    step(model, opt, x)  # the optimizer's state exists from here on
    torch.cuda.synchronize()
    with measure() as m:
        loss = step(model, opt, x)
        torch.cuda.synchronize()
    del model, opt, x
    return loss, m


result = {"mode": a.mode, "batch": a.batch, "seq": a.seq}
if a.mode == "default":
    class Measure:
        def __enter__(self):
            torch.cuda.reset_peak_memory_stats()
            return self

        def __exit__(self, *exc):
            self.peak = torch.cuda.max_memory_allocated()

    loss, m = train(Measure)
    result.update(loss=loss, step_peak_allocated_bytes=m.peak)
else:
    import carve
    import carve.torch

    for backward in (True, False):
        scope = carve.torch.arena(limit="60GiB", name="gpt2", backward=backward)
        with scope as ar:
            class Measure:
                def __enter__(self):
                    ar.reset_peak_memory_stats()
                    carve.reset_peak_memory_stats(0)
                    self.default_before = carve.memory_allocated(0)
                    return self

                def __exit__(self, *exc):
                    self.peak = ar.max_memory_allocated()
                    self.default_peak_growth = carve.max_memory_allocated(0) - self.default_before

            loss, m = train(Measure)
            import gc
            gc.collect()
        key = "routed" if backward else "unrouted"
        result[key] = {"loss": loss, "arena_step_peak_allocated_bytes": m.peak,
                       "default_arena_step_peak_growth_bytes": m.default_peak_growth,
                       "routes_backward": scope.routes_backward, "closed_at_exit": scope.closed_at_exit}
common.write(a.out, result)
