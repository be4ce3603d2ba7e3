#!/usr/bin/env python3
# ggml_noise.py WORK OUT N: the spread of gpt-2-backend's predict time per token under several ways of running it
import os, re, subprocess, sys, statistics, json, platform
work, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
exe = f"{work}/bin/gpt-2-backend"; model = f"{work}/gpt2/ggml-model.bin"
carve_run = f"{work}/prefix/bin/carve-run"
PROMPT = "The memory of a GPU is a scarce thing, and an inference engine that serves many requests must hold its weights."
args = ["-m", model, "-p", PROMPT, "-s", "42", "--top_k", "1", "-ngl", "99", "-c", "1024", "-b", "32", "--ignore-eos", "-t", "4", "-n", "257"]
arch = platform.machine()
V = {
  "pin4": (["taskset", "-c", "1-4"], False),
  "pin1": (["taskset", "-c", "2"], False),
  "nopin": ([], False),
  "noaslr": (["setarch", arch, "-R", "taskset", "-c", "1-4"], False),
  "warm": (["taskset", "-c", "1-4"], True),
  "carve-run": (["taskset", "-c", "1-4", carve_run, "--"], False),
  "carve-run-warm": (["taskset", "-c", "1-4", carve_run, "--"], True),
}
res = {k: [] for k in V}
for r in range(n):
    for k, (pre, warm) in V.items():
        if warm:
            subprocess.run(["/tmp/spin", "1.0"])
        p = subprocess.run(pre + [exe] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace")
        m = re.search(r"predict time =\s*([\d.]+) ms / ([\d.]+) ms per token", p.stdout)
        s = re.search(r"sample time =\s*([\d.]+) ms", p.stdout)
        res[k].append((float(m.group(1)) if m else None, float(s.group(1)) if s else None, p.returncode))
    print(r, {k: v[-1][0] for k, v in res.items()}, flush=True)
summ = {}
for k, v in res.items():
    xs = [x[0] for x in v if x[0]]
    if len(xs) > 1:
        summ[k] = {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "cv": statistics.stdev(xs) / statistics.mean(xs),
                   "sample_median": statistics.median([x[1] for x in v if x[1]])}
        print(f"{k:16s} median {summ[k]['median']:8.1f} ms  min {min(xs):8.1f} max {max(xs):8.1f}  cv {summ[k]['cv']:.3f}  sample {summ[k]['sample_median']:.1f}")
json.dump({"runs": res, "summary": summ}, open(out, "w"), indent=1)
