"""gpt2_train.py — GPT-2 small (random weights) trained for a few AdamW steps
under one allocator mode; writes losses, step times and peak memory.

The one idea: the data and the weights come from fixed seeds and the
kernels are asked to be deterministic, so the loss curve depends on the
arithmetic only: run_all.py compares the curves of carve, PyTorch's
allocator and expandable segments (they must match), their step times and
their peak reserved over peak allocated memory.
"""

import statistics

import common

a = common.args("GPT-2 training steps under one allocator", steps=(int, 30, "AdamW steps"),
                batch=(int, 8, "sequences per step"), seq=(int, 512, "tokens per sequence"))
torch = common.torch_for(a.mode)
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402

cfg = GPT2Config()
torch.manual_seed(0)
model = GPT2LMHeadModel(cfg).cuda().train()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
gen = torch.Generator().manual_seed(1)
data = [torch.randint(0, cfg.vocab_size, (a.batch, a.seq), generator=gen) for _ in range(a.steps)]

common.reset_peaks(torch, a.mode)
losses, times = [], []
for step in range(a.steps):
    x = data[step].cuda()
    torch.cuda.synchronize()
    t0 = common.now()
    loss = model(input_ids=x, labels=x).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    times.append(common.now() - t0)
    losses.append(loss.item())
peak_alloc, peak_res = common.peaks(torch, a.mode)
warm = times[5:] or times
common.write(a.out, {
    "mode": a.mode, "steps": a.steps, "batch": a.batch, "seq": a.seq, "losses": losses,
    "step_time_median_s": statistics.median(warm), "step_times_s": times,
    "peak_allocated_bytes": peak_alloc, "peak_reserved_bytes": peak_res,
    "reserved_over_allocated": peak_res / peak_alloc if peak_alloc else None,
})
