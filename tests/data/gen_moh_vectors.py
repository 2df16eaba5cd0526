#!/usr/bin/python3
"""Reference vectors for MoH layers (tests/layers/test_moh_torch_vectors.c).

An independent, small PyTorch re-statement of the reference code's two MoH forms
(docs/variants.md "MoH"; design notes section 3.2 and 3.3):

  * learned router, weighted gates (MoH-ViT / MoH-DiT): softmax over the E routed logits,
    torch.topk on the probabilities, renormalised over the selected and multiplied by K;
    shared gates softmax(W_s x) * h_s (1 if h_s == 1); stages mixed by softmax(W_h x) * 2;
    K == 0 (h_s == H): every gate softmax(W_s x) * h_s;
  * norm router, binary gates (MoH-LLaMA3): l = ||q_h|| over the routed heads, l /= std(l)
    (unbiased), softmax, torch.topk; gate 1 for the shared and selected heads, 0 otherwise.

Every head is computed densely (as the reference code does) with torch's scaled dot-product
attention (GQA by repeat_interleave of the K/V heads), multiplied by its gate and projected
through W_O. Run with Debian's torch (python3-torch, 1.13) from the repository root:

    /usr/bin/python3 tests/data/gen_moh_vectors.py

It rewrites tests/data/moh_*.bin (about 40 KB together); float32 on the CPU with a fixed seed.
The file format is the one of gen_torch_vectors.py ("MHTVEC01", written by its write_file).

Entries of every file (int32 scalars unless a shape is given):
    batch, n_q, d_model, n_heads, n_kv_heads, head_dim, bias, causal
    router                    0 = learned (MH_MOH_ROUTER_LEARNED), 1 = norm
    shared_heads, top_k       h_s, K
    w_q [H*D, d]  w_k [Hkv*D, d]  w_v [Hkv*D, d]  w_o [d, H*D]     nn.Linear layout
    b_q [H*D]  b_k [Hkv*D]  b_v [Hkv*D]  b_o [d]                   only when bias == 1
    w_router [E, d]           learned router, only when K > 0
    w_shared [h_s, d]         learned router, only when h_s > 1
    w_stage [2, d]            learned router, only when K > 0 and h_s > 0
    query [B, N, d]           self-attention input
    out [B, N, d]             the MoH layer output
    gates [B, N, H]           every head's gate (0 where the token did not select the head)

Ties: the library breaks top-K ties toward the lower head index, torch's order is unspecified;
the inputs are redrawn until every token's K-th and (K+1)-th routed score differ by a margin,
so both agree on the selection.
"""

import math
import sys

import torch
import torch.nn.functional as F

sys.dont_write_bytecode = True  # no __pycache__ in tests/data
from gen_torch_vectors import torch_setup, write_file  # noqa: E402  (shared with it)

SEED = 20250117
LEARNED, NORM = 0, 1
TIE_MARGIN = 1e-2  # min gap between the K-th and (K+1)-th routed score (relative for norms)


