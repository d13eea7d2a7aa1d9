#!/usr/bin/env python3
"""Render a newsletter issue from JSON into email-ready HTML (inline styles, table layout, one
file) and a plain-text version, so it can be pasted into any mail tool.

    python3 render_newsletter.py ISSUE.json --out issue.html [--text issue.txt] [--markdown issue.md]

The issue:

    {
      "name": "The Weekly Byte", "issue": "No. 42 · 3 March 2025",
      "accent": "#0B6E4F",
      "intro": "Three things mattered this week...",
      "sections": [
        {"title": "Top story", "items": [
          {"headline": "EU passes the AI Act", "summary": "What changes and when.",
           "url": "https://...", "source": "Reuters", "take": "Why it matters to you: ..."}]},
        {"title": "Quick hits", "items": [{"headline": "...", "url": "https://..."}]}
      ],
      "outro": "Reply to tell us what to cover next.",
      "footer": "You get this because you subscribed at example.org."
    }

Text is escaped; `url`s must be http(s). Standard library only. Prints the sections and links.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from html import escape
from pathlib import Path
from typing import Any

FONT = "font-family:Helvetica,Arial,sans-serif;"


def check(issue: dict[str, Any]) -> None:
    if not issue.get("name") or not isinstance(issue.get("sections"), list) or not issue["sections"]:
        raise ValueError('the issue needs a "name" and a non-empty "sections" list')
    if not re.fullmatch(r"#[0-9A-Fa-f]{6}", issue.get("accent", "#1F4E79")):
        raise ValueError("accent must be #RRGGBB")
    for s, section in enumerate(issue["sections"], start=1):
        if not section.get("title") or not isinstance(section.get("items"), list):
            raise ValueError(f"section {s} needs a title and an items list")
        for i, item in enumerate(section["items"], start=1):
            if not item.get("headline"):
                raise ValueError(f"section {s} item {i} needs a headline")
            url = item.get("url")
            if url is not None and not str(url).startswith(("http://", "https://")):
                raise ValueError(f"section {s} item {i}: url must start with http:// or https://")


def html_of(issue: dict[str, Any]) -> str:
    accent = issue.get("accent", "#1F4E79")
    p = f"{FONT}font-size:16px;line-height:1.55;color:#1f2328;margin:0 0 12px"
    rows = [
        f'<tr><td style="background:{accent};padding:28px 32px">'
        f'<div style="{FONT}font-size:28px;font-weight:bold;color:#ffffff">{escape(issue["name"])}</div>'
        f'<div style="{FONT}font-size:14px;color:#e8f0ee;margin-top:4px">'
        f"{escape(issue.get('issue', ''))}</div>"
        "</td></tr>"
    ]
    if issue.get("intro"):
        rows.append(
            f'<tr><td style="padding:24px 32px 4px"><p style="{p}">{escape(issue["intro"])}</p></td></tr>'
        )
    for section in issue["sections"]:
        parts = [
            f'<h2 style="{FONT}font-size:13px;letter-spacing:1px;text-transform:uppercase;color:{accent};'
            f'margin:0 0 12px;border-bottom:2px solid {accent};padding-bottom:6px">'
            f"{escape(section['title'])}</h2>"
        ]
        for item in section["items"]:
            headline = escape(item["headline"])
            if item.get("url"):
                link = escape(item["url"], quote=True)
                headline = f'<a href="{link}" style="color:#1f2328;text-decoration:none">{headline}</a>'
            parts.append(f'<h3 style="{FONT}font-size:19px;margin:0 0 6px">{headline}</h3>')
            if item.get("summary"):
                parts.append(f'<p style="{p}">{escape(item["summary"])}</p>')
            if item.get("take"):
                parts.append(
                    f'<p style="{p};border-left:3px solid {accent};padding-left:10px;color:#424a53">'
                    f"{escape(item['take'])}</p>"
                )
            if item.get("url"):
                source = escape(item.get("source") or "Read more")
                parts.append(
                    f'<p style="{FONT}font-size:14px;margin:0 0 20px">'
                    f'<a href="{escape(item["url"], quote=True)}" '
                    f'style="color:{accent}">{source} →</a></p>'
                )
        rows.append(f'<tr><td style="padding:20px 32px 4px">{"".join(parts)}</td></tr>')
    if issue.get("outro"):
        rows.append(
            f'<tr><td style="padding:8px 32px 24px"><p style="{p}">{escape(issue["outro"])}</p></td></tr>'
        )
    footer = escape(issue.get("footer", ""))
    rows.append(
        f'<tr><td style="background:#f6f8fa;padding:16px 32px;{FONT}font-size:12px;color:#57606a">'
        f"{footer}</td></tr>"
    )
    title = escape(f"{issue['name']} {issue.get('issue', '')}".strip())
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{title}</title></head>\n"
        '<body style="margin:0;padding:0;background:#eef1f4">'
        '<table role="presentation" width="100%" cellpadding="0" cellspacing="0" style="background:#eef1f4">'
        '<tr><td align="center" style="padding:24px 8px">'
        '<table role="presentation" width="640" cellpadding="0" cellspacing="0" '
        'style="max-width:640px;width:100%;background:#ffffff;border-radius:6px">\n'
        + "\n".join(rows)
        + "\n</table></td></tr></table></body></html>\n"
    )


def text_of(issue: dict[str, Any], markdown: bool) -> str:
    wrap = (lambda s: s) if markdown else (lambda s: textwrap.fill(s, 72))
    lines = [f"# {issue['name']}" if markdown else issue["name"].upper(), issue.get("issue", ""), ""]
    if issue.get("intro"):
        lines += [wrap(issue["intro"]), ""]
    for section in issue["sections"]:
        lines += [f"## {section['title']}" if markdown else f"== {section['title']} ==", ""]
        for item in section["items"]:
            if markdown:
                head = f"[{item['headline']}]({item['url']})" if item.get("url") else item["headline"]
                lines.append(f"### {head}")
            else:
                lines.append(f"* {item['headline']}")
            for key in ("summary", "take"):
                if item.get(key):
                    lines.append(("> " if key == "take" and markdown else "") + wrap(item[key]))
            if item.get("url") and not markdown:
                lines.append(f"  {item.get('source') or 'Link'}: {item['url']}")
            lines.append("")
    for key in ("outro", "footer"):
        if issue.get(key):
            lines += [wrap(issue[key]), ""]
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("issue")
    parser.add_argument("--out", required=True, help="the HTML file")
    parser.add_argument("--text", help="also a plain-text version")
    parser.add_argument("--markdown", help="also a Markdown version")
    args = parser.parse_args()
    try:
        issue = json.loads(Path(args.issue).read_text(encoding="utf-8"))
        check(issue)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    outputs = {args.out: html_of(issue)}
    if args.text:
        outputs[args.text] = text_of(issue, markdown=False)
    if args.markdown:
        outputs[args.markdown] = text_of(issue, markdown=True)
    for path, content in outputs.items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(content, encoding="utf-8")
        print(f"wrote {path}")
    links = sum(1 for s in issue["sections"] for i in s["items"] if i.get("url"))
    items = sum(len(s["items"]) for s in issue["sections"])
    titles = ", ".join(s["title"] for s in issue["sections"])
    print(f"{len(issue['sections'])} sections ({titles}), {items} items, {links} links")
    return 0


if __name__ == "__main__":
    sys.exit(main())
