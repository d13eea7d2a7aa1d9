"""Administration as audit records: a change that succeeded to MCP servers or skills (`POST`, `PUT`,
`PATCH`, `DELETE` under those routes, answered below 400) is an `admin_change` record: who (`actor`),
the method, the path and the status. Bodies are never written (an MCP server's settings may hold
keys). Role changes and chat links are written by their routes (`role_changed`, `chat_linked`),
sign-ins by the sign-in routes, scheduled tasks' changes by the scheduler (`schedule_changed`, from
every way in)."""

from __future__ import annotations

import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from access.audit import AuditLog

AUDITED = re.compile(r"^/api/(mcp/config|skills(/.*)?)$")
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class AuditChanges:
    """ASGI middleware, inside `RequireToken` (the caller is known)."""

    def __init__(self, app: ASGIApp, audit: AuditLog) -> None:
        self.app = app
        self.audit = audit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or scope["method"] not in STATE_CHANGING or not AUDITED.match(path):
            await self.app(scope, receive, send)
            return
        status = 500

        async def sent(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        await self.app(scope, receive, sent)
        if status < 400:
            await self.audit.record(
                "admin_change",
                actor=scope.get("state", {}).get("user_id"),
                detail={"method": scope["method"], "path": path, "status": status},
            )
