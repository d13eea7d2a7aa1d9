#!/usr/bin/env python3
"""Draw a chart with matplotlib (the sandbox toolbox) as PNG, SVG or PDF.

    python3 plot.py DATA --kind bar|hbar|line|area|scatter|pie|hist|stacked \\
        [--x COL] [--y COL[,COL...]] [--title T] [--x-label L] [--y-label L] \\
        [--sort asc|desc] [--top N] [--width 10] [--height 5.6] [--dpi 150] --out chart.png

DATA is a CSV file (header row), a JSON list of records, a JSON object of label -> value, or
{"labels": [...], "series": {"name": [...]}}. `--x` is the label column (default: the first),
`--y` the value columns (default: every numeric column). The format follows `--out`'s suffix.
The same data and options always give the same file (no dates or random ids are written).
Prints what it drew: the kind, the number of labels, series and values.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path
from typing import Any

PALETTE = ["#2f6fb3", "#e07b39", "#3a9d5d", "#c4453c", "#7d5ba6", "#8c6d46", "#d17fb5", "#6b7b8c"]


def number(value: Any) -> float | None:
    """A number from a cell: '1,200.50', '12%', '$3' and plain numbers; None for blanks and text."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    text = str(value).strip().replace(",", "").replace("$", "").replace("€", "").rstrip("%")
    try:
        found = float(text)
    except ValueError:
        return None
    return found if math.isfinite(found) else None


