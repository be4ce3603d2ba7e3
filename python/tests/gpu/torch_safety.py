"""torch_safety.py — carve.torch as safe as PyTorch's allocator, one case per
process (the allocator is fixed when CUDA starts): out-of-memory at the cap
raises torch.cuda.OutOfMemoryError and the loop goes on (in forward and in
backward, which runs on autograd's threads); a tensor that outlives its
`with carve.Arena(...)` block keeps its values and the process exits
cleanly; a statistics query leaves torch.cuda.set_per_process_memory_fraction
working, and a fraction that comes too late raises; a snapshot opens in
PyTorch's memory_viz reader; a failure that is not out of memory (the
arena a block routes to closed by another thread) raises RuntimeError
naming carve's status, never torch.cuda.OutOfMemoryError.

The one idea: each case writes what it saw (exception types, sums, messages)
to JSON, and run_all.py judges it, together with the process's exit status
and its output (an abort at exit shows there, after the JSON is written).
"""

import gc
import os
import pickle
import sys
import threading

import common

a = common.args("carve.torch's out-of-memory errors, arena lifetime, settings and snapshots", modes=("carve",),
                case=(str, "oom", "oom | outlive | fraction | memviz | notoom"))
torch = common.torch_for("carve")
import carve  # noqa: E402
import carve.torch  # noqa: E402

GiB = 1 << 30
out = {"mode": "carve", "case": a.case, "oom_raises": carve.torch.oom_raises()}


def oom_case():
    """The cap is 2 GiB; a 3 GiB tensor must raise, three times, and work
    must go on between; then in backward; then, once memory is freed, a
    large tensor fits again."""
    carve.configure(limit="2GiB")  # the default arena is made at the first allocation, below
    seen, sums = [], []
    for _ in range(3):
        try:
            x = torch.empty(3 * GiB, dtype=torch.uint8, device="cuda")
            seen.append(f"no exception (data_ptr {x.data_ptr():#x})")
            del x
        except torch.cuda.OutOfMemoryError as e:
            seen.append("torch.cuda.OutOfMemoryError")
            out["message"] = str(e).splitlines()[0][:400]
        except Exception as e:  # the wrong kind of error
            seen.append(f"{type(e).__module__}.{type(e).__name__}: {str(e)[:200]}")
        y = torch.full((1 << 20,), 2.0, device="cuda")
        sums.append((y * 3).sum().item())
    out["forward"], out["sums"] = seen, sums

    # Backward: the hook runs on autograd's thread, which allocates past the cap.
    w = torch.ones(1024, device="cuda", requires_grad=True)
    threads = []

    def hook(g):
        threads.append(threading.get_ident())
        torch.empty(3 * GiB, dtype=torch.uint8, device="cuda")
        return g

    w.register_hook(hook)
    try:
        (w * 2).sum().backward()
        out["backward"] = "no exception"
    except torch.cuda.OutOfMemoryError:
        out["backward"] = "torch.cuda.OutOfMemoryError"
    except Exception as e:
        out["backward"] = f"{type(e).__module__}.{type(e).__name__}: {str(e)[:200]}"
    out["backward_on_other_thread"] = bool(threads) and threads[0] != threading.get_ident()

    # Training goes on: a small model, a few steps, same result twice.
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 8)).cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    losses = []
    for _ in range(5):
        loss = m(torch.ones(64, 512, device="cuda")).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    out["losses"] = losses
    # Hold 1.5 GiB, fail, free, and the room is back.
    held = torch.empty(int(1.5 * GiB), dtype=torch.uint8, device="cuda")
    try:
        torch.empty(GiB, dtype=torch.uint8, device="cuda")
        out["while_held"] = "no exception"
    except torch.cuda.OutOfMemoryError:
        out["while_held"] = "torch.cuda.OutOfMemoryError"
    del held
    again = torch.empty(int(1.5 * GiB), dtype=torch.uint8, device="cuda")
    again.fill_(1)
    torch.cuda.synchronize()
    out["after_free"] = int(again[-1].item())
    del again
    out["num_ooms"] = carve.memory_stats(0)["num_ooms"]


