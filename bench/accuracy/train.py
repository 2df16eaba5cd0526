#!/usr/bin/python3
"""Trains the accuracy report's byte-level language models, one per attention variant, and
writes PyTorch's own evaluation of each beside its weights (docs/benchmarks.md, "Accuracy").

The model is the tiny decoder's (docs/examples/tiny_decoder_torch.py: pre-RMSNorm, SwiGLU,
tied LM head) with a learned absolute position embedding instead of rotary: the library has
rotary for MHA/GQA/MQA, MoH and DCMHA but not for overlapping heads and CollabHead, and the
exact MHA -> CollabHead conversion does not survive rotary, so every model gets the same
positions outside the attention. Text: the English fortunes of Debian's `fortunes` package
(/usr/share/games/fortunes, every plain file sorted by name, concatenated); the last 1/16 of
the bytes is the held-out split, never trained on.

Every model has the same width, depth, context, batch, steps, data order and seed, except the
second MHA seed (the training noise) and the conversions, which start from the trained MHA
model and uptrain UPTRAIN_FRACTION of the steps (the GQA paper's recipe: K/V heads
mean-pooled, as mh_convert_mha_to_gqa does). The CollabHead conversion is exact (as
mh_convert_mha_to_collab: W~_Q = W_Q, W~_K = W_K, one-hot mixing, no biases so no content
bias) and is not uptrained: it must score exactly MHA's. The *_pooled models are the GQA/MQA
conversions before uptraining.

Outputs, in --out (default build/accuracy), reused when present (delete to retrain):
    <name>.safetensors   float32 weights, the model's shape in the metadata (the C loader's)
    <name>.json          parameters, training time and loss, and PyTorch's held-out bits per
                         byte: "bpb" over EVAL_WINDOWS windows of the context length,
                         "bpb_slice" over the first SLICE_WINDOWS of them (the C side's decode
                         slice), both computed in float64 on the float32 weights
    heldout.bin          the evaluated held-out bytes (EVAL_WINDOWS x (context + 1))

    /usr/bin/python3 bench/accuracy/train.py [--out DIR] [--only NAME ...] [--smoke]

--smoke: a tiny model of every variant kind, a few steps each (the ctest smoke test).
"""
import argparse
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "examples"))
from tiny_decoder_torch import Model, parse_meta, read_safetensors, weight_shapes, write_safetensors  # noqa: E402

FORTUNES = "/usr/share/games/fortunes"
THREADS = 2
UPTRAIN_FRACTION = 0.1
FULL = dict(d_model=128, layers=2, n_heads=8, head_dim=16, ffn=384, ctx=128, batch=8, steps=250, lr=3e-3, init_std=0.02,
            eval_windows=128, slice_windows=4, decode_keys=4096, prefill_tokens=1024,
            tol=1e-4)
# the smoke models start with big weights, so that attention moves the logits far from uniform;
# tol: the relative bound between C's and PyTorch's bits per byte (tighter for these: they agree
# to about 4e-8, and a departure such as DCMHA's GELU in its tanh form moves them by 1e-6 to 5e-6)
SMOKE = dict(d_model=32, layers=1, n_heads=4, head_dim=8, ffn=64, ctx=32, batch=4, steps=8, lr=1e-2, init_std=0.3,
             eval_windows=4, slice_windows=2, decode_keys=256, prefill_tokens=64,
             tol=1e-6)


