#!/usr/bin/env python3
"""Check a research draft's citations against its source list and write the final report.

    python3 cite_check.py DRAFT.md --sources SOURCES.json --out REPORT.md [--strict]

SOURCES.json is a list of the sources you read, in any order:

    [{"id": "ehpa", "title": "European Heat Pump Market Report 2025", "url": "https://...",
      "publisher": "EHPA", "date": "2025-04-10"}, ...]

The draft cites them as [@ehpa] (several: [@ehpa; @iea]). The report numbers the sources in
the order they are first cited, replaces each citation with its numbers ([1], [1, 3]) and
ends with a "Sources" section listing each cited source once. Standard library only.

Prints the problems it found and exits 1 (nothing written) when a citation names no source or
a source has no URL; sources never cited are listed as a warning (an error with --strict);
paragraphs with numbers but no citation are listed too, as a prompt to cite or soften them.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

CITE = re.compile(r"\[(@[\w.:-]+(?:\s*;\s*@[\w.:-]+)*)\]")


def load_sources(path: Path) -> dict[str, dict[str, str]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list of sources")
    sources: dict[str, dict[str, str]] = {}
    for i, item in enumerate(data, start=1):
        if not isinstance(item, dict) or not item.get("id"):
            raise ValueError(f"{path}: source {i} has no id")
        sources[str(item["id"])] = {k: str(v) for k, v in item.items()}
    return sources


def check(draft: str, sources: dict[str, dict[str, str]]) -> tuple[str, list[str], list[str], int]:
    """The report text, its errors, its warnings and how many sources it cites."""
    order: list[str] = []
    errors: list[str] = []
    for match in CITE.finditer(draft):
        for key in (k.strip().lstrip("@") for k in match.group(1).split(";")):
            if key not in sources:
                errors.append(f"[@{key}] cites no source in the list")
            elif key not in order:
                order.append(key)
    number = {key: n for n, key in enumerate(order, start=1)}

    def replace(match: re.Match[str]) -> str:
        keys = [k.strip().lstrip("@") for k in match.group(1).split(";")]
        found = sorted({number[k] for k in keys if k in number})
        return "[" + ", ".join(map(str, found)) + "]" if found else match.group(0)

    body = CITE.sub(replace, draft).rstrip()
    for key in order:
        if not sources[key].get("url", "").startswith(("http://", "https://")):
            errors.append(f"source {key!r} has no http(s) URL: a reader could not check it")
    warnings = [f"source {key!r} is never cited" for key in sources if key not in number]
    for paragraph in re.split(r"\n\s*\n", draft):
        text = paragraph.strip()
        if text and not text.startswith("#") and re.search(r"\d", text) and not CITE.search(text):
            warnings.append(f"numbers without a citation: {text[:70]!r}")
    lines = [body, "", "## Sources", ""]
    for key in order:
        s = sources[key]
        meta = ", ".join(x for x in (s.get("publisher", ""), s.get("date", "")) if x)
        lines.append(
            f"{number[key]}. {s.get('title', key)}" + (f" — {meta}" if meta else "") + f". <{s['url']}>"
        )
    return "\n".join(lines) + "\n", errors, warnings, len(order)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("draft")
    parser.add_argument("--sources", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--strict", action="store_true", help="uncited sources are errors too")
    args = parser.parse_args()
    try:
        report, errors, warnings, cited = check(
            Path(args.draft).read_text(encoding="utf-8"), load_sources(Path(args.sources))
        )
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.strict:
        errors += [w for w in warnings if w.endswith("never cited")]
    for line in errors:
        print(f"error: {line}")
    for line in warnings:
        print(f"warning: {line}")
    if errors:
        print(f"not written: fix the {len(errors)} error(s) above")
        return 1
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report, encoding="utf-8")
    print(f"wrote {out}: {cited} sources cited, {len(warnings)} warning(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
