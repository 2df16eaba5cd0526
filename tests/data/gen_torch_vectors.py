#!/usr/bin/python3
"""Reference vectors from PyTorch for tests/layers/test_torch_vectors.c.

Run with Debian's torch (python3-torch, 1.13) from the repository root:

    /usr/bin/python3 tests/data/gen_torch_vectors.py

It rewrites the files tests/data/torch_*.bin (about 70 KB together). Everything is float32 on
the CPU with a fixed seed, so re-running gives the same numbers on the same torch build.

File format ("MHTV", version 1), all integers and floats little-endian:

    char     magic[8]      "MHTVEC01"
    uint32   n_entries
    n_entries times:
        uint32   name_len
        char     name[name_len]    ASCII, not NUL-terminated
        uint32   dtype             0 = float32, 1 = int32
        uint32   ndim              0..4 (0 = a scalar: one element)
        uint32   dims[ndim]
        4-byte   data[prod(dims)]  row-major

Entries of every file (int32 scalars unless a shape is given):
    batch, n_q, n_kv          B, N, M (M == N for self-attention)
    d_model, n_heads, n_kv_heads, head_dim, kdim, vdim, bias
    causal                    1: the library runs with mh_attn_options.causal = 1
    q_offset                  -1: MH_Q_OFFSET_END (the default); else the absolute offset
    self_attn                 1: key = value = NULL in mh_forward_args (key = value = query)
    w_q [H*D, d_model]  w_k [Hkv*D, kdim]  w_v [Hkv*D, vdim]  w_o [d_model, H*D]
                              float32, PyTorch nn.Linear layout [out_features, in_features]
    b_q [H*D]  b_k [Hkv*D]  b_v [Hkv*D]  b_o [d_model]      only when bias == 1
    query [B, N, d_model]     float32
    key [B, M, kdim], value [B, M, vdim]                     only when self_attn == 0
    out [B, N, d_model]       float32, torch's output (NaN rows kept as torch gave them)
    probs [B, H, N, M]        float32, torch's per-head softmax (average_attn_weights=False)
    kv_len [B]                int32, optional: valid keys per sequence (padding is a suffix)
    nan_rows [B, N]           int32, optional: 1 where torch's output row (and that row of
                              probs in every head) is NaN because every key of that query is
                              masked. The library's attention returns an all-zero row there, so
                              the test expects probabilities 0 and a layer output of
                              out_proj(0) = b_o (0 without biases).

Cases (one file each):
    torch_a_mha_bias.bin        nn.MultiheadAttention(16, 4, bias=True, batch_first=True),
                                self-attention, B=3, N=5, no mask; per-head probabilities.
    torch_b_mha_nobias.bin      the same with bias=False (also no bias_k/bias_v).
    torch_c_cross_kvdim.bin     MultiheadAttention(16, 4, kdim=10, vdim=7), N=5 queries over
                                M=7 keys (q/k/v_proj_weight, in_proj_bias split in three).
    torch_d_causal.bin          self-attention, B=3, N=6, attn_mask = bool triu(ones, 1).
    torch_e_padding.bin         self-attention, B=3, N=5, key_padding_mask with valid
                                lengths [5, 3, 1] (suffix padding) -> kv_len; not causal.
    torch_e_causal_padding.bin  self-attention, B=3, N=6, valid lengths [6, 4, 2], causal
                                with the library's default alignment (q_offset END: query i
                                sits at position kv_len[b] - N + i). In torch that is a
                                per-sequence bool attn_mask [B*H, N, N] masking j > L_b - N + i,
                                plus key_padding_mask masking j >= L_b. Queries i < N - L_b
                                have no key: torch returns NaN rows (recorded in nan_rows);
                                the library's attention gives zeros there, so its layer output
                                is b_o and its probabilities 0.
    torch_f_gqa_bias.bin        a GQA layer written here in torch: H=6 query heads, Hkv=2 KV
                                heads, D=4, d_model=12 (so H*D = 24 != d_model), separate
                                nn.Linear q/k/v/o with bias, query head h uses KV head
                                h // (H // Hkv), scale 1/sqrt(D), causal, B=3, N=7.
    torch_f_gqa_nobias.bin      the same layer shape without biases.

nn.MultiheadAttention is run in training mode with dropout=0 under no_grad: that keeps torch
on the reference (slow) path of F.multi_head_attention_forward for every case, including
bias=False, where the eval-mode fast path is not available.
"""

import math
import os
import struct

import numpy as np
import torch

SEED = 20240611
OUT_DIR = os.path.dirname(os.path.abspath(__file__))
MAGIC = b"MHTVEC01"
F32, I32 = 0, 1


