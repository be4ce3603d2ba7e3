#!/usr/bin/env python3
"""gen_serving.py — synthetic serving workloads whose shapes change on every
request, as allocation traces (docs/trace-format.md) for carve-replay and
bench/peers: workloads the allocator was not tuned on.

Two workloads, each served by several workers, one stream each, whose
requests run at once (their events interleave, layer by layer, in a seeded
order, as threads on their own streams would):

  cnn      a ResNet-like CNN (stem, four stages of bottleneck blocks, a
           classifier) served with a batch size drawn per request (1 to 64,
           most requests small): every activation, the residual it keeps,
           and a convolution workspace whose size follows the batch.
  decoder  a decoder-only transformer served with prompts of varying length
           (log-uniform, 16 to 2048 tokens) and a varying number of new
           tokens: the prefill (attention scores of prompt x prompt per
           head), then token by token a key/value cache that grows by one
           token per layer and step, reallocated as it grows (concatenation,
           as eager frameworks do), with per-step temporaries.

Weights are allocated first on stream 0 and never freed (a replay frees
them at the end). The same arguments always give the same bytes.

    gen_serving.py cnn -o bench/traces/synthetic/cnn_serving.csv.gz
    gen_serving.py decoder -o bench/traces/synthetic/decoder_serving.csv.gz
"""
import argparse
import gzip
import math
import random
import sys

KiB = 1 << 10
MiB = 1 << 20


class Trace:
    """Lines of a trace, ids never reused."""

    def __init__(self):
        self.lines = []
        self.next_id = 1
        self.live = {}

    def alloc(self, size, stream):
        ident = self.next_id
        self.next_id += 1
        self.lines.append("a,%d,%d,%d" % (ident, max(1, int(size)), stream) if stream else
                          "a,%d,%d" % (ident, max(1, int(size))))
        self.live[ident] = size
        return ident

    def free(self, ident):
        if ident in self.live:
            del self.live[ident]
            self.lines.append("f,%d" % ident)


def interleave(rng, workers):
    """Run the workers' generators (each yields after every step) in a
    seeded order until all are done: one step of a random live worker at a
    time, as threads sharing a process would."""
    live = list(workers)
    while live:
        w = rng.choice(live)
        try:
            next(w)
        except StopIteration:
            live.remove(w)


# ---- CNN served with a batch size per request ------------------------------

def cnn_weights(t):
    """A ResNet-50-like parameter set in fp32 (about 100 MiB)."""
    shapes = [64 * 3 * 49]
    cin = 64
    for width, blocks in ((64, 3), (128, 4), (256, 6), (512, 3)):
        for b in range(blocks):
            shapes += [width * cin, width * width * 9, 4 * width * width]
            if b == 0:
                shapes.append(4 * width * cin)
            cin = 4 * width
    shapes.append(1000 * cin)
    for n in shapes:
        t.alloc(4 * n, 0)
        t.alloc(4 * 2 * (n ** 0.5 if n > 4096 else 64), 0)  # batch-norm scale and shift


def cnn_request(t, rng, stream, batch):
    """One forward pass in fp32: yields after every layer."""
    act = lambda c, hw: 4 * batch * c * hw * hw  # noqa: E731
    x = t.alloc(act(3, 224), stream)
    yield
    y = t.alloc(act(64, 112), stream)
    t.free(x)
    ws = t.alloc(min(256 * MiB, 16 * MiB + batch * rng.choice((256, 512, 768)) * KiB), stream)
    t.free(ws)
    x = t.alloc(act(64, 56), stream)
    t.free(y)
    yield
    cin, hw = 64, 56
    for stage, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
        for b in range(blocks):
            s = 2 if (b == 0 and stage > 0) else 1
            out_hw = hw // s
            a = t.alloc(act(width, hw), stream)
            ws = t.alloc(batch * rng.choice((64, 128, 192)) * KiB + 4 * MiB, stream)
            c = t.alloc(act(width, out_hw), stream)
            t.free(ws)
            t.free(a)
            d = t.alloc(act(4 * width, out_hw), stream)
            t.free(c)
            if b == 0:
                sc = t.alloc(act(4 * width, out_hw), stream)  # the projected shortcut
                t.free(sc)
            t.free(x)
            x = d
            cin, hw = 4 * width, out_hw
            yield
    pooled = t.alloc(4 * batch * cin, stream)
    t.free(x)
    logits = t.alloc(4 * batch * 1000, stream)
    t.free(pooled)
    probs = t.alloc(4 * batch * 1000, stream)
    t.free(logits)
    host = t.alloc(8 * batch, stream)  # the answers, copied out
    t.free(probs)
    t.free(host)
    yield


def cnn_batch(rng):
    """Mostly small batches, now and then a large one."""
    return rng.choice((1, 1, 2, 3, 4, 4, 6, 8, 8, 12, 16, 16, 24, 32, 48, 64))


