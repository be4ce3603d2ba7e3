#!/usr/bin/env python3
"""plot.py — draw a carve-soak CSV as an SVG line chart: reserved, allocated
and RSS (MiB) over time, the warm-up shaded, carve_empty_cache calls marked.

The one idea: the soak's claim is "flat after warm-up", so the chart puts the
three memory curves on one MiB scale with the warm-up region set apart; a
creeping leak then shows as a rising curve right of the shading. Standard
library only; the SVG is written by hand.

Usage: plot.py soak.csv -o soak.svg --title "host, 4 threads, 3 min"
       [--warmup FRACTION] [--limit SIZE] [--width PX] [--height PX]
"""

import argparse
import csv
import math
import re
import sys
from xml.sax.saxutils import escape

MIB = 1 << 20
COLUMNS = ("elapsed_s", "reserved_bytes", "allocated_bytes", "rss_bytes", "empty_cache_calls")
SERIES = (  # column, legend label, colour
    ("reserved_bytes", "reserved", "#1f77b4"),
    ("allocated_bytes", "allocated", "#2ca02c"),
    ("rss_bytes", "RSS (whole process)", "#d62728"),
)
UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": MIB, "mib": MIB, "g": 1 << 30,
         "gib": 1 << 30, "kb": 10**3, "mb": 10**6, "gb": 10**9}


def parse_size(text):
    """'256MiB', '1GiB', '300MB', '268435456' -> bytes."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).lower() not in UNITS:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 256MiB)")
    return float(m.group(1)) * UNITS[m.group(2).lower()]


def fraction(text):
    try:
        v = float(text)
    except ValueError:
        v = -1
    if not 0 <= v < 1:
        raise argparse.ArgumentTypeError(f"not a fraction in [0, 1): {text!r}")
    return v


def read_rows(path):
    """The CSV's rows as dicts of floats; exits 2 with a message on bad input."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                sys.exit(f"plot.py: {path}: missing columns {', '.join(missing)} (not a carve-soak CSV?)")
            rows = []
            for n, r in enumerate(reader, start=2):
                try:
                    rows.append({c: float(r[c]) for c in COLUMNS})
                except (TypeError, ValueError):
                    sys.exit(f"plot.py: {path}:{n}: not a number in {r}")
    except OSError as e:
        sys.exit(f"plot.py: {e}")
    if len(rows) < 2:
        sys.exit(f"plot.py: {path}: fewer than two data rows, nothing to draw")
    return rows


def nice_step(span, target):
    """A 1-2-5 step giving about target intervals over span."""
    raw = span / max(target, 1)
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for m in (1, 2, 5, 10):
        if m * mag >= raw:
            return m * mag
    return 10 * mag


def fmt_num(v):
    return f"{v:.0f}" if abs(v - round(v)) < 1e-9 else f"{v:g}"