def write_file(name, entries):
    """entries: list of (name, value); ints become int32 scalars, numpy int arrays int32,
    everything else float32."""
    blob = bytearray(MAGIC)
    blob += struct.pack("<I", len(entries))
    for key, val in entries:
        if isinstance(val, torch.Tensor):
            val = val.detach().cpu().numpy()
        if isinstance(val, (bool, int)):
            arr, dtype = np.array(int(val), dtype="<i4"), I32
        elif np.issubdtype(np.asarray(val).dtype, np.integer) or np.asarray(val).dtype == bool:
            arr, dtype = np.asarray(val).astype("<i4"), I32
        else:
            arr, dtype = np.asarray(val).astype("<f4"), F32
        kb = key.encode("ascii")
        blob += struct.pack("<I", len(kb)) + kb
        blob += struct.pack("<II", dtype, arr.ndim)
        blob += struct.pack("<%dI" % arr.ndim, *arr.shape)
        blob += np.ascontiguousarray(arr).tobytes()
    path = os.path.join(OUT_DIR, name)
    with open(path, "wb") as f:
        f.write(blob)
    print("wrote %-28s %6d bytes" % (name, len(blob)))


def randomize_biases(mha):
    # torch initialises in_proj_bias and out_proj.bias to zero, which would test nothing.
    with torch.no_grad():
        if mha.in_proj_bias is not None:
            mha.in_proj_bias.uniform_(-0.5, 0.5)
        if mha.out_proj.bias is not None:
            mha.out_proj.bias.uniform_(-0.5, 0.5)


def mha_weights(mha):
    E = mha.embed_dim
    if mha._qkv_same_embed_dim:
        wq, wk, wv = mha.in_proj_weight.split(E, dim=0)
    else:
        wq, wk, wv = mha.q_proj_weight, mha.k_proj_weight, mha.v_proj_weight
    ents = [("w_q", wq), ("w_k", wk), ("w_v", wv), ("w_o", mha.out_proj.weight)]
    if mha.in_proj_bias is not None:
        bq, bk, bv = mha.in_proj_bias.split(E, dim=0)
        ents += [("b_q", bq), ("b_k", bk), ("b_v", bv), ("b_o", mha.out_proj.bias)]
    return ents


def nan_rows_of(out):
    """[B, N] int: 1 where the whole output row is NaN (checks it is all-or-nothing)."""
    isnan = torch.isnan(out)
    rows = isnan.all(dim=-1)
    assert torch.equal(rows, isnan.any(dim=-1)), "partially NaN output row"
    return rows.numpy().astype(np.int32)


