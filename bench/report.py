#!/usr/bin/env python3
"""Turns mh_bench's Google Benchmark JSON into a Markdown report with plots.

Usage:
  python3 bench/report.py RESULTS.json [--out DIR] [--docs FILE] [--print] [--command CMD]

  --out DIR      write DIR/report.md and the plots DIR/*.png (default: RESULTS.json's folder)
  --docs FILE    also write the report as FILE (e.g. docs/benchmarks.md) with its plots in
                 FILE's folder under benchmarks/ (links relative to FILE)
  --print        print the comparison tables to stdout (bench/run.sh does)
  --command CMD  the command that produced the results, quoted in the report

Needs Python 3 and, for the plots, matplotlib (Debian python3-matplotlib); without matplotlib
the report has its tables and says the plots were skipped.

Case names are mode/variant/shape/kvdtype/isa/threads:T (bench/cases.h); every case carries the
counters listed in bench/cases.cc. The report groups the cases of the best ISA at one thread into
the variant comparison (a table per mode), sets the baselines (scalar, openblas, other ISAs, all
threads) against the matching best-ISA case, and plots throughput against sequence length,
decode time against cache length, memory per token, error per variant and a roofline with the
machine's measured ceilings.
"""
import argparse
import json
import os
import re
import sys
from collections import OrderedDict, defaultdict

from report_format import fmt_bytes, fmt_si, fmt_num, fmt_ms, fmt_cv, fmt_err, fmt_x, fmt_err_opt, fmt_dist, md_table, text_table
from report_plots import DTYPE_ORDER, MODES, make_plots, remove_stale_plots
import report_decode_targets
import report_targets
from report_weights import WEIGHTS_MD

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "accuracy"))
import docs_section  # noqa: E402  the accuracy section of --docs, kept on rewrite


def registry_isas():
    """The ISA names in the order of the ISA registry (src/dispatch/isa_list.h)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "dispatch", "isa_list.h")
    with open(path) as f:
        return re.findall(r"^ *X\([A-Z0-9_]+, ([a-z0-9_]+),", f.read(), re.M)


_UNIT_TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
GROUPED = re.compile(r"gqa\d+|mqa")  # the variants whose query heads share K/V heads
MODE_TITLES = {
    "prefill": "Causal LLM prefill (attention core, `mh_attention`)",
    "decode": "Decode: one token against a cache of M tokens",
    "layer": "Encoder layer (`mh_layer_forward`, full attention, N = M, d_model = H*D)",
    "cross": "Cross-attention (`mh_layer_forward`, key/value inputs of length M)",
}


# ---------------------------------------------------------------- parsing
def parse_shape(shape):
    """'B4_N512_M512_H32_D128_dm4096' -> {'B': 4, 'N': 512, ...}"""
    out = {"B": 1}
    for tok in shape.split("_"):
        m = re.fullmatch(r"(dm|[A-Za-z])(\d+)", tok)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


class Case:
    def __init__(self, b):
        self.raw = b
        self.name = b.get("name", "?")
        parts = self.name.split("/")
        self.ok = len(parts) == 6 and parts[5].startswith("threads:")
        if self.ok:
            self.mode, self.variant, self.shape, self.dtype, isa, t = parts
            self.threads = int(t.split(":")[1])
            # "avx512+bf16": the ISA and the compute mode of the GEMMs (none: f32)
            self.isa, _, compute = isa.partition("+")
            self.compute = compute or "f32"
        else:
            self.mode = self.variant = self.shape = self.dtype = self.isa = self.compute = "?"
            self.threads = 0
        self.dims = parse_shape(self.shape) if self.ok else {}
        self.layer_api = "dm" in self.dims
        self.token_major = self.shape.endswith("_tokmajor")  # a decode core case on a token-major cache
        self.error = b.get("error_message") if b.get("error_occurred") else None
        # a case the library cannot run for a reason outside the harness (mh_bench prints SKIPPED)
        self.skipped = bool(self.error and self.error.startswith("skipped: "))
        unit = _UNIT_TO_MS.get(b.get("time_unit", "ns"), 1e-6)
        self.ms = b.get("real_time", 0.0) * unit
        self.cv = None  # coefficient of variation of the time over the repetitions

    def c(self, key, default=None):
        return self.raw.get(key, default)

    def key(self, **override):
        f = dict(mode=self.mode, variant=self.variant, shape=self.shape, dtype=self.dtype, isa=self.isa,
                 threads=self.threads, compute=self.compute)
        f.update(override)
        return (f["mode"], f["variant"], f["shape"], f["dtype"], f["isa"], f["threads"], f["compute"])

    def run_as(self):
        """The ISA, and the thread count when more than one: a table's `run as` cell."""
        return self.isa + (f", {self.threads} threads" if self.threads > 1 else "")

    def api(self):
        if self.mode == "decode":
            return "layer + KV cache" if self.layer_api else "core"
        return "layer" if self.layer_api else "core"


