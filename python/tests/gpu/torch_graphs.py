"""torch_graphs.py — CUDA graphs under one allocator, one case per process:
a GPT-2 training step captured with torch.cuda.graph and replayed, and a
small MLP under torch.compile(mode="reduce-overhead") (inductor's CUDA graph
trees). Each case writes per-replay checksums, what happened to tensors
allocated between replays, and the memory held before the capture, after
it, and after the graph is released.

The one idea: a graph replays the addresses it captured, so what can go
wrong with an allocator is invisible in the graph's own outputs and shows in
memory handed out after the capture: a tensor made between two replays that
the next replay overwrites. So before every replay the case makes fresh
tensors on the stream that replays (the new batch, and canaries of several
sizes filled with a known value) and checks them after it; the outputs are
compared by run_all.py against the same script under PyTorch's allocator
(--mode default), and the memory after the release against the memory
before the capture. Everything runs on one side stream, the capture stream,
because that is where an allocator that does not keep the graph's memory
private would hand it out again first. An exception is recorded (the
process still writes its JSON and exits 0), so that a broken capture reads
as a failed check with its message, not as a crash without one.
"""

import gc
import inspect
import os
import shutil
import sys
import traceback
import warnings

import common

a = common.args("CUDA graphs (torch.cuda.graph of a GPT-2 step, torch.compile reduce-overhead) under one allocator",
                case=(str, "gpt2-graph", "gpt2-graph | compile"),
                replays=(int, 100, "graph replays (gpt2-graph) or compiled calls (compile)"),
                warmup=(int, 3, "eager steps on the side stream before the capture (gpt2-graph)"))
if a.case not in ("gpt2-graph", "compile"):
    sys.exit(f"torch_graphs.py: --case {a.case!r}: expected gpt2-graph or compile")

MiB = 1 << 20
# Canary sizes in float32 elements, 4 KiB to 16 MiB: whatever the size of a
# block the graph freed during the capture, a canary could land in it.
CANARY_ELEMS = (1 << 10, 1 << 14, 1 << 18, 1 << 20, 1 << 22)

out = {"mode": a.mode, "case": a.case, "replays": a.replays, "error": None}


