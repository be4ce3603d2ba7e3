#!/usr/bin/env python3
"""torch_faults.py — a PyTorch training loop that survives allocation
failures, for the drop-in tests: under carve-run --fail-every N with
PyTorch's cudaMallocAsync backend (PYTORCH_CUDA_ALLOC_CONF=
backend:cudaMallocAsync: every tensor is one cudaMallocAsync, and a failed
one is torch.cuda.OutOfMemoryError at once), each failure is caught, what
the step held is freed, and the step runs again; the losses must equal
those of a run without failures. Knows nothing of carve.

The one idea: a step changes the model only after its forward and backward
passes are done, and with in-place updates that allocate nothing (SGD with
momentum into buffers made before the loop), so a failure anywhere before
leaves the model as it was and the step, run again on the same data,
computes the same numbers (fixed seeds, deterministic kernels, no dropout).

Prints one JSON object: losses, ooms (failures caught), attempts (per
step), other_errors. Exits 1 when a step fails --max-attempts times.

Usage: torch_faults.py [--steps N] [--max-attempts K]
"""
import argparse
import json
import os
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
import torch  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--max-attempts", type=int, default=20)
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cuda.enable_flash_sdp(False)  # attention by plain matmuls: deterministic
    torch.backends.cuda.enable_mem_efficient_sdp(False)
    dev = torch.device("cuda")
    layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True)
    model = torch.nn.Sequential(torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False),
                                torch.nn.Linear(256, 256)).to(dev)
    params = [p for p in model.parameters()]
    momentum = [torch.zeros_like(p) for p in params]
    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(16, 64, 256, generator=g), torch.randn(16, 64, 256, generator=g)) for _ in range(a.steps)]
    losses, attempts, ooms = [], [], 0
    for step in range(a.steps):
        tries = 0
        while True:
            tries += 1
            try:
                x, y = data[step][0].to(dev), data[step][1].to(dev)
                loss = torch.nn.functional.mse_loss(model(x), y)
                loss.backward()
                value = loss.item()
                break
            except torch.cuda.OutOfMemoryError:
                ooms += 1
                x = y = loss = None  # what the step held goes
                for p in params:
                    p.grad = None
                torch.cuda.empty_cache()
                if tries >= a.max_attempts:
                    print(json.dumps({"error": f"step {step} failed {tries} times: every attempt met a failure "
                                               "(a larger --fail-every?)", "losses": losses, "ooms": ooms}))
                    return 1
        with torch.no_grad():  # the update allocates nothing
            for p, m in zip(params, momentum):
                m.mul_(0.9).add_(p.grad)
                p.add_(m, alpha=-1e-3)
                p.grad = None
        losses.append(value)
        attempts.append(tries)
    print(json.dumps({"losses": losses, "ooms": ooms, "attempts": attempts, "steps": a.steps,
                      "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