def load(path):
    """The cases of a results file: with repetitions, the median aggregate of each case (and the
    cv of its time); with one repetition, its one run."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    runs = OrderedDict()
    for b in data.get("benchmarks", []):
        name = b.get("run_name") or b.get("name", "?")
        runs.setdefault(name, []).append(b)
    cases = []
    for name, bs in runs.items():
        pick, cv = None, None
        for b in bs:
            if b.get("error_occurred"):
                pick = b
                break
            if b.get("run_type") == "aggregate":
                if b.get("aggregate_name") == "median":
                    pick = b
                elif b.get("aggregate_name") == "cv":
                    cv = b.get("real_time")
            elif pick is None:
                pick = b
        if pick is None:
            continue
        pick = dict(pick)
        pick["name"] = name
        c = Case(pick)
        c.cv = cv
        cases.append(c)
    return data.get("context", {}), cases


# ---------------------------------------------------------------- analysis
class Report:
    def __init__(self, ctx, cases):
        self.ctx = ctx
        self.cases = [c for c in cases if c.ok]
        self.bad = [c for c in cases if not c.ok or (c.error and not c.skipped)]
        self.skipped = [c for c in cases if c.ok and c.skipped]
        self.by_key = {c.key(): c for c in self.cases if not c.error}
        self.best_isa = ctx.get("mh_isa_default", "the default ISA")
        ts = [c.threads for c in self.cases]
        self.t1 = min(ts) if ts else 1
        self.variants = []  # table order as the suite ran them
        for c in self.cases:
            if c.variant not in self.variants:
                self.variants.append(c.variant)

    def grid(self, mode):
        """The comparison grid of one mode: best ISA, the main thread count, no error."""
        return [c for c in self.cases if c.mode == mode and c.isa == self.best_isa and c.threads == self.t1
                and not c.error]

    def base_of(self, c):
        """The base-variant case of c's comparison group (same mode/shape/dtype/isa/threads)."""
        for v in self.variants:
            o = self.by_key.get(c.key(variant=v))
            if o is not None and o.c("dist_from_base") == 0:
                return o
        return None

    def ctx_float(self, key):
        try:
            return float(self.ctx[key])
        except (KeyError, ValueError):
            return None

    # ------------------------------------------------------------ tables
    def mode_rows(self, mode):
        cs = self.grid(mode)
        order = {v: i for i, v in enumerate(self.variants)}
        cs.sort(key=lambda c: (c.api(), c.dims.get("dm", 0), c.dims.get("H", 0), c.dims.get("D", 0),
                               c.dims.get("B", 1), c.token_major, DTYPE_ORDER.get(c.dtype, 9), c.compute, c.dims.get("N", 0),
                               c.dims.get("M", 0), order.get(c.variant, 99)))
        rows = []
        for c in cs:
            base = self.base_of(c)
            speed = f"{base.ms / c.ms:.2f}x" if base is not None and c.ms > 0 else "-"
            row = [
                f"`{c.shape}`", c.variant, c.dtype, c.compute, fmt_ms(c.ms), fmt_cv(c.cv), fmt_si(c.c("tokens_per_s")),
                fmt_num(c.c("gflops"), ".1f"), fmt_num(c.c("pct_peak"), ".0f"), fmt_num(c.c("gbps"), ".2f"),
                fmt_num(c.c("pct_bw"), ".0f") + self.bw_note(c),
                fmt_bytes(c.c("weights_bytes")), fmt_bytes(c.c("kv_bytes_per_token")), fmt_bytes(c.c("workspace_bytes")),
                fmt_bytes(c.c("peak_rss_bytes")), fmt_err(c.c("rel_l2_err")), fmt_dist(c.c("dist_from_base")), speed,
            ]
            if mode == "decode":
                row += [fmt_x(c.c("x_bound")), fmt_err_opt(c.c("q_err")), self.i8_over_f16(c)]
            rows.append(row)
        header = ["shape", "variant", "K/V", "compute", "ms/call", "cv", "tokens/s", "GFLOP/s", "%peak", "GB/s", "%bw", "weights",
                  "KV/token", "workspace", "peak RSS", "rel_l2_err", "dist. from base", "speed vs base"]
        if mode == "decode":
            header += ["x_bound", "q_err", "i8/f16 time"]
        return header, rows

    def f16_of(self, c):
        """The same case on an f16 cache, for an int8 case that ran (else None)."""
        f16 = self.by_key.get(c.key(dtype="f16")) if c.dtype == "i8" and not c.error else None
        return f16 if f16 is not None and not f16.error and f16.ms > 0 else None

    def i8_over_f16(self, c):
        """An int8 case's time over the same case's on an f16 cache ('-' for other dtypes)."""
        f16 = self.f16_of(c)
        return f"{c.ms / f16.ms:.2f}x" if f16 is not None else "-"

    # ------------------------------------------------------------ decode against the limits
    def int8_rows(self):
        """Every int8 decode case (any ISA, thread count) beside the same case on an f16 cache."""
        rows = []
        for c in self.cases:
            if c.mode != "decode" or c.dtype != "i8" or c.error:
                continue
            f16 = self.f16_of(c)
            rows.append([f"{c.variant}/`{c.shape}`", c.run_as(),
                         fmt_ms(f16.ms) if f16 else "-", fmt_ms(c.ms), self.i8_over_f16(c),
                         fmt_num(f16.c("pct_bw"), ".0f") if f16 else "-", fmt_num(c.c("gbps"), ".2f"),
                         fmt_num(c.c("pct_bw"), ".0f") + self.bw_note(c),
                         fmt_bytes(f16.c("kv_bytes_per_token")) if f16 else "-", fmt_bytes(c.c("kv_bytes_per_token")),
                         fmt_err_opt(c.c("q_err")), fmt_err(c.c("rel_l2_err"))])
        header = ["case", "run as", "f16 ms", "i8 ms", "i8/f16 time", "f16 %bw", "i8 GB/s", "i8 %bw", "f16 KV/token",
                  "i8 KV/token", "q_err", "rel_l2_err"]
        return header, rows

    def layout_rows(self, suffix, base_name, name):
        """Each decode case whose shape ends in `suffix` (a regex: another cache layout of the same
        values) beside the same case on the library's contiguous head-major cache."""
        rows = []
        for c in self.cases:
            m = re.search(suffix + "$", c.shape) if c.mode == "decode" else None
            if not m or c.error:
                continue
            base = c.shape[:m.start()]
            hm = self.by_key.get(c.key(shape=base))
            rows.append([f"{c.variant}/`{base}`/{c.dtype}", c.isa, fmt_ms(hm.ms) if hm else "-", fmt_ms(c.ms),
                         f"{c.ms / hm.ms:.2f}x" if hm and hm.ms > 0 else "-",
                         fmt_num(hm.c("pct_bw"), ".0f") if hm else "-", fmt_num(c.c("pct_bw"), ".0f")])
        return ["case", "run as", f"{base_name} ms", f"{name} ms", f"{name}/{base_name} time", f"{base_name} %bw",
                f"{name} %bw"], rows

    def token_major_rows(self):
        return self.layout_rows("_tokmajor", "head-major", "token-major")

    def paged_rows(self):
        return self.layout_rows(r"_paged\d+", "contiguous", "paged")

    def decode_limit_tables(self):
        """(header, rows) of the three decode-against-the-limits tables, in report order."""
        return [self.int8_rows(), self.token_major_rows(), self.paged_rows(), self.bound_rows()]

    def bound_rows(self):
        """GQA/MQA decode on the core against max(K/V bytes / bandwidth, FLOPs / FMA peak)."""
        rows = []
        for c in self.cases:
            if c.mode != "decode" or c.layer_api or c.error or not GROUPED.fullmatch(c.variant):
                continue
            x = c.c("x_bound") or 0
            if x <= 0:
                continue
            limit = "bandwidth" if (c.c("pct_bw") or 0) >= (c.c("pct_peak") or 0) else "FMA peak"
            rows.append([f"{c.variant}/`{c.shape}`/{c.dtype}", c.run_as(),
                         fmt_ms(c.ms), fmt_ms(c.ms / x), limit, fmt_x(x), fmt_num(c.c("pct_bw"), ".0f") + self.bw_note(c),
                         fmt_num(c.c("pct_peak"), ".0f")])
        return ["case", "run as", "ms/call", "bound ms", "bound by", "x_bound", "%bw", "%peak"], rows

    def bw_note(self, c):
        """(cold): K/V read from DRAM; (in LLC): the call's data fits in the last-level cache,
        so %bw against a DRAM figure can pass 100%."""
        if c.c("cold"):
            return " (cold)"
        llc = self.ctx_float("llc_bytes")
        if c.mode == "decode" and llc and (c.c("working_set_bytes") or 0) <= llc:
            return " (in LLC)"
        return ""

    def distance_rows(self):
        rows = []
        for mode in ("layer", "cross", "decode"):
            for c in self.grid(mode):
                if not c.layer_api:
                    continue
                base = self.base_of(c)
                rows.append([mode, f"`{c.shape}`", c.dtype, c.variant, fmt_dist(c.c("dist_from_base")),
                             fmt_bytes(c.c("kv_bytes_per_token")), fmt_bytes(c.c("weights_bytes")),
                             f"{base.ms / c.ms:.2f}x" if base is not None and c.ms > 0 else "-",
                             fmt_err(c.c("rel_l2_err"))])
        header = ["mode", "shape", "K/V", "variant", "dist. from base", "KV/token", "weights",
                  "speed vs base", "rel_l2_err (oracle)"]
        return header, rows

    def section(self, out, title, intro, table, align=None):
        """Appends a section: its title, its intro and its (header, rows) table."""
        out.append(title)
        out.append(intro)
        out.append(md_table(table[0], table[1], align, skeleton=not self.cases))

    def compute_rows(self):
        """Every case in a compute mode other than f32 beside the same case in f32: the time
        ratio, %peak against each mode's own peak, and each one's error against the double oracle."""
        rows = []
        for c in self.cases:
            if c.error or c.compute == "f32":
                continue
            ref = self.by_key.get(c.key(compute="f32"))
            rows.append([c.mode, f"`{c.shape}`", c.variant, c.dtype, c.run_as(),
                         c.compute, fmt_ms(ref.ms) if ref else "-", fmt_ms(c.ms),
                         f"{ref.ms / c.ms:.2f}x" if ref and c.ms > 0 else "-",
                         fmt_num(ref.c("pct_peak"), ".0f") if ref else "-", fmt_num(c.c("pct_peak"), ".0f"),
                         fmt_err(ref.c("rel_l2_err")) if ref else "-", fmt_err(c.c("rel_l2_err"))])
        header = ["mode", "shape", "variant", "K/V", "run as", "compute", "f32 ms/call", "ms/call", "f32 time / time",
                  "f32 %peak", "%peak (its peak)", "f32 rel_l2_err", "rel_l2_err"]
        return header, rows

    def baseline_rows(self):
        """Every case outside the comparison grid next to its reference: a baseline or another ISA
        against the default ISA at one thread; more threads against the same implementation at
        one thread (the scaling)."""
        rows = []
        for c in self.cases:
            if c.error or (c.isa == self.best_isa and c.threads == self.t1):
                continue
            if c.threads != self.t1 and c.key(threads=self.t1) in self.by_key:
                ref = self.by_key[c.key(threads=self.t1)]
            else:
                ref = self.by_key.get(c.key(isa=self.best_isa, threads=self.t1))
            what = c.isa if c.threads == self.t1 else f"{c.isa}, {c.threads} threads"
            ratio = f"{c.ms / ref.ms:.2f}x" if ref is not None and ref.ms > 0 else "-"
            rows.append([f"{c.mode}/{c.variant}/`{c.shape}`/{c.dtype}", what, fmt_ms(c.ms),
                         f"{ref.isa}, {ref.threads} thread{'s' if ref.threads > 1 else ''}" if ref else "-",
                         fmt_ms(ref.ms) if ref else "-", ratio, fmt_num(c.c("gflops"), ".1f"),
                         fmt_num(c.c("pct_peak"), ".0f"), fmt_err(c.c("rel_l2_err"))])
        header = ["case", "run as", "ms/call", "reference", "reference ms/call", "time ratio", "GFLOP/s", "%peak",
                  "rel_l2_err"]
        return header, rows

    def limits(self):
        peaks = defaultdict(dict)
        bws = {}
        for k, v in self.ctx.items():
            m = re.fullmatch(r"peak_gflops/([\w+]+)/threads:(\d+)", k)
            if m:
                peaks[m.group(1)][int(m.group(2))] = float(v)
            m = re.fullmatch(r"read_gbps/threads:(\d+)", k)
            if m:
                bws[int(m.group(1))] = float(v)
        return peaks, bws

    # ------------------------------------------------------------ markdown
    def machine_md(self):
        ctx = self.ctx
        if not ctx:
            return ("_Filled in from the run's JSON context: CPU model and id, whether it is a virtual machine, "
                    "processors, caches, last-level cache, memory, OS, the harness's compiler, the library version "
                    "and its ISAs, the OpenBLAS build and kernel set, the weights used, the load average when the run "
                    "started, the date; then the ceilings the harness measured at start: peak fp32 multiply-add "
                    "GFLOP/s per ISA and streaming read GB/s, for one thread and for every processor._\n")
        peaks, bws = self.limits()
        caches = ctx.get("caches") or []
        cache_s = ", ".join(f"L{c.get('level')} {c.get('type', '')} {fmt_bytes(c.get('size'))}"
                            + (f" (shared by {c.get('num_sharing')})" if (c.get("num_sharing") or 0) > 1 else "")
                            for c in caches)
        load = ctx.get("load_avg")
        rows = [
            ["CPU", ctx.get("mh_cpu_model", "?") + (f" ({ctx['mh_cpu_id']})" if "mh_cpu_id" in ctx else "")],
            ["virtual machine", ctx.get("mh_hypervisor", "?")],
            ["processors", f"{ctx.get('num_cpus', '?')} ({ctx.get('mh_hardware_threads', '?')} hardware threads), "
                           f"{ctx.get('mhz_per_cpu', '?')} MHz reported"],
            ["caches", cache_s or "?"],
            [f"last-level cache ({ctx.get('llc_source', 'sysfs')})", fmt_bytes(self.ctx_float("llc_bytes"))],
            ["memory", ctx.get("mh_mem_total", "?")],
            ["OS", ctx.get("mh_os", "?")],
            ["compiler (harness)", ctx.get("mh_bench_compiler", "?")],
            ["multihead", f"{ctx.get('mh_version', '?')}, ISAs {ctx.get('mh_isas_supported', '?')}, "
                          f"default {ctx.get('mh_isa_default', '?')}"],
            ["BLAS baseline", f"{ctx.get('mh_blas', '?')}; core {ctx.get('mh_blas_coretype', '?')}"],
            ["weights", ctx.get("mh_weights", "?")],
            ["load average at start", ", ".join(f"{x:.2f}" for x in load) if isinstance(load, list) else "?"],
            ["date", ctx.get("date", "?")],
            ["suite", ctx.get("mh_suite", "?")],
        ]
        out = md_table(["", ""], rows, ["l", "l"])
        out += "\nMeasured at start by the harness (bench/machine_limits.cc):\n\n"
        threads = sorted({t for p in peaks.values() for t in p} | set(bws))
        lrows = []
        order = registry_isas()
        for isa in sorted(peaks, key=lambda i: (order.index(i.split("+")[0]) if i.split("+")[0] in order else len(order), i)):
            what = "peak bf16 dot product" if isa.endswith("+bf16") else "peak fp32 multiply-add"
            lrows.append([f"{what}, {isa} ({ctx.get('peak_probe/' + isa, '')})"]
                         + [fmt_num(peaks[isa].get(t), ".1f") + " GFLOP/s" for t in threads])
        lrows.append([f"streaming read, {fmt_bytes(self.ctx_float('read_buffer_bytes'))} buffer "
                      f"({ctx.get('read_probe', '')})"] + [fmt_num(bws.get(t), ".1f") + " GB/s" for t in threads])
        if any(f"read_streams/threads:{t}" in ctx for t in threads):
            lrows.append(["streaming read: parts per thread read at once, the fastest of 1, 2, 4"]
                         + [str(ctx.get(f"read_streams/threads:{t}", "-")) for t in threads])
        out += md_table(["ceiling"] + [f"{t} thread{'s' if t > 1 else ''}" for t in threads], lrows)
        return out

    def markdown(self, img_prefix, plots, command):
        out = []
        out.append("# multihead benchmarks\n")
        out.append("Generated by `bench/report.py` from the JSON that `mh_bench` wrote "
                   "(Google Benchmark; every case times wall clock). Regenerate with:\n")
        out.append("```sh\n" + (command or "bench/run.sh") + "\n```\n")
        if not self.cases:
            out.append("> **Skeleton: no run is recorded here yet.** The numbers must come from a quiet machine "
                       "(nothing else running: the harness measures wall-clock time and the machine's limits). "
                       "There, run `bench/run.sh --docs`: it runs the default suite (about 6 minutes on 2 cores), "
                       "then rewrites this file and `docs/benchmarks/*.png` from `build/bench/results.json`. "
                       "The sections below are what it fills in.\n")
        out.append("Case names read `mode/variant/shape/kvdtype/isa/threads:T`; shapes are "
                   "`[B<batch>_][N<queries>_]M<keys>_H<heads>_D<head dim>[_dm<d_model>]`, where `_dm` marks the "
                   "layer API (projections included). How every counter is computed: the comment at the top of "
                   "`bench/cases.cc`. In short: `gflops` counts useful FLOPs only (causal prefill about half of "
                   "N*M); `%peak` and `%bw` divide by the ceilings below; decode `GB/s` counts the K/V bytes a "
                   "token must read (int8: values and scales; and the weights through the layer), other modes the "
                   "bytes the call must move once; `x_bound` is the time over max(bytes / bandwidth, FLOPs / peak); `rel_l2_err` is against a double-precision oracle on the same inputs (a sub-slice of "
                   "heads/rows on big shapes); `dist. from base` (counter `dist_from_base`) is the output's relative L2 "
                   "distance from the base (MHA) layer's output on the same inputs, the accuracy a cheaper variant "
                   "gives up (0 = the same output, higher is further away); "
                   "`(cold)` marks decode cases whose K/V come from DRAM (rotating copies past the LLC), `(in LLC)` "
                   "decode cases whose data fits in the last-level cache (their %bw can pass 100%). "
                   "Times are the median of the repetitions (context `mh_timing`); `cv` is the time's coefficient "
                   "of variation over them, a measure of how quiet the machine was. The suite runs its cases one "
                   "after another, minutes apart, and a virtual machine's memory bandwidth can drift by a third "
                   "in that time: for the ratio between two variants run just those cases interleaved "
                   "(`mh_bench --mh_interleave`, bench/README.md).\n")
        out.append("## Machine\n")
        out.append(self.machine_md())
        out.append(f"\n## Variant comparison at equal model size ({self.best_isa}, {self.t1} thread)\n")
        out.append("Every variant that exists (rows of `variant_table()` in `bench/model.cc`) on the same shape and "
                   "inputs. GQA/MQA layers are derived from the MHA layer by mean-pooling each group's K/V "
                   "projection heads (the GQA paper's conversion); on the attention core the K/V heads are pooled "
                   "the same way. `speed vs base` is the base variant's time over this one's. Every row of "
                   "`variant_table()` appears here, rows with `core = false` in the layer tables only "
                   "(overlapping heads run on the core as overlapping strided views, heads `D + 2o` wide).\n")
        for mode in MODES:
            header, rows = self.mode_rows(mode)
            out.append(f"### {MODE_TITLES[mode]}\n")
            out.append(md_table(header, rows, skeleton=not self.cases))
            out.append("")
        self.section(out, "## Prefill at the compute limit: the fp32 targets\n", report_targets.INTRO,
                     report_targets.target_rows(self), report_targets.ALIGN)
        out.append("")
        self.section(out, "## Compute modes: bf16 beside f32\n", "The `compute` column above is the precision of the attention's two GEMMs and, through a "
                   "layer, of its projections (`mh_compute`; the case name's ISA reads `avx512+bf16`): bf16 "
                   "rounds Q, K, V and P (and a layer's weights and projection inputs) to bf16 on entry to the "
                   "products, which accumulate in f32, and keeps scores, softmax and the output in f32. Here "
                   "each bf16 case sits beside the same case in f32: the time ratio, `%peak` against each mode's "
                   "own measured peak (bf16: the AMX probe where the library's bf16 GEMMs run on AMX tiles, "
                   "`mh_compute_kernels` saying `amx`; elsewhere the larger of the VDPBF16PS probe and the FMA "
                   "probe, since bf16 products are exact in f32 and the library runs them on whichever instruction "
                   "is faster here: twice the FMA rate on AMD Zen 4, half of it on Intel's Xeons without AMX; the "
                   "machine table names the probe that ran), and each one's `rel_l2_err` "
                   "against the double oracle on the unrounded inputs (bf16's about 2e-3 is the rounding of its "
                   "operands).\n", self.compute_rows())
        out.append("")
        out.append("## Distance from the base: what each derived variant gives up\n")
        out.append("Each derived layer's output against the base (MHA) layer's output on the same inputs, next to "
                   "its memory and speed. With seeded random weights the heads are unrelated, so pooling them "
                   "loses most of the signal (values near 1 are expected); run with `--weights FILE` to measure a "
                   "real model's layer.\n")
        header, rows = self.distance_rows()
        out.append(md_table(header, rows, skeleton=not self.cases))
        out.append("\n## Decode against the limits: int8 K/V, token-major and paged caches, grouped heads\n")
        intros = [
            "int8 rows store K and V as symmetric int8 with one f32 scale per (token, K/V head) row "
            "(scale = max|x|/127, round to nearest even), as the library's int8 KV cache quantises on "
            "append; their `GB/s`, `%bw` and `KV/token` count the int8 values plus the 4 scale bytes per row. "
            "`q_err` is the relative L2 distance of the int8 output from the same call on an f32 cache of "
            "the same unquantised K/V (through the layer: the same decode on an f32 cache filled with the "
            "same tokens); `rel_l2_err` stays against the double oracle on the values the call read (for "
            "int8 on the core: the dequantised values). `i8/f16 time` is the int8 case's time over the same "
            "case's on an f16 cache.\n",
            "\nToken-major caches (`_tokmajor`: an engine's own `[token][kv heads][D]` cache read in place "
            "through `mh_attention`, stride_token = Hkv*D, stride_head = D) against the library's "
            "head-major layout, same values:\n",
            "\nPaged KV caches (`_paged<T>`: a layer decode on a cache of T-token blocks, K/V read through "
            "the block table) against the contiguous cache, same values (bitwise the same outputs):\n",
            "\nGrouped heads (GQA/MQA) on the core against their bound: the larger of the K/V bytes over the "
            "measured read bandwidth and the FLOPs over the measured multiply-add peak (both for the case's "
            "ISA and threads); `x_bound` is the time as a multiple of it (1.00x = at the limit).\n",
        ]
        for intro, (header, rows) in zip(intros, self.decode_limit_tables()):
            out.append(intro)
            out.append(md_table(header, rows, skeleton=not self.cases))
        self.section(out, "\n## Decode at the memory limit: the targets\n", report_decode_targets.INTRO,
                     report_decode_targets.target_rows(self), report_decode_targets.ALIGN)
        self.section(out, "\n## Baselines, other ISAs, thread scaling\n", "Each case next to a reference run of the same case: `scalar` (the library's portable path, "
                   "`MH_ISA=scalar`), `openblas` (the attention a C user writes without this library: per-head "
                   "`cblas_sgemm` + softmax + `cblas_sgemm`, bench/blas_baseline.h) and other ISAs against the "
                   "default ISA at one thread, so `time ratio` is how many times slower they are; runs on more "
                   "threads against the same implementation at one thread, so below 1x is the speedup from the "
                   "extra threads.\n", self.baseline_rows())
        out.append("\n## Plots\n")
        if not self.cases:
            out.append("_Throughput against sequence length per variant (`throughput_vs_seqlen.png`), decode time "
                       "against cache length (`decode_time_vs_cache.png`), int8 against f16 in decode "
                       "(`decode_int8.png`), KV cache per token and weights per variant "
                       "(`memory_per_variant.png`), oracle error and distance from the base per variant (`error_per_variant.png`), "
                       "and a roofline with the measured ceilings (`roofline.png`)._\n")
        elif plots:
            for fname, title in plots:
                out.append(f"### {title}\n\n![{title}]({img_prefix}{fname})\n")
        else:
            out.append("_(plots skipped: matplotlib is not installed; Debian: python3-matplotlib)_\n")
        out.append(WEIGHTS_MD)
        if self.skipped:
            out.append("\n## Skipped cases\n")
            out.append("The library could not run these for a reason outside the harness (no result is claimed):\n")
            out.append(md_table(["case", "reason"], [[c.name, c.error[len("skipped: "):]] for c in self.skipped]))
        if self.bad:
            out.append("\n## Cases with errors\n")
            out.append(md_table(["case", "error"], [[c.name, c.error or "unparsable name"] for c in self.bad]))
        return "\n".join(out)

    def print_summary(self):
        for mode in MODES:
            rows = []
            header, full = self.mode_rows(mode)
            keep = ["shape", "variant", "K/V", "ms/call", "cv", "tokens/s", "GFLOP/s", "%peak", "GB/s", "%bw", "KV/token",
                    "rel_l2_err", "dist. from base", "speed vs base"]
            if mode == "decode":
                keep += ["x_bound", "q_err", "i8/f16 time"]
            idx = [header.index(k) for k in keep]
            for r in full:
                rows.append([str(r[i]).replace("`", "") for i in idx])
            print(f"== {MODE_TITLES[mode]} ({self.best_isa}, {self.t1} thread)")
            print(text_table(keep, rows))
        header, rows = report_targets.target_rows(self)
        print("== prefill at the compute limit: the fp32 targets")
        print(text_table(header, [[str(x).replace("`", "").replace("**", "") for x in r] for r in rows]))
        titles = ["int8 K/V against f16", "token-major caches against head-major", "paged caches against contiguous",
                  "GQA/MQA decode against max(K/V bytes / bandwidth, FLOPs / peak)"]
        for title, (header, rows) in zip(titles, self.decode_limit_tables()):
            print(f"== decode: {title}")
            print(text_table(header, [[str(x).replace("`", "") for x in r] for r in rows]))
        header, rows = report_decode_targets.target_rows(self)
        print("== decode at the memory limit: the targets")
        print(text_table(header, [[str(x).replace("`", "").replace("**", "") for x in r] for r in rows]))
        header, rows = self.baseline_rows()
        print("== baselines, other ISAs, thread scaling (time ratio = this run's time / the reference's)")
        print(text_table(["case", "run as", "ms/call", "reference", "ref ms", "ratio", "GFLOP/s", "%peak", "rel_l2_err"],
                         [[str(x).replace("`", "") for x in r] for r in rows]))
        if self.skipped:
            print(f"{len(self.skipped)} case(s) skipped:")
            for c in self.skipped:
                print(f"  {c.name}: {c.error[len('skipped: '):]}")
        if self.bad:
            print(f"{len(self.bad)} case(s) with errors:")
            for c in self.bad:
                print(f"  {c.name}: {c.error}")


