"""Issue 17's fp32 prefill targets for bench/report.py: each target's cases against its goal.

- %peak goals: causal prefill (MHA, attention core) at N=M=2048 and 512 (H32 D128) and at 128
  (H8 D64), on every SIMD ISA the run has, each against its own ISA's measured FMA peak.
- No cliff between 63 and 64 tokens (H8 D64): GFLOP/s per useful FLOP of the two side by side.
- The projection GEMMs: the harness calls the public API only, so they are timed inside causal
  prefill through an MHA layer (`prefill/mha/N.._dm<d_model>`) less the core case of the same
  attention (`prefill/mha/N..`, same ISA): what remains is the four projections (Q, K, V, O:
  2*N*d_model*H*D FLOPs each) and the layer's own glue (bias, the copies between them). The
  OpenBLAS baseline the same way, its layer less its core case.
"""
from report_format import fmt_met, fmt_ms, fmt_num

PROJ_GOAL = (4096, 512)  # the projection target: d_model, tokens
CLIFF = ("N63_M63_H8_D64", "N64_M64_H8_D64", 0.10)  # the pair, and how far per FLOP they may drift
PEAK_GOALS = [  # (what, core shape, %peak goal), causal MHA prefill in f32
    ("causal prefill N=M=2048, H32 D128", "N2048_M2048_H32_D128", 85),
    ("causal prefill N=M=512, H32 D128", "N512_M512_H32_D128", 70),
    ("causal prefill N=M=128, H8 D64", "N128_M128_H8_D64", 50),
]
HEADER = ["target", "case", "run as", "ms/call", "GFLOP/s", "measured", "goal", "met"]
ALIGN = ["l", "l", "l", "r", "r", "r", "r", "l"]


def _isas(rep):
    """The run's SIMD ISAs, best first: the ones a target is measured on (not scalar, not openblas)."""
    out = [rep.best_isa]
    for c in rep.cases:
        if c.isa not in out and c.isa not in ("scalar", "openblas"):
            out.append(c.isa)
    return out


def _case(rep, isa, shape, compute="f32"):
    return rep.by_key.get(("prefill", "mha", shape, "f32", isa, rep.t1, compute))


def _peak(rep, isa, compute="f32"):
    """The peak at the main thread count a case of `isa` in `compute` is held against: the FMA
    peak (openblas: the best ISA's, as the harness's pct_peak), in bf16 the larger of the bf16 dot
    product's and the FMA peak (the harness's MachineLimits::peak)."""
    peaks, _ = rep.limits()
    if isa == "openblas":
        return max((p.get(rep.t1, 0.0) for i, p in peaks.items() if "+" not in i), default=0.0)
    fma = peaks.get(isa, {}).get(rep.t1, 0.0)
    return fma if compute == "f32" else max(fma, peaks.get(f"{isa}+{compute}", {}).get(rep.t1, 0.0))


def peak_rows(rep):
    rows = []
    for what, shape, goal in PEAK_GOALS:
        for isa in _isas(rep):
            c = _case(rep, isa, shape)
            if c is None:
                continue
            pct = c.c("pct_peak") or 0.0
            rows.append([what, f"prefill/mha/`{shape}`", isa, fmt_ms(c.ms), fmt_num(c.c("gflops"), ".1f"),
                         f"{pct:.0f}% of peak", f">= {goal}%", fmt_met(pct >= goal)])
    return rows


def cliff_rows(rep):
    """The 63- and 64-token cases side by side: GFLOP/s of useful FLOPs, and their ratio."""
    rows = []
    lo, hi, tol = CLIFF
    for isa in _isas(rep):
        a, b = _case(rep, isa, lo), _case(rep, isa, hi)
        if a is None or b is None or not b.c("gflops"):
            continue
        ratio = (a.c("gflops") or 0.0) / b.c("gflops")
        rows.append(["no cliff from N=63 to N=64 (per useful FLOP)", f"prefill/mha/`{lo}` vs `{hi}`", isa,
                     f"{fmt_ms(a.ms)} / {fmt_ms(b.ms)}", f"{a.c('gflops'):.1f} / {b.c('gflops'):.1f}",
                     f"{ratio:.2f}x (63/64)", f"within {100 * tol:.0f}%", fmt_met(abs(ratio - 1.0) <= tol)])
    return rows


def projection_rows(rep):
    """The projection GEMMs of every MHA prefill through the layer at LLM width (H*D = d_model)
    whose core case ran on the same ISA and compute mode: time per GEMM, GFLOP/s and %peak of the
    four (bf16: of the bf16 peak; the targets are f32's)."""
    rows = []
    for c in rep.cases:
        dm, shape = c.dims.get("dm"), c.shape.rsplit("_dm", 1)[0]
        if (c.error or c.mode != "prefill" or c.variant != "mha" or not c.layer_api
                or c.threads != rep.t1 or dm != c.dims["H"] * c.dims["D"]):
            continue
        core = _case(rep, c.isa, shape, c.compute)
        if core is None or c.ms <= core.ms:
            continue
        n = c.dims["N"]
        ms = c.ms - core.ms
        gflops = 4 * 2.0 * n * dm * dm / (ms * 1e6)
        peak = _peak(rep, c.isa, c.compute)
        pct = 100 * gflops / peak if peak > 0 else None
        target = (dm, n) == PROJ_GOAL and c.isa != "openblas" and c.compute == "f32"
        mode = "" if c.compute == "f32" else f" in {c.compute}"
        rows.append([f"projection GEMM{mode}, d_model {dm}, {n} tokens (layer less core)",
                     f"prefill/mha/`{c.shape}` less `{shape}`",
                     c.isa if c.compute == "f32" else f"{c.isa}+{c.compute}", fmt_ms(ms / 4) + " per GEMM",
                     f"{gflops:.1f}", "-" if pct is None else f"{pct:.0f}% of {'peak' if not mode else 'its peak'}",
                     ">= 85%" if target else "baseline" if c.isa == "openblas" else "-",
                     fmt_met(pct is not None and pct >= 85) if target else "-"])
    return rows


def target_rows(rep):
    """(header, rows) of the targets table, in the issue's order."""
    return HEADER, peak_rows(rep) + cliff_rows(rep) + projection_rows(rep)


INTRO = ("Issue 17's fp32 targets, each case against its goal (1 thread; `%peak` against the measured FMA "
         "peak of the case's own ISA). The 63/64-token pair compares GFLOP/s of useful FLOPs (causal pairs "
         "only), so a change of tiling or path at the 64-token edge shows as a ratio away from 1. The projection GEMMs are timed as causal "
         "prefill through an MHA layer less the core case of the same attention on the same ISA (the harness "
         "calls the public API only): the four projections (Q, K, V, O, each 2*N*d_model*H*D FLOPs) plus the "
         "layer's own glue; the time is per GEMM, a quarter of the difference. OpenBLAS's row is its "
         "`cblas_sgemm` layer less its core baseline, against the best ISA's peak.\n")
