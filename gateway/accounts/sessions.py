"""Session cookies: an account's key and password generation, signed and timestamped (itsdangerous).

A session ends when it is older than `gateway.auth.session_days`, when the
account's password changes (its `token_version` moves on), or when the account
is removed. The CSRF token is derived from the session cookie with the same
secret, so a request that cannot read the `csrf_token` cookie (another site)
cannot produce it, and a token planted from elsewhere matches no session.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

from itsdangerous import BadSignature, URLSafeTimedSerializer

from gateway.accounts.store import Account

SESSION_COOKIE = "access_token"  # the names DeerFlow's web UI reads
CSRF_COOKIE = "csrf_token"
CSRF_HEADER = "x-csrf-token"


@dataclass(frozen=True)
class SessionClaim:
    account_key: str
    token_version: int


class Sessions:
    def __init__(self, secret: str, max_age_seconds: float) -> None:
        self._secret = secret.encode()
        self.max_age_seconds = max_age_seconds
        self._serializer = URLSafeTimedSerializer(secret, salt="antler-session")

    def issue(self, account: Account) -> str:
        return self._serializer.dumps({"a": account.key, "v": account.token_version})

    def read(self, cookie: str) -> SessionClaim | None:
        """What a cookie claims, if this secret signed it no longer ago than the session lifetime."""
        try:
            data: Any = self._serializer.loads(cookie, max_age=self.max_age_seconds)  # type: ignore[arg-type]  # itsdangerous compares seconds: a float does as its int
        except BadSignature:  # SignatureExpired is one too
            return None
        if (
            not isinstance(data, dict)
            or not isinstance(data.get("a"), str)
            or not isinstance(data.get("v"), int)
        ):
            return None
        return SessionClaim(data["a"], data["v"])

    def csrf_token(self, cookie: str) -> str:
        return hmac.new(self._secret, b"csrf:" + cookie.encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, cookie: str, header: str | None) -> bool:
        return bool(header) and hmac.compare_digest(self.csrf_token(cookie), header or "")
