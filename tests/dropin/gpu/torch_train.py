#!/usr/bin/env python3
"""torch_train.py — a PyTorch model trained for a few steps, or served, for
the drop-in tests and benchmark. Knows nothing of carve: run it plain, with
PYTORCH_NO_CUDA_MEMORY_CACHING=1, and under carve-run, and compare.

GPT-2 small (transformers, built from GPT2Config() with random weights, since
nothing can be downloaded) or ResNet-50 (torchvision, weights=None) trained
with AdamW; or ResNet-50 inference (resnet50-infer, eval mode, no gradients)
with a batch size that changes every step (--batches, taken in turn), as a
server sees. Fixed seed and deterministic kernels, so the losses (training)
and the outputs (inference: a SHA-1 of each step's logits) of two runs must
be equal bit for bit. Prints one JSON object: losses, outputs, median step
time (steps after the first 3), and PyTorch's own memory peaks (0 when its
caching allocator is off).

Usage: torch_train.py [--model gpt2|resnet50|resnet50-infer] [--steps N] [--batch B] [--seq L]
                      [--batches B1,B2,...]
"""
import hashlib
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
    ap.add_argument("--model", choices=["gpt2", "resnet50", "resnet50-infer"], default="gpt2")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batches", default="8,64,1,32,16,48,4,24", help="inference: batch sizes, taken in turn")
    ap.add_argument("--settle", type=float, default=0.0,
                    help="seconds to hold everything still after the report (for a watch's last readings)")
    a = ap.parse_args()
    infer = a.model == "resnet50-infer"
    batches = [int(b) for b in a.batches.split(",")]
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
        sizes = [batches[i % len(batches)] if infer else a.batch for i in range(a.steps)]
        data = [(torch.randn(b, 3, 224, 224, generator=g), torch.randint(0, 1000, (b,), generator=g)) for b in sizes]
    losses, outputs, times = [], [], []
    if infer:
        model.eval()
        with torch.no_grad():
            for step in range(a.steps):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                out = model(data[step][0].to(dev))
                outputs.append(hashlib.sha1(out.float().cpu().numpy().tobytes()).hexdigest())  # synchronizes
                times.append(time.perf_counter() - t0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step in range(0 if infer else a.steps):
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
        "model": a.model, "steps": a.steps, "batch": a.batch, "batches": batches if infer else [a.batch],
        "losses": losses, "outputs": outputs,
        "step_ms_median": 1e3 * statistics.median(warm), "step_ms_all": [1e3 * t for t in times],
        "torch_max_memory_reserved": torch.cuda.max_memory_reserved(),
        "torch_max_memory_allocated": torch.cuda.max_memory_allocated(),
        "no_caching": os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING", ""),
    }), flush=True)
    if a.settle > 0:  # every tensor still alive, nothing allocated or freed
        torch.cuda.synchronize()
        time.sleep(a.settle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
