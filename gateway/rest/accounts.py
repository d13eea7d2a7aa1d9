"""DeerFlow's sign-in API, `/api/v1/auth/*`: first admin, sign-in, registration, who am I, sign-out.

What DeerFlow's web UI calls, with the shapes it reads: `setup-status`
(`needs_setup` while no account exists), `initialize` (the first admin),
`login/local` (a form: `username`, `password`, `remember_me`), `register`
(when `gateway.auth.allow_registration`), `me`, `logout`, `change-password`,
and (in `gateway/rest/sso.py`) single sign-on's `providers`, `oauth/{provider}` and `callback/{provider}`.
Signing in sets two cookies: `access_token` (the session: HttpOnly,
SameSite=Lax) and `csrf_token` (readable by the page, SameSite=Strict), whose
value state-changing requests send back as `X-CSRF-Token`. Refusals carry
`detail` like every error here, plus DeerFlow's `code` and `message`.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Annotated, Literal
from urllib.parse import urlsplit

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, StrictBool
from pydantic.config import JsonDict

from gateway.accounts import (
    CSRF_COOKIE,
    SESSION_COOKIE,
    Account,
    AccountExists,
    InvalidAccount,
    LoginLockout,
    check_password,
    verify_password,
)
from gateway.accounts.passwords import MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH
from gateway.auth import DEFAULT_USER
from gateway.deps import GW, CallerOf, Gateway
from gateway.sso.logout import end_session_url

log = logging.getLogger(__name__)
router = APIRouter()


class UserAnswer(BaseModel):
    id: str
    email: str
    system_role: Literal["admin", "user"]
    needs_setup: bool = False
    oauth_provider: str | None = None
    via: Literal["session", "token", "open"] = Field(
        "session",
        description="How the caller is known: an account's session, a token, or the "
        "loopback single-user mode (no accounts, no tokens).",
    )


class LoginAnswer(BaseModel):
    expires_in: int
    needs_setup: bool = False


class SetupStatus(BaseModel):
    needs_setup: bool
    registration_enabled: bool


class Message(BaseModel):
    message: str


class AuthErrorBody(BaseModel):
    detail: str
    code: str | None = Field(None, description="DeerFlow's error code, e.g. invalid_credentials")
    message: str | None = None


# What the schema promises an address looks like; `normalize_email` (email_validator) decides.
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?"
PASSWORD_SHAPE: JsonDict = {"minLength": MIN_PASSWORD_LENGTH, "maxLength": MAX_PASSWORD_LENGTH}
EMAIL_SHAPE: JsonDict = {"pattern": rf"^[A-Za-z0-9_+-]+(\.[A-Za-z0-9_+-]+)*@({_LABEL}\.)+[A-Za-z]{{2,24}}$"}


class NewAccount(BaseModel):
    email: str = Field(json_schema_extra=EMAIL_SHAPE)
    password: str = Field(json_schema_extra=PASSWORD_SHAPE)
    remember_me: StrictBool = True


class PasswordChange(BaseModel):
    current_password: str
    new_password: str = Field(json_schema_extra=PASSWORD_SHAPE)
    new_email: str | None = Field(None, json_schema_extra=EMAIL_SHAPE)
    remember_me: StrictBool | None = None


def refusal(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"detail": message, "code": code, "message": message}, status_code=status)


def _errors(*codes: int) -> dict[int | str, dict[str, object]]:
    return {code: {"model": AuthErrorBody} for code in codes}


# ------------------------------------------------------------------ the request's origin and address


def _trusted(gw: Gateway, request: Request) -> bool:
    peer = request.client.host if request.client else ""
    try:
        address = ipaddress.ip_address(peer)
    except ValueError:
        return False
    return any(
        address in ipaddress.ip_network(entry, strict=False)
        for entry in gw.config.gateway.auth.trusted_proxies
    )


def client_address(gw: Gateway, request: Request) -> str:
    """The caller's address: the TCP peer, or what a trusted proxy says it forwarded for."""
    peer = request.client.host if request.client else "unknown"
    forwarded = request.headers.get("x-forwarded-for", "")
    if forwarded and _trusted(gw, request):
        return forwarded.split(",")[-1].strip() or peer
    return peer


def _https(gw: Gateway, request: Request) -> bool:
    configured = gw.config.gateway.auth.secure_cookies
    if configured is not None:
        return configured
    proto = request.headers.get("x-forwarded-proto", "") if _trusted(gw, request) else ""
    return (proto.split(",")[0].strip() or request.url.scheme) == "https"


