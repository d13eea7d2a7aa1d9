"""Files people attach to a GitHub comment: links in its Markdown, downloaded into the thread's uploads.

GitHub stores an attachment dropped into a comment under `<web>/user-attachments/assets/<id>` (an
image, shown with `![name](url)` or an `<img>` tag) or `<web>/user-attachments/files/<id>/<name>`
(another file, linked as `[name](url)`), where `<web>` is https://github.com (or a GitHub Enterprise
Server's address). Only such links are fetched, never any other URL in a comment. The download
goes with the adapter's token (GitHub's redirect to its storage drops it, as httpx drops credentials
on a redirect to another host); what cannot be fetched (GitHub serves private repositories'
attachments to signed-in browsers only), is over `MAX_BYTES`, or is not in by `BUDGET` (GitHub
waits 10 s for the delivery's answer), stays a link in the text.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from dataclasses import dataclass
from pathlib import PurePosixPath

import httpx

log = logging.getLogger(__name__)

MAX_BYTES = 25 * 1024 * 1024  # GitHub's limit for a file attached to a comment
MAX_FILES = 10
BUDGET = 6.0  # seconds for all of a comment's downloads: GitHub waits 10 s for a delivery's answer
_SUFFIXES = {"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp"}


@dataclass(frozen=True)
class Attachment:
    name: str
    data: bytes
    content_type: str | None


def attachment_links(body: str, web: str) -> list[tuple[str, str]]:
    """(url, name from the link's text, or "") of each attachment linked in `body`, in order."""
    base = re.escape(web.rstrip("/"))
    url = rf"{base}/user-attachments/(?:assets|files)/[^\s)\"'<>]+"
    named = {m.group(2): m.group(1) for m in re.finditer(rf"!?\[([^\]]*)\]\(({url})\)", body)}
    named |= {
        m.group(2): m.group(1) for m in re.finditer(rf"<img[^>]*?alt=\"([^\"]*)\"[^>]*?src=\"({url})\"", body)
    }
    found: list[tuple[str, str]] = []
    for match in re.finditer(url, body):
        if match.group(0) not in (link for link, _ in found):
            found.append((match.group(0), named.get(match.group(0), "")))
    return found[:MAX_FILES]


async def download(
    http: httpx.AsyncClient, links: list[tuple[str, str]], token: str | None
) -> list[Attachment]:
    """The attachments that could be fetched (the others are logged and stay links)."""
    headers = {"Authorization": f"token {token}"} if token else {}
    fetched: list[Attachment] = []
    deadline = time.monotonic() + BUDGET
    for url, text in links:
        left = deadline - time.monotonic()
        if left <= 0:
            log.info("github: attachment %s not fetched in time (it stays a link)", url)
            continue
        try:
            async with (
                asyncio.timeout(left),
                http.stream("GET", url, headers=headers, follow_redirects=True) as response,
            ):
                response.raise_for_status()
                data = b""
                async for chunk in response.aiter_bytes():
                    data += chunk
                    if len(data) > MAX_BYTES:
                        raise ValueError(f"over {MAX_BYTES // (1024 * 1024)} MB")
        except (httpx.HTTPError, ValueError, TimeoutError) as exc:
            log.info("github: attachment %s not fetched (it stays a link): %s", url, exc)
            continue
        content_type = response.headers.get("content-type", "").split(";")[0] or None
        fetched.append(Attachment(_name(url, text, response, content_type), data, content_type))
    return fetched


def _name(url: str, text: str, response: httpx.Response, content_type: str | None) -> str:
    disposition = re.search(r'filename="?([^";]+)"?', response.headers.get("content-disposition", ""))
    for candidate in (disposition.group(1) if disposition else "", text):
        name = PurePosixPath(candidate.strip()).name
        if name and "." in name:
            return name
    last = PurePosixPath(httpx.URL(url).path).name
    if "." in last:
        return last
    return f"{text.strip() or last}{_SUFFIXES.get(content_type or '', '')}".replace("/", "_")
