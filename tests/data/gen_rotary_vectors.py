#!/usr/bin/python3
"""Reference vectors for rotary position embeddings and QK-norm in the layers
(tests/layers/test_rotary_torch_vectors.c).

A small PyTorch re-statement, written here, of the attention of the models whose conventions
the library follows (include/multihead.h, "positions"):

  * HF transformers' LLaMA: q/k/v/o nn.Linear without bias, GQA (query head h reads KV head
    h // (H // Hkv)), rotate-half RoPE: x * cos + rotate_half(x) * sin with
    rotate_half(x) = cat(-x2, x1), cos/sin of cat(freqs, freqs), freqs = pos * inv_freq (f32);
    inv_freq = 1 / theta ** (arange(0, r, 2).float() / r) in f32;
  * GPT-J: the interleaved layout (rotate_every_two: pairs (2i, 2i + 1), sin/cos repeated
    twice per pair), partial rotary (rotary_dim < head_dim), no biases;
  * Pythia (GPT-NeoX): rotate-half on the first rotary_dim = head_dim / 4 dims, biases;
  * Qwen3: per-head RMSNorm of q and k before RoPE (x * rsqrt(mean(x^2) + eps) * w, f32),
    theta 1e6, GQA;
  * LLaMA 3.1's scaled frequencies (factor 8, low/high frequency factors 1/4, original
    context 8192), handed to the library as its inv_freq table;
  * MoH-LLaMA3: the norm router of gen_moh_vectors.py (binary gates from the norms of the
    pre-RoPE q) on a rotary GQA layer.

Attention is written out (scores, masked_fill, softmax, P.V; scale 1/sqrt(D)), with query i
at position q_offset + i and key j at j; causal keeps keys j <= q_offset + i. Run with Debian's
torch (python3-torch, 1.13) from the repository root:

    /usr/bin/python3 tests/data/gen_rotary_vectors.py

It rewrites tests/data/rope_*.bin (about 90 KB together); float32 on the CPU, fixed seed.
File format: gen_torch_vectors.py ("MHTVEC01", written by its write_file).

Entries of every file (int32 scalars unless a shape or f32 is given):
    batch, n_q, d_model, n_heads, n_kv_heads, head_dim, bias
    layout                 1 = MH_ROTARY_HALF, 2 = MH_ROTARY_INTERLEAVED
    rotary_dim             r
    theta                  f32 scalar, the base of the default table
    qk_norm                0 or 1;  qk_norm_eps f32 scalar
    variant                0 = GQA family, 1 = MoH (norm router, binary gates)
    shared_heads, top_k    MoH only
    q_offset               the absolute position of query 0 in out_offset
    w_q [H*D, d]  w_k [Hkv*D, d]  w_v [Hkv*D, d]  w_o [d, H*D]     nn.Linear layout
    b_q [H*D]  b_k [Hkv*D]  b_v [Hkv*D]  b_o [d]                   only when bias == 1
    q_norm [D]  k_norm [D]                                          only when qk_norm == 1
    inv_freq [r/2]         only when the case hands the library its table (scaled)
    query [B, N, d]        self-attention input
    out_causal [B, N, d]   causal, queries at 0 .. N-1 (what token-by-token decode gives)
    out_offset [B, N, d]   causal, queries at q_offset .. q_offset + N - 1, keys at 0 .. N-1
"""

import math
import sys

import torch

sys.dont_write_bytecode = True  # no __pycache__ in tests/data
from gen_moh_vectors import NORM, TorchMoH, min_topk_gap  # noqa: E402
from gen_torch_vectors import torch_setup, write_file  # noqa: E402

SEED = 20261124
HALF, INTERLEAVED = 1, 2


def default_inv_freq(r, theta):
    """HF transformers' table, in f32: 1 / theta ** (arange(0, r, 2).float() / r)."""
    return 1.0 / (theta ** (torch.arange(0, r, 2, dtype=torch.int64).float() / r))


