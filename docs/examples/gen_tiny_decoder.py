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
import json
import math
import os
import struct
import sys

import torch

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


def rms_norm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + NORM_EPS) * w


def rotary_tables(n, dtype):
    """cos, sin [n, D] (rotate-half: the D/2 frequencies twice), angles in float32 as HF."""
    inv_freq = 1.0 / (THETA ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.int64).float() / HEAD_DIM))
    ang = torch.outer(torch.arange(n, dtype=torch.int64).float(), inv_freq)
    emb = torch.cat([ang, ang], dim=-1).to(dtype)
    return emb.cos(), emb.sin()


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def attention_scores(q, k):
    """q [H, N, D], k [H, N, D] -> causal-unmasked scores [H, N, N]."""
    return q @ k.transpose(-1, -2) / math.sqrt(HEAD_DIM)


def causal(s):
    n = s.shape[-1]
    mask = torch.ones(n, n, dtype=torch.bool).triu(1)
    return s.masked_fill(mask, float("-inf"))


class Model:
    def __init__(self, variant, rotary, w):
        self.variant, self.rotary, self.w = variant, rotary, w
        self.kv_heads = HEADS if variant == "dcmha" else 2

    def attention(self, l, x, cos, sin, moh_gaps):
        w, H, Hkv, D = self.w, HEADS, self.kv_heads, HEAD_DIM
        n = x.shape[0]
        q = (x @ w[f"{l}.w_q"].T).view(n, H, D).transpose(0, 1)
        k = (x @ w[f"{l}.w_k"].T).view(n, Hkv, D).transpose(0, 1)
        v = (x @ w[f"{l}.w_v"].T).view(n, Hkv, D).transpose(0, 1)
        gates = None
        if self.variant == "moh":
            norms = q[MOH_SHARED:].norm(dim=-1).T            # [n, E]
            top = torch.topk(norms, MOH_TOP_K + 1, dim=-1).values
            moh_gaps.append(((top[:, -2] - top[:, -1]) / top[:, 0]).min().item())
            chosen = torch.topk(norms, MOH_TOP_K, dim=-1).indices
            routed = torch.zeros_like(norms).scatter(1, chosen, 1.0)
            gates = torch.cat([torch.ones(n, MOH_SHARED, dtype=x.dtype), routed], dim=1).T  # [H, n]
        if self.rotary:
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(H // Hkv, dim=0)
        v = v.repeat_interleave(H // Hkv, dim=0)
        s = attention_scores(q, k)
        if self.variant == "dcmha":
            s, post = self.dcmha_compose(l, x, s)
            p = post(torch.softmax(causal(s), dim=-1))
        else:
            p = torch.softmax(causal(s), dim=-1)
        o = p @ v                                             # [H, n, D]
        if gates is not None:
            o = o * gates[:, :, None]
        return o.transpose(0, 1).reshape(n, H * D) @ w[f"{l}.w_o"].T

    def dcmha_compose(self, l, x, s):
        """The pre-composed scores and the post-composition (docs/variants.md, "DCMHA")."""
        w, H, R = self.w, HEADS, DC_RANK
        n = x.shape[0]
        hid = torch.nn.functional.gelu(x @ w[f"{l}.dc_w1"].reshape(D_MODEL, 4 * DC_HIDDEN))
        dyn = torch.einsum("nck,ckrh->ncrh", hid.view(n, 4, DC_HIDDEN), w[f"{l}.dc_w2"][0])
        w1, w2 = dyn[:, :, :R], dyn[:, :, R:]                 # [n, 4, R, H]
        w1 = w1 * torch.rsqrt(w1.pow(2).mean(-1, keepdim=True) + 1e-6)
        dd = torch.tanh(x @ w[f"{l}.dc_wd"].reshape(D_MODEL, 4 * H)).view(n, 4, H)

        def compose(a, cq, ck, wb):                          # a [H(m), t, s] -> [H(n), t, s]
            out = a + torch.einsum("mts,mn->nts", a, wb)
            hq = torch.einsum("mts,trm->rts", a, w1[:, cq])
            out = out + torch.einsum("rts,trn->nts", hq, w2[:, cq])
            hk = torch.einsum("mts,srm->rts", a, w1[:, ck])
            out = out + torch.einsum("rts,srn->nts", hk, w2[:, ck])
            return out + a * dd[:, cq].T[:, :, None] + a * dd[:, ck].T[:, None, :]

        pre = compose(s, 0, 1, w[f"{l}.dc_wb_pre"][0])
        return pre, lambda p: compose(p, 2, 3, w[f"{l}.dc_wb_post"][0])

    def logits(self, tokens, moh_gaps):
        """The logits of every position of `tokens` [n] -> [n, 256] (a full causal forward)."""
        w = self.w
        x = w["embed"][tokens]
        cos, sin = rotary_tables(len(tokens), x.dtype)
        for l in range(LAYERS):
            x = x + self.attention(l, rms_norm(x, w[f"{l}.attn_norm"]), cos, sin, moh_gaps)
            h = rms_norm(x, w[f"{l}.mlp_norm"])
            gate = torch.nn.functional.silu(h @ w[f"{l}.w_gate"].T)
            x = x + (gate * (h @ w[f"{l}.w_up"].T)) @ w[f"{l}.w_down"].T
        return rms_norm(x, w["final_norm"]) @ w["embed"].T

    def generate(self, prompt, steps, moh_gaps):
        """Greedy: (tokens [steps], logits [steps, 256]); each step re-runs the whole sequence."""
        seq, out_tokens, out_logits, margins = list(prompt), [], [], []
        for _ in range(steps):
            z = self.logits(torch.tensor(seq), moh_gaps)[-1]
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
        m.update(moh_shared=MOH_SHARED, moh_top_k=MOH_TOP_K)
    if variant == "dcmha":
        m.update(dc_rank=DC_RANK, dc_hidden=DC_HIDDEN, dc_groups=1, dc_static=1)
    return {k: str(v) for k, v in m.items()}


def write_safetensors(path, tensors, meta):
    """tensors: name -> float32 or int32 tensor (names kept in insertion order)."""
    header, blobs, offset = {"__metadata__": meta}, [], 0
    for name, t in tensors.items():
        t = t.contiguous()
        dtype = {torch.float32: "F32", torch.int32: "I32"}[t.dtype]
        data = t.numpy().astype(t.numpy().dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def run_variant(variant, rotary, out):
    seed = {"gqa": 1, "moh": 13, "dcmha": 11}[variant]  # seeds whose every choice clears TIE_MARGIN
    w32 = make_weights(variant, seed)
    exact = Model(variant, rotary, {k: v.double() for k, v in w32.items()})
    single = Model(variant, rotary, w32)
    ref, moh_gaps, worst_margin, worst_f32 = {}, [], 1.0, 0.0
    for i, (p, g) in enumerate(zip(PROMPTS, GEN)):
        prompt = list(p)
        tokens, logits, margin = exact.generate(prompt, g, moh_gaps)
        worst_margin = min(worst_margin, margin)
        if i == 0:  # torch's float32 run of prompt 0: the tolerance's evidence
            tokens32, logits32, _ = single.generate(prompt, g, [])
            worst_f32 = ((logits32.double() - logits).abs().max() / logits.abs().max()).item()
            if tokens32 != tokens:
                sys.exit(f"{variant}: torch float32 generates other tokens than float64")
        ref[f"prompt.{i}"] = torch.tensor(prompt, dtype=torch.int32)
        ref[f"tokens.{i}"] = torch.tensor(tokens, dtype=torch.int32)
        ref[f"logits.{i}"] = logits.float()
    moh_gap = min(moh_gaps) if moh_gaps else 1.0
    print(f"{variant}{'' if rotary else ' (no rotary)'}: tokens of prompt 0: {bytes(ref['tokens.0'].tolist())!r}; "
          f"smallest top-1 margin {worst_margin:.2e}" + (f", MoH routed-norm gap {moh_gap:.2e}" if moh_gaps else "")
          + f", torch float32 vs float64 {worst_f32:.2e} of the largest logit")
    if worst_margin < TIE_MARGIN or moh_gap < ROUTE_MARGIN:
        sys.exit(f"{variant}: a greedy or routing choice is too close to a tie: change the seed")
    if worst_f32 > TOL:
        sys.exit(f"{variant}: torch float32 is {worst_f32:.2e} from float64, over the tolerance {TOL}")
    name = os.path.join(out, f"tiny_decoder_{variant}{'' if rotary else '_norope'}")
    meta = metadata(variant, rotary)
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