def outlive_case():
    """The issue's sequence: a tensor made in a routed Arena block, one more
    tensor after the block; the first keeps its values, the arena closes
    with its last tensor, and the process exits without an abort."""
    L = carve._lib.lib()
    n = 1 << 20
    with carve.Arena(limit="1GiB") as ar, carve.route(ar):
        t = torch.full((n,), 7.0, device="cuda")
        h = ar._h
    u = torch.full((n,), 3.0, device="cuda")
    torch.cuda.synchronize()
    out["state_after_block"] = ar.state
    out["t_sum"], out["u_sum"] = t.sum().item(), u.sum().item()
    out["distinct"] = t.data_ptr() != u.data_ptr()
    out["known_while_t_lives"] = bool(L.carve_route_known(h))
    del t
    gc.collect()
    torch.cuda.synchronize()
    out["known_after_t_freed"] = bool(L.carve_route_known(h))
    keep = torch.full((n,), 5.0, device="cuda")  # alive at exit: freed by PyTorch's teardown, or not at all
    out["keep_sum"] = keep.sum().item()
    globals()["_kept"] = keep


def fraction_case():
    """A statistics query before the first allocation must not fix the
    configuration: set_per_process_memory_fraction still applies; after the
    first allocation it raises."""
    free, total = torch.cuda.mem_get_info()
    s = carve.memory_stats(0)
    out["arena_exists_before"] = s["arena_exists"]
    carve.memory_summary(0)
    torch.cuda.set_per_process_memory_fraction(0.25, 0)
    x = torch.ones(4, device="cuda")
    lim = carve.memory_stats(0)["limit_bytes"]
    out["limit_fraction"] = lim / total if lim else None
    try:
        torch.empty(int(0.3 * total), dtype=torch.uint8, device="cuda")
        out["over_limit"] = "no exception"
    except torch.cuda.OutOfMemoryError:
        out["over_limit"] = "torch.cuda.OutOfMemoryError"
    try:
        torch.cuda.set_per_process_memory_fraction(0.5, 0)
        out["late_fraction"] = "no exception"
    except RuntimeError as e:
        out["late_fraction"] = f"RuntimeError: {str(e).splitlines()[0][:300]}"
    del x


def memviz_case():
    """carve's snapshot through PyTorch's own memory_viz functions."""
    from torch.cuda import _memory_viz as mv
    import carve.memory
    carve.memory._record_memory_history()
    m = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda()
    keep = []
    for i in range(3):
        y = m(torch.randn(32 + i, 1024, device="cuda"))
        y.sum().backward()
        keep.append(y.detach())
    torch.cuda.synchronize()
    path = os.path.join(os.path.dirname(a.out), "carve_snapshot.pickle")
    carve.memory._dump_snapshot(path)
    with open(path, "rb") as f:
        snap = pickle.load(f)
    out["segments"] = len(snap["segments"])
    out["blocks"] = sum(len(s["blocks"]) for s in snap["segments"])
    out["trace_entries"] = len(snap["device_traces"][0])
    out["reserved_bytes"] = carve.memory_reserved(0)
    out["segment_bytes"] = sum(s["total_size"] for s in snap["segments"])
    summary = mv.segsum(snap)
    out["segsum_tail"] = summary.splitlines()[-12:-9]
    text = mv.trace(snap)
    out["trace_lines"] = len(text.splitlines())
    out["trace_plot_bytes"] = len(mv.trace_plot(snap))
    out["segment_plot_bytes"] = len(mv.segment_plot(snap))
    out["snapshot_path"] = path
    carve.memory._record_memory_history(enabled=None)


def notoom_case():
    """Code that catches torch.cuda.OutOfMemoryError to retry smaller must not
    loop on a failure that is not out of memory: the arena this thread routes
    to is closed by another thread inside the block, and the next tensor
    raises RuntimeError with carve's status; after the block work goes on."""
    x = torch.ones(4, device="cuda")  # CUDA up, the default arena made
    ar = carve.Arena(limit="1GiB")
    with carve.route(ar):
        closer = threading.Thread(target=ar.close)
        closer.start()
        closer.join()
        out["closed_by_other_thread"] = ar.state
        try:
            torch.empty(1 << 20, device="cuda")
            out["retired_route"] = "no exception"
        except torch.cuda.OutOfMemoryError as e:
            out["retired_route"] = f"torch.cuda.OutOfMemoryError: {str(e)[:400]}"
        except RuntimeError as e:
            out["retired_route"] = f"RuntimeError: {str(e)[:400]}"
    y = torch.ones(4, device="cuda")
    out["after"] = float((x + y).sum().item())


{"oom": oom_case, "outlive": outlive_case, "fraction": fraction_case, "memviz": memviz_case,
 "notoom": notoom_case}[a.case]()
common.write(a.out, out)
print("wrote", a.out, flush=True)
sys.stdout.flush()
