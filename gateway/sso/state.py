"""The state cookie: what a sign-in started here must find when the provider sends the browser back.

Signed and timestamped with the session key (itsdangerous), one cookie per provider, HttpOnly and
SameSite=Lax (the provider's redirect back is a top-level GET, which Lax lets through), valid for ten
minutes. It holds the `state` to compare, the `nonce` the ID token must carry, the PKCE verifier, and
where to go afterwards; it is deleted by the callback, so one sign-in is one callback.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from itsdangerous import BadSignature, URLSafeTimedSerializer

STATE_MAX_AGE = 600


def cookie_name(provider: str) -> str:
    return f"antler_sso_{provider}"


@dataclass(frozen=True)
class PendingSignIn:
    provider: str
    state: str
    nonce: str
    code_verifier: str
    next_path: str
    remember_me: bool
    link: bool = False  # started by a signed-in person to link this provider to their account


class StateCookies:
    def __init__(self, secret: str) -> None:
        self._serializer = URLSafeTimedSerializer(secret, salt="antler-sso-state")

    def dump(self, pending: PendingSignIn) -> str:
        return self._serializer.dumps(asdict(pending))

    def load(self, value: str, provider: str) -> PendingSignIn | None:
        try:
            data: Any = self._serializer.loads(value, max_age=STATE_MAX_AGE)
            pending = PendingSignIn(**data)
        except (BadSignature, TypeError):
            return None
        return pending if pending.provider == provider else None


def safe_next(path: str | None) -> str:
    """A path on this site to go to after signing in; anything else (another site, a scheme) is `/`."""
    if not path or not path.startswith("/") or path.startswith("//") or "\\" in path or ":" in path:
        return "/"
    return path
