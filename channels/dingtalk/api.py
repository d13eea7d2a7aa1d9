"""DingTalk's HTTP APIs as the adapter uses them: the app's access token, the Open API (cards, robot
messages, file downloads) and the old host's media upload.

The Open API's refusals are sorted for the reply stream: HTTP 429 and `QpsLimit` are the app's rate
limits (`RateLimited`, every conversation waits), 5xx is `DingTalkUnavailable` (tried again), a
refused token is fetched anew, anything else is `DingTalkError`.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any
from urllib.parse import quote_plus

import httpx

from bus import Retry
from bus.messages import OutboundMessage
from channels.errors import PlatformError, PlatformUnavailable, RateLimited
from config import DingTalkConfig

log = logging.getLogger(__name__)


class DingTalkError(PlatformError):
    """DingTalk refused a call (not a rate limit, not a 5xx): trying again will not help."""


class DingTalkUnavailable(PlatformUnavailable):
    """DingTalk failed in a way that passes (a 5xx): the reply is tried again later."""


def retry_after(response: httpx.Response, default: float) -> float:
    try:
        return max(0.0, float(response.headers.get("retry-after", default)))
    except ValueError:
        return default


class DingTalkApi:
    """One app's calls, with its access token cached until shortly before it expires."""

    def __init__(self, config: DingTalkConfig, http: httpx.AsyncClient, base: str, legacy: str) -> None:
        self.config = config
        self.http = http
        self.base = base
        self.legacy = legacy
        self._token: tuple[str, float] | None = None

    async def access_token(self) -> str:
        if self._token is None or self._token[1] < time.monotonic():
            response = await self.http.post(
                f"{self.base}/v1.0/oauth2/accessToken",
                json={
                    "appKey": self.config.resolved("client_id"),
                    "appSecret": self.config.resolved("client_secret"),
                },
            )
            body = response.json() if response.content else {}
            if response.status_code != 200 or not body.get("accessToken"):
                raise DingTalkError(
                    f"DingTalk refused the app credentials: {body.get('message') or response.status_code}"
                )
            self._token = (body["accessToken"], time.monotonic() + int(body.get("expireIn") or 7200) - 300)
        return self._token[0]

    async def call(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"x-acs-dingtalk-access-token": await self.access_token()}
        response = await self.http.request(method, f"{self.base}{path}", json=body, headers=headers)
        refusal = response.json() if response.content and response.status_code >= 400 else {}
        if response.status_code == 429 or "QpsLimit" in str(refusal.get("code") or ""):
            # The Open API's QPS limits are the app's, per API: every conversation waits.
            raise RateLimited(retry_after(response, 2.0), f"DingTalk rate limit on {path}", scope="platform")
        if response.status_code >= 500:
            raise DingTalkUnavailable(f"DingTalk answered {response.status_code} to {path}")
        if response.status_code == 401:
            self._token = None
            raise Retry(f"DingTalk refused the access token for {path}", delay=0.5)
        if response.status_code >= 400:
            raise DingTalkError(f"DingTalk refused {path} ({response.status_code}): {response.text[:200]}")
        return response.json() if response.content else {}

    async def robot_send(self, out: OutboundMessage, msg_key: str, param: dict[str, Any]) -> None:
        """A message from the robot into the conversation, without a session webhook."""
        context = out.metadata
        robot = context.get("robot_code") or self.config.resolved("client_id")
        body: dict[str, Any] = {
            "robotCode": robot,
            "msgKey": msg_key,
            "msgParam": json.dumps(param, ensure_ascii=False),
        }
        if context.get("conversation_type") == "1" and context.get("sender_staff_id"):
            await self.call(
                "POST", "/v1.0/robot/oToMessages/batchSend", {**body, "userIds": [context["sender_staff_id"]]}
            )
        else:
            await self.call(
                "POST", "/v1.0/robot/groupMessages/send", {**body, "openConversationId": out.chat_id}
            )

    async def upload(self, name: str, data: bytes, content_type: str | None) -> str | None:
        """Upload a file for a robot message; its media id, or None if DingTalk would not take it."""
        token = await self.access_token()
        response = await self.http.post(
            f"{self.legacy}/media/upload?access_token={quote_plus(token)}",
            data={"type": "file"},
            files={"media": (name, data, content_type or "application/octet-stream")},
        )
        body = response.json() if response.content else {}
        if response.status_code != 200 or body.get("errcode") not in (0, None) or not body.get("media_id"):
            log.warning("dingtalk: could not upload %s: %s", name, body.get("errmsg") or response.status_code)
            return None
        return str(body["media_id"])
