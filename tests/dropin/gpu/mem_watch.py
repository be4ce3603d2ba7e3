#!/usr/bin/env python3
"""mem_watch.py — run a command and sample the device memory its process
holds, as the driver reports it (nvidia-smi --query-compute-apps), until it
exits; for the drop-in tests that check a cap from outside the program.

The one idea: the figure comes from the driver, not from the program or
carve-run, so it counts every byte the process takes whoever allocated it
(and the CUDA context's own memory, which a baseline run of the same
framework measures). carve-run replaces itself with the program (exec), so
the command's pid is the program's. Where the driver never lists the pid
(a sandbox with its own process numbers), the device's used memory less
its reading before the command is taken instead (method "device"), which
is the process's own only while nothing else runs on the GPU.

Writes one JSON object to OUT: pid, method ("process" or "device"),
peak_bytes, last_bytes (the last reading before the process ended),
last_same (how many readings in a row at the end gave last_bytes: the
process held still that long), samples (readings that found the process,
or of the device), rc; exits with the command's status.

Usage: mem_watch.py OUT.json [--interval SECONDS] -- COMMAND [ARGS...]
"""
import json
import subprocess
import sys
import time


def used_bytes(pid):
    """The device memory nvidia-smi says pid holds, over every GPU (None if it cannot say)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True,
                             timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    total = 0
    for line in out.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 2 and fields[0] == str(pid) and fields[1].isdigit():
            total += int(fields[1]) << 20  # MiB
    return total


def device_used():
    """The memory in use on every GPU together, in bytes (None if nvidia-smi cannot say)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True,
                             timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    vals = [int(v.strip()) for v in out.splitlines() if v.strip().isdigit()]
    return sum(vals) << 20 if vals else None


def main():
    args = sys.argv[1:]
    if len(args) < 3 or "--" not in args:
        print(__doc__, file=sys.stderr)
        return 2
    out_path = args[0]
    interval = 0.05
    if args[1] == "--interval":
        interval = float(args[2])
    cmd = args[args.index("--") + 1:]
    before = device_used()
    p = subprocess.Popen(cmd)
    peak, last, same, samples, dev_peak, dev_last, dev_same, dev_samples = 0, 0, 0, 0, 0, 0, 0, 0
    while p.poll() is None:
        b = used_bytes(p.pid)
        if b:
            samples += 1
            same = same + 1 if b == last else 1
            peak, last = max(peak, b), b
        d = device_used()
        if d is not None and before is not None:
            dev_samples += 1
            dev_same = dev_same + 1 if d - before == dev_last else 1
            dev_peak, dev_last = max(dev_peak, d - before), d - before
        time.sleep(interval)
    result = {"pid": p.pid, "method": "process", "peak_bytes": peak, "last_bytes": last, "last_same": same,
              "samples": samples, "rc": p.returncode}
    if not samples:
        result.update(method="device", peak_bytes=dev_peak, last_bytes=dev_last, last_same=dev_same,
                      samples=dev_samples)
    with open(out_path, "w") as f:
        json.dump(result, f)
        f.write("\n")
    return p.returncode


if __name__ == "__main__":
    sys.exit(main())