def llama31_inv_freq(r, theta, factor=8.0, low=1.0, high=4.0, old_ctx=8192):
    """LLaMA 3.1's frequency scaling of the default table."""
    inv = default_inv_freq(r, theta)
    wavelen = 2 * math.pi / inv
    low_wavelen, high_wavelen = old_ctx / low, old_ctx / high
    scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (old_ctx / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return torch.where(medium, smoothed, scaled)


def rms_norm(x, w, eps):
    """Qwen3's RMSNorm over the last dim, in f32."""
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotary(x, pos, inv, layout):
    """x [B, heads, T, D], pos [T] int: RoPE on the first r = 2 * len(inv) dims."""
    r = 2 * inv.numel()
    freqs = pos.float()[:, None] * inv[None, :]          # [T, r/2], one f32 product each
    xr, xp = x[..., :r], x[..., r:]
    if layout == HALF:
        emb = torch.cat([freqs, freqs], dim=-1)
        x1, x2 = xr[..., : r // 2], xr[..., r // 2:]
        turned = torch.cat([-x2, x1], dim=-1)
    else:
        emb = freqs.repeat_interleave(2, dim=-1)
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        turned = torch.stack([-x2, x1], dim=-1).flatten(-2)
    return torch.cat([xr * emb.cos() + turned * emb.sin(), xp], dim=-1)


def attend(q, k, v, q_pos, k_pos):
    """q [B, H, N, D], k/v [B, H, M, D] (already repeated): causal by position."""
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    s = s.masked_fill(k_pos[None, :] > q_pos[:, None], float("-inf"))
    return torch.softmax(s, dim=-1) @ v


class RotaryAttention(torch.nn.Module):
    def __init__(self, d, H, Hkv, D, bias, layout, inv, qk_norm, eps, moh=None):
        super().__init__()
        self.H, self.Hkv, self.D, self.layout, self.eps = H, Hkv, D, layout, eps
        self.inv, self.qk_norm, self.moh = inv, qk_norm, moh
        self.q = torch.nn.Linear(d, H * D, bias=bias)
        self.k = torch.nn.Linear(d, Hkv * D, bias=bias)
        self.v = torch.nn.Linear(d, Hkv * D, bias=bias)
        self.o = torch.nn.Linear(H * D, d, bias=bias)
        self.q_norm = torch.nn.Parameter(torch.empty(D)) if qk_norm else None
        self.k_norm = torch.nn.Parameter(torch.empty(D)) if qk_norm else None

    def forward(self, x, q_offset):
        B, N, _ = x.shape
        H, Hkv, D = self.H, self.Hkv, self.D
        q = self.q(x).view(B, N, H, D)
        k = self.k(x).view(B, N, Hkv, D)
        gates, scores = None, None
        if self.moh is not None:  # routed on the pre-RoPE projection, as MoH-LLaMA3
            gates, scores = self.moh.norm_gates(q.reshape(B * N, H, D))
        if self.qk_norm:
            q, k = rms_norm(q, self.q_norm, self.eps), rms_norm(k, self.k_norm, self.eps)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        v = self.v(x).view(B, N, Hkv, D).transpose(1, 2)
        q_pos = torch.arange(N) + q_offset
        k_pos = torch.arange(N)
        q = rotary(q, q_pos, self.inv, self.layout)
        k = rotary(k, k_pos, self.inv, self.layout)
        k = k.repeat_interleave(H // Hkv, dim=1)
        v = v.repeat_interleave(H // Hkv, dim=1)
        o = attend(q, k, v, q_pos, k_pos).transpose(1, 2)   # [B, N, H, D]
        if gates is not None:
            o = o * gates.view(B, N, H)[..., None]
        return self.o(o.reshape(B, N, H * D)), scores


def randomize(m):
    """Weights and biases uniform in [-0.5, 0.5]; norm weights in [0.5, 1.5]."""
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("_norm"):
                p.uniform_(0.5, 1.5)
            else:
                p.uniform_(-0.5, 0.5)


def rotary_case(fname, H, Hkv, D, layout, r, theta=10000.0, bias=False, qk_norm=False,
                scaled=False, moh=None, B=2, N=9, d=16, q_offset=5, eps=1e-6):
    inv = llama31_inv_freq(r, theta) if scaled else default_inv_freq(r, theta)
    router = None
    if moh is not None:
        hs, K = moh
        router = TorchMoH(d, H, Hkv, D, hs, K, NORM, bias)  # only its norm_gates is used
    m = RotaryAttention(d, H, Hkv, D, bias, layout, inv, qk_norm, eps, router)
    randomize(m)
    for _ in range(100):  # MoH: redraw until no near-tie at the top-K boundary
        x = torch.randn(B, N, d)
        with torch.no_grad():
            out_causal, scores = m(x, 0)
            out_offset, _ = m(x, q_offset)
        if moh is None or min_topk_gap(scores, moh[1], True) > 1e-2:
            break
    else:
        raise RuntimeError("%s: no input without near-ties" % fname)
    ents = [("batch", B), ("n_q", N), ("d_model", d), ("n_heads", H), ("n_kv_heads", Hkv),
            ("head_dim", D), ("bias", int(bias)), ("layout", layout), ("rotary_dim", r),
            ("theta", torch.tensor(theta)), ("qk_norm", int(qk_norm)),
            ("qk_norm_eps", torch.tensor(eps)), ("variant", int(moh is not None)),
            ("shared_heads", moh[0] if moh else 0), ("top_k", moh[1] if moh else 0),
            ("q_offset", q_offset),
            ("w_q", m.q.weight), ("w_k", m.k.weight), ("w_v", m.v.weight), ("w_o", m.o.weight)]
    if bias:
        ents += [("b_q", m.q.bias), ("b_k", m.k.bias), ("b_v", m.v.bias), ("b_o", m.o.bias)]
    if qk_norm:
        ents += [("q_norm", m.q_norm), ("k_norm", m.k_norm)]
    if scaled:
        ents.append(("inv_freq", inv))
    ents += [("query", x), ("out_causal", out_causal), ("out_offset", out_offset)]
    write_file(fname, ents)


def main():
    torch_setup(SEED)
    rotary_case("rope_a_llama_gqa.bin", H=4, Hkv=2, D=16, layout=HALF, r=16)
    rotary_case("rope_b_gptj.bin", H=2, Hkv=2, D=16, layout=INTERLEAVED, r=8)
    rotary_case("rope_c_pythia.bin", H=2, Hkv=2, D=16, layout=HALF, r=4, bias=True)
    rotary_case("rope_d_qwen3.bin", H=4, Hkv=2, D=16, layout=HALF, r=16, theta=1e6,
                qk_norm=True)
    rotary_case("rope_e_llama31_scaled.bin", H=4, Hkv=2, D=16, layout=HALF, r=16,
                theta=500000.0, scaled=True, N=12, q_offset=3000)
    rotary_case("rope_f_moh_llama3.bin", H=8, Hkv=2, D=8, layout=HALF, r=8, theta=500000.0,
                moh=(4, 2))


if __name__ == "__main__":
    main()
