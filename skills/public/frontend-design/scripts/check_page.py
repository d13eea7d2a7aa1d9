#!/usr/bin/env python3
"""Check a single-file HTML page before handing it over: it must stand alone and be usable.

    python3 check_page.py PAGE.html [--allow-cdn] [--json]

Problems (exit 1):
  - a resource loaded from elsewhere: <script src>, <link href>, <img src>, CSS url(), @import
    (http(s) or a relative file: a single-file artifact carries everything inline; data: URIs
    are fine; with --allow-cdn, https links are allowed)
  - no <!doctype html>, no <html lang>, no <title>, no <meta name="viewport">
  - an <img> without alt, a form control without a label, a <button> or link without text
  - duplicate id attributes, unclosed or stray tags
Notes (no failure): heading levels that skip (h1 -> h3), no <h1>, no `prefers-reduced-motion`
when there is animation, size over 1 MB.
Standard library only (html.parser). Prints each finding with its line number.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
CSS_URL = re.compile(r"url\(\s*['\"]?(?!data:|#)([^'\")\s]+)|@import\s+(?:url\()?['\"]?([^'\");\s]+)", re.I)


class Checker(HTMLParser):
    def __init__(self, allow_cdn: bool) -> None:
        super().__init__(convert_charrefs=True)
        self.allow_cdn = allow_cdn
        self.problems: list[tuple[int, str]] = []
        self.notes: list[tuple[int, str]] = []
        self.stack: list[tuple[str, int]] = []
        self.ids: dict[str, int] = {}
        self.labels: set[str] = set()
        self.controls: list[tuple[int, str, str | None, bool]] = []
        self.found: dict[str, bool] = {"title": False, "viewport": False, "lang": False, "h1": False}
        self.headings: list[tuple[int, int]] = []
        self.text_of: list[list[str]] = []  # text inside open <button>/<a>/<label>
        self.in_style = False
        self.styles: list[tuple[int, str]] = []

    def external(self, value: str | None) -> bool:
        if not value or value.startswith(("data:", "#", "javascript:", "mailto:", "tel:")):
            return False
        if self.allow_cdn and value.startswith("https://"):
            return False
        return True

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        line = self.getpos()[0]
        a = dict(attrs)
        if tag not in VOID:
            self.stack.append((tag, line))
        if a.get("id"):
            if a["id"] in self.ids:
                self.problems.append((line, f"duplicate id {a['id']!r} (first on line {self.ids[a['id']]})"))
            self.ids.setdefault(str(a["id"]), line)
        if a.get("style"):
            self.styles.append((line, str(a["style"])))
        if tag == "html" and a.get("lang"):
            self.found["lang"] = True
        elif tag == "meta" and (a.get("name") or "").lower() == "viewport":
            self.found["viewport"] = True
        elif tag == "script" and self.external(a.get("src")):
            self.problems.append((line, f"<script src={a['src']!r}> loads code from elsewhere; inline it"))
        elif tag == "link" and self.external(a.get("href")) and (a.get("rel") or "") != "canonical":
            self.problems.append((line, f"<link href={a['href']!r}> loads a file from elsewhere; inline it"))
        elif tag in ("img", "source", "video", "audio", "iframe"):
            if self.external(a.get("src")):
                self.problems.append(
                    (line, f"<{tag} src={a['src']!r}> is not in the page; use a data: URI or SVG")
                )
            if tag == "img" and "alt" not in a:
                self.problems.append((line, '<img> without alt (alt="" for a decorative image)'))
        elif tag in ("input", "select", "textarea") and (a.get("type") or "") not in (
            "hidden",
            "submit",
            "button",
        ):
            labelled = bool(a.get("aria-label") or a.get("aria-labelledby") or a.get("title"))
            inside = any(t == "label" for t, _ in self.stack)
            self.controls.append((line, tag, a.get("id"), labelled or inside))
        elif tag == "label" and a.get("for"):
            self.labels.add(str(a["for"]))
        elif tag == "style":
            self.in_style = True
        elif re.fullmatch(r"h[1-6]", tag):
            self.headings.append((line, int(tag[1])))
            self.found["h1"] |= tag == "h1"
        if tag in ("button", "a"):
            named = bool(a.get("aria-label") or a.get("title"))
            self.text_of.append(["x" if named else ""])

    def handle_endtag(self, tag: str) -> None:
        line = self.getpos()[0]
        if tag in VOID:
            return
        if tag == "style":
            self.in_style = False
        if tag in ("button", "a") and self.text_of:
            if not "".join(self.text_of.pop()).strip():
                self.problems.append(
                    (line, f"<{tag}> with no text or aria-label: a screen reader says nothing")
                )
        if not any(t == tag for t, _ in self.stack):
            self.problems.append((line, f"</{tag}> closes nothing"))
            return
        while self.stack:
            open_tag, opened = self.stack.pop()
            if open_tag == tag:
                break
            if open_tag not in ("p", "li", "td", "th", "tr", "option", "dt", "dd", "thead", "tbody"):
                self.problems.append((opened, f"<{open_tag}> is never closed"))

    def handle_data(self, data: str) -> None:
        if self.in_style:
            self.styles.append((self.getpos()[0], data))
        for texts in self.text_of:
            texts.append(data)
        if self.stack and self.stack[-1][0] == "title" and data.strip():
            self.found["title"] = True

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag in ("button", "a"):
            self.handle_endtag(tag)


def check(text: str, allow_cdn: bool) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    checker = Checker(allow_cdn)
    checker.feed(text)
    checker.close()
    problems, notes = checker.problems, checker.notes
    if not re.match(r"\s*<!doctype html>", text, re.I):
        problems.append((1, "no <!doctype html> first: browsers fall back to quirks mode"))
    for key, message in (
        ("lang", "<html> has no lang attribute"),
        ("title", "no <title>"),
        ("viewport", 'no <meta name="viewport" content="width=device-width, initial-scale=1">'),
    ):
        if not checker.found[key]:
            problems.append((1, message))
    for line, tag, ident, labelled in checker.controls:
        if not labelled and (ident is None or ident not in checker.labels):
            problems.append(
                (line, f"<{tag}> has no label (a <label for>, aria-label, or a wrapping <label>)")
            )
    for tag, line in checker.stack:
        if tag not in ("html", "body", "head", "p", "li"):
            problems.append((line, f"<{tag}> is never closed"))
    for line, css in checker.styles:
        for match in CSS_URL.finditer(css):
            target = match.group(1) or match.group(2)
            if checker.external(target):
                problems.append((line, f"CSS loads {target!r} from elsewhere; inline it (data: URI)"))
    if not checker.found["h1"]:
        notes.append((1, "no <h1>: give the page one main heading"))
    previous = 0
    for line, level in checker.headings:
        if previous and level > previous + 1:
            notes.append((line, f"heading jumps from h{previous} to h{level}"))
        previous = level
    animated = re.search(r"@keyframes|animation\s*:|transition\s*:", text)
    if animated and "prefers-reduced-motion" not in text:
        notes.append((1, "animations without a prefers-reduced-motion rule"))
    if len(text.encode()) > 1_000_000:
        notes.append((1, f"the page is {len(text.encode()) / 1e6:.1f} MB; compress images"))
    return sorted(set(problems)), sorted(set(notes))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("page")
    parser.add_argument("--allow-cdn", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        text = Path(args.page).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    problems, notes = check(text, args.allow_cdn)
    if args.json:
        print(json.dumps({"problems": problems, "notes": notes}))
    else:
        for line, message in problems:
            print(f"problem: line {line}: {message}")
        for line, message in notes:
            print(f"note: line {line}: {message}")
        size = len(text.encode())
        verdict = "ready" if not problems else f"{len(problems)} problem(s) to fix"
        print(f"{args.page}: {size:,} bytes, {verdict}, {len(notes)} note(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
