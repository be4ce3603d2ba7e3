#!/usr/bin/env python3
"""Record real PyTorch GPU allocation traces for carve's fragmentation laboratory.

    python3 bench/traces/record_torch.py --out DIR [--quick] [--workloads a,b] [--max-events N]

Runs real PyTorch workloads on the GPU with random weights (nothing is
downloaded) and writes, per workload, DIR/NAME.csv.gz (the trace) and
DIR/NAME.json (its provenance). Workloads:

  torch_llm_train       LLaMA-style decoder (transformers config, random init),
                        AdamW, bf16 autocast, batch size and sequence length
                        drawn per step from a seeded generator
  torch_llm_decode      the same architecture in bf16, token-by-token decoding
                        with a growing KV cache (DynamicCache), prompts of
                        different lengths, batch size varying per request
  torch_resnet50_train  torchvision ResNet-50 (random weights), SGD, bf16
                        autocast, batch size and image size varying per step
  torch_cnn_infer       image classification serving: ResNet-50 in eval mode
                        under inference_mode, fp16 autocast, uint8 images
                        copied in and normalised on the GPU, top-5 copied
                        out, batch size varying per request
  torch_encoder_serving BERT-base encoder (transformers BertConfig(), random
                        init) in fp16 under inference_mode: per request a
                        random batch size and an unbucketed padded sequence
                        length, attention mask, mean pooling
  torch_vit_train       ViT-B/16 (timm vit_base_patch16_224, pretrained=False;
                        torchvision vit_b_16 if timm is missing), AdamW, bf16
                        autocast, batch size varying per step
  torch_two_models      one process serving two models: the LLaMA-style
                        decoder's token-by-token generation with ResNet-50
                        inference requests served between its decode steps

Recording: PyTorch's own allocator instrumentation,
torch.cuda.memory._record_memory_history(context=None), which logs every call
into the caching allocator without changing it. After every step the history
is taken with torch.cuda.memory._snapshot() and cleared, so the ring buffer
never wraps (a chunk that fills it is an error, not a silent loss). Each
'alloc' entry becomes "a,<id>,<size>[,<stream>]" with a fresh id and the
address remembered; 'free_requested' (or 'free_completed' when no request was
seen for that address) becomes "f,<id>". Sizes are what the entries carry: the
bytes requested from the caching allocator, before PyTorch rounds them to its
512 B blocks (the sidecar's checks.sizes_are confirms which, from PyTorch's
own counters, and it counts the sizes that are multiples of 512). Streams are
numbered 0, 1, ... in order of appearance.

Checks, at the end of each workload: live allocations and live bytes in the
trace equal PyTorch's active.all.current and requested_bytes.all.current
(deltas from the start), and the trace's peak of live bytes equals
requested_bytes.all.peak. Mismatches are reported, not hidden.

Each workload runs in a process of its own, so that the caching allocator
starts empty and max_memory_reserved is that workload's. A workload whose
Python packages (transformers, torchvision; timm is optional) cannot be
imported is skipped with a message saying which, before anything is recorded
or overwritten, and the run exits non-zero.
"""
import argparse
import datetime
import gc
import gzip
import hashlib
import json
import os
import platform
import random
import subprocess
import sys
import time

# New workloads go at the end: a workload's seed is --seed plus its index here.
WORKLOADS = ["torch_llm_train", "torch_llm_decode", "torch_resnet50_train", "torch_cnn_infer",
             "torch_encoder_serving", "torch_vit_train", "torch_two_models"]

# Python packages each workload imports; "a|b" is satisfied by either.
REQUIRES = {
    "torch_llm_train": ["transformers"],
    "torch_llm_decode": ["transformers"],
    "torch_resnet50_train": ["torchvision"],
    "torch_cnn_infer": ["torchvision"],
    "torch_encoder_serving": ["transformers"],
    "torch_vit_train": ["timm|torchvision"],
    "torch_two_models": ["transformers", "torchvision"],
}


# ---------------------------------------------------------------------------
# Recorder: allocator history -> trace lines