# ---------------------------------------------------------------- main
def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results")
    ap.add_argument("--out")
    ap.add_argument("--docs")
    ap.add_argument("--print", action="store_true", dest="do_print")
    ap.add_argument("--command", default="bench/run.sh")
    a = ap.parse_args(argv[1:])
    if os.path.exists(a.results):
        ctx, cases = load(a.results)
    else:
        if not a.docs:
            print(f"report.py: {a.results}: no such file", file=sys.stderr)
            return 2
        ctx, cases = {}, []  # a skeleton
    rep = Report(ctx, cases)
    outdir = a.out or os.path.dirname(os.path.abspath(a.results))
    os.makedirs(outdir, exist_ok=True)
    plots = make_plots(rep, outdir) if cases else []
    remove_stale_plots(outdir, plots)
    with open(os.path.join(outdir, "report.md"), "w", encoding="utf-8") as f:
        f.write(rep.markdown("", plots, a.command))
    written = [os.path.join(outdir, "report.md")] + [os.path.join(outdir, p) for p, _ in plots]
    if a.docs:
        ddir = os.path.join(os.path.dirname(os.path.abspath(a.docs)), "benchmarks")
        dplots = make_plots(rep, ddir) if cases else []
        remove_stale_plots(ddir, dplots)
        kept = ""  # the accuracy section (bench/accuracy/report.py's) stays
        if os.path.exists(a.docs):
            with open(a.docs, encoding="utf-8") as f:
                kept = docs_section.section_of(f.read())
        with open(a.docs, "w", encoding="utf-8") as f:
            f.write(rep.markdown("benchmarks/", dplots, a.command))
            f.write("\n" + kept + "\n" if kept else "")
        written += [a.docs] + [os.path.join(ddir, p) for p, _ in dplots]
    if a.do_print:
        rep.print_summary()
    print("report: " + ", ".join(os.path.relpath(w) for w in written))
    return 1 if rep.bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
