"""The plots of bench/report.py's report (matplotlib; none without it): throughput against
sequence length, decode time against cache length, int8 against f16 in decode, memory per
variant, error per variant and a roofline with the measured ceilings. make_plots() takes
report.py's Report and writes the PNGs it can draw."""
import os
from collections import defaultdict

# The case modes and the K/V dtypes, in table and plot order.
MODES = ["prefill", "decode", "layer", "cross"]
DTYPE_ORDER = {"f32": 0, "f16": 1, "bf16": 2, "i8": 3}

# One colour and one marker per variant row (11 rows today; distinct up to 16, then reused).
VARIANT_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                  "#bcbd22", "#17becf", "#000000", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5"]
VARIANT_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "h", "<", ">", "p", "d", "H", "8", "1"]


def rotate_crowded(ax, n):
    """Slanted x tick labels when more than 5 variants share the axis."""
    if n > 5:
        for label in ax.get_xticklabels():
            label.set_rotation(35)
            label.set_horizontalalignment("right")


def remove_stale_plots(outdir, plots):
    """Deletes the PNGs of a previous run that this report does not show (e.g. after --quick)."""
    keep = {fname for fname, _ in plots}
    if not os.path.isdir(outdir):
        return
    for fname in os.listdir(outdir):
        if fname.endswith(".png") and fname not in keep:
            os.remove(os.path.join(outdir, fname))


