#!/usr/bin/env python3
"""gen_trace.py — deterministic synthetic allocation traces for carve-replay.

The trace imitates a training loop, the workload a caching allocator exists
for: persistent parameters and optimizer state, then iterations whose batch
shape changes from step to step (so activations of one step do not fit
exactly into the holes of the last), a forward pass that keeps activations
and churns small temporaries and mid-size workspaces, a backward pass that
frees activations in reverse and creates gradients, and gradient buckets
reduced on a second stream. The same seed always gives the same bytes.

    gen_trace.py --events 5000 --seed 1 -o trace.csv
    gen_trace.py --events 1000000 --seed 7 -o big.csv.gz   (gzip by suffix)
"""
import argparse
import gzip
import random
import sys

MiB = 1 << 20
KiB = 1 << 10


class Trace:
    def __init__(self, rng, limit):
        self.rng = rng
        self.limit = limit
        self.lines = []
        self.counter = 0
        self.live = {}

    def full(self):
        return len(self.lines) >= self.limit

    def alloc(self, size, stream=0):
        self.counter += 1
        # Ids that look like arbitrary 64-bit values (an odd multiplier is a
        # bijection modulo 2^64, so they never collide).
        ident = (self.counter * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        size = max(1, int(size))
        self.lines.append("a,%d,%d" % (ident, size) + (",%d" % stream if stream else ""))
        self.live[ident] = size
        return ident

    def free(self, ident):
        if ident is not None and ident in self.live:
            del self.live[ident]
            self.lines.append("f,%d" % ident)


def lognormal_size(rng, median, sigma, lo, hi, align=512):
    s = rng.lognormvariate(0, sigma) * median
    s = min(max(s, lo), hi)
    return int(s) // align * align or align


def generate(events, seed, layers):
    rng = random.Random(seed)
    t = Trace(rng, events)
    # Parameters: a large embedding, then per-layer weights of a few sizes.
    params = [t.alloc(48 * MiB)]
    layer_w = []
    for _ in range(layers):
        w = [lognormal_size(rng, 6 * MiB, 0.6, 256 * KiB, 40 * MiB) for _ in range(3)]
        layer_w.append(w)
        params += [t.alloc(s) for s in w]
        params.append(t.alloc(rng.choice([4, 8, 16]) * KiB))  # biases, norms
    optimizer = []
    step = 0
    while not t.full():
        step += 1
        scale = rng.choice([0.5, 0.625, 0.75, 0.875, 1.0, 1.125, 1.25])
        acts = []
        # Forward: keep one or two activations per layer; churn temporaries.
        for layer in range(layers):
            if t.full():
                break
            base = 12 * MiB * (1 + (layer % 3)) // 2
            acts.append(t.alloc(int(base * scale) // 512 * 512))
            if rng.random() < 0.5:
                acts.append(t.alloc(int(2 * MiB * scale * rng.uniform(0.5, 2))))
            temps = [t.alloc(lognormal_size(rng, 64 * KiB, 1.2, 256, 1 * MiB))
                     for _ in range(rng.randint(2, 6))]
            if rng.random() < 0.35:
                ws = t.alloc(lognormal_size(rng, 4 * MiB, 0.8, 1 * MiB, 48 * MiB))
                t.free(ws)
            rng.shuffle(temps)
            for x in temps[: len(temps) - 1]:
                t.free(x)
            acts.append(temps[-1])  # one temporary survives into backward
        # Backward: free activations in reverse, make gradients, reduce
        # gradient buckets on stream 1 as they fill.
        grads, bucket, bucket_bytes = [], [], 0
        for layer in reversed(range(layers)):
            if t.full():
                break
            for s in layer_w[layer]:
                g = t.alloc(s)
                grads.append(g)
                bucket_bytes += s
                tmp = t.alloc(lognormal_size(rng, 128 * KiB, 1.0, 256, 1 * MiB))
                t.free(tmp)
            for _ in range(min(len(acts), rng.randint(2, 4))):
                t.free(acts.pop())
            if bucket_bytes >= 25 * MiB:
                bucket.append(t.alloc(bucket_bytes, stream=1))
                bucket_bytes = 0
                if len(bucket) > 2:
                    t.free(bucket.pop(0))
        for a in reversed(acts):
            t.free(a)
        for b in bucket:
            t.free(b)
        # Optimizer: state created lazily on the first step, then kept.
        if not optimizer:
            for layer in range(layers):
                for s in layer_w[layer]:
                    optimizer.append(t.alloc(s))
                    optimizer.append(t.alloc(s))
        for g in grads:
            t.free(g)
        if step % 7 == 0:
            # An evaluation pass: large short-lived buffers of a new shape.
            big = [t.alloc(lognormal_size(rng, 24 * MiB, 0.5, 4 * MiB, 96 * MiB))
                   for _ in range(rng.randint(2, 5))]
            for b in big:
                t.free(b)
    return t.lines[:events]


def main(argv=None):
    ap = argparse.ArgumentParser(description="Write a deterministic synthetic allocation trace.")
    ap.add_argument("--events", type=int, default=5000, help="number of events (default 5000)")
    ap.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    ap.add_argument("--layers", type=int, default=12, help="model layers (default 12)")
    ap.add_argument("-o", "--output", default="-",
                    help="output file, gzip-compressed when it ends in .gz (default stdout)")
    args = ap.parse_args(argv)
    if args.events < 0 or args.layers < 1:
        ap.error("--events must be >= 0 and --layers >= 1")
    lines = generate(args.events, args.seed, args.layers)
    text = ("# carve synthetic trace: gen_trace.py --events %d --seed %d --layers %d\n"
            % (args.events, args.seed, args.layers)) + "".join(l + "\n" for l in lines)
    data = text.encode("ascii")
    if args.output == "-":
        sys.stdout.buffer.write(data)
    elif args.output.endswith(".gz"):
        # mtime=0 and no file name keep the compressed bytes reproducible.
        with open(args.output, "wb") as raw:
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
                gz.write(data)
    else:
        with open(args.output, "wb") as f:
            f.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