def render(rows, title, warmup, limit, width, height):
    left, right, top, bottom = 70, 20, 50, 96
    pw, ph = width - left - right, height - top - bottom
    t_end = rows[-1]["elapsed_s"]
    t_end = t_end if t_end > 0 else 1
    y_top = max(max(r[c] for r in rows for c, _, _ in SERIES), limit or 0) / MIB
    ystep = nice_step(y_top if y_top > 0 else 1, 6)
    y_max = ystep * math.ceil(y_top * 1.05 / ystep) if y_top > 0 else ystep
    xstep = nice_step(t_end, 8)

    def x(t):
        return left + pw * t / t_end

    def y(mib):
        return top + ph * (1 - mib / y_max)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2:.1f}" y="24" text-anchor="middle" font-size="16" '
           f'font-weight="bold">{escape(title)}</text>']
    # warm-up region
    wx = x(warmup * t_end)
    if warmup > 0:
        out.append(f'<rect x="{left}" y="{top}" width="{wx - left:.1f}" height="{ph}" fill="#999" '
                   f'fill-opacity="0.18"/>')
        out.append(f'<text x="{(left + wx) / 2:.1f}" y="{top + 14}" text-anchor="middle" '
                   f'fill="#555">warm-up</text>')
    # grid and ticks
    v = 0.0
    while v <= y_max + 1e-9:
        yy = y(v)
        out.append(f'<line x1="{left}" y1="{yy:.1f}" x2="{left + pw}" y2="{yy:.1f}" stroke="#e5e5e5"/>')
        out.append(f'<line x1="{left - 5}" y1="{yy:.1f}" x2="{left}" y2="{yy:.1f}" stroke="black"/>')
        out.append(f'<text x="{left - 8}" y="{yy + 4:.1f}" text-anchor="end">{fmt_num(v)}</text>')
        v += ystep
    t = 0.0
    while t <= t_end + 1e-9:
        xx = x(t)
        out.append(f'<line x1="{xx:.1f}" y1="{top}" x2="{xx:.1f}" y2="{top + ph}" stroke="#f0f0f0"/>')
        out.append(f'<line x1="{xx:.1f}" y1="{top + ph}" x2="{xx:.1f}" y2="{top + ph + 5}" stroke="black"/>')
        out.append(f'<text x="{xx:.1f}" y="{top + ph + 18}" text-anchor="middle">{fmt_num(t)}</text>')
        t += xstep
    # axes and labels
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" stroke="black"/>')
    out.append(f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="black"/>')
    out.append(f'<text x="{left + pw / 2:.1f}" y="{top + ph + 38}" text-anchor="middle">time (s)</text>')
    out.append(f'<text x="18" y="{top + ph / 2:.1f}" text-anchor="middle" '
               f'transform="rotate(-90 18 {top + ph / 2:.1f})">memory (MiB)</text>')
    # the limit
    if limit:
        ly = y(limit / MIB)
        out.append(f'<line x1="{left}" y1="{ly:.1f}" x2="{left + pw}" y2="{ly:.1f}" stroke="#444" '
                   f'stroke-dasharray="6 4"/>')
        out.append(f'<text x="{left + pw - 4}" y="{ly - 5:.1f}" text-anchor="end" fill="#444">'
                   f'limit {fmt_num(round(limit / MIB, 1))} MiB</text>')
    # carve_empty_cache calls: a tick under the axis where the count rises
    prev = rows[0]["empty_cache_calls"]
    for r in rows[1:]:
        if r["empty_cache_calls"] > prev:
            xx = x(r["elapsed_s"])
            out.append(f'<path d="M{xx:.1f},{top + ph - 1} l-4,-7 h8 z" fill="#ff7f0e"/>')
        prev = r["empty_cache_calls"]
    # the curves
    for col, _, colour in SERIES:
        pts = " ".join(f"{x(r['elapsed_s']):.1f},{y(r[col] / MIB):.1f}" for r in rows)
        out.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="1.6" '
                   f'stroke-linejoin="round"/>')
    # legend, under the plot
    entries = [(label, colour, "line") for _, label, colour in SERIES]
    if limit:
        entries.append(("limit", "#444", "dash"))
    entries.append(("carve_empty_cache call", "#ff7f0e", "mark"))
    if warmup > 0:
        entries.append(("warm-up (not judged)", "#999", "box"))
    lx, ly = left, top + ph + 58
    for label, colour, kind in entries:
        item = 27 + 7 * len(label) + 18
        if lx > left and lx + item > width - right:  # wrap to a second row
            lx, ly = left, ly + 18
        if kind == "line":
            out.append(f'<line x1="{lx}" y1="{ly - 4}" x2="{lx + 22}" y2="{ly - 4}" stroke="{colour}" '
                       f'stroke-width="2.5"/>')
        elif kind == "dash":
            out.append(f'<line x1="{lx}" y1="{ly - 4}" x2="{lx + 22}" y2="{ly - 4}" stroke="{colour}" '
                       f'stroke-dasharray="6 4"/>')
        elif kind == "mark":
            out.append(f'<path d="M{lx + 11},{ly} l-4,-7 h8 z" fill="{colour}"/>')
        else:
            out.append(f'<rect x="{lx}" y="{ly - 10}" width="22" height="12" fill="{colour}" '
                       f'fill-opacity="0.3"/>')
        out.append(f'<text x="{lx + 27}" y="{ly}">{escape(label)}</text>')
        lx += item
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Draw a carve-soak CSV as an SVG line chart of reserved, allocated and RSS "
                    "memory over time, with the warm-up shaded.")
    ap.add_argument("csv", help="CSV written by carve-soak (--csv FILE, or its standard output)")
    ap.add_argument("-o", "--output", required=True, help="SVG file to write")
    ap.add_argument("--title", default=None, help="chart title (default: the CSV's name)")
    ap.add_argument("--warmup", type=fraction, default=0.2,
                    help="warm-up share of the run, as given to carve-soak (default 0.2)")
    ap.add_argument("--limit", type=parse_size, default=None,
                    help="draw the arena limit as a dashed line, e.g. 256MiB")
    ap.add_argument("--width", type=int, default=900, help="width in pixels (default 900)")
    ap.add_argument("--height", type=int, default=480, help="height in pixels (default 480)")
    args = ap.parse_args(argv)
    if args.width < 300 or args.height < 200:
        ap.error("--width must be at least 300 and --height at least 200")
    rows = read_rows(args.csv)
    svg = render(rows, args.title if args.title is not None else f"carve soak: {args.csv}",
                 args.warmup, args.limit, args.width, args.height)
    try:
        with open(args.output, "w") as f:
            f.write(svg)
    except OSError as e:
        sys.exit(f"plot.py: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
