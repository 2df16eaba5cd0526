#!/usr/bin/env python3
"""Prints a Google Benchmark JSON file written by mh_bench as an aligned table.

Usage: python3 bench/summary.py build/bench/results.json

Standard library only. Columns: wall time per call, iterations, GFLOP/s and % of the measured
peak for the case's ISA and thread count, GB/s and % of the measured read bandwidth (decode
modes), tokens/s, and the error versus the double reference (max abs, relative L2).
"""
import json
import sys

_UNIT_TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def _num(value, fmt):
    return "-" if value is None else format(value, fmt)


def _si(value):
    if value is None:
        return "-"
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.2f}{suffix}"
    return f"{value:.1f}"


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        data = json.load(f)

    ctx = data.get("context", {})
    print(f"multihead {ctx.get('mh_version', '?')}, suite {ctx.get('mh_suite', '?')}, "
          f"ISAs {ctx.get('mh_isas_supported', '?')}, {ctx.get('num_cpus', '?')} CPUs, "
          f"{ctx.get('date', '')}")
    limits = [f"{k}={v}" for k, v in sorted(ctx.items())
              if k.startswith("peak_gflops/") or k.startswith("read_gbps/")]
    if limits:
        print("machine limits: " + ", ".join(limits))
    print()

    header = ["case", "time_ms", "iters", "GFLOP/s", "%peak", "GB/s", "%bw", "tok/s",
              "max_abs_err", "rel_l2_err"]
    rows, errors = [], 0
    for b in data.get("benchmarks", []):
        name = b.get("name", "?")
        if b.get("aggregate_name") == "cv":  # a ratio, not a time: not for this table
            continue
        if b.get("error_occurred"):
            errors += 1
            rows.append([name, "ERROR: " + str(b.get("error_message", ""))])
            continue
        ms = b.get("real_time", 0.0) * _UNIT_TO_MS.get(b.get("time_unit", "ns"), 1e-6)
        rows.append([
            name,
            f"{ms:.3f}",
            str(b.get("iterations", "")),
            _num(b.get("gflops"), ".2f"),
            _num(b.get("pct_peak"), ".1f"),
            _num(b.get("gbps"), ".2f"),
            _num(b.get("pct_bw"), ".1f"),
            _si(b.get("tokens_per_s")),
            _num(b.get("max_abs_err"), ".1e"),
            _num(b.get("rel_l2_err"), ".1e"),
        ])

    widths = [len(h) for h in header]
    for r in rows:
        if len(r) == len(header):
            widths = [max(w, len(c)) for w, c in zip(widths, r)]
        else:
            widths[0] = max(widths[0], len(r[0]))

    def line(cells):
        out = [cells[0].ljust(widths[0])]
        out += [c.rjust(w) for c, w in zip(cells[1:], widths[1:])]
        return "  ".join(out)

    print(line(header))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r) if len(r) == len(header) else r[0].ljust(widths[0]) + "  " + r[1])
    print()
    print(f"{len(rows)} case(s), {errors} error(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
