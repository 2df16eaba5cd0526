#!/usr/bin/python3
"""Weights and reference generations for docs/examples/tiny_decoder.c.

A small decoder-only transformer, written out here by hand in PyTorch (Debian's python3-torch,
1.13): byte vocabulary (256), d_model 256, 3 layers, pre-RMSNorm, attention with rotate-half
rotary (the HF LLaMA convention: theta 10000, inv_freq = 1 / theta^(arange(0, D, 2) / D) and
the angles pos * inv_freq in float32), a SwiGLU MLP (hidden 512), a final RMSNorm and an LM
head tied to the embedding. The attention is one of (--variant):

  gqa    LLaMA: H 8 query heads, Hkv 2 K/V heads of D 32, no biases
  moh    MoH-LLaMA3-shaped (docs/variants.md "MoH", norm router): the GQA attention, heads 0..3
         shared, each token also runs the 2 of heads 4..7 whose ||q_h|| (before rotary: a
         rotation keeps it) is largest; the others' outputs are dropped (binary gates)
  dcmha  DCFormer-style (docs/variants.md "DCMHA"): MHA (Hkv = H = 8) with rotary, plus the
         dynamic cross-head composition of the scores (pre) and probabilities (post), rank 2,
         hidden 32, one group, exact GELU, static W_b

Usage (from anywhere; --out is created):

    /usr/bin/python3 docs/examples/gen_tiny_decoder.py --out DIR [--variant V ...] [--no-rotary]

For each variant it writes DIR/tiny_decoder_<V>[_norope].safetensors (the weights, float32,
about 7 MB) and DIR/tiny_decoder_<V>[_norope]_ref.safetensors (the reference generations).
Both are safetensors files written with struct and json: an 8-byte little-endian header
length, a JSON header {name: {"dtype", "shape", "data_offsets"}, "__metadata__": {...}} padded
with spaces to 8 bytes, then the raw little-endian data. The metadata holds the model's shape
(the C program builds its layers from it).

Weights (nn.Linear layout [out, in]; l = 0 .. layers-1):
    embed [256, d]                       token embedding = the LM head (tied)
    l.attn_norm [d], l.mlp_norm [d], final_norm [d]      RMSNorm weights (eps 1e-5)
    l.w_q [H*D, d]  l.w_k [Hkv*D, d]  l.w_v [Hkv*D, d]  l.w_o [d, H*D]
    l.w_gate [F, d]  l.w_up [F, d]  l.w_down [d, F]      MLP: w_down(silu(w_gate x) * w_up x)
    dcmha: l.dc_w1 [d, 1, 4, C]  l.dc_w2 [1, 4, C, 2R, H]  l.dc_wd [d, 1, 4, H]
           l.dc_wb_pre [1, H, H]  l.dc_wb_post [1, H, H]  (mh_dcmha_weights' layouts)
Reference, for prompts i = 0..5 (prompt 0 is the single-sequence run of 32 tokens; 0..5 are
the continuous-batching mode's, each with its own generation length):
    prompt.i [n] int32 (bytes)   tokens.i [g] int32   logits.i [g, 256] float32
The logits of step s are the ones the model gives after the prompt and tokens 0..s-1; token s
is their argmax. The reference runs the model in float64 on the float32 weights (the rotary
angles still in float32, as HF computes them), so it is the exact model, and the script checks
that torch's own float32 run of prompt 0 stays within the C program's tolerance of it and
picks the same tokens, and that every greedy choice wins by twice that tolerance (and every MoH
head choice by ROUTE_MARGIN), so a C run within the tolerance cannot flip it. Seeded
(torch.Generator): re-running gives the same files.
"""
import argparse
import math
import os
import sys

import torch

from tiny_decoder_torch import Model, parse_meta, write_safetensors

VOCAB, D_MODEL, LAYERS, HEADS, HEAD_DIM, FFN = 256, 256, 3, 8, 32, 512
THETA, NORM_EPS = 10000.0, 1e-5
MOH_SHARED, MOH_TOP_K = 4, 2
DC_RANK, DC_HIDDEN = 2, 32
PROMPTS = [b"The quick brown fox jumps over", b"Hello",
           b"Attention is all you need, they said; then came the mixture of heads.", b"Once upon a",
           b"C11 and SIMD", b"multihead: attention layers for CPUs, from MHA to DCMHA, with a KV cache"]
GEN = [32, 6, 17, 9, 12, 20]
TOL = 1e-4           # the C program's: max |logit - ref| <= TOL * max |ref logit| at every step
# top-1 minus top-2 logit, relative to the largest: a C run within TOL keeps every argmax
TIE_MARGIN = 2 * TOL
ROUTE_MARGIN = 2e-5  # MoH: K-th minus (K+1)-th routed ||q_h||, relative to the largest
WO_STD = 4.0        # W_O and W_down: the layers outweigh the tied embedding (else x -> x)


def generate(model, prompt, steps):
    """Greedy: (tokens [steps], logits [steps, 256], the smallest top-1 margin); each step
    re-runs the whole sequence."""
    seq, out_tokens, out_logits, margins = list(prompt), [], [], []
    for _ in range(steps):
        z = model.logits(torch.tensor([seq]))[0, -1]
        top = torch.topk(z, 2).values
        margins.append(((top[0] - top[1]) / z.abs().max()).item())
        t = int(torch.argmax(z))
        seq.append(t)
        out_tokens.append(t)
        out_logits.append(z)
    return out_tokens, torch.stack(out_logits), min(margins)


