#!/usr/bin/env python3
"""make_gpt2.py — a GPT-2 with random weights, written as the model file ggml's GPT-2 programs load.

Nothing is downloaded and nothing is converted: the file is written here, in
the layout examples/gpt-2/main-*.cpp read (gpt2_model_load), with numpy
only. ggml's own converter (convert-h5-to-ggml.py) does not fit the
transformers checkpoints of today: it stores the position embedding as
fp16 where the programs expect fp32, and c_attn and c_fc in the orientation
the programs refuse ("wrong shape in model file").

The file, every number a little-endian int32 unless said:
  magic 0x67676d6c; n_vocab, n_ctx, n_embd, n_head, n_layer, ftype
  (0: fp32 weights, 1: fp16);
  n_vocab again, then each token as a uint32 length and its bytes;
  then each tensor: n_dims, length of its name, its type (0 fp32, 1 fp16),
  ne[0..n_dims-1] (ne[0] the fastest-moving dimension), the name, and the
  elements (an array of shape (ne[1], ne[0]), row after row).
Tensors: model/ln_f/{g,b}, model/wte [n_embd, n_vocab] (also the output
head: no model/lm_head), model/wpe [n_embd, n_ctx] always fp32, and per
layer h<i>/ln_1/{g,b}, ln_2/{g,b}, attn/c_attn/{w [n_embd, 3 n_embd], b},
attn/c_proj/{w [n_embd, n_embd], b}, mlp/c_fc/{w [n_embd, 4 n_embd], b},
mlp/c_proj/{w [4 n_embd, n_embd], b}; 2-D weights in the file's ftype,
the rest fp32.

Weights as GPT-2 is initialised but wider: normal with standard deviation
0.1 (the residual projections 0.1 / sqrt(2 n_layer)), biases 0, layer-norm
gains 1, from a fixed seed; with GPT-2's 0.02, greedy decoding repeats one
token. The vocabulary is made up: the 256 bytes
(ids 0 to 255), then "<ID>" for every other id but the last, and
"<|endoftext|>" as the last. A prompt of plain text becomes one token per
byte; every generated token prints as its own "<ID>", so equal texts are
equal tokens.

Usage: make_gpt2.py OUTDIR [--size small|medium|large|xl|tiny] [--seed N]
                           [--vocab N] [--positions N] [--ftype f16|f32]
Writes OUTDIR/ggml-model.bin.
"""

import argparse
import os
import struct
import sys

SIZES = {  # n_embd, n_layer, n_head: GPT-2's four published shapes, and a tiny one for tests
    "small": (768, 12, 12), "medium": (1024, 24, 16), "large": (1280, 36, 20), "xl": (1600, 48, 25),
    "tiny": (64, 2, 4),
}
MAGIC = 0x67676D6C
# Five times GPT-2's 0.02: with 0.02 greedy decoding of a random model
# repeats one token, and equal texts from two ways would prove little.
STD = 0.1


def vocabulary(size):
    """The tokens as bytes, id by id."""
    words = [bytes([b]) for b in range(256)]
    words += [f"<{i}>".encode() for i in range(256, size - 1)]
    words.append(b"<|endoftext|>")
    return words


def tensors(np, rng, n_vocab, n_ctx, n_embd, n_layer, wtype):
    """(name, array) in the order written; 2-D weights already in wtype."""
    def normal(shape, std):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)

    def weight(ne0, ne1, std=STD):  # ggml's [ne0, ne1] is numpy's (ne1, ne0)
        return normal((ne1, ne0), std).astype(wtype)

    ones = lambda n: np.ones(n, dtype=np.float32)    # noqa: E731
    zeros = lambda n: np.zeros(n, dtype=np.float32)  # noqa: E731
    resid = STD / (2 * n_layer) ** 0.5
    yield "model/ln_f/g", ones(n_embd)
    yield "model/ln_f/b", zeros(n_embd)
    yield "model/wte", weight(n_embd, n_vocab)
    yield "model/wpe", normal((n_ctx, n_embd), STD)  # fp32 whatever the ftype
    for i in range(n_layer):
        h = f"model/h{i}"
        yield f"{h}/ln_1/g", ones(n_embd)
        yield f"{h}/ln_1/b", zeros(n_embd)
        yield f"{h}/ln_2/g", ones(n_embd)
        yield f"{h}/ln_2/b", zeros(n_embd)
        yield f"{h}/attn/c_attn/w", weight(n_embd, 3 * n_embd)
        yield f"{h}/attn/c_attn/b", zeros(3 * n_embd)
        yield f"{h}/attn/c_proj/w", weight(n_embd, n_embd, resid)
        yield f"{h}/attn/c_proj/b", zeros(n_embd)
        yield f"{h}/mlp/c_fc/w", weight(n_embd, 4 * n_embd)
        yield f"{h}/mlp/c_fc/b", zeros(4 * n_embd)
        yield f"{h}/mlp/c_proj/w", weight(4 * n_embd, n_embd, resid)
        yield f"{h}/mlp/c_proj/b", zeros(n_embd)


def write(path, np, n_vocab, n_ctx, n_embd, n_head, n_layer, ftype, seed):
    """Write the model file; returns the number of parameters."""
    if n_embd % n_head:
        raise ValueError(f"n_embd {n_embd} is not a multiple of n_head {n_head}")
    if n_vocab < 258:
        raise ValueError(f"a vocabulary of {n_vocab}: at least 258 (the 256 bytes, one <ID>, <|endoftext|>)")
    wtype = np.float16 if ftype == 1 else np.float32
    rng = np.random.default_rng(seed)
    params = 0
    tmp = path + ".part"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<7i", MAGIC, n_vocab, n_ctx, n_embd, n_head, n_layer, ftype))
        words = vocabulary(n_vocab)
        f.write(struct.pack("<i", len(words)))
        for w in words:
            f.write(struct.pack("<I", len(w)))
            f.write(w)
        for name, a in tensors(np, rng, n_vocab, n_ctx, n_embd, n_layer, wtype):
            a = np.ascontiguousarray(a)
            ne = list(reversed(a.shape))
            ttype = 1 if a.dtype == np.float16 else 0
            raw = name.encode()
            f.write(struct.pack(f"<3i{len(ne)}i", len(ne), len(raw), ttype, *ne))
            f.write(raw)
            f.write(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes())
            params += a.size
    os.replace(tmp, path)
    return params


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--size", choices=sorted(SIZES), default="small")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--positions", type=int, default=1024)
    ap.add_argument("--ftype", choices=("f16", "f32"), default="f16")
    args = ap.parse_args()
    try:
        import numpy as np
    except ImportError:
        print("make_gpt2: needs numpy (python3-numpy)", file=sys.stderr)
        return 1
    n_embd, n_layer, n_head = SIZES[args.size]
    os.makedirs(args.outdir, exist_ok=True)
    path = os.path.join(args.outdir, "ggml-model.bin")
    try:
        params = write(path, np, args.vocab, args.positions, n_embd, n_head, n_layer,
                       1 if args.ftype == "f16" else 0, args.seed)
    except (ValueError, OSError) as e:
        print(f"make_gpt2: {e}", file=sys.stderr)
        return 1
    print(f"make_gpt2: GPT-2 {args.size} ({params / 1e6:.0f}M parameters, random weights, seed {args.seed}, "
          f"{args.ftype}) in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
