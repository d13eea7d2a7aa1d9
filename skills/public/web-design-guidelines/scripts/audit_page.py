#!/usr/bin/env python3
"""Audit HTML files offline against the web interface checklist (references/checklist.md).

    python3 audit_page.py FILE [FILE...] [--out review.md] [--json]

Each finding is one line, `FILE:LINE [severity] rule: what is wrong and how to fix it`, sorted
by file and line. Severities: error (some users cannot use the page: no alt text, an unlabelled
field, a control without a name, zoom disabled), warning (it works, badly: skipped heading
levels, `href="#"` links, `outline: none` without a focus style), note (polish). Reads the files
only; standard library; the same files give the same report. Exit 0 when the files were read
(whatever was found), 2 when one cannot be.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import asdict, dataclass
from html.parser import HTMLParser
from pathlib import Path

FIELDS = {"input", "select", "textarea"}
UNLABELLED_TYPES = {"hidden", "submit", "button", "reset", "image"}
VAGUE_LINKS = {"click here", "here", "read more", "more", "link", "this"}
SEVERITY_ORDER = {"error": 0, "warning": 1, "note": 2}


@dataclass(frozen=True)
class Finding:
    file: str
    line: int
    severity: str
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} [{self.severity}] {self.rule}: {self.message}"


class _Audit(HTMLParser):
    def __init__(self, name: str) -> None:
        super().__init__(convert_charrefs=True)
        self.name = name
        self.findings: list[Finding] = []
        self.label_for: set[str] = set()
        self.fields: list[tuple[int, str, str]] = []  # line, id, description
        self.label_depth = 0
        self.html_lang: bool | None = None
        self.title_text: str | None = None
        self.in_title = False
        self.viewport = False
        self.headings: list[tuple[int, int]] = []
        self.open_named: list[tuple[str, int, dict[str, str], list[str]]] = []  # a/button with their text
        self.styles: list[tuple[int, str]] = []
        self.in_style = False

    def add(self, line: int, severity: str, rule: str, message: str) -> None:
        self.findings.append(Finding(self.name, line, severity, rule, message))

    def handle_starttag(self, tag: str, attrs_list: list[tuple[str, str | None]]) -> None:
        attrs = {k: (v or "") for k, v in attrs_list}
        line = self.getpos()[0]
        if tag == "html":
            self.html_lang = bool(attrs.get("lang", "").strip())
        elif tag == "title":
            self.in_title, self.title_text = True, ""
        elif tag == "style":
            self.in_style = True
        elif tag == "meta" and attrs.get("name", "").lower() == "viewport":
            self.viewport = True
            content = attrs.get("content", "").replace(" ", "").lower()
            if "user-scalable=no" in content or re.search(r"maximum-scale=1(\.0)?(,|$)", content):
                self.add(
                    line,
                    "error",
                    "zoom-disabled",
                    "the viewport forbids zooming; drop user-scalable=no and maximum-scale",
                )
        elif tag == "img":
            if attrs.get("alt", "").strip() and self.open_named:  # an image's alt names its link or button
                self.open_named[-1][3].append(attrs["alt"])
            if "alt" not in attrs:
                self.add(
                    line,
                    "error",
                    "img-alt",
                    f'<img src="{attrs.get("src", "")}"> has no alt: describe '
                    'it, or alt="" when it is decoration',
                )
            if not ("width" in attrs and "height" in attrs):
                self.add(
                    line, "note", "img-size", "<img> without width and height: the layout jumps when it loads"
                )
        elif tag == "label":
            self.label_depth += 1
            if attrs.get("for"):
                self.label_for.add(attrs["for"])
        elif tag in FIELDS:
            kind = attrs.get("type", "text").lower() if tag == "input" else tag
            named = attrs.get("aria-label", "").strip() or attrs.get("aria-labelledby", "").strip()
            if kind not in UNLABELLED_TYPES and not named and not self.label_depth:
                self.fields.append((line, attrs.get("id", ""), f'<{tag} name="{attrs.get("name", "")}">'))
            if kind in ("email", "password", "tel") and "autocomplete" not in attrs:
                self.add(
                    line,
                    "note",
                    "autocomplete",
                    f"a {kind} field without autocomplete: browsers cannot fill it",
                )
            if "onpaste" in attrs:
                self.add(line, "warning", "paste-blocked", "a field that handles paste: never block pasting")
        elif tag in ("a", "button"):
            self.open_named.append((tag, line, attrs, []))
            href = attrs.get("href", "")
            if tag == "a" and (href == "#" or href.lower().startswith("javascript:")):
                self.add(
                    line, "warning", "link-as-button", f'<a href="{href}"> acts as a button: use <button>'
                )
            if tag == "a" and attrs.get("target") == "_blank" and "noopener" not in attrs.get("rel", ""):
                self.add(line, "note", "target-blank", 'target="_blank" without rel="noopener"')
        elif tag in ("div", "span", "li", "img") and "onclick" in attrs:
            if "role" not in attrs or "tabindex" not in attrs:
                self.add(
                    line,
                    "error",
                    "click-without-role",
                    f"<{tag} onclick> cannot be reached by keyboard: use <button>, or add role and tabindex",
                )
        elif re.fullmatch(r"h[1-6]", tag):
            self.headings.append((line, int(tag[1])))
        elif tag in ("video", "audio") and "autoplay" in attrs and "muted" not in attrs:
            self.add(
                line,
                "warning",
                "autoplay-sound",
                f"<{tag} autoplay> with sound: mute it or let the user start it",
            )
        tabindex = attrs.get("tabindex", "")
        if tabindex.lstrip("-").isdigit() and int(tabindex) > 0:
            self.add(
                line, "warning", "tabindex-positive", f"tabindex={tabindex} reorders the keyboard path; use 0"
            )
        if "style" in attrs:
            self.styles.append((line, attrs["style"]))

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        elif tag == "style":
            self.in_style = False
        elif tag == "label":
            self.label_depth = max(0, self.label_depth - 1)
        elif tag in ("a", "button") and self.open_named and self.open_named[-1][0] == tag:
            _, line, attrs, words = self.open_named.pop()
            text = " ".join(" ".join(words).split())
            if not text and not attrs.get("aria-label", "").strip() and not attrs.get("title", "").strip():
                self.add(
                    line,
                    "error",
                    "control-name",
                    f'<{tag}> with no text or aria-label: screen readers say only "button" or "link"',
                )
            elif tag == "a" and text.lower().strip(".!…") in VAGUE_LINKS:
                self.add(line, "warning", "vague-link", f'link text "{text}" says nothing out of context')

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag in ("a", "button", "label"):
            self.handle_endtag(tag)

    def handle_data(self, data: str) -> None:
        if self.in_title and self.title_text is not None:
            self.title_text += data
        if self.in_style:
            self.styles.append((self.getpos()[0], data))
        if self.open_named:
            self.open_named[-1][3].append(data)

    def finish(self) -> list[Finding]:
        if self.html_lang is not True:
            self.add(1, "error", "html-lang", "<html> has no lang: screen readers guess the language")
        if not (self.title_text or "").strip():
            self.add(1, "error", "page-title", "the page has no <title>")
        if not self.viewport:
            self.add(
                1, "warning", "viewport", 'no <meta name="viewport">: phones show a zoomed-out desktop page'
            )
        for line, field_id, described in self.fields:
            if not field_id or field_id not in self.label_for:
                self.add(
                    line, "error", "field-label", f"{described} has no label: add <label for> or aria-label"
                )
        levels = [level for _, level in self.headings]
        if self.headings and levels.count(1) == 0:
            self.add(self.headings[0][0], "warning", "heading-order", "no <h1>: the page has no main heading")
        for (_, before), (line, level) in zip(self.headings, self.headings[1:], strict=False):
            if level > before + 1:
                self.add(
                    line, "warning", "heading-order", f"<h{level}> follows <h{before}>: a level is skipped"
                )
        css = "\n".join(text for _, text in self.styles)
        focus_style = ":focus-visible" in css
        for line, text in self.styles:
            for match in re.finditer(r"outline\s*:\s*(none|0)\b", text):
                if not focus_style:
                    at = line + text[: match.start()].count("\n")
                    self.add(
                        at,
                        "warning",
                        "focus-hidden",
                        "outline: none with no :focus-visible style: keyboard users lose their place",
                    )
            for match in re.finditer(r"transition\s*:\s*all\b", text):
                at = line + text[: match.start()].count("\n")
                self.add(
                    at, "note", "transition-all", "transition: all animates layout too; name the properties"
                )
        return sorted(self.findings, key=lambda f: (f.file, f.line, SEVERITY_ORDER[f.severity], f.rule))


def audit(path: Path, shown: str) -> list[Finding]:
    parser = _Audit(shown)
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    parser.close()
    return parser.finish()


def markdown(findings: list[Finding], files: list[str]) -> str:
    lines = ["# Web interface review", "", f"Files: {', '.join(files)}", ""]
    for severity in SEVERITY_ORDER:
        chosen = [f for f in findings if f.severity == severity]
        lines.append(f"## {severity.capitalize()}s ({len(chosen)})")
        lines.append("")
        lines += [f"- `{f.file}:{f.line}` **{f.rule}**: {f.message}" for f in chosen] or ["- none"]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("files", nargs="+", type=Path, help="HTML files to audit")
    parser.add_argument("--out", type=Path, help="also write the review as Markdown here")
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    args = parser.parse_args(argv)
    findings: list[Finding] = []
    for path in args.files:
        if not path.is_file():
            print(f"error: {path} is not a file: give the HTML file's path", file=sys.stderr)
            return 2
        findings += audit(path, str(path))
    if args.json:
        print(json.dumps([asdict(f) for f in findings], indent=1))
    else:
        for finding in findings:
            print(finding)
    counts = {s: sum(f.severity == s for f in findings) for s in SEVERITY_ORDER}
    summary = ", ".join(f"{n} {s}s" for s, n in counts.items())
    print(f"{len(args.files)} files checked: {summary}", file=sys.stderr if args.json else sys.stdout)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(markdown(findings, [str(p) for p in args.files]) + "\n", encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr if args.json else sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