def make_weights(variant, seed):
    """Seeded weights: scales that keep the residual stream, scores and logits O(1..10)."""
    g = torch.Generator().manual_seed(seed)
    rnd = lambda *shape, std: torch.randn(*shape, generator=g) * std
    Hkv = HEADS if variant == "dcmha" else 2
    d, H, D = D_MODEL, HEADS, HEAD_DIM
    w = {"embed": rnd(VOCAB, d, std=0.5), "final_norm": 1 + rnd(d, std=0.1)}
    for l in range(LAYERS):
        w[f"{l}.attn_norm"] = 1 + rnd(d, std=0.1)
        w[f"{l}.mlp_norm"] = 1 + rnd(d, std=0.1)
        w[f"{l}.w_q"] = rnd(H * D, d, std=1.5 / math.sqrt(d))
        w[f"{l}.w_k"] = rnd(Hkv * D, d, std=1.5 / math.sqrt(d))
        w[f"{l}.w_v"] = rnd(Hkv * D, d, std=1 / math.sqrt(d))
        w[f"{l}.w_o"] = rnd(d, H * D, std=WO_STD / math.sqrt(H * D))
        w[f"{l}.w_gate"] = rnd(FFN, d, std=1 / math.sqrt(d))
        w[f"{l}.w_up"] = rnd(FFN, d, std=1 / math.sqrt(d))
        w[f"{l}.w_down"] = rnd(d, FFN, std=WO_STD / math.sqrt(FFN))
        if variant == "dcmha":
            w[f"{l}.dc_w1"] = rnd(d, 1, 4, DC_HIDDEN, std=1 / math.sqrt(d))
            w[f"{l}.dc_w2"] = rnd(1, 4, DC_HIDDEN, 2 * DC_RANK, H, std=0.3 / math.sqrt(DC_HIDDEN))
            w[f"{l}.dc_wd"] = rnd(d, 1, 4, H, std=0.5 / math.sqrt(d))
            w[f"{l}.dc_wb_pre"] = rnd(1, H, H, std=0.1)
            w[f"{l}.dc_wb_post"] = rnd(1, H, H, std=0.1)
    return w


def metadata(variant, rotary):
    m = {"variant": variant, "vocab": VOCAB, "d_model": D_MODEL, "layers": LAYERS,
         "n_heads": HEADS, "n_kv_heads": HEADS if variant == "dcmha" else 2,
         "head_dim": HEAD_DIM, "ffn": FFN, "norm_eps": NORM_EPS,
         "rotary": "half" if rotary else "none", "theta": THETA}
    if variant == "moh":
        m.update(moh_router="norm", moh_shared=MOH_SHARED, moh_top_k=MOH_TOP_K)
    if variant == "dcmha":
        m.update(dc_rank=DC_RANK, dc_hidden=DC_HIDDEN, dc_groups=1, dc_static=1)
    return {k: str(v) for k, v in m.items()}


def run_variant(variant, rotary, out):
    seed = {"gqa": 1, "moh": 13, "dcmha": 11}[variant]  # seeds whose every choice clears TIE_MARGIN
    w32 = make_weights(variant, seed)
    meta = metadata(variant, rotary)
    exact = Model(parse_meta(meta), {k: v.double() for k, v in w32.items()})
    single = Model(parse_meta(meta), w32)
    ref, worst_margin, worst_f32 = {}, 1.0, 0.0
    for i, (p, g) in enumerate(zip(PROMPTS, GEN)):
        prompt = list(p)
        tokens, logits, margin = generate(exact, prompt, g)
        worst_margin = min(worst_margin, margin)
        if i == 0:  # torch's float32 run of prompt 0: the tolerance's evidence
            tokens32, logits32, _ = generate(single, prompt, g)
            worst_f32 = ((logits32.double() - logits).abs().max() / logits.abs().max()).item()
            if tokens32 != tokens:
                sys.exit(f"{variant}: torch float32 generates other tokens than float64")
        ref[f"prompt.{i}"] = torch.tensor(prompt, dtype=torch.int32)
        ref[f"tokens.{i}"] = torch.tensor(tokens, dtype=torch.int32)
        ref[f"logits.{i}"] = logits.float()
    moh_gaps = exact.moh_gaps
    moh_gap = min(moh_gaps) if moh_gaps else 1.0
    print(f"{variant}{'' if rotary else ' (no rotary)'}: tokens of prompt 0: {bytes(ref['tokens.0'].tolist())!r}; "
          f"smallest top-1 margin {worst_margin:.2e}" + (f", MoH routed-norm gap {moh_gap:.2e}" if moh_gaps else "")
          + f", torch float32 vs float64 {worst_f32:.2e} of the largest logit")
    if worst_margin < TIE_MARGIN or moh_gap < ROUTE_MARGIN:
        sys.exit(f"{variant}: a greedy or routing choice is too close to a tie: change the seed")
    if worst_f32 > TOL:
        sys.exit(f"{variant}: torch float32 is {worst_f32:.2e} from float64, over the tolerance {TOL}")
    name = os.path.join(out, f"tiny_decoder_{variant}{'' if rotary else '_norope'}")
    write_safetensors(name + ".safetensors", w32, meta)
    write_safetensors(name + "_ref.safetensors", ref, meta)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output directory (created)")
    ap.add_argument("--variant", action="append", choices=["gqa", "moh", "dcmha"],
                    help="repeatable; default: all three")
    ap.add_argument("--no-rotary", action="store_true", help="the same models without rotary")
    a = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(a.out, exist_ok=True)
    for v in a.variant or ["gqa", "moh", "dcmha"]:
        run_variant(v, not a.no_rotary, a.out)


if __name__ == "__main__":
    main()
