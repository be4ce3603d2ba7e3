#!/usr/bin/env python3
"""gen_mixed.py — a mixed serving workload that no policy was tuned on, made
from gen_serving.py's models: five workers on their own streams (two CNNs,
each with its own batch-size distribution, and three decoders with short,
long or medium prompts), models loaded in bursts (the second CNN's and two
decoders' weights arrive only once the others have served a while).
Deterministic: the same output every time.

usage: gen_mixed.py OUTPUT (.gz: compressed)
"""
import gzip
import math
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_serving as g  # noqa: E402


def gen():
    rng = random.Random(2027)
    t = g.Trace()
    g.cnn_weights(t)

    def cnn(stream, n, sizes):
        for _ in range(n):
            yield from g.cnn_request(t, rng, stream, rng.choice(sizes))

    def dec(stream, n, lo, hi):
        g.decoder_weights(t)  # a burst: this worker's model comes with it
        for _ in range(n):
            prompt = int(math.exp(rng.uniform(math.log(lo), math.log(hi))))
            yield from g.decoder_request(t, rng, stream, prompt, rng.randint(2, 64))

    def later(gen, steps):
        for _ in range(steps):
            yield
        g.cnn_weights(t)
        yield from gen

    workers = [cnn(1, 40, (1, 2, 4, 8)), later(cnn(2, 24, (16, 32, 48, 96)), 200),
               dec(3, 16, 8, 256), later(dec(4, 10, 512, 4096), 400), dec(5, 20, 16, 1024)]
    g.interleave(rng, workers)
    return "# gen_mixed.py\n" + "\n".join(t.lines) + "\n"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    text = gen()
    if sys.argv[1].endswith(".gz"):
        with gzip.GzipFile(sys.argv[1], "wb", mtime=0) as f:
            f.write(text.encode())
    else:
        with open(sys.argv[1], "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
