"""The outline of an uploaded document: its headings, pages, slides and sheets, with line numbers.

DeerFlow's `utils/file_outline.py` behaviour: the model gets each uploaded document's structure
so it can read the right part with `read_file(start_line, end_line)` instead of the whole file.
The text outlined is the document's Markdown: the gateway's markitdown sibling (`report.md`
beside `report.pdf`) or the upload itself when it is Markdown or text. Recognised:

- Markdown headings (`# Title`; markitdown writes a workbook's sheets as `## Sheet1`);
- bold structural headings (`**ITEM 1. BUSINESS**`) and split bold ones (`**3.2** **Attention**`),
  as PDF converters write them;
- a slide deck's slides (markitdown's `<!-- Slide number: 3 -->`);
- a PDF's pages (the form feed pdfminer ends each page with), each with its first line.

Everything is bounded: at most `MAX_ENTRIES` entries a document, each title cut to
`MAX_TITLE` characters, and text that could pass for the prompt's own tags is defused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_ENTRIES = 50
MAX_TITLE = 120
PREVIEW_LINES = 5

_BOLD_HEADING = re.compile(
    r"^\*\*((?:ITEM|PART|SECTION|SCHEDULE|EXHIBIT|APPENDIX|ANNEX|CHAPTER)\b[A-Z0-9 .,\-]*)\*\*\s*$"
)
# `**1** **Introduction**`: a section number, then up to three bold words that are not all figures
# (a table's `**2023** **2022**` is no heading). `[^*]+` keeps it linear on hostile text.
_SPLIT_BOLD = re.compile(
    r"^\*\*[\dA-Z][\d.]*\*\*\s+\*\*(?!\d[\d\s.,\-–—/:()%]*\*\*)[^*]+\*\*(?:\s+\*\*[^*]+\*\*){0,2}\s*$"
)
_SLIDE = re.compile(r"^<!--\s*Slide number:\s*(\d+)\s*-->$")


@dataclass(frozen=True)
class Outline:
    """`entries`: (line, title) with 1-based line numbers of the Markdown; `truncated`: more headings
    than were kept; `preview`: the first lines when the document has no structure to show."""

    entries: tuple[tuple[int, str], ...] = ()
    truncated: bool = False
    preview: tuple[str, ...] = ()

    def lines(self, indent: str = "    ") -> list[str]:
        """The outline as prompt lines (empty when there is nothing to show)."""
        if self.entries:
            shown = [f"{indent}L{line}: {title}" for line, title in self.entries]
            if self.truncated:
                shown.append(
                    f"{indent}... (the first {len(self.entries)} headings; read the file for the rest)"
                )
            return shown
        return [f"{indent}> {text}" for text in self.preview]


def defuse(text: str, limit: int = MAX_TITLE) -> str:
    """One line of a document's text, safe inside the prompt: no tags of ours, no newlines, bounded."""
    flat = " ".join(text.split()).replace("<", "‹").replace(">", "›")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _clean_bold(raw: str) -> str:
    merged = re.sub(r"\*\*\s*\*\*", " ", raw).strip()
    whole = re.fullmatch(r"\*\*(.+?)\*\*", merged, re.DOTALL)
    return whole.group(1).strip() if whole else merged


def _heading(stripped: str) -> str | None:
    if stripped.startswith("#"):
        return _clean_bold(stripped.lstrip("#").strip()) or None
    if bold := _BOLD_HEADING.match(stripped):
        return bold.group(1).strip() or None
    if _SPLIT_BOLD.match(stripped):
        return " ".join(re.findall(r"\*\*([^*]+)\*\*", stripped)) or None
    return None


def outline_of(markdown: str) -> Outline:
    """The outline of a document's Markdown text (see the module's docstring)."""
    entries: list[tuple[int, str]] = []
    preview: list[str] = []
    page, page_pending = 1, "\f" in markdown  # a PDF's text: its first page is a page too
    in_code = False
    for number, line in enumerate(markdown.split("\n"), 1):
        if "\f" in line:
            page += line.count("\f")
            page_pending = True
            line = line.replace("\f", "")
        stripped = line.strip()
        if stripped.startswith("```"):
            in_code = not in_code
            continue
        if not stripped or in_code:
            continue
        if len(preview) < PREVIEW_LINES:
            preview.append(defuse(stripped, 200))
        title: str | None
        if slide := _SLIDE.match(stripped):
            title = f"Slide {slide.group(1)}"
        elif page_pending:
            title = f"Page {page}: {stripped}"
            page_pending = False
        else:
            title = _heading(stripped)
        if title:
            if len(entries) == MAX_ENTRIES:
                return Outline(tuple(entries), truncated=True)
            entries.append((number, defuse(title)))
    if entries:
        return Outline(tuple(entries))
    return Outline(preview=tuple(preview))
