"""What the WeChat Official Account and WeCom adapters share: a callback URL in, Tencent's APIs out.

A message the platform posts becomes an `InboundMessage` on `<prefix>.chat.in.<channel>` (one chat
per user: the platforms have no group chats for an app), with the pictures and files it carries
downloaded (`media/get`) into the object store; published with its MsgId as the bus's dedupe id, so
the platform's retry of it (after a slow answer, or to another copy of the adapter) becomes no
second run. What cannot be read is dead-lettered with the reason and answered as taken.

Replies go through the shared reply stream; neither platform can edit a message, so only final
answers are sent (`streams = False`), in pieces of `TEXT_BYTES`, files after them (`media/upload`).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import PurePosixPath
from typing import Any, TypeVar

import httpx
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from wechatpy.exceptions import InvalidSignatureException

from bus import Bus, Misconfigured, Unreachable, run_consumers
from bus.files import stage_chat_file
from bus.messages import FileRef, InboundMessage, OutboundMessage
from bus.tasks import cancel_and_wait
from channels.delivery import standby
from channels.delivery.consumer import reply_consumer
from channels.delivery.inbound import store_inbound
from channels.delivery.reply_stream import ReplyStream
from channels.delivery.splitting import split_text
from channels.delivery.surface import Surface
from channels.delivery.unreadable import dead_letter_unreadable
from channels.errors import MalformedMessage
from channels.wechat.api import WeixinApi, WeixinError
from channels.wechat.callback import serve_callback
from channels.wechat.messages import CallbackMessage, read_message, xml_fields

log = logging.getLogger(__name__)

TEXT_BYTES = 2048  # both platforms' limit for a text message's content, in UTF-8 bytes
MAX_FILE_BYTES = 20 * 1024 * 1024  # the largest file the platforms take (WeCom's file limit)
MAX_IMAGE_BYTES = 10 * 1024 * 1024  # images (jpg/png) sent as images up to this size
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png"}
_Crypto = TypeVar("_Crypto")
_SEEN = 5000  # message ids remembered in memory (the bus dedupes beyond, across copies)


def utf8_bytes(text: str) -> int:
    return len(text.encode())


class CallbackAdapter(Surface):
    """The shared part of an adapter whose platform posts XML to a callback URL."""

    streams = False  # neither platform lets a message be edited: only the final answer is sent
    channel = ""
    media_path = "/cgi-bin/media/get"
    readable = "text and pictures"  # what to tell a user who sent something else
    taken = ""  # the callback's answer to a message taken (or dead-lettered): WeChat wants "success"

    def __init__(self, bus: Bus, api: WeixinApi, http: httpx.AsyncClient) -> None:
        self.bus = bus
        self.api = api
        self.http = http
        self.replies = ReplyStream(bus, self.channel, self)
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ inbound

    async def decrypt(self, crypto: Any, body: bytes, query: Mapping[str, str]) -> bytes | str | Response:
        """The plain XML of an encrypted callback (`msg_signature`, `timestamp` and `nonce` in the
        query), or the answer to give instead: a signature that does not hold is refused (403); a body
        without an Encrypt element, or one signed but not decryptable with our key, is dead-lettered
        and taken."""
        try:
            encrypted = xml_fields(body).get("Encrypt")
            if not isinstance(encrypted, str) or not encrypted:
                raise MalformedMessage("no Encrypt element")
        except MalformedMessage as exc:
            # Unsigned (the signature covers the Encrypt element): kept for a look, and taken.
            await self.dead_letter(body, f"unreadable callback body: {exc}")
            return PlainTextResponse(self.taken)
        try:
            plain: bytes | str = crypto.decrypt_message(
                {"Encrypt": encrypted}, query["msg_signature"], query["timestamp"], query["nonce"]
            )
        except InvalidSignatureException:
            log.warning("%s: refused a callback whose msg_signature does not hold", self.channel)
            return PlainTextResponse("invalid signature", status_code=403)
        except Exception as exc:  # signed with our token, but not decryptable with our key
            await self.dead_letter(body, f"cannot decrypt the message: {type(exc).__name__}: {exc}")
            return PlainTextResponse(self.taken)
        return plain

    async def read(self, plain: bytes | str) -> CallbackMessage | Response:
        """The message in a callback's plain XML, or the answer when there is none to publish: one that
        cannot be read is dead-lettered and taken, and so is the platform's retry of a message this
        copy has on the bus."""
        try:
            message = read_message(plain)
        except MalformedMessage as exc:
            await self.dead_letter(plain, str(exc))
            return PlainTextResponse(self.taken)
        if self.seen(message):
            return PlainTextResponse(self.taken)
        return message

    def seen(self, message: CallbackMessage) -> bool:
        """Whether this copy took the message already (a platform retry)."""
        return message.ident in self._seen

    async def publish(self, message: CallbackMessage) -> str | None:
        """Put the message on the bus; a short note for the user instead when it holds nothing the
        agent can read (None: published, or nothing to answer)."""
        if message.msg_type == "event":
            return None  # subscriptions, menu clicks, entering the app: nothing was asked
        text = _text_of(message)
        files = await self._files_in(message) if message.media_id else []
        if message.msg_type in ("image", "file") and not files:
            return f"I could not fetch that {message.msg_type}: please send it again."
        if not text.strip() and not files:
            return f"I can't read a {message.msg_type} message. Send me {self.readable} instead."
        inbound = InboundMessage(
            channel=self.channel,
            chat_id=message.from_user,
            user_id=message.from_user,
            message_id=message.ident,
            chat_type="private",
            text=text.strip(),
            files=files,
            metadata=self.metadata(message),
        )
        await store_inbound(self.bus, self.channel, inbound)
        self._seen[message.ident] = None
        while len(self._seen) > _SEEN:
            self._seen.popitem(last=False)
        log.info("%s: message %s from %s is on the bus", self.channel, message.ident, message.from_user)
        return None

    def metadata(self, message: CallbackMessage) -> dict[str, Any]:
        """What the replies to this message carry back (the adapter's own extras)."""
        return {}

    async def _files_in(self, message: CallbackMessage) -> list[FileRef]:
        assert message.media_id is not None
        try:
            response = await self.api.download(self.media_path, message.media_id)
            if response.status_code != 200:
                raise WeixinError(response.status_code, response.text[:200], "media download")
            if response.content[:1] == b"{":  # an errcode answer, not the file
                body = response.json()
                raise WeixinError(int(body.get("errcode") or 0), str(body.get("errmsg")), "media download")
        except Exception as exc:
            log.warning("%s: could not download media %s: %s", self.channel, message.media_id, exc)
            return []
        data = response.content
        if len(data) > MAX_FILE_BYTES:
            log.info(
                "%s: skipping media %s (%d bytes, over the limit)", self.channel, message.media_id, len(data)
            )
            return []
        content_type = response.headers.get("content-type", "").split(";")[0] or None
        name = message.file_name or _disposition_name(response) or _default_name(message, content_type)
        store = await self.bus.files()
        return [
            await stage_chat_file(
                store, self.channel, message.from_user, message.ident, name, data, content_type
            )
        ]

    async def dead_letter(self, raw: bytes | str, reason: str, ident: str = "") -> None:
        data = raw.encode() if isinstance(raw, str) else raw
        await dead_letter_unreadable(self.bus, self.channel, data, reason, ident)

    def spawn(self, work: Any, name: str) -> None:
        """Work after the callback was answered (its failure is logged, never lost silently)."""
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("%s: %s failed: %s", self.channel, task.get_name(), task.exception())

    async def notify(self, user: str, text: str) -> None:
        """A short note from the adapter itself, through the message API."""
        try:
            await self.send_text(user, text)
        except Exception as exc:
            log.warning("%s: could not tell %s: %s", self.channel, user, exc)

    # ------------------------------------------------------------------ outbound (a Surface)

    def split(self, text: str) -> list[str]:
        return split_text(text, TEXT_BYTES, measure=utf8_bytes)

    async def post(self, out: OutboundMessage, text: str) -> dict[str, Any]:
        await self.send_text(out.chat_id, text)
        return {"sent": True}

    async def edit(self, ref: dict[str, Any], text: str) -> None:
        return None  # never called: `streams` is False and a sent message cannot change

    async def send_file(self, out: OutboundMessage, file: FileRef, data: bytes) -> None:
        image = PurePosixPath(file.name).suffix.lower() in IMAGE_SUFFIXES and len(data) <= MAX_IMAGE_BYTES
        if not image and not self.sends_files:
            await self.send_text(out.chat_id, f"(I made {file.name}, but files cannot be sent here.)")
            return
        if len(data) > MAX_FILE_BYTES:
            await self.send_text(out.chat_id, f"({file.name} is too large to send here.)")
            return
        kind = "image" if image else "file"
        uploaded = await self.api.call(
            "POST",
            "/cgi-bin/media/upload",
            params={"type": kind},
            files={"media": (file.name, data, file.content_type or "application/octet-stream")},
        )
        await self.send_media(out.chat_id, kind, str(uploaded["media_id"]))

    sends_files = True  # an Official Account's messages carry images, never other files

    # ------------------------------------------------------------------ what each platform adds

    async def verify(self, request: Request) -> Response:
        """The platform's check of the callback URL (GET)."""
        raise NotImplementedError

    async def receive(self, request: Request) -> Response:
        """A message the platform posts (POST)."""
        raise NotImplementedError

    # What `Misconfigured` says when the platform refuses the credentials ({errmsg}, {code} filled in).
    refused_credentials = ""

    async def check_credentials(self) -> None:
        """Fetch the access token once, at start: credentials the platform refuses are `Misconfigured`."""
        try:
            await self.api.access_token()
        except WeixinError as exc:
            raise Misconfigured(self.refused_credentials.format(errmsg=exc.errmsg, code=exc.code)) from exc

    async def send_text(self, user: str, text: str) -> None:
        await self.send(user, "text", {"content": text})

    async def send_media(self, user: str, kind: str, media_id: str) -> None:
        await self.send(user, kind, {"media_id": media_id})

    async def send(self, user: str, kind: str, content: dict[str, Any]) -> None:
        """One message of `kind` (text, image, file) to a user through the platform's message API."""
        raise NotImplementedError

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.http.aclose()


def make_crypto(
    kind: Callable[[str, str, str], _Crypto], channel: str, token: str, key: str, app_id: str
) -> _Crypto:
    """The platform's message crypto (`kind`: wechatpy's WeChatCrypto for WeChat or for WeCom); a key
    it cannot take is `Misconfigured`."""
    try:
        return kind(token, key, app_id)
    except Exception as exc:  # not 43 characters of base64
        raise Misconfigured(
            f"channels.{channel}.encoding_aes_key is not a valid EncodingAESKey (43 characters): {exc}"
        ) from exc


async def serve_standing_by(
    bus: Bus, name: str, lease_seconds: float, adapter: Callable[[Bus, Any], CallbackAdapter], settings: Any
) -> None:
    """The adapter component: one copy serves at a time (it holds the lease `adapter.<name>`; the
    others stand by and take the callback port over when it dies, `channels.delivery.standby`), each
    term with a new `adapter(bus, settings)` (`serve_active`)."""
    await standby.serve_while_active(
        bus, name, lease_seconds, lambda lost: serve_active(adapter(bus, settings), settings, lost)
    )


async def serve_active(adapter: CallbackAdapter, settings: Any, lost: asyncio.Event) -> None:
    """While this copy holds the adapter's lease: the callback URL served and the replies
    delivered, until the lease is lost (`LeaseLost`) or either fails. The platform's credentials
    are tried first: refused, `Misconfigured`; out of reach, `Unreachable` (tried again later)."""
    name = adapter.channel
    work: list[asyncio.Task[None]] = []
    try:
        try:
            await adapter.check_credentials()
        except httpx.TransportError as exc:
            raise Unreachable(httpx.URL(adapter.api.base).host, str(exc) or type(exc).__name__) from exc
        work = [
            asyncio.create_task(
                serve_callback(
                    name,
                    path=settings.webhook_path,
                    listen=settings.webhook_listen,
                    port=settings.webhook_port,
                    verify=adapter.verify,
                    receive=adapter.receive,
                ),
                name=f"{name}-callback",
            ),
            asyncio.create_task(
                run_consumers(reply_consumer(adapter.bus, name, adapter.replies.deliver)),
                name=f"{name}-replies",
            ),
            asyncio.create_task(standby.watch(lost, name), name=f"{name}-lease-watch"),
        ]
        done, _ = await asyncio.wait(work, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()
    finally:
        await cancel_and_wait(*work)
        await adapter.aclose()


def _text_of(message: CallbackMessage) -> str:
    if message.msg_type == "text":
        return message.content or ""
    if message.msg_type == "link":
        return "\n".join(part for part in (message.title, message.url) if part)
    if message.msg_type == "location":
        return f"(my location: {message.label})" if message.label else ""
    if message.msg_type == "voice":
        return message.recognition or ""  # the platform's transcript, where it makes one
    return ""


def _disposition_name(response: httpx.Response) -> str | None:
    found = re.search(r'filename="?([^";]+)"?', response.headers.get("content-disposition", ""))
    return PurePosixPath(found.group(1)).name if found else None


def _default_name(message: CallbackMessage, content_type: str | None) -> str:
    suffix = {"image/png": ".png", "image/gif": ".gif"}.get(content_type or "", ".jpg")
    if message.msg_type == "image":
        return f"image_{message.ident[-8:]}{suffix}"
    return f"file_{message.ident[-8:]}"
