#!/usr/bin/env python3
"""Extract a paper's text and structure from a PDF (pypdf, from the sandbox toolbox) for review.

    python3 paper_text.py PAPER.pdf --out paper.md [--json]

Writes the full text as Markdown, one `<!-- page N -->` marker per page, and prints an outline:
title (the PDF's metadata, else the first line), page and word counts, the abstract's first
sentence, the sections found (numbered or well-known headings such as Introduction, Method,
Results, Discussion, Conclusion, References, with their pages), how many references the
reference list holds, and the figures, tables and equations mentioned. Scanned PDFs without a
text layer give almost no words; the outline says so.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

KNOWN = (
    "abstract",
    "introduction",
    "background",
    "related work",
    "method",
    "methods",
    "methodology",
    "approach",
    "experiments",
    "experimental setup",
    "evaluation",
    "results",
    "discussion",
    "limitations",
    "conclusion",
    "conclusions",
    "future work",
    "acknowledgements",
    "acknowledgments",
    "references",
    "bibliography",
    "appendix",
)
NUMBERED = re.compile(r"^(\d{1,2}(?:\.\d{1,2})*)\.?\s+([A-Z][^.!?]{2,80})$")


def heading(line: str) -> str | None:
    text = line.strip()
    if not text or len(text) > 90:
        return None
    if text.lower().rstrip(":") in KNOWN:
        return text.rstrip(":")
    match = NUMBERED.match(text)
    if match and not re.search(r"\d{3,}|[=<>]", match.group(2)):
        return f"{match.group(1)} {match.group(2).strip()}"
    return None


def outline(pages: list[str], meta_title: str | None) -> dict[str, Any]:
    text = "\n".join(pages)
    words = len(re.findall(r"\w+", text))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    sections = []
    for number, page in enumerate(pages, start=1):
        for line in page.splitlines():
            found = heading(line)
            if found and all(s["title"] != found for s in sections):
                sections.append({"title": found, "page": number})
    abstract = ""
    match = re.search(
        r"abstract[:.\s]*\n?(.{40,1500}?)(?:\n\s*\n|\n\s*(?:1\.?\s+)?introduction)", text, re.I | re.S
    )
    if match:
        abstract = re.split(r"(?<=[.!?])\s", " ".join(match.group(1).split()), maxsplit=1)[0]
    references = 0
    tail = re.split(r"\n\s*(?:references|bibliography)\s*\n", text, flags=re.I)
    if len(tail) > 1:
        listed = tail[-1]
        references = max(
            len(re.findall(r"^\s*\[\d+\]", listed, re.M)),
            len(re.findall(r"^\s*\d{1,3}\.\s+[A-Z]", listed, re.M)),
            len(re.findall(r"\(\d{4}[a-z]?\)|\b(?:19|20)\d{2}[a-z]?\.", listed)),
        )
    return {
        "title": (meta_title or (lines[0] if lines else "")).strip(),
        "pages": len(pages),
        "words": words,
        "scanned": words < 50 * max(1, len(pages)),
        "abstract_first_sentence": abstract,
        "sections": sections,
        "references": references,
        "figures": sorted({int(n) for n in re.findall(r"\b(?:Figure|Fig\.)\s*(\d+)", text)}),
        "tables": sorted({int(n) for n in re.findall(r"\bTable\s*(\d+)", text)}),
        "equations": len(re.findall(r"\(\d{1,3}\)\s*$", text, re.M)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("pdf")
    parser.add_argument("--out", required=True, help="where the text goes (Markdown)")
    parser.add_argument("--json", action="store_true", help="print the outline as JSON")
    args = parser.parse_args()
    try:
        from pypdf import PdfReader
        from pypdf.errors import PdfReadError

        reader = PdfReader(args.pdf)
        pages = [page.extract_text() or "" for page in reader.pages]
        meta = reader.metadata
        title = meta.title if meta is not None and meta.title else None
    except ModuleNotFoundError:
        print("error: pypdf is not installed here (the sandbox toolbox has it)", file=sys.stderr)
        return 1
    except (OSError, PdfReadError, ValueError) as exc:
        print(f"error: {args.pdf}: not a readable PDF ({exc})", file=sys.stderr)
        return 1
    found = outline(pages, title)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    body = [f"# {found['title']}", ""]
    for number, page in enumerate(pages, start=1):
        body += [f"<!-- page {number} -->", page.strip(), ""]
    out.write_text("\n".join(body), encoding="utf-8")
    if args.json:
        print(json.dumps(found, indent=1))
        return 0
    print(f"wrote {out}")
    print(f"title: {found['title']}")
    print(
        f"{found['pages']} pages, {found['words']:,} words"
        + (" (little text: scanned?)" if found["scanned"] else "")
    )
    if found["abstract_first_sentence"]:
        print(f"abstract: {found['abstract_first_sentence']}")
    print(
        "sections: "
        + ("; ".join(f"{s['title']} (p. {s['page']})" for s in found["sections"]) or "none found")
    )
    print(f"references: {found['references']}")
    print(
        f"figures: {len(found['figures'])}, tables: {len(found['tables'])}, "
        f"numbered equations: {found['equations']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