class Recorder:
    def __init__(self, torch, path, name, device_index, max_entries, max_events, max_seconds):
        self.torch = torch
        self.path = path
        self.name = name
        self.dev = device_index
        self.max_entries = max_entries
        self.max_events = max_events
        self.max_seconds = max_seconds
        self.f = None
        self.next_id = 0
        self.live = {}  # addr -> (id, size)
        self.streams = {}  # CUDA stream handle -> small integer
        self.live_bytes = 0
        self.peak_bytes = 0
        self.nalloc = 0
        self.nfree = 0
        self.events = 0
        self.sizes_512 = 0
        self.repaired = 0  # alloc at an address still live: a free was lost
        self.unmatched_frees = 0  # free of an address allocated before recording
        self.completed_only = 0  # frees seen only as free_completed
        self.ooms = 0
        self.entries = 0
        self.chunks = 0
        self.max_chunk = 0
        self.t0 = None
        self.budget_hit = False

    def _set_history(self, enabled):
        mem = self.torch.cuda.memory
        if enabled:
            mem._record_memory_history(enabled="all", context=None, stacks="python",
                                       max_entries=self.max_entries, clear_history=True)
        else:
            mem._record_memory_history(enabled=None)

    def start(self, header):
        self.f = gzip.open(self.path, "wt", compresslevel=9, encoding="ascii")
        for line in header:
            self.f.write("# " + line + "\n")
        self.t0 = time.monotonic()
        self._set_history(True)

    def flush(self):
        """Take the history since the last flush, clear it, convert it."""
        gc_was = gc.isenabled()
        gc.disable()  # no collection (and no tensor freed) between snapshot and clear
        try:
            snap = self.torch.cuda.memory._snapshot()
            self._set_history(True)
        finally:
            if gc_was:
                gc.enable()
        traces = snap.get("device_traces") or []
        entries = traces[self.dev] if self.dev < len(traces) else []
        del snap
        n = len(entries)
        self.chunks += 1
        self.entries += n
        self.max_chunk = max(self.max_chunk, n)
        if n >= self.max_entries:
            raise RuntimeError(f"{self.name}: {n} history entries in one chunk reached max_entries="
                               f"{self.max_entries}; events may be lost (raise --max-entries)")
        out = []
        live = self.live
        for e in entries:
            act = e.get("action")
            if act == "alloc":
                addr = e["addr"]
                size = int(e["size"])
                if addr in live:  # its free was never seen: close it first
                    self.repaired += 1
                    out.append(self._free(addr))
                h = e.get("stream", 0)
                sid = self.streams.get(h)
                if sid is None:
                    sid = self.streams[h] = len(self.streams)
                i = self.next_id
                self.next_id += 1
                live[addr] = (i, size)
                self.nalloc += 1
                self.live_bytes += size
                if self.live_bytes > self.peak_bytes:
                    self.peak_bytes = self.live_bytes
                if size % 512 == 0:
                    self.sizes_512 += 1
                out.append(f"a,{i},{size},{sid}\n" if sid else f"a,{i},{size}\n")
            elif act == "free_requested":
                addr = e["addr"]
                if addr in live:
                    out.append(self._free(addr))
                else:
                    self.unmatched_frees += 1
            elif act == "free_completed":
                addr = e["addr"]
                if addr in live:  # the request itself was not recorded
                    self.completed_only += 1
                    out.append(self._free(addr))
            elif act == "oom":
                self.ooms += 1
        self.events += len(out)
        self.f.write("".join(out))

    def _free(self, addr):
        i, size = self.live.pop(addr)
        self.nfree += 1
        self.live_bytes -= size
        return f"f,{i}\n"

    def over_budget(self):
        if (self.events >= self.max_events or
                time.monotonic() - self.t0 >= self.max_seconds):
            self.budget_hit = True
        return self.budget_hit

    def stop(self):
        self.flush()
        self._set_history(False)
        self.f.close()
        self.f = None


# ---------------------------------------------------------------------------
# Workloads. Each builds its model on the CPU, moves it to the GPU (those
# allocations are in the trace), runs steps until its schedule or the
# recorder's budget is exhausted, and returns its parameters.


def llama_model(torch, cfg_kwargs):
    import transformers
    from transformers import AutoModelForCausalLM, LlamaConfig

    cfg = LlamaConfig(**cfg_kwargs)
    try:
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
    except (TypeError, ValueError):
        model = AutoModelForCausalLM.from_config(cfg)
    attn = getattr(model.config, "_attn_implementation", None)
    nparams = sum(p.numel() for p in model.parameters())
    return model, {"transformers": transformers.__version__, "attn_implementation": attn,
                   "params": nparams, "config": cfg_kwargs}


