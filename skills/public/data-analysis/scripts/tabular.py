"""Reading tables (CSV, TSV, JSON, JSON Lines) and telling what kind of values a column holds.

Standard library only: it runs with the sandbox's plain python3. Used by profile_data.py and query.py.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

MISSING = {"", "na", "n/a", "nan", "null", "none", "nil", "-", "--", "?"}
TRUE = {"true", "yes", "y", "t"}
FALSE = {"false", "no", "n", "f"}
_INT = re.compile(r"[+-]?\d+")
_THOUSANDS = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d+)?")
_DATE_FORMATS = ("%Y-%m-%d", "%Y/%m/%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M")


@dataclass
class Table:
    name: str
    columns: list[str]
    rows: list[list[Any]]  # cells as read: str from CSV; str, number, bool or None from JSON
    notes: list[str] = field(default_factory=list)  # how the file was read (delimiter, encoding, ...)


def read_table(path: str | Path, max_rows: int | None = None) -> Table:
    """The table in a .csv/.tsv/.txt, .json or .jsonl/.ndjson file.

    Raises:
        ValueError: the file holds no table this reader understands (the message says why).
    """
    path = Path(path)
    try:
        return _read(path, max_rows)
    except csv.Error as exc:
        raise ValueError(f"{path.name}: not readable as CSV: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path.name}: not valid JSON: {exc}") from None


def _read(path: Path, max_rows: int | None) -> Table:
    text, encoding = _decode(path.read_bytes())
    notes = [f"encoding {encoding}"]
    suffix = path.suffix.lower()
    if suffix in (".json", ".jsonl", ".ndjson"):
        records = _json_records(text, suffix != ".json")
        columns: list[str] = []
        seen: set[str] = set()
        flat = [_flatten(r) for r in records[:max_rows] if isinstance(r, dict)]
        if not flat:
            raise ValueError(f"{path.name}: expected a list of JSON objects (records)")
        for record in flat:
            for key in record:
                if key not in seen:
                    seen.add(key)
                    columns.append(key)
        rows = [[r.get(c) for c in columns] for r in flat]
        return Table(path.stem, columns, rows, notes)
    dialect = _sniff(text, suffix)
    notes.append(f"delimiter {dialect.delimiter!r}")
    reader = csv.reader(io.StringIO(text, newline=""), dialect)
    header = next(reader, None)
    if not header:
        raise ValueError(f"{path.name}: the file is empty")
    columns = unique_names(header)
    rows = []
    for row in reader:
        if not any(cell.strip() for cell in row):
            continue  # blank lines
        if len(row) < len(columns):
            row = row + [""] * (len(columns) - len(row))
        elif len(row) > len(columns):
            notes.append(f"row {len(rows) + 2} has {len(row)} cells, more than the header's {len(columns)}")
            row = row[: len(columns)]
        rows.append(row)
        if max_rows is not None and len(rows) >= max_rows:
            notes.append(f"only the first {max_rows} rows were read")
            break
    return Table(path.stem, columns, rows, notes)


def _decode(data: bytes) -> tuple[str, str]:
    try:
        return data.decode("utf-8-sig"), "utf-8"
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace"), "cp1252 (not valid UTF-8)"


def _sniff(text: str, suffix: str) -> Any:
    if suffix == ".tsv":
        return csv.excel_tab
    sample = text[:20000]
    try:
        return csv.Sniffer().sniff(sample, delimiters=",;\t|")
    except csv.Error:
        return csv.excel


def _json_records(text: str, lines: bool) -> list[Any]:
    if lines:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    data = json.loads(text)
    if isinstance(data, dict):
        # {"items": [...]}: the one list of records inside; {"a": 1, "b": 2}: one record.
        lists = [v for v in data.values() if isinstance(v, list) and v and isinstance(v[0], dict)]
        if len(lists) == 1:
            return lists[0]
        return [data]
    if isinstance(data, list):
        return data
    raise ValueError("expected a JSON array of objects")


def _flatten(record: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "."))
        elif isinstance(value, list):
            out[name] = json.dumps(value, ensure_ascii=False)
        else:
            out[name] = value
    return out


def unique_names(header: list[str]) -> list[str]:
    """Header cells as column names: stripped, never empty, never repeated."""
    names: list[str] = []
    for index, cell in enumerate(header, 1):
        base = cell.strip() or f"column_{index}"
        name, n = base, 2
        while name in names:
            name, n = f"{base}_{n}", n + 1
        names.append(name)
    return names


def is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() in MISSING)


def as_number(value: Any) -> int | float | None:
    """The number a cell holds ('1,234.5' included), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    text = str(value).strip()
    if _THOUSANDS.fullmatch(text):
        text = text.replace(",", "")
    if _INT.fullmatch(text):
        return int(text)
    try:
        number = float(text)
    except ValueError:
        return None
    return number if number == number and number not in (float("inf"), float("-inf")) else None


def as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    return True if text in TRUE else False if text in FALSE else None


def as_date(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    text = value.strip()
    if len(text) < 8 or not text[:4].isdigit():
        return None
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(text[:19] if "T" in text or " " in text else text, fmt)
        except ValueError:
            continue
    return None


def kind_of(values: list[Any]) -> str:
    """The narrowest kind every present value fits: integer, number, boolean, date or text."""
    present = [v for v in values if not is_missing(v)]
    if not present:
        return "empty"
    if all(isinstance(v, bool) for v in present):
        return "boolean"
    numbers = [as_number(v) for v in present]
    if all(n is not None for n in numbers):
        return "integer" if all(isinstance(n, int) for n in numbers) else "number"
    if all(as_bool(v) is not None for v in present):
        return "boolean"
    if all(as_date(v) is not None for v in present):
        return "date"
    return "text"
