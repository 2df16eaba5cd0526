"""The tiny decoder in PyTorch: one definition of the model for gen_tiny_decoder.py (seeded
weights, reference generations) and bench/accuracy/train.py (trained models).

A byte-level decoder-only transformer: pre-RMSNorm layers `x += attn(RMSNorm(x))`,
`x += W_down(silu(W_gate h) * W_up h)` with `h = RMSNorm(x)`, a final RMSNorm and an LM head
tied to the embedding. Positions: rotate-half rotary in the attention (HF LLaMA's, angles in
float32) or a learned absolute embedding added to the token embedding ("position": "learned",
pos_embed [pos_ctx, d]), or none. The attention is the library's variant named by
cfg["variant"] (docs/variants.md has the math; mh_layer_config / mh_<variant>_config fields in
brackets):

  gqa      MHA / GQA / MQA by n_kv_heads (K/V head j serves query heads j*g .. j*g + g - 1)
  moh      MoH on that base: heads 0 .. moh_shared-1 always run, each token also runs the
           moh_top_k routed heads of its router (moh_router "norm": the largest ||q_h||, gates
           1; "learned": W_r / W_s / W_h gates as MoH-ViT's code)
  overlap  overlapping heads (MOHSA): head h reads `overlap` dims of each neighbour's q, k, v
           (zeros past the ends); W_O is [d, H (D + 2o)]; scale 1/sqrt(D + 2o)
  collab   CollabHead: one shared q~ and k~ of width collab_dim, head h's scores
           scale (q~ * mix[h]) . k~ + content[h] . x_key; scale 1/sqrt(head_dim)
  dcmha    DCMHA (DCFormer): MHA plus the dynamic cross-head composition of the scores and the
           probabilities (rank dc_rank, hidden dc_hidden, one group, exact GELU, static W_b)

Weights are a dict name -> tensor in the layouts of the safetensors file (gen_tiny_decoder.py's
docstring and metadata() list them); every tensor may require grad (the model is plain autograd
code), and every call takes a batch: tokens [B, n] -> logits [B, n, vocab].
"""
import json
import math
import struct

import torch


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def causal(s):
    n = s.shape[-1]
    return s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))


def moh_gaps_of(norms, k):
    """The smallest gap between the K-th and (K+1)-th routed ||q_h|| relative to the largest."""
    top = torch.topk(norms, k + 1, dim=-1).values
    return ((top[..., -2] - top[..., -1]) / top[..., 0]).min().item()


