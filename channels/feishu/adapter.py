"""The Feishu/Lark adapter: lark-oapi's long connection in, one card per answer out.

Inbound: lark-oapi's WebSocket client (`lark_oapi.ws.Client`, run on a
thread of its own by `channels.feishu.ws`) delivers `im.message.receive_v1`
events; each is handed to our loop, published as an InboundMessage, and only
then acknowledged (a failed publish
answers 500 and Feishu delivers the event again). Events of other types are
logged and acknowledged; one that cannot be read is acknowledged and
dead-lettered with the reason (`channels.delivery.unreadable`). Images and files in a message are downloaded
(`GET /open-apis/im/v1/messages/:id/resources/:key`) into the object store.

Buttons (Approve, Deny) under an approval request, and their presses: `channels.feishu.cards`.

Outbound: the first partial answer is sent as an interactive card
(`config.update_multi`) replying to the user's message, patched in place
(`PATCH /open-apis/im/v1/messages/:id`) as the answer streams and a last time
with the final text if it differs (a long one continues in more cards, cut at
paragraph or line ends; rate limits wait as `x-ogw-ratelimit-reset` says);
presented files are uploaded (`/im/v1/images`,
`/im/v1/files`) and sent as replies. REST calls go through lark-oapi's async
methods with a tenant token this adapter fetches and caches itself (the SDK's
own token fetch would block the event loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import mimetypes
import time
from collections import OrderedDict
from pathlib import PurePosixPath
from typing import Any

import lark_oapi as lark
from lark_oapi.api.im.v1 import (
    CreateFileRequest,
    CreateFileRequestBody,
    CreateImageRequest,
    CreateImageRequestBody,
    CreateMessageRequest,
    CreateMessageRequestBody,
    GetMessageResourceRequest,
    PatchMessageRequest,
    PatchMessageRequestBody,
    ReplyMessageRequest,
    ReplyMessageRequestBody,
)
from lark_oapi.ws.exception import ClientException

import channels.feishu.lark_http as lark_http
from bus import Bus, Misconfigured, Retry
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
from channels.errors import PlatformError, RateLimited
from channels.feishu.cards import BUTTON_EVENT, button_elements, card, pressed
from channels.feishu.ws import LongConnection
from config import AppConfig, FeishuConfig

log = logging.getLogger(__name__)

DOMAINS = {"feishu": lark.FEISHU_DOMAIN, "lark": lark.LARK_DOMAIN}
LIMIT = 8_000  # characters per card
MAX_CARD_BYTES = 28_000  # a card's JSON may be 30 KB (CJK text is 3 bytes a character)
MAX_FILE_BYTES = 30 * 1024 * 1024  # Feishu's limit for files a bot sends; images are 10 MB
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".ico", ".tiff", ".heic"}
FILE_TYPES = {
    ".opus": "opus",
    ".mp4": "mp4",
    ".pdf": "pdf",
    ".doc": "doc",
    ".docx": "doc",
    ".xls": "xls",
    ".xlsx": "xls",
    ".ppt": "ppt",
    ".pptx": "ppt",
}
APP_RATE_LIMITED = 99991400  # the app's frequency limit on an API: every chat waits
CHAT_RATE_LIMITED = 230020  # a limit on one chat: messages into it, or updates of one message


class FeishuError(PlatformError):
    """Feishu refused a call (the app's credentials or permissions, say), with the platform's `code`."""

    def __init__(self, action: str, code: int | None, message: str | None) -> None:
        super().__init__(f"Feishu refused {action}: {message or 'no message'} (code {code})")
        self.code = code


def message_text(message_type: str, content: dict[str, Any], mentions: dict[str, str]) -> str:
    """The readable text of a message; `mentions` maps placeholders like `@_user_1` to what replaces them."""
    if message_type == "text":
        text = str(content.get("text") or "")
    elif message_type == "post":
        post = content if "content" in content else next(iter(content.values()), {})
        lines = [str(post.get("title") or "")] if post.get("title") else []
        for paragraph in post.get("content") or []:
            parts = []
            for item in paragraph:
                tag = item.get("tag")
                if tag in ("text", "a", "md", "code_block"):
                    parts.append(str(item.get("text") or ""))
                elif tag == "at":
                    parts.append(
                        mentions.get(str(item.get("user_id")), "@" + str(item.get("user_name") or ""))
                    )
            lines.append("".join(parts))
        text = "\n".join(lines)
    else:
        return ""
    for key, replacement in mentions.items():
        text = text.replace(key, replacement)
    if message_type == "post":
        text = "\n".join(line.strip() for line in text.splitlines())
    return text.strip()


def message_resources(message_type: str, content: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(key, resource type, file name) of the images and files a message carries."""
    if message_type == "image" and content.get("image_key"):
        return [(content["image_key"], "image", "")]
    if message_type in ("file", "audio", "media") and content.get("file_key"):
        return [(content["file_key"], "file", str(content.get("file_name") or ""))]
    if message_type == "post":
        post = content if "content" in content else next(iter(content.values()), {})
        return [
            (item["image_key"], "image", "")
            for paragraph in post.get("content") or []
            for item in paragraph
            if item.get("tag") == "img" and item.get("image_key")
        ]
    return []


class FeishuAdapter(Surface):
    def __init__(self, bus: Bus, config: FeishuConfig) -> None:
        self.bus = bus
        self.config = config
        lark_http.install()  # lark-oapi's calls on one kept connection, not a new client each
        domain = config.domain or "feishu"
        self.domain = DOMAINS.get(domain.lower(), domain).rstrip("/")
        self.client = (
            lark.Client.builder()
            .app_id(config.resolved("app_id"))
            .app_secret(config.resolved("app_secret"))
            .domain(self.domain)
            .enable_set_token(True)
            .log_level(lark.LogLevel.WARNING)
            .build()
        )
        self.bot_open_id: str | None = None
        self.replies = ReplyStream(bus, "feishu", self)  # one card per answer, patched as it streams
        self.sent: OrderedDict[str, None] = OrderedDict()  # our recent message ids, to spot replies to us
        self._token: tuple[str, float] | None = None

    # ------------------------------------------------------------------ REST plumbing

    async def _option(self) -> lark.RequestOption:
        if self._token is None or self._token[1] < time.monotonic():
            request = (
                lark.BaseRequest.builder()
                .http_method(lark.HttpMethod.POST)
                .uri("/open-apis/auth/v3/tenant_access_token/internal")
                .body(
                    {
                        "app_id": self.config.resolved("app_id"),
                        "app_secret": self.config.resolved("app_secret"),
                    }
                )
                .build()
            )
            response = await self.client.arequest(request)
            body = json.loads(response.raw.content or b"{}") if response.raw else {}
            if body.get("code") != 0 or not body.get("tenant_access_token"):
                raise FeishuError("the app credentials", body.get("code"), body.get("msg"))
            lifetime = max(60, int(body.get("expire") or 7200) - 300)
            self._token = (body["tenant_access_token"], time.monotonic() + lifetime)
        return lark.RequestOption.builder().tenant_access_token(self._token[0]).build()

    def _check(self, action: str, response: Any) -> Any:
        if response.success():
            return response
        if response.code == CHAT_RATE_LIMITED:
            raise RateLimited(_reset_seconds(response.raw), f"Feishu's chat limit while {action}")
        if response.code == APP_RATE_LIMITED or (response.raw and response.raw.status_code == 429):
            raise RateLimited(
                _reset_seconds(response.raw), f"Feishu rate limit while {action}", scope="platform"
            )
        if response.code in (99991663, 99991661, 99991668):  # the token expired or was revoked
            self._token = None
            raise Retry(f"Feishu token refused while {action}", delay=0.5)
        raise FeishuError(action, response.code, response.msg)

    async def fetch_bot_identity(self) -> None:
        """The bot's open_id, to tell mentions of the bot from mentions of others."""
        request = (
            lark.BaseRequest.builder()
            .http_method(lark.HttpMethod.GET)
            .uri("/open-apis/bot/v3/info")
            .token_types({lark.AccessTokenType.TENANT})
            .build()
        )
        response = await self.client.arequest(request, await self._option())
        body = json.loads(response.raw.content or b"{}") if response.raw else {}
        self.bot_open_id = (body.get("bot") or {}).get("open_id")
        log.info("feishu: bot %s (%s)", (body.get("bot") or {}).get("app_name"), self.bot_open_id)

    # ------------------------------------------------------------------ inbound

    async def on_event(self, payload: bytes) -> None:
        """One event from the long connection. Raises only when the bus refused it (Feishu retries)."""
        try:
            event = json.loads(payload)
            kind = (event.get("header") or {}).get("event_type")
            if kind == BUTTON_EVENT:  # a button under a card pressed: its command, as the presser's
                inbound = pressed(event)
            elif kind != "im.message.receive_v1":
                log.info("feishu: skipping a %s event", kind or "schema 1.0")
                return
            else:
                inbound = await self._inbound(event["event"])
        except Exception as exc:  # an event we cannot read is acknowledged and dead-lettered
            event_id = ""
            with contextlib.suppress(Exception):
                event_id = str(json.loads(payload)["header"]["event_id"])
            await dead_letter_unreadable(
                self.bus, "feishu", payload, f"{type(exc).__name__}: {exc}", event_id
            )
            return
        if inbound is not None:
            await store_inbound(self.bus, "feishu", inbound)

    async def _inbound(self, event: dict[str, Any]) -> InboundMessage | None:
        sender = event.get("sender") or {}
        message = event.get("message") or {}
        if sender.get("sender_type") not in (None, "user"):
            return None  # other bots, ourselves included
        message_id = str(message.get("message_id") or "")
        chat_id = str(message.get("chat_id") or "")
        if not message_id or not chat_id:
            return None
        message_type = str(message.get("message_type") or "")
        content = json.loads(message.get("content") or "{}")
        mentions: dict[str, str] = {}
        mentioned = False
        for mention in message.get("mentions") or []:
            open_id = (mention.get("id") or {}).get("open_id")
            is_bot = open_id is not None and open_id == self.bot_open_id
            # Without the bot's id (Feishu unreachable at start), any mention counts: groups deliver
            # only messages that mention the bot unless the app may read all of them.
            mentioned = mentioned or is_bot or self.bot_open_id is None
            mentions[str(mention.get("key"))] = "" if is_bot else "@" + str(mention.get("name") or "")
        text = message_text(message_type, content, mentions)
        files = await self._files_in(message_id, chat_id, message_type, content)
        if not text and not files:
            log.info("feishu: skipping a %s message with nothing to answer", message_type)
            return None
        sender_ids = sender.get("sender_id") or {}
        return InboundMessage(
            channel="feishu",
            chat_id=chat_id,
            user_id=str(sender_ids.get("open_id") or sender_ids.get("user_id") or "unknown"),
            message_id=message_id,
            topic_id=message.get("thread_id") or None,
            chat_type="private" if message.get("chat_type") == "p2p" else "group",
            mentioned=mentioned,
            reply_to_bot=message.get("parent_id") in self.sent,
            text=text,
            files=files,
        )

    async def _files_in(
        self, message_id: str, chat_id: str, message_type: str, content: dict[str, Any]
    ) -> list[FileRef]:
        staged: list[FileRef] = []
        for key, kind, name in message_resources(message_type, content):
            request = (
                GetMessageResourceRequest.builder().message_id(message_id).file_key(key).type(kind).build()
            )
            response = await self.client.im.v1.message_resource.aget(request, await self._option())
            if not response.success() or response.file is None:
                log.warning("feishu: could not download %s %s: %s", kind, key, response.msg)
                continue
            data = response.file.read()
            if len(data) > MAX_FILE_BYTES:
                log.info("feishu: skipping %s (%d bytes, over the limit)", key, len(data))
                continue
            content_type = (response.raw.headers.get("content-type") or "").split(";")[0] or None
            if not name:
                name = response.file_name or f"{kind}_{key[-8:]}" + (
                    mimetypes.guess_extension(content_type or "") or ""
                )
            store = await self.bus.files()
            staged.append(
                await stage_chat_file(store, "feishu", chat_id, message_id, name, data, content_type)
            )
        return staged

    # ------------------------------------------------------------------ outbound (a Surface)

    def split(self, text: str) -> list[str]:
        return split_text(
            text, LIMIT, measure=lambda piece: len(card(piece).encode()), max_size=MAX_CARD_BYTES
        )

    async def post(self, out: OutboundMessage, text: str) -> dict[str, Any]:
        return {"message_id": await self._send(out, "interactive", card(text, button_elements(out)))}

    async def finish(self, ref: dict[str, Any], text: str, out: OutboundMessage, shown: str) -> None:
        if out.buttons and out.is_final:  # a streamed card gets its buttons with its final text
            await self.edit(ref, text, button_elements(out))
        elif text != shown:
            await self.edit(ref, text)

    async def edit(self, ref: dict[str, Any], text: str, extra: list[dict[str, Any]] | None = None) -> None:
        request = (
            PatchMessageRequest.builder()
            .message_id(ref["message_id"])
            .request_body(PatchMessageRequestBody.builder().content(card(text, extra)).build())
            .build()
        )
        self._check("a card update", await self.client.im.v1.message.apatch(request, await self._option()))

    async def _send(self, out: OutboundMessage, msg_type: str, content: str) -> str:
        """Reply to the user's message (in its topic, if it had one), or post into the chat."""
        option = await self._option()
        if out.reply_to:
            body = ReplyMessageRequestBody.builder().msg_type(msg_type).content(content)
            request = (
                ReplyMessageRequest.builder()
                .message_id(out.reply_to)
                .request_body(body.reply_in_thread(bool(out.topic_id)).build())
                .build()
            )
            response = self._check("a reply", await self.client.im.v1.message.areply(request, option))
        else:
            body = CreateMessageRequestBody.builder().receive_id(out.chat_id).msg_type(msg_type)
            request = (
                CreateMessageRequest.builder()
                .receive_id_type("chat_id")
                .request_body(body.content(content).build())
                .build()
            )
            response = self._check("a message", await self.client.im.v1.message.acreate(request, option))
        message_id = str(response.data.message_id)
        self.sent[message_id] = None
        while len(self.sent) > 1000:
            self.sent.popitem(last=False)
        return message_id

    async def send_file(self, out: OutboundMessage, file: FileRef, data: bytes) -> None:
        suffix = PurePosixPath(file.name).suffix.lower()
        option = await self._option()
        if suffix in IMAGE_SUFFIXES and len(data) <= 10 * 1024 * 1024:
            body = CreateImageRequestBody.builder().image_type("message").image(io.BytesIO(data)).build()
            request = CreateImageRequest.builder().request_body(body).build()
            uploaded = self._check("an image", await self.client.im.v1.image.acreate(request, option))
            await self._send(out, "image", json.dumps({"image_key": uploaded.data.image_key}))
            return
        if len(data) > MAX_FILE_BYTES:
            await self._send(out, "interactive", card(f"({file.name} is too large to send here.)"))
            return
        body = (
            CreateFileRequestBody.builder()
            .file_type(FILE_TYPES.get(suffix, "stream"))
            .file_name(file.name)
            .file(io.BytesIO(data))
            .build()
        )
        request = CreateFileRequest.builder().request_body(body).build()
        uploaded = self._check("a file", await self.client.im.v1.file.acreate(request, option))
        await self._send(out, "file", json.dumps({"file_key": uploaded.data.file_key}))


def _reset_seconds(raw: Any) -> float:
    """When Feishu's rate limit lets us call again: its `x-ogw-ratelimit-reset` header (seconds)."""
    headers = {str(k).lower(): v for k, v in ((raw.headers if raw is not None else None) or {}).items()}
    try:
        return max(0.0, float(headers.get("x-ogw-ratelimit-reset", 1.0)))
    except (TypeError, ValueError):
        return 1.0


async def run(bus: Bus, config: AppConfig) -> None:
    """The Feishu/Lark adapter component: the long connection in, cards out, until cancelled.

    Any number of copies may run: Feishu takes up to 50 long connections per app and pushes each
    event to one of them (never to all), pushing it again if it is not acknowledged within 3
    seconds. Every copy stays connected and acknowledges an event only once the bus has it
    (`channels.feishu.ws`); a push that reaches a second copy is the same message
    (`InboundMessage.dedupe_id`) and becomes no second run. One copy at a time delivers the
    replies (`channels.delivery.standby.deliver_replies_while_active`)."""
    settings = config.channels.feishu
    if not settings.resolved("app_id") or not settings.resolved("app_secret"):
        raise Misconfigured("channels.feishu.app_id and app_secret must be set")
    adapter = FeishuAdapter(bus, settings)
    try:
        await adapter.fetch_bot_identity()
    except FeishuError as exc:  # the credentials, or the app's permissions: retrying will not help
        await lark_http.close()
        raise Misconfigured(f"{exc}: check channels.feishu") from exc
    except Exception as exc:  # Feishu unreachable now: mentions are told apart without the bot's id
        log.warning("feishu: could not look up the bot (%s); carrying on", exc)
    connection = LongConnection(settings, adapter.domain, adapter.on_event)
    connection.start()
    # lark-oapi connects (and reconnects) by itself, quietly: the adapter says when it cannot.
    down = f"the long connection to {adapter.domain} is down; lark-oapi is reconnecting"
    watching = asyncio.create_task(watch_connection("feishu", connection.connected, down))

    def new_replies() -> ReplyHandler:
        adapter.replies = ReplyStream(bus, "feishu", adapter)
        return adapter.replies.deliver

    replies = asyncio.create_task(
        standby.deliver_replies_while_active(bus, "feishu", config.bus.lease_seconds, new_replies),
        name="feishu-replies",
    )
    try:
        waiting: set[asyncio.Future[Any]] = {replies, connection.failed}
        done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if connection.failed in done:
            failure = connection.failed.result()
            if isinstance(failure, ClientException):  # the credentials or the app, as Feishu said
                raise Misconfigured(f"Feishu refused the long connection: {failure}") from failure
            raise RuntimeError(f"feishu: the long connection gave up: {failure}")
        await replies
    finally:
        await cancel_and_wait(replies, watching)
        await connection.stop()
        await lark_http.close()
