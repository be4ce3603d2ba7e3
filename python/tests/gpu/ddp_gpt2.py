"""ddp_gpt2.py — GPT-2 small trained with DistributedDataParallel on two GPUs,
under carve (carve.torch.enable with a limit in each process) or PyTorch's
allocator; then the two runs compared.

The one idea: the same seeds give the same weights and batches in both
runs, so DDP's losses depend only on the arithmetic and must match, rank by
rank, whichever allocator serves the memory. Under carve, each rank also
checks what only carve can show: the gradients DDP all-reduces through NCCL
(gradient_as_bucket_view, so they are views of DDP's buckets) lie in
carve's arena of that rank's GPU; carve.memory_stats(rank) agrees with
itself and with the tensors alive, its peak reserved stays under the
limit, and the other GPU's arena holds nothing; an allocation past the
limit raises torch.cuda.OutOfMemoryError, after which training goes on.

Run (two GPUs; run_ddp.sh does all three steps and exits 77 with fewer):
  python3 -m torch.distributed.run --standalone --nproc_per_node=2 ddp_gpt2.py --mode default --out DIR
  python3 -m torch.distributed.run --standalone --nproc_per_node=2 ddp_gpt2.py --mode carve --limit 12GiB --out DIR
  python3 ddp_gpt2.py --compare DIR      # PASS/FAIL lines, "N passed, N failed"; exit 1 on a failure
Each rank writes DIR/ddp-MODE-rankR.json.
"""

import argparse
import ctypes
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PYROOT = os.path.dirname(os.path.dirname(HERE))
if PYROOT not in sys.path:
    sys.path.insert(0, PYROOT)

# NVLink multicast stays off, whoever starts this (docs of the GPU machines).
for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
               ("NVSHMEM_DISABLE_NVLS", "1"), ("CUBLAS_WORKSPACE_CONFIG", ":4096:8")):
    os.environ.setdefault(_k, _v)


def parse_size(text):
    units = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
    for u, m in units.items():
        if text.endswith(u):
            return int(float(text[:-len(u)]) * m)
    return int(text)


