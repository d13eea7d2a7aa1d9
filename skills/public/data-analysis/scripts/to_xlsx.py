#!/usr/bin/env python3
"""Write tables as a formatted Excel workbook (pandas + openpyxl, from the sandbox toolbox).

    python3 to_xlsx.py DATA [DATA ...] --out report.xlsx
        [--sheet NAME ...] [--group-by COL --sum COL[,COL] [--chart bar|line]] [--title TEXT]

Each DATA (CSV, JSON records, or an .xlsx sheet as FILE.xlsx[:SHEET]) becomes a sheet with a bold,
frozen header row, a filter, number formats and fitted column widths. `--group-by` adds a
"Summary" sheet first: one row per group with the count and the sums of the `--sum` columns
(as Excel formulas over the data sheet, so the numbers stay live when someone edits the data),
and optionally a native Excel chart of the first sum. Prints every sheet written with its size.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def read(spec: str):  # type: ignore[no-untyped-def]
    import pandas as pd

    path, _, sheet = spec.partition(":") if spec.lower().split(":")[0].endswith(".xlsx") else (spec, "", "")
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix == ".csv":
        frame = pd.read_csv(file, thousands=",")
    elif suffix == ".json":
        frame = pd.read_json(file)
    elif suffix in (".xlsx", ".xlsm"):
        frame = pd.read_excel(file, sheet_name=sheet or 0)
    else:
        raise ValueError(f"{spec}: use a .csv, .json or .xlsx file")
    return file.stem, frame


def sheet_name(name: str, taken: set[str]) -> str:
    """A valid, unused Excel sheet name (31 characters, none of []:*?/\\)."""
    clean = "".join("_" if c in "[]:*?/\\" else c for c in name)[:31] or "Sheet"
    found, n = clean, 2
    while found.lower() in taken:
        found = f"{clean[:28]}_{n}"
        n += 1
    taken.add(found.lower())
    return found


def style_sheet(ws, frame) -> None:  # type: ignore[no-untyped-def]
    from openpyxl.styles import Font, PatternFill
    from openpyxl.utils import get_column_letter

    header = Font(bold=True, color="FFFFFF")
    fill = PatternFill("solid", fgColor="2F6FB3")
    for cell in ws[1]:
        cell.font = header
        cell.fill = fill
    ws.freeze_panes = "A2"
    if ws.max_row > 1:
        ws.auto_filter.ref = ws.dimensions
    for index, column in enumerate(frame.columns, start=1):
        letter = get_column_letter(index)
        kind = frame[column].dtype.kind
        if kind == "f":
            for (cell,) in ws.iter_rows(min_row=2, min_col=index, max_col=index):
                cell.number_format = "#,##0.00"
        elif kind in "iu":
            for (cell,) in ws.iter_rows(min_row=2, min_col=index, max_col=index):
                cell.number_format = "#,##0"
        elif kind == "M":
            for (cell,) in ws.iter_rows(min_row=2, min_col=index, max_col=index):
                cell.number_format = "yyyy-mm-dd"
        widest = max([len(str(column)), *(len(str(v)) for v in frame[column].head(500))])
        ws.column_dimensions[letter].width = min(60, widest + 2)


def summary_sheet(wb, data_ws, frame, group: str, sums: list[str], chart: str | None, title: str | None):  # type: ignore[no-untyped-def]
    from openpyxl.chart import BarChart, LineChart, Reference
    from openpyxl.styles import Font
    from openpyxl.utils import get_column_letter

    for column in [group, *sums]:
        if column not in frame.columns:
            raise ValueError(f"no column {column!r}; the columns are {', '.join(map(str, frame.columns))}")
    ws = wb.create_sheet("Summary", 0)
    top = 1
    if title:
        ws.cell(1, 1, title).font = Font(bold=True, size=14)
        top = 3
    headers = [group, "rows", *(f"{s} (sum)" for s in sums)]
    for i, text in enumerate(headers, start=1):
        ws.cell(top, i, text)
    rows = data_ws.max_row
    key = get_column_letter(list(frame.columns).index(group) + 1)
    keys = f"'{data_ws.title}'!${key}$2:${key}${rows}"
    groups = sorted(frame[group].dropna().unique(), key=str)
    for r, value in enumerate(groups, start=top + 1):
        ws.cell(r, 1, value.item() if hasattr(value, "item") else value)
        ws.cell(r, 2, f"=COUNTIF({keys},A{r})")
        for c, column in enumerate(sums, start=3):
            letter = get_column_letter(list(frame.columns).index(column) + 1)
            ws.cell(r, c, f"=SUMIF({keys},A{r},'{data_ws.title}'!${letter}$2:${letter}${rows})")
            ws.cell(r, c).number_format = "#,##0.00"
    last = top + len(groups)
    total = last + 1
    ws.cell(total, 1, "Total").font = Font(bold=True)
    for c in range(2, len(headers) + 1):
        letter = get_column_letter(c)
        ws.cell(total, c, f"=SUM({letter}{top + 1}:{letter}{last})").font = Font(bold=True)
    style_sheet_header(ws, top, len(headers))
    if chart and sums and groups:
        plot = BarChart() if chart == "bar" else LineChart()
        plot.title = f"{sums[0]} by {group}"
        plot.add_data(Reference(ws, min_col=3, min_row=top, max_row=last), titles_from_data=True)
        plot.set_categories(Reference(ws, min_col=1, min_row=top + 1, max_row=last))
        plot.height, plot.width = 8, 16
        ws.add_chart(plot, f"{get_column_letter(len(headers) + 2)}{top}")
    return ws, len(groups)


def style_sheet_header(ws, row: int, width: int) -> None:  # type: ignore[no-untyped-def]
    from openpyxl.styles import Font, PatternFill

    for c in range(1, width + 1):
        cell = ws.cell(row, c)
        cell.font = Font(bold=True, color="FFFFFF")
        cell.fill = PatternFill("solid", fgColor="2F6FB3")
        ws.column_dimensions[cell.column_letter].width = max(12, len(str(cell.value)) + 4)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("data", nargs="+")
    parser.add_argument("--out", required=True)
    parser.add_argument("--sheet", action="append", default=[], help="sheet names, in the order of DATA")
    parser.add_argument("--group-by")
    parser.add_argument("--sum", default="")
    parser.add_argument("--chart", choices=["bar", "line"])
    parser.add_argument("--title")
    args = parser.parse_args()
    if not args.out.lower().endswith(".xlsx"):
        print("error: --out must end in .xlsx", file=sys.stderr)
        return 2
    try:
        import pandas as pd
        from openpyxl import Workbook

        wb = Workbook()
        wb.remove(wb.active)
        taken: set[str] = set()
        frames = []
        for i, spec in enumerate(args.data):
            stem, frame = read(spec)
            name = sheet_name(args.sheet[i] if i < len(args.sheet) else stem, taken)
            ws = wb.create_sheet(name)
            ws.append([str(c) for c in frame.columns])
            for row in frame.itertuples(index=False):
                ws.append([None if pd.isna(v) else (v.item() if hasattr(v, "item") else v) for v in row])
            style_sheet(ws, frame)
            frames.append((ws, frame))
        lines = [
            f"sheet {ws.title}: {len(frame)} rows × {len(frame.columns)} columns" for ws, frame in frames
        ]
        if args.group_by:
            sums = [s.strip() for s in args.sum.split(",") if s.strip()]
            _, groups = summary_sheet(wb, *frames[0], args.group_by, sums, args.chart, args.title)
            lines.insert(
                0,
                f"sheet Summary: {groups} groups of {args.group_by}"
                + (f", {args.chart} chart" if args.chart else ""),
            )
        from datetime import datetime

        # A fixed creation date: the same data gives the same workbook, but for the modification
        # time openpyxl stamps in its properties when it saves.
        wb.properties.created = datetime(2000, 1, 1)
        wb.properties.creator = "Antler"
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        wb.save(out)
    except ModuleNotFoundError as exc:
        print(f"error: {exc.name} is not installed here; write CSV with query.py instead", file=sys.stderr)
        return 1
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {out}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
