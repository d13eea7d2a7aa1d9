"""The Slack adapter: slack-bolt in Socket Mode in, the router's replies out.

Inbound: direct messages and `app_mention`s become InboundMessages on
`<prefix>.chat.in.slack`; a mention can arrive both as `message` and as
`app_mention`, and both carry the same `ts`, so the second is dropped as a
duplicate. A conversation is the DM, or the Slack thread the message is in.
Slash commands (`/status`, `/new`, a skill's `/name`) are acknowledged at
once and taken as the same text typed to the bot, answered in the
conversation they were used in; a message shortcut asks about its message,
in that message's thread.
Outbound: a channel mention is answered in its thread, a direct message
plainly in the DM (in a thread only if the user wrote in one): the first
partial is posted, then updated (`chat.update`) as the answer streams, and
the final text replaces it (a long one continues in more messages, cut at
paragraph or line ends); presented files are uploaded (`files_upload_v2`).
Model Markdown is rendered as Slack mrkdwn. A 429 is waited out as its
`Retry-After` says (`channels.delivery.reply_stream`): chat.postMessage's limit holds
only its channel, the other methods' limits the whole app.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
from slack_bolt.adapter.socket_mode.websockets import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bus import Bus, Misconfigured
from bus.files import stage_chat_file
from bus.messages import FileRef, InboundMessage, OutboundMessage
from bus.tasks import cancel_and_wait
from channels.delivery import standby
from channels.delivery.connection_health import watch_connection
from channels.delivery.inbound import store_inbound
from channels.delivery.reply_stream import ReplyStream
from channels.delivery.splitting import split_text
from channels.delivery.standby import ReplyHandler
from channels.delivery.surface import Surface
from channels.delivery.unreadable import dead_letter_unreadable
from channels.errors import RateLimited
from config import AppConfig, SlackConfig

log = logging.getLogger(__name__)

T = TypeVar("T")

# apps.connections.open's answers for an app token that cannot work (retrying soon will not help).
REFUSED_TOKEN = {"invalid_auth", "not_authed", "account_inactive", "token_revoked", "not_allowed_token_type"}
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
        except Exception as exc:  # acknowledged already: kept in the DLQ with the reason, never fatal
            await dead_letter_unreadable(
                self.bus,
                "slack",
                json.dumps(event, default=str).encode(),
                f"{type(exc).__name__}: {exc}",
                f"{event.get('channel')}:{event.get('ts')}",
            )

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
        await store_inbound(self.bus, "slack", inbound)

    async def on_command(self, command: dict[str, Any]) -> None:
        """A slash command (`/status`, `/new`, a skill's `/name`), already acknowledged: the router
        takes it as the same text typed to the bot, and answers in the conversation it came from."""
        try:
            channel, user = str(command.get("channel_id") or ""), str(command.get("user_id") or "")
            name = str(command.get("command") or "").strip()
            if not channel or not user or not name.startswith("/"):
                log.warning("slack: a slash command without channel, user or name skipped: %.200r", command)
                return
            direct = channel.startswith("D") or command.get("channel_name") == "directmessage"
            text = f"{name} {command.get('text') or ''}".strip()
            # No message ts: the trigger id names this invocation (and dedupes Slack's retries).
            await self._publish(channel, user, str(command.get("trigger_id")), None, direct, text)
        except Exception:  # logged and skipped, never fatal (it is acknowledged already)
            log.exception("slack: could not handle the slash command %s", command.get("command"))

    async def on_shortcut(self, shortcut: dict[str, Any]) -> None:
        """A message shortcut ("ask the bot about this message"), already acknowledged: the message's
        text goes to the agent and is answered in that message's thread. Global shortcuts carry no
        conversation to answer in, and are only acknowledged."""
        if shortcut.get("type") != "message_action":
            log.info("slack: a %s shortcut acknowledged (nothing to answer)", shortcut.get("type"))
            return
        try:
            channel = str((shortcut.get("channel") or {}).get("id") or "")
            user = str((shortcut.get("user") or {}).get("id") or "")
            message = shortcut.get("message") or {}
            text = str(message.get("text") or "").strip()
            if not channel or not user or not text:
                return
            topic = str(message.get("thread_ts") or message.get("ts") or "") or None
            direct = channel.startswith("D")
            await self._publish(
                channel, user, str(shortcut.get("trigger_id")), None if direct else topic, direct, text
            )
        except Exception:
            log.exception("slack: could not handle a message shortcut")

    async def on_button(self, body: dict[str, Any]) -> None:
        """A button under a reply pressed (already acknowledged): its command (`/approve <id>`) goes
        to the router as the presser's message, in the conversation the reply is in."""
        try:
            action = (body.get("actions") or [{}])[0]
            channel = str((body.get("channel") or {}).get("id") or "")
            user = str((body.get("user") or {}).get("id") or "")
            text = str(action.get("value") or "").strip()
            if not channel or not user or not text.startswith("/"):
                return
            message = body.get("message") or {}
            direct = channel.startswith("D")
            topic = None if direct else (str(message.get("thread_ts") or "") or None)
            pressed = str(action.get("action_ts") or body.get("trigger_id") or "")
            await self._publish(channel, user, f"button-{pressed}", topic, direct, text)
        except Exception:  # logged and skipped, never fatal (it is acknowledged already)
            log.exception("slack: could not handle a button")

    async def _publish(
        self, channel: str, user: str, message_id: str, topic: str | None, direct: bool, text: str
    ) -> None:
        inbound = InboundMessage(
            channel="slack",
            chat_id=channel,
            user_id=user,
            message_id=message_id,
            topic_id=topic,
            chat_type="private" if direct else "group",
            mentioned=True,  # invoked on the bot by name
            text=text,
        )
        await store_inbound(self.bus, "slack", inbound)

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
            self.app.client.chat_postMessage(
                channel=out.chat_id, thread_ts=out.topic_id, text=mrkdwn(text), **_blocks(out, text)
            ),
            scope="chat",  # chat.postMessage is limited per channel (about one a second)
        )
        return {"channel": out.chat_id, "ts": str(posted["ts"])}

    async def edit(self, ref: dict[str, Any], text: str, extra: dict[str, Any] | None = None) -> None:
        await _patiently(
            self.app.client.chat_update(
                channel=ref["channel"], ts=ref["ts"], text=mrkdwn(text), **(extra or {})
            )
        )

    async def finish(self, ref: dict[str, Any], text: str, out: OutboundMessage, shown: str) -> None:
        if out.buttons and out.is_final:  # a streamed message gets its buttons with its final text
            await self.edit(ref, text, _blocks(out, text))
        elif text != shown:
            await self.edit(ref, text)

    async def send_file(self, out: OutboundMessage, file: FileRef, data: bytes) -> None:
        await _patiently(
            self.app.client.files_upload_v2(
                channel=out.chat_id,
                thread_ts=out.topic_id,
                file=data,
                filename=file.name,
                title=file.name,
            )
        )


