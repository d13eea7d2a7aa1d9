#!/usr/bin/env python3
"""Build a PowerPoint deck (.pptx) from a JSON outline, with python-pptx (the sandbox toolbox).

    python3 make_deck.py OUTLINE.json --out /mnt/user-data/outputs/deck.pptx

The outline:

    {
      "title": "Q3 review",                       (the file's title property)
      "accent": "#2F6FB3",                        (optional; titles and the accent bar)
      "widescreen": true,                         (16:9, the default; false for 4:3)
      "slides": [
        {"layout": "title", "title": "Q3 review", "subtitle": "Sales team, October"},
        {"layout": "section", "title": "Where we stand"},
        {"layout": "bullets", "title": "Highlights",
         "bullets": ["Revenue +12%", ["EU +20%", "US +4%"], "Churn flat"]},
        {"layout": "two-column", "title": "Before / after", "left": ["..."], "right": ["..."]},
        {"layout": "image", "title": "Revenue by month", "image": "revenue.png", "caption": "Source: CRM"},
        {"layout": "chart", "title": "Revenue", "chart": {"type": "bar", "categories": ["Q1", "Q2"],
                                                           "series": {"2024": [10, 12]}}},
        {"layout": "table", "title": "Top accounts", "columns": ["Account", "ARR"],
         "rows": [["Acme", "1.2M"]]},
        {"layout": "quote", "text": "The best quarter yet.", "by": "CFO"}
      ]
    }

Every slide may have "notes" (speaker notes). Bullets nest one level with a list. Images and
table CSVs (`"csv": "file.csv"` instead of columns/rows) are relative to the outline's folder.
Chart types: bar, column, line, pie. Prints one line per slide.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Any

LAYOUTS = {
    "title": 0,
    "bullets": 1,
    "section": 2,
    "two-column": 3,
    "image": 5,
    "chart": 5,
    "table": 5,
    "quote": 6,
}


def rgb(value: str):  # type: ignore[no-untyped-def]
    from pptx.dml.color import RGBColor

    text = value.lstrip("#")
    if len(text) != 6:
        raise ValueError(f"colour {value!r}: use #RRGGBB")
    return RGBColor.from_string(text.upper())


def fill_bullets(frame, items: list[Any], size: int) -> int:  # type: ignore[no-untyped-def]
    from pptx.util import Pt

    frame.clear()
    count, first = 0, True
    for item in items:
        for text, level in [(item, 0)] if not isinstance(item, list) else [(sub, 1) for sub in item]:
            paragraph = frame.paragraphs[0] if first else frame.add_paragraph()
            first = False
            paragraph.text = str(text)
            paragraph.level = level
            paragraph.font.size = Pt(size - 4 * level)
            count += 1
    return count


def widen(slide, factor: float) -> None:  # type: ignore[no-untyped-def]
    """The default template's placeholders are laid out for 4:3; stretch them across 16:9."""
    for shape in slide.placeholders:
        shape.left = int(shape.left * factor)
        shape.width = int(shape.width * factor)


