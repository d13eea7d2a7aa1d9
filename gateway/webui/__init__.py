"""Antler's own web UI: static files served by the gateway at `/`, a pure client of its public API.

The page (`/`) and its files (`/ui/...`) are plain files with no build step:
vanilla JavaScript modules plus three vendored libraries (marked renders
Markdown, DOMPurify sanitizes it, highlight.js colours code blocks; see
`static/vendor/VENDORED.md`). They hold
no data, so they are served without a token; everything the page shows comes
from `/api`, where the caller's token (or session) is checked as for any
other client.

`WebUI` is an ASGI middleware placed outside the gateway's others: it answers
`GET`/`HEAD` of `/` and `/ui/...` and passes every other request through, so it
can never shadow `/api`, `/docs` or `/health`.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from starlette.exceptions import HTTPException
from starlette.responses import FileResponse, PlainTextResponse
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["STATIC_DIR", "WebUI"]

STATIC_DIR = Path(__file__).resolve().parent / "static"
UI_PREFIX = "/ui/"

# Model output is sanitized before it reaches the page; this policy is the second line: no inline
# script or handler runs even if something slipped through, and nothing is loaded from elsewhere but
# pictures (Markdown images in answers).
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob: https:; "
    "frame-src 'self' blob:; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'self'"
)
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


class WebUI:
    """Serve the UI's page at `/` and its files under `/ui/`; pass everything else to `app`."""

    def __init__(self, app: ASGIApp, directory: Path = STATIC_DIR) -> None:
        self.app = app
        self.index = directory / "index.html"
        self.files = StaticFiles(directory=directory)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path != "/" and not path.startswith(UI_PREFIX):
            await self.app(scope, receive, send)
            return
        if scope["method"] not in ("GET", "HEAD"):
            await PlainTextResponse("Method Not Allowed", 405, headers={"Allow": "GET, HEAD"})(
                scope, receive, send
            )
            return

        async def with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    *message.get("headers", []),
                    *((k.lower().encode(), v.encode()) for k, v in HEADERS.items()),
                    (b"cache-control", b"no-cache"),  # revalidated (ETag): an upgrade shows at once
                ]
            await send(message)

        if path == "/":
            await FileResponse(self.index, media_type="text/html")(scope, receive, with_headers)
            return
        inner = {**scope, "path": path[len(UI_PREFIX) - 1 :], "root_path": ""}
        try:
            await self.files(inner, receive, with_headers)
        except HTTPException as exc:  # outside the app, nothing else turns StaticFiles' refusals into answers
            await PlainTextResponse(exc.detail, exc.status_code)(scope, receive, send)
