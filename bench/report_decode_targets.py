"""Issue 15's decode targets for bench/report.py: each target's cases against its goal.

- MHA decode on an f16 cache (H32 D128, head-major, K/V from DRAM) at 8K, 32K and 128K keys:
  %bw against the read bandwidth the harness measured for the case's thread count, on every
  SIMD ISA and thread count the run has; the same for int8 (values plus scales).
- int8 MHA decode at 32K keys: its time over the same case's on an f16 cache.
- Token-major caches (`_tokmajor`): time over the same case's on the head-major cache.
- GQA-8 decode: x_bound (the time over max(K/V bytes / bandwidth, FLOPs / FMA peak)).
- MQA decode: %peak of the FMA peak.
- int8 accuracy: rel-L2 against the double oracle on the dequantised values the call read.
"""
from report_format import fmt_met, fmt_ms, fmt_x

HEADS, DIM = 32, 128  # the head shape
BW_KEYS = (8192, 32768, 131072)  # the bandwidth target's cache lengths
BW_GOAL = 85  # %bw, f16 and int8 MHA
I8_RATIO_GOAL = 0.55  # int8 time / f16 time, MHA at 32K keys
TOKMAJOR_GOAL = 1.10  # token-major time / head-major time
X_BOUND_GOAL = 1.15  # GQA-8
MQA_PEAK_GOAL = 70  # %peak
I8_ERR_GOAL = 1e-6  # rel-L2 against the oracle on the dequantised values
HEADER = ["target", "case", "run as", "ms/call", "measured", "goal", "met"]
ALIGN = ["l", "l", "l", "r", "r", "r", "l"]


def _cases(rep, variant, dtype, tokmajor=False):
    """The run's decode cases on the core of one variant and K/V dtype at the issue's head shape
    (not batched), head-major or token-major, on SIMD ISAs (not scalar, not openblas), by keys,
    ISA and threads."""
    out = [c for c in rep.cases
           if c.mode == "decode" and c.variant == variant and c.dtype == dtype and c.compute == "f32"
           and not c.layer_api and not c.error and c.token_major == tokmajor and c.dims.get("B", 1) == 1
           and c.dims.get("H") == HEADS and c.dims.get("D") == DIM and c.isa not in ("scalar", "openblas")]
    return sorted(out, key=lambda c: (c.dims["M"], c.isa, c.threads))


def _row(what, c, measured, goal, ok):
    return [what, f"decode/{c.variant}/`{c.shape}`/{c.dtype}", c.run_as(), fmt_ms(c.ms), measured, goal, fmt_met(ok)]


def bandwidth_rows(rep):
    rows = []
    for dtype, what in (("f16", "MHA decode, f16 cache"), ("i8", "MHA decode, int8 cache (values + scales)")):
        for c in _cases(rep, "mha", dtype):
            if c.dims["M"] not in BW_KEYS or not c.c("cold"):  # in the LLC, %bw against DRAM says nothing
                continue
            pct = c.c("pct_bw") or 0.0
            rows.append(_row(what, c, f"{pct:.0f}% of bw", f">= {BW_GOAL}%", pct >= BW_GOAL))
    return rows


def int8_ratio_rows(rep):
    rows = []
    for c in _cases(rep, "mha", "i8"):
        f16 = rep.f16_of(c)
        if c.dims["M"] != 32768 or f16 is None:
            continue
        ratio = c.ms / f16.ms
        rows.append(_row("int8 MHA decode against f16", c, f"{ratio:.2f}x the f16 time ({fmt_ms(f16.ms)})",
                         f"<= {I8_RATIO_GOAL:.2f}x", ratio <= I8_RATIO_GOAL))
    return rows


def token_major_rows(rep):
    rows = []
    for variant in ("mha", "gqa8"):
        for c in _cases(rep, variant, "f16", tokmajor=True):
            hm = rep.by_key.get(c.key(shape=c.shape[: -len("_tokmajor")]))
            if hm is None or hm.error or hm.ms <= 0:
                continue
            ratio = c.ms / hm.ms
            rows.append(_row("token-major cache against head-major", c,
                             f"{ratio:.2f}x the head-major time ({fmt_ms(hm.ms)})", f"<= {TOKMAJOR_GOAL:.2f}x",
                             ratio <= TOKMAJOR_GOAL))
    return rows


def grouped_rows(rep):
    rows = []
    for c in _cases(rep, "gqa8", "f16"):
        x = c.c("x_bound") or 0.0
        if x > 0:
            rows.append(_row("GQA-8 decode against its bound", c, f"x_bound {fmt_x(x)}", f"<= {X_BOUND_GOAL:.2f}x",
                             x <= X_BOUND_GOAL))
    for c in _cases(rep, "mqa", "f16"):
        pct = c.c("pct_peak") or 0.0
        rows.append(_row("MQA decode", c, f"{pct:.0f}% of peak", f">= {MQA_PEAK_GOAL}%", pct >= MQA_PEAK_GOAL))
    return rows


def accuracy_rows(rep):
    rows = []
    for variant in ("mha", "gqa8", "mqa"):
        for c in _cases(rep, variant, "i8"):
            err = c.c("rel_l2_err")
            if err is None:
                continue
            rows.append(_row("int8 decode against the oracle on its dequantised K/V", c, f"rel-L2 {err:.1e}",
                             f"<= {I8_ERR_GOAL:.0e}", err <= I8_ERR_GOAL))
    return rows


def target_rows(rep):
    """(header, rows) of the decode targets table, in the issue's order."""
    return HEADER, (bandwidth_rows(rep) + token_major_rows(rep) + grouped_rows(rep) + int8_ratio_rows(rep)
                    + accuracy_rows(rep))


INTRO = ("Issue 15's decode targets, each case against its goal (attention core, H32 D128; `%bw` against "
         "the read bandwidth the harness measured for the case's thread count, counted only where K/V come "
         "from DRAM; `x_bound` and `%peak` as in the tables above). Ratios compare cases of one run, minutes "
         "apart unless the run interleaved them (`mh_bench --mh_interleave`).\n")
