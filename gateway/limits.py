"""Request body limits, enforced while the body arrives (ASGI middleware).

FastAPI reads and parses a body (JSON, or multipart into temporary files)
before the endpoint runs, so a size check in the endpoint comes after the
whole body was read: a 300 MB chunked upload was read to the end before its
413. This middleware answers 413 before reading anything when `Content-Length`
is over the limit, and stops reading a body (chunked or not) as soon as it
passes the limit: nothing past it is buffered, spooled or parsed. The HTTP
server drops whatever the client still sends after the 413 instead of closing
the connection at once, so a client that sends its whole body before reading
(most do) gets the 413 rather than a reset.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fastapi import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

if TYPE_CHECKING:
    from gateway.deps import Gateway

MB = 1024 * 1024


@dataclass(frozen=True)
class BodyLimit:
    """At most `max_bytes` for requests whose method is `method` and path matches `path` (whole)."""

    method: str
    path: re.Pattern[str]
    max_bytes: int
    message: str

    def applies_to(self, scope: Scope) -> bool:
        return bool(scope["method"] == self.method and self.path.fullmatch(scope["path"]))


class BodyTooLarge(HTTPException):
    def __init__(self, message: str) -> None:
        super().__init__(413, message)


class BodyLimitMiddleware:
    """The first matching `BodyLimit`, else `default_bytes` (with `default_message`)."""

    def __init__(
        self, app: ASGIApp, *, limits: list[BodyLimit], default_bytes: int, default_message: str
    ) -> None:
        self.app = app
        self.limits = limits
        self.default = BodyLimit("*", re.compile(".*"), default_bytes, default_message)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = next((lim for lim in self.limits if lim.applies_to(scope)), self.default)
        declared = _content_length(scope)
        if declared is not None and declared > limit.max_bytes:
            # Before a byte of the body is read.
            await JSONResponse({"detail": limit.message}, status_code=413)(scope, receive, send)
            return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit.max_bytes:
                    # Raised inside the body parser; the app's HTTPException handler answers it.
                    raise BodyTooLarge(limit.message)
            return message

        await self.app(scope, limited_receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the server refuses such a request before it gets here
    return None


MULTIPART_OVERHEAD = 64 * 1024  # part headers and boundaries around the files


def body_limits(gw: Gateway) -> dict[str, Any]:
    """Uploads may carry `gateway.max_upload_mb` (all files together), skill archives their limit, and
    any other body what one message on our NATS server can (it becomes one)."""
    from gateway.skill_install import MAX_SKILL_ARCHIVE  # installing skills owns its limit

    upload_mb = gw.config.gateway.max_upload_mb
    payload = gw.bus.nc.max_payload
    return {
        "limits": [
            BodyLimit(
                "POST",
                re.compile(r"/api/threads/[^/]+/uploads"),
                upload_mb * MB + MULTIPART_OVERHEAD,
                f"an upload may carry at most {upload_mb} MB in all (gateway.max_upload_mb)",
            ),
            BodyLimit(
                "POST",
                re.compile(r"/api/skills/install"),
                MAX_SKILL_ARCHIVE + MULTIPART_OVERHEAD,
                f"a .skill archive may be at most {MAX_SKILL_ARCHIVE // MB} MB",
            ),
        ],
        "default_bytes": payload,
        "default_message": (
            f"a request body may be at most {payload / MB:g} MB (the NATS server's max_payload)"
        ),
    }