LLAMA_SMALL = dict(vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=8,
                   num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=4096,
                   tie_word_embeddings=False)


def run_llm_train(torch, rec, rng, quick):
    dev = torch.device("cuda")
    model, info = llama_model(torch, LLAMA_SMALL)
    model.to(dev)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    batches = [1, 2, 4, 6, 8, 12, 16]
    seqs = [128, 192, 256, 384, 512, 768, 1024]
    max_tokens = 12288
    steps = 12 if quick else 200
    schedule = []
    for _ in range(steps):
        while True:
            b, s = rng.choice(batches), rng.choice(seqs)
            if b * s <= max_tokens:
                break
        ids = torch.randint(0, LLAMA_SMALL["vocab_size"], (b, s), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        del out, ids
        schedule.append([b, s])
        rec.flush()
        if rec.over_budget():
            break
    torch.cuda.synchronize()
    info.update({"optimizer": "AdamW (foreach)", "precision": "fp32 weights, bf16 autocast",
                 "batch_choices": batches, "seq_choices": seqs, "max_tokens_per_step": max_tokens,
                 "steps_planned": steps, "steps_run": len(schedule), "schedule_batch_seq": schedule})
    return info, (model, opt)


def llama_for_decoding(torch, dev):
    """The small LLaMA in bf16 on dev, in eval mode, and its description."""
    model, info = llama_model(torch, LLAMA_SMALL)
    model.to(dtype=torch.bfloat16)
    model.to(dev)
    model.eval()
    return model, info


def run_llm_decode(torch, rec, rng, quick):
    dev = torch.device("cuda")
    model, info = llama_for_decoding(torch, dev)
    batches = [1, 2, 4, 8, 16, 32, 64]
    rounds = 3 if quick else 40
    schedule = []
    keep = {"logits_to_keep": 1}
    with torch.inference_mode():
        for _ in range(rounds):
            b = rng.choice(batches)
            prompt = rng.randint(16, 1024)
            new = rng.randint(16, 96) if quick else rng.randint(32, 256)
            ids = torch.randint(0, LLAMA_SMALL["vocab_size"], (b, prompt), device=dev)
            try:
                out = model(input_ids=ids, use_cache=True, **keep)
            except TypeError:  # a release without logits_to_keep
                keep = {}
                out = model(input_ids=ids, use_cache=True)
            past = out.past_key_values
            nxt = out.logits[:, -1:].argmax(-1)
            del out, ids
            for _ in range(new):
                out = model(input_ids=nxt, past_key_values=past, use_cache=True, **keep)
                past = out.past_key_values
                nxt = out.logits[:, -1:].argmax(-1)
                del out
            del past, nxt
            schedule.append([b, prompt, new])
            rec.flush()
            if rec.over_budget():
                break
    torch.cuda.synchronize()
    info.update({"precision": "bf16 weights", "cache": "transformers default (DynamicCache)",
                 "greedy": True, "batch_choices": batches, "prompt_range": [16, 1024],
                 "new_tokens_range": [16, 96] if quick else [32, 256], "logits_to_keep": bool(keep),
                 "rounds_planned": rounds, "rounds_run": len(schedule),
                 "schedule_batch_prompt_new": schedule})
    return info, (model,)


def run_resnet50_train(torch, rec, rng, quick):
    import torchvision

    dev = torch.device("cuda")
    model = torchvision.models.resnet50(weights=None)
    model.to(dev, memory_format=torch.channels_last)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    batches = [16, 32, 48, 64, 96, 128]
    sizes = [160, 192, 224, 256]
    steps = 8 if quick else 150
    schedule = []
    for _ in range(steps):
        b, r = rng.choice(batches), rng.choice(sizes)
        x = torch.randn(b, 3, r, r, device=dev).contiguous(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (b,), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss, x, y
        schedule.append([b, r])
        rec.flush()
        if rec.over_budget():
            break
    torch.cuda.synchronize()
    info = {"torchvision": torchvision.__version__, "model": "resnet50(weights=None)",
            "params": sum(p.numel() for p in model.parameters()),
            "optimizer": "SGD momentum 0.9 (foreach)", "precision": "fp32 weights, bf16 autocast",
            "memory_format": "channels_last", "cudnn_benchmark": torch.backends.cudnn.benchmark,
            "batch_choices": batches, "image_size_choices": sizes, "steps_planned": steps,
            "steps_run": len(schedule), "schedule_batch_size": schedule}
    return info, (model, opt)


# Image-classification serving, shared by torch_cnn_infer and torch_two_models:
# decoded images arrive as uint8 HWC in pinned host memory (the pinned pool
# belongs to PyTorch's host allocator, not to the trace), are copied to the
# GPU, converted and normalised there, classified under autocast, and the
# top-5 goes back to the host (which synchronises, as a reply would).
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def image_inputs(torch, dev, max_batch, res, dtype):
    host = torch.randint(0, 256, (max_batch, res, res, 3), dtype=torch.uint8).pin_memory()
    mean = torch.tensor(IMAGENET_MEAN, device=dev, dtype=dtype).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD, device=dev, dtype=dtype).view(1, 3, 1, 1)
    return host, mean, std


def cnn_request(torch, model, host, mean, std, b, dtype):
    x = host[:b].to("cuda", non_blocking=True)  # uint8 NHWC
    x = x.permute(0, 3, 1, 2).to(dtype)  # NCHW view of NHWC memory: channels_last
    x.div_(255).sub_(mean).div_(std)
    with torch.autocast("cuda", dtype=dtype):
        logits = model(x)
    del x
    top = logits.float().softmax(-1).topk(5, dim=-1)
    del logits
    return top.values.cpu(), top.indices.cpu()


def run_cnn_infer(torch, rec, rng, quick):
    import torchvision

    dev = torch.device("cuda")
    model = torchvision.models.resnet50(weights=None)
    model.to(dev, memory_format=torch.channels_last)
    model.eval()
    dtype = torch.float16
    batches = [1, 4, 8, 16, 32, 64]
    res = 224
    requests = 10 if quick else 600
    host, mean, std = image_inputs(torch, dev, max(batches), res, dtype)
    schedule = []
    with torch.inference_mode():
        for _ in range(requests):
            b = rng.choice(batches)
            cnn_request(torch, model, host, mean, std, b, dtype)
            schedule.append(b)
            rec.flush()
            if rec.over_budget():
                break
    torch.cuda.synchronize()
    info = {"torchvision": torchvision.__version__, "model": "resnet50(weights=None), eval",
            "params": sum(p.numel() for p in model.parameters()),
            "precision": "fp32 weights, fp16 autocast, torch.inference_mode",
            "memory_format": "channels_last", "cudnn_benchmark": torch.backends.cudnn.benchmark,
            "request": ("uint8 NHWC batch from pinned host memory -> GPU, to fp16, normalised in "
                        "place, forward, softmax + top-5 copied back"),
            "image_size": res, "batch_choices": batches, "requests_planned": requests,
            "requests_run": len(schedule), "schedule_batch": schedule}
    return info, (model,)


def run_encoder_serving(torch, rec, rng, quick):
    import transformers
    from transformers import AutoModel, BertConfig

    dev = torch.device("cuda")
    cfg = BertConfig()  # BERT-base: 12 layers, hidden 768, 12 heads, vocabulary 30522
    try:
        model = AutoModel.from_config(cfg, attn_implementation="sdpa")
    except (TypeError, ValueError):
        model = AutoModel.from_config(cfg)
    model.to(dtype=torch.float16)
    model.to(dev)
    model.eval()
    vocab = cfg.vocab_size
    batch_range = [1, 32]
    seq_range = [16, 512]
    requests = 10 if quick else 700
    schedule = []
    with torch.inference_mode():
        for _ in range(requests):
            b = rng.randint(*batch_range)
            s = rng.randint(*seq_range)  # padded to the longest sequence, no bucketing
            lens = [s] + [rng.randint(1, s) for _ in range(b - 1)]
            rng.shuffle(lens)
            # What a tokenizer hands over: int64 ids, mask and token types on the host.
            mask = (torch.arange(s)[None, :] < torch.tensor(lens)[:, None]).long()
            ids = torch.randint(1000, vocab, (b, s)).masked_fill_(mask == 0, 0)
            ids[:, 0] = 101  # [CLS]
            types = torch.zeros_like(ids)
            ids, mask, types = ids.to(dev), mask.to(dev), types.to(dev)
            out = model(input_ids=ids, attention_mask=mask, token_type_ids=types)
            h = out.last_hidden_state
            del out
            m = mask.unsqueeze(-1).to(h.dtype)
            emb = (h * m).sum(1) / m.sum(1).clamp(min=1)  # mean pooling over real tokens
            emb = torch.nn.functional.normalize(emb.float(), dim=-1).cpu()
            del h, m, ids, mask, types, emb
            schedule.append([b, s])
            rec.flush()
            if rec.over_budget():
                break
    torch.cuda.synchronize()
    info = {"transformers": transformers.__version__, "model": "BertModel(BertConfig()), eval",
            "attn_implementation": getattr(model.config, "_attn_implementation", None),
            "params": sum(p.numel() for p in model.parameters()),
            "precision": "fp16 weights, torch.inference_mode",
            "request": ("ids, attention mask, token types built on the host and copied in, "
                        "forward, masked mean pooling, L2-normalised fp32 embeddings copied back"),
            "batch_range": batch_range, "seq_range": seq_range,
            "padding": "right, to the longest sequence of the request (one has the full length, "
                       "the others 1..s)",
            "requests_planned": requests, "requests_run": len(schedule),
            "schedule_batch_seq": schedule}
    return info, (model,)


def run_vit_train(torch, rec, rng, quick):
    dev = torch.device("cuda")
    try:
        import timm

        model = timm.create_model("vit_base_patch16_224", pretrained=False)
        src = {"timm": timm.__version__,
               "model": "timm.create_model('vit_base_patch16_224', pretrained=False)"}
    except Exception as e:  # timm missing or broken: torchvision's ViT-B/16
        import torchvision

        print(f"record_torch: torch_vit_train: timm not usable ({type(e).__name__}: {e}); "
              "using torchvision vit_b_16(weights=None)", flush=True)
        model = torchvision.models.vit_b_16(weights=None)
        src = {"torchvision": torchvision.__version__, "model": "torchvision vit_b_16(weights=None)",
               "timm_error": f"{type(e).__name__}: {e}"}
    model.to(dev)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    batches = [32, 40, 48, 56, 64]
    res = 224
    steps = 6 if quick else 120
    schedule = []
    for _ in range(steps):
        b = rng.choice(batches)
        x = torch.randn(b, 3, res, res, device=dev)
        y = torch.randint(0, 1000, (b,), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss, x, y
        schedule.append(b)
        rec.flush()
        if rec.over_budget():
            break
    torch.cuda.synchronize()
    info = dict(src)
    info.update({"params": sum(p.numel() for p in model.parameters()),
                 "optimizer": "AdamW (foreach), weight decay 0.05",
                 "loss": "cross entropy, label smoothing 0.1", "grad_clip": 1.0,
                 "precision": "fp32 weights, bf16 autocast", "image_size": res,
                 "batch_choices": batches, "steps_planned": steps, "steps_run": len(schedule),
                 "schedule_batch": schedule})
    return info, (model, opt)


def run_two_models(torch, rec, rng, quick):
    import torchvision

    dev = torch.device("cuda")
    llm, info = llama_for_decoding(torch, dev)
    cnn = torchvision.models.resnet50(weights=None)
    cnn.to(dev, memory_format=torch.channels_last)
    cnn.eval()
    cnn_dtype = torch.float16
    llm_batches = [1, 2, 4, 8, 16]
    prompt_range = [16, 512]
    new_range = [8, 16] if quick else [16, 64]
    cnn_batches = [1, 4, 8, 16, 32]
    res = 224
    p_cnn = 0.3  # chance that an image request is served before a decode step
    idle_cnn = [0, 2]  # image requests served between two generations
    llm_requests = 2 if quick else 8
    host, mean, std = image_inputs(torch, dev, max(cnn_batches), res, cnn_dtype)
    schedule = []  # ["llm", batch, prompt, new] | ["cnn", batch, decode step or -1]
    n_llm = n_cnn = 0
    keep = {"logits_to_keep": 1}

    def image(at):
        nonlocal n_cnn
        b2 = rng.choice(cnn_batches)
        cnn_request(torch, cnn, host, mean, std, b2, cnn_dtype)
        schedule.append(["cnn", b2, at])
        n_cnn += 1

    with torch.inference_mode():
        for _ in range(llm_requests):
            for _ in range(rng.randint(*idle_cnn)):
                image(-1)
            b = rng.choice(llm_batches)
            prompt = rng.randint(*prompt_range)
            new = rng.randint(*new_range)
            schedule.append(["llm", b, prompt, new])
            ids = torch.randint(0, LLAMA_SMALL["vocab_size"], (b, prompt), device=dev)
            try:
                out = llm(input_ids=ids, use_cache=True, **keep)
            except TypeError:  # a release without logits_to_keep
                keep = {}
                out = llm(input_ids=ids, use_cache=True)
            past = out.past_key_values
            nxt = out.logits[:, -1:].argmax(-1)
            del out, ids
            for t in range(new):
                if rng.random() < p_cnn:  # the KV cache stays live meanwhile
                    image(t)
                out = llm(input_ids=nxt, past_key_values=past, use_cache=True, **keep)
                past = out.past_key_values
                nxt = out.logits[:, -1:].argmax(-1)
                del out
            del past, nxt
            n_llm += 1
            rec.flush()
            if rec.over_budget():
                break
    torch.cuda.synchronize()
    info.update({"llm": "LLaMA-style decoder of torch_llm_decode (LLAMA_SMALL), bf16 weights, "
                        "greedy, DynamicCache",
                 "cnn": "torchvision resnet50(weights=None), eval, channels_last, fp32 weights, "
                        "fp16 autocast, requests as in torch_cnn_infer",
                 "torchvision": torchvision.__version__,
                 "cnn_params": sum(p.numel() for p in cnn.parameters()),
                 "logits_to_keep": bool(keep), "llm_batch_choices": llm_batches,
                 "prompt_range": prompt_range, "new_tokens_range": new_range,
                 "cnn_batch_choices": cnn_batches, "image_size": res,
                 "cnn_probability_per_decode_step": p_cnn,
                 "cnn_requests_between_generations": idle_cnn,
                 "llm_requests_planned": llm_requests, "llm_requests_run": n_llm,
                 "cnn_requests_run": n_cnn, "schedule_llm_cnn": schedule})
    return info, (llm, cnn)


RUNNERS = {
    "torch_llm_train": run_llm_train,
    "torch_llm_decode": run_llm_decode,
    "torch_resnet50_train": run_resnet50_train,
    "torch_cnn_infer": run_cnn_infer,
    "torch_encoder_serving": run_encoder_serving,
    "torch_vit_train": run_vit_train,
    "torch_two_models": run_two_models,
}


# ---------------------------------------------------------------------------


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def missing_packages(name):
    """The REQUIRES entries of NAME that cannot be imported, with the reason."""
    import importlib

    missing = []
    for need in REQUIRES.get(name, []):
        mods = need.split("|")
        why = []
        for mod in mods:
            try:
                importlib.import_module(mod)
                break
            except Exception as e:  # ImportError, or a package broken against this torch
                why.append((f"{mod}: " if len(mods) > 1 else "") + f"{type(e).__name__}: {e}")
        else:
            missing.append(" or ".join(mods) + " (" + "; ".join(why) + ")")
    return missing


SKIPPED = 4  # worker exit status: a package the workload needs is missing


def worker(name, args):
    import torch

    if not torch.cuda.is_available():
        print("record_torch: no CUDA device", file=sys.stderr)
        return 1
    missing = missing_packages(name)
    if missing:  # before anything in --out is removed or overwritten
        msg = (f"record_torch: {name} skipped, nothing recorded: it needs the Python package(s) "
               f"{', '.join(missing)}; install them, or leave {name} out of --workloads")
        print(msg, flush=True)
        return SKIPPED
    torch.cuda.init()
    dev_index = args.device
    torch.cuda.set_device(dev_index)
    seed = args.seed + WORKLOADS.index(name)
    torch.manual_seed(seed)
    rng = random.Random(seed)
    props = torch.cuda.get_device_properties(dev_index)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    path = os.path.join(args.out, name + ".csv.gz")
    stale = os.path.join(args.out, name + ".json")
    if os.path.exists(stale):  # written again only if this recording completes
        os.remove(stale)
    rec = Recorder(torch, path, name, dev_index, args.max_entries,
                   args.max_events if args.max_events else (60000 if args.quick else 400000),
                   args.max_seconds)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats(dev_index)
    s0 = torch.cuda.memory_stats(dev_index)
    rec.start([
        f"carve allocation trace: {name}",
        f"recorded {date} on {props.name} with PyTorch {torch.__version__} "
        f"(CUDA {torch.version.cuda}) by bench/traces/record_torch.py, seed {seed}",
        "a,<id>,<size>[,<stream>] allocates size bytes (as requested from PyTorch's caching "
        "allocator); f,<id> frees; provenance in the .json of the same name",
    ])
    t0 = time.monotonic()
    info, keep_alive = RUNNERS[name](torch, rec, rng, args.quick)
    rec.flush()
    s1 = torch.cuda.memory_stats(dev_index)
    rec.stop()
    elapsed = time.monotonic() - t0
    max_alloc = torch.cuda.max_memory_allocated(dev_index)
    max_reserved = torch.cuda.max_memory_reserved(dev_index)
    del keep_alive

    def d(key):
        return int(s1.get(key, 0)) - int(s0.get(key, 0))

    # The history's sizes are expected to be the requested ones; if a release
    # logs rounded block sizes instead, the trace matches the allocated_bytes
    # counters, and the sidecar says so.
    live_trace = len(rec.live)
    live_torch = d("active.all.current")
    bytes_trace = rec.live_bytes
    bytes_req = d("requested_bytes.all.current")
    bytes_alloc = d("allocated_bytes.all.current")
    peak_req = int(s1.get("requested_bytes.all.peak", 0))
    peak_alloc = int(s1.get("allocated_bytes.all.peak", 0))
    if bytes_trace == bytes_req and rec.peak_bytes == peak_req:
        sizes_are = "requested"
    elif bytes_trace == bytes_alloc and rec.peak_bytes == peak_alloc:
        sizes_are = "rounded (allocated block sizes)"
    else:
        sizes_are = "unknown (matches neither requested nor allocated counters)"
    checks = {
        "live_allocations_trace": live_trace,
        "live_allocations_torch": live_torch,
        "live_allocations_match": live_trace == live_torch,
        "live_bytes_trace": bytes_trace,
        "live_bytes_torch_requested": bytes_req,
        "live_bytes_torch_allocated": bytes_alloc,
        "live_bytes_match": bytes_trace in (bytes_req, bytes_alloc),
        "peak_trace": rec.peak_bytes,
        "peak_torch_requested": peak_req,
        "peak_torch_allocated": peak_alloc,
        "peak_match": rec.peak_bytes in (peak_req, peak_alloc),
        "sizes_are": sizes_are,
        "repaired_lost_frees": rec.repaired,
        "frees_of_unknown_addresses": rec.unmatched_frees,
        "frees_seen_only_as_completed": rec.completed_only,
        "ooms": rec.ooms,
    }
    ok = checks["live_allocations_match"] and checks["live_bytes_match"] and rec.repaired == 0
    if not checks["live_allocations_match"]:
        print(f"record_torch: WARNING {name}: live allocations: trace {live_trace} != torch "
              f"{live_torch}", file=sys.stderr)
    if not checks["live_bytes_match"]:
        print(f"record_torch: WARNING {name}: live bytes: trace {bytes_trace} != torch requested "
              f"{bytes_req} / allocated {bytes_alloc}", file=sys.stderr)
    if not checks["peak_match"]:
        print(f"record_torch: note {name}: trace peak {rec.peak_bytes} != torch requested peak "
              f"{peak_req} / allocated peak {peak_alloc}", file=sys.stderr)

    import importlib.metadata as md

    def version(pkg):
        try:
            return md.version(pkg)
        except md.PackageNotFoundError:
            return None

    meta = {
        "name": name,
        "file": os.path.basename(path),
        "format": "text, one event per line: a,<id>,<size>[,<stream>] | f,<id> | # comment; gzip",
        "size_semantics": ("the size carried by the allocator history's 'alloc' entries: the bytes "
                           "requested from PyTorch's CUDA caching allocator, before its rounding "
                           "to 512 B blocks; checks.sizes_are confirms it against PyTorch's "
                           "requested/allocated counters, sizes_multiple_of_512 counts rounded ones"),
        "stream_semantics": "CUDA streams numbered in order of first appearance (0 = first seen)",
        "recording": ("torch.cuda.memory._record_memory_history(enabled='all', context=None, "
                      "stacks='python'), history taken with _snapshot() and cleared after every "
                      "step; 'alloc' -> a, 'free_requested' (else 'free_completed') -> f"),
        "date": date,
        "host": {"python": platform.python_version(), "platform": platform.platform()},
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "packages": {p: version(p) for p in ("torch", "torchvision", "transformers", "timm")},
        "device": props.name,
        "device_total_bytes": props.total_memory,
        "seed": seed,
        "quick": args.quick,
        "workload": info,
        "elapsed_s": round(elapsed, 2),
        "events": rec.events,
        "allocs": rec.nalloc,
        "frees": rec.nfree,
        "live_at_end": live_trace,
        "streams": len(rec.streams),
        "history_entries": rec.entries,
        "history_chunks": rec.chunks,
        "largest_chunk": rec.max_chunk,
        "max_entries": args.max_entries,
        "budget": {"max_events": rec.max_events, "max_seconds": rec.max_seconds,
                   "stopped_early": rec.budget_hit},
        "sizes_multiple_of_512": rec.sizes_512,
        "peak_requested_bytes": rec.peak_bytes,
        "torch_max_memory_allocated": max_alloc,
        "torch_max_memory_reserved": max_reserved,
        "torch_requested_bytes_peak": peak_req,
        "checks": checks,
        "checks_ok": ok,
        "compressed_bytes": os.path.getsize(path),
        "sha256": sha256(path),
    }
    with open(os.path.join(args.out, name + ".json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(summary_line(meta), flush=True)
    return 0 if ok else 3


def gib(n):
    return f"{n / (1 << 30):.2f} GiB"


def summary_line(m):
    c = m["checks"]
    return (f"{m['name']:<22} {m['events']:>8} events {m['allocs']:>7} allocs  "
            f"peak req {gib(m['peak_requested_bytes'])}  torch alloc/reserved "
            f"{gib(m['torch_max_memory_allocated'])}/{gib(m['torch_max_memory_reserved'])}  "
            f"{m['elapsed_s']:6.1f} s  {m['compressed_bytes'] / 1e6:5.2f} MB  "
            f"checks {'ok' if m['checks_ok'] else 'FAILED'}, sizes {c['sizes_are']}"
            f"{'' if c['peak_match'] else ' (peak differs from torch)'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for NAME.csv.gz and NAME.json")
    ap.add_argument("--quick", action="store_true", help="a few steps per workload (smoke run)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS),
                    help="comma-separated subset of: " + ", ".join(WORKLOADS))
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--max-events", type=int, default=0,
                    help="stop a workload after the step that reaches this many events "
                         "(default 400000, 60000 with --quick)")
    ap.add_argument("--max-seconds", type=float, default=60.0,
                    help="stop a workload after the step that reaches this wall time")
    ap.add_argument("--max-entries", type=int, default=1 << 21,
                    help="allocator history entries kept between two flushes")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    if args.worker:
        return worker(args.worker, args)

    names = [w.strip() for w in args.workloads.split(",") if w.strip()]
    bad = [w for w in names if w not in RUNNERS]
    if bad:
        ap.error(f"unknown workload(s) {bad}; choose from {WORKLOADS}")
    rc = 0
    done = []
    skipped = []
    t0 = time.monotonic()
    for name in names:
        print(f"record_torch: {name} ...", flush=True)
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", name, "--out", args.out,
               "--seed", str(args.seed), "--max-seconds", str(args.max_seconds),
               "--max-entries", str(args.max_entries), "--device", str(args.device),
               "--max-events", str(args.max_events)]
        if args.quick:
            cmd.append("--quick")
        r = subprocess.run(cmd)
        if r.returncode == SKIPPED:
            skipped.append(name)
            rc = 1
        elif r.returncode != 0:
            print(f"record_torch: {name} exited with {r.returncode}", file=sys.stderr)
            rc = 1
        meta = os.path.join(args.out, name + ".json")
        if r.returncode in (0, 3) and os.path.exists(meta):
            with open(meta) as f:
                done.append(json.load(f))
    print()
    print(f"record_torch: {len(done)}/{len(names)} traces in {args.out} "
          f"({time.monotonic() - t0:.0f} s)")
    for m in done:
        print(summary_line(m))
    if skipped:
        print(f"record_torch: skipped for missing Python packages (see above): "
              f"{', '.join(skipped)}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