def make_plots(rep, outdir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    os.makedirs(outdir, exist_ok=True)
    made = []
    palette = VARIANT_COLORS
    colors = {v: VARIANT_COLORS[i % len(VARIANT_COLORS)] for i, v in enumerate(rep.variants)}
    marks = {v: VARIANT_MARKERS[i % len(VARIANT_MARKERS)] for i, v in enumerate(rep.variants)}

    def save(fig, fname, title):
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, fname), dpi=110)
        plt.close(fig)
        made.append((fname, title))

    # 1. throughput vs sequence length per variant (prefill core and encoder layer): one panel
    # per mode that has lines (a variant with one sequence length is no line: the quick suite)
    panels = []
    for mode in ("prefill", "layer"):
        groups = defaultdict(list)
        for c in rep.grid(mode):
            d = c.dims
            groups[(d.get("H"), d.get("D"), d.get("dm", 0), c.dtype, c.variant)].append(c)
        # the shape family with the most sequence lengths, then the most cases (the variant
        # comparison's shapes over a single variant's, e.g. issue 17's small prompts)
        fam, size = defaultdict(set), defaultdict(int)
        for (h, dd, dm, dt, v), cs in groups.items():
            fam[(h, dd, dm, dt)] |= {c.dims.get("N") for c in cs}
            size[(h, dd, dm, dt)] += len(cs)
        if not fam:
            continue
        best = max(fam, key=lambda k: (len(fam[k]), size[k]))
        lines = [(v, cs) for (h, dd, dm, dt, v), cs in groups.items() if (h, dd, dm, dt) == best and len(cs) >= 2]
        if lines:
            panels.append((mode, best, lines))
    if panels:
        fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
        for ax, (mode, best, lines) in zip(axes[0], panels):
            for v, cs in lines:
                cs.sort(key=lambda c: c.dims.get("N"))
                ax.plot([c.dims["N"] for c in cs], [c.c("tokens_per_s") for c in cs], "-", marker=marks[v], label=v,
                        color=colors[v])
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("sequence length N (= M)")
            ax.set_ylabel("tokens / s")
            h, dd, dm, dt = best
            ax.set_title(f"{mode}: H={h}, D={dd}" + (f", d_model={dm}" if dm else "") + f", {dt}")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8, ncol=2)
        save(fig, "throughput_vs_seqlen.png", "Throughput against sequence length, per variant")

    # 2. decode time vs cache length
    core = [c for c in rep.grid("decode") if not c.layer_api and c.dims.get("B", 1) == 1]
    groups = defaultdict(list)
    for c in core:
        groups[(c.variant, c.dtype, c.token_major)].append(c)
    lines = {k: cs for k, cs in groups.items() if len(cs) >= 2}  # one point is no line (the quick suite)
    if lines:
        fig, ax = plt.subplots(figsize=(7.5, 4.5))
        styles = {"f32": "-", "f16": "--", "bf16": ":", "i8": "-."}
        for (v, dt, tm), cs in sorted(lines.items(), key=lambda kv: (rep.variants.index(kv[0][0]), kv[0][2],
                                                                     DTYPE_ORDER.get(kv[0][1], 9))):
            cs.sort(key=lambda c: c.dims["M"])
            ax.plot([c.dims["M"] for c in cs], [c.ms for c in cs], linestyle=(0, (1, 1)) if tm else styles.get(dt, "-"),
                    marker=marks[v], color=colors[v], label=f"{v} {dt}" + (" token-major" if tm else ""),
                    markerfacecolor="none" if tm else colors[v])
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("cached tokens M")
        ax.set_ylabel("ms per decoded token")
        d = core[0].dims
        cold = all(c.c("cold") for cs in lines.values() for c in cs)
        ax.set_title(f"decode (attention core{', cold K/V' if cold else ''}): H={d.get('H')}, D={d.get('D')}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, ncol=2)
        save(fig, "decode_time_vs_cache.png", "Decode time against cache length")

    # 3. memory per token per variant
    mem = {}
    for c in rep.grid("decode"):
        if not c.layer_api:
            mem.setdefault((c.dims.get("H"), c.dims.get("D")), {}).setdefault(c.variant, {})[c.dtype] = c.c(
                "kv_bytes_per_token")
    wts = {}
    for c in rep.grid("layer"):
        wts.setdefault((c.dims.get("dm"), c.dims.get("H"), c.dims.get("D")), {})[c.variant] = c.c("weights_bytes")
    if mem or wts:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
        if mem:
            (h, dd), per = next(iter(mem.items()))
            vs = [v for v in rep.variants if v in per]
            dts = [dt for dt in DTYPE_ORDER if any(dt in per[v] for v in vs)]
            width = 0.8 / max(1, len(dts))
            for i, dt in enumerate(dts):
                axes[0].bar([j + i * width for j in range(len(vs))], [per[v].get(dt, 0) / 1024 for v in vs], width,
                            label=dt)
            axes[0].set_xticks([j + width * (len(dts) - 1) / 2 for j in range(len(vs))], vs)
            rotate_crowded(axes[0], len(vs))
            axes[0].set_ylabel("KV cache KiB per token (per layer)")
            axes[0].set_title(f"KV cache per token: H={h}, D={dd}")
            axes[0].legend()
        else:
            axes[0].set_visible(False)
        if wts:
            (dm, h, dd), per = max(wts.items(), key=lambda kv: len(kv[1]))
            vs = [v for v in rep.variants if v in per]
            axes[1].bar(vs, [per[v] / 2 ** 20 for v in vs], color=[colors[v] for v in vs])
            rotate_crowded(axes[1], len(vs))
            axes[1].set_ylabel("packed weights, MiB")
            axes[1].set_title(f"layer weights: d_model={dm}, H={h}, D={dd}")
        else:
            axes[1].set_visible(False)
        save(fig, "memory_per_variant.png", "Memory per token and weights, per variant")

    # 4. int8 against f16 on the core at the longest cache both ran: %bw (int8 counted in int8 +
    # scale bytes) and the quantisation error against the f32 cache
    pairs = []
    for c in core:
        f16 = rep.by_key.get(c.key(dtype="f16"))
        if c.dtype == "i8" and not c.token_major and f16 is not None:
            pairs.append((c, f16))
    if pairs:
        m = max(c.dims["M"] for c, _ in pairs)
        at = [(c, f) for c, f in pairs if c.dims["M"] == m]
        vs = [v for v in rep.variants if any(c.variant == v for c, _ in at)]
        by_v = {c.variant: (c, f) for c, f in at}
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
        for i, (dt, pick) in enumerate((("f16", 1), ("i8", 0))):
            axes[0].bar([j + i * 0.4 for j in range(len(vs))], [by_v[v][pick].c("pct_bw") or 0 for v in vs], 0.4,
                        label=dt)
        for j, v in enumerate(vs):
            c, f = by_v[v]
            if c.ms > 0 and f.ms > 0:
                axes[0].text(j + 0.4, c.c("pct_bw") or 0, f"{c.ms / f.ms:.2f}x", ha="center", va="bottom", fontsize=7)
        axes[0].set_xticks([j + 0.2 for j in range(len(vs))], vs)
        rotate_crowded(axes[0], len(vs))
        axes[0].set_ylabel("% of measured read bandwidth")
        axes[0].set_title(f"decode at M={m}: %bw (labels: i8/f16 time)")
        axes[0].legend()
        axes[1].bar(vs, [max(by_v[v][0].c("q_err") or 0, 1e-12) for v in vs], color=[colors[v] for v in vs])
        rotate_crowded(axes[1], len(vs))
        axes[1].set_yscale("log")
        axes[1].set_ylabel("q_err: rel. L2 vs the f32 cache")
        axes[1].set_title("int8 quantisation error")
        axes[1].grid(True, which="both", alpha=0.3)
        save(fig, "decode_int8.png", "int8 K/V against f16 in decode")

    # 5. error per variant: oracle error (all grid cases) and distance from the base (layer modes)
    errs = defaultdict(list)
    dists = defaultdict(list)
    for mode in MODES:
        for c in rep.grid(mode):
            if c.c("rel_l2_err") is not None and c.c("rel_l2_err") > 0:
                errs[c.variant].append(c.c("rel_l2_err"))
            if c.layer_api and (c.c("dist_from_base") or 0) > 0:
                dists[c.variant].append(c.c("dist_from_base"))
    if errs:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
        vs = [v for v in rep.variants if v in errs]
        axes[0].boxplot([errs[v] for v in vs], labels=vs)
        rotate_crowded(axes[0], len(vs))
        axes[0].set_yscale("log")
        axes[0].set_ylabel("rel. L2 error vs double oracle")
        axes[0].set_title("numerical error (all comparison cases)")
        axes[0].grid(True, which="both", alpha=0.3)
        vf = [v for v in rep.variants if v in dists]
        if vf:
            axes[1].boxplot([dists[v] for v in vf], labels=vf)
            rotate_crowded(axes[1], len(vf))
            axes[1].set_ylabel("rel. L2 distance from the MHA output")
            axes[1].set_title("distance from the base layer (layer modes; higher = further)")
            axes[1].grid(True, alpha=0.3)
        else:
            axes[1].set_visible(False)
        save(fig, "error_per_variant.png", "Error per variant")

    # 6. roofline
    peaks, bws = rep.limits()
    pts = [c for c in rep.cases if not c.error and c.threads == rep.t1 and (c.c("gbps") or 0) > 0
           and (c.c("gflops") or 0) > 0]
    if pts and bws.get(rep.t1):
        fig, ax = plt.subplots(figsize=(8, 5.5))
        markers = {"prefill": "o", "decode": "s", "layer": "^", "cross": "D"}
        isa_colors = {}
        for c in pts:
            isa_colors.setdefault(c.isa, palette[len(isa_colors) % len(palette)])
        seen = set()
        for c in pts:
            ai = c.c("gflops") / c.c("gbps")
            # decode whose data the LLC holds: hollow, its bandwidth is not DRAM's
            in_llc = rep.bw_note(c) == " (in LLC)"
            lab = f"{c.mode}, {c.isa}" + (" (in LLC)" if in_llc else "")
            face = "none" if in_llc else isa_colors[c.isa]
            ax.scatter([ai], [c.c("gflops")], marker=markers.get(c.mode, "o"), facecolors=face,
                       edgecolors=isa_colors[c.isa], s=28, label=None if lab in seen else lab, alpha=0.85)
            seen.add(lab)
        xs = [c.c("gflops") / c.c("gbps") for c in pts]
        lo, hi = min(xs) / 2, max(xs) * 2
        bw = bws[rep.t1]
        # ISAs whose peaks are within 5% share one label (AVX2 and AVX-512 can measure the same)
        labels = []  # [peak, [isa, ...]]
        for isa, p in sorted(peaks.items(), key=lambda kv: kv[1].get(rep.t1, 0)):
            if rep.t1 not in p:
                continue
            pk = p[rep.t1]
            knee = pk / bw
            xr = [lo, max(lo, min(knee, hi)), hi]
            ax.plot(xr, [min(pk, x * bw) for x in xr], "-", lw=1, color=isa_colors.get(isa, "gray"))
            if labels and pk <= labels[-1][0] * 1.05:
                labels[-1][1].append(isa)
            else:
                labels.append([pk, [isa]])
        for pk, isas in labels:
            ax.text(hi, pk, f" {', '.join(isas)} peak {pk:.0f}", va="center", fontsize=8)
        ax.text(lo, lo * bw, f" DRAM {bw:.1f} GB/s", fontsize=8, va="bottom")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity (FLOP per byte that must move)")
        ax.set_ylabel("GFLOP/s")
        ax.set_title(f"roofline, {rep.t1} thread (ceilings measured at start)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=2, loc="lower right")
        save(fig, "roofline.png", "Roofline")
    return made
