"""The Telegram adapter: long polling (or a webhook) in, the router's replies out (python-telegram-bot).

An update is confirmed to Telegram only once it is stored on the bus (`channels.telegram.polling`;
the webhook answers 503 until then), so a copy killed meanwhile leaves it to the next.

Updates the library cannot parse are confirmed and dead-lettered, never
fetched again (`channels.telegram.updates`, which also serves the webhook).
The bot's command menu (`setMyCommands`) follows the skills catalog, names
spelled as Telegram accepts them (`channels.command_names`).

Inbound: every message the bot receives (private chats; in groups what
Telegram delivers: commands, mentions, replies) becomes an InboundMessage on
`<prefix>.chat.in.telegram`, deduplicated by chat and message id. Outbound: a
durable consumer of `<prefix>.chat.out.telegram` sends the first partial reply
as a message and edits it as the answer streams, then edits in the final text
(longer replies are split at 4096 characters, never inside a code block), and
sends presented files as documents. Markdown from the model is rendered as
Telegram HTML, falling back to plain text if Telegram refuses it.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
from collections.abc import Awaitable
from pathlib import PurePosixPath
from typing import Any, TypeVar

import httpx
from nats.errors import Error as NatsError
from telegram import BotCommand, InlineKeyboardButton, InlineKeyboardMarkup, InputFile, Message, Update
from telegram.error import BadRequest, InvalidToken, NetworkError, RetryAfter, TelegramError
from telegram.ext import (
    Application,
    ApplicationBuilder,
)

from bus import Bus, BusError, Misconfigured, Unreachable, run_consumers
from bus.files import stage_chat_file
from bus.messages import FileRef, InboundMessage, OutboundMessage
from bus.tasks import cancel_and_wait
from channels.command_names import telegram_commands
from channels.delivery import standby
from channels.delivery.consumer import reply_consumer
from channels.delivery.inbound import TRANSIENT, store_inbound
from channels.delivery.reply_stream import ReplyStream
from channels.delivery.surface import Surface
from channels.errors import RateLimited
from channels.telegram.formatting import render_html, split_message
from channels.telegram.polling import poll
from channels.telegram.updates import OnUnreadable, ScreenedUpdates, dead_letterer, serve_webhook
from config import AppConfig, TelegramConfig
from skills import SkillsCatalog, follow_catalog

log = logging.getLogger(__name__)

T = TypeVar("T")

ANONYMOUS_ADMIN = 1087968824  # @GroupAnonymousBot: whom a group's anonymous admins write as
UNREADABLE = {  # message contents the agent cannot take, with what to call them
    "sticker": "a sticker",
    "voice": "a voice message",
    "video_note": "a video message",
    "video": "a video",
    "audio": "an audio file",
    "animation": "a GIF",
    "location": "a location",
    "venue": "a place",
    "contact": "a contact",
    "poll": "a poll",
    "dice": "a dice roll",
}
EDIT_NOTICE = (
    "I saw your edit, but I only follow new messages: please send the corrected text as a new message."
)
MAX_FILE_BYTES = 20 * 1024 * 1024  # what the Bot API lets a bot download
PHOTO_SUFFIXES = {".jpg", ".jpeg", ".png", ".webp"}  # sent as photos (10 MB at most); the rest as documents


class TelegramAdapter(Surface):
    def __init__(
        self, bus: Bus, app: Application[Any, Any, Any, Any, Any, Any], config: TelegramConfig
    ) -> None:
        self.bus = bus
        self.app = app
        self.config = config
        self.replies = ReplyStream(bus, "telegram", self)
        self.on_unreadable = dead_letterer(bus)

    # ------------------------------------------------------------------ inbound

    async def handle(self, update: Update) -> None:
        """One update, polled or from the webhook: stored on the bus (a message, a pressed button),
        answered by the adapter itself, or dead-lettered with the reason.

        Raises:
            Exception: the bus could not store it (`channels.delivery.inbound.TRANSIENT`, or another
                bus error), or Telegram was out of reach handling it (a `NetworkError` other than a
                `BadRequest`, flood control): Telegram must keep it (not confirmed, the webhook
                answered 503), and it is handled when it comes again.
        """
        try:
            if update.callback_query is not None:
                await self._button(update)
            else:
                await self._inbound(update)
        except (*TRANSIENT, NatsError, BusError):
            raise
        except Exception as exc:  # an update we cannot handle: dead-lettered, never fatal
            if isinstance(exc, NetworkError | RetryAfter) and not isinstance(exc, BadRequest):
                raise  # Telegram out of reach a moment (a file's download, say): it is fetched again
            log.exception("telegram: could not handle update %s", update.update_id)
            await self.on_unreadable(
                update.to_dict(), f"the adapter failed on it: {type(exc).__name__}: {exc}"
            )

    async def _inbound(self, update: Update) -> None:
        message = update.effective_message
        if message is None or message.from_user is None:
            return
        author = message.from_user
        anonymous_admin = author.id == ANONYMOUS_ADMIN and message.sender_chat is not None
        if author.is_bot and not anonymous_admin:
            return  # other bots (ourselves included), and posts a linked channel forwards
        bot = self.app.bot
        username = (bot.username or "").lower()
        text = message.text or message.caption or ""
        entities = message.parse_entities() if message.text else message.parse_caption_entities()
        mentioned = False
        for entity, fragment in entities.items():
            if entity.type == "mention" and fragment.lstrip("@").lower() == username:
                mentioned = True
            if entity.type == "text_mention" and entity.user and entity.user.id == bot.id:
                mentioned = True
            if entity.type == "bot_command" and fragment.lower().endswith(f"@{username}"):
                mentioned = True
        if username:  # the bot's own name is how it was addressed, not part of the question
            text = re.sub(rf"(?i)^(/\w+)@{re.escape(username)}\b", r"\1", text)
            text = re.sub(rf"(?i)(?<![\w@])@{re.escape(username)}\b[,:]?", "", text)
            text = re.sub(r"[ \t]{2,}", " ", text).strip()
        replied = message.reply_to_message
        reply_to_bot = bool(replied and replied.from_user and replied.from_user.id == bot.id)
        private = message.chat.type == "private"
        if update.edited_message is not None:
            if private or mentioned or reply_to_bot:
                await self._notice(message, EDIT_NOTICE)
            return
        files = await self._files_in(message)
        if not text and not files:
            kind = next((name for key, name in UNREADABLE.items() if getattr(message, key, None)), None)
            if message.document is not None:
                kind = "a file over 20 MB"
            if kind and (private or reply_to_bot):
                await self._notice(
                    message,
                    f"I can't read {kind}. Send me text, a photo or a document (up to 20 MB) instead.",
                )
            return  # a service message (someone joined, a pin) or nothing to answer
        if anonymous_admin:
            assert message.sender_chat is not None
            user_id, user_name = f"chat{message.sender_chat.id}", f"{message.sender_chat.title} (admin)"
        else:
            user_id, user_name = str(author.id), author.full_name
        inbound = InboundMessage(
            channel="telegram",
            chat_id=str(message.chat.id),
            user_id=user_id,
            user_name=user_name,
            message_id=str(message.message_id),
            topic_id=str(message.message_thread_id)
            if message.chat.is_forum and message.message_thread_id
            else None,
            chat_type="private" if private else "group",
            mentioned=mentioned,
            reply_to_bot=reply_to_bot,
            text=text,
            files=files,
        )
        await store_inbound(self.bus, "telegram", inbound)

    async def _button(self, update: Update) -> None:
        """A button under a reply pressed (`/approve <id>`, say): the command, as the presser's message."""
        query = update.callback_query
        if query is None or not query.data or query.message is None:
            return
        chat = query.message.chat
        inbound = InboundMessage(
            channel="telegram",
            chat_id=str(chat.id),
            user_id=str(query.from_user.id),
            user_name=query.from_user.full_name,
            message_id=f"button-{query.id}",
            chat_type="private" if chat.type == "private" else "group",
            mentioned=True,  # pressing the bot's button addresses the bot
            text=query.data,
        )
        await store_inbound(self.bus, "telegram", inbound)
        try:  # the spinner on the button stops; the answer comes as a message
            await query.answer(f"Sent: {query.data}")
        except TelegramError as exc:
            log.info("telegram: could not acknowledge button %s: %s", query.id, exc)

    async def _notice(self, message: Message, text: str) -> None:
        """A short answer from the adapter itself, to the message it is about."""
        topic = {"message_thread_id": message.message_thread_id} if message.chat.is_forum else {}
        try:
            await _patiently(
                self.app.bot.send_message(
                    message.chat.id, text, reply_to_message_id=message.message_id, **topic
                )
            )
        except (TelegramError, RateLimited) as exc:
            log.warning("telegram: could not tell chat %s: %s", message.chat.id, exc)

    async def _files_in(self, message: Message) -> list[FileRef]:
        """A document or photo sent to the bot, staged in the object store for the router."""
        if message.document is not None:
            source: Any = message.document
            name = message.document.file_name or f"document_{message.message_id}"
            content_type = message.document.mime_type
        elif message.photo:
            source = message.photo[-1]  # the largest size
            name, content_type = f"photo_{message.message_id}.jpg", "image/jpeg"
        else:
            return []
        if source.file_size and source.file_size > MAX_FILE_BYTES:
            log.info("telegram: skipping %s (%d bytes, over the limit)", name, source.file_size)
            return []
        data = bytes(await (await source.get_file()).download_as_bytearray())
        store = await self.bus.files()
        chat, number = str(message.chat.id), str(message.message_id)
        return [await stage_chat_file(store, "telegram", chat, number, name, data, content_type)]

    # ------------------------------------------------------------------ outbound (a Surface)

    def split(self, text: str) -> list[str]:
        return split_message(text)

    async def post(self, out: OutboundMessage, text: str) -> dict[str, Any]:
        sent = await self._send(int(out.chat_id), text, {**_topic(out), **_keyboard(out)})
        return {"chat": sent.chat_id, "message": sent.message_id}

    async def finish(self, ref: dict[str, Any], text: str, out: OutboundMessage, shown: str) -> None:
        if out.buttons and out.is_final:  # a streamed message gets its buttons with its final text
            await self.edit(ref, text, _keyboard(out))
        elif text != shown:
            await self.edit(ref, text)

    async def edit(self, ref: dict[str, Any], text: str, extra: dict[str, Any] | None = None) -> None:
        chat_id, message_id = ref["chat"], ref["message"]
        extra = extra or {}
        try:
            await self.app.bot.edit_message_text(
                render_html(text), chat_id, message_id, parse_mode="HTML", **extra
            )
        except BadRequest as exc:
            reason = str(exc).lower()
            if "not modified" in reason:
                return
            if "parse entities" not in reason:
                raise
            await _patiently(self.app.bot.edit_message_text(text, chat_id, message_id, **extra))
        except RetryAfter as exc:
            raise RateLimited(_seconds(exc.retry_after), "Telegram asks to wait") from None

    async def send_file(self, out: OutboundMessage, file: FileRef, data: bytes) -> None:
        chat_id, topic = int(out.chat_id), _topic(out)
        upload = InputFile(data, filename=file.name)
        if PurePosixPath(file.name).suffix.lower() in PHOTO_SUFFIXES and len(data) <= 10 * 1024 * 1024:
            await _patiently(self.app.bot.send_photo(chat_id, upload, **topic))
        else:
            await _patiently(self.app.bot.send_document(chat_id, upload, **topic))

    async def _send(self, chat_id: int, text: str, topic: dict[str, Any]) -> Message:
        try:
            return await _patiently(
                self.app.bot.send_message(chat_id, render_html(text), parse_mode="HTML", **topic)
            )
        except BadRequest as exc:
            if "parse entities" not in str(exc).lower():
                raise
            return await _patiently(self.app.bot.send_message(chat_id, text, **topic))