def add_slide(prs, spec: dict[str, Any], base: Path, accent, factor: float) -> str:  # type: ignore[no-untyped-def]
    from pptx.chart.data import CategoryChartData
    from pptx.enum.chart import XL_CHART_TYPE, XL_LEGEND_POSITION
    from pptx.enum.shapes import MSO_SHAPE
    from pptx.util import Emu, Inches, Pt

    layout = spec.get("layout", "bullets")
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r} ({', '.join(LAYOUTS)})")
    slide = prs.slides.add_slide(prs.slide_layouts[LAYOUTS[layout]])
    widen(slide, factor)
    width, height = prs.slide_width, prs.slide_height
    title = spec.get("title", "")
    if slide.shapes.title is not None:
        slide.shapes.title.text = str(title)
        for paragraph in slide.shapes.title.text_frame.paragraphs:
            paragraph.font.color.rgb = accent
            paragraph.font.bold = True
    if layout != "title":
        bar = slide.shapes.add_shape(MSO_SHAPE.RECTANGLE, 0, 0, width, Inches(0.12))
        bar.fill.solid()
        bar.fill.fore_color.rgb = accent
        bar.line.fill.background()
    body_top, margin = Inches(1.6), Inches(0.6)
    body = (margin, body_top, Emu(width - 2 * margin), Emu(height - body_top - Inches(0.5)))
    detail = ""
    if layout == "title":
        slide.placeholders[1].text = str(spec.get("subtitle", ""))
    elif layout == "section":
        slide.placeholders[1].text = str(spec.get("subtitle", ""))
    elif layout == "bullets":
        detail = f"{fill_bullets(slide.placeholders[1].text_frame, spec.get('bullets', []), 24)} bullets"
    elif layout == "two-column":
        left = fill_bullets(slide.placeholders[1].text_frame, spec.get("left", []), 20)
        right = fill_bullets(slide.placeholders[2].text_frame, spec.get("right", []), 20)
        detail = f"{left}+{right} bullets"
    elif layout == "image":
        path = base / spec["image"]
        picture = slide.shapes.add_picture(str(path), body[0], body[1], height=Emu(body[3] - Inches(0.4)))
        if picture.width > body[2]:  # too wide: fit the width instead, keeping the aspect ratio
            ratio = body[2] / picture.width
            picture.width, picture.height = int(body[2]), int(picture.height * ratio)
        picture.left = int((width - picture.width) / 2)
        if spec.get("caption"):
            box = slide.shapes.add_textbox(margin, Emu(height - Inches(0.6)), body[2], Inches(0.4))
            box.text_frame.text = str(spec["caption"])
            box.text_frame.paragraphs[0].font.size = Pt(12)
        detail = f"image {path.name}"
    elif layout == "chart":
        chart_spec = spec["chart"]
        data = CategoryChartData()
        data.categories = [str(c) for c in chart_spec["categories"]]
        for name, values in chart_spec["series"].items():
            data.add_series(str(name), [float(v) if v is not None else None for v in values])
        kind = {
            "bar": XL_CHART_TYPE.COLUMN_CLUSTERED,
            "column": XL_CHART_TYPE.COLUMN_CLUSTERED,
            "hbar": XL_CHART_TYPE.BAR_CLUSTERED,
            "line": XL_CHART_TYPE.LINE_MARKERS,
            "pie": XL_CHART_TYPE.PIE,
        }[chart_spec.get("type", "bar")]
        chart = slide.shapes.add_chart(kind, *body, data).chart
        chart.has_legend = len(chart_spec["series"]) > 1 or kind == XL_CHART_TYPE.PIE
        if chart.has_legend:
            chart.legend.position = XL_LEGEND_POSITION.BOTTOM
            chart.legend.include_in_layout = False
        if kind != XL_CHART_TYPE.PIE:
            chart.plots[0].series[0].format.fill.solid()
            chart.plots[0].series[0].format.fill.fore_color.rgb = accent
        detail = f"{chart_spec.get('type', 'bar')} chart, {len(data.categories)} categories"
    elif layout == "table":
        columns, rows = spec.get("columns"), spec.get("rows")
        if "csv" in spec:
            with (base / spec["csv"]).open(newline="", encoding="utf-8-sig") as handle:
                found = list(csv.reader(handle))
            columns, rows = found[0], found[1 : 1 + int(spec.get("max_rows", 12))]
        if not columns:
            raise ValueError(f"table slide {title!r}: give columns and rows, or csv")
        rows = rows or []
        shape = slide.shapes.add_table(
            len(rows) + 1, len(columns), body[0], body[1], body[2], Inches(0.4) * (len(rows) + 1)
        )
        table = shape.table
        for c, name in enumerate(columns):
            table.cell(0, c).text = str(name)
            table.cell(0, c).fill.solid()
            table.cell(0, c).fill.fore_color.rgb = accent
        for r, row in enumerate(rows, start=1):
            for c in range(len(columns)):
                table.cell(r, c).text = str(row[c]) if c < len(row) else ""
                table.cell(r, c).text_frame.paragraphs[0].font.size = Pt(14)
        detail = f"table {len(rows)}×{len(columns)}"
    elif layout == "quote":
        box = slide.shapes.add_textbox(Inches(1), Inches(2), Emu(width - Inches(2)), Inches(3))
        frame = box.text_frame
        frame.word_wrap = True
        frame.text = f"“{spec.get('text', '')}”"
        frame.paragraphs[0].font.size = Pt(36)
        frame.paragraphs[0].font.italic = True
        if spec.get("by"):
            by = frame.add_paragraph()
            by.text = f"— {spec['by']}"
            by.font.size = Pt(20)
            by.font.color.rgb = accent
        detail = "quote"
    if spec.get("notes"):
        slide.notes_slide.notes_text_frame.text = str(spec["notes"])
    return f"{layout}: {title or spec.get('text', '')!s}" + (f" ({detail})" if detail else "")


def build(outline: dict[str, Any], base: Path, out: Path) -> list[str]:
    from datetime import datetime

    from pptx import Presentation
    from pptx.util import Inches

    slides = outline.get("slides")
    if not isinstance(slides, list) or not slides:
        raise ValueError('the outline needs a non-empty "slides" list')
    prs = Presentation()
    factor = 1.0
    if outline.get("widescreen", True):
        factor = 13.333 / 10
        prs.slide_width, prs.slide_height = Inches(13.333), Inches(7.5)
    accent = rgb(outline.get("accent", "#2F6FB3"))
    lines = [f"slide {i}: {add_slide(prs, s, base, accent, factor)}" for i, s in enumerate(slides, start=1)]
    props = prs.core_properties
    props.title = str(outline.get("title") or slides[0].get("title", ""))
    # Fixed dates, so the same outline always gives the same file.
    props.created = props.modified = datetime(2000, 1, 1)
    props.last_modified_by = props.author = "Antler"
    props.revision = 1
    out.parent.mkdir(parents=True, exist_ok=True)
    prs.save(out)
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("outline")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    out = Path(args.out)
    if out.suffix.lower() != ".pptx":
        print("error: --out must end in .pptx", file=sys.stderr)
        return 2
    try:
        outline = json.loads(Path(args.outline).read_text(encoding="utf-8"))
        lines = build(outline, Path(args.outline).resolve().parent, out)
    except ModuleNotFoundError as exc:
        print(
            f"error: {exc.name} is not installed here (the sandbox toolbox has python-pptx)", file=sys.stderr
        )
        return 1
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    print(f"wrote {out}: {len(lines)} slides")
    return 0


if __name__ == "__main__":
    sys.exit(main())
