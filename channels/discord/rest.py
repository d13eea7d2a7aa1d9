"""The Discord REST calls that show a reply (post, edit, attach), with Discord's rate limits told to
the reply stream instead of waited out here.

discord.py keeps the gateway, parses events and registers the slash commands. Its HTTP client
also waits out every rate limit by itself, inside the call, and tries again: a reply would then
hold its consumer slot for the whole wait, the wait would be lost if the process stopped, and a
stale partial text would still be sent after it. Antler's reply stream must own those waits
(`channels.delivery.reply_stream`: newest partial only, finals wait holding no slot, the limit
kept in KV), so the three calls a reply makes go through this small client, which reads the
limits from Discord's headers as its documentation describes them:

- every answer says how many calls its bucket (`X-RateLimit-Bucket`, shared by the routes Discord
  counts together, per channel) has left (`X-RateLimit-Remaining`) and when it refills
  (`X-RateLimit-Reset-After`); once a channel's bucket is empty, the next call for it raises
  `RateLimited` before it is made (no 429 is provoked);
- a 429 says how long to wait (`retry_after`): the whole bot's limit (`"global": true`,
  `X-RateLimit-Scope: global`) holds every chat, any other that chat only.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import httpx

from channels.errors import PlatformError, PlatformUnavailable, RateLimited

log = logging.getLogger(__name__)

API = "https://discord.com/api/v10"
USER_AGENT = "DiscordBot (https://github.com/antler, 1)"  # the form Discord asks bots to send


class DiscordError(PlatformError):
    """Discord refused a call (a 4xx other than 429): its JSON error `code` and message."""

    def __init__(self, status: int, code: int | None, message: str) -> None:
        self.status = status
        self.code = code
        super().__init__(f"Discord answered {status} (code {code}): {message}")


class DiscordUnavailable(PlatformUnavailable):
    """Discord failed in a way that passes (a 5xx, or no answer): the reply is tried again."""


class DiscordRest:
    """Post, edit and attach, each for one channel; `RateLimited` when Discord says to wait."""

    def __init__(self, token: str, base_url: str | None = None, *, timeout: float = 30.0) -> None:
        self._http = httpx.AsyncClient(
            base_url=(base_url or API).rstrip("/"),
            headers={"Authorization": f"Bot {token}", "User-Agent": USER_AGENT},
            timeout=timeout,
        )
        self._empty_until: dict[str, float] = {}  # "<bucket>:<channel>" -> when its bucket refills
        self._hashes: dict[str, str] = {}  # route -> the bucket hash Discord announced for it

    async def aclose(self) -> None:
        await self._http.aclose()

    async def create_message(
        self, channel_id: str, content: str, *, reply_to: str | None = None
    ) -> dict[str, Any]:
        """A new message in `channel_id` (a reply to message `reply_to`, if given); pings nobody."""
        payload: dict[str, Any] = {"content": content, "allowed_mentions": {"parse": []}}
        if reply_to:
            payload["message_reference"] = {"message_id": reply_to, "fail_if_not_exists": False}
        return await self._call(
            "POST", f"/channels/{channel_id}/messages", "createMessage", channel_id, json=payload
        )

    async def edit_message(self, channel_id: str, message_id: str, content: str) -> dict[str, Any]:
        payload = {"content": content, "allowed_mentions": {"parse": []}}
        path = f"/channels/{channel_id}/messages/{message_id}"
        return await self._call("PATCH", path, "editMessage", channel_id, json=payload)

    async def send_file(self, channel_id: str, name: str, data: bytes) -> dict[str, Any]:
        """A message carrying one file (multipart: `payload_json` and `files[0]`)."""
        payload = {"attachments": [{"id": 0, "filename": name}], "allowed_mentions": {"parse": []}}
        files = {
            "payload_json": (None, json.dumps(payload), "application/json"),
            "files[0]": (name, data, "application/octet-stream"),
        }
        return await self._call(
            "POST", f"/channels/{channel_id}/messages", "createMessage", channel_id, files=files
        )

    async def _call(
        self, method: str, path: str, route: str, channel_id: str, **kwargs: Any
    ) -> dict[str, Any]:
        # Routes Discord counts together share a bucket hash (`X-RateLimit-Bucket`), once it is known.
        bucket = f"{self._hashes.get(route, route)}:{channel_id}"
        wait = self._empty_until.get(bucket, 0.0) - time.monotonic()
        if wait > 0:
            raise RateLimited(wait, f"Discord's {route} bucket for channel {channel_id} is empty")
        try:
            response = await self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise DiscordUnavailable(f"Discord could not be reached: {type(exc).__name__}: {exc}") from exc
        announced = response.headers.get("X-RateLimit-Bucket")
        if announced and self._hashes.get(route) != announced:
            self._hashes[route] = announced
            bucket = f"{announced}:{channel_id}"
        self._note_bucket(bucket, response)
        if response.status_code == 429:
            raise _rate_limited(response, route, channel_id)
        if response.status_code >= 500:
            raise DiscordUnavailable(f"Discord answered {response.status_code} to {route}")
        if response.status_code >= 400:
            body = _json(response)
            code = body.get("code") if isinstance(body.get("code"), int) else None
            raise DiscordError(response.status_code, code, str(body.get("message") or response.text[:200]))
        body = _json(response)
        return body

    def _note_bucket(self, bucket: str, response: httpx.Response) -> None:
        remaining = response.headers.get("X-RateLimit-Remaining")
        reset_after = response.headers.get("X-RateLimit-Reset-After")
        if remaining is None or reset_after is None:
            return
        try:
            empty, refill = int(remaining) <= 0, float(reset_after)
        except ValueError:
            return
        if empty:
            self._empty_until[bucket] = time.monotonic() + refill
        else:
            self._empty_until.pop(bucket, None)
        if len(self._empty_until) > 10_000:  # channels long quiet: their refills are past
            now = time.monotonic()
            self._empty_until = {k: v for k, v in self._empty_until.items() if v > now}


def _rate_limited(response: httpx.Response, route: str, channel_id: str) -> RateLimited:
    body = _json(response)
    try:
        delay = float(body.get("retry_after") or response.headers.get("Retry-After") or 1.0)
    except (TypeError, ValueError):
        delay = 1.0
    everywhere = bool(body.get("global")) or response.headers.get("X-RateLimit-Scope") == "global"
    if everywhere:
        return RateLimited(delay, "Discord's global rate limit", scope="platform")
    return RateLimited(delay, f"Discord rate limit on {route} in channel {channel_id}", scope="chat")


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
