#!/usr/bin/env python3
"""torch_train.py — a PyTorch model trained for a few steps, for the drop-in
tests and benchmark. Knows nothing of carve: run it plain, with
PYTORCH_NO_CUDA_MEMORY_CACHING=1, and under carve-run, and compare.

GPT-2 small (transformers, built from GPT2Config() with random weights, since
nothing can be downloaded) or ResNet-50 (torchvision, weights=None), AdamW,
fixed seed and deterministic kernels, so the losses of two runs must be equal
bit for bit. Prints one JSON object: losses, median step time, and PyTorch's
own memory peaks (0 when its caching allocator is off).

Usage: torch_train.py [--model gpt2|resnet50] [--steps N] [--batch B] [--seq L]
"""
import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
import torch  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=["gpt2", "resnet50"], default="gpt2")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    if a.model == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        model = GPT2LMHeadModel(GPT2Config()).to(dev)
        g = torch.Generator().manual_seed(1)
        data = [torch.randint(0, 50257, (a.batch, a.seq), generator=g) for _ in range(a.steps)]
    else:
        import torchvision
        model = torchvision.models.resnet50(weights=None).to(dev)
        g = torch.Generator().manual_seed(1)
        data = [(torch.randn(a.batch, 3, 224, 224, generator=g), torch.randint(0, 1000, (a.batch,), generator=g))
                for _ in range(a.steps)]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    losses, times = [], []
    for step in range(a.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        if a.model == "gpt2":
            x = data[step].to(dev)
            loss = model(x, labels=x).loss
        else:
            x, y = data[step][0].to(dev), data[step][1].to(dev)
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())  # synchronizes
        times.append(time.perf_counter() - t0)
    warm = times[3:] if len(times) > 5 else times
    print(json.dumps({
        "model": a.model, "steps": a.steps, "batch": a.batch, "losses": losses,
        "step_ms_median": 1e3 * statistics.median(warm), "step_ms_all": [1e3 * t for t in times],
        "torch_max_memory_reserved": torch.cuda.max_memory_reserved(),
        "torch_max_memory_allocated": torch.cuda.max_memory_allocated(),
        "no_caching": os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING", ""),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