def _keyboard(out: OutboundMessage) -> dict[str, Any]:
    """A final reply's buttons as an inline keyboard, two to a row (Approve, Deny)."""
    if not out.buttons or not out.is_final:
        return {}
    buttons = [InlineKeyboardButton(b.label, callback_data=b.command) for b in out.buttons]
    rows = [buttons[i : i + 2] for i in range(0, len(buttons), 2)]
    return {"reply_markup": InlineKeyboardMarkup(rows)}


def _topic(out: OutboundMessage) -> dict[str, Any]:
    return {"message_thread_id": int(out.topic_id)} if out.topic_id else {}


async def _patiently(call: Awaitable[T]) -> T:
    """A Bot API call whose rate limit is `RateLimited`, the reply stream's word for it."""
    try:
        return await call
    except RetryAfter as exc:
        raise RateLimited(_seconds(exc.retry_after), "Telegram asks to wait") from None


def _seconds(value: Any) -> float:
    return value.total_seconds() if hasattr(value, "total_seconds") else float(value)


def build_application(
    config: TelegramConfig, on_unreadable: OnUnreadable | None = None
) -> Application[Any, Any, Any, Any, Any, Any]:
    """The bot; with `on_unreadable`, updates the library cannot parse go there instead of wedging
    polling (`channels.telegram.updates`)."""
    token = config.resolved("bot_token")
    if not token:
        raise Misconfigured("channels.telegram.bot_token is not set")
    builder = ApplicationBuilder().token(token)
    if on_unreadable is not None:
        builder = builder.get_updates_request(
            ScreenedUpdates(on_unreadable, where=api_host(config), connection_pool_size=1, read_timeout=30)
        )
    else:
        builder = builder.get_updates_read_timeout(30)
    if config.base_url:
        base = config.base_url.rstrip("/")
        builder = builder.base_url(f"{base}/bot").base_file_url(f"{base}/file/bot")
    return builder.build()


