"""run_all.py — runs every GPU script of the Python package, compares the
modes, prints one PASS / FAIL / SKIP line per check and a closing
"N passed, N failed", and writes results.json and results.md into OUTDIR.
Called by run_all.sh, which first makes sure there is a GPU and a libcarve.

The one idea: each script is a separate process per allocator mode (the
allocator is fixed once CUDA starts), writing JSON; the verdicts are
computed here from those files, so a check is a comparison of numbers that
were measured, never a script's own claim. A framework that is not
installed makes its checks SKIP, never PASS.
"""

import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def have(module):
    return importlib.util.find_spec(module) is not None


# CARVE_GPU_CHECKS=gpt2_train,cupy_ops runs only those scripts (a long pass
# split over several sessions of a time-limited machine); unset: all.
ONLY = [s for s in os.environ.get("CARVE_GPU_CHECKS", "").split(",") if s]


def want(name):
    return not ONLY or name in ONLY


class Run:
    def __init__(self, outdir):
        self.outdir = outdir
        self.rows = []     # (check, verdict, detail)
        self.data = {}

    def script(self, name, mode, timeout=900, tag="", **opts):
        """Run name.py in mode; the parsed JSON, or None (the failure is logged).
        tag names a repeated run's files apart."""
        out = os.path.join(self.outdir, f"{name}-{mode}{tag}.json")
        log = os.path.join(self.outdir, f"{name}-{mode}{tag}.log")
        cmd = [sys.executable, os.path.join(HERE, name + ".py"), "--mode", mode, "--out", out]
        for k, v in opts.items():
            cmd += ["--" + k.replace("_", "-"), str(v)]
        t0 = time.time()
        with open(log, "w") as f:
            try:
                rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout).returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
        if rc != 0 or not os.path.exists(out):
            tail = open(log, errors="replace").read()[-600:].strip().replace("\n", " | ")
            self.verdict(f"{name} --mode {mode} runs", False, f"exit {rc} after {time.time() - t0:.0f} s: {tail}")
            return None
        with open(out) as f:
            d = json.load(f)
        self.data[f"{name}-{mode}{tag}"] = {k: v for k, v in d.items() if k not in ("tokens",)}
        return d

    def verdict(self, check, ok, detail=""):
        word = "PASS" if ok else "FAIL"
        self.rows.append((check, word, detail))
        print(f"{word} {check}" + (f": {detail}" if detail else ""), flush=True)

    def info(self, check, detail):
        self.rows.append((check, "INFO", detail))
        print(f"INFO {check}: {detail}", flush=True)

    def skip(self, check, why):
        self.rows.append((check, "SKIP", why))
        print(f"SKIP {check}: {why}", flush=True)


def mib(n):
    return f"{n / 2**20:.1f} MiB" if n is not None else "-"


def close(a, b, rtol):
    return all(math.isclose(x, y, rel_tol=rtol, abs_tol=rtol) for x, y in zip(a, b)) and len(a) == len(b)


CARVE_MODES = ("carve", "carve-segments")
# Processes per mode whose median gives a speed (CARVE_GPU_SPEED_REPS).
SPEED_REPS = max(1, int(os.environ.get("CARVE_GPU_SPEED_REPS", "3")))
ALL_MODES = CARVE_MODES + ("default", "expandable")


def footprints(runs):
    return ", ".join(f"{m} {t['reserved_over_allocated']:.3f} ({mib(t['peak_reserved_bytes'])})"
                     for m, t in runs.items())


def footprint_checks(r, name, runs):
    """carve's default mode holds no more than PyTorch with expandable
    segments."""
    e = runs["expandable"]
    r.verdict(f"{name} peak reserved/allocated: carve <= expandable",
              runs["carve"]["reserved_over_allocated"] <= e["reserved_over_allocated"] + 0.01, footprints(runs))
    # Segments mode is an option kept for programs that want cudaMalloc
    # segments; its footprint is reported beside PyTorch's default, not judged.
    r.info(f"{name} peak reserved/allocated: carve-segments beside default", footprints(runs))


