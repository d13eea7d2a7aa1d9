#!/usr/bin/env python3
"""Profile a table before analysing it: its columns, their kinds, missing values and summaries.

    python3 profile_data.py FILE [--head N] [--max-rows N] [--json] [--out PATH]

FILE is .csv, .tsv, .txt (delimiter detected), .json (a list of records) or .jsonl.
Prints Markdown (or JSON with --json); --out also writes it to a file.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from datetime import datetime, time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tabular import Table, as_bool, as_date, as_number, is_missing, kind_of, read_table

TOP = 5
MAX_TRACKED = 100_000  # distinct values counted per column; beyond it "unique" is a lower bound


def profile(table: Table) -> dict[str, Any]:
    columns = []
    for index, name in enumerate(table.columns):
        values = [row[index] for row in table.rows]
        columns.append(profile_column(name, values))
    distinct_rows = {json.dumps(row, default=str) for row in table.rows}
    return {
        "name": table.name,
        "rows": len(table.rows),
        "columns": len(table.columns),
        "duplicate_rows": len(table.rows) - len(distinct_rows),
        "notes": table.notes,
        "profile": columns,
    }


def profile_column(name: str, values: list[Any]) -> dict[str, Any]:
    present = [v for v in values if not is_missing(v)]
    kind = kind_of(values)
    counts: Counter[str] = Counter()
    for value in present:
        key = str(value).strip()
        if key in counts or len(counts) < MAX_TRACKED:
            counts[key] += 1
    result: dict[str, Any] = {
        "column": name,
        "kind": kind,
        "missing": len(values) - len(present),
        "missing_pct": round(100 * (len(values) - len(present)) / len(values), 1) if values else 0.0,
        "unique": len(counts),
    }
    if kind in ("integer", "number"):
        numbers = [as_number(v) for v in present]
        result["summary"] = numeric_summary([n for n in numbers if n is not None])
    elif kind == "date":
        dates = sorted(d for d in (as_date(v) for v in present) if d is not None)
        result["summary"] = {"min": show_date(dates[0]), "max": show_date(dates[-1])}
    elif kind == "boolean":
        flags = Counter(as_bool(v) for v in present)
        result["summary"] = {"true": flags[True], "false": flags[False]}
    elif kind == "text":
        lengths = [len(str(v)) for v in present]
        result["summary"] = {
            "top": counts.most_common(TOP),
            "min_length": min(lengths),
            "max_length": max(lengths),
        }
        numbers = [as_number(v) for v in present]
        numeric = sum(n is not None for n in numbers)
        if numeric >= 0.8 * len(present):
            odd = [str(v) for v, n in zip(present, numbers, strict=True) if n is None]
            result["summary"]["mostly_numeric"] = {"not_numbers": len(odd), "examples": odd[:3]}
    return result


def show_date(moment: datetime) -> str:
    return moment.date().isoformat() if moment.time() == time() else moment.isoformat(sep=" ")


def numeric_summary(numbers: list[float]) -> dict[str, float]:
    summary = {
        "count": len(numbers),
        "sum": sum(numbers),
        "min": min(numbers),
        "max": max(numbers),
        "mean": statistics.fmean(numbers),
        "median": statistics.median(numbers),
    }
    if len(numbers) > 1:
        q1, _, q3 = statistics.quantiles(numbers, n=4, method="inclusive")
        summary.update({"stdev": statistics.stdev(numbers), "p25": q1, "p75": q3})
    return summary


def fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.6g}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def describe(column: dict[str, Any]) -> str:
    summary = column.get("summary") or {}
    kind = column["kind"]
    if kind in ("integer", "number"):
        keys = ("min", "p25", "median", "mean", "p75", "max", "stdev", "sum")
        return " · ".join(f"{k} {fmt(summary[k])}" for k in keys if k in summary)
    if kind == "date":
        return f"{summary['min']} → {summary['max']}"
    if kind == "boolean":
        return f"true {summary['true']}, false {summary['false']}"
    if kind == "text":
        top = ", ".join(f"{cell(v[:40])} ({n})" for v, n in summary["top"])
        text = f"top: {top}; length {summary['min_length']}–{summary['max_length']}"
        if "mostly_numeric" in summary:
            odd = summary["mostly_numeric"]
            text += f"; mostly numbers, but {odd['not_numbers']} are not, e.g. {odd['examples']}"
        return text
    return "no values"


def markdown(result: dict[str, Any], table: Table, head: int) -> str:
    lines = [
        f"# Profile of {result['name']}",
        "",
        f"{result['rows']:,} rows × {result['columns']} columns; "
        f"{result['duplicate_rows']:,} duplicate rows; read with {', '.join(result['notes'])}.",
        "",
        "| column | kind | missing | unique | summary |",
        "| --- | --- | --- | --- | --- |",
    ]
    for c in result["profile"]:
        lines.append(
            f"| {cell(c['column'])} | {c['kind']} | {c['missing']:,} ({c['missing_pct']}%) "
            f"| {c['unique']:,} | {describe(c)} |"
        )
    if head and table.rows:
        lines += ["", f"First {min(head, len(table.rows))} rows:", ""]
        lines.append("| " + " | ".join(cell(c) for c in table.columns) + " |")
        lines.append("|" + " --- |" * len(table.columns))
        for row in table.rows[:head]:
            lines.append("| " + " | ".join(cell("" if v is None else str(v)) for v in row) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("file")
    parser.add_argument("--head", type=int, default=5, help="rows shown as a sample (0: none)")
    parser.add_argument("--max-rows", type=int, default=None, help="read only this many rows")
    parser.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    parser.add_argument("--out", help="also write the profile to this file")
    args = parser.parse_args(argv)
    try:
        table = read_table(args.file, args.max_rows)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    result = profile(table)
    text = (
        json.dumps(result, indent=2, default=str) + "\n" if args.json else markdown(result, table, args.head)
    )
    sys.stdout.write(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