def _origin(url: str) -> str | None:
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    default = {"http": 80, "https": 443}[parts.scheme]
    return f"{parts.scheme}://{parts.hostname.lower()}" + (f":{port}" if port and port != default else "")


def allowed_origin(gw: Gateway, request: Request) -> bool:
    """Sign-in requests from another site are refused (login CSRF): an `Origin` must be this
    origin (as the browser saw it, through a proxy's X-Forwarded-Host) or one of `cors_origins`.
    Requests without `Origin` (curl, scripts) are not from a browser page and pass."""
    origin = request.headers.get("origin")
    if origin is None:
        return True
    seen = _origin(origin)
    if seen is None:
        return False
    host = request.headers.get("x-forwarded-host") or request.headers.get("host") or ""
    scheme = request.headers.get("x-forwarded-proto") or request.url.scheme
    here = _origin(f"{scheme.split(',')[0].strip()}://{host.split(',')[0].strip()}")
    allowed = {_origin(o) for o in gw.config.gateway.cors_origins if o != "*"}
    return seen == here or seen in allowed


def cross_site() -> JSONResponse:
    return refusal(403, "cross_site", "sign-in requests from another site are refused")


# ------------------------------------------------------------------ cookies


def sign_in(gw: Gateway, request: Request, response: Response, account: Account, remember: bool) -> None:
    """Set the session and CSRF cookies for `account`."""
    assert gw.auth.sessions is not None
    session = gw.auth.sessions.issue(account)
    max_age = int(gw.auth.sessions.max_age_seconds) if remember else None
    secure = _https(gw, request)
    response.set_cookie(
        SESSION_COOKIE, session, max_age=max_age, httponly=True, samesite="lax", secure=secure
    )
    response.set_cookie(
        CSRF_COOKIE,
        gw.auth.sessions.csrf_token(session),
        max_age=max_age,
        httponly=False,  # the page reads it and sends it back as X-CSRF-Token
        samesite="strict",
        secure=secure,
    )


def user_answer(user_id: str, role: Literal["admin", "user"], account: Account | None) -> UserAnswer:
    if account is not None:
        return UserAnswer(
            id=account.user_id,
            email=account.email,
            system_role=account.system_role,
            needs_setup=account.needs_setup,
        )
    # Token and single-user callers have no address; the UI wants one, so they get a placeholder.
    return UserAnswer(id=user_id, email=f"{user_id}@antler.local", system_role=role)


# ------------------------------------------------------------------ endpoints


@router.get("/setup-status", response_model=SetupStatus)
async def setup_status(gw: GW) -> SetupStatus:
    """Whether the first admin is still to be made (the UI then shows its setup page)."""
    settings = gw.config.gateway.auth
    no_accounts = not await gw.auth.has_accounts()
    return SetupStatus(
        needs_setup=settings.allow_initialize and no_accounts,
        registration_enabled=settings.allow_registration,
    )


@router.post("/initialize", status_code=201, response_model=UserAnswer, responses=_errors(403, 409, 422))
async def initialize(gw: GW, request: Request, response: Response, body: NewAccount) -> Response | UserAnswer:
    """The first admin account, while no account exists; it is signed in at once. In single-user
    mode (no tokens configured) it is user `default`, so the threads made before stay theirs."""
    if not allowed_origin(gw, request):
        return cross_site()
    if not gw.config.gateway.auth.allow_initialize:
        return refusal(403, "initialize_disabled", "accounts are made with `antler user add` here")
    accounts = gw.auth.accounts
    assert accounts is not None
    if not await accounts.claim_initialization():
        return refusal(409, "system_already_initialized", "the first admin is being made already")
    try:
        if await accounts.count() > 0:
            return refusal(409, "system_already_initialized", "an account exists already: sign in")
        user_id = DEFAULT_USER if not gw.auth.tokens else None
        account = await accounts.create(body.email, body.password, role="admin", user_id=user_id)
    except InvalidAccount as exc:
        return refusal(422, "invalid_account", str(exc))
    finally:
        await accounts.release_initialization()
    log.info("auth: first admin %s (user %s) made from the web UI", account.email, account.user_id)
    sign_in(gw, request, response, account, body.remember_me)
    return user_answer(account.user_id, "admin", account)