def api_host(config: TelegramConfig) -> str:
    """The Bot API's `host[:port]`, as a reason for an outage names it."""
    url = httpx.URL(config.base_url or "https://api.telegram.org")
    return f"{url.host}:{url.port}" if url.port else url.host


async def run(bus: Bus, config: AppConfig) -> None:
    """The Telegram adapter component: poll Telegram, send replies, until cancelled. One copy per bot
    is active at a time; others stand by and take over when it dies (`channels.delivery.standby`).

    Telegram out of reach at start raises `Unreachable` and a token it refuses `Misconfigured`:
    the runtime starts the adapter again later (`bus.supervision`) while the rest of Antler serves.
    Once polling, an outage is ridden out by polling again (`channels.telegram.polling`, which
    confirms an update to Telegram only once it is stored); the adapter says it is unhealthy
    meanwhile (`channels.telegram.updates.ScreenedUpdates`)."""
    settings = config.channels.telegram
    try:
        await standby.serve_while_active(
            bus, "telegram", config.bus.lease_seconds, lambda lost: _serve(bus, config, lost)
        )
    except InvalidToken as exc:  # its own message quotes the token: not for logs
        answer = exc.__cause__ or "rejected"
        raise Misconfigured(
            f"Telegram refused the bot token ({answer}): check channels.telegram.bot_token"
        ) from exc
    except NetworkError as exc:  # TimedOut, a 5xx, the connection refused: the library's words for it
        raise Unreachable(api_host(settings), str(exc)) from exc