def torch_checks(r):
    train = {m: r.script("gpt2_train", m) for m in ALL_MODES} if want("gpt2_train") else {}
    if train and all(train.values()):
        d, e = train["default"], train["expandable"]
        for m in CARVE_MODES:
            c = train[m]
            worst = max(abs(x - y) for x, y in zip(c["losses"], d["losses"]))
            r.verdict(f"gpt2_train losses equal ({m} vs default vs expandable)",
                      close(c["losses"], d["losses"], 1e-4) and close(c["losses"], e["losses"], 1e-4),
                      f"max |{m}-default| {worst:.2e}, last loss {c['losses'][-1]:.4f}")
            ratio = c["step_time_median_s"] / d["step_time_median_s"]
            r.verdict(f"gpt2_train step time {m}/default <= 1.10", ratio <= 1.10,
                      f"{ratio:.3f} ({c['step_time_median_s'] * 1e3:.1f} ms vs {d['step_time_median_s'] * 1e3:.1f} ms; "
                      f"expandable {e['step_time_median_s'] * 1e3:.1f} ms)")
        footprint_checks(r, "gpt2_train", train)

    gen = {m: r.script("gpt2_generate", m) for m in ALL_MODES} if want("gpt2_generate") else {}
    if gen and all(gen.values()):
        for m in CARVE_MODES:
            for cr, dr, er in zip(gen[m]["runs"], gen["default"]["runs"], gen["expandable"]["runs"]):
                same = cr["digest"] == dr["digest"] == er["digest"]
                r.verdict(f"gpt2_generate batch {cr['batch']}: same tokens, {m} reserved <= 1.25x default",
                          same and cr["peak_reserved_bytes"] <= 1.25 * dr["peak_reserved_bytes"],
                          f"tokens {'identical' if same else 'DIFFER'}; reserved {m} {mib(cr['peak_reserved_bytes'])}, "
                          f"default {mib(dr['peak_reserved_bytes'])}, expandable {mib(er['peak_reserved_bytes'])}; "
                          f"{cr['tokens_per_s']:.0f} vs {dr['tokens_per_s']:.0f} tokens/s")

    if have("torchvision"):
        rn = {m: r.script("resnet50_infer", m) for m in ALL_MODES} if want("resnet50_infer") else {}
        if rn and all(rn.values()):
            # The same script's speed differs by up to a quarter from one
            # process to the next on the same machine (seen on an H100), so
            # the speed is the median over SPEED_REPS processes per mode,
            # the modes taking turns.
            speed = {m: [rn[m]["images_per_s"]] for m in CARVE_MODES + ("default",)}
            for rep in range(1, SPEED_REPS):
                for m in speed:
                    x = r.script("resnet50_infer", m, tag=f"-rep{rep}")
                    if x:
                        speed[m].append(x["images_per_s"])
            d = rn["default"]
            for m in CARVE_MODES:
                c = rn[m]
                r.verdict(f"resnet50_infer outputs equal ({m} vs default)", close(c["sums"], d["sums"], 1e-5),
                          f"{len(c['sums'])} batches")
                cm, dm = statistics.median(speed[m]), statistics.median(speed["default"])
                ratio = dm / cm
                r.verdict(f"resnet50_infer warm time {m}/default <= 1.10", ratio <= 1.10,
                          f"{ratio:.3f}: {cm:.0f} vs {dm:.0f} images/s warm, median of {len(speed[m])} and "
                          f"{len(speed['default'])} processes ({' '.join(f'{x:.0f}' for x in speed[m])} vs "
                          f"{' '.join(f'{x:.0f}' for x in speed['default'])}); cold pass "
                          f"{c['cold_images_per_s']:.0f} vs {d['cold_images_per_s']:.0f}")
            footprint_checks(r, "resnet50_infer", rn)
        seq = r.script("arenas_sequential", "carve") if want("arenas_sequential") else None
        if seq:
            for s in seq["steps"]:
                r.verdict(f"arenas_sequential {s['model']}: arena closed, free memory back at baseline", s["ok"],
                          f"delta {s['delta_bytes'] / 2**20:+.1f} MiB (tolerance {seq['tolerance_mib']} MiB), "
                          f"arena peak {mib(s['arena_peak_reserved_bytes'])}, live at exit {s['live_at_exit']}")
    else:
        r.skip("resnet50_infer, arenas_sequential", "torchvision is not installed")


