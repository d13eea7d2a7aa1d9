"""An OpenID Connect relying party: discovery, the authorization request (code + PKCE, state, nonce),
the code exchange (authlib) and the ID token's checks (joserfc: signature against the provider's
JWKS, issuer, audience, expiry, nonce). Nothing here validates a JWT by hand.

authlib and joserfc (with `cryptography`, about 11 MB) load on the first sign-in, not with the
gateway: most gateways have no identity provider, or never see a sign-in between restarts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

from config import OIDCProviderConfig
from gateway.sso.errors import BadIdToken, ProviderUnreachable, SignInRefused

if TYPE_CHECKING:
    from authlib.integrations.httpx_client import AsyncOAuth2Client
    from joserfc.jwk import KeySet

log = logging.getLogger(__name__)

DISCOVERY_TTL = 3600.0
LEEWAY_SECONDS = 60
ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]


@dataclass(frozen=True)
class Identity:
    """Who the provider says signed in (the ID token's claims, with userinfo's added)."""

    provider: str
    sub: str
    email: str | None
    email_verified: bool
    name: str | None
    groups: list[str]
    claims: dict[str, Any] = field(repr=False)


@dataclass(frozen=True)
class Authorization:
    url: str
    state: str
    nonce: str
    code_verifier: str


@dataclass
class _Metadata:
    document: dict[str, Any]
    keys: KeySet
    fetched: float


class OIDCClient:
    """One per configured provider; its discovery document and keys are cached for an hour (keys are
    fetched again at once when a token names a key id they lack: the provider rotated)."""

    def __init__(self, config: OIDCProviderConfig, http: httpx.AsyncClient) -> None:
        self.config = config
        self.http = http
        self._metadata: _Metadata | None = None
        self._lock = asyncio.Lock()

    async def _get_json(self, url: str) -> dict[str, Any]:
        try:
            answer = await self.http.get(url)
            answer.raise_for_status()
            found = answer.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise ProviderUnreachable(f"{self.config.name}: {url} did not answer: {exc}") from exc
        if not isinstance(found, dict):
            raise ProviderUnreachable(f"{self.config.name}: {url} answered no JSON object")
        return found

    async def metadata(self, *, refresh_keys: bool = False) -> _Metadata:
        async with self._lock:
            current = self._metadata
            if current is None or time.monotonic() - current.fetched > DISCOVERY_TTL:
                issuer = self.config.issuer.rstrip("/")
                document = await self._get_json(f"{issuer}/.well-known/openid-configuration")
                if document.get("issuer", "").rstrip("/") != issuer:
                    raise ProviderUnreachable(
                        f"{self.config.name}: the discovery document names issuer "
                        f"{document.get('issuer')!r}, not {self.config.issuer!r}"
                    )
                current = _Metadata(document, await self._keys(document), time.monotonic())
            elif refresh_keys:
                current = _Metadata(current.document, await self._keys(current.document), current.fetched)
            self._metadata = current
            return current

    async def _keys(self, document: dict[str, Any]) -> KeySet:
        from joserfc.errors import JoseError
        from joserfc.jwk import KeySet

        jwks_uri = document.get("jwks_uri")
        if not isinstance(jwks_uri, str):
            raise ProviderUnreachable(f"{self.config.name}: the discovery document has no jwks_uri")
        try:
            return KeySet.import_key_set(await self._get_json(jwks_uri))  # type: ignore[arg-type]  # a JWKS dict, as joserfc reads it
        except JoseError as exc:
            raise ProviderUnreachable(f"{self.config.name}: its JWKS cannot be read: {exc}") from exc

    def _client(self, redirect_uri: str) -> AsyncOAuth2Client:
        from authlib.integrations.httpx_client import AsyncOAuth2Client

        return AsyncOAuth2Client(
            client_id=self.config.client_id,
            client_secret=self.config.resolved("client_secret"),
            scope=" ".join(self.config.scopes),
            redirect_uri=redirect_uri,
            token_endpoint_auth_method=self.config.token_endpoint_auth_method,
            code_challenge_method="S256",
            timeout=15,
        )

    async def authorization(self, redirect_uri: str) -> Authorization:
        """Where to send the browser: the provider's authorization endpoint with a fresh state, nonce
        and PKCE challenge (the verifier stays with us, in the signed state cookie)."""
        from authlib.common.security import generate_token

        document = (await self.metadata()).document
        state, nonce, verifier = generate_token(32), generate_token(32), generate_token(64)
        async with self._client(redirect_uri) as client:
            url, _ = client.create_authorization_url(
                document["authorization_endpoint"], state=state, nonce=nonce, code_verifier=verifier
            )
        return Authorization(url=url, state=state, nonce=nonce, code_verifier=verifier)

    async def sign_in(self, code: str, redirect_uri: str, code_verifier: str, nonce: str) -> Identity:
        """Exchange the code and check the ID token; the identity it proves."""
        from authlib.integrations.base_client.errors import OAuthError

        document = (await self.metadata()).document
        async with self._client(redirect_uri) as client:
            try:
                token = await client.fetch_token(
                    document["token_endpoint"], code=code, code_verifier=code_verifier
                )
            except OAuthError as exc:  # invalid_grant: a replayed or expired code, a wrong client
                raise SignInRefused(f"{self.config.name} refused the code: {exc.error}") from exc
            except httpx.HTTPError as exc:
                raise ProviderUnreachable(f"{self.config.name}: token endpoint: {exc}") from exc
            id_token = token.get("id_token")
            if not isinstance(id_token, str):
                raise BadIdToken(f"{self.config.name} answered the code without an ID token")
            claims = await self.check_id_token(id_token, nonce)
            userinfo_endpoint = document.get("userinfo_endpoint")
            if userinfo_endpoint and token.get("access_token"):
                try:
                    answer = await client.get(userinfo_endpoint)
                    answer.raise_for_status()
                    info = answer.json()
                except (httpx.HTTPError, ValueError) as exc:
                    raise ProviderUnreachable(f"{self.config.name}: userinfo: {exc}") from exc
                if isinstance(info, dict) and info.get("sub") == claims["sub"]:
                    claims = {**info, **claims}
        return self.identity(claims)

    async def check_id_token(self, id_token: str, nonce: str) -> dict[str, Any]:
        """The ID token's claims once its signature (the provider's keys), issuer, audience,
        authorized party, expiry, issue time and nonce check out; BadIdToken saying which did not."""
        from joserfc import jwt
        from joserfc.errors import JoseError
        from joserfc.jwt import JWTClaimsRegistry

        metadata = await self.metadata()
        try:
            try:
                decoded = jwt.decode(id_token, metadata.keys, algorithms=ALGORITHMS)
            except JoseError as exc:
                if "kid" not in str(exc).lower() and "key" not in str(exc).lower():
                    raise
                metadata = await self.metadata(refresh_keys=True)  # the provider rotated its keys
                decoded = jwt.decode(id_token, metadata.keys, algorithms=ALGORITHMS)
            registry = JWTClaimsRegistry(
                leeway=LEEWAY_SECONDS,
                iss={"essential": True, "value": metadata.document["issuer"]},
                aud={"essential": True, "value": self.config.client_id},
                sub={"essential": True},
                exp={"essential": True},
                iat={"essential": True},
                nonce={"essential": True, "value": nonce},
            )
            registry.validate(decoded.claims)
        except JoseError as exc:
            raise BadIdToken(f"{self.config.name}: the ID token is not valid: {exc.error}: {exc}") from exc
        claims = dict(decoded.claims)
        aud = claims.get("aud")
        if isinstance(aud, list) and len(aud) > 1 and claims.get("azp") != self.config.client_id:
            raise BadIdToken(f"{self.config.name}: the ID token was issued to another party (azp)")
        return claims

    def identity(self, claims: dict[str, Any]) -> Identity:
        groups = claims.get(self.config.groups_claim) or []
        if isinstance(groups, str):
            groups = [groups]
        email = claims.get("email")
        verified = claims.get("email_verified")
        return Identity(
            provider=self.config.name,
            sub=str(claims["sub"]),
            email=email if isinstance(email, str) and email else None,
            email_verified=verified is True or str(verified).lower() == "true",
            name=claims.get("name") if isinstance(claims.get("name"), str) else None,
            groups=[str(g) for g in groups if isinstance(g, str | int)],
            claims=claims,
        )

    async def end_session_url(self, post_logout_redirect_uri: str | None = None) -> str | None:
        """The provider's logout URL (RP-initiated logout), when it has one."""
        try:
            document = (await self.metadata()).document
        except ProviderUnreachable:
            return None
        endpoint = document.get("end_session_endpoint")
        if not isinstance(endpoint, str):
            return None
        params = {"client_id": self.config.client_id}
        if post_logout_redirect_uri:
            params["post_logout_redirect_uri"] = post_logout_redirect_uri
        return str(httpx.URL(endpoint, params=params))
