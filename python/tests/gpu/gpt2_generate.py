"""gpt2_generate.py — GPT-2 small (random weights) generating greedily with a
growing KV cache at several batch sizes, under one allocator mode; writes
the tokens' digest, times and peak memory per batch size.

The one idea: greedy decoding of a fixed model from fixed prompts is a pure
function of the arithmetic, so the tokens must be identical whatever
allocator serves the KV cache that grows by one position per step; what
may differ is time and the memory the allocator holds for it.
"""

import hashlib

import common

a = common.args("GPT-2 generation under one allocator", batches=(str, "1,4,16", "batch sizes"),
                new_tokens=(int, 128, "tokens generated per sequence"), prompt=(int, 32, "prompt tokens"))
torch = common.torch_for(a.mode)
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402

cfg = GPT2Config()
torch.manual_seed(0)
model = GPT2LMHeadModel(cfg).cuda().eval()
gen = torch.Generator().manual_seed(2)
runs = []
for bs in [int(b) for b in a.batches.split(",")]:
    prompt = torch.randint(0, cfg.vocab_size, (bs, a.prompt), generator=gen).cuda()
    common.reset_peaks(torch, a.mode)
    t0 = common.now()
    with torch.no_grad():
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=a.new_tokens,
                             min_new_tokens=a.new_tokens, do_sample=False, use_cache=True, pad_token_id=0)
    torch.cuda.synchronize()
    seconds = common.now() - t0
    peak_alloc, peak_res = common.peaks(torch, a.mode)
    tokens = out.cpu().tolist()
    runs.append({
        "batch": bs, "seconds": seconds, "tokens_per_s": bs * a.new_tokens / seconds,
        "digest": hashlib.sha256(repr(tokens).encode()).hexdigest(), "tokens": tokens,
        "peak_allocated_bytes": peak_alloc, "peak_reserved_bytes": peak_res,
    })
    del out, prompt
common.write(a.out, {"mode": a.mode, "new_tokens": a.new_tokens, "runs": runs})