BUTTON_ACTION = "antler_command"  # action ids of our buttons: antler_command_<n>


def _blocks(out: OutboundMessage, text: str) -> dict[str, Any]:
    """A final reply's buttons as Block Kit: the text, then an actions block (Approve, Deny)."""
    if not out.buttons or not out.is_final:
        return {}
    buttons = [
        {
            "type": "button",
            "action_id": f"{BUTTON_ACTION}_{number}",
            "text": {"type": "plain_text", "text": button.label[:75]},
            "value": button.command,
            **({"style": "danger"} if button.command.startswith("/deny") else {}),
        }
        for number, button in enumerate(out.buttons)
    ]
    section = {"type": "section", "text": {"type": "mrkdwn", "text": mrkdwn(text)[:3000]}}
    return {"blocks": [section, {"type": "actions", "elements": buttons[:25]}]}


async def _patiently(call: Awaitable[T], *, scope: str = "platform") -> T:
    """A Web API call whose rate limit is `RateLimited` (waited out by the reply stream, not the SDK).

    Slack limits most methods per app and workspace (`scope` "platform"); chat.postMessage per
    channel ("chat")."""
    try:
        return await call
    except SlackApiError as exc:
        if exc.response.status_code != 429:
            raise
        headers = {str(k).lower(): v for k, v in (exc.response.headers or {}).items()}
        retry_after = headers.get("retry-after", 1)
        delay = float(retry_after[0] if isinstance(retry_after, list) else retry_after)
        raise RateLimited(delay, "Slack rate limit", scope=scope) from None


