#!/usr/bin/env python3
"""Write a report as a Word document (.docx, python-docx) and/or a PDF (matplotlib), from one spec.

    python3 make_document.py SPEC.json --out report.docx [--out report.pdf]

The spec:

    {
      "title": "Market scan: heat pumps",
      "subtitle": "Prepared for the board, May 2025",          (optional)
      "author": "Antler",                                       (optional)
      "blocks": [
        {"type": "heading", "text": "Summary", "level": 1},     (level 1-3)
        {"type": "text", "text": "Paragraphs, blank-line separated, with **bold** words."},
        {"type": "list", "items": ["one", "two"], "ordered": false},
        {"type": "table", "columns": ["Market", "Share"], "rows": [["DE", "31%"]], "caption": "..."},
        {"type": "table", "csv": "shares.csv", "max_rows": 30},
        {"type": "image", "path": "chart.png", "caption": "Figure 1. ...", "width": 6},   (inches)
        {"type": "note", "text": "Sources and caveats."},
        {"type": "page_break"}
      ]
    }

Paths are relative to the spec's folder. Both formats come from the same blocks, so they say the
same thing; the PDF is laid out simply (A4, one column). Prints what each file holds.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

BLOCKS = ("heading", "text", "list", "table", "image", "note", "page_break")


def table_of(block: dict[str, Any], base: Path) -> tuple[list[str], list[list[str]]]:
    if "csv" in block:
        with (base / block["csv"]).open(newline="", encoding="utf-8-sig") as handle:
            rows = list(csv.reader(handle))
        if not rows:
            raise ValueError(f"{block['csv']}: empty")
        return rows[0], rows[1 : 1 + int(block.get("max_rows", 50))]
    columns = [str(c) for c in block.get("columns", [])]
    if not columns:
        raise ValueError("a table block needs columns and rows, or csv")
    return columns, [[str(v) for v in row] for row in block.get("rows", [])]


def paragraphs(text: str) -> list[str]:
    return [p.strip() for p in re.split(r"\n\s*\n", str(text)) if p.strip()]


def runs(text: str) -> list[tuple[str, bool]]:
    """`**bold**` split out: (text, bold) pieces."""
    parts = re.split(r"\*\*(.+?)\*\*", text)
    return [(part, i % 2 == 1) for i, part in enumerate(parts) if part]


def check(spec: dict[str, Any]) -> list[dict[str, Any]]:
    blocks = spec.get("blocks")
    if not isinstance(blocks, list):
        raise ValueError('the spec needs a "blocks" list')
    for i, block in enumerate(blocks, start=1):
        if not isinstance(block, dict) or block.get("type") not in BLOCKS:
            raise ValueError(f"block {i}: type must be one of {', '.join(BLOCKS)}")
    return blocks


# ----------------------------------------------------------------------------------------- docx


def write_docx(spec: dict[str, Any], base: Path, out: Path) -> str:
    from datetime import datetime

    from docx import Document
    from docx.shared import Inches

    doc = Document()
    doc.add_heading(str(spec.get("title", "Report")), 0)
    if spec.get("subtitle"):
        doc.add_paragraph(str(spec["subtitle"]), style="Subtitle")
    counts = {"headings": 0, "paragraphs": 0, "tables": 0, "images": 0}
    for block in check(spec):
        kind = block["type"]
        if kind == "heading":
            doc.add_heading(str(block["text"]), min(3, max(1, int(block.get("level", 1)))))
            counts["headings"] += 1
        elif kind in ("text", "note"):
            for text in paragraphs(block["text"]):
                paragraph = doc.add_paragraph(style="Intense Quote" if kind == "note" else None)
                for piece, bold in runs(text):
                    paragraph.add_run(piece).bold = bold
                counts["paragraphs"] += 1
        elif kind == "list":
            style = "List Number" if block.get("ordered") else "List Bullet"
            for item in block.get("items", []):
                doc.add_paragraph(str(item), style=style)
        elif kind == "table":
            columns, rows = table_of(block, base)
            table = doc.add_table(rows=1, cols=len(columns), style="Light Grid Accent 1")
            for cell, name in zip(table.rows[0].cells, columns, strict=True):
                cell.text = name
            for row in rows:
                cells = table.add_row().cells
                for c in range(len(columns)):
                    cells[c].text = row[c] if c < len(row) else ""
            if block.get("caption"):
                doc.add_paragraph(str(block["caption"]), style="Caption")
            counts["tables"] += 1
        elif kind == "image":
            doc.add_picture(str(base / block["path"]), width=Inches(float(block.get("width", 6))))
            if block.get("caption"):
                doc.add_paragraph(str(block["caption"]), style="Caption")
            counts["images"] += 1
        elif kind == "page_break":
            doc.add_page_break()
    props = doc.core_properties
    props.title = str(spec.get("title", ""))
    props.author = props.last_modified_by = str(spec.get("author", "Antler"))
    props.created = props.modified = datetime(2000, 1, 1)  # the same spec gives the same document
    props.revision = 1
    out.parent.mkdir(parents=True, exist_ok=True)
    doc.save(out)
    return ", ".join(f"{n} {k}" for k, n in counts.items())


# ------------------------------------------------------------------------------------------ pdf

PAGE_W, PAGE_H, MARGIN = 8.27, 11.69, 0.9  # A4, inches
BODY_W = PAGE_W - 2 * MARGIN


class PdfWriter:
    """A top-down cursor over A4 pages drawn with matplotlib's text and images."""

    def __init__(self, pdf: Any, plt: Any) -> None:
        self.pdf, self.plt = pdf, plt
        self.fig: Any = None
        self.y = 0.0
        self.pages = 0

    def new_page(self) -> None:
        if self.fig is not None:
            self.pdf.savefig(self.fig)
            self.plt.close(self.fig)
        self.fig = self.plt.figure(figsize=(PAGE_W, PAGE_H))
        self.y = MARGIN
        self.pages += 1

    def room(self, height: float) -> None:
        if self.fig is None or self.y + height > PAGE_H - MARGIN:
            self.new_page()

    def text(
        self,
        text: str,
        size: float = 10.5,
        *,
        bold: bool = False,
        italic: bool = False,
        indent: float = 0.0,
        gap: float = 0.12,
        color: str = "#1f2328",
    ) -> None:
        chars = max(20, int((BODY_W - indent) * 72 / (size * 0.52)))
        line_h = size * 1.45 / 72
        for line in textwrap.wrap(text.replace("**", ""), chars) or [""]:
            self.room(line_h)
            self.fig.text(
                (MARGIN + indent) / PAGE_W,
                1 - (self.y + line_h * 0.8) / PAGE_H,
                line,
                fontsize=size,
                fontweight="bold" if bold else "normal",
                fontstyle="italic" if italic else "normal",
                color=color,
                va="baseline",
            )
            self.y += line_h
        self.y += gap

    def table(self, columns: list[str], rows: list[list[str]], size: float = 9.0) -> None:
        col_w = BODY_W / len(columns)
        chars = max(4, int(col_w * 72 / (size * 0.55)))
        line_h = size * 1.6 / 72
        for r, row in enumerate([columns, *rows]):
            self.room(line_h)
            top = 1 - self.y / PAGE_H
            for c in range(len(columns)):
                cell = row[c] if c < len(row) else ""
                self.fig.text(
                    (MARGIN + c * col_w) / PAGE_W,
                    top - line_h * 0.75 / PAGE_H,
                    textwrap.shorten(cell, chars, placeholder="…") if len(cell) > chars else cell,
                    fontsize=size,
                    fontweight="bold" if r == 0 else "normal",
                    va="baseline",
                )
            self.y += line_h
            line = self.plt.Line2D(
                [MARGIN / PAGE_W, (PAGE_W - MARGIN) / PAGE_W],
                [1 - self.y / PAGE_H] * 2,
                color="#888888" if r == 0 else "#dddddd",
                linewidth=0.6,
            )
            self.fig.add_artist(line)
        self.y += 0.15

    def image(self, path: Path, width: float) -> None:
        picture = self.plt.imread(str(path))
        width = min(width, BODY_W)
        height = width * picture.shape[0] / picture.shape[1]
        self.room(height)
        axes = self.fig.add_axes(
            (
                (MARGIN + (BODY_W - width) / 2) / PAGE_W,
                1 - (self.y + height) / PAGE_H,
                width / PAGE_W,
                height / PAGE_H,
            )
        )
        axes.imshow(picture)
        axes.axis("off")
        self.y += height + 0.1

    def close(self) -> None:
        if self.fig is not None:
            self.pdf.savefig(self.fig)
            self.plt.close(self.fig)


