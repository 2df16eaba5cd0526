"""The report's section on measuring a real model's layer (`--weights`), for bench/report.py."""

WEIGHTS_MD = """
## Measuring a real model's layer (`--weights`)

The layer modes (`layer`, `cross`, decode through the layer) start from a seeded MHA layer unless
`bench/run.sh --weights FILE [--heads H]` gives one attention layer as a
[safetensors](https://github.com/huggingface/safetensors) file, in PyTorch naming
(`nn.Linear` weights are `[out_features, in_features]`):

| tensor | shape | |
| :--- | :--- | :--- |
| `q_proj.weight` | `[H*D, d_model]` | required |
| `k_proj.weight` | `[Hkv*D, kdim]` | required (`kdim = d_model` for self-attention) |
| `v_proj.weight` | `[Hkv*Dv, vdim]` | required |
| `o_proj.weight` | `[d_model, H*Dv]` | required |
| `q_proj.bias`, `k_proj.bias`, `v_proj.bias`, `o_proj.bias` | `[H*D]`, `[Hkv*D]`, `[Hkv*Dv]`, `[d_model]` | optional; a missing one reads as zeros |

Each tensor is F32, F16 or BF16. The names may carry a prefix (e.g.
`model.layers.0.self_attn.q_proj.weight`): it is found when exactly one tensor ends in
`q_proj.weight`, else give `--mh_weights_prefix=PREFIX` (an mh_bench flag; pass it through
run.sh). H is not in the shapes: `--heads H`, or `num_attention_heads` in the header's
`__metadata__`. With Hkv = H (an MHA layer) every variant is derived from it; a GQA checkpoint
(Hkv < H) is accepted and only the coarser variants derive from it. The header is parsed with
cJSON; a malformed file (bad header length, invalid JSON, unknown dtype, a shape that does not match
its byte range, truncated data, overlapping or missing tensors) stops the run with a message
naming the problem. `build/release/bench/mh_bench --mh_write_example=FILE` writes a small example
file; `mh_bench --mh_selfcheck` tests the loader's error paths.

To extract one layer from a Hugging Face checkpoint (Python, outside this project):

```python
from safetensors.torch import load_file, save_file
sd = load_file("model-00001-of-00002.safetensors")
p = "model.layers.0.self_attn."
save_file({k[len(p):]: v for k, v in sd.items() if k.startswith(p)}, "layer0.safetensors",
          metadata={"num_attention_heads": "32"})
```
"""
