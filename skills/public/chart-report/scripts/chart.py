#!/usr/bin/env python3
"""Draw a bar, horizontal bar or line chart from a CSV or JSON file as a standalone SVG.

    python3 chart.py DATA --out chart.svg [--kind bar|hbar|line] [--x COLUMN] [--y COL[,COL...]]
                     [--title TEXT] [--y-label TEXT] [--sort asc|desc] [--top N]
                     [--width 800] [--height 450]

DATA is a CSV/TSV with a header row, or JSON: a list of records ([{"month": "Jan", "sales": 3}]),
an object of label -> value ({"Jan": 3, "Feb": 5}), or {"labels": [...], "series": {name: [...]}}.
--x defaults to the first column, --y to every numeric column after it (one series each).
Values that are missing or not numbers leave a gap. Standard library only.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import re
import sys
from html import escape
from pathlib import Path
from typing import Any

# Okabe & Ito's palette: tells series apart for colour-blind readers too.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
FONT = "font-family:system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif"


def read_series(path: Path, x: str | None, ys: list[str] | None) -> tuple[str, list[str], dict[str, list]]:
    """(x column name, labels, {series name: values (float or None)}) from a data file."""
    text = path.read_text(encoding="utf-8-sig")
    if path.suffix.lower() == ".json":
        data = json.loads(text)
        if isinstance(data, dict) and "labels" in data and isinstance(data.get("series"), dict):
            labels = [str(v) for v in data["labels"]]
            series = {str(k): [number(v) for v in vs] for k, vs in data["series"].items()}
            return x or "", labels, _pick(series, ys)
        if isinstance(data, dict) and all(not isinstance(v, (dict, list)) for v in data.values()):
            return (
                x or "",
                [str(k) for k in data],
                {ys[0] if ys else "value": [number(v) for v in data.values()]},
            )
        if not (isinstance(data, list) and data and all(isinstance(r, dict) for r in data)):
            raise ValueError("JSON must be a list of records, an object of label -> value, or labels+series")
        columns = list(dict.fromkeys(k for r in data for k in r))
        rows = [[r.get(c) for c in columns] for r in data]
    else:
        try:
            dialect = csv.Sniffer().sniff(text[:20000], delimiters=",;\t|")
        except csv.Error:
            dialect = csv.excel
        table = [r for r in csv.reader(io.StringIO(text, newline=""), dialect) if any(c.strip() for c in r)]
        if len(table) < 2:
            raise ValueError(f"{path.name} needs a header row and at least one row of data")
        columns = [c.strip() for c in table[0]]
        rows = table[1:]
    x = x or columns[0]
    if x not in columns:
        raise ValueError(f"no column {x!r}; the columns are {columns}")
    xi = columns.index(x)
    labels = [str(r[xi]) if xi < len(r) and r[xi] is not None else "" for r in rows]
    series = {
        c: [number(r[i]) if i < len(r) else None for r in rows] for i, c in enumerate(columns) if c != x
    }
    if ys is None:  # every column after x that holds numbers
        series = {c: v for c, v in series.items() if sum(n is not None for n in v) >= max(1, len(v) // 2)}
    return x, labels, _pick(series, ys)


def _pick(series: dict[str, list], ys: list[str] | None) -> dict[str, list]:
    if ys is None:
        if not series:
            raise ValueError("no numeric column to plot; name one with --y")
        return series
    missing = [y for y in ys if y not in series]
    if missing:
        raise ValueError(f"no column {missing[0]!r}; the columns are {list(series)}")
    return {y: series[y] for y in ys}


def number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    text = re.sub(r"^[$€£¥]", "", str(value).strip().rstrip("%").strip())
    if re.fullmatch(r"[+-]?\d{1,3}(,\d{3})+(\.\d+)?", text):
        text = text.replace(",", "")
    try:
        result = float(text)
    except ValueError:
        return None
    return result if math.isfinite(result) else None


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high] (1, 2, 2.5 or 5 times a power of ten apart)."""
    if low == high:
        low, high = (low - 1, high + 1) if low == 0 else (min(0, low), max(0, high))
    raw = (high - low) / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    start = math.floor(low / step + 1e-9) * step
    ticks = []
    value = start
    while value < high + step * 0.999:
        ticks.append(round(value, 10))
        value += step
    return ticks


def label(value: float) -> str:
    size = abs(value)
    for limit, unit, suffix in ((1e12, 1e12, "T"), (1e9, 1e9, "B"), (1e6, 1e6, "M"), (1e4, 1e3, "k")):
        if size >= limit:
            return f"{value / unit:g}{suffix}"
    return f"{value:g}"


def clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def render(
    labels: list[str],
    series: dict[str, list],
    *,
    kind: str = "bar",
    title: str = "",
    x_label: str = "",
    y_label: str = "",
    width: int = 800,
    height: int = 450,
) -> str:
    """The chart as SVG text."""
    values = [v for vs in series.values() for v in vs if v is not None]
    if not values:
        raise ValueError("there are no numbers to plot")
    low, high = min(values), max(values)
    if kind != "line":
        low, high = min(low, 0.0), max(high, 0.0)  # bars start at zero
    ticks = nice_ticks(low, high)
    lo, hi = ticks[0], ticks[-1]
    horizontal = kind == "hbar"
    longest = max((len(s) for s in labels), default=1)
    legend = len(series) > 1
    top = 56 if title else 24
    rotate = not horizontal and longest * 7 > (width - 100) / max(len(labels), 1)
    if horizontal:
        left = min(longest, 24) * 7 + 20
    else:  # room for the value labels, and for the first category label when it is slanted
        left = max(70, int(min(longest, 24) * 5.4) + 8) if rotate else 70
    bottom = (min(longest, 24) * 5 + 40 if rotate else 50) + (24 if legend else 0)
    right = 24
    plot_w, plot_h = width - left - right, height - top - bottom
    if plot_w < 80 or plot_h < 80:
        raise ValueError("the chart is too small for its labels; raise --width/--height")

    def scale(v: float) -> float:  # value -> pixels along the value axis
        return (v - lo) / (hi - lo) * (plot_w if horizontal else plot_h)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title or "chart")}">',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        f'<g style="{FONT}" font-size="12" fill="#333333">',
    ]
    if title:
        out.append(
            f'<text x="{width / 2:.1f}" y="30" text-anchor="middle" font-size="18" '
            f'font-weight="600">{escape(title)}</text>'
        )
    # Grid lines and value labels.
    for t in ticks:
        if horizontal:
            px = left + scale(t)
            out.append(f'<line x1="{px:.1f}" y1="{top}" x2="{px:.1f}" y2="{top + plot_h}" stroke="#e5e5e5"/>')
            out.append(f'<text x="{px:.1f}" y="{top + plot_h + 16}" text-anchor="middle">{label(t)}</text>')
        else:
            py = top + plot_h - scale(t)
            out.append(
                f'<line x1="{left}" y1="{py:.1f}" x2="{left + plot_w}" y2="{py:.1f}" stroke="#e5e5e5"/>'
            )
            out.append(f'<text x="{left - 8}" y="{py + 4:.1f}" text-anchor="end">{label(t)}</text>')
    zero = scale(0.0) if lo <= 0 <= hi else 0.0
    n, names = len(labels), list(series)
    band = (plot_h if horizontal else plot_w) / max(n, 1)
    colours = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}
    if kind == "line":
        for name in names:
            points = [
                (left + band * (i + 0.5), top + plot_h - scale(v))
                for i, v in enumerate(series[name])
                if v is not None
            ]
            segments, current = [], []
            for i, v in enumerate(series[name]):
                if v is None:
                    segments, current = [*segments, current] if current else segments, []
                else:
                    current.append(f"{left + band * (i + 0.5):.1f},{top + plot_h - scale(v):.1f}")
            segments = [*segments, current] if current else segments
            for segment in segments:
                out.append(
                    f'<polyline points="{" ".join(segment)}" fill="none" stroke="{colours[name]}" '
                    'stroke-width="2.5" stroke-linejoin="round"/>'
                )
            if len(points) <= 60:
                values_of = [v for v in series[name] if v is not None]
                shown = [lab for lab, v in zip(labels, series[name], strict=True) if v is not None]
                for (px, py), v, lab in zip(points, values_of, shown, strict=True):
                    out.append(
                        f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3.5" fill="{colours[name]}">'
                        f"<title>{escape(f'{name} · {lab}: {v:g}')}</title></circle>"
                    )
    else:
        inner = band * 0.8 / len(names)
        for s, name in enumerate(names):
            for i, v in enumerate(series[name]):
                if v is None:
                    continue
                offset = band * 0.1 + s * inner + band * i
                a, b = sorted((zero, scale(v)))
                tip = f"<title>{escape(f'{name} · {labels[i]}: {v:g}')}</title>"
                if horizontal:
                    out.append(
                        f'<rect x="{left + a:.1f}" y="{top + offset:.1f}" width="{b - a:.1f}" '
                        f'height="{inner:.1f}" fill="{colours[name]}">{tip}</rect>'
                    )
                else:
                    out.append(
                        f'<rect x="{left + offset:.1f}" y="{top + plot_h - b:.1f}" width="{inner:.1f}" '
                        f'height="{b - a:.1f}" fill="{colours[name]}">{tip}</rect>'
                    )
    # Category labels, at most ~40 of them so they stay readable.
    every = max(1, math.ceil(n / 40))
    for i, text in enumerate(labels):
        if i % every:
            continue
        shown = escape(clip(text, 24))
        if horizontal:
            py = top + band * (i + 0.5) + 4
            out.append(f'<text x="{left - 8}" y="{py:.1f}" text-anchor="end">{shown}</text>')
        elif rotate:
            px, py = left + band * (i + 0.5), top + plot_h + 14
            out.append(
                f'<text x="{px:.1f}" y="{py}" text-anchor="end" '
                f'transform="rotate(-40 {px:.1f} {py})">{shown}</text>'
            )
        else:
            px = left + band * (i + 0.5)
            out.append(f'<text x="{px:.1f}" y="{top + plot_h + 18}" text-anchor="middle">{shown}</text>')
    # Axes.
    if horizontal:
        out.append(
            f'<line x1="{left + zero:.1f}" y1="{top}" x2="{left + zero:.1f}" y2="{top + plot_h}" '
            'stroke="#666666"/>'
        )
    else:
        base = top + plot_h - zero
        out.append(
            f'<line x1="{left}" y1="{base:.1f}" x2="{left + plot_w}" y2="{base:.1f}" stroke="#666666"/>'
        )
    value_axis = y_label or (names[0] if len(names) == 1 else "")
    if value_axis and horizontal:
        out.append(
            f'<text x="{left + plot_w / 2:.1f}" y="{top + plot_h + 36}" text-anchor="middle">'
            f"{escape(value_axis)}</text>"
        )
    elif value_axis:
        mid = top + plot_h / 2
        out.append(
            f'<text x="16" y="{mid:.1f}" text-anchor="middle" transform="rotate(-90 16 {mid:.1f})">'
            f"{escape(value_axis)}</text>"
        )
    if x_label and not horizontal and not rotate:
        out.append(
            f'<text x="{left + plot_w / 2:.1f}" y="{top + plot_h + 38}" text-anchor="middle">'
            f"{escape(x_label)}</text>"
        )
    if legend:
        x, y = left, height - 14
        for name in names:
            out.append(f'<rect x="{x}" y="{y - 10}" width="12" height="12" fill="{colours[name]}"/>')
            out.append(f'<text x="{x + 16}" y="{y}">{escape(clip(name, 30))}</text>')
            x += 16 + min(len(name), 30) * 7 + 18
    out += ["</g>", "</svg>"]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("data")
    parser.add_argument("--out", required=True, help="the .svg file to write")
    parser.add_argument("--kind", choices=("bar", "hbar", "line"), default="bar")
    parser.add_argument("--x", help="the label column (default: the first)")
    parser.add_argument("--y", help="value column(s), comma-separated (default: every numeric one)")
    parser.add_argument("--title", default="")
    parser.add_argument("--x-label", default="")
    parser.add_argument("--y-label", default="")
    parser.add_argument("--sort", choices=("asc", "desc"), help="order by the first series")
    parser.add_argument("--top", type=int, help="keep only the first N after sorting")
    parser.add_argument("--width", type=int, default=800)
    parser.add_argument("--height", type=int, default=450)
    args = parser.parse_args(argv)
    try:
        ys = [y.strip() for y in args.y.split(",")] if args.y else None
        x, labels, series = read_series(Path(args.data), args.x, ys)
        if args.sort or args.top:
            first = next(iter(series.values()))
            order = list(range(len(labels)))
            if args.sort:
                missing = -math.inf if args.sort == "desc" else math.inf
                order.sort(
                    key=lambda i: first[i] if first[i] is not None else missing, reverse=args.sort == "desc"
                )
            order = order[: args.top] if args.top else order
            labels = [labels[i] for i in order]
            series = {k: [v[i] for i in order] for k, v in series.items()}
        svg = render(
            labels,
            series,
            kind=args.kind,
            title=args.title,
            x_label=args.x_label or x,
            y_label=args.y_label,
            width=args.width,
            height=args.height,
        )
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(svg, encoding="utf-8")
    count = sum(v is not None for vs in series.values() for v in vs)
    print(
        f"wrote {out}: {args.kind} chart, {len(labels)} labels, {len(series)} series "
        f"({', '.join(series)}), {count} values"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
