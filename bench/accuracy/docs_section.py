"""The accuracy section of docs/benchmarks.md: bench/accuracy/report.py writes it between two
markers, and bench/report.py, which rewrites the rest of the file, keeps it."""

BEGIN = "<!-- accuracy report: bench/accuracy/report.py writes from here -->"
END = "<!-- accuracy report: to here -->"


def section_of(doc):
    """The marked section of the text `doc` (markers included), or ""."""
    b, e = doc.find(BEGIN), doc.find(END)
    return doc[b:e + len(END)] if 0 <= b < e else ""


def put_section(doc, text):
    """`doc` with its marked section replaced by `text` (which carries the markers), or with
    `text` appended when it has none."""
    old = section_of(doc)
    if old:
        return doc.replace(old, text)
    return doc.rstrip("\n") + "\n\n" + text + "\n"
