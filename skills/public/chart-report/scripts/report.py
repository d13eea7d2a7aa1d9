#!/usr/bin/env python3
"""Build one self-contained HTML report (charts inlined, no outside files) from a JSON spec.

    python3 report.py SPEC.json --out /mnt/user-data/outputs/report.html

The spec:

    {
      "title": "Sales, first quarter",
      "subtitle": "Prepared from sales.csv",             (optional)
      "blocks": [
        {"type": "metrics", "items": [{"label": "Revenue", "value": "$4,396"}, ...]},
        {"type": "heading", "text": "Revenue by region"},
        {"type": "text", "text": "Paragraphs, blank-line separated; **bold**, `code`, [links](https://...)"},
        {"type": "list", "items": ["one finding", "another"]},
        {"type": "chart", "path": "revenue.svg", "caption": "Figure 1. ..."},   (or a .png)
        {"type": "table", "path": "by_region.csv", "max_rows": 50, "caption": "..."},
        {"type": "table", "columns": ["a", "b"], "rows": [[1, 2]]},
        {"type": "note", "text": "Caveats, data sources, method."}
      ]
    }

Relative paths are read from the spec's folder. Standard library only.
"""

from __future__ import annotations

import argparse
import base64
import csv
import json
import re
import sys
from datetime import date
from html import escape
from pathlib import Path
from typing import Any

STYLE = """
body{margin:0;background:#f6f7f9;color:#1f2328;
  font:16px/1.55 system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif}
main{max-width:960px;margin:0 auto;padding:32px 24px 48px}
h1{font-size:28px;margin:0 0 4px}h2{font-size:20px;margin:32px 0 8px}
.subtitle{color:#57606a;margin:0 0 24px}
.metrics{display:flex;flex-wrap:wrap;gap:12px;margin:16px 0}
.metric{background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:12px 16px;min-width:140px}
.metric .value{font-size:24px;font-weight:600}.metric .label{color:#57606a;font-size:13px}
figure{background:#fff;border:1px solid #d0d7de;border-radius:8px;margin:16px 0;padding:12px;overflow-x:auto}
figure svg,figure img{max-width:100%;height:auto;display:block;margin:0 auto}
figcaption{color:#57606a;font-size:14px;margin-top:8px}
table{border-collapse:collapse;background:#fff;font-size:14px;width:100%}
th,td{border:1px solid #d0d7de;padding:6px 10px;text-align:left}th{background:#f0f3f6}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.note{border-left:4px solid #d0d7de;padding:4px 12px;color:#57606a}
code{background:#eef1f4;padding:1px 4px;border-radius:4px}
footer{color:#8c959f;font-size:13px;margin-top:40px}
"""
_NUMBER = re.compile(r"[+-]?[$€£¥]?\d[\d,]*(\.\d+)?%?")


def inline(text: str) -> str:
    """Escaped text with **bold**, `code` and [links](http...) made into HTML."""
    html = escape(text)
    html = re.sub(r"`([^`]+)`", r"<code>\1</code>", html)
    html = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", html)
    return re.sub(r"\[([^\]]+)\]\((https?://[^)\s]+)\)", r'<a href="\2">\1</a>', html)


def paragraphs(text: str) -> str:
    return "\n".join(f"<p>{inline(p.strip())}</p>" for p in re.split(r"\n\s*\n", text) if p.strip())


def svg_of(path: Path) -> str:
    svg = path.read_text(encoding="utf-8")
    start = svg.find("<svg")
    if start < 0:
        raise ValueError(f"{path} is not an SVG file")
    svg = svg[start:]
    if re.search(r"<script|\son\w+\s*=", svg, re.IGNORECASE):
        raise ValueError(f"{path} holds scripts; only plain SVG charts can be inlined")
    return svg


def table_html(columns: list[str], rows: list[list[Any]], max_rows: int) -> str:
    head = "".join(f"<th>{escape(str(c))}</th>" for c in columns)
    body = []
    for row in rows[:max_rows]:
        cells = []
        for value in row:
            text = "" if value is None else str(value)
            kind = ' class="num"' if _NUMBER.fullmatch(text.strip()) else ""
            cells.append(f"<td{kind}>{escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    more = (
        f"<p class='note'>{len(rows) - max_rows:,} more rows not shown.</p>" if len(rows) > max_rows else ""
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{more}"


def block_html(block: dict[str, Any], base: Path) -> str:
    kind = block.get("type")
    caption = f"<figcaption>{inline(str(block['caption']))}</figcaption>" if block.get("caption") else ""
    if kind == "heading":
        return f"<h2>{inline(str(block['text']))}</h2>"
    if kind == "text":
        return paragraphs(str(block["text"]))
    if kind == "note":
        return f"<div class='note'>{paragraphs(str(block['text']))}</div>"
    if kind == "list":
        return "<ul>" + "".join(f"<li>{inline(str(i))}</li>" for i in block["items"]) + "</ul>"
    if kind == "metrics":
        items = "".join(
            f"<div class='metric'><div class='value'>{escape(str(m['value']))}</div>"
            f"<div class='label'>{escape(str(m['label']))}</div></div>"
            for m in block["items"]
        )
        return f"<div class='metrics'>{items}</div>"
    if kind == "chart":
        path = base / block["path"]
        if path.suffix.lower() in (".png", ".jpg", ".jpeg"):  # a raster chart (plot.py), inlined
            mime = "image/png" if path.suffix.lower() == ".png" else "image/jpeg"
            data = base64.b64encode(path.read_bytes()).decode("ascii")
            alt = escape(block.get("caption") or path.stem, quote=True)
            return f'<figure><img src="data:{mime};base64,{data}" alt="{alt}">{caption}</figure>'
        return f"<figure>{svg_of(path)}{caption}</figure>"
    if kind == "table":
        if "path" in block:
            with (base / block["path"]).open(newline="", encoding="utf-8-sig") as handle:
                table = [r for r in csv.reader(handle) if r]
            columns, rows = (table[0], table[1:]) if table else ([], [])
        else:
            columns, rows = block["columns"], block["rows"]
        return f"<figure>{table_html(columns, rows, int(block.get('max_rows', 50)))}{caption}</figure>"
    raise ValueError(f"unknown block type {kind!r} (heading, text, note, list, metrics, chart, table)")


def build(spec: dict[str, Any], base: Path) -> str:
    title = str(spec.get("title") or "Report")
    parts = [f"<h1>{inline(title)}</h1>"]
    if spec.get("subtitle"):
        parts.append(f"<p class='subtitle'>{inline(str(spec['subtitle']))}</p>")
    for number, block in enumerate(spec.get("blocks") or [], 1):
        try:
            parts.append(block_html(block, base))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"block {number} ({block.get('type')!r}) is missing {exc}") from None
    generated = spec.get("footer") or f"Generated {date.today().isoformat()}."
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>{escape(title)}</title><style>{STYLE}</style></head>\n<body><main>\n"
        + "\n".join(parts)
        + f"\n<footer>{inline(str(generated))}</footer>\n</main></body></html>\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("spec", help="the report's JSON spec")
    parser.add_argument("--out", required=True, help="the .html file to write")
    args = parser.parse_args(argv)
    spec_path = Path(args.spec)
    try:
        spec = json.loads(spec_path.read_text(encoding="utf-8"))
        if not isinstance(spec, dict):
            raise ValueError("the spec must be a JSON object with a title and blocks")
        html = build(spec, spec_path.parent)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    print(f"wrote {out}: {len(spec.get('blocks') or [])} blocks, {len(html):,} characters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