def models(s):
    """name -> (variant metadata, training seed, source model to convert from or None). The
    conversions are uptrained, except CollabHead's (exact) and the *_pooled ones (the pooling
    alone, to show what the uptraining recovers)."""
    H, D = s["n_heads"], s["head_dim"]
    gqa = lambda kv: {"variant": "gqa", "n_kv_heads": kv}
    moh = lambda k: {"variant": "moh", "n_kv_heads": H, "moh_router": "learned", "moh_shared": H // 4, "moh_top_k": k}
    m = {"mha": (gqa(H), 1, None), "mha_seed2": (gqa(H), 2, None),
         f"gqa{H // 2}": (gqa(H // 2), 1, None), f"gqa{H // 4}": (gqa(H // 4), 1, None), "mqa": (gqa(1), 1, None),
         f"gqa{H // 2}_from_mha": (gqa(H // 2), 1, "mha"), f"gqa{H // 4}_from_mha": (gqa(H // 4), 1, "mha"),
         "mqa_from_mha": (gqa(1), 1, "mha"),
         f"gqa{H // 2}_pooled": (gqa(H // 2), 1, "mha"), f"gqa{H // 4}_pooled": (gqa(H // 4), 1, "mha"),
         "mqa_pooled": (gqa(1), 1, "mha"),
         # active heads: shared + top_k of H = 50% and 75%
         "moh50": (moh(H // 2 - H // 4), 1, None), "moh75": (moh(3 * H // 4 - H // 4), 1, None),
         "overlap": ({"variant": "overlap", "n_kv_heads": H, "overlap": D // 4}, 1, None),
         "collab": ({"variant": "collab", "n_kv_heads": H, "collab_dim": H * D // 2}, 1, None),
         "collab_from_mha": ({"variant": "collab", "n_kv_heads": H, "collab_dim": H * D}, 1, "mha"),
         "dcmha": ({"variant": "dcmha", "n_kv_heads": H, "dc_rank": 2, "dc_hidden": 4 * H, "dc_groups": 1,
                    "dc_static": 1}, 1, None)}
    if s is SMOKE:  # one of each kind
        m = {k: m[k] for k in ("mha", "mqa_from_mha", "mqa_pooled", "moh50", "overlap", "collab", "collab_from_mha",
                               "dcmha")}
    return m


def metadata(s, variant):
    m = {"vocab": 256, "d_model": s["d_model"], "layers": s["layers"], "n_heads": s["n_heads"],
         "head_dim": s["head_dim"], "ffn": s["ffn"], "norm_eps": 1e-5, "rotary": "none", "theta": 10000.0,
         "position": "learned", "pos_ctx": s["ctx"]}
    m.update(variant)
    return m


def text():
    """The corpus's bytes: every plain fortunes file, sorted by name."""
    if not os.path.isdir(FORTUNES):
        sys.exit(f"train.py: no {FORTUNES}: install Debian's fortunes package (apt-get install fortunes)")
    data = b""
    for name in sorted(os.listdir(FORTUNES)):
        p = os.path.join(FORTUNES, name)
        if os.path.isfile(p) and not os.path.islink(p) and not name.endswith(".dat"):
            with open(p, "rb") as f:
                data += f.read()
    return torch.tensor(list(data), dtype=torch.int64)


def init_weights(c, seed, std):
    """Seeded: norms 1, embeddings and projections N(0, std), output projections scaled by
    1/sqrt(2 layers) (GPT-2), CollabHead's mixing N(0, 1) and content 0, MoH routers and
    DCMHA generators N(0, std), DCMHA's static W_b 0 (it starts as MHA plus noise)."""
    g = torch.Generator().manual_seed(seed)
    w = {}
    for name, shape in weight_shapes(c).items():
        base = name.split(".")[-1]
        if len(shape) == 1:
            t = torch.ones(shape)
        elif base in ("collab_content", "dc_wb_pre", "dc_wb_post"):
            t = torch.zeros(shape)
        elif base == "collab_mix":
            t = torch.randn(shape, generator=g)
        else:
            scale = std / math.sqrt(2 * c["layers"]) if base in ("w_o", "w_down") else std
            t = torch.randn(shape, generator=g) * scale
        w[name] = t
    return w


def convert(src, c):
    """The source MHA's weights turned into model c: K/V heads mean-pooled (GQA/MQA), or the
    exact CollabHead form; everything else carried over."""
    w = {k: v.clone() for k, v in src.items()}
    H, D, d = c["n_heads"], c["head_dim"], c["d_model"]
    for l in range(c["layers"]):
        if c["variant"] == "gqa":
            g = H // c["n_kv_heads"]
            for t in ("w_k", "w_v"):
                w[f"{l}.{t}"] = src[f"{l}.{t}"].view(c["n_kv_heads"], g, D, d).mean(1).reshape(-1, d)
        elif c["variant"] == "collab":
            mix = torch.zeros(H, H * D)
            for h in range(H):
                mix[h, h * D:(h + 1) * D] = 1
            w[f"{l}.collab_mix"], w[f"{l}.collab_content"] = mix, torch.zeros(H, d)
    return w


def train(c, w, s, seed, steps, train_data):
    """AdamW (weight decay 0.1 on matrices), linear warmup then cosine decay to 10%, random
    windows of the training split in a seeded order. Returns the mean loss of the last 10%."""
    params = {k: v.requires_grad_(True) for k, v in w.items()}
    decay = [v for v in params.values() if v.dim() > 1]
    other = [v for v in params.values() if v.dim() <= 1]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=s["lr"], betas=(0.9, 0.95))
    g = torch.Generator().manual_seed(1000 + seed)
    model, ctx, warm, losses = Model(c, params), s["ctx"], max(1, steps // 10), []
    for step in range(steps):
        lr = s["lr"] * (min(1.0, (step + 1) / warm) * (0.1 + 0.45 * (1 + math.cos(math.pi * step / steps))))
        for group in opt.param_groups:
            group["lr"] = lr
        start = torch.randint(0, len(train_data) - ctx - 1, (s["batch"],), generator=g)
        batch = torch.stack([train_data[i:i + ctx + 1] for i in start.tolist()])
        logits = model.logits(batch[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), batch[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    tail = losses[-max(1, steps // 10):]
    return {k: v.detach() for k, v in params.items()}, sum(tail) / len(tail)


def bits_per_byte(c, w, windows):
    """Mean bits per predicted byte over windows [n, ctx + 1], in float64 on the float32 weights."""
    model = Model(c, {k: v.double() for k, v in w.items()})
    with torch.no_grad():
        logits = model.logits(windows[:, :-1])
        nats = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), windows[:, 1:].reshape(-1))
    return nats.item() / math.log(2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="build/accuracy")
    ap.add_argument("--only", action="append", help="train only these models (repeatable)")
    ap.add_argument("--smoke", action="store_true", help="tiny models, a few steps (the ctest smoke test)")
    a = ap.parse_args()
    torch.set_num_threads(THREADS)
    s = SMOKE if a.smoke else FULL
    os.makedirs(a.out, exist_ok=True)
    data = text()
    split = len(data) - len(data) // 16
    train_data, held = data[:split], data[split:]
    ctx = s["ctx"]
    windows = torch.stack([held[i * ctx:(i + 1) * ctx + 1] for i in range(s["eval_windows"])])
    with open(os.path.join(a.out, "heldout.bin"), "wb") as f:
        f.write(bytes(windows.flatten().tolist()))
    print(f"fortunes: {len(data)} bytes, {split} trained on, {len(held)} held out; evaluating "
          f"{s['eval_windows']} windows of {ctx} (decode slice: {s['slice_windows']})")
    trained = {}
    for name, (variant, seed, source) in models(s).items():
        if a.only and name not in a.only and name not in [models(s)[o][2] for o in a.only]:
            continue
        c = parse_meta({k: str(v) for k, v in metadata(s, variant).items()})
        path = os.path.join(a.out, name + ".safetensors")
        if os.path.exists(path) and os.path.exists(os.path.join(a.out, name + ".json")):
            trained[name] = read_safetensors(path)[0]
            print(f"{name}: reusing {path}")
            continue
        t0 = time.time()
        if source is None:
            w, loss = train(c, init_weights(c, seed, s["init_std"]), s, seed, s["steps"], train_data)
            steps = s["steps"]
        elif c["variant"] == "collab" or name.endswith("_pooled"):
            w, loss, steps = convert(trained[source], c), float("nan"), 0
        else:
            steps = max(1, round(UPTRAIN_FRACTION * s["steps"]))
            w, loss = train(c, convert(trained[source], c), s, seed, steps, train_data)
        trained[name] = w
        info = {"name": name, "variant": c["variant"], "source": source, "seed": seed, "steps": steps,
                "params": sum(v.numel() for v in w.values()),
                "attn_params": sum(v.numel() for k, v in w.items() if k.split(".")[-1] not in
                                   ("attn_norm", "mlp_norm", "w_gate", "w_up", "w_down", "embed", "final_norm",
                                    "pos_embed")),
                "train_seconds": round(time.time() - t0, 1), "train_loss_bits": loss / math.log(2),
                "bpb": bits_per_byte(c, w, windows), "bpb_slice": bits_per_byte(c, w, windows[:s["slice_windows"]]),
                "threads": THREADS}
        write_safetensors(path, w, {k: str(v) for k, v in metadata(s, variant).items()})
        with open(os.path.join(a.out, name + ".json"), "w") as f:
            json.dump(info, f, indent=1)
        print(f"{name}: {info['params']} parameters, {steps} steps in {info['train_seconds']} s, "
              f"held-out {info['bpb']:.4f} bits per byte (slice {info['bpb_slice']:.4f})", flush=True)


if __name__ == "__main__":
    main()