def safety_checks(r):
    """carve.torch as safe as PyTorch's allocator (torch_safety.py, one case per
    process): verdicts from what each case saw, its exit status and output."""
    if not want("torch_safety"):
        return
    runs = {}
    for case in ("oom", "outlive", "fraction", "memviz", "notoom"):
        runs[case] = r.script("torch_safety", "carve", tag=f"-{case}", case=case)
    log = lambda case: open(os.path.join(r.outdir, f"torch_safety-carve-{case}.log"), errors="replace").read()
    o = runs["oom"]
    if o:
        oom = "torch.cuda.OutOfMemoryError"
        r.verdict("oom at the cap: torch.cuda.OutOfMemoryError each time, work goes on between",
                  o["oom_raises"] and o["forward"] == [oom] * 3 and o["sums"] == [6.0 * (1 << 20)] * 3,
                  f"{o['forward']}; sums {o['sums']}; message: {o.get('message', '')[:160]}")
        r.verdict("oom in backward (autograd's thread): torch.cuda.OutOfMemoryError",
                  o["backward"] == oom and o["backward_on_other_thread"],
                  f"{o['backward']}; hook on another thread: {o['backward_on_other_thread']}")
        r.verdict("after out-of-memory: training goes on, freed memory is usable again",
                  len(o["losses"]) == 5 and o["losses"][-1] < o["losses"][0] and o["while_held"] == oom
                  and o["after_free"] == 1 and o["num_ooms"] >= 5,
                  f"losses {o['losses'][0]:.4f} -> {o['losses'][-1]:.4f}; while held: {o['while_held']}; "
                  f"after free: {o['after_free']}; num_ooms {o['num_ooms']}")
    t = runs["outlive"]
    if t:
        text = log("outlive")
        r.verdict("a tensor outliving its `with carve.Arena` block keeps its values; clean exit",
                  t["t_sum"] == 7.0 * (1 << 20) and t["u_sum"] == 3.0 * (1 << 20) and t["distinct"]
                  and t["state_after_block"] == "retired" and t["known_while_t_lives"]
                  and not t["known_after_t_freed"] and "not allocated here" not in text and "Abort" not in text,
                  f"t.sum() {t['t_sum']}, u.sum() {t['u_sum']}, arena {t['state_after_block']} then "
                  f"{'gone' if not t['known_after_t_freed'] else 'STILL THERE'} after t's free")
    f = runs["fraction"]
    if f:
        r.verdict("set_per_process_memory_fraction applies after a stats query, raises when too late",
                  not f["arena_exists_before"] and f["limit_fraction"] and abs(f["limit_fraction"] - 0.25) < 0.01
                  and f["over_limit"] == "torch.cuda.OutOfMemoryError" and f["late_fraction"].startswith("RuntimeError")
                  and "carve cannot apply" in f["late_fraction"],
                  f"limit {f['limit_fraction']}; over it: {f['over_limit']}; late: {f['late_fraction'][:160]}")
    n = runs["notoom"]
    if n:
        r.verdict("a failure that is not out of memory raises RuntimeError naming the status, not OutOfMemoryError",
                  n["closed_by_other_thread"] == "closed" and n["retired_route"].startswith("RuntimeError")
                  and "[CARVE_ERR_INVALID]" in n["retired_route"] and n["after"] == 8.0,
                  f"arena {n['closed_by_other_thread']}; next tensor: {n['retired_route'][:200]}; after: {n['after']}")
    m = runs["memviz"]
    if m:
        r.verdict("carve's snapshot opens in PyTorch's memory_viz (segsum, trace, plots)",
                  m["segments"] > 0 and m["blocks"] >= m["segments"] and m["trace_entries"] > 0
                  and m["trace_lines"] > m["trace_entries"] // 2 and m["trace_plot_bytes"] > 1000
                  and m["segment_bytes"] == m["reserved_bytes"],
                  f"{m['segments']} segments, {m['blocks']} blocks, {m['trace_entries']} trace entries; "
                  f"segment bytes {mib(m['segment_bytes'])} = reserved {mib(m['reserved_bytes'])}; "
                  f"segsum: {' / '.join(m['segsum_tail'])}")