def build_app(config: SlackConfig) -> AsyncApp:
    token = config.resolved("bot_token")
    if not token:
        raise Misconfigured("channels.slack.bot_token is not set")
    client = AsyncWebClient(token=token, base_url=config.base_url or AsyncWebClient.BASE_URL)
    # Handlers run before Slack is acknowledged: an event is acknowledged once it is on the bus, so
    # one whose process died first is delivered again (to another copy, if several run).
    return AsyncApp(client=client, signing_secret="socket-mode", process_before_response=True)


async def run(bus: Bus, config: AppConfig) -> None:
    """The Slack adapter component: Socket Mode in, replies out, until cancelled.

    Any number of copies may run: Slack takes up to ten Socket Mode connections per app and hands
    each event to one of them. Every copy stays connected and acknowledges an event only after the
    bus has it (`process_before_response`), so an event whose copy died first is sent again by
    Slack, to a copy still there; a retry that reaches another copy is the same message
    (`InboundMessage.dedupe_id`) and becomes no second run. One copy at a time delivers the
    replies (`channels.delivery.standby.deliver_replies_while_active`)."""
    settings = config.channels.slack
    app = build_app(settings)
    adapter = SlackAdapter(bus, app, settings)

    @app.event("message")
    async def on_message(event: dict[str, Any]) -> None:
        await adapter.on_event(event)

    @app.event("app_mention")
    async def on_mention(event: dict[str, Any]) -> None:
        await adapter.on_event(event)

    # Slack wants an acknowledgement within 3 seconds: first that, then the work (the ack goes out
    # when the handler returns: by then the command is on the bus).
    @app.command(re.compile(r"^/"))
    async def on_command(ack: AsyncAck, command: dict[str, Any]) -> None:
        await ack()
        await adapter.on_command(command)

    @app.action(re.compile(f"^{BUTTON_ACTION}_"))
    async def on_button(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        await adapter.on_button(body)

    @app.shortcut(re.compile(".*"))
    async def on_shortcut(ack: AsyncAck, shortcut: dict[str, Any]) -> None:
        await ack()
        await adapter.on_shortcut(shortcut)

    if not settings.resolved("app_token"):
        raise Misconfigured("channels.slack.app_token is not set (Socket Mode needs an app-level token)")
    handler = AsyncSocketModeHandler(app, app_token=settings.resolved("app_token"), web_client=app.client)

    def new_replies() -> ReplyHandler:
        adapter.replies = ReplyStream(bus, "slack", adapter)
        return adapter.replies.deliver

    watching: asyncio.Task[None] | None = None
    try:
        try:  # Slack out of reach raises the client's OSError, which the runtime retries with backoff
            await handler.connect_async()  # type: ignore[no-untyped-call]  # slack_sdk leaves it unannotated
        except SlackApiError as exc:
            error = exc.response.get("error")
            if error in REFUSED_TOKEN:
                raise Misconfigured(
                    f"Slack refused the app token ({error}): check channels.slack.app_token"
                ) from exc
            raise
        log.info("slack adapter connected in Socket Mode")
        # Later, slack_sdk reconnects by itself; meanwhile the adapter says it is unhealthy.
        down = f"the Socket Mode connection to {_host(settings)} is down; slack_sdk is reconnecting"
        watching = asyncio.create_task(watch_connection("slack", handler.client.is_connected, down))
        await standby.deliver_replies_while_active(bus, "slack", config.bus.lease_seconds, new_replies)
    finally:
        await cancel_and_wait(watching)
        await handler.close_async()  # type: ignore[no-untyped-call]  # slack_sdk leaves it unannotated


def _host(settings: SlackConfig) -> str:
    return urlsplit(settings.base_url or AsyncWebClient.BASE_URL).netloc
