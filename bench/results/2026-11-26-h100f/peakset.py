#!/usr/bin/env python3
# peakset.py OUT.csv ARGS...: torch_train.py ARGS in PyTorch's caching mode with memory history;
# writes the allocator's alloc/free events as a carve trace (a,addr,size / f,addr) and, to stdout,
# the live set at the allocated peak (size, count, top frames).
import runpy, sys, collections, torch
out = sys.argv[1]
torch.cuda.memory._record_memory_history(max_entries=3_000_000, stacks="python")
sys.argv = ["torch_train.py"] + sys.argv[2:]
try:
    runpy.run_path("tests/dropin/gpu/torch_train.py", run_name="__main__")
except SystemExit:
    pass
s = torch.cuda.memory._snapshot()
tr = s["device_traces"][0]
live = {}; cur = 0; peak = 0; best = None
with open(out, "w") as f:
    for e in tr:
        a = e["action"]
        if a == "alloc":
            live[e["addr"]] = e; cur += e["size"]; f.write("a,%#x,%d\n" % (e["addr"], e["size"]))
            if cur > peak:
                peak = cur; best = dict(live)
        elif a == "free_requested":
            x = live.pop(e["addr"], None)
            if x: cur -= x["size"]
            f.write("f,%#x\n" % e["addr"])
print("peak", peak, "entries", len(tr), "max_memory_allocated", torch.cuda.max_memory_allocated())
c = collections.Counter(); where = {}
for e in best.values():
    c[e["size"]] += 1
    fr = [f"{x['filename'].split('/')[-1]}:{x['line']}:{x['name']}" for x in e.get("frames", [])[:4]]
    where.setdefault(e["size"], fr)
for sz, k in sorted(c.items(), key=lambda x: -x[0] * x[1])[:30]:
    print(sz, k, round(sz * k / 2**20, 2), " | ".join(where[sz]))