def sdpa(q, k, v, causal):
    """[B, H, N, D] attention, scale 1/sqrt(D); torch >= 2.0 spells it without the underscore."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return F._scaled_dot_product_attention(q, k, v, None, 0.0, False, causal)[0]


class TorchMoH(torch.nn.Module):
    def __init__(self, d, H, Hkv, D, hs, K, router, bias):
        super().__init__()
        self.H, self.Hkv, self.D, self.hs, self.K, self.router = H, Hkv, D, hs, K, router
        self.E = H - hs
        self.q = torch.nn.Linear(d, H * D, bias=bias)
        self.k = torch.nn.Linear(d, Hkv * D, bias=bias)
        self.v = torch.nn.Linear(d, Hkv * D, bias=bias)
        self.o = torch.nn.Linear(H * D, d, bias=bias)
        learned = router == LEARNED
        # the reference code's wg, wg_0, wg_1 (no biases), present exactly when used
        self.wg = torch.nn.Linear(d, self.E, bias=False) if learned and K > 0 else None
        self.wg_0 = torch.nn.Linear(d, 2, bias=False) if learned and K > 0 and hs > 0 else None
        self.wg_1 = torch.nn.Linear(d, hs, bias=False) if learned and hs > 1 else None

    def learned_gates(self, x):
        """x [T, d] -> gates [T, H], routed scores [T, E] (or None)."""
        H, hs, K = self.H, self.hs, self.K
        if K == 0:  # every head shared (h_s == H), still weighted
            if hs == 1:
                return torch.ones(x.shape[0], 1), None
            return torch.softmax(self.wg_1(x), dim=1) * hs, None
        logits = self.wg(x)
        p = torch.softmax(logits, dim=1)
        top_p, top_i = torch.topk(p, K, dim=1)
        r = torch.zeros_like(p).scatter(1, top_i, top_p)
        r = r / torch.clamp(top_p.sum(dim=1, keepdim=True), min=torch.finfo(p.dtype).eps)
        r = r * K
        if hs == 0:
            return r, logits
        s = torch.softmax(self.wg_1(x), dim=1) * hs if hs > 1 else torch.ones(x.shape[0], 1)
        a = torch.softmax(self.wg_0(x), dim=1) * 2
        return torch.cat([a[:, :1] * s, a[:, 1:] * r], dim=1), logits

    def norm_gates(self, q):
        """q [T, H, D] (pre-attention, with bias) -> binary gates [T, H], scores [T, E]."""
        l = q[:, self.hs:, :].norm(dim=2)
        l = l / l.std(dim=1, keepdim=True)
        p = torch.softmax(l, dim=1)
        _, top_i = torch.topk(p, self.K, dim=1)
        mask = torch.zeros_like(p).scatter(1, top_i, 1.0)
        return torch.cat([torch.ones(q.shape[0], self.hs), mask], dim=1), l

    def forward(self, x, causal):
        B, N, d = x.shape
        H, Hkv, D = self.H, self.Hkv, self.D
        q = self.q(x)
        if self.router == LEARNED:
            g, scores = self.learned_gates(x.reshape(B * N, d))
        else:
            g, scores = self.norm_gates(q.reshape(B * N, H, D))
        q = q.view(B, N, H, D).transpose(1, 2)                      # [B, H, N, D]
        k = self.k(x).view(B, N, Hkv, D).transpose(1, 2)            # [B, Hkv, N, D]
        v = self.v(x).view(B, N, Hkv, D).transpose(1, 2)
        k = k.repeat_interleave(H // Hkv, dim=1)                    # head h -> h // (H/Hkv)
        v = v.repeat_interleave(H // Hkv, dim=1)
        o = sdpa(q, k, v, causal).transpose(1, 2)                   # [B, N, H, D], every head
        g = g.view(B, N, H)
        o = (o * g[..., None]).reshape(B, N, H * D)
        return self.o(o), g, scores


def min_topk_gap(scores, K, relative):
    """Smallest gap between the K-th and (K+1)-th largest score over the tokens."""
    if scores is None or K == scores.shape[1]:
        return math.inf
    srt = scores.sort(dim=1, descending=True).values
    gap = srt[:, K - 1] - srt[:, K]
    if relative:
        gap = gap / srt[:, K - 1]
    return gap.min().item()


def randomize(m):
    """Every weight and bias uniform in [-0.5, 0.5] (torch's default init is narrower)."""
    with torch.no_grad():
        for p in m.parameters():
            p.uniform_(-0.5, 0.5)


def moh_case(fname, router, H, hs, K, Hkv=None, B=2, N=5, d=16, D=4, bias=True, causal=False):
    Hkv = Hkv or H
    m = TorchMoH(d, H, Hkv, D, hs, K, router, bias)
    randomize(m)
    for _ in range(100):  # redraw until no near-tie at the top-K boundary
        x = torch.randn(B, N, d)
        with torch.no_grad():
            out, g, scores = m(x, causal)
        if min_topk_gap(scores, K, router == NORM) > TIE_MARGIN:
            break
    else:
        raise RuntimeError("%s: no input without near-ties" % fname)
    active = (g > 0).sum(dim=2)
    assert bool((active == hs + K).all()), "every token runs h_s + K heads"
    ents = [("batch", B), ("n_q", N), ("d_model", d), ("n_heads", H), ("n_kv_heads", Hkv),
            ("head_dim", D), ("bias", int(bias)), ("causal", int(causal)), ("router", router),
            ("shared_heads", hs), ("top_k", K),
            ("w_q", m.q.weight), ("w_k", m.k.weight), ("w_v", m.v.weight), ("w_o", m.o.weight)]
    if bias:
        ents += [("b_q", m.q.bias), ("b_k", m.k.bias), ("b_v", m.v.bias), ("b_o", m.o.bias)]
    if m.wg is not None:
        ents.append(("w_router", m.wg.weight))
    if m.wg_1 is not None:
        ents.append(("w_shared", m.wg_1.weight))
    if m.wg_0 is not None:
        ents.append(("w_stage", m.wg_0.weight))
    ents += [("query", x), ("out", out), ("gates", g)]
    write_file(fname, ents)


def main():
    torch_setup(SEED)
    # learned router, weighted gates (3.2)
    moh_case("moh_a_learned.bin", LEARNED, H=6, hs=2, K=2)
    moh_case("moh_b_learned_hs0.bin", LEARNED, H=4, hs=0, K=2, bias=False)
    moh_case("moh_c_learned_hs1.bin", LEARNED, H=4, hs=1, K=2)
    moh_case("moh_d_learned_k0.bin", LEARNED, H=4, hs=4, K=0)
    moh_case("moh_e_learned_kE.bin", LEARNED, H=4, hs=2, K=2)
    moh_case("moh_f_learned_gqa_causal.bin", LEARNED, H=8, Hkv=2, hs=2, K=3, N=7,
             causal=True)
    # norm router, binary gates, GQA base (3.3)
    moh_case("moh_g_norm_gqa.bin", NORM, H=8, Hkv=2, hs=4, K=2)
    moh_case("moh_h_norm_gqa_causal.bin", NORM, H=8, Hkv=2, hs=4, K=2, N=7, causal=True,
             bias=False)


if __name__ == "__main__":
    main()