def inductor_missing():
    """Why inductor cannot compile here, or None. Decided before anything
    runs, from what is installed, never from an allocator's failure."""
    try:
        from torch.utils._triton import has_triton
    except ImportError as e:
        return f"this torch has no inductor (torch.utils._triton: {e})"
    if not has_triton():
        return "triton is not installed or cannot drive this GPU (torch.utils._triton.has_triton() is False)"
    if not (os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")):
        return "no C compiler (cc, gcc, clang or $CC): inductor builds its kernel launchers with one"
    return None


def clear_workspaces():
    """Drop the cuBLAS workspaces PyTorch caches per (handle, stream): one
    made inside a graph's pool would otherwise stay after the release."""
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is not None:
        clear()


def settle():
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def canaries(i):
    return [torch.full((n,), float(i % 251 + 1), device="cuda") for n in CANARY_ELEMS]


def corrupted(cs, i):
    """Elements of the canaries made for replay i that no longer hold i's value."""
    v = float(i % 251 + 1)
    return sum(int((c != v).sum().item()) for c in cs)


def nondeterministic(caught):
    """The messages of use_deterministic_algorithms(warn_only=True) about
    an operation without a deterministic implementation, once each."""
    seen = []
    for w in caught:
        text = str(w.message).splitlines()[0]
        flagged = any(k in text for k in ("deterministic implementation", "nondeterministic", "non-deterministic"))
        if flagged and text not in seen:
            seen.append(text[:300])
    return seen


def holder_chains(obj, mine, depth=6, width=4):
    """What keeps obj alive: chains of referrers up to `depth` steps, each
    step a type name (a dict with a few of its keys, a frame with its code's
    name and line), leaving out the dump's own lists, tuples and frames."""
    def name(r):
        if isinstance(r, dict):
            return "dict{" + ",".join(str(k)[:24] for k in list(r)[:4]) + "}"
        if inspect.isframe(r):
            return f"frame {r.f_code.co_name}:{r.f_lineno}"
        return type(r).__name__
    here = sys._getframe()
    chains, level, seen = [], [(obj, ())], []
    for _ in range(depth):
        nxt = []
        skip = set(mine) | {id(here), id(level), id(nxt), id(seen)} | {id(x) for x in level} | \
            {id(x[1]) for x in level} | {id(x) for x in seen}
        for o, path in level:
            refs = [r for r in gc.get_referrers(o) if id(r) not in skip]
            skip.add(id(refs))  # a list of referrers refers to them too: not a holder
            seen.append(refs)
            if not refs:
                chains.append(" <- ".join(path) or "(nothing)")
            for r in refs[:width]:
                item = (r, path + (name(r),))
                skip.add(id(item))
                skip.add(id(item[1]))
                nxt.append(item)
        level = nxt[:width * width]
    chains += [" <- ".join(p) + " <- ..." for _, p in level]
    del level, here, seen
    return chains[:12]


def live_dump(tag):
    """With CARVE_TEST_LIVE_DUMP=DIR: carve's snapshot (carve only) at this
    point, and the CUDA tensors Python still reaches (count, bytes), to tell
    a buffer the program holds from one nobody freed (the tensors under
    PyTorch's allocator too, to compare)."""
    where = os.environ.get("CARVE_TEST_LIVE_DUMP")
    if not where:
        return
    tensors = [o for o in gc.get_objects() if isinstance(o, torch.Tensor) and o.is_cuda]
    shapes = {}
    for t in tensors:
        key = f"{tuple(t.shape)} {t.dtype}"
        shapes[key] = shapes.get(key, 0) + 1
    holders = {}
    largest = sorted(tensors, key=lambda t: -t.untyped_storage().nbytes())[:4]
    mine = {id(tensors), id(largest), id(sys._getframe())}
    for t in largest:
        holders[f"{tuple(t.shape)} {t.dtype}"] = holder_chains(t, mine)
    del largest
    out.setdefault("python_cuda_tensors", {})[tag] = {
        "count": len(tensors),
        "bytes": sum(t.untyped_storage().nbytes() for t in tensors),
        "shapes": dict(sorted(shapes.items(), key=lambda kv: -kv[1])[:20]),
        "largest_held_by": holders}
    if common.is_carve(a.mode):
        import json
        import carve
        os.makedirs(where, exist_ok=True)
        with open(os.path.join(where, f"{a.case}-{a.mode}-{tag}.json"), "w") as f:
            json.dump(carve.memory_snapshot(0), f)


def gpt2_graph():
    """GPT-2 (2 layers, random weights, no dropout) trained by SGD: warm up
    on a side stream, capture forward, loss, backward and the optimizer step
    with torch.cuda.graph on that stream (gradients set to None first, so
    backward allocates them in the graph's memory, as PyTorch's whole-network
    example does), replay with a new batch copied into the static input each
    time, then release the graph and everything it made."""
    from transformers import GPT2Config, GPT2LMHeadModel
    B, T, V = 8, 128, 8192
    cfg = GPT2Config(vocab_size=V, n_positions=T, n_embd=128, n_layer=2, n_head=4, resid_pdrop=0.0,
                     embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
    try:
        cfg._attn_implementation = "eager"  # no fused attention: its backward may be non-deterministic
    except Exception:
        pass
    torch.manual_seed(0)
    model = GPT2LMHeadModel(cfg).cuda().train()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(1)
    batch = lambda: torch.randint(0, V, (B, T), generator=gen)  # noqa: E731
    static_x = torch.empty((B, T), dtype=torch.long, device="cuda")
    # The causal mask made once, as a 4-D additive mask that transformers
    # passes through as it is: the mask it would make itself at every call
    # copies a CPU scalar to the GPU, which no capture allows.
    static_mask = torch.full((1, 1, T, T), torch.finfo(torch.float32).min, device="cuda").triu(1)
    out.update(batch=B, seq=T, vocab=V, params=sum(p.numel() for p in model.parameters()))

    def step():
        logits = model(input_ids=static_x, attention_mask=static_mask, use_cache=False).logits
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, V), static_x[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        return loss

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        warm = []
        for _ in range(a.warmup):
            static_x.copy_(batch().cuda())
            opt.zero_grad(set_to_none=True)
            warm.append(step().item())
        out["warmup_losses"] = warm
        opt.zero_grad(set_to_none=True)
        settle()
        out["before_capture"] = common.levels(torch, a.mode)
        live_dump("before_capture")

        g = torch.cuda.CUDAGraph()
        static_x.copy_(batch().cuda())
        with torch.cuda.graph(g, stream=s):
            static_loss = step()
        torch.cuda.synchronize()
        out["after_capture"] = common.levels(torch, a.mode)

        losses, corrupt, batch_changed = [], [], 0
        for i in range(a.replays):
            x = batch().cuda()
            x_sum = int(x.sum().item())
            static_x.copy_(x)
            cs = canaries(i)
            g.replay()
            losses.append(static_loss.item())
            corrupt.append(corrupted(cs, i))
            batch_changed += int(x.sum().item()) != x_sum
            del x, cs
        out["losses"] = losses
        out["canary_corrupt"] = corrupt
        out["batch_changed"] = batch_changed
        out["param_checksum"] = float(sum(p.detach().double().sum().item() for p in model.parameters()))
        torch.cuda.synchronize()
        out["after_replays"] = common.levels(torch, a.mode)

        # The release: the graph, the loss it made and the gradients backward
        # made in the graph's memory; the model, the optimizer, the static
        # input and the stream's cuBLAS workspace were there before.
        del g, static_loss
        opt.zero_grad(set_to_none=True)
        settle()
        out["after_release"] = common.levels(torch, a.mode)
        live_dump("after_release")


def compile_case():
    """A three-layer MLP (matrix products and pointwise work only: no
    reduction, whose tuned block size could change the summation order)
    under torch.compile(mode="reduce-overhead"), called with a new input each
    time; the compiled function and inductor's graph trees are then
    dropped."""
    why = inductor_missing()
    if why:
        out["skip"] = why
        return
    from torch._dynamo.utils import counters
    # As a user compiles: without the deterministic-algorithms switch (none
    # of these operations has a non-deterministic kernel to avoid).
    torch.use_deterministic_algorithms(False)
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 4096),
                            torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).cuda().eval()
    gen = torch.Generator().manual_seed(1)
    clear_workspaces()
    settle()
    out["before_capture"] = common.levels(torch, a.mode)
    skips0 = counters["inductor"]["cudagraph_skips"]
    count_captures()
    try:
        import torch._inductor.config as ic
        out["cudagraph_trees"] = bool(ic.triton.cudagraph_trees)
    except Exception:
        out["cudagraph_trees"] = None
    cm = torch.compile(m, mode="reduce-overhead", fullgraph=True)
    sums, corrupt, input_changed = [], [], 0
    with torch.no_grad():
        for i in range(a.replays):
            x = torch.randn(1024, 1024, generator=gen).cuda()
            x_sum = x.double().sum().item()
            cs = canaries(i)
            torch.compiler.cudagraph_mark_step_begin()
            y = cm(x)
            # y is the graph's own output buffer, overwritten by the next
            # call: read it now.
            sums.append([y.double().sum().item(), y.double().abs().sum().item()])
            corrupt.append(corrupted(cs, i))
            input_changed += x.double().sum().item() != x_sum
            if i == 2:
                torch.cuda.synchronize()
                out["after_capture"] = common.levels(torch, a.mode)
            del x, y, cs
    out["sums"] = sums
    out["canary_corrupt"] = corrupt
    out["batch_changed"] = input_changed
    out["cudagraph_skips"] = counters["inductor"]["cudagraph_skips"] - skips0
    out["graphs_recorded"] = graphs_recorded()
    torch.cuda.synchronize()
    out["after_replays"] = common.levels(torch, a.mode)
    del cm
    torch._dynamo.reset()
    from torch._inductor import cudagraph_trees
    cudagraph_trees.reset_cudagraph_trees()
    clear_workspaces()
    settle()
    out["after_release"] = common.levels(torch, a.mode)


