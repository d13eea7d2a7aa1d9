"""Who is calling: a bearer token from config, or a signed-in account's session cookie.

Three ways in, all ending in one user id that scopes threads, runs, files and
memory (an account and a token naming the same user id see the same things):

- a bearer token from `gateway.tokens`, as `Authorization: Bearer <token>`
  or, as LangGraph SDK clients send it, `x-api-key: <token>`;
- an account's session cookie (`access_token`, from `/api/v1/auth/login/local`),
  what DeerFlow's web UI holds; a state-changing request with it must carry
  the CSRF token (`X-CSRF-Token`, the `csrf_token` cookie's value);
- nothing, while no token is configured and no account exists: everyone is
  user `default` (and the gateway only listens on loopback).

`RequireToken` checks every request before routing, so a route cannot be left
open by forgetting a dependency: only `PUBLIC_PATHS` (health, the API docs and
the sign-in endpoints) answer without a caller. The caller goes into the
request state for the routes' `Me` and `CallerOf`.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from fastapi import HTTPException
from starlette.datastructures import Headers
from starlette.requests import cookie_parser
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from config import GatewayConfig
from gateway.accounts import CSRF_HEADER, SESSION_COOKIE, Account, AccountStore, Sessions

DEFAULT_USER = "default"
AUTH_PREFIX = "/api/v1/auth"
# Answered without a caller: health, the docs, and the sign-in endpoints (each checks what it needs).
PUBLIC_PATHS = frozenset(
    {
        "/health",
        "/docs",
        "/docs/oauth2-redirect",
        "/openapi.json",
        f"{AUTH_PREFIX}/setup-status",
        f"{AUTH_PREFIX}/providers",
        f"{AUTH_PREFIX}/initialize",
        f"{AUTH_PREFIX}/login/local",
        f"{AUTH_PREFIX}/register",
        f"{AUTH_PREFIX}/logout",
    }
)
# Answered without a caller under these prefixes: single sign-on's start and callback per provider.
PUBLIC_PREFIXES = (f"{AUTH_PREFIX}/oauth/", f"{AUTH_PREFIX}/callback/")
UNAUTHORIZED = "missing or unknown token: send Authorization: Bearer <token>, or sign in"
CSRF_REFUSED = "CSRF token missing or wrong: send the csrf_token cookie's value as the X-CSRF-Token header"
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True)
class Caller:
    user_id: str
    via: Literal["open", "token", "session"]
    admin: bool
    account: Account | None = None
    session: str | None = None  # the session cookie, for its CSRF token


def bearer_token(headers: Mapping[str, str]) -> str:
    header = headers.get("authorization", "")
    return header[7:].strip() if header.lower().startswith("bearer ") else headers.get("x-api-key", "")


def cookies_of(headers: Mapping[str, str]) -> dict[str, str]:
    return cookie_parser(headers.get("cookie", ""))


class Auth:
    def __init__(
        self, config: GatewayConfig, accounts: AccountStore | None = None, sessions: Sessions | None = None
    ) -> None:
        self.config = config
        self.tokens = [(entry.resolved("token"), entry.user_id) for entry in config.tokens]
        self.admins = {entry.user_id for entry in config.tokens if entry.admin}
        self.accounts = accounts
        self.sessions = sessions
        # Accounts' admin rights as the latest request of each user found them (for `is_admin`).
        self._account_admins: dict[str, bool] = {}
        # With identity providers configured, people sign in: the gateway is never open.
        self._sso = bool(config.auth.oidc)
        self._open = not self.tokens and not self._sso

    @property
    def enabled(self) -> bool:
        return bool(self.tokens)

    async def has_accounts(self) -> bool:
        return self.accounts is not None and await self.accounts.count() > 0

    async def is_open(self) -> bool:
        """Single-user mode: no token configured and no account made."""
        self._open = not self.tokens and not self._sso and not await self.has_accounts()
        return self._open

    async def session_account(self, cookie: str) -> Account | None:
        """The account a session cookie signs in, while the cookie is fresh and its password current."""
        if self.accounts is None or self.sessions is None:
            return None
        claim = self.sessions.read(cookie)
        if claim is None:
            return None
        account = await self.accounts.by_key(claim.account_key)
        if account is None or account.token_version != claim.token_version:
            return None
        return account

    async def caller(self, headers: Mapping[str, str]) -> Caller | None:
        """Who sent these headers; None when they carry no valid credentials and some are required."""
        token = bearer_token(headers)
        if token and self.tokens:
            for known, user_id in self.tokens:
                if hmac.compare_digest(token, known):
                    return Caller(user_id, "token", admin=user_id in self.admins)
            return None  # a wrong token is refused, whatever cookie comes with it
        cookie = cookies_of(headers).get(SESSION_COOKIE)
        if cookie:
            account = await self.session_account(cookie)
            if account is not None:
                admin = account.system_role == "admin"
                self._account_admins[account.user_id] = admin
                self._open = False
                return Caller(account.user_id, "session", admin=admin, account=account, session=cookie)
        if await self.is_open():
            return Caller(DEFAULT_USER, "open", admin=True)
        return None

    def is_admin(self, user_id: str) -> bool:
        """Admin tokens' and admin accounts' users; in single-user mode that one user."""
        return user_id in self.admins or self._account_admins.get(user_id, False) or self._open

    def user_of(self, headers: Mapping[str, str]) -> str | None:
        """Tokens only (no accounts): the user whose token the headers carry, `default` with none."""
        if not self.tokens:
            return DEFAULT_USER
        token = bearer_token(headers)
        for known, user_id in self.tokens:
            if token and hmac.compare_digest(token, known):
                return user_id
        return None

    def user_for(self, headers: Mapping[str, str]) -> str:
        user_id = self.user_of(headers)
        if user_id is None:
            raise HTTPException(401, UNAUTHORIZED, headers={"WWW-Authenticate": "Bearer"})
        return user_id


class RequireToken:
    """ASGI middleware: 401 for a request outside `PUBLIC_PATHS` without a caller, 403 for a
    state-changing request signed in by cookie without its CSRF token."""

    def __init__(self, app: ASGIApp, auth: Auth) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        caller = await self.auth.caller(headers)
        if caller is None:
            refusal = JSONResponse(
                {"detail": UNAUTHORIZED}, status_code=401, headers={"WWW-Authenticate": "Bearer"}
            )
            await refusal(scope, receive, send)
            return
        if caller.via == "session" and scope["method"] in STATE_CHANGING:
            assert self.auth.sessions is not None
            assert caller.session is not None
            if not self.auth.sessions.csrf_ok(caller.session, headers.get(CSRF_HEADER)):
                await JSONResponse({"detail": CSRF_REFUSED}, status_code=403)(scope, receive, send)
                return
        state = scope.setdefault("state", {})
        state["user_id"] = caller.user_id
        state["caller"] = caller
        await self.app(scope, receive, send)
