"""DingTalk's Stream protocol, as the adapter speaks it: open a connection
(`/v1.0/gateway/connections/open`), read frames from the WebSocket, ack each, answer pings,
reconnect with backoff when the socket drops, and hand each robot message on.

The SDK's own client blocks on `requests`, reads its endpoint at import time and swallows
cancellation, so this loop uses only the SDK's message classes. A frame that is not a JSON object is
skipped (the connection stays up); a robot message that cannot be read is acknowledged (so DingTalk
does not send it again) and dead-lettered with the reason; a message the bus could not take is
answered 500, and DingTalk delivers it again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import quote_plus

import httpx
import websockets
from dingtalk_stream.chatbot import ChatbotMessage
from dingtalk_stream.frames import AckMessage, CallbackMessage, SystemMessage

from bus import Bus, component_healthy, component_unhealthy
from bus.dlq import dead_letter
from bus.supervision import explain
from channels.errors import MalformedMessage
from config import DingTalkConfig

log = logging.getLogger(__name__)

BOT_TOPIC = ChatbotMessage.TOPIC


def robot_message(raw: Any) -> ChatbotMessage:
    """The robot message a callback frame carries; `MalformedMessage` if it cannot be read."""
    try:
        data = json.loads(raw) if isinstance(raw, str | bytes) else raw
    except ValueError as exc:
        raise MalformedMessage(f"its data is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise MalformedMessage("its data is not a JSON object")
    if not data.get("conversationId") or not data.get("msgId"):
        raise MalformedMessage("it has no conversationId or msgId")
    kind = data.get("msgtype")
    if kind == "text" and not isinstance(data.get("text"), dict):
        raise MalformedMessage("a text message without text")
    if kind in ("picture", "richText") and not isinstance(data.get("content"), dict):
        raise MalformedMessage(f"a {kind} message without content")
    try:
        return ChatbotMessage.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise MalformedMessage(f"unreadable ({type(exc).__name__}: {exc})") from None


@dataclass(eq=False)
class StreamConnection:
    """One Stream connection of the app, kept open until cancelled; each robot message goes to
    `on_message` (which raises when the bus could not take it)."""

    bus: Bus
    config: DingTalkConfig
    http: httpx.AsyncClient
    base: str
    on_message: Callable[[ChatbotMessage], Awaitable[None]]

    async def forever(self) -> None:
        delay = 1.0
        while True:
            try:
                await self._once()
                delay = 1.0
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # network loss, a refused ticket: try again, a little later each time
                reason, _ = explain(exc)
                log.warning("dingtalk: stream dropped (%s); reconnecting in %.0fs", reason, delay)
                component_unhealthy(f"the stream is down ({reason}); reconnecting")
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)

    async def _once(self) -> None:
        response = await self.http.post(
            f"{self.base}/v1.0/gateway/connections/open",
            json={
                "clientId": self.config.resolved("client_id"),
                "clientSecret": self.config.resolved("client_secret"),
                "subscriptions": [{"type": "CALLBACK", "topic": BOT_TOPIC}],
                "ua": "antler",
            },
        )
        response.raise_for_status()
        connection = response.json()
        uri = f"{connection['endpoint']}?ticket={quote_plus(connection['ticket'])}"
        async with websockets.connect(uri) as socket:
            log.info("dingtalk: stream connected")
            component_healthy()
            async for raw in socket:
                try:
                    frame = json.loads(raw)
                except ValueError:
                    frame = None
                if not isinstance(frame, dict):
                    log.warning("dingtalk: a frame that is not a JSON object skipped: %.200r", raw)
                    continue
                ack = await self._frame(frame)
                if ack is not None:
                    await socket.send(json.dumps(ack))
                headers = frame.get("headers")
                if (
                    frame.get("type") == SystemMessage.TYPE
                    and isinstance(headers, dict)
                    and headers.get("topic") == "disconnect"
                ):
                    return

    async def _frame(self, frame: dict[str, Any]) -> dict[str, Any] | None:
        headers: dict[str, Any] = frame["headers"] if isinstance(frame.get("headers"), dict) else {}
        ack = AckMessage()
        ack.headers.message_id = headers.get("messageId")
        ack.headers.content_type = "application/json"
        if frame.get("type") == SystemMessage.TYPE:
            if headers.get("topic") == "ping":
                try:
                    ack.data = json.loads(frame.get("data") or "{}")
                except (TypeError, ValueError):
                    ack.data = {}
                return cast(dict[str, Any], ack.to_dict())
            return None
        if frame.get("type") != CallbackMessage.TYPE or headers.get("topic") != BOT_TOPIC:
            log.info("dingtalk: skipping a %s frame on %s", frame.get("type"), headers.get("topic"))
            return cast(dict[str, Any], ack.to_dict())
        ack.data = {"response": "OK"}
        raw = frame.get("data")
        try:
            message = robot_message(raw)
        except MalformedMessage as exc:  # acked: sending it again would not make it readable
            log.warning("dingtalk: malformed robot message %s: %s", headers.get("messageId"), exc)
            await self._dead_letter(raw, str(exc), str(headers.get("messageId") or ""))
            return cast(dict[str, Any], ack.to_dict())
        try:
            await self.on_message(message)
        except Exception:  # the bus could not take it: DingTalk delivers it again
            log.exception("dingtalk: could not handle a robot message")
            ack.code = AckMessage.STATUS_SYSTEM_EXCEPTION
            ack.data = {"response": "retry"}
        return cast(dict[str, Any], ack.to_dict())

    async def _dead_letter(self, raw: Any, reason: str, frame_id: str) -> None:
        data = raw.encode() if isinstance(raw, str) else json.dumps(raw).encode()
        number = int(
            hashlib.sha256((frame_id or data.decode(errors="replace")).encode()).hexdigest()[:12], 16
        )
        try:
            await dead_letter(
                self.bus,
                stream="dingtalk",
                stream_seq=number,
                subject=self.bus.subjects.chat_in_channel("dingtalk"),
                data=data,
                headers=None,
                consumer="dingtalk-stream",
                reason=f"malformed robot message: {reason}",
                deliveries=1,
            )
        except Exception:
            log.exception("dingtalk: could not dead-letter a malformed robot message")
