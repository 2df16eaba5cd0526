#!/usr/bin/python3
"""The accuracy report (issue 19): trains the models (train.py; reused when present), scores
each through the library (mh_accuracy_eval: held-out bits per byte by prefill and by decode,
checked against PyTorch's, and its attention layers timed), and writes the table and the
trade-off plot.

    /usr/bin/python3 bench/accuracy/report.py --eval BUILD/tests/accuracy/mh_accuracy_eval
        [--out build/accuracy] [--docs docs/benchmarks.md] [--command CMD] [--smoke]

--docs FILE   also put the table in FILE's accuracy section (between docs_section.py's
              markers; bench/report.py keeps that section when it rewrites FILE)
              and the plot in docs/benchmarks/accuracy/
--smoke       tiny models, a few steps (the ctest smoke test): the checks only, no plot
--no-train    score the models already in --out and list the missing ones as not trained
--jobs N      score N models at a time (default 1; the timings are CPU times of one thread)
Exit status 0 when every model trained and every C check held (C and PyTorch agree).
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import docs_section  # noqa: E402
import train  # noqa: E402

PLOT = "accuracy_tradeoff.png"


def evaluate(a, s, name, info):
    """Runs mh_accuracy_eval on one model; (its numbers, its output, ok)."""
    cmd = a.wrap + [a.eval, "--model", os.path.join(a.out, name + ".safetensors"),
           "--heldout", os.path.join(a.out, "heldout.bin"), "--slice", str(s["slice_windows"]),
           "--expect", repr(info["bpb"]), "--expect-slice", repr(info["bpb_slice"]),
           "--keys", str(s["decode_keys"]), "--prefill", str(s["prefill_tokens"]), "--tol", repr(s["tol"])]
    if info["source"] and info["steps"] == 0:  # an untrained conversion: the library's own?
        cmd += ["--converted-from", os.path.join(a.out, info["source"] + ".safetensors")]
    env = dict(os.environ, OMP_NUM_THREADS="1")  # one thread: the timings compare variants
    run = subprocess.run(cmd, capture_output=True, text=True, env=env)
    numbers = {}
    for line in run.stdout.splitlines():
        if line.startswith("json: "):
            numbers = json.loads(line[6:])
    return numbers, run.stdout, run.returncode == 0 and bool(numbers)


def label(name):
    """mha_seed2 -> "MHA (seed 2)", gqa4_from_mha -> "GQA-4 (from MHA)", moh50 -> "MoH-50", ..."""
    base, _, rest = name.partition("_")
    names = {"mha": "MHA", "mqa": "MQA", "overlap": "overlapping heads", "collab": "CollabHead", "dcmha": "DCMHA"}
    text = names.get(base) or {"gqa": "GQA-", "moh": "MoH-"}[base.rstrip("0123456789")] + base.lstrip("gqamoh")
    return text + {"": "", "seed2": " (seed 2)", "from_mha": " (from MHA)", "pooled": " (MHA pooled, not uptrained)"}[rest]


def table(rows, s):
    out = ["| model | parameters (attention) | KV bytes / token | bits / byte: C prefill | C decode (slice) | "
           "PyTorch | C vs PyTorch | decode us @ %d keys | prefill ms (%d tokens) | training |"
           % (s["decode_keys"], s["prefill_tokens"]),
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, info, c in rows:
        trained = (f"{info['steps']} steps from {label(info['source'])}" if info["source"]
                   else f"{info['steps']} steps, seed {info['seed']}")
        if info["source"] and info["steps"] == 0:
            trained = f"converted from {label(info['source'])}, not trained"
        worst = max(abs(c["bpb"] - info["bpb"]) / info["bpb"],
                    abs(c["bpb_decode_slice"] - info["bpb_slice"]) / info["bpb_slice"])
        out.append(f"| {label(name)} | {info['params']:,} ({info['attn_params']:,}) | {c['kv_bytes_per_token']:,} | "
                   f"{c['bpb']:.4f} | {c['bpb_decode_slice']:.4f} ({info['bpb_slice']:.4f}) | {info['bpb']:.4f} | "
                   f"{worst:.1e} | {c['decode_us']:.1f} | {c['prefill_ms']:.2f} | {trained} |")
    return "\n".join(out)


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(12, 5), sharey=True)
    for ax, key, xlabel in ((axes[0], "kv_bytes_per_token", "KV cache bytes per token (f32, all layers)"),
                            (axes[1], "decode_us", "decode time per token at 4096 keys, attention layers (us)")):
        for name, info, c in rows:
            ax.scatter(c[key], c["bpb"], s=30, color="#1f77b4" if not info["source"] else "#d62728" if info["steps"] else "#7f7f7f")
            ax.annotate(label(name), (c[key], c["bpb"]), fontsize=7, xytext=(4, 3), textcoords="offset points")
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("held-out bits per byte (through the library; lower is better)")
    fig.suptitle("Trained byte-level models per variant: quality against KV memory and decode time\n"
                 "(blue: from scratch; red: converted from MHA and uptrained; grey: converted, not trained)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def section(rows, s, isa, command, missing, note):
    mha = [info["bpb"] for name, info, _ in rows if name in ("mha", "mha_seed2")]
    noise = f"{abs(mha[0] - mha[1]):.4f}" if len(mha) == 2 else "n/a"
    return "\n".join([
        docs_section.BEGIN,
        "## Accuracy of trained models: what each variant gives up",
        "",
        f"Byte-level language models, one per variant, trained by `bench/accuracy/train.py` (PyTorch, CPU) on "
        f"the English fortunes of Debian's `fortunes` package and scored on its held-out last sixteenth "
        f"({rows[0][2]['windows']} windows of {s['ctx']} bytes) through the library by "
        f"`mh_accuracy_eval` ({isa}, 1 thread). Every model: d_model {s['d_model']}, {s['layers']} layers, "
        f"{s['n_heads']} query heads of {s['head_dim']}, SwiGLU {s['ffn']}, learned positions, context "
        f"{s['ctx']}, batch {s['batch']}, {s['steps']} steps of AdamW, the same data order and seed. "
        f"Variants: GQA-{s['n_heads'] // 2} and GQA-{s['n_heads'] // 4} are {s['n_heads'] // 2} and "
        f"{s['n_heads'] // 4} K/V heads; MoH-50 and MoH-75 run {s['n_heads'] // 4} shared heads and the top "
        f"{s['n_heads'] // 4} or {s['n_heads'] // 2} of the other {s['n_heads'] - s['n_heads'] // 4} by the "
        f"learned router (trained without MoH's load-balancing loss, which the library does not need); "
        f"overlapping heads borrow {s['head_dim'] // 4} dims from each neighbour; CollabHead from scratch "
        f"shares q/k of width {s['n_heads'] * s['head_dim'] // 2} (half of H*D), converted of H*D; DCMHA has "
        f"rank 2, hidden {4 * s['n_heads']}, static W_b. "
        f"The two MHA seeds differ by {noise} bits per byte: differences smaller than that are noise. "
        f"Regenerate with (about 40 minutes on 2 cores; trained models are reused from `build/accuracy/`):",
        "",
        "```sh",
        command,
        "```",
        "",
        "Columns: **parameters** of the whole model (of its attention layers); **KV bytes / token**: "
        "`mh_kv_cache_bytes_per_token` of the f32 cache, summed over the layers (CollabHead and DCMHA include "
        "their per-token key factors); **bits / byte**: mean -log2 p(byte) over the held-out windows, "
        "**C prefill** by `mh_layer_forward` (causal) over whole windows, **C decode (slice)** token by token "
        "through `mh_layer_decode` over the first windows (PyTorch's number for the same slice in brackets), "
        "**PyTorch** its float64 evaluation of the same float32 weights; **C vs PyTorch**: the larger relative "
        "difference of the two C numbers from PyTorch's (the bound is 1e-4); **decode us**: one token through "
        "every attention layer with the cache holding that many keys, **prefill ms**: every attention layer's "
        "causal forward of one sequence of that many tokens (medians of 15 in CPU time of the one thread, "
        "the attention layers only, on unit-RMS inputs: the rest of the model is the same for every variant); **training**: steps and seed, "
        "or the conversion (K/V heads mean-pooled as `mh_convert_mha_to_gqa` does, then uptrained for 10% of "
        "the steps, or not at all in the \"pooled\" rows; CollabHead's exact conversion as "
        "`mh_convert_mha_to_collab`, not trained: it must score exactly MHA's). Times come "
        "from a shared 2-core machine: compare them within a run, and rerun on a quiet one.",
        "",
        table(rows, s),
        "",
        *([f"Not in this run (not trained: `{command}` trains them): "
           + ", ".join(label(n) for n in missing) + ".", ""] if missing else []),
        *([note, ""] if note else []),
        f"![bits per byte against KV bytes per token and decode time](benchmarks/accuracy/{PLOT})",
        docs_section.END,
    ])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--eval", required=True, help="the mh_accuracy_eval program")
    ap.add_argument("--out", default="build/accuracy")
    ap.add_argument("--docs")
    ap.add_argument("--command", default="bench/run.sh --accuracy")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--no-train", action="store_true")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--note", default="", help="a paragraph for the section (e.g. why rows are missing)")
    ap.add_argument("--wrap", action="append", default=[],
                    help="repeatable: the command (and its arguments) that runs --eval, e.g. qemu")
    a = ap.parse_args()
    s = train.SMOKE if a.smoke else train.FULL
    if not a.no_train and subprocess.run([sys.executable, train.__file__, "--out", a.out] +
                                         (["--smoke"] if a.smoke else [])).returncode:
        sys.exit("report.py: training failed")
    names, missing = [], []
    for name in train.models(s):
        (names if os.path.exists(os.path.join(a.out, name + ".json")) or not a.no_train else missing).append(name)
    infos = {}
    for name in names:
        with open(os.path.join(a.out, name + ".json")) as f:
            infos[name] = json.load(f)
    with concurrent.futures.ThreadPoolExecutor(max(1, a.jobs)) as pool:
        results = list(pool.map(lambda n: evaluate(a, s, n, infos[n]), names))
    rows, failed = [], []
    for name, (c, text, ok) in zip(names, results):
        print(f"== {name}\n{text}", end="", flush=True)
        if not ok:
            failed.append(name)
            continue
        rows.append((name, infos[name], c))
    if rows:
        md = section(rows, s, rows[0][2]["isa"], a.command, missing, a.note)
        with open(os.path.join(a.out, "report.md"), "w", encoding="utf-8") as f:
            f.write(md + "\n")
        print("\n" + table(rows, s))
        if not a.smoke:
            plot(rows, os.path.join(a.out, PLOT))
        if a.docs:
            ddir = os.path.join(os.path.dirname(os.path.abspath(a.docs)), "benchmarks", "accuracy")
            os.makedirs(ddir, exist_ok=True)
            plot(rows, os.path.join(ddir, PLOT))
            with open(a.docs, encoding="utf-8") as f:
                doc = docs_section.put_section(f.read(), md)
            with open(a.docs, "w", encoding="utf-8") as f:
                f.write(doc)
            print(f"wrote {a.docs} (its accuracy section) and {os.path.join(ddir, PLOT)}")
    if failed:
        sys.exit(f"report.py: checks failed for {', '.join(failed)}")
    print(f"report.py: {len(rows)} models, C and PyTorch agree on every one")


if __name__ == "__main__":
    main()