def mha_case(fname, E, H, B, N, M=None, kdim=None, vdim=None, bias=True, causal=False,
             lengths=None, end_aligned_causal=False):
    self_attn = M is None
    M = N if self_attn else M
    kdim = kdim or E
    vdim = vdim or E
    mha = torch.nn.MultiheadAttention(E, H, dropout=0.0, bias=bias, kdim=kdim, vdim=vdim,
                                      batch_first=True)
    randomize_biases(mha)
    mha.train()  # training mode + dropout 0: always the slow, reference path
    query = torch.randn(B, N, E)
    if self_attn:
        key = value = query
    else:
        key = torch.randn(B, M, kdim)
        value = torch.randn(B, M, vdim)

    attn_mask = None
    key_padding_mask = None
    q_offset = -1
    if lengths is not None:
        lengths = torch.tensor(lengths, dtype=torch.int32)
        key_padding_mask = torch.arange(M)[None, :] >= lengths[:, None]  # True = ignore
    if causal and not end_aligned_causal:
        # query i at position i (== END alignment when M == N and no padding)
        attn_mask = torch.ones(N, M, dtype=torch.bool).triu(1)
    if causal and end_aligned_causal:
        i = torch.arange(N)[None, :, None]
        j = torch.arange(M)[None, None, :]
        L = lengths.long()[:, None, None]
        m = j > (L - N + i)                      # [B, N, M]
        attn_mask = m.repeat_interleave(H, dim=0)  # [B*H, N, M], batch-major like torch

    with torch.no_grad():
        out, probs = mha(query, key, value, key_padding_mask=key_padding_mask,
                         need_weights=True, attn_mask=attn_mask,
                         average_attn_weights=False)
    assert out.shape == (B, N, E) and probs.shape == (B, H, N, M)

    ents = [("batch", B), ("n_q", N), ("n_kv", M), ("d_model", E), ("n_heads", H),
            ("n_kv_heads", H), ("head_dim", E // H), ("kdim", kdim), ("vdim", vdim),
            ("bias", int(bias)), ("causal", int(causal)), ("q_offset", q_offset),
            ("self_attn", int(self_attn))]
    ents += mha_weights(mha)
    ents.append(("query", query))
    if not self_attn:
        ents += [("key", key), ("value", value)]
    ents += [("out", out), ("probs", probs)]
    if lengths is not None:
        ents.append(("kv_len", lengths.numpy()))
    nr = nan_rows_of(out)
    if nr.any() or lengths is not None:
        # the probabilities of a fully masked query are NaN in every head, nowhere else
        pn = torch.isnan(probs)
        assert torch.equal(pn.all(-1).any(1), torch.from_numpy(nr).bool())
        assert torch.equal(pn.any(-1), pn.all(-1))
        ents.append(("nan_rows", nr))
        if nr.any():
            print("  %s: NaN rows (b, i): %s" % (fname, [tuple(x) for x in np.argwhere(nr)]))
    else:
        assert not torch.isnan(probs).any()
    write_file(fname, ents)


class TorchGQA(torch.nn.Module):
    """Grouped-query attention written out in torch, PyTorch nn.Linear layout."""

    def __init__(self, d_model, H, Hkv, D, bias):
        super().__init__()
        self.H, self.Hkv, self.D = H, Hkv, D
        self.q = torch.nn.Linear(d_model, H * D, bias=bias)
        self.k = torch.nn.Linear(d_model, Hkv * D, bias=bias)
        self.v = torch.nn.Linear(d_model, Hkv * D, bias=bias)
        self.o = torch.nn.Linear(H * D, d_model, bias=bias)

    def forward(self, x, causal):
        B, N, _ = x.shape
        H, Hkv, D = self.H, self.Hkv, self.D
        q = self.q(x).view(B, N, H, D).transpose(1, 2)      # [B, H, N, D]
        k = self.k(x).view(B, N, Hkv, D).transpose(1, 2)    # [B, Hkv, N, D]
        v = self.v(x).view(B, N, Hkv, D).transpose(1, 2)
        k = k.repeat_interleave(H // Hkv, dim=1)            # head h -> kv head h // (H/Hkv)
        v = v.repeat_interleave(H // Hkv, dim=1)
        s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(D))
        if causal:
            s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
        p = torch.softmax(s, dim=-1)                        # [B, H, N, N]
        o = (p @ v).transpose(1, 2).reshape(B, N, H * D)
        return self.o(o), p


def gqa_case(fname, bias, B=3, N=7, d_model=12, H=6, Hkv=2, D=4, causal=True):
    m = TorchGQA(d_model, H, Hkv, D, bias)
    x = torch.randn(B, N, d_model)
    with torch.no_grad():
        out, probs = m(x, causal)
    ents = [("batch", B), ("n_q", N), ("n_kv", N), ("d_model", d_model), ("n_heads", H),
            ("n_kv_heads", Hkv), ("head_dim", D), ("kdim", d_model), ("vdim", d_model),
            ("bias", int(bias)), ("causal", int(causal)), ("q_offset", -1), ("self_attn", 1),
            ("w_q", m.q.weight), ("w_k", m.k.weight), ("w_v", m.v.weight),
            ("w_o", m.o.weight)]
    if bias:
        ents += [("b_q", m.q.bias), ("b_k", m.k.bias), ("b_v", m.v.bias), ("b_o", m.o.bias)]
    ents += [("query", x), ("out", out), ("probs", probs)]
    write_file(fname, ents)


def torch_setup(seed):
    """Deterministic float32 torch on one thread (shared with gen_moh_vectors.py)."""
    torch.manual_seed(seed)
    torch.set_default_dtype(torch.float32)
    torch.set_num_threads(1)
    print("torch", torch.__version__)


def main():
    torch_setup(SEED)
    mha_case("torch_a_mha_bias.bin", E=16, H=4, B=3, N=5, bias=True)
    mha_case("torch_b_mha_nobias.bin", E=16, H=4, B=3, N=5, bias=False)
    mha_case("torch_c_cross_kvdim.bin", E=16, H=4, B=3, N=5, M=7, kdim=10, vdim=7)
    mha_case("torch_d_causal.bin", E=16, H=4, B=3, N=6, causal=True)
    mha_case("torch_e_padding.bin", E=16, H=4, B=3, N=5, lengths=[5, 3, 1])
    mha_case("torch_e_causal_padding.bin", E=16, H=4, B=3, N=6, causal=True,
             lengths=[6, 4, 2], end_aligned_causal=True)
    gqa_case("torch_f_gqa_bias.bin", bias=True)
    gqa_case("torch_f_gqa_nobias.bin", bias=False)


if __name__ == "__main__":
    main()