def read_table(path: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """Columns and rows of a CSV or JSON file."""
    text = path.read_text(encoding="utf-8-sig")
    if path.suffix.lower() == ".json":
        data = json.loads(text)
        if isinstance(data, dict) and "labels" in data and "series" in data:
            rows = [{"label": label} for label in data["labels"]]
            for name, values in data["series"].items():
                for row, value in zip(rows, values, strict=False):
                    row[name] = value
            return ["label", *data["series"]], rows
        if isinstance(data, dict):
            return ["label", "value"], [{"label": k, "value": v} for k, v in data.items()]
        if isinstance(data, list) and all(isinstance(r, dict) for r in data):
            columns: list[str] = []
            for row in data:
                columns += [c for c in row if c not in columns]
            return columns, data
        raise ValueError(f"{path}: JSON must be records, an object of label -> value, or labels+series")
    rows = list(csv.DictReader(text.splitlines()))
    if not rows:
        raise ValueError(f"{path}: no rows under the header")
    return list(rows[0].keys()), rows


def pick_series(columns: list[str], rows: list[dict[str, Any]], x: str, y: str | None) -> list[str]:
    if y:
        wanted = [c.strip() for c in y.split(",") if c.strip()]
        unknown = [c for c in wanted if c not in columns]
        if unknown:
            raise ValueError(f"no column {unknown[0]!r}; the columns are {', '.join(columns)}")
        return wanted
    numeric = [c for c in columns if c != x and any(number(r.get(c)) is not None for r in rows)]
    if not numeric:
        raise ValueError("no numeric column to plot; name one with --y")
    return numeric


def draw(args: argparse.Namespace) -> str:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams.update({"svg.hashsalt": "antler", "pdf.fonttype": 42, "font.size": 11})
    import matplotlib.pyplot as plt

    columns, rows = read_table(Path(args.data))
    x = args.x or columns[0]
    if x not in columns:
        raise ValueError(f"no column {x!r}; the columns are {', '.join(columns)}")
    series = pick_series(columns, rows, x, args.y)
    if args.sort:
        key = series[0]
        rows = sorted(rows, key=lambda r: number(r.get(key)) or 0.0, reverse=args.sort == "desc")
    if args.top:
        rows = rows[: args.top]
    labels = [str(r.get(x, "")) for r in rows]
    values = {s: [number(r.get(s)) for r in rows] for s in series}
    count = sum(v is not None for vs in values.values() for v in vs)

    fig, ax = plt.subplots(figsize=(args.width, args.height), dpi=args.dpi)
    kind = args.kind
    positions = list(range(len(labels)))
    if kind in ("bar", "hbar"):
        width = 0.8 / len(series)
        for i, name in enumerate(series):
            offsets = [p - 0.4 + width * (i + 0.5) for p in positions]
            heights = [v if v is not None else 0.0 for v in values[name]]
            if kind == "bar":
                ax.bar(offsets, heights, width, label=name, color=PALETTE[i % len(PALETTE)])
            else:
                ax.barh(offsets, heights, width, label=name, color=PALETTE[i % len(PALETTE)])
        if kind == "bar":
            ax.set_xticks(positions, labels, rotation=30 if max(map(len, labels), default=0) > 8 else 0)
        else:
            ax.set_yticks(positions, labels)
            ax.invert_yaxis()  # the first row on top, as in the data
    elif kind == "stacked":
        bottom = [0.0] * len(labels)
        for i, name in enumerate(series):
            heights = [v if v is not None else 0.0 for v in values[name]]
            ax.bar(positions, heights, 0.7, bottom=bottom, label=name, color=PALETTE[i % len(PALETTE)])
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        ax.set_xticks(positions, labels)
    elif kind in ("line", "area"):
        for i, name in enumerate(series):
            ys = [v if v is not None else math.nan for v in values[name]]
            ax.plot(positions, ys, marker="o", label=name, color=PALETTE[i % len(PALETTE)])
            if kind == "area":
                ax.fill_between(positions, ys, alpha=0.2, color=PALETTE[i % len(PALETTE)])
        ax.set_xticks(positions, labels, rotation=30 if len(labels) > 8 else 0)
    elif kind == "scatter":
        xs = [number(r.get(x)) for r in rows]
        for i, name in enumerate(series):
            pairs = [(a, b) for a, b in zip(xs, values[name], strict=True) if a is not None and b is not None]
            ax.scatter(
                [p[0] for p in pairs], [p[1] for p in pairs], label=name, color=PALETTE[i % len(PALETTE)]
            )
    elif kind == "pie":
        shares = [(lab, v) for lab, v in zip(labels, values[series[0]], strict=True) if v and v > 0]
        ax.pie(
            [v for _, v in shares],
            labels=[lab for lab, _ in shares],
            autopct="%1.0f%%",
            colors=PALETTE,
            startangle=90,
            counterclock=False,
        )
        ax.axis("equal")
    elif kind == "hist":
        data = [v for v in values[series[0]] if v is not None]
        ax.hist(data, bins=args.bins, color=PALETTE[0], edgecolor="white")
    if args.title:
        ax.set_title(args.title, loc="left", fontweight="bold")
    if kind != "pie":
        ax.set_xlabel(args.x_label or ("" if kind in ("bar", "line", "area", "stacked") else x))
        if args.y_label:
            ax.set_ylabel(args.y_label)
        ax.grid(axis="x" if kind == "hbar" else "y", alpha=0.3)
        ax.spines[["top", "right"]].set_visible(False)
        if len(series) > 1:
            ax.legend(frameon=False)
    fig.tight_layout()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    metadata: dict[str, Any] = {
        ".png": {"Software": None},
        ".svg": {"Date": None},
        ".pdf": {"CreationDate": None, "ModDate": None},
    }.get(out.suffix.lower(), {})
    fig.savefig(out, metadata=metadata)
    plt.close(fig)
    names = ", ".join(series)
    return f"wrote {out}: {kind} chart, {len(labels)} labels, {len(series)} series ({names}), {count} values"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("data")
    parser.add_argument(
        "--kind", default="bar", choices=["bar", "hbar", "line", "area", "scatter", "pie", "hist", "stacked"]
    )
    parser.add_argument("--x")
    parser.add_argument("--y")
    parser.add_argument("--title")
    parser.add_argument("--x-label")
    parser.add_argument("--y-label")
    parser.add_argument("--sort", choices=["asc", "desc"])
    parser.add_argument("--top", type=int)
    parser.add_argument("--bins", type=int, default=20)
    parser.add_argument("--width", type=float, default=10.0, help="inches (default 10)")
    parser.add_argument("--height", type=float, default=5.6, help="inches (default 5.6)")
    parser.add_argument("--dpi", type=int, default=150)
    parser.add_argument("--out", required=True, help="a .png, .svg or .pdf path")
    args = parser.parse_args()
    if Path(args.out).suffix.lower() not in (".png", ".svg", ".pdf"):
        print("error: --out must end in .png, .svg or .pdf", file=sys.stderr)
        return 2
    try:
        print(draw(args))
    except ModuleNotFoundError as exc:
        print(
            f"error: {exc.name} is not installed here; use chart.py (SVG, standard library)", file=sys.stderr
        )
        return 1
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