class Model:
    """cfg: the metadata dict (ints and floats parsed); w: the weights."""

    def __init__(self, cfg, w):
        self.c, self.w = cfg, w
        self.moh_gaps = []  # norm router: its smallest routing gap per call (ties are fragile)

    def rotary_tables(self, n, dtype):
        """cos, sin [n, D] (rotate-half: the D/2 frequencies twice), angles in float32 as HF."""
        D = self.c["head_dim"]
        inv_freq = 1.0 / (self.c["theta"] ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))
        ang = torch.outer(torch.arange(n, dtype=torch.int64).float(), inv_freq)
        emb = torch.cat([ang, ang], dim=-1).to(dtype)
        return emb.cos(), emb.sin()

    def moh_gates(self, l, x, q):
        """[B, n, H] gates of MoH (zeros for the heads a token does not run); q [B, H, n, D]."""
        c, w = self.c, self.w
        hs, K, H = c["moh_shared"], c["moh_top_k"], c["n_heads"]
        B, n = x.shape[:2]
        if c["moh_router"] == "norm":
            norms = q[:, hs:].norm(dim=-1).transpose(1, 2)   # [B, n, E]
            self.moh_gaps.append(moh_gaps_of(norms, K))
            chosen = torch.topk(norms, K, dim=-1).indices
            routed = torch.zeros_like(norms).scatter(-1, chosen, 1.0)
            return torch.cat([torch.ones(B, n, hs, dtype=x.dtype), routed], dim=-1)
        logit = x @ w[f"{l}.moh_w_router"].T                 # [B, n, E]
        chosen = torch.topk(logit, K, dim=-1).indices
        keep = torch.zeros_like(logit, dtype=torch.bool).scatter(-1, chosen, True)
        routed = K * torch.softmax(logit.masked_fill(~keep, float("-inf")), dim=-1)
        if hs == 0:
            return routed
        shared = (hs * torch.softmax(x @ w[f"{l}.moh_w_shared"].T, dim=-1) if hs > 1
                  else torch.ones(B, n, 1, dtype=x.dtype))
        a = 2 * torch.softmax(x @ w[f"{l}.moh_w_stage"].T, dim=-1)
        return torch.cat([a[..., :1] * shared, a[..., 1:] * routed], dim=-1)

    def qkv(self, l, x):
        """q [B, H, n, Dqk], k/v [B, Hkv, n, Dqk / Dv] and the score scale of the variant."""
        c, w = self.c, self.w
        H, Hkv, D = c["n_heads"], c["n_kv_heads"], c["head_dim"]
        B, n = x.shape[:2]
        heads = lambda t, h: t.view(B, n, h, t.shape[-1] // h).transpose(1, 2)
        q, k, v = x @ w[f"{l}.w_q"].T, x @ w[f"{l}.w_k"].T, x @ w[f"{l}.w_v"].T
        if c["variant"] == "overlap":    # windows of D + 2o over the zero-padded rows
            o = c["overlap"]
            win = lambda t: torch.nn.functional.pad(t, (o, o)).unfold(-1, D + 2 * o, D).transpose(1, 2)
            return win(q), win(k), win(v), 1 / math.sqrt(D + 2 * o)
        if c["variant"] == "collab":     # head h: q~ * mix[h] against the one shared k~
            return q[:, None] * w[f"{l}.collab_mix"][None, :, None, :], k[:, None], heads(v, H), 1 / math.sqrt(D)
        return heads(q, H), heads(k, Hkv), heads(v, Hkv), 1 / math.sqrt(D)

    def attention(self, l, x, cos, sin):
        c, w = self.c, self.w
        H = c["n_heads"]
        B, n = x.shape[:2]
        q, k, v, scale = self.qkv(l, x)
        gates = self.moh_gates(l, x, q) if c["variant"] == "moh" else None  # before rotary
        if cos is not None:
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(H // k.shape[1], dim=1)
        v = v.repeat_interleave(H // v.shape[1], dim=1)
        s = q @ k.transpose(-1, -2)
        if c["variant"] == "collab":     # the content bias of each key, inside the scale
            s = s + (x @ w[f"{l}.collab_content"].T).transpose(1, 2)[:, :, None, :]
        s = s * scale
        if c["variant"] == "dcmha":
            s, post = self.dcmha_compose(l, x, s)
            p = post(torch.softmax(causal(s), dim=-1))
        else:
            p = torch.softmax(causal(s), dim=-1)
        o = p @ v                                             # [B, H, n, Dv]
        if gates is not None:
            o = o * gates.transpose(1, 2)[..., None]
        return o.transpose(1, 2).reshape(B, n, -1) @ w[f"{l}.w_o"].T

    def dcmha_compose(self, l, x, s):
        """The pre-composed scores and the post-composition (docs/variants.md, "DCMHA")."""
        c, w = self.c, self.w
        H, R, C, d = c["n_heads"], c["dc_rank"], c["dc_hidden"], c["d_model"]
        B, n = x.shape[:2]
        hid = torch.nn.functional.gelu(x @ w[f"{l}.dc_w1"].reshape(d, 4 * C))
        dyn = torch.einsum("bnck,ckrh->bncrh", hid.view(B, n, 4, C), w[f"{l}.dc_w2"][0])
        w1, w2 = dyn[:, :, :, :R], dyn[:, :, :, R:]           # [B, n, 4, R, H]
        w1 = w1 * torch.rsqrt(w1.pow(2).mean(-1, keepdim=True) + 1e-6)
        dd = torch.tanh(x @ w[f"{l}.dc_wd"].reshape(d, 4 * H)).view(B, n, 4, H)

        def compose(a, cq, ck, wb):                          # a [B, H, t, s] -> [B, H, t, s]
            a = a.permute(0, 2, 3, 1)                        # [B, t, s, H]: batched matmuls
            ak = a.transpose(1, 2)                           # [B, s, t, H]
            out = (a + a @ wb + (a @ w1[:, :, cq].transpose(-1, -2)) @ w2[:, :, cq]
                   + ((ak @ w1[:, :, ck].transpose(-1, -2)) @ w2[:, :, ck]).transpose(1, 2)
                   + a * dd[:, :, None, cq] + a * dd[:, None, :, ck])
            return out.permute(0, 3, 1, 2)

        pre = compose(s, 0, 1, w[f"{l}.dc_wb_pre"][0])
        return pre, lambda p: compose(p, 2, 3, w[f"{l}.dc_wb_post"][0])

    def logits(self, tokens):
        """tokens [B, n] (int64) -> the logits of every position [B, n, vocab]."""
        c, w = self.c, self.w
        eps = c["norm_eps"]
        x = w["embed"][tokens]
        n = tokens.shape[-1]
        if c.get("position") == "learned":
            x = x + w["pos_embed"][:n]
        cos = sin = None
        if c["rotary"] == "half":
            cos, sin = self.rotary_tables(n, x.dtype)
        for l in range(c["layers"]):
            x = x + self.attention(l, rms_norm(x, w[f"{l}.attn_norm"], eps), cos, sin)
            h = rms_norm(x, w[f"{l}.mlp_norm"], eps)
            gate = torch.nn.functional.silu(h @ w[f"{l}.w_gate"].T)
            x = x + (gate * (h @ w[f"{l}.w_up"].T)) @ w[f"{l}.w_down"].T
        return rms_norm(x, w["final_norm"], eps) @ w["embed"].T


def weight_shapes(c):
    """name -> shape of every weight of the model described by metadata dict c."""
    d, H, Hkv, D, F, V = c["d_model"], c["n_heads"], c["n_kv_heads"], c["head_dim"], c["ffn"], c["vocab"]
    s = {"embed": (V, d), "final_norm": (d,)}
    if c.get("position") == "learned":
        s["pos_embed"] = (c["pos_ctx"], d)
    for l in range(c["layers"]):
        qk_q, qk_k, v_w, o_w = H * D, Hkv * D, Hkv * D, H * D
        if c["variant"] == "collab":
            qk_q = qk_k = c["collab_dim"]
        if c["variant"] == "overlap":
            o_w = H * (D + 2 * c["overlap"])
        s.update({f"{l}.attn_norm": (d,), f"{l}.mlp_norm": (d,), f"{l}.w_q": (qk_q, d), f"{l}.w_k": (qk_k, d),
                  f"{l}.w_v": (v_w, d), f"{l}.w_o": (d, o_w), f"{l}.w_gate": (F, d), f"{l}.w_up": (F, d),
                  f"{l}.w_down": (d, F)})
        if c["variant"] == "collab":
            s.update({f"{l}.collab_mix": (H, c["collab_dim"]), f"{l}.collab_content": (H, d)})
        if c["variant"] == "moh" and c["moh_router"] == "learned":
            hs = c["moh_shared"]
            s[f"{l}.moh_w_router"] = (H - hs, d)
            if hs > 1:
                s[f"{l}.moh_w_shared"] = (hs, d)
            if hs > 0:
                s[f"{l}.moh_w_stage"] = (2, d)
        if c["variant"] == "dcmha":
            C, R = c["dc_hidden"], c["dc_rank"]
            s.update({f"{l}.dc_w1": (d, 1, 4, C), f"{l}.dc_w2": (1, 4, C, 2 * R, H), f"{l}.dc_wd": (d, 1, 4, H),
                      f"{l}.dc_wb_pre": (1, H, H), f"{l}.dc_wb_post": (1, H, H)})
    return s


def write_safetensors(path, tensors, meta):
    """tensors: name -> float32 or int32 tensor (names kept in insertion order); meta: str -> str."""
    header, blobs, offset = {"__metadata__": meta}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous()
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


def read_safetensors(path):
    """(tensors name -> tensor, metadata dict of strings) of a file write_safetensors wrote."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        blob = f.read()
    meta = header.pop("__metadata__", {})
    dtypes = {"F32": torch.float32, "I32": torch.int32}
    out = {}
    for name, h in header.items():
        b, e = h["data_offsets"]
        out[name] = torch.frombuffer(bytearray(blob[b:e]), dtype=dtypes[h["dtype"]]).reshape(h["shape"])
    return out, meta


def parse_meta(meta):
    """The metadata strings as a config dict (numbers parsed)."""
    c = {}
    for k, v in meta.items():
        try:
            c[k] = int(v)
        except ValueError:
            try:
                c[k] = float(v)
            except ValueError:
                c[k] = v
    return c
