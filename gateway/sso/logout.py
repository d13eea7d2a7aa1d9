"""Signing out of the provider too: a session begun by single sign-on remembers its provider (cookie
`antler_sso`, HttpOnly), and `/api/v1/auth/logout` answers that provider's end-session URL (OpenID
RP-initiated logout, when its discovery document has an `end_session_endpoint`), where the web UI
sends the browser: the provider ends its own session and sends the browser back to this gateway's
page. Otherwise the next "Sign in with ..." would be let in by the provider without a password."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import Request, Response

if TYPE_CHECKING:
    from gateway.deps import Gateway

SSO_COOKIE = "antler_sso"
COOKIE_PATH = "/api/v1/auth"


def remember_provider(response: Response, provider: str, *, secure: bool, max_age: int | None) -> None:
    response.set_cookie(
        SSO_COOKIE, provider, max_age=max_age, httponly=True, samesite="lax", secure=secure, path=COOKIE_PATH
    )


async def end_session_url(gw: Gateway, request: Request, response: Response) -> str | None:
    """Forget the session's provider; its end-session URL (None: not signed in by SSO, or it has none)."""
    provider = request.cookies.get(SSO_COOKIE)
    if provider is None:
        return None
    response.delete_cookie(SSO_COOKIE, path=COOKIE_PATH)
    client = gw.sso.get(provider)
    if client is None:
        return None
    return await client.end_session_url(str(request.base_url))
