"""Who is calling: bearer tokens from config mapped to user ids.

With no tokens configured everyone is user `default` (and the gateway only
listens on loopback). Tokens arrive as `Authorization: Bearer <token>` or, as
LangGraph SDK clients send them, `x-api-key: <token>`.
"""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request

from config import GatewayConfig

DEFAULT_USER = "default"


class Auth:
    def __init__(self, config: GatewayConfig) -> None:
        self.tokens = [(entry.resolved("token"), entry.user_id) for entry in config.tokens]

    @property
    def enabled(self) -> bool:
        return bool(self.tokens)

    def user_for(self, request: Request) -> str:
        if not self.tokens:
            return DEFAULT_USER
        header = request.headers.get("authorization", "")
        token = (
            header[7:].strip()
            if header.lower().startswith("bearer ")
            else request.headers.get("x-api-key", "")
        )
        for known, user_id in self.tokens:
            if token and hmac.compare_digest(token, known):
                return user_id
        raise HTTPException(401, "missing or unknown token: send Authorization: Bearer <token>")
