#!/usr/bin/env python3
"""make_gpt2.py — a GPT-2 with random weights, saved where ggml's converter reads it.

Nothing is downloaded: the model is built from its configuration with
transformers (GPT2Model, random weights from a fixed seed) and saved with
save_pretrained; the vocabulary is made up, in the byte-level form GPT-2's
files use, so that ggml's convert-h5-to-ggml.py reads this directory as it
reads a downloaded checkpoint: vocab.json holds the 256 byte tokens (ids 0
to 255, each byte as GPT-2's byte encoder writes it) and then "<ID>" for
every other id but the last, and added_tokens.json <|endoftext|> as the
last id. A prompt of plain text becomes one token per byte; every
generated token prints as its own "<ID>", so equal texts are equal tokens.

Usage: make_gpt2.py OUTDIR [--size small|medium|large|xl] [--seed N]
"""

import argparse
import json
import os
import sys

SIZES = {  # n_embd, n_layer, n_head: GPT-2's four published shapes
    "small": (768, 12, 12), "medium": (1024, 24, 16), "large": (1280, 36, 20), "xl": (1600, 48, 25),
}


def bytes_to_unicode():
    """GPT-2's byte encoder: every byte as a printable character (the same
    table ggml's converter inverts)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def vocabulary(size):
    enc = bytes_to_unicode()
    vocab = {enc[b]: b for b in range(256)}
    for i in range(256, size - 1):
        vocab[f"<{i}>"] = i
    return vocab, {"<|endoftext|>": size - 1}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--size", choices=sorted(SIZES), default="small")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--positions", type=int, default=1024)
    args = ap.parse_args()

    import torch
    import transformers

    n_embd, n_layer, n_head = SIZES[args.size]
    cfg = transformers.GPT2Config(vocab_size=args.vocab, n_positions=args.positions, n_embd=n_embd,
                                  n_layer=n_layer, n_head=n_head)
    torch.manual_seed(args.seed)
    model = transformers.GPT2Model(cfg).eval()
    os.makedirs(args.outdir, exist_ok=True)
    model.save_pretrained(args.outdir)
    vocab, added = vocabulary(args.vocab)
    assert len(vocab) + len(added) == args.vocab
    with open(os.path.join(args.outdir, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(args.outdir, "added_tokens.json"), "w", encoding="utf-8") as f:
        json.dump(added, f)
    params = sum(p.numel() for p in model.parameters())
    print(f"make_gpt2: GPT-2 {args.size} ({params / 1e6:.0f}M parameters, random weights, seed {args.seed}) "
          f"in {args.outdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
