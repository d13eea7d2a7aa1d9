"""The Microsoft Teams adapter: the bot's messaging endpoint in, the Bot Connector out.

Inbound: the Bot Connector posts each activity to the messaging endpoint (`webhook_path`, served
with aiohttp). Its JWT is checked by the Microsoft 365 Agents SDK before anything else
(`channels.msteams.auth`: 401 when missing or not valid). A message activity in a personal chat, or
one in a channel or group chat that @-mentions the bot (every one with
`require_mention_in_groups: false`), becomes an InboundMessage on `<prefix>.chat.in.msteams`,
deduplicated by its activity id (the Bot Connector sends an activity again when the endpoint was
slow), and the bot shows it is typing. A personal or group chat is one conversation; in a channel
each post's reply chain is one (chat id: the channel, topic: the post). Files shared with the bot
are downloaded into the thread's uploads. A body that is not an activity is refused with 400 and
dead-lettered with the reason.

Outbound: the first partial answer is sent into the conversation (the reply chain, in a channel:
`POST /v3/conversations/{id}/activities`), then updated in place (`PUT .../activities/{id}`) as
the answer streams, within Teams' per-conversation rate limit (`channels.msteams.connector`); a
long answer continues in more messages. Teams renders Markdown itself, so the text goes as it is.
A final answer asking for approval carries its buttons as an Adaptive Card (a press comes back as
the button's command). Pictures the agent presents are sent inline; other files, in a personal
chat, through Teams' file consent card (`channels.msteams.files`), elsewhere named in a note.

One copy serves the endpoint at a time (the lease `adapter.msteams`); a standby on the same host
takes the port over when it dies, finishing its unfinished answer in the message already shown.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import re
import warnings
from collections import OrderedDict
from pathlib import PurePosixPath
from typing import Any

import httpx
from aiohttp import web
from microsoft_agents.activity import Activity, Attachment, ConversationReference
from microsoft_agents.hosting.aiohttp import jwt_authorization_decorator
from pydantic import ValidationError

from bus import Bus, Misconfigured, run_consumers
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
from channels.msteams import files
from channels.msteams.auth import ConnectorTokens, auth_configuration, service_url_matches, use_signing_keys
from channels.msteams.connector import Connector
from config import AppConfig
from config.channels import MSTeamsConfig

log = logging.getLogger(__name__)

LIMIT = 7000  # characters per message: Teams takes about 28 KB, and a character is at most 4 bytes
MAX_FILE_IN = 25 * 1024 * 1024
MAX_IMAGE_OUT = 1024 * 1024  # pictures sent inline (as data URLs) up to this size
IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif"}
FILE_INFO = "application/vnd.microsoft.teams.file.download.info"
GLOBAL_SERVICE_URL = "https://smba.trafficmanager.net/teams/"  # Microsoft's, for proactive messages
ADAPTIVE_CARD = "application/vnd.microsoft.card.adaptive"
CARD_SCHEMA = "http://adaptivecards.io/schemas/adaptive-card.json"
BUTTON_KEY = "antler_command"  # our buttons' Action.Submit data: {"antler_command": "/approve ..."}
_JSON: dict[str, Any] = {"mode": "json", "by_alias": True, "exclude_none": True}
_SEEN = 5000  # activity ids remembered (the bus dedupes beyond, across copies)


class TeamsAdapter(Surface):
    def __init__(self, bus: Bus, config: MSTeamsConfig) -> None:
        self.bus = bus
        self.config = config
        self.http = httpx.AsyncClient(timeout=30)
        self.tokens = ConnectorTokens(self.http, config)
        self.connector = Connector(self.tokens)
        self.replies = ReplyStream(bus, "msteams", self)
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ inbound

    def web_app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_FILE_IN)
        with warnings.catch_warnings():  # the SDK's middleware reads its settings by this plain key
            warnings.simplefilter("ignore", web.NotAppKeyWarning)
            app["agent_configuration"] = auth_configuration(self.config)
        checked = jwt_authorization_decorator(self.receive)  # type: ignore[no-untyped-call]
        app.router.add_post(self.config.webhook_path, checked)
        return app

    async def receive(self, request: web.Request) -> web.Response:
        """One activity the Bot Connector posts (its token already validated by the SDK)."""
        raw = await request.read()
        try:
            activity = Activity.model_validate_json(raw)
            if not activity.type:
                raise ValueError("the activity has no type")
        except (ValidationError, ValueError) as exc:
            reason = _reason(exc)
            await dead_letter_unreadable(self.bus, "msteams", raw, reason)
            return web.json_response({"error": f"not an activity: {reason}"}, status=400)
        if not service_url_matches(request["claims_identity"], activity.service_url):
            log.warning("msteams: refused activity %s: its serviceUrl is not the token's", activity.id)
            return web.json_response({"error": "serviceUrl does not match the token"}, status=401)
        if activity.type == "invoke" and activity.name == files.INVOKE:
            return await self._file_consent(activity)
        if activity.type != "message":
            return web.Response(status=200)  # conversation updates, reactions, invokes: nothing asked
        if activity.id and activity.id in self._seen:
            return web.Response(status=200)  # the Bot Connector's retry of one this copy took
        try:
            inbound = await self._inbound(activity)
        except Exception as exc:  # a message we cannot read: kept with the reason, taken
            await dead_letter_unreadable(
                self.bus, "msteams", raw, f"{type(exc).__name__}: {exc}", activity.id or ""
            )
            return web.Response(status=200)
        if inbound is None:
            return web.Response(status=200)
        await store_inbound(self.bus, "msteams", inbound)  # fails with a 500: sent again
        if activity.id:
            self._seen[activity.id] = None
            while len(self._seen) > _SEEN:
                self._seen.popitem(last=False)
        log.info("msteams: activity %s in %s is on the bus", activity.id, inbound.chat_key())
        self._spawn(self._typing(inbound), f"msteams-typing-{activity.id}")
        return web.Response(status=200)

    async def _inbound(self, activity: Activity) -> InboundMessage | None:
        conversation = activity.conversation
        sender = activity.from_property
        if conversation is None or not conversation.id or sender is None or not activity.id:
            raise ValueError("a message activity without conversation, from or id")
        kind = conversation.conversation_type or "personal"
        private = kind == "personal"
        pressed = _pressed(activity)  # a button of ours: its command, as the presser's message
        mentioned = pressed is not None or activity.is_recipient_mentioned()
        if not private and not mentioned and self.config.require_mention_in_groups:
            return None  # channel chatter the bot was not asked about
        text = pressed or (activity.remove_recipient_mention() if mentioned else (activity.text or ""))
        text = re.sub(r"[ \t]{2,}", " ", text).strip()
        chat_id, _, root = conversation.id.partition(";messageid=")
        topic_id = root if kind == "channel" and root else None
        files = await self._files_in(activity, chat_id)
        if not text and not files:
            return None  # a card or a reaction alone: nothing to answer
        return InboundMessage(
            channel="msteams",
            chat_id=chat_id,
            topic_id=topic_id,
            user_id=str(sender.aad_object_id or sender.id),
            user_name=sender.name,
            message_id=activity.id,
            chat_type="private" if private else "group",
            mentioned=mentioned,
            text=text,
            files=files,
            # Where and as whom to answer (the SDK's conversation reference: service URL,
            # conversation, bot, user, the message answered), carried back by every reply.
            metadata={"reference": activity.get_conversation_reference().model_dump(**_JSON)},
        )

    async def _files_in(self, activity: Activity, chat_id: str) -> list[FileRef]:
        staged: list[FileRef] = []
        for number, attachment in enumerate(activity.attachments or []):
            fetched = await self._fetch(attachment)
            if fetched is None:
                continue
            data, content_type = fetched
            name = attachment.name or f"image_{activity.id}_{number}{_suffix(content_type)}"
            store = await self.bus.files()
            staged.append(
                await stage_chat_file(store, "msteams", chat_id, str(activity.id), name, data, content_type)
            )
        return staged

    async def _fetch(self, attachment: Attachment) -> tuple[bytes, str | None] | None:
        """A shared file (its pre-authorized `downloadUrl`) or an inline picture (read with the
        bot's token); None for what is not a file (the message's HTML, cards)."""
        content = attachment.content if isinstance(attachment.content, dict) else {}
        headers: dict[str, str] = {}
        if attachment.content_type == FILE_INFO and content.get("downloadUrl"):
            url = str(content["downloadUrl"])
        elif (attachment.content_type or "").startswith("image/") and attachment.content_url:
            url = attachment.content_url
            headers["Authorization"] = f"Bearer {await self.tokens.get()}"
        else:
            return None
        response = await self.http.get(url, headers=headers, follow_redirects=True)
        response.raise_for_status()
        if len(response.content) > MAX_FILE_IN:
            log.info(
                "msteams: skipping %s (%d bytes, over the limit)", attachment.name, len(response.content)
            )
            return None
        content_type = response.headers.get("content-type", "").split(";")[0] or None
        if (attachment.content_type or "").startswith("image/") and attachment.content_type != "image/*":
            content_type = attachment.content_type
        return response.content, content_type

    async def _typing(self, inbound: InboundMessage) -> None:
        service_url, conversation, reference = _where(inbound.metadata, inbound.chat_id, inbound.topic_id)
        try:
            await self.connector.send(
                service_url, conversation, _outgoing(Activity(type="typing"), reference)
            )
        except Exception as exc:  # only a courtesy
            log.info("msteams: no typing indicator in %s: %s", conversation, exc)

    def _spawn(self, work: Any, name: str) -> None:
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ outbound (a Surface)

    def split(self, text: str) -> list[str]:
        return split_text(text, LIMIT)

    async def post(self, out: OutboundMessage, text: str) -> dict[str, Any]:
        service_url, conversation, reference = _where(out.metadata, out.chat_id, out.topic_id)
        message = _outgoing(_message(text, out), reference)
        sent = await self.connector.send(service_url, conversation, message)
        ref = {"service_url": service_url, "conversation": conversation, "activity": sent}
        return {**ref, "reference": out.metadata.get("reference")}

    async def edit(self, ref: dict[str, Any], text: str, out: OutboundMessage | None = None) -> None:
        message = _outgoing(_message(text, out), _reference(ref))
        message.id = ref["activity"]
        await self.connector.update(ref["service_url"], ref["conversation"], ref["activity"], message)

    async def finish(self, ref: dict[str, Any], text: str, out: OutboundMessage, shown: str) -> None:
        if out.buttons and out.is_final:  # a streamed message gets its buttons with its final text
            await self.edit(ref, text, out)
        elif text != shown:
            await self.edit(ref, text)

    async def send_file(self, out: OutboundMessage, file: FileRef, data: bytes) -> None:
        """A picture inline; another file, in a personal chat, through a consent card (`files`);
        elsewhere Teams takes no file from a bot, and a note names it."""
        service_url, conversation, reference = _where(out.metadata, out.chat_id, out.topic_id)
        kind = IMAGE_TYPES.get(PurePosixPath(file.name).suffix.lower())
        if kind is not None and len(data) <= MAX_IMAGE_OUT:
            url = f"data:{kind};base64,{base64.b64encode(data).decode()}"
            attachment = Attachment(content_type=kind, content_url=url, name=file.name)
        elif _personal(reference) and file.object_name:
            attachment = files.consent_card(file, len(data))
        else:
            await self.post_more(out, f"(I made {file.name}; Teams does not let me attach it here.)")
            return
        message = _outgoing(Activity(type="message", attachments=[attachment]), reference)
        await self.connector.send(service_url, conversation, message)

    async def _file_consent(self, activity: Activity) -> web.Response:
        """The user accepted (or declined) a file: uploaded, and shown with a file info card."""
        reference = activity.get_conversation_reference()
        try:
            card = await files.upload_accepted(self.bus, self.http, activity.value)
            if card is not None and reference.service_url and reference.conversation:
                message = _outgoing(Activity(type="message", attachments=[card]), reference)
                await self.connector.send(reference.service_url, reference.conversation.id, message)
        except Exception as exc:  # the file is gone (kept for a while only), or OneDrive refused it
            log.warning("msteams: could not send the accepted file: %s", exc)
            reason = f"the file could not be sent ({type(exc).__name__}); ask me to make it again"
            return web.json_response({"error": reason}, status=500)
        return web.json_response({}, status=200)

    async def aclose(self) -> None:
        await cancel_and_wait(*self._tasks)
        await self.connector.aclose()
        await self.http.aclose()


def _personal(reference: ConversationReference | None) -> bool:
    conversation = reference.conversation if reference is not None else None
    return conversation is not None and (conversation.conversation_type or "personal") == "personal"


def _message(text: str, out: OutboundMessage | None = None) -> Activity:
    """A Markdown message; a final reply's buttons (Approve, Deny) under it as an Adaptive Card,
    each sending its command back (`_pressed`)."""
    message = Activity(type="message", text=text, text_format="markdown")
    if out is not None and out.buttons and out.is_final:
        actions = [
            {"type": "Action.Submit", "title": b.label, "data": {BUTTON_KEY: b.command}} for b in out.buttons
        ]
        card = {
            "type": "AdaptiveCard",
            "$schema": CARD_SCHEMA,
            "version": "1.4",
            "body": [],
            "actions": actions,
        }
        message.attachments = [Attachment(content_type=ADAPTIVE_CARD, content=card)]
    return message


def _pressed(activity: Activity) -> str | None:
    """The command of our button the user pressed (Teams sends an Action.Submit's data as the
    message's `value`), or None."""
    value = activity.value
    command = value.get(BUTTON_KEY) if isinstance(value, dict) else None
    return command if isinstance(command, str) and command.startswith("/") else None


def _reference(metadata: dict[str, Any]) -> ConversationReference | None:
    try:
        return ConversationReference.model_validate(metadata["reference"])
    except (KeyError, TypeError, ValidationError):
        return None


def _where(
    metadata: dict[str, Any], chat_id: str, topic_id: str | None
) -> tuple[str, str, ConversationReference | None]:
    """The service URL and conversation id to answer at, and the answered message's reference:
    the message's own, else (a reply that answers no message: a schedule) Microsoft's global
    service URL and the chat."""
    reference = _reference(metadata)
    if reference is not None and reference.service_url and reference.conversation:
        return reference.service_url, reference.conversation.id, reference
    return GLOBAL_SERVICE_URL, chat_id + (f";messageid={topic_id}" if topic_id else ""), None


def _outgoing(activity: Activity, reference: ConversationReference | None) -> Activity:
    """`activity` from the bot to the user of `reference` (as the SDK addresses its answers)."""
    return activity if reference is None else activity.apply_conversation_reference(reference)


def _suffix(content_type: str | None) -> str:
    return next((s for s, t in IMAGE_TYPES.items() if t == content_type), "")


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "the body"
        return f"{where}: {first.get('msg')}"
    return str(exc)


async def run(bus: Bus, config: AppConfig) -> None:
    """The Teams adapter component: the messaging endpoint in, replies out, until cancelled. One copy
    serves at a time (the lease `adapter.msteams`); the others stand by and take the port over."""
    settings = config.channels.msteams
    missing = [name for name in ("app_id", "app_password") if not settings.resolved(name)]
    if missing:
        raise Misconfigured(f"channels.msteams: {', '.join(missing)} must be set")
    if settings.signing_keys_url:
        await use_signing_keys(settings.signing_keys_url)
    await standby.serve_while_active(
        bus, "msteams", config.bus.lease_seconds, lambda lost: _serve(bus, settings, lost)
    )


async def _serve(bus: Bus, settings: MSTeamsConfig, lost: asyncio.Event) -> None:
    adapter = TeamsAdapter(bus, settings)
    runner = web.AppRunner(adapter.web_app(), access_log=None, handle_signals=False)
    work: list[asyncio.Task[None]] = []
    try:
        await adapter.tokens.get()  # refused credentials: Misconfigured; Microsoft away: Unreachable
        await runner.setup()
        site = web.TCPSite(runner, settings.webhook_listen, settings.webhook_port)
        try:
            await site.start()
        except OSError as exc:
            raise Misconfigured(
                f"channels.msteams: cannot listen on {settings.webhook_listen}:{settings.webhook_port}: {exc}"
            ) from exc
        log.info(
            "msteams adapter: messaging endpoint on %s:%d%s",
            settings.webhook_listen,
            settings.webhook_port,
            settings.webhook_path,
        )
        work = [
            asyncio.create_task(
                run_consumers(reply_consumer(bus, "msteams", adapter.replies.deliver)), name="msteams-replies"
            ),
            asyncio.create_task(standby.watch(lost, "msteams"), name="msteams-lease-watch"),
        ]
        done, _ = await asyncio.wait(work, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()
    finally:
        await cancel_and_wait(*work)
        await asyncio.shield(runner.cleanup())
        await adapter.aclose()
