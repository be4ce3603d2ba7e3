#!/usr/bin/env python3
"""test_make_gpt2.py — integrations/ggml/make_gpt2.py writes the file ggml's GPT-2 programs load.

Reads the file back as examples/gpt-2/main-backend.cpp's gpt2_model_load
does, and holds it to what that loader asks (the checks that refused the
converted checkpoints: every tensor's name known, its element count, its
[ne0, ne1] and its type's size), for fp16 and fp32 files of the tiny shape:
magic, hyperparameters, vocabulary (bytes, <ID>, <|endoftext|>), each
tensor once, wpe fp32 whatever the ftype, nothing after the last tensor.
Bad arguments end with a message and status 1. Exits 77 without numpy.

Usage: test_make_gpt2.py PATH/TO/make_gpt2.py
"""

import os
import struct
import subprocess
import sys
import tempfile

MAKE = sys.argv[1]
failures = 0


def check(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what)
    failures += not ok


def expected(n_vocab, n_ctx, n_embd, n_layer, wtype):
    """name -> ([ne0, ne1], type), as gpt2_model_load makes its tensors."""
    t = {"model/ln_f/g": ([n_embd], 0), "model/ln_f/b": ([n_embd], 0),
         "model/wte": ([n_embd, n_vocab], wtype), "model/wpe": ([n_embd, n_ctx], 0)}
    for i in range(n_layer):
        h = f"model/h{i}"
        for n in ("ln_1/g", "ln_1/b", "ln_2/g", "ln_2/b"):
            t[f"{h}/{n}"] = ([n_embd], 0)
        t[f"{h}/attn/c_attn/w"] = ([n_embd, 3 * n_embd], wtype)
        t[f"{h}/attn/c_attn/b"] = ([3 * n_embd], 0)
        t[f"{h}/attn/c_proj/w"] = ([n_embd, n_embd], wtype)
        t[f"{h}/attn/c_proj/b"] = ([n_embd], 0)
        t[f"{h}/mlp/c_fc/w"] = ([n_embd, 4 * n_embd], wtype)
        t[f"{h}/mlp/c_fc/b"] = ([4 * n_embd], 0)
        t[f"{h}/mlp/c_proj/w"] = ([4 * n_embd, n_embd], wtype)
        t[f"{h}/mlp/c_proj/b"] = ([n_embd], 0)
    return t


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    at = 0

    def take(fmt):
        nonlocal at
        v = struct.unpack_from("<" + fmt, data, at)
        at += struct.calcsize("<" + fmt)
        return v

    magic, n_vocab, n_ctx, n_embd, n_head, n_layer, ftype = take("7i")
    (count,) = take("i")
    words = []
    for _ in range(count):
        (n,) = take("I")
        words.append(data[at:at + n])
        at += n
    tensors = []
    while at < len(data):
        n_dims, length, ttype = take("3i")
        ne = list(take(f"{n_dims}i"))
        name = data[at:at + length].decode()
        at += length
        size = (2 if ttype == 1 else 4)
        for d in ne:
            size *= d
        tensors.append((name, ne, ttype, data[at:at + size]))
        at += size
    return {"magic": magic, "hparams": (n_vocab, n_ctx, n_embd, n_head, n_layer, ftype), "vocab_count": count,
            "words": words, "tensors": tensors, "end": at, "size": len(data)}


def main():
    try:
        import numpy as np
    except ImportError:
        print("SKIP: no numpy for /usr/bin/python3 (python3-numpy)")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        for ftype, wtype in (("f16", 1), ("f32", 0)):
            out = os.path.join(tmp, ftype)
            r = subprocess.run([sys.executable, MAKE, out, "--size", "tiny", "--vocab", "300", "--positions", "32",
                                "--ftype", ftype], capture_output=True, text=True)
            check(r.returncode == 0 and "ggml-model.bin" in r.stdout, f"{ftype}: written ({r.stdout.strip()}"
                  f"{r.stderr.strip()})")
            if r.returncode:
                continue
            m = read(os.path.join(out, "ggml-model.bin"))
            check(m["magic"] == 0x67676D6C, f"{ftype}: magic")
            check(m["hparams"] == (300, 32, 64, 4, 2, wtype), f"{ftype}: hyperparameters {m['hparams']}")
            w = m["words"]
            check(m["vocab_count"] == 300 and len(w) == 300, f"{ftype}: 300 tokens")
            check(w[:256] == [bytes([b]) for b in range(256)] and w[256] == b"<256>" and w[298] == b"<298>" and
                  w[299] == b"<|endoftext|>", f"{ftype}: the bytes, <ID>, <|endoftext|> last")
            want = expected(300, 32, 64, 2, wtype)
            names = [t[0] for t in m["tensors"]]
            check(sorted(names) == sorted(want) and len(set(names)) == len(names),
                  f"{ftype}: every tensor the loader makes, once ({len(names)} of {len(want)})")
            bad = [f"{n} {ne} type {tt}" for n, ne, tt, _ in m["tensors"] if n in want and want[n] != (ne, tt)]
            check(not bad, f"{ftype}: shapes and types as the loader's tensors" + (f": {bad[:3]}" if bad else ""))
            check(m["end"] == m["size"], f"{ftype}: nothing after the last tensor ({m['end']} of {m['size']} bytes)")
            t = {n: (ne, tt, raw) for n, ne, tt, raw in m["tensors"]}
            g = np.frombuffer(t["model/ln_f/g"][2], dtype="<f4")
            check(bool((g == 1).all()), f"{ftype}: layer-norm gains 1")
            wte = np.frombuffer(t["model/wte"][2], dtype="<f2" if wtype else "<f4").astype(np.float64)
            check(bool(np.isfinite(wte).all()) and 0.05 < wte.std() < 0.2,
                  f"{ftype}: random weights, finite, std {wte.std():.3f}")
        # the same seed, the same file; another seed, another
        a, b, c = (os.path.join(tmp, n) for n in ("a", "b", "c"))
        for d, seed in ((a, "7"), (b, "7"), (c, "8")):
            subprocess.run([sys.executable, MAKE, d, "--size", "tiny", "--vocab", "300", "--positions", "32",
                            "--seed", seed], check=True, capture_output=True)
        blob = {d: open(os.path.join(d, "ggml-model.bin"), "rb").read() for d in (a, b, c)}
        check(blob[a] == blob[b] and blob[a] != blob[c], "a seed gives one file; another seed another")
        for args, what in ((["--vocab", "100"], "a vocabulary too small"),
                           (["--positions", "x"], "positions not a number")):
            r = subprocess.run([sys.executable, MAKE, os.path.join(tmp, "bad"), "--size", "tiny", *args],
                               capture_output=True, text=True)
            check(r.returncode != 0 and r.stderr.strip() != "", f"{what}: refused with a message "
                  f"({r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ''})")
    print(f"{failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