CAPTURES = [0]


def count_captures():
    """Count every torch.cuda.graph capture from now on (inductor's graph
    trees and its per-function graphs, which carve.torch.enable selects,
    both capture through torch.cuda.CUDAGraph.capture_begin)."""
    cls = torch.cuda.CUDAGraph
    begin = cls.capture_begin

    def counted(self, *args, **kwargs):
        CAPTURES[0] += 1
        return begin(self, *args, **kwargs)
    cls.capture_begin = counted


def graphs_recorded():
    """How many CUDA graphs inductor recorded on device 0: the captures
    counted, or where none were, the nodes of its graph tree (None when this
    torch's internals do not say)."""
    if CAPTURES[0]:
        return CAPTURES[0]
    try:
        from torch._inductor import cudagraph_trees
        mgr = cudagraph_trees.get_manager(0, create_if_none_exists=False)
        if mgr is None:
            return 0
        n, todo = 0, [node for nodes in mgr.roots.values() for node in nodes]
        while todo:
            node = todo.pop()
            n += 1
            todo.extend(c for cs in node.children.values() for c in cs)
        return n
    except Exception:
        return None


torch = common.torch_for(a.mode)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        {"gpt2-graph": gpt2_graph, "compile": compile_case}[a.case]()
    except Exception as e:  # recorded for run_all.py: a broken capture is a failed check with its message
        out["error"] = f"{type(e).__module__}.{type(e).__name__}: {str(e)[:1500]}"
        first = e.__context__  # a capture's __exit__ can fail over the error that broke the capture
        if first is not None:
            out["error"] += f" (raised while handling {type(first).__module__}.{type(first).__name__}: " \
                            f"{str(first)[:1000]})"
        out["traceback"] = traceback.format_exc()[-4000:]
out["nondeterministic_ops"] = nondeterministic(caught)
common.write(a.out, out)
print("wrote", a.out, "error:", out["error"], flush=True)
