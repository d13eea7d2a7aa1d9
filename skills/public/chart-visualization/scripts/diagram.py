#!/usr/bin/env python3
"""Draw the charts chart-report has no kind for, as standalone SVG: funnel, radar, treemap, mind map.

    python3 diagram.py SPEC.json --out chart.svg

SPEC.json has "kind", an optional "title", and the kind's data:
  funnel   "stages": [{"label": "Visits", "value": 1000}, ...]   (drawn in the given order,
           each stage's share of the first printed beside it)
  radar    "axes": ["Speed", "Price", ...] (3 or more), "series": {"Us": [4, 3, ...], ...},
           optional "max" (default: the largest value)
  treemap  "items": [{"label": "Rent", "value": 1200}, ...]   (areas proportional to values)
  mindmap  "root": "Topic", "children": [{"label": "Idea", "children": [...]}, ...]
Prints what it drew. Standard library only; the same spec gives the same file. An `error:`
line says what is wrong in the spec (exit 1).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from html import escape
from pathlib import Path
from typing import Any

W, H = 800, 520
COLORS = ("#2f6db5", "#e07b39", "#3a9d5d", "#c44e52", "#8172b2", "#937860", "#da8bc3", "#8c8c8c")


class SpecError(ValueError):
    pass


def text(x: float, y: float, label: str, size: int = 14, anchor: str = "middle", fill: str = "#222") -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" fill="{fill}" '
        f'font-family="sans-serif">{escape(str(label))}</text>'
    )


def numbers(items: Any, what: str) -> list[tuple[str, float]]:
    if not isinstance(items, list) or not items:
        raise SpecError(f"{what} must be a non-empty list of {{label, value}}")
    pairs = []
    for n, item in enumerate(items, 1):
        value = item.get("value") if isinstance(item, dict) else None
        if not isinstance(value, (int, float)) or value < 0:
            raise SpecError(f"{what} item {n} needs a label and a value of 0 or more")
        pairs.append((str(item.get("label", f"#{n}")), float(value)))
    return pairs


def funnel(spec: dict[str, Any]) -> tuple[list[str], str]:
    stages = numbers(spec.get("stages"), "stages")
    top = stages[0][1] or 1.0
    band = (H - 90) / len(stages)
    parts = []
    for n, (label, value) in enumerate(stages):
        width = max(40.0, 560 * value / top)
        x, y = (W - 160 - width) / 2 + 20, 60 + n * band
        parts.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{band - 8:.1f}" '
            f'fill="{COLORS[n % len(COLORS)]}" rx="4"/>'
        )
        parts.append(text(x + width / 2, y + band / 2, f"{label}: {value:g}", 14, fill="#fff"))
        parts.append(text(W - 110, y + band / 2, f"{100 * value / top:.0f}%", 14, "start"))
    return parts, f"funnel, {len(stages)} stages"


def radar(spec: dict[str, Any]) -> tuple[list[str], str]:
    axes, series = spec.get("axes"), spec.get("series")
    if not isinstance(axes, list) or len(axes) < 3:
        raise SpecError("a radar needs 3 or more axes")
    if not isinstance(series, dict) or not series:
        raise SpecError('a radar needs "series": {"name": [one value per axis]}')
    for name, values in series.items():
        if not isinstance(values, list) or len(values) != len(axes):
            raise SpecError(f"series {name!r} needs {len(axes)} values, one per axis")
    top = float(spec.get("max") or max(max(v) for v in series.values()) or 1)
    cx, cy, r = W / 2 - 80, H / 2 + 15, 190

    def point(i: int, share: float) -> tuple[float, float]:
        angle = -math.pi / 2 + 2 * math.pi * i / len(axes)
        return cx + r * share * math.cos(angle), cy + r * share * math.sin(angle)

    parts = []
    for ring in (0.25, 0.5, 0.75, 1.0):
        ring_points = " ".join(f"{x:.1f},{y:.1f}" for x, y in (point(i, ring) for i in range(len(axes))))
        parts.append(f'<polygon points="{ring_points}" fill="none" stroke="#ccc"/>')
    for i, axis in enumerate(axes):
        x, y = point(i, 1.12)
        parts.append(text(x, y + 5, axis, 13))
    for n, (name, values) in enumerate(series.items()):
        color = COLORS[n % len(COLORS)]
        shape = " ".join(f"{x:.1f},{y:.1f}" for x, y in (point(i, v / top) for i, v in enumerate(values)))
        parts.append(
            f'<polygon points="{shape}" fill="{color}" fill-opacity="0.25" '
            f'stroke="{color}" stroke-width="2"/>'
        )
        parts.append(f'<rect x="{W - 150}" y="{70 + 24 * n}" width="14" height="14" fill="{color}"/>')
        parts.append(text(W - 128, 82 + 24 * n, name, 13, "start"))
    return parts, f"radar, {len(axes)} axes, {len(series)} series"


def treemap(spec: dict[str, Any]) -> tuple[list[str], str]:
    items = sorted(numbers(spec.get("items"), "items"), key=lambda p: (-p[1], p[0]))
    total = sum(v for _, v in items) or 1.0
    parts: list[str] = []
    x, y, w, h = 20.0, 50.0, W - 40.0, H - 70.0
    # Slice and dice: each item takes its share of what is left, along the longer side.
    left = total
    for n, (label, value) in enumerate(items):
        share = value / left if left else 0
        if w >= h:
            cell = (x, y, w * share, h)
            x, w = x + w * share, w * (1 - share)
        else:
            cell = (x, y, w, h * share)
            y, h = y + h * share, h * (1 - share)
        left -= value
        cx, cy, cw, ch = cell
        parts.append(
            f'<rect x="{cx:.1f}" y="{cy:.1f}" width="{cw:.1f}" height="{ch:.1f}" '
            f'fill="{COLORS[n % len(COLORS)]}" stroke="#fff" stroke-width="2"/>'
        )
        if cw > 60 and ch > 30:
            parts.append(
                text(cx + cw / 2, cy + ch / 2, f"{label} ({100 * value / total:.0f}%)", 13, fill="#fff")
            )
    return parts, f"treemap, {len(items)} items"


def mindmap(spec: dict[str, Any]) -> tuple[list[str], str]:
    root = spec.get("root")
    if not isinstance(root, str) or not root:
        raise SpecError('a mind map needs "root": the central topic')
    rows: list[tuple[int, str]] = []  # depth, label, in reading order

    def walk(children: Any, depth: int) -> None:
        for child in children or []:
            if not isinstance(child, dict) or not child.get("label"):
                raise SpecError("each mind map child needs a label")
            rows.append((depth, str(child["label"])))
            walk(child.get("children"), depth + 1)

    walk(spec.get("children"), 1)
    if not rows:
        raise SpecError("a mind map needs children")
    step = (H - 80) / len(rows)
    parts = [
        f'<rect x="20" y="{H / 2 - 20:.1f}" width="160" height="40" rx="20" fill="{COLORS[0]}"/>',
        text(100, H / 2 + 5, root, 15, fill="#fff"),
    ]
    parents: dict[int, tuple[float, float]] = {0: (180, H / 2)}
    for n, (depth, label) in enumerate(rows):
        x, y = 40 + depth * 190, 60 + n * step + step / 2
        px, py = parents[depth - 1]
        parts.append(
            f'<path d="M{px:.1f},{py:.1f} C{px + 40:.1f},{py:.1f} {x - 40:.1f},{y:.1f} {x:.1f},{y:.1f}" '
            f'fill="none" stroke="{COLORS[depth % len(COLORS)]}" stroke-width="2"/>'
        )
        parts.append(text(x + 6, y + 5, label, 13, "start"))
        parents[depth] = (x + 8 + 7.5 * len(label), y)
    depth = max(d for d, _ in rows)
    return parts, f"mind map, {len(rows)} nodes, {depth} levels"


KINDS = {"funnel": funnel, "radar": radar, "treemap": treemap, "mindmap": mindmap}


def render(spec: dict[str, Any]) -> tuple[str, str]:
    kind = spec.get("kind")
    if kind not in KINDS:
        raise SpecError(f"kind must be one of {', '.join(KINDS)} (bar, line, pie and others: chart-report)")
    parts, summary = KINDS[kind](spec)
    title = text(W / 2, 30, spec["title"], 18) if spec.get("title") else ""
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}">\n'
        f'<rect width="{W}" height="{H}" fill="#fff"/>\n{title}\n' + "\n".join(parts) + "\n</svg>\n"
    )
    return svg, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("spec", type=Path, help="the chart as JSON")
    parser.add_argument("--out", type=Path, required=True, help="the SVG to write")
    args = parser.parse_args(argv)
    try:
        spec = json.loads(args.spec.read_text(encoding="utf-8"))
        if not isinstance(spec, dict):
            raise SpecError("the spec must be a JSON object")
        svg, summary = render(spec)
    except (OSError, json.JSONDecodeError, SpecError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(svg, encoding="utf-8")
    print(f"wrote {args.out}: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