@router.post("/login/local", response_model=LoginAnswer, responses=_errors(401, 403, 429))
async def login(
    gw: GW,
    request: Request,
    response: Response,
    username: Annotated[str, Form(min_length=1)],
    password: Annotated[str, Form(min_length=1)],
    remember_me: Annotated[bool, Form()] = True,
) -> Response | LoginAnswer:
    """Sign in with e-mail address (`username`) and password, as a form; sets the session cookie."""
    if not allowed_origin(gw, request):
        return cross_site()
    if not gw.config.gateway.auth.local_passwords:
        return refusal(403, "local_login_disabled", "sign in with single sign-on here (no passwords)")
    assert gw.auth.accounts is not None
    assert gw.lockout is not None
    keys = LoginLockout.keys(username, client_address(gw, request))
    if await gw.lockout.locked(keys):
        minutes = gw.config.gateway.auth.lockout_minutes
        return refusal(
            429, "too_many_attempts", f"too many failed sign-ins: try again in {minutes:g} minutes"
        )
    account = await gw.auth.accounts.get(username)
    if not await verify_password(password, account.password_hash if account else None) or account is None:
        await gw.lockout.failed(keys)
        await gw.audit.record("sign_in_refused", outcome="refused", detail={"provider": "password"})
        return refusal(401, "invalid_credentials", "Incorrect email or password")
    await gw.lockout.succeeded(keys)
    sign_in(gw, request, response, account, remember_me)
    await gw.audit.record("sign_in", user_id=account.user_id, detail={"provider": "password"})
    return LoginAnswer(expires_in=int(gw.auth.sessions.max_age_seconds) if gw.auth.sessions else 0)


@router.post("/register", status_code=201, response_model=UserAnswer, responses=_errors(400, 403, 422))
async def register(gw: GW, request: Request, response: Response, body: NewAccount) -> Response | UserAnswer:
    """A new (non-admin) account, when `gateway.auth.allow_registration`; it is signed in at once."""
    if not allowed_origin(gw, request):
        return cross_site()
    if not gw.config.gateway.auth.allow_registration:
        return refusal(
            403, "registration_disabled", "registration is closed here: ask an admin for an account"
        )
    assert gw.auth.accounts is not None
    try:
        account = await gw.auth.accounts.create(body.email, body.password)
    except AccountExists:
        return refusal(400, "email_already_exists", "Email already registered")
    except InvalidAccount as exc:
        return refusal(422, "invalid_account", str(exc))
    sign_in(gw, request, response, account, body.remember_me)
    return user_answer(account.user_id, "user", account)


@router.get("/me", response_model=UserAnswer)
async def me(caller: CallerOf) -> UserAnswer | JSONResponse:
    """The caller: their account, or for a token or in single-user mode, the user id.

    Single-user mode answers exactly DeerFlow's auth-disabled user (its e-mail, no `via`): DeerFlow's
    UI and its real-backend contract test compare the whole answer. Our UI reads a missing `via` as
    single-user mode."""
    if caller.via == "open":
        user = {"id": caller.user_id, "email": f"{caller.user_id}@test.local", "system_role": "admin"}
        return JSONResponse({**user, "needs_setup": False, "oauth_provider": None})
    answer = user_answer(caller.user_id, "admin" if caller.admin else "user", caller.account)
    return answer.model_copy(update={"via": caller.via})


class SignedOut(Message):
    end_session_url: str | None = Field(
        None, description="Signed in by single sign-on: open this to end the provider's session too."
    )


@router.post("/logout", response_model=SignedOut)
async def logout(gw: GW, request: Request, response: Response) -> SignedOut:
    secure = _https(gw, request)
    response.delete_cookie(SESSION_COOKIE, httponly=True, samesite="lax", secure=secure)
    response.delete_cookie(CSRF_COOKIE, samesite="strict", secure=secure)
    return SignedOut(message="signed out", end_session_url=await end_session_url(gw, request, response))


@router.post("/change-password", response_model=Message, responses=_errors(400, 403, 422))
async def change_password(
    gw: GW, caller: CallerOf, request: Request, response: Response, body: PasswordChange
) -> Response | Message:
    """A new password (and optionally address) for the signed-in account; its other sessions end."""
    account = caller.account
    if account is None:
        return refusal(403, "invalid_credentials", "only a signed-in account has a password to change")
    if not await verify_password(body.current_password, account.password_hash):
        return refusal(400, "invalid_credentials", "Current password is incorrect")
    assert gw.auth.accounts is not None
    try:
        check_password(body.new_password)
        changed = await gw.auth.accounts.set_password(
            account.email, body.new_password, new_email=body.new_email
        )
    except AccountExists:
        return refusal(400, "email_already_exists", "Email already in use")
    except InvalidAccount as exc:
        return refusal(422, "invalid_account", str(exc))
    remember = body.remember_me if body.remember_me is not None else True
    sign_in(gw, request, response, changed, remember)
    return Message(message="password changed")
