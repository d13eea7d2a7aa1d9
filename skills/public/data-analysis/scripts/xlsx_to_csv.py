#!/usr/bin/env python3
"""Excel workbooks (.xlsx) to CSV with the standard library alone (an .xlsx is zipped XML).

    python3 xlsx_to_csv.py BOOK.xlsx --list                 # the sheets and their sizes
    python3 xlsx_to_csv.py BOOK.xlsx [--sheet NAME] [--out FILE.csv]
    python3 xlsx_to_csv.py BOOK.xlsx --all --out-dir DIR    # every sheet, DIR/<sheet>.csv

Cell values are written as Excel stores them: numbers, text, TRUE/FALSE, and dates (cells with a
date format) as ISO dates. Formulas give their last computed value. Old .xls files are not read:
ask the user to save as .xlsx or CSV.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
import zipfile
from datetime import datetime, timedelta
from pathlib import Path, PurePosixPath
from xml.etree import ElementTree

NS = {
    "m": "http://schemas.openxmlformats.org/spreadsheetml/2006/main",
    "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
    "rel": "http://schemas.openxmlformats.org/package/2006/relationships",
}
_BUILTIN_DATE_FORMATS = {*range(14, 23), 45, 46, 47}
_EPOCH = datetime(1899, 12, 30)  # Excel's day 0 (with its 1900 leap-year bug accounted for)


class Workbook:
    def __init__(self, path: str) -> None:
        try:
            self.zip = zipfile.ZipFile(path)
        except zipfile.BadZipFile:
            raise ValueError(f"{path} is not an .xlsx file (old .xls files cannot be read)") from None
        self.strings = self._shared_strings()
        self.date_styles = self._date_styles()
        self.sheets = self._sheets()  # (name, path in the zip)

    def _xml(self, name: str) -> ElementTree.Element | None:
        try:
            return ElementTree.fromstring(self.zip.read(name))
        except KeyError:
            return None

    def _shared_strings(self) -> list[str]:
        root = self._xml("xl/sharedStrings.xml")
        if root is None:
            return []
        return ["".join(t.text or "" for t in si.iter(f"{{{NS['m']}}}t")) for si in root.findall("m:si", NS)]

    def _date_styles(self) -> set[int]:
        root = self._xml("xl/styles.xml")
        if root is None:
            return set()
        custom = {}
        for fmt in root.findall("m:numFmts/m:numFmt", NS):
            code = re.sub(r'"[^"]*"|\[[^\]]*\]|\\.', "", fmt.get("formatCode", ""))
            custom[int(fmt.get("numFmtId", "0"))] = bool(re.search(r"[ymdhs]", code, re.IGNORECASE))
        dates = set()
        for index, xf in enumerate(root.findall("m:cellXfs/m:xf", NS)):
            number_format = int(xf.get("numFmtId", "0"))
            if number_format in _BUILTIN_DATE_FORMATS or custom.get(number_format):
                dates.add(index)
        return dates

    def _sheets(self) -> list[tuple[str, str]]:
        book = self._xml("xl/workbook.xml")
        rels = self._xml("xl/_rels/workbook.xml.rels")
        if book is None or rels is None:
            raise ValueError("the workbook has no sheet list (not an .xlsx file?)")
        targets = {r.get("Id"): r.get("Target", "") for r in rels.findall("rel:Relationship", NS)}
        found = []
        for sheet in book.findall("m:sheets/m:sheet", NS):
            target = targets.get(sheet.get(f"{{{NS['r']}}}id"), "")
            path = target.lstrip("/") if target.startswith("/") else str(PurePosixPath("xl", target))
            found.append((sheet.get("name", "?"), path))
        return found

    def rows(self, sheet_path: str) -> list[list[str]]:
        root = self._xml(sheet_path)
        if root is None:
            raise ValueError(f"missing sheet data {sheet_path}")
        table: list[list[str]] = []
        for row in root.iter(f"{{{NS['m']}}}row"):
            cells: dict[int, str] = {}
            for position, c in enumerate(row.findall("m:c", NS)):
                column = _column_index(c.get("r", "")) if c.get("r") else position
                cells[column] = self._value(c)
            number = int(row.get("r", len(table) + 1))
            while len(table) < number - 1:
                table.append([])  # empty rows Excel did not store
            width = max(cells) + 1 if cells else 0
            table.append([cells.get(i, "") for i in range(width)])
        width = max((len(r) for r in table), default=0)
        while table and not any(table[-1]):
            table.pop()
        return [r + [""] * (width - len(r)) for r in table]

    def _value(self, c: ElementTree.Element) -> str:
        kind = c.get("t", "n")
        if kind == "inlineStr":
            return "".join(t.text or "" for t in c.iter(f"{{{NS['m']}}}t"))
        v = c.find("m:v", NS)
        text = v.text if v is not None and v.text is not None else ""
        if kind == "s" and text:
            return self.strings[int(text)]
        if kind == "b":
            return "TRUE" if text == "1" else "FALSE"
        if kind == "n" and text and int(c.get("s", "0")) in self.date_styles:
            moment = _EPOCH + timedelta(days=float(text))
            return moment.date().isoformat() if moment.time() == datetime.min.time() else moment.isoformat()
        if kind == "n" and text.endswith(".0"):
            return text[:-2]
        return text


def _column_index(reference: str) -> int:
    index = 0
    for char in reference:
        if not char.isalpha():
            break
        index = index * 26 + (ord(char.upper()) - 64)
    return index - 1


def write_csv(rows: list[list[str]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("book")
    parser.add_argument("--list", action="store_true", help="list the sheets")
    parser.add_argument("--sheet", help="the sheet to convert (default: the first)")
    parser.add_argument("--out", help="the CSV file (default: BOOK's name with .csv)")
    parser.add_argument("--all", action="store_true", help="convert every sheet into --out-dir")
    parser.add_argument("--out-dir", default=".", help="where --all writes (default: here)")
    args = parser.parse_args(argv)
    try:
        book = Workbook(args.book)
        if args.list:
            for name, path in book.sheets:
                rows = book.rows(path)
                print(f"{name}: {len(rows)} rows × {len(rows[0]) if rows else 0} columns")
            return 0
        if args.all:
            for name, path in book.sheets:
                target = Path(args.out_dir) / (re.sub(r"[^\w.-]+", "_", name) + ".csv")
                write_csv(book.rows(path), target)
                print(f"wrote sheet {name!r} to {target}")
            return 0
        chosen = [s for s in book.sheets if args.sheet in (None, s[0])]
        if not chosen:
            names = ", ".join(repr(n) for n, _ in book.sheets)
            raise ValueError(f"no sheet {args.sheet!r}; the sheets are {names}")
        name, path = chosen[0]
        rows = book.rows(path)
        target = Path(args.out or Path(args.book).with_suffix(".csv").name)
        write_csv(rows, target)
        print(f"wrote sheet {name!r} ({len(rows)} rows) to {target}")
    except (OSError, ValueError, KeyError, ElementTree.ParseError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