def gen_cnn(seed, requests, workers):
    rng = random.Random(seed)
    t = Trace()
    cnn_weights(t)
    per = [requests // workers + (1 if w < requests % workers else 0) for w in range(workers)]

    def worker(w):
        for _ in range(per[w]):
            yield from cnn_request(t, rng, w + 1, cnn_batch(rng))

    interleave(rng, [worker(w) for w in range(workers)])
    return t


# ---- a decoder served with prompts of varying length -----------------------

D, LAYERS, HEADS, FF, VOCAB = 1024, 12, 16, 4096, 32000
H2 = 2  # bytes per element: fp16


def decoder_weights(t):
    """About 250 MiB in fp16."""
    t.alloc(H2 * VOCAB * D, 0)
    for _ in range(LAYERS):
        for n in (3 * D * D, D * D, FF * D, D * FF, D, D, 3 * D, FF):
            t.alloc(H2 * n, 0)
    t.alloc(H2 * D, 0)


def decoder_request(t, rng, stream, prompt, new_tokens):
    """Prefill, then one step per new token: yields after every layer of the
    prefill and after every step."""
    cache = []
    h = t.alloc(H2 * prompt * D, stream)
    for _ in range(LAYERS):
        qkv = t.alloc(H2 * prompt * 3 * D, stream)
        k = t.alloc(H2 * prompt * D, stream)
        v = t.alloc(H2 * prompt * D, stream)
        scores = t.alloc(H2 * HEADS * prompt * prompt, stream)
        probs = t.alloc(H2 * HEADS * prompt * prompt, stream)
        t.free(scores)
        ctx = t.alloc(H2 * prompt * D, stream)
        t.free(probs)
        t.free(qkv)
        o = t.alloc(H2 * prompt * D, stream)
        t.free(ctx)
        ff = t.alloc(H2 * prompt * FF, stream)
        h2 = t.alloc(H2 * prompt * D, stream)
        t.free(ff)
        t.free(o)
        t.free(h)
        h = h2
        cache.append([k, v])
        yield
    logits = t.alloc(4 * VOCAB, stream)
    t.free(h)
    t.free(logits)
    length = prompt
    for _ in range(new_tokens):
        length += 1
        h = t.alloc(H2 * D, stream)
        for layer in range(LAYERS):
            qkv = t.alloc(H2 * 3 * D, stream)
            for j in range(2):  # the cache grows by one token: a new tensor, the old one freed
                grown = t.alloc(H2 * length * D, stream)
                t.free(cache[layer][j])
                cache[layer][j] = grown
            scores = t.alloc(H2 * HEADS * length, stream)
            ctx = t.alloc(H2 * D, stream)
            t.free(scores)
            t.free(qkv)
            ff = t.alloc(H2 * FF, stream)
            h2 = t.alloc(H2 * D, stream)
            t.free(ff)
            t.free(ctx)
            t.free(h)
            h = h2
        logits = t.alloc(4 * VOCAB, stream)
        t.free(h)
        t.free(logits)
        yield
    for kv in cache:
        for x in kv:
            t.free(x)


def gen_decoder(seed, requests, workers):
    rng = random.Random(seed)
    t = Trace()
    decoder_weights(t)
    per = [requests // workers + (1 if w < requests % workers else 0) for w in range(workers)]

    def worker(w):
        for _ in range(per[w]):
            prompt = int(math.exp(rng.uniform(math.log(16), math.log(2048))))
            yield from decoder_request(t, rng, w + 1, prompt, rng.randint(4, 48))

    interleave(rng, [worker(w) for w in range(workers)])
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workload", choices=("cnn", "decoder"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--requests", type=int, default=0, help="default: 96 (cnn), 32 (decoder)")
    ap.add_argument("--workers", type=int, default=3, help="workers, one stream each (default 3)")
    ap.add_argument("-o", "--output", default="-", help="file (.gz: compressed) or - for stdout")
    a = ap.parse_args()
    if a.workers < 1 or a.workers > 1023:
        ap.error("--workers takes 1 to 1023")
    gen = gen_cnn if a.workload == "cnn" else gen_decoder
    t = gen(a.seed, a.requests or (96 if a.workload == "cnn" else 32), a.workers)
    text = "# gen_serving.py %s --seed %d --requests %d --workers %d\n" % (
        a.workload, a.seed, a.requests or (96 if a.workload == "cnn" else 32), a.workers)
    text += "\n".join(t.lines) + "\n"
    if a.output == "-":
        sys.stdout.write(text)
    elif a.output.endswith(".gz"):
        with gzip.GzipFile(a.output, "wb", mtime=0) as f:  # mtime 0: the same bytes every time
            f.write(text.encode())
    else:
        with open(a.output, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
