"""What a fetched body is (HTML, text or something else) and HTML turned into readable Markdown."""

from __future__ import annotations

import io
import re
from typing import Literal
from urllib.parse import urljoin

Kind = Literal["html", "text", "binary"]

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/ld+json",
        "application/x-ndjson",
        "application/xml",
        "application/rss+xml",
        "application/atom+xml",
        "application/javascript",
        "application/x-javascript",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/x-sh",
        "application/sql",
    }
)
# Parts of a page that are not its content: code, styling, embeds, navigation, controls.
_NOISE = (
    "script",
    "style",
    "noscript",
    "template",
    "svg",
    "canvas",
    "iframe",
    "object",
    "embed",
    "nav",
    "aside",
    "footer",
    "button",
    "select",
    "textarea",
    "input",
    "link",
    "meta",
)
_HIDDEN = '[hidden], [aria-hidden="true"], [role="navigation"], [role="banner"], [role="contentinfo"]'


def media_type(content_type: str | None) -> str:
    """`text/html; charset=utf-8` -> `text/html`."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def kind_of(mime: str) -> Kind | None:
    """What a media type is; None when it says nothing (missing, or a generic binary type)."""
    if mime in _HTML_TYPES:
        return "html"
    if mime.startswith("text/") or mime in _TEXT_TYPES or mime.endswith(("+json", "+xml")):
        return "text"
    if not mime or mime in ("application/octet-stream", "binary/octet-stream"):
        return None
    return "binary"


def sniff(head: bytes) -> Kind:
    """A body's kind from its first bytes, for a response without a useful content type."""
    start = head[:1024].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if start.startswith((b"<!doctype html", b"<html")):
        return "html"
    if b"\x00" in head[:4096]:
        return "binary"
    try:
        head[:4096].decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head[:4096]) - 3:  # not just a character cut at the end
            return "binary"
    return "text"


def describe(url: str, mime: str, size: int | None) -> str:
    """The answer for a URL that is not a page: what it is, not its bytes."""
    if mime == "application/pdf":
        what = "a PDF document"
    elif mime.startswith("image/"):
        what = "an image"
    elif mime.startswith("audio/"):
        what = "an audio file"
    elif mime.startswith("video/"):
        what = "a video"
    else:
        what = "a binary file"
    details = mime or "no content type"
    if size is not None:
        details += f", {_human_size(size)}"
    text = f"{url} is {what} ({details}), not a web page or text, so its content is not shown."
    if mime.startswith("image/"):
        text += " To show it to the user, give them this URL."
    else:
        text += " Look for an HTML or text version of it instead."
    return text


def _human_size(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def html_to_markdown(raw: bytes, charset: str | None, url: str) -> tuple[str, str]:
    """`(title, markdown)` of a page's main content. Blocking (parsing): run it in a thread.

    Scripts, styles, navigation, asides, footers and hidden parts are dropped; the
    `<main>` element (or a lone `<article>`) is kept when the page marks one; links
    and images get absolute URLs so they can be followed.
    """
    from bs4 import BeautifulSoup  # imported here: markitdown loads slowly, and only this needs it
    from markitdown import MarkItDown, StreamInfo

    soup = BeautifulSoup(raw, "html.parser", from_encoding=charset)
    title = " ".join(soup.title.get_text().split()) if soup.title else ""
    for element in [*soup(_NOISE), *soup.select(_HIDDEN)]:
        if not element.decomposed:
            element.decompose()
    for tag, attribute in (("a", "href"), ("img", "src")):
        for element in soup.find_all(tag):
            value = element.get(attribute)
            if isinstance(value, str) and value and not value.startswith(("#", "data:", "javascript:")):
                element[attribute] = urljoin(url, value)
    articles = soup("article")
    content = soup.find("main") or (articles[0] if len(articles) == 1 else None) or soup.body or soup
    result = MarkItDown(enable_plugins=False).convert_stream(
        io.BytesIO(str(content).encode("utf-8")),
        stream_info=StreamInfo(mimetype="text/html", extension=".html", charset="utf-8"),
    )
    markdown = re.sub(r"\n{3,}", "\n\n", result.markdown).strip()
    return title, markdown
