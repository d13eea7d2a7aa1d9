"""Telegram's text: Markdown from the model rendered as Telegram HTML, and long answers split at
Telegram's 4096 characters (counted in UTF-16 code units, as Telegram counts them)."""

from __future__ import annotations

import html
import re

from channels.delivery.splitting import split_text

LIMIT = 4096


_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)")
_URL = re.compile(r"https?://[^\s<>\[\]()]+")
_KEPT = re.compile("\x00(\\d+)\x00")


def render_html(text: str) -> str:
    """Model Markdown as Telegram HTML: code blocks, inline code, bold, italics, links; the rest escaped.

    Code, links and bare URLs are set aside before emphasis is applied, so a `*` or `_` inside
    them never becomes a tag (a URL stays a working URL)."""
    parts = re.split(r"(```[\s\S]*?```)", text)
    out = []
    for part in parts:
        if part.startswith("```") and part.endswith("```") and len(part) >= 6:
            body = part[3:-3]
            first, _, rest = body.partition("\n")
            code = rest if first.strip().isidentifier() and rest else body
            out.append(f"<pre>{html.escape(code.strip(chr(10)), quote=False)}</pre>")
            continue
        out.append(_inline_html(part))
    return "".join(out)


def _inline_html(part: str) -> str:
    kept: list[str] = []

    def keep(markup: str) -> str:
        kept.append(markup)
        return f"\x00{len(kept) - 1}\x00"

    part = part.replace("\x00", "")
    part = _INLINE_CODE.sub(lambda m: keep(f"<code>{html.escape(m.group(1), quote=False)}</code>"), part)

    def link(match: re.Match[str]) -> str:
        label = _emphasis(html.escape(match.group(1), quote=False))
        return keep(f'<a href="{html.escape(match.group(2))}">{label}</a>')

    part = _LINK.sub(link, part)
    part = _URL.sub(lambda m: keep(html.escape(m.group(0), quote=False)), part)
    escaped = _emphasis(html.escape(part, quote=False))
    return _KEPT.sub(lambda m: kept[int(m.group(1))], escaped)


def _emphasis(escaped: str) -> str:
    escaped = re.sub(r"\*\*([^*\n]+)\*\*", r"<b>\1</b>", escaped)
    return re.sub(r"(?<![\w*])\*([^*\n]+)\*(?![\w*])", r"<i>\1</i>", escaped)


def _utf16_length(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def split_message(text: str, limit: int = LIMIT) -> list[str]:
    """Pieces of at most `limit` UTF-16 units (Telegram's count), cut at paragraph or line ends; a
    code block cut in two is closed and opened again."""
    return split_text(text, limit, measure=_utf16_length)
