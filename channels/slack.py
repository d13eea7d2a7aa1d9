"""The Slack adapter: slack-bolt in Socket Mode in, the router's replies out.

Inbound: direct messages and `app_mention`s become InboundMessages on
`<prefix>.chat.in.slack`; a mention can arrive both as `message` and as
`app_mention`, and both carry the same `ts`, so the second is dropped as a
duplicate. A conversation is the DM, or the Slack thread the message is in.
Outbound: a channel mention is answered in its thread, a direct message
plainly in the DM (in a thread only if the user wrote in one): the first
partial is posted, then updated (`chat.update`) as the answer streams, and
the final text replaces it (a long one continues in more messages, cut at
paragraph or line ends); presented files are uploaded (`files_upload_v2`).
Model Markdown is rendered as Slack mrkdwn. An event the adapter cannot handle is
dead-lettered on `<prefix>.dlq.slack` with the reason. A 429 is waited out as its
`Retry-After` says (`channels.reply_stream`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable
from typing import Any, TypeVar

import httpx
from slack_bolt.adapter.socket_mode.websockets import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bus import Bus, run_consumers
from bus.files import stage_chat_file
from bus.messages import FileRef, InboundMessage, OutboundMessage
from channels.live import RateLimited, Surface, reply_consumer
from channels.reply_stream import ReplyStream
from channels.splitting import split_text
from channels.unreadable import keep_unreadable
from config import AppConfig, SlackConfig

log = logging.getLogger(__name__)

T = TypeVar("T")

LIMIT = 4_000  # characters per message: Slack's advice "for best results" (it truncates past 40,000)
MAX_TEXT = 40_000  # Slack's limit, counted after mrkdwn escaping
MAX_FILE_BYTES = 50 * 1024 * 1024


def mrkdwn(text: str) -> str:
    """Model Markdown as Slack mrkdwn: escaped &<>, *bold*, <url|links>, headings as bold lines."""
    parts = re.split(r"(```[\s\S]*?```|`[^`\n]+`)", text)
    out = []
    for part in parts:
        escaped = part.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        if part.startswith("`"):
            out.append(escaped)
            continue
        escaped = re.sub(r"\*\*([^*\n]+)\*\*", r"*\1*", escaped)
        escaped = re.sub(r"^#{1,6}\s+(.+)$", r"*\1*", escaped, flags=re.MULTILINE)
        escaped = re.sub(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)", r"<\2|\1>", escaped)
        out.append(escaped)
    return "".join(out)


class SlackAdapter(Surface):
    def __init__(self, bus: Bus, app: AsyncApp, config: SlackConfig) -> None:
        self.bus = bus
        self.app = app
        self.config = config
        self.bot_user: str | None = None
        self.replies = ReplyStream(bus, "slack", self)

    # ------------------------------------------------------------------ inbound

    async def on_event(self, event: dict[str, Any]) -> None:
        try:
            await self._inbound(event)
        except Exception as exc:  # an event we cannot handle is kept in the DLQ, never fatal
            log.exception("slack: could not handle event %s", event.get("type"))
            key = f"{event.get('channel')}:{event.get('ts')}:{event.get('type')}" if event.get("ts") else ""
            reason = f"unreadable event: {type(exc).__name__}: {exc}"
            try:
                await keep_unreadable(self.bus, "slack", event, key, reason, "slack-events")
            except Exception:
                log.exception("slack: could not dead-letter an event")

    async def _inbound(self, event: dict[str, Any]) -> None:
        if event.get("subtype") not in (None, "file_share") or event.get("bot_id") or not event.get("user"):
            return  # edits, joins, bots (ourselves included)
        if self.bot_user is None:
            self.bot_user = (await self.app.client.auth_test()).get("user_id")
        text = str(event.get("text") or "")
        mention = f"<@{self.bot_user}>"
        direct = event.get("channel_type") == "im"
        mentioned = event.get("type") == "app_mention" or mention in text
        if not direct and not mentioned:
            return  # channel chatter the bot was not asked about
        thread_ts = event.get("thread_ts") or (None if direct else event.get("ts"))
        files = await self._files_in(event)
        inbound = InboundMessage(
            channel="slack",
            chat_id=str(event.get("channel")),
            user_id=str(event.get("user")),
            message_id=str(event.get("ts")),
            topic_id=thread_ts,
            chat_type="private" if direct else "group",
            mentioned=mentioned,
            text=text.replace(mention, "").strip(),
            files=files,
        )
        await self.bus.publish(self.bus.subjects.chat_in("slack"), inbound, msg_id=inbound.dedupe_id())

    async def _files_in(self, event: dict[str, Any]) -> list[FileRef]:
        """Files attached to the message, downloaded with the bot token and staged for the router."""
        staged: list[FileRef] = []
        token = self.app.client.token
        for item in event.get("files") or []:
            url = item.get("url_private_download") or item.get("url_private")
            name = str(item.get("name") or item.get("title") or item.get("id") or "file")
            if not url or (item.get("size") or 0) > MAX_FILE_BYTES:
                continue
            async with httpx.AsyncClient(timeout=60, follow_redirects=True) as http:
                response = await http.get(url, headers={"Authorization": f"Bearer {token}"})
            if response.status_code != 200:
                log.warning("slack: could not download %s (%d)", name, response.status_code)
                continue
            content_type = item.get("mimetype") or response.headers.get("content-type")
            store = await self.bus.files()
            chat, ts = str(event.get("channel")), str(event.get("ts"))
            staged.append(
                await stage_chat_file(store, "slack", chat, ts, name, response.content, content_type)
            )
        return staged

    # ------------------------------------------------------------------ outbound (a Surface)

    def split(self, text: str) -> list[str]:
        return split_text(text, LIMIT, measure=lambda piece: len(mrkdwn(piece)), max_size=MAX_TEXT)

    async def post(self, out: OutboundMessage, text: str) -> dict[str, Any]:
        posted = await _patiently(
            self.app.client.chat_postMessage(channel=out.chat_id, thread_ts=out.topic_id, text=mrkdwn(text))
        )
        return {"channel": out.chat_id, "ts": str(posted["ts"])}

    async def edit(self, ref: dict[str, Any], text: str) -> None:
        await _patiently(self.app.client.chat_update(channel=ref["channel"], ts=ref["ts"], text=mrkdwn(text)))

    async def send_file(self, out: OutboundMessage, file: FileRef) -> None:
        if not file.object_name:
            return
        result = await (await self.bus.files()).get(file.object_name)
        await _patiently(
            self.app.client.files_upload_v2(
                channel=out.chat_id,
                thread_ts=out.topic_id,
                file=result.data or b"",
                filename=file.name,
                title=file.name,
            )
        )


async def _patiently(call: Awaitable[T]) -> T:
    """A Web API call whose rate limit is `RateLimited` (waited out by the reply stream, not the SDK)."""
    try:
        return await call
    except SlackApiError as exc:
        if exc.response.status_code != 429:
            raise
        headers = {str(k).lower(): v for k, v in (exc.response.headers or {}).items()}
        retry_after = headers.get("retry-after", 1)
        delay = float(retry_after[0] if isinstance(retry_after, list) else retry_after)
        raise RateLimited(delay, "Slack rate limit") from None


def build_app(config: SlackConfig) -> AsyncApp:
    token = config.resolved("bot_token")
    if not token:
        raise ValueError("channels.slack.bot_token is not set")
    client = AsyncWebClient(token=token, base_url=config.base_url or AsyncWebClient.BASE_URL)
    return AsyncApp(client=client, signing_secret="socket-mode")


async def run(bus: Bus, config: AppConfig) -> None:
    """The Slack adapter component: Socket Mode in, replies out, until cancelled."""
    settings = config.channels.slack
    app = build_app(settings)
    adapter = SlackAdapter(bus, app, settings)

    @app.event("message")
    async def on_message(event: dict[str, Any]) -> None:
        await adapter.on_event(event)

    @app.event("app_mention")
    async def on_mention(event: dict[str, Any]) -> None:
        await adapter.on_event(event)

    handler = AsyncSocketModeHandler(app, app_token=settings.resolved("app_token"), web_client=app.client)
    outbound = reply_consumer(bus, "slack", adapter.replies.deliver)
    await handler.connect_async()
    log.info("slack adapter connected in Socket Mode")
    try:
        await run_consumers(outbound)
    finally:
        await handler.close_async()
