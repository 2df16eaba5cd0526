"""Number and table formatting for bench/report.py: the cells of the Markdown and console tables."""

def fmt_bytes(v):
    if v is None:
        return "-"
    v = float(v)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(v) < 1024 or unit == "GiB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024.0
    return "-"


def fmt_si(v, prec=1):
    if v is None:
        return "-"
    a = abs(v)
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= scale:
            return f"{v / scale:.{prec}f}{suffix}"
    return f"{v:.{prec}f}"


def fmt_num(v, spec):
    return "-" if v is None else format(v, spec)


def fmt_ms(v):
    if v is None:
        return "-"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def fmt_cv(v):
    return "-" if v is None else f"{100 * v:.0f}%"


def fmt_err(v):
    return "-" if v is None else f"{v:.1e}"


def fmt_x(v):
    return "-" if not v or v <= 0 else f"{v:.2f}x"


def fmt_err_opt(v):
    """An error that only some cases measure (q_err: -1 when not measured)."""
    return "-" if v is None or v < 0 else f"{v:.1e}"


def fmt_dist(v):
    if v is None or v < 0:
        return "-"
    return "0 (base)" if v == 0 else f"{v:.3f}"


def fmt_met(ok):
    """A targets table's `met` cell: a miss in bold."""
    return "yes" if ok else "**no**"


def md_table(header, rows, align=None, skeleton=False):
    if not rows and skeleton:
        rows = [["_(filled in by the run)_"] + [""] * (len(header) - 1)]
    if not rows:
        return "_(no cases)_\n"
    align = align or ["l"] + ["r"] * (len(header) - 1)
    sep = ["---:" if a == "r" else ":---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
    for r in rows:
        lines.append("| " + " | ".join(str(x) for x in r) + " |")
    return "\n".join(lines) + "\n"


def text_table(header, rows):
    if not rows:
        return "  (no cases)\n"
    w = [len(h) for h in header]
    for r in rows:
        w = [max(a, len(str(b))) for a, b in zip(w, r)]
    out = ["  ".join(h.ljust(w[0]) if i == 0 else h.rjust(w[i]) for i, h in enumerate(header)),
           "  ".join("-" * x for x in w)]
    for r in rows:
        out.append("  ".join(str(c).ljust(w[0]) if i == 0 else str(c).rjust(w[i]) for i, c in enumerate(r)))
    return "\n".join(out) + "\n"
