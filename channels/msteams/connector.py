"""The Bot Connector REST calls that show a reply (`/v3/conversations/{id}/activities`: send, reply,
update), made with the Agents SDK's `ConnectorClient`, its refusals told the reply stream's way.

Teams limits each bot per conversation (7 operations a second, 60 in 30 seconds, ...) and answers
a call over the limit with 429, often with `Retry-After`: that is `RateLimited` for the one
conversation (other chats go on), and until the wait is over no call is made there (a typing
indicator's 429 holds the reply too). A 5xx or no answer is `TeamsUnavailable` (tried again later),
another refusal `TeamsError`; a 401 also forgets the connector token, so the next try fetches one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Coroutine
from typing import Any

import aiohttp
from microsoft_agents.activity import Activity
from microsoft_agents.hosting.core.connector.client import ConnectorClient

from channels.errors import PlatformError, PlatformUnavailable, RateLimited
from channels.msteams.auth import ConnectorTokens

log = logging.getLogger(__name__)

DEFAULT_WAIT = 1.0  # seconds, when a 429 names no Retry-After


class TeamsError(PlatformError):
    """The Bot Connector refused a call (a 4xx other than 429), with the HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(f"the Bot Connector answered {status}: {message}")


class TeamsUnavailable(PlatformUnavailable):
    """The Bot Connector failed in a way that passes (a 5xx, or no answer)."""


class Connector:
    """Send, reply and update activities at a conversation's service URL, as the bot."""

    def __init__(self, tokens: ConnectorTokens) -> None:
        self._tokens = tokens
        self._clients: dict[str, tuple[str, ConnectorClient]] = {}  # service URL -> (token, client)
        self._limited_until: dict[str, float] = {}  # conversation -> when Teams takes calls again

    async def aclose(self) -> None:
        for _, client in self._clients.values():
            await client.close()
        self._clients.clear()

    async def _client(self, service_url: str) -> ConnectorClient:
        token = await self._tokens.get()
        known = self._clients.get(service_url)
        if known is not None and known[0] == token:
            return known[1]
        if known is not None:
            await known[1].close()
        client = ConnectorClient(service_url, token)
        self._clients[service_url] = (token, client)
        return client

    async def send(self, service_url: str, conversation: str, activity: Activity) -> str:
        """A new activity in `conversation` (in a channel: in the reply chain its id names)."""
        client = await self._client(service_url)
        sent = await self._call(
            conversation, client.conversations.send_to_conversation(conversation, activity)
        )
        return str(sent.id or "")

    async def reply(self, service_url: str, conversation: str, reply_to: str, activity: Activity) -> str:
        client = await self._client(service_url)
        replied = client.conversations.reply_to_activity(conversation, reply_to, activity)
        return str((await self._call(conversation, replied)).id or "")

    async def update(self, service_url: str, conversation: str, activity_id: str, activity: Activity) -> None:
        client = await self._client(service_url)
        await self._call(
            conversation, client.conversations.update_activity(conversation, activity_id, activity)
        )

    async def _call(self, conversation: str, call: Coroutine[Any, Any, Any]) -> Any:
        chat = conversation.split(";")[0]  # a channel's reply chains share the channel's limit
        wait = self._limited_until.get(chat, 0.0) - time.monotonic()
        if wait > 0:  # Teams said to wait: no call before then (the typing indicator's 429 counts)
            call.close()
            raise RateLimited(wait, f"Teams' rate limit in conversation {chat}", scope="chat")
        try:
            return await call
        except aiohttp.ClientResponseError as exc:
            if exc.status == 429:
                wait = _retry_after(exc)
                self._limited_until[chat] = time.monotonic() + wait
                if len(self._limited_until) > 10_000:  # conversations long quiet: their waits are past
                    now = time.monotonic()
                    self._limited_until = {k: v for k, v in self._limited_until.items() if v > now}
                raise RateLimited(wait, f"Teams' rate limit in conversation {chat}", scope="chat") from exc
            if exc.status == 401:
                self._tokens.forget()
                raise TeamsUnavailable("the Bot Connector refused the bot's token; fetching another") from exc
            if exc.status >= 500:
                raise TeamsUnavailable(f"the Bot Connector answered {exc.status}") from exc
            raise TeamsError(exc.status, str(exc.message)[:200]) from exc
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise TeamsUnavailable(
                f"the Bot Connector could not be reached: {type(exc).__name__}: {exc}"
            ) from exc


def _retry_after(exc: aiohttp.ClientResponseError) -> float:
    announced = exc.headers.get("Retry-After") if exc.headers is not None else None
    try:
        return float(announced or DEFAULT_WAIT)
    except ValueError:
        return DEFAULT_WAIT
