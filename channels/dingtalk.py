"""The DingTalk adapter: the Stream protocol in, session-webhook Markdown replies out.

The Stream protocol is small, and the SDK's client blocks on `requests`, reads
its endpoint at import time and swallows cancellation, so this adapter runs its
own async loop with the SDK's message classes: open a connection
(`/v1.0/gateway/connections/open`), read frames from the WebSocket, ack each,
answer pings, reconnect with backoff when the socket drops. Robot messages from
private ("1") and group ("2") conversations become InboundMessages; replies are
posted to the message's session webhook as Markdown when the answer is final.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any
from urllib.parse import quote_plus

import httpx
import websockets
from dingtalk_stream.chatbot import ChatbotMessage
from dingtalk_stream.frames import AckMessage, CallbackMessage, SystemMessage

from bus import Bus, Consumer, Delivery, Retry, run_consumers
from bus.messages import InboundMessage, OutboundMessage
from config import AppConfig, DingTalkConfig

log = logging.getLogger(__name__)

OPEN_API = "https://api.dingtalk.com"
BOT_TOPIC = ChatbotMessage.TOPIC


class DingTalkAdapter:
    def __init__(self, bus: Bus, config: DingTalkConfig) -> None:
        self.bus = bus
        self.config = config
        self.base = (config.base_url or OPEN_API).rstrip("/")
        self.webhooks: dict[str, str] = {}  # conversation id -> latest session webhook (valid ~90 min)
        self.http = httpx.AsyncClient(timeout=30)

    # ------------------------------------------------------------------ the stream

    async def stream_forever(self) -> None:
        delay = 1.0
        while True:
            try:
                await self._stream_once()
                delay = 1.0
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # network loss, a refused ticket: try again, a little later each time
                log.warning("dingtalk: stream dropped (%s); reconnecting in %.0fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)

    async def _stream_once(self) -> None:
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
            async for raw in socket:
                try:
                    frame = json.loads(raw)
                except ValueError:
                    log.warning("dingtalk: unreadable frame skipped")
                    continue
                ack = await self._frame(frame)
                if ack is not None:
                    await socket.send(json.dumps(ack))
                if (
                    frame.get("type") == SystemMessage.TYPE
                    and frame.get("headers", {}).get("topic") == "disconnect"
                ):
                    return

    async def _frame(self, frame: dict[str, Any]) -> dict[str, Any] | None:
        headers = frame.get("headers") or {}
        ack = AckMessage()
        ack.headers.message_id = headers.get("messageId")
        ack.headers.content_type = "application/json"
        if frame.get("type") == SystemMessage.TYPE:
            if headers.get("topic") == "ping":
                ack.data = json.loads(frame.get("data") or "{}")
                return ack.to_dict()
            return None
        if frame.get("type") != CallbackMessage.TYPE or headers.get("topic") != BOT_TOPIC:
            log.info("dingtalk: skipping a %s frame on %s", frame.get("type"), headers.get("topic"))
            return ack.to_dict()
        try:
            await self._inbound(ChatbotMessage.from_dict(json.loads(frame.get("data") or "{}")))
            ack.data = {"response": "OK"}
        except Exception:  # a message we cannot handle is logged and acked, never fatal
            log.exception("dingtalk: could not handle a robot message")
            ack.code = AckMessage.STATUS_SYSTEM_EXCEPTION
        return ack.to_dict()

    async def _inbound(self, message: ChatbotMessage) -> None:
        if not message.conversation_id or not message.message_id:
            return
        if message.session_webhook:
            self.webhooks[message.conversation_id] = message.session_webhook
        text = (message.text.content if message.text else "") or ""
        group = str(message.conversation_type) == "2"
        inbound = InboundMessage(
            channel="dingtalk",
            chat_id=message.conversation_id,
            user_id=message.sender_staff_id or message.sender_id or "unknown",
            user_name=message.sender_nick,
            message_id=message.message_id,
            chat_type="group" if group else "private",
            mentioned=bool(message.is_in_at_list),
            text=text.strip(),
        )
        await self.bus.publish(self.bus.subjects.chat_in("dingtalk"), inbound, msg_id=inbound.dedupe_id())

    # ------------------------------------------------------------------ replies

    async def on_outbound(self, out: OutboundMessage, delivery: Delivery) -> None:
        if out.kind == "partial":
            return  # markdown replies are sent once, when final
        webhook = self.webhooks.get(out.chat_id)
        if webhook is None:
            log.warning("dingtalk: no session webhook for conversation %s; the reply is dropped", out.chat_id)
            return
        text = out.text or "(empty reply)"
        if out.files:
            text += "\n\n" + "\n".join(f"- {f.path or f.name}" for f in out.files)
        title = text.strip().splitlines()[0][:20] if text.strip() else "Reply"
        response = await self.http.post(
            webhook, json={"msgtype": "markdown", "markdown": {"title": title, "text": text}}
        )
        if response.status_code == 429 or response.status_code >= 500:
            raise Retry(f"DingTalk answered {response.status_code}", delay=2.0)
        if response.status_code >= 400:
            log.warning("dingtalk: reply refused (%d): %s", response.status_code, response.text[:200])


async def run(bus: Bus, config: AppConfig) -> None:
    """The DingTalk adapter component: the stream in, replies out, until cancelled."""
    settings = config.channels.dingtalk
    if not settings.resolved("client_id") or not settings.resolved("client_secret"):
        raise ValueError("channels.dingtalk.client_id and client_secret must be set")
    adapter = DingTalkAdapter(bus, settings)
    s = bus.subjects
    outbound = Consumer(
        bus,
        stream=s.chat_out_stream,
        durable="dingtalk",
        filter_subjects=[s.chat_out("dingtalk")],
        model=OutboundMessage,
        handler=adapter.on_outbound,
        concurrency=1,
        max_ack_pending=1,
    )
    stream = asyncio.create_task(adapter.stream_forever(), name="dingtalk-stream")
    try:
        await run_consumers(outbound)
    finally:
        stream.cancel()
        await asyncio.gather(stream, return_exceptions=True)
        await adapter.http.aclose()