def write_pdf(spec: dict[str, Any], base: Path, out: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams.update({"pdf.fonttype": 42, "font.family": "DejaVu Sans"})
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_pdf import PdfPages

    out.parent.mkdir(parents=True, exist_ok=True)
    metadata = {
        "Title": str(spec.get("title", "")),
        "Author": str(spec.get("author", "Antler")),
        "CreationDate": None,
        "ModDate": None,
    }
    with PdfPages(out, metadata=metadata) as pdf:
        page = PdfWriter(pdf, plt)
        page.new_page()
        page.text(str(spec.get("title", "Report")), 22, bold=True, gap=0.05)
        if spec.get("subtitle"):
            page.text(str(spec["subtitle"]), 12, color="#57606a", gap=0.25)
        for block in check(spec):
            kind = block["type"]
            if kind == "heading":
                level = min(3, max(1, int(block.get("level", 1))))
                page.room(0.6)
                page.y += 0.1
                page.text(str(block["text"]), {1: 16, 2: 13.5, 3: 12}[level], bold=True)
            elif kind in ("text", "note"):
                for text in paragraphs(block["text"]):
                    page.text(
                        text, 10.5, italic=kind == "note", color="#57606a" if kind == "note" else "#1f2328"
                    )
            elif kind == "list":
                for n, item in enumerate(block.get("items", []), start=1):
                    page.text(f"{n}." if block.get("ordered") else "•", 10.5, gap=0)
                    page.y -= 10.5 * 1.45 / 72
                    page.text(str(item), 10.5, indent=0.3, gap=0.04)
            elif kind == "table":
                page.table(*table_of(block, base))
                if block.get("caption"):
                    page.text(str(block["caption"]), 9, italic=True)
            elif kind == "image":
                page.image(base / block["path"], float(block.get("width", 6)))
                if block.get("caption"):
                    page.text(str(block["caption"]), 9, italic=True)
            elif kind == "page_break":
                page.new_page()
        page.close()
    return f"{page.pages} pages"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("spec")
    parser.add_argument(
        "--out", action="append", required=True, help="a .docx or .pdf path (repeat for both)"
    )
    args = parser.parse_args()
    outs = [Path(o) for o in args.out]
    wrong = [str(o) for o in outs if o.suffix.lower() not in (".docx", ".pdf")]
    if wrong:
        print(f"error: --out must end in .docx or .pdf: {', '.join(wrong)}", file=sys.stderr)
        return 2
    try:
        spec = json.loads(Path(args.spec).read_text(encoding="utf-8"))
        base = Path(args.spec).resolve().parent
        for out in outs:
            made = (
                write_docx(spec, base, out) if out.suffix.lower() == ".docx" else write_pdf(spec, base, out)
            )
            print(f"wrote {out}: {made}")
    except ModuleNotFoundError as exc:
        print(f"error: {exc.name} is not installed here (the sandbox toolbox has it)", file=sys.stderr)
        return 1
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