def arena_training_checks(r):
    """GPT-2 inside carve.torch.arena: the arena's peak covers forward and
    backward, as PyTorch's own count of the same step."""
    if not want("gpt2_arena"):
        return
    c, d = r.script("gpt2_arena", "carve"), r.script("gpt2_arena", "default")
    if not (c and d):
        return
    routed, unrouted = c["routed"], c["unrouted"]
    torch_peak = d["step_peak_allocated_bytes"]
    ratio = routed["arena_step_peak_allocated_bytes"] / torch_peak
    r.verdict("gpt2 in carve.torch.arena: arena peak covers forward+backward (within 5% of torch's peak)",
              routed["routes_backward"] and abs(ratio - 1) <= 0.05
              and routed["default_arena_step_peak_growth_bytes"] <= 0.01 * torch_peak,
              f"arena {mib(routed['arena_step_peak_allocated_bytes'])} vs torch {mib(torch_peak)} ({ratio:.3f}); "
              f"escaped to the default arena {mib(routed['default_arena_step_peak_growth_bytes'])}")
    r.info("gpt2 in carve.torch.arena(backward=False): what backward puts outside the arena",
           f"arena {mib(unrouted['arena_step_peak_allocated_bytes'])}, default arena grew "
           f"{mib(unrouted['default_arena_step_peak_growth_bytes'])}; losses {routed['loss']:.4f} / "
           f"{unrouted['loss']:.4f} / torch {d['loss']:.4f}")


def cupy_checks(r):
    res = {m: r.script("cupy_ops", m) for m in ("carve", "default")} if want("cupy_ops") else {}
    if res and all(res.values()):
        c, d = res["carve"], res["default"]
        r.verdict("cupy_ops results equal (carve vs CuPy pool)", close(c["sums"], d["sums"], 1e-6),
                  f"{c['ops']} ops, {c['num_allocs']} carve allocations")
        r.verdict("cupy_ops no carve buffer left at the end", c["num_live_at_end"] == 0,
                  f"{c['num_live_at_end']} live; peak reserved {mib(c['peak_reserved_bytes'])}, "
                  f"CuPy pool total {mib(d['pool_total_bytes'])}; {c['seconds']:.2f} s vs {d['seconds']:.2f} s")


def write_tables(r):
    with open(os.path.join(r.outdir, "results.json"), "w") as f:
        json.dump({"checks": [{"check": c, "result": v, "detail": d} for c, v, d in r.rows], "runs": r.data}, f,
                  indent=1)
    with open(os.path.join(r.outdir, "results.md"), "w") as f:
        f.write("| check | result | detail |\n| --- | --- | --- |\n")
        for c, v, d in r.rows:
            f.write(f"| {c} | {v} | {d.replace('|', '/')} |\n")


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "gpu-results"
    os.makedirs(outdir, exist_ok=True)
    r = Run(outdir)
    if have("torch"):
        safety_checks(r)
    else:
        r.skip("torch_safety", "torch is not installed")
    if have("torch") and have("transformers"):
        arena_training_checks(r)
        torch_checks(r)
    else:
        r.skip("gpt2_train, gpt2_generate, gpt2_arena, resnet50_infer, arenas_sequential",
               "torch or transformers is not installed")
    if have("cupy"):
        cupy_checks(r)
    else:
        r.skip("cupy_ops", "cupy is not installed")
    write_tables(r)
    passed = sum(v == "PASS" for _, v, _ in r.rows)
    failed = sum(v == "FAIL" for _, v, _ in r.rows)
    skipped = sum(v == "SKIP" for _, v, _ in r.rows)
    print(f"(skipped: {skipped}; tables in {outdir}/results.md and results.json)")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
