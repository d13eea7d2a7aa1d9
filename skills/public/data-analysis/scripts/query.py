#!/usr/bin/env python3
"""Ask tables questions in SQL (SQLite): each file becomes a table with typed columns.

    python3 query.py FILE [FILE ...] --sql "SELECT ..." [--out result.csv] [--show N]
    python3 query.py FILE --schema
    python3 query.py --db work.sqlite FILE ...      # keep the tables for later queries
    python3 query.py --db work.sqlite --sql "..."   # query them again without reloading

A table is named after its file ('Sales 2024.csv' -> sales_2024), or `name=FILE` names it.
Columns keep their header names (quote odd ones in SQL: "Unit Price"). A column whose values
are all whole numbers is INTEGER, all numbers REAL ('1,234.5' counts), otherwise TEXT; missing
values (empty, NA, n/a, null, ...) are NULL. Dates stay text, so SQLite's date functions work
on ISO dates: strftime('%Y-%m', date).
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sqlite3
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tabular import as_bool, as_number, is_missing, kind_of, read_table

SQL_TYPES = {"integer": "INTEGER", "number": "REAL", "boolean": "INTEGER"}


def table_name(stem: str) -> str:
    name = re.sub(r"[^0-9a-zA-Z_]+", "_", stem).strip("_").lower() or "data"
    return f"t_{name}" if name[0].isdigit() else name


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def load(db: sqlite3.Connection, spec: str) -> str:
    """Load one file into a table (replacing a table of that name); says what was loaded."""
    name, sep, path = spec.partition("=")
    if not sep or not name.isidentifier():
        name, path = "", spec
    table = read_table(path)
    name = name or table_name(table.name)
    kinds = [kind_of([row[i] for row in table.rows]) for i in range(len(table.columns))]
    columns = ", ".join(
        f"{quote(c)} {SQL_TYPES.get(k, 'TEXT')}" for c, k in zip(table.columns, kinds, strict=True)
    )
    db.execute(f"DROP TABLE IF EXISTS {quote(name)}")
    db.execute(f"CREATE TABLE {quote(name)} ({columns})")
    marks = ", ".join("?" for _ in table.columns)
    db.executemany(
        f"INSERT INTO {quote(name)} VALUES ({marks})",
        ([convert(v, k) for v, k in zip(row, kinds, strict=True)] for row in table.rows),
    )
    db.commit()
    typed = ", ".join(f"{c} {SQL_TYPES.get(k, 'TEXT')}" for c, k in zip(table.columns, kinds, strict=True))
    return f"table {name}: {len(table.rows):,} rows ({typed})"


def convert(value: Any, kind: str) -> Any:
    if is_missing(value):
        return None
    if kind in ("integer", "number"):
        return as_number(value)
    if kind == "boolean":
        return int(bool(as_bool(value)))
    return value if isinstance(value, str) else json.dumps(value) if isinstance(value, list) else str(value)


def show(cursor: sqlite3.Cursor, limit: int) -> tuple[list[str], list[tuple[Any, ...]], str]:
    """The result's header and rows, and a Markdown table of its first `limit` rows."""
    header = [d[0] for d in cursor.description or []]
    rows = cursor.fetchall()
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for row in rows[:limit]:
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    if len(rows) > limit:
        lines.append(f"\n({len(rows) - limit:,} more rows not shown; {len(rows):,} in all)")
    else:
        lines.append(f"\n({len(rows):,} rows)")
    return header, rows, "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"{value:.6g}" if abs(value) < 1e15 else str(value)
    return str(value).replace("|", "\\|").replace("\n", " ")


def write(path: Path, header: list[str], rows: list[tuple[Any, ...]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".json":
        records = [dict(zip(header, row, strict=True)) for row in rows]
        path.write_text(json.dumps(records, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        return
    with path.open("w", newline="", encoding="utf-8") as handle:
        out = csv.writer(handle)
        out.writerow(header)
        out.writerows(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("files", nargs="*", help="FILE or name=FILE")
    parser.add_argument("--sql", help="the query (several statements: separate with ';', the last is shown)")
    parser.add_argument("--db", help="an SQLite file to keep the tables in (default: in memory)")
    parser.add_argument("--schema", action="store_true", help="print each table's columns and types")
    parser.add_argument("--out", help="write the whole result to this .csv or .json file")
    parser.add_argument("--show", type=int, default=50, help="rows printed (default 50)")
    args = parser.parse_args(argv)
    if not args.files and not args.db:
        parser.error("give at least one FILE, or --db with tables loaded earlier")
    db = sqlite3.connect(args.db or ":memory:")
    try:
        for spec in args.files:
            print(load(db, spec))
        if args.schema:
            for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"):
                cols = db.execute(f"PRAGMA table_info({quote(name)})").fetchall()
                print(f"{name}(" + ", ".join(f"{c[1]} {c[2]}" for c in cols) + ")")
        if args.sql:
            statements = [s for s in _split(args.sql) if s.strip()]
            for statement in statements[:-1]:
                db.execute(statement)
            header, rows, text = show(db.execute(statements[-1]), args.show)
            db.commit()
            print(text)
            if args.out:
                write(Path(args.out), header, rows)
                print(f"wrote {len(rows):,} rows to {args.out}")
    except (OSError, ValueError, sqlite3.Error) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        db.close()
    return 0


def _split(sql: str) -> list[str]:
    """Statements of a script, split where SQLite says a statement is complete."""
    statements, current = [], ""
    for line in sql.splitlines(keepends=True):
        for piece in re.split(r"(?<=;)", line):
            current += piece
            if current.strip() and sqlite3.complete_statement(current):
                statements.append(current.strip().rstrip(";"))
                current = ""
    if current.strip():
        statements.append(current.strip())
    return statements


if __name__ == "__main__":
    sys.exit(main())
