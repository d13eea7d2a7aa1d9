"""Single sign-on, as DeerFlow's UI calls it: `GET /api/v1/auth/providers`,
`GET /api/v1/auth/oauth/{provider}` (to the identity provider, with state, nonce and PKCE) and
`GET /api/v1/auth/callback/{provider}` (back: the code exchanged, the ID token checked, the account
found or made, the session cookies set).

An identity is matched to an account by the provider's `sub` once linked; the first time, by its
e-mail address when the provider says it is verified (an existing account is linked), else a new
account is made (`create_accounts`). The provider's groups give the role (`role_map`). Failures send
the browser back to the sign-in page with `?sso_error=<code>`, and are logged with the reason.
"""

from __future__ import annotations

import logging
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import RedirectResponse
from pydantic import BaseModel

from config import OIDCProviderConfig
from gateway.accounts import Account, AccountExists, InvalidAccount
from gateway.deps import GW, Gateway
from gateway.rest.accounts import _https, sign_in
from gateway.sso import Identity, NotAllowed, PendingSignIn, SSOError
from gateway.sso.logout import remember_provider
from gateway.sso.state import STATE_MAX_AGE, cookie_name, safe_next

log = logging.getLogger(__name__)
router = APIRouter()


class Provider(BaseModel):
    id: str
    display_name: str
    type: str = "oidc"


class Providers(BaseModel):
    providers: list[Provider]


@router.get("/providers", response_model=Providers)
async def providers(gw: GW) -> Providers:
    """The identity providers the sign-in page offers (no secrets, no endpoints)."""
    return Providers(
        providers=[Provider(id=p.name, display_name=p.label) for p in gw.config.gateway.auth.oidc]
    )


def _provider(gw: Gateway, name: str) -> OIDCProviderConfig:
    found = next((p for p in gw.config.gateway.auth.oidc if p.name == name), None)
    if found is None:
        known = ", ".join(p.name for p in gw.config.gateway.auth.oidc) or "none configured"
        raise HTTPException(404, f"provider: no identity provider {name!r} here ({known})")
    return found


def _redirect_uri(request: Request, provider: OIDCProviderConfig) -> str:
    if provider.redirect_uri:
        return provider.redirect_uri
    return str(request.url_for("sso_callback", provider=provider.name))


@router.get("/oauth/{provider}", status_code=302, responses={404: {}, 502: {}})
async def start(
    gw: GW,
    request: Request,
    provider: str,
    next: Annotated[str | None, Query(max_length=2000)] = None,
    remember_me: bool = True,
) -> RedirectResponse:
    """Off to the identity provider; it sends the browser back to `/api/v1/auth/callback/{provider}`."""
    config = _provider(gw, provider)
    client = gw.sso[provider]
    try:
        authorization = await client.authorization(_redirect_uri(request, config))
    except SSOError as exc:
        log.warning("sso: cannot start a sign-in with %s: %s", provider, exc)
        raise HTTPException(502, f"the identity provider {provider} cannot be reached") from None
    pending = PendingSignIn(
        provider=provider,
        state=authorization.state,
        nonce=authorization.nonce,
        code_verifier=authorization.code_verifier,
        next_path=safe_next(next),
        remember_me=remember_me,
    )
    response = RedirectResponse(authorization.url, status_code=302)
    response.set_cookie(
        cookie_name(provider),
        gw.sso_states.dump(pending),
        max_age=STATE_MAX_AGE,
        httponly=True,
        samesite="lax",
        secure=_https(gw, request),
        path="/api/v1/auth/callback",
    )
    return response


def _failed(code: str, provider: str) -> RedirectResponse:
    response = RedirectResponse(f"/?sso_error={quote(code)}", status_code=302)
    response.delete_cookie(cookie_name(provider), path="/api/v1/auth/callback")
    return response


