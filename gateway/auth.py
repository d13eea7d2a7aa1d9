"""Who is calling: bearer tokens from config mapped to user ids, required on every route but a few.

With no tokens configured everyone is user `default` (and the gateway only
listens on loopback). Tokens arrive as `Authorization: Bearer <token>` or, as
LangGraph SDK clients send them, `x-api-key: <token>`.

`RequireToken` checks the token for every request before routing, so a route
cannot be left open by forgetting a dependency (the assistants routes once
were): only `PUBLIC_PATHS` (health and the API docs) answer without one. The
caller's user id goes into the request state for the routes' `Me`.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from fastapi import HTTPException
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from config import GatewayConfig

DEFAULT_USER = "default"
PUBLIC_PATHS = frozenset({"/health", "/docs", "/docs/oauth2-redirect", "/openapi.json"})
UNAUTHORIZED = "missing or unknown token: send Authorization: Bearer <token>"


class Auth:
    def __init__(self, config: GatewayConfig) -> None:
        self.tokens = [(entry.resolved("token"), entry.user_id) for entry in config.tokens]
        self.admins = {entry.user_id for entry in config.tokens if entry.admin}

    @property
    def enabled(self) -> bool:
        return bool(self.tokens)

    def user_of(self, headers: Mapping[str, str]) -> str | None:
        """The user whose token the headers carry (`default` without tokens configured), else None."""
        if not self.tokens:
            return DEFAULT_USER
        header = headers.get("authorization", "")
        token = header[7:].strip() if header.lower().startswith("bearer ") else headers.get("x-api-key", "")
        for known, user_id in self.tokens:
            if token and hmac.compare_digest(token, known):
                return user_id
        return None

    def is_admin(self, user_id: str) -> bool:
        """Without tokens (one user, loopback only) that user administers; else `admin: true` tokens."""
        return not self.tokens or user_id in self.admins

    def user_for(self, headers: Mapping[str, str]) -> str:
        user_id = self.user_of(headers)
        if user_id is None:
            raise HTTPException(401, UNAUTHORIZED, headers={"WWW-Authenticate": "Bearer"})
        return user_id


class RequireToken:
    """ASGI middleware: a 401 for any HTTP request outside `PUBLIC_PATHS` without a known token."""

    def __init__(self, app: ASGIApp, auth: Auth) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in PUBLIC_PATHS:
            await self.app(scope, receive, send)
            return
        user_id = self.auth.user_of(Headers(scope=scope))
        if user_id is None:
            refusal = JSONResponse(
                {"detail": UNAUTHORIZED}, status_code=401, headers={"WWW-Authenticate": "Bearer"}
            )
            await refusal(scope, receive, send)
            return
        scope.setdefault("state", {})["user_id"] = user_id
        await self.app(scope, receive, send)
