"""Both directions of the Bot Framework's authentication.

Inbound: every request the Bot Connector posts carries a JWT that the Microsoft 365 Agents SDK
validates (`microsoft_agents.hosting.aiohttp.jwt_authorization_decorator`: RS256 against the Bot
Framework's published keys, audience our app id, issuer and tenant binding; a missing or bad token
is answered 401 before the adapter sees the request). On top of the SDK, the token's `serviceurl`
claim must name the `serviceUrl` the activity asks to be answered at (Microsoft's bot
authentication steps), so a token cannot be replayed to send the bot's answers elsewhere.

The SDK reads the Bot Framework's keys from Microsoft (`AuthenticationConstants.PUBLIC_ABS_JWKS_URL`);
`channels.msteams.signing_keys_url` (tests: a fake on loopback; a JWKS or the OpenID metadata that
names one) gives it another place to read them from (`use_signing_keys`). There is no setting that
turns validation off.

Outbound: the Bot Connector wants a bearer token from Microsoft's token service, OAuth 2.0 client
credentials for the scope `https://api.botframework.com/.default` (`ConnectorTokens`, kept until a
minute before it expires).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import httpx
from jwt import PyJWKClient
from microsoft_agents.hosting.core.authorization import AgentAuthConfiguration, AuthTypes
from microsoft_agents.hosting.core.authorization.authentication_constants import AuthenticationConstants
from microsoft_agents.hosting.core.authorization.jwt import JwtTokenValidator
from microsoft_agents.hosting.core.authorization.jwt.jwt_token_validator import _JwkClientCacheEntry

from bus import Misconfigured, Unreachable
from channels.errors import PlatformUnavailable
from config.channels import MSTeamsConfig

SCOPE = "https://api.botframework.com/.default"
LOGIN = "https://login.microsoftonline.com"


def auth_configuration(config: MSTeamsConfig) -> AgentAuthConfiguration:
    """The SDK's validation settings: tokens for our app id only, never anonymous."""
    return AgentAuthConfiguration(
        auth_type=AuthTypes.client_secret,
        client_id=config.resolved("app_id"),
        tenant_id=config.resolved("tenant_id"),
        client_secret=config.resolved("app_password"),
        anonymous_allowed=False,
    )


async def use_signing_keys(url: str) -> None:
    """Have the SDK read the Bot Framework's signing keys from `url` (a JWKS, or OpenID metadata
    naming one in `jwks_uri`, as Microsoft's `openidconfiguration` does) instead of Microsoft's
    address (its key clients are kept per address; this one is put in first, for this process)."""
    async with httpx.AsyncClient(timeout=30) as http:
        try:
            response = await http.get(url)
            response.raise_for_status()
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise Unreachable(httpx.URL(url).host, f"the signing keys at {url}: {exc}") from exc
    keys = str(body["jwks_uri"]) if isinstance(body, dict) and body.get("jwks_uri") else url
    manager = JwtTokenValidator._jwk_client_manager
    manager._cache[AuthenticationConstants.PUBLIC_ABS_JWKS_URL] = _JwkClientCacheEntry(
        PyJWKClient(keys), threading.Lock()
    )


def service_url_matches(claims: Any, service_url: str | None) -> bool:
    """Whether the validated token's `serviceurl` claim (when it has one) names `service_url`."""
    claimed = claims.get_claim_value(AuthenticationConstants.SERVICE_URL_CLAIM)
    if not claimed:
        return True
    return bool(service_url) and str(claimed).rstrip("/") == str(service_url).rstrip("/")


class ConnectorTokens:
    """The bot's bearer token for the Bot Connector (client credentials), fetched when needed."""

    def __init__(self, http: httpx.AsyncClient, config: MSTeamsConfig) -> None:
        self._http = http
        self._app_id = config.resolved("app_id") or ""
        self._password = config.resolved("app_password") or ""
        tenant = config.resolved("tenant_id") or "botframework.com"
        self.url = config.token_url or f"{LOGIN}/{tenant}/oauth2/v2.0/token"
        self._token: tuple[str, float] | None = None
        self._lock = asyncio.Lock()

    async def get(self) -> str:
        async with self._lock:
            if self._token is None or self._token[1] < time.monotonic():
                self._token = await self._fetch()
            return self._token[0]

    def forget(self) -> None:
        """The connector refused the token (401): fetch a new one next time."""
        self._token = None

    async def _fetch(self) -> tuple[str, float]:
        form = {
            "grant_type": "client_credentials",
            "client_id": self._app_id,
            "client_secret": self._password,
            "scope": SCOPE,
        }
        try:
            response = await self._http.post(self.url, data=form)
        except httpx.TransportError as exc:
            raise Unreachable(httpx.URL(self.url).host, f"{type(exc).__name__}: {exc}") from exc
        if response.status_code in (400, 401):
            raise Misconfigured(
                f"Microsoft refused the bot's credentials ({_error(response)}): "
                "check channels.msteams.app_id, app_password and tenant_id"
            )
        if response.status_code != 200:
            raise PlatformUnavailable(f"the token service answered {response.status_code}")
        body = response.json()
        lifetime = float(body.get("expires_in") or 3600)
        return str(body["access_token"]), time.monotonic() + max(0.0, lifetime - 60)


def _error(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return f"HTTP {response.status_code}"
    return str(body.get("error_description") or body.get("error") or response.status_code)