@router.get("/callback/{provider}", name="sso_callback", status_code=302, responses={400: {}, 404: {}})
async def callback(
    gw: GW,
    request: Request,
    provider: str,
    code: Annotated[str | None, Query(max_length=4096)] = None,
    state: Annotated[str | None, Query(max_length=1024)] = None,
    error: Annotated[str | None, Query(max_length=256)] = None,
) -> RedirectResponse:
    """The identity provider's answer: a signed-in session, or the sign-in page with the reason."""
    config = _provider(gw, provider)
    if error:
        log.warning("sso: %s answered error=%s", provider, error)
        await gw.audit.record("sign_in_refused", detail={"provider": provider, "reason": error})
        return _failed("sso_failed", provider)
    if not code or not state:
        missing = "code" if not code else "state"
        raise HTTPException(400, f"{missing}: missing; this URL is where the identity provider answers")
    cookie = request.cookies.get(cookie_name(provider))
    pending = gw.sso_states.load(cookie, provider) if cookie else None
    if pending is None or pending.state != state:
        log.warning("sso: %s callback with an unknown or expired state", provider)
        await gw.audit.record("sign_in_refused", detail={"provider": provider, "reason": "state"})
        return _failed("sso_state", provider)
    try:
        identity = await gw.sso[provider].sign_in(
            code, _redirect_uri(request, config), pending.code_verifier, pending.nonce
        )
        account = await _account_for(gw, config, identity)
    except SSOError as exc:
        log.warning("sso: sign-in through %s refused: %s", provider, exc)
        await gw.audit.record("sign_in_refused", detail={"provider": provider, "reason": exc.code})
        return _failed(exc.code, provider)
    response = RedirectResponse(pending.next_path, status_code=302)
    response.delete_cookie(cookie_name(provider), path="/api/v1/auth/callback")
    sign_in(gw, request, response, account, pending.remember_me)
    assert gw.auth.sessions is not None
    max_age = int(gw.auth.sessions.max_age_seconds) if pending.remember_me else None
    remember_provider(response, provider, secure=_https(gw, request), max_age=max_age)  # for /logout
    log.info("sso: %s signed in through %s (user %s)", account.email, provider, account.user_id)
    await gw.audit.record(
        "sign_in",
        user_id=account.user_id,
        detail={"provider": provider, "email": account.email, "role": account.role or ""},
    )
    return response


def _mapped_role(config: OIDCProviderConfig, identity: Identity) -> str | None:
    for group, role in config.role_map.items():
        if group in identity.groups:
            return role
    return None


async def _account_for(gw: Gateway, config: OIDCProviderConfig, identity: Identity) -> Account:
    """The account this identity signs in as: linked by `sub`, else by verified e-mail, else new."""
    accounts = gw.auth.accounts
    assert accounts is not None
    account = await accounts.by_identity(config.name, identity.sub)
    if account is None:
        if not identity.email:
            raise NotAllowed(f"{config.name} gave no e-mail address for {identity.sub}")
        if config.require_verified_email and not identity.email_verified:
            raise NotAllowed(f"{config.name} says {identity.email} is not verified")
        domain = identity.email.rpartition("@")[2].lower()
        allowed = [d.lower().lstrip("@") for d in config.allowed_email_domains]
        if allowed and domain not in allowed:
            raise NotAllowed(f"{identity.email}: domain {domain} may not sign in here")
        existing = await accounts.get(identity.email)
        try:
            if existing is not None:
                account = await accounts.link_identity(existing.email, config.name, identity.sub)
                log.info("sso: %s linked to the account of %s", config.name, existing.email)
            elif config.create_accounts:
                account = await accounts.create_linked(
                    identity.email, config.name, identity.sub, name=identity.name
                )
                await gw.audit.record(
                    "account_created", user_id=account.user_id, detail={"provider": config.name}
                )
            else:
                raise NotAllowed(f"{identity.email} has no account here and accounts are made by admins")
        except (AccountExists, InvalidAccount) as exc:
            raise NotAllowed(str(exc)) from None
    role = _mapped_role(config, identity)
    if role is not None and role != account.role:
        admin = gw.config.access.roles[role].admin
        account = await accounts.set_role(account.email, role, admin=admin)
        await gw.roles.assign(account.user_id, role, source=f"oidc:{config.name}")
        await gw.audit.record(
            "role_changed", user_id=account.user_id, detail={"role": role, "by": f"oidc:{config.name}"}
        )
    return account