async def _serve(bus: Bus, config: AppConfig, lost: asyncio.Event) -> None:
    settings = config.channels.telegram
    app = build_application(settings, dead_letterer(bus))
    adapter = TelegramAdapter(bus, app, settings)
    outbound = reply_consumer(bus, "telegram", adapter.replies.deliver)
    updates = ["message", "edited_message", "callback_query"]
    async with app:
        await app.start()
        if settings.webhook_url:
            receiving = asyncio.create_task(
                serve_webhook(
                    app,
                    adapter.handle,
                    url=settings.webhook_url,
                    listen=settings.webhook_listen,
                    port=settings.webhook_port,
                    secret=settings.resolved("webhook_secret") or secrets.token_urlsafe(32),
                    allowed_updates=updates,
                    on_unreadable=dead_letterer(bus),
                ),
                name="telegram-webhook",
            )
            log.info(
                "telegram adapter: @%s receives updates at %s (listening on %s:%d)",
                app.bot.username,
                settings.webhook_url,
                settings.webhook_listen,
                settings.webhook_port,
            )
        else:
            receiving = asyncio.create_task(poll(app, adapter.handle, updates), name="telegram-polling")
            log.info("telegram adapter polling as @%s", app.bot.username)
        menu = asyncio.create_task(offer_commands(bus, app), name="telegram-commands")
        # The replies, and the polling or the webhook server: either ending (failing) ends the adapter.
        work = [asyncio.create_task(run_consumers(outbound)), receiving]
        work.append(asyncio.create_task(standby.watch(lost, "telegram")))
        try:
            done, _ = await asyncio.wait(work, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
        finally:
            await cancel_and_wait(*work, menu)
            await asyncio.shield(_stop(app))


async def offer_commands(bus: Bus, app: Application[Any, Any, Any, Any, Any, Any]) -> None:
    """Keep the bot's command menu (`setMyCommands`) to the built-in commands and the enabled skills,
    spelled as Telegram accepts them, as the skills catalog changes. Runs until cancelled."""
    offered: list[tuple[str, str]] | None = None

    async def offer(catalog: SkillsCatalog | None) -> None:
        nonlocal offered
        commands = telegram_commands(catalog)
        if commands != offered:
            await app.bot.set_my_commands([BotCommand(name, about) for name, about in commands])
            offered = commands
            log.info("telegram: offering %d commands", len(commands))

    await follow_catalog(bus, offer, "telegram commands")


async def _stop(app: Application[Any, Any, Any, Any, Any, Any]) -> None:
    try:
        if app.running:
            await app.stop()
    except TelegramError as exc:
        log.warning("telegram: stopping: %s", exc)