def train(a):
    rank = int(os.environ["RANK"])
    local = int(os.environ["LOCAL_RANK"])
    world = int(os.environ["WORLD_SIZE"])
    import torch
    if a.mode == "carve":
        import carve
        import carve.torch
        carve.torch.enable(limit=a.limit)       # every visible device's arena held to the limit
    torch.cuda.set_device(local)
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True, warn_only=True)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    cfg = GPT2Config()
    torch.manual_seed(0)
    model = GPT2LMHeadModel(cfg).cuda()
    ddp = DDP(model, device_ids=[local], gradient_as_bucket_view=True)
    opt = torch.optim.AdamW(ddp.parameters(), lr=3e-4)
    gen = torch.Generator().manual_seed(100 + rank)
    data = [torch.randint(0, cfg.vocab_size, (a.batch, a.seq), generator=gen) for _ in range(a.steps)]
    result = {"mode": a.mode, "rank": rank, "local_rank": local, "world": world, "steps": a.steps,
              "batch": a.batch, "seq": a.seq, "checks": []}

    def check(ok, what, detail=""):
        result["checks"].append({"ok": bool(ok), "what": what, "detail": str(detail)})

    losses, times = [], []
    for step in range(a.steps):
        x = data[step].cuda()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = ddp(input_ids=x, labels=x).loss
        loss.backward()                         # DDP all-reduces the gradient buckets through NCCL here
        if step == 0 and a.mode == "carve":
            L = carve._lib.lib()
            contains = L.carve_arena_contains
            contains.restype, contains.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p]
            arena = carve._api._arena_handle(local)
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            outside = [g.data_ptr() for g in grads if not contains(arena, g.data_ptr())]
            check(grads and not outside, f"the {len(grads)} gradients NCCL all-reduced (DDP's bucket views) lie "
                                         f"in carve's arena of GPU {local}", f"{len(outside)} outside")
            # Not kept: DDP rebuilds its buckets before the second step, and a
            # reference to a first-step gradient would keep the old bucket alive.
            del grads, outside
        opt.step()
        opt.zero_grad(set_to_none=False)        # keep the bucket views
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
        if step == a.steps // 2 and a.mode == "carve":
            # Past the limit: PyTorch's own error, and training goes on afterwards.
            try:
                torch.empty(parse_size(a.limit) + (1 << 20), dtype=torch.uint8, device="cuda")
                check(False, "an allocation past the limit raises torch.cuda.OutOfMemoryError", "it succeeded")
            except torch.cuda.OutOfMemoryError as e:
                check("limit" in str(e) or "out of memory" in str(e),
                      "an allocation past the limit raises torch.cuda.OutOfMemoryError", str(e).splitlines()[0])
    result["losses"] = losses
    result["step_time_median_s"] = statistics.median(times[3:] or times)
    torch.cuda.synchronize()
    live = sum(t.numel() * t.element_size() for t in model.parameters())
    live += sum(p.grad.numel() * p.grad.element_size() for p in model.parameters() if p.grad is not None)
    live += sum(v.numel() * v.element_size() for st in opt.state.values() for v in st.values()
                if torch.is_tensor(v) and v.is_cuda)
    result["live_tensor_bytes"] = live
    if a.mode == "carve":
        s = carve.memory_stats(local)
        result["allocated_end"] = s["allocated_bytes.all.current"]
        limit = parse_size(a.limit)
        check(s["arena_exists"] and s["allocated_bytes.all.current"] == carve.memory_allocated(local)
              and s["reserved_bytes.all.current"] == carve.memory_reserved(local)
              and s["allocated_bytes.all.current"] <= s["reserved_bytes.all.current"]
              and s["allocated_bytes.all.peak"] <= s["reserved_bytes.all.peak"],
              f"carve.memory_stats({local}) agrees with memory_allocated/reserved",
              {k: s[k] for k in ("allocated_bytes.all.current", "reserved_bytes.all.current",
                                 "allocated_bytes.all.peak", "reserved_bytes.all.peak")})
        # The bound above the tensors is PyTorch's own allocator's figure for
        # the same program (compare(): cuBLAS workspaces, DDP's buckets and
        # whatever else PyTorch keeps alive are allocated there too).
        check(live <= s["allocated_bytes.all.current"],
              "allocated bytes cover the weights, gradients and AdamW state alive",
              f"{s['allocated_bytes.all.current']} allocated, {live} in those tensors")
        check(s["reserved_bytes.all.peak"] <= limit and s["limit_bytes"] is not None and s["limit_bytes"] <= limit,
              f"held to its limit ({a.limit}): peak reserved under it", f"peak {s['reserved_bytes.all.peak']}")
        check(s["num_ooms"] >= 1, "the refused allocation is counted (num_ooms)", s["num_ooms"])
        other = [d for d in range(torch.cuda.device_count()) if d != local]
        held = {d: carve.memory_stats(d)["reserved_bytes.all.current"] for d in other}
        check(all(v == 0 for v in held.values()), "nothing reserved on the other GPU by this process", held)
        result["memory_stats"] = {k: v for k, v in s.items() if isinstance(v, (int, float, type(None)))}
        result["peak_reserved_bytes"] = s["reserved_bytes.all.peak"]
        result["peak_allocated_bytes"] = s["allocated_bytes.all.peak"]
    else:
        result["allocated_end"] = torch.cuda.memory_allocated()
        result["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
        result["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
    dist.destroy_process_group()
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, f"ddp-{a.mode}-rank{rank}.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"rank {rank}: {a.mode}: losses {losses[0]:.4f} .. {losses[-1]:.4f}, "
          f"step {result['step_time_median_s'] * 1e3:.1f} ms, peak reserved {result['peak_reserved_bytes'] >> 20} MiB",
          flush=True)


def compare(d):
    passed = failed = 0

    def say(ok, what, detail=""):
        nonlocal passed, failed
        print(f"{'PASS' if ok else 'FAIL'} {what}" + (f": {detail}" if detail else ""))
        passed, failed = passed + bool(ok), failed + (not ok)

    for rank in (0, 1):
        runs = {}
        for mode in ("default", "carve"):
            try:
                with open(os.path.join(d, f"ddp-{mode}-rank{rank}.json")) as f:
                    runs[mode] = json.load(f)
            except (OSError, ValueError) as e:
                say(False, f"rank {rank}: the {mode} run wrote its result", e)
        if len(runs) != 2:
            continue
        a, b = runs["default"]["losses"], runs["carve"]["losses"]
        diff = max((abs(x - y) / max(abs(x), 1e-12) for x, y in zip(a, b)), default=float("inf"))
        say(len(a) == len(b) and diff <= 1e-6, f"rank {rank}: the same {len(a)} losses under carve as under "
            f"PyTorch's allocator", f"largest relative difference {diff:.2e}; {b[0]:.4f} .. {b[-1]:.4f}")
        for c in runs["carve"]["checks"]:
            say(c["ok"], f"rank {rank}: {c['what']}", c["detail"] if not c["ok"] else "")
        ca, da = runs["carve"].get("allocated_end"), runs["default"].get("allocated_end")
        if ca is None or da is None:
            say(False, f"rank {rank}: allocated bytes at the end recorded by both runs", f"carve {ca}, PyTorch {da}")
        else:
            # Both count the same live tensors, each rounded its own way (512 B
            # blocks for PyTorch): 2% or 64 MiB, whichever is more.
            tol = max(64 << 20, da // 50)
            say(abs(ca - da) <= tol, f"rank {rank}: allocated bytes at the end as PyTorch's own allocator's "
                f"(within {tol >> 20} MiB)", f"carve {ca}, PyTorch {da}, "
                f"tensors {runs['carve'].get('live_tensor_bytes')}")
        print(f"INFO rank {rank}: step time carve {runs['carve']['step_time_median_s'] * 1e3:.1f} ms, PyTorch "
              f"{runs['default']['step_time_median_s'] * 1e3:.1f} ms "
              f"({runs['carve']['step_time_median_s'] / runs['default']['step_time_median_s']:.3f}); peak reserved "
              f"carve {runs['carve']['peak_reserved_bytes'] >> 20} MiB, PyTorch "
              f"{runs['default']['peak_reserved_bytes'] >> 20} MiB (peak allocated "
              f"{runs['carve']['peak_allocated_bytes'] >> 20} / {runs['default']['peak_allocated_bytes'] >> 20} MiB)")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("carve", "default"))
    ap.add_argument("--out", help="directory for the per-rank results")
    ap.add_argument("--limit", default="12GiB", help="carve's limit per process (carve mode)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--compare", metavar="DIR", help="compare the two runs' results in DIR")
    a = ap.parse_args()
    if a.compare:
        return compare(a.compare)
    if not a.mode or not a.out or "RANK" not in os.environ:
        ap.error("--mode and --out, under torch.distributed.run (torchrun); or --compare DIR")
    train(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
